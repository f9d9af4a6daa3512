"""Orchestration: dataset -> speed points -> one covariate / random-effect model -> cross-validation ->
conformal intervals -> coefficients document (schema 2).

Decode and prefill are one fit (calibration.hierarchy): the prefill memory term uses each device's decode
bw_eff and batched decode the prefill compute roof, as the estimator borrows them.  Serving (TTFT / TPOT at
concurrency, calibration.serving) is a second fit of the same kind: its own design over the serving points
and its own parameters, the serving time model plugged into the same optimiser.  Cross-validation refits the
whole model in every fold (noise scales, shrinkage scales and bw_eff included) under leave-one-device-out,
leave-one-model-out and leave-one-family-out (calibration.validate); errors, intervals and coverage are per
*stratum* (decode, prefill, serving.ttft, serving.tpot).  Both fits go into the one ``model`` section of the
document.  End-to-end latency records (llama-bench -pg, vLLM offline batches) are predicted by the estimator
with each scheme's fold coefficients (calibration.latency); only a -b 1 run of one device without other decode
evidence is fitted too, as the decode steps it is (calibration.features.one_token_run_point).
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

from calibration import features as feat
from calibration import latency, maturity, serving
from calibration.dataset import Dataset, Rejection
from calibration.features import SpeedPoint
from calibration.fit import EFF, RATE, SPEED, FitState, TimeModel, fit_model
from calibration.validate import (
    BASIS_SCHEME,
    FOLDS,
    MIN_GROUPS,
    MIN_RESIDUALS,
    HeldOut,
    ape_stats,
    basis_residuals,
    coverage,
    gate_holdout,
    holdout,
    interval,
)
from estimator.physics.coefficients import unit_name

FITBENCH_VERSION = "0.1.0"
OWN_RUNS = "fitbench runs"  # the by-source name of the records fitbench measured itself
SCHEMES = ("lodo", "lomo", "lofo")
DEFAULT_INTERVAL = {"log_lo": -0.7, "log_hi": 0.5}


@dataclass
class SpeedFit:
    """The fitted model, its points and the held-out predictions of each scheme."""

    points: list[SpeedPoint]
    state: FitState
    held: dict[str, list[HeldOut]] = field(default_factory=dict)
    states: dict[str, dict[str, FitState]] = field(default_factory=dict)  # scheme -> fold -> fit

    def gate(self) -> list[HeldOut]:
        """Per point: lodo when the family has >= 2 devices, else lomo (>= 2 models), else lodo."""
        return gate_holdout(self.points, self.held)

    @property
    def strata(self) -> tuple[str, ...]:
        """The strata of the fitted model (decode, prefill; or serving.ttft, serving.tpot)."""
        return self.state.model.strata

    def phase_held(self, scheme: str, stratum: str) -> list[HeldOut]:
        """The held-out predictions of one scheme in one stratum (a phase, or serving.<metric>)."""
        return [h for h in self.held.get(scheme, []) if h.point.stratum == stratum]


@dataclass
class Calibration:
    dataset: Dataset
    points: list[SpeedPoint]
    rejected: list[Rejection]  # dataset rejections + feature failures
    speed: SpeedFit | None
    memory: dict = field(default_factory=dict)
    memory_notes: list[str] = field(default_factory=list)
    # {engine: {target: band}}: how the engine's own buffers spread around the fitted estimate
    # (calibration.memory_fit.memory_bands)
    memory_bands: dict = field(default_factory=dict)
    latency: list[latency.LatencyPoint] = field(default_factory=list)
    latency_held: dict[str, list[latency.LatencyResult]] = field(default_factory=dict)
    latency_rejected: list[Rejection] = field(default_factory=list)  # e2e records that could not be predicted
    serving: SpeedFit | None = None  # the serving fit (calibration.serving), None without serving points
    serving_rejected: list[Rejection] = field(default_factory=list)  # serving records left out, with why


def fit_speed(
    points: list[SpeedPoint], cv: bool = True, schemes=SCHEMES, latency_points=(), model: TimeModel = SPEED
) -> SpeedFit:
    """Fit ``model`` (decode and prefill by default; calibration.serving.SERVING) on every point; with
    ``cv`` the held-out predictions of each scheme (fold fits kept for the latency predictions)."""
    state = fit_model(points, model=model)
    sf = SpeedFit(points, state)
    if cv:
        for s in schemes:
            sf.held[s], sf.states[s] = holdout(points, state, s, keep_states=bool(latency_points))
        targets = maturity.new_backend_targets(points)
        if targets:  # leave-one-backend-out of the less mature backends (calibration.maturity)
            sf.held[maturity.SCHEME], _ = holdout(points, state, maturity.SCHEME, subset=targets)
    return sf


def calibrate(
    ds: Dataset,
    resolver: feat.Resolver | None = None,
    cv: bool = True,
    memory: bool = True,
    lofo: bool = True,
    schemes=None,
    e2e: bool = True,
    serve: bool = True,
) -> Calibration:
    """Speed fit (+ CV), when ``serve`` the serving fit (+ CV) and, when ``memory``, the memory section.
    ``schemes`` defaults to lodo, lomo and (when ``lofo``) lofo.  ``e2e``: predict the end-to-end latency
    records."""
    resolver = resolver or feat.Resolver()
    points, rej = feat.speed_points(ds, resolver)
    lat, lat_rej = latency.latency_points(ds, resolver) if e2e else ([], [])
    fitted = {p.where for p in points if p.extra.get("one_token_run")}
    lat = [replace(lp, fitted=lp.where in fitted) for lp in lat]
    schemes = schemes or tuple(s for s in SCHEMES if lofo or s != "lofo")
    sf = fit_speed(points, cv, schemes, lat) if points else None
    cal = Calibration(ds, points, list(ds.rejected) + rej, sf, latency=lat, latency_rejected=lat_rej)
    if sf is not None and lat:
        cal.latency_held = latency.predict_schemes(lat, sf)
    if serve:
        srv_points, cal.serving_rejected = serving.serving_points(ds, resolver)
        if srv_points:
            cal.serving = fit_speed(srv_points, cv, schemes, model=serving.SERVING)
    if memory:
        from calibration import memory_fit

        cal.memory, cal.memory_notes = memory_fit.fit_memory(ds, resolver)
        cal.memory_bands = memory_fit.memory_bands(ds, cal.memory, resolver)
    return cal


# ------------------------------------------------------------------------------------------ document
def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else float(f"{x:.{nd}g}")


def counts(points) -> tuple[dict, dict]:
    """(families, devices) with their points per phase (decode, prefill and, with serving points, serving),
    as the model section records them; ``units``: the same per engine and backend ("llama.cpp/CUDA"), which
    the estimator's basis reads (a device measured on CUDA is not a measured device for Vulkan or for vLLM:
    ``coefficients.model_basis``)."""
    fams: dict[str, dict] = {}
    devs: dict[str, dict] = {}

    def add(entry: dict, phase: str) -> None:
        entry[phase] = entry.get(phase, 0) + 1

    for p in points:
        unit = unit_name(p.engine, p.backend)
        f = fams.setdefault(
            p.family, {"decode": 0, "prefill": 0, "devices": set(), "engines": set(), "units": {}}
        )
        add(f, p.phase)
        f["devices"].add(p.device)
        f["engines"].add(p.engine)
        add(f["units"].setdefault(unit, {"decode": 0, "prefill": 0}), p.phase)
        d = devs.setdefault(p.device, {"family": p.family, "decode": 0, "prefill": 0, "units": {}})
        add(d, p.phase)
        add(d["units"].setdefault(unit, {"decode": 0, "prefill": 0}), p.phase)
    for f in fams.values():
        f["devices"], f["engines"] = sorted(f["devices"]), sorted(f["engines"])
    for dev, basis in detected_bandwidth_basis(points).items():
        devs[dev]["bandwidth_gbs"] = basis
    for dev, clock in detected_clock_basis(points).items():
        devs[dev]["cpu_clock_ghz"] = clock
    return fams, devs


def detected_bandwidth_basis(points) -> dict[str, float]:
    """{device: GB/s} for every host outside the catalog (a detected spec: its bandwidth is the probe its
    records carried, not a datasheet figure): the median of its points' probes, the bandwidth its fitted
    effects are relative to.  The estimator holds a fresh probe of the same host to it
    (``coefficients.bandwidth_basis``: a probe measured another way or at another moment must not move the
    calibrated speed)."""
    return _detected_median(points, lambda hw: hw.bandwidth_gbs)


def detected_clock_basis(points) -> dict[str, float]:
    """{device: GHz} for every CPU host outside the catalog: the median clock its points' ``cpu_size``
    covariate was evaluated at (the clock its records state; ``CPU_DEFAULT_CLOCK_GHZ`` for records that state
    none, as the covariate takes it).  The estimator evaluates the same host's covariates at it
    (``coefficients.clock_basis``): a clock found another way (measured on a virtual machine since 2026-12-05,
    ``estimator.catalog.clockprobe``) must not move the calibrated speed."""
    from estimator.physics.covariates import CPU_DEFAULT_CLOCK_GHZ

    def clock(hw):
        return (hw.cpu_clock_ghz or CPU_DEFAULT_CLOCK_GHZ) if hw.kind == "cpu" and hw.cpu_cores else None

    return _detected_median(points, clock)


def _detected_median(points, value) -> dict[str, float]:
    """{device: median of ``value(hardware)``} over the points of hosts outside the catalog (detected specs),
    leaving out points whose value is None or 0."""
    found: dict[str, list[float]] = {}
    for p in points:
        x = value(p.hardware) if str(p.hardware.id).startswith("detected") else None
        if x:
            found.setdefault(p.device, []).append(float(x))
    return {dev: _r(float(statistics.median(v)), 4) for dev, v in found.items()}


def model_section(state: FitState, points, intervals: dict | None = None, cv: dict | None = None) -> dict:
    """The ``model`` section of a schema-2 document for a fit (also what a fold's coefficients look like to
    the estimator: calibration.latency predicts with it).  Effects of groups without data are left out
    (they are 0)."""
    d = state.design
    fams, devs = counts(points)
    params = []
    for j, p in enumerate(d.params):
        blk = d.block[j]
        entry = {"key": p.key, "beta": {}, "family": {}, "device": {}, "tau": {}}
        for i, (kind, group) in enumerate(zip(d.col_kind[blk], d.col_group[blk], strict=True)):
            v = float(state.z[blk][i])
            if kind == "cov":
                entry["beta"][group] = _r(v)
            elif kind == "family" and group in fams:
                entry["family"][group] = _r(v)
            elif kind == "device" and group in devs:
                entry["device"][group] = _r(v)
        entry["tau"] = {e: _r(state.scales.tau[(j, e)], 4) for e in p.effects}
        params.append(entry)
    return {
        "params": params,
        "sigma": {k: _r(v, 4) for k, v in state.scales.sigma.items()},
        "families": fams,
        "devices": devs,
        "intervals": intervals or {},
        "cv": cv or {},
        "converged": state.converged,
    }


def _cov(c) -> dict | None:
    """A validate.Coverage as the document writes it."""
    if c is None:
        return None
    return {
        "groups": _r(c.groups, 3),
        "points": _r(c.points, 3),
        "n_groups": c.n_groups,
        "n_points": c.n_points,
    }


def _of_basis(held: list[HeldOut], basis: str) -> list[HeldOut]:
    return [h for h in held if h.basis == basis]


def _kept(held: list[HeldOut], keep) -> list[HeldOut]:
    return held if keep is None else [h for h in held if keep(h.point)]


def _default_interval(stratum: str) -> dict:
    """The interval of a stratum with too few held-out residuals: DEFAULT_INTERVAL, for a serving metric the
    shipped prior's (estimator/data/prior_coefficients.json, of the time)."""
    stratum = serving.SUBSTRATA.get(stratum, (stratum, None))[0]  # a sub-stratum: its stratum's default
    if stratum in serving.STRATA:
        from estimator.physics.coefficients import load_prior

        metric = stratum.split(".", 1)[1]
        for e in load_prior()["pooled"]:
            iv = (e.get("intervals") or {}).get(metric) if e["phase"] == serving.PHASE else None
            if iv:
                return {"log_lo": iv["log_lo"], "log_hi": iv["log_hi"]}
    return dict(DEFAULT_INTERVAL)


def interval_block(sf: SpeedFit) -> dict:
    """Per stratum and basis: the group-weighted conformal interval (calibration.validate.interval), its
    residuals and its out-of-sample coverage under each scheme.

    The interval is of ln(measured / predicted) of what the estimator reports: tokens/s for decode and
    prefill (= the held-out log ratio ln(t_pred / t_meas)), the time for the serving metrics TTFT / TPOT
    (= -log ratio: the interval is mirrored).  Sub-strata (``serving.SUBSTRATA``) take the residuals of their
    stratum that their predicate keeps: ``serving.ttft_lone``, the TTFT of a lone request."""
    out: dict = {}
    subs = serving.SUBSTRATA if set(sf.strata) >= {s for s, _ in serving.SUBSTRATA.values()} else {}
    for phase in (*sf.strata, *subs):
        parent, keep = subs.get(phase, (phase, None))
        out[phase] = {}
        for basis, scheme in BASIS_SCHEME.items():
            res = _kept(basis_residuals(sf.held, parent, basis), keep)
            groups = [FOLDS[scheme](h.point) for h in res]
            if len(res) < MIN_RESIDUALS or len(set(groups)) < MIN_GROUPS:
                out[phase][basis] = {
                    **_default_interval(phase),
                    "n_residuals": len(res),
                    "n_groups": len(set(groups)),
                    "scheme": "",
                    "note": "too few held-out residuals: default wide interval",
                }
                continue
            lo, hi = interval([h.log_ratio for h in res], groups=groups)
            if parent in serving.STRATA:  # of the time: ln(t_meas / t_pred) = -log ratio
                lo, hi = -hi, -lo
            out[phase][basis] = {
                "log_lo": _r(lo, 4),
                "log_hi": _r(hi, 4),
                "n_residuals": len(res),
                "n_groups": len(set(groups)),
                "scheme": scheme,
                "coverage": {
                    s: _cov(coverage(_kept(_of_basis(sf.phase_held(s, parent), basis), keep), sf.held,
                                     FOLDS[s], keep))  # fmt: skip
                    for s in SCHEMES
                    if s in sf.held
                },
            }
    return out


def coverage_block(sf: SpeedFit) -> dict:
    """Out-of-sample coverage of the nominal 90 % intervals per stratum and scheme (all bases together)."""
    return {
        phase: {
            s: _cov(coverage(sf.phase_held(s, phase), sf.held, FOLDS[s])) for s in SCHEMES if s in sf.held
        }
        for phase in sf.strata
    }


def cv_block(sf: SpeedFit) -> dict:
    """Per stratum: n, median and p90 APE of each scheme, overall, by basis, by origin and by source
    (``_by_source``); and the gate's, overall and by origin.  ``by_origin``: the points of fitbench's own
    runs ("measured") apart from the imported published ones ("imported"), which are what an independent
    check of published devices compares with (a detected host is a family of its own: held out, it is
    predicted from covariates alone)."""
    out: dict = {}
    for phase in sf.strata:
        out[phase] = {}
        for s in SCHEMES:
            hs = sf.phase_held(s, phase)
            if not hs:
                continue
            entry = _ape_entry(hs) | {"by_basis": {}, "by_origin": _by_origin(hs, sf.held, FOLDS[s]),
                                      "by_source": _by_source(hs)}  # fmt: skip
            for basis in BASIS_SCHEME:
                bh = [h for h in hs if h.basis == basis]
                if bh:
                    entry["by_basis"][basis] = _ape_entry(bh)
            out[phase][s] = entry
        gate = [h for h in sf.gate() if h.point.stratum == phase]
        if gate:
            out[phase]["gate"] = _ape_entry(gate) | {"by_origin": _by_origin(gate)}
    return out


def _ape_entry(held: list[HeldOut]) -> dict:
    """{n, median_ape, p90_ape} of held-out predictions (APE as fractions)."""
    med, p90 = ape_stats([h.ape for h in held])
    return {"n": len(held), "median_ape": _r(med, 4), "p90_ape": _r(p90, 4)}


def _grouped(held: list[HeldOut], key) -> dict[str, list[HeldOut]]:
    """Held-out predictions by ``key(point)`` ("unknown" where it is empty), in key order."""
    groups: dict[str, list[HeldOut]] = defaultdict(list)
    for h in held:
        groups[key(h.point) or "unknown"].append(h)
    return dict(sorted(groups.items()))


def _by_origin(held: list[HeldOut], calib: dict | None = None, group=None) -> dict:
    """``_ape_entry`` per record origin (``SpeedPoint.origin``); with ``calib`` and the scheme's fold key
    ``group``, also the out-of-sample coverage of that origin's points (``coverage``: each judged by the
    interval built from the other groups' residuals, both origins')."""
    out = {}
    for o, hs in _grouped(held, lambda p: p.origin).items():
        out[o] = _ape_entry(hs)
        if calib is not None and group is not None:
            out[o]["coverage"] = _cov(coverage(hs, calib, group))
    return out


def _by_source(held: list[HeldOut]) -> dict:
    """``_ape_entry`` per published source (``SpeedPoint.source``; fitbench's own runs as OWN_RUNS), with the
    source's devices and its median ln(predicted / measured time) (> 0: predicted too slow): a source whose
    rows sit on one side of the predictions at a small error spread (a build, a setting or a method of its
    own) is a bias an independent check of that source's held-back rows would see as well."""
    groups = _grouped(held, lambda p: p.source or (OWN_RUNS if p.origin == "measured" else ""))
    return {
        s: _ape_entry(hs) | {"devices": len({h.point.device for h in hs}),
                             "median_log_ratio": _r(statistics.median(h.log_ratio for h in hs), 4)}
        for s, hs in groups.items()
    }  # fmt: skip


def family_cv(sf: SpeedFit) -> list[dict]:
    """Per (family, engine, backend, stratum): points, devices and the error of each scheme (``phase``: the
    stratum, serving.ttft / serving.tpot for the serving metrics)."""
    rows: dict[tuple, dict] = {}
    for s, hs in sf.held.items():
        for h in hs:
            p = h.point
            k = (p.family, p.engine, p.backend, p.stratum)
            rows.setdefault(k, defaultdict(list))[s].append(h.ape)
    out = []
    for k in sorted(rows):
        pts = [p for p in sf.points if (p.family, p.engine, p.backend, p.stratum) == k]
        entry = {"family": k[0], "engine": k[1], "backend": k[2], "phase": k[3], "n_points": len(pts),
                 "devices": sorted({p.device for p in pts}), "cv": {}}  # fmt: skip
        for s, apes in rows[k].items():
            med, p90 = ape_stats(apes)
            entry["cv"][s] = {"median_ape": _r(med, 4), "p90_ape": _r(p90, 4)}
        out.append(entry)
    return out


def fit_section(sf: SpeedFit) -> dict:
    """The model section of one fit with its cross-validation (intervals, cv, coverage)."""
    model = model_section(sf.state, sf.points, interval_block(sf) if sf.held else {},
                          cv_block(sf) if sf.held else {})  # fmt: skip
    if sf.held:
        model["coverage"] = coverage_block(sf)
    if sf.held.get(maturity.SCHEME):
        model["maturity"] = maturity.widening(sf.held[maturity.SCHEME], model["intervals"])
    return model


def join_sections(speed: dict, other: dict, points) -> dict:
    """``other`` (the serving fit's section) joined into ``speed`` (the decode / prefill fit's): parameters
    appended, noise scales, intervals, cv and coverage by stratum, point counts per family / device / unit
    of all ``points``; ``converged`` when both fits converged, ``fits`` says which."""
    out = dict(speed)
    out["params"] = speed["params"] + other["params"]
    for k in ("sigma", "intervals", "cv", "coverage"):
        out[k] = {**speed.get(k, {}), **other.get(k, {})}
    out["families"], out["devices"] = counts(points)
    out["converged"] = bool(speed["converged"] and other["converged"])
    out["fits"] = {"decode+prefill": {"converged": speed["converged"]},
                   "serving": {"converged": other["converged"]}}  # fmt: skip
    return out


def coefficients_document(cal: Calibration) -> dict:
    """The results/coefficients.json document (schema 2, estimator/physics/coefficients.py): the speed fit's
    model section with the serving fit's joined in (``join_sections``)."""
    sf, srv = cal.speed, cal.serving
    model = None
    if sf is not None:
        model = fit_section(sf)
        if cal.latency_held:
            model["e2e"] = latency.summary(cal.latency_held)
    if srv is not None:
        other = fit_section(srv)
        model = other if model is None else join_sections(model, other, sf.points + srv.points)
    fitted = {(p.family, p.engine, p.backend, p.phase) for p in cal.points}
    return {
        "schema_version": 2,
        "fitbench_version": FITBENCH_VERSION,
        "created_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "input_hash": cal.dataset.input_hash,
        "quality_filter": list(cal.dataset.qualities),
        "n_records": len(cal.dataset.records),
        "n_rejected": len(cal.rejected),
        "model": model or {"params": []},
        "families": [
            *(family_cv(sf) if sf is not None and sf.held else []),
            *(family_cv(srv) if srv is not None and srv.held else []),
        ],
        "uncalibrated": _uncalibrated(cal, fitted),
        "memory": cal.memory,
        "memory_notes": cal.memory_notes,
        "memory_bands": cal.memory_bands,
        "serving": serving_summary(cal),
    }


def serving_summary(cal: Calibration) -> dict:
    """The serving fit at a glance: points per metric, records left out by reason, and the held-out error
    per scheme, engine and metric (calibration.serving.cv_summary; the gate's under "gate")."""
    srv = cal.serving
    reasons: dict[str, int] = defaultdict(int)
    for r in cal.serving_rejected:
        reasons[serving.rejection_reason(r)] += 1
    held = {**srv.held, "gate": srv.gate()} if srv is not None and srv.held else {}
    cv = {s: {k: {"n": v["n"], "median_ape": _r(v["median"], 4), "p90_ape": _r(v["p90"], 4)}
              for k, v in rows.items()}
          for s, rows in serving.cv_summary(held).items()}  # fmt: skip
    return {
        "n_points": dict(sorted(Counter(p.extra["metric"] for p in srv.points).items())) if srv else {},
        "n_left_out": len(cal.serving_rejected),
        "left_out": dict(sorted(reasons.items(), key=lambda x: -x[1])),
        "cv": cv,
    }


def _uncalibrated(cal: Calibration, fitted: set) -> list[dict]:
    """Families seen in the records (usable or rejected) with no fitted point, per engine/backend/phase:
    the estimator predicts them from covariates (basis pooled)."""
    seen: dict[tuple, str] = {}
    for lr in cal.dataset.records:
        r = lr.record
        for phase, v in (("decode", r.decode_tok_s), ("prefill", r.prefill_tok_s)):
            if v is not None:
                fam = feat.point_family(r)
                seen.setdefault((fam, r.engine, r.backend, phase), "no usable points")
    out = []
    for k, why in sorted(seen.items()):
        if k not in fitted and k[0]:
            out.append(
                {
                    "family": k[0],
                    "engine": k[1],
                    "backend": k[2],
                    "phase": k[3],
                    "reason": why + " (features failed; see rejections)",
                }
            )
    return out


__all__ = ["Calibration", "SpeedFit", "calibrate", "coefficients_document", "fit_speed", "EFF", "RATE"]
