"""Orchestration: dataset -> speed points -> one covariate / random-effect model -> cross-validation ->
conformal intervals -> coefficients document (schema 2).

Decode and prefill are one fit (calibration.hierarchy): the prefill memory term uses each device's decode
bw_eff and batched decode the prefill compute roof, as the estimator borrows them.  Cross-validation refits
the whole model in every fold (noise scales, shrinkage scales and bw_eff included) under leave-one-device-out,
leave-one-model-out and leave-one-family-out (calibration.validate).  End-to-end latency records (llama-bench
-pg, vLLM offline batches) are predicted by the estimator with each scheme's fold coefficients
(calibration.latency); they are never fitted.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from calibration import features as feat
from calibration import latency
from calibration.dataset import Dataset, Rejection
from calibration.features import SpeedPoint
from calibration.fit import EFF, RATE, FitState, fit_model
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
SCHEMES = ("lodo", "lomo", "lofo")
PHASES = ("decode", "prefill")
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

    def phase_held(self, scheme: str, phase: str) -> list[HeldOut]:
        return [h for h in self.held.get(scheme, []) if h.point.phase == phase]


@dataclass
class Calibration:
    dataset: Dataset
    points: list[SpeedPoint]
    rejected: list[Rejection]  # dataset rejections + feature failures
    speed: SpeedFit | None
    memory: dict = field(default_factory=dict)
    memory_notes: list[str] = field(default_factory=list)
    latency: list[latency.LatencyPoint] = field(default_factory=list)
    latency_held: dict[str, list[latency.LatencyResult]] = field(default_factory=dict)
    latency_rejected: list[Rejection] = field(default_factory=list)  # e2e records that could not be predicted


def fit_speed(points: list[SpeedPoint], cv: bool = True, schemes=SCHEMES, latency_points=()) -> SpeedFit:
    """Fit the model on every point; with ``cv`` the held-out predictions of each scheme (fold fits kept
    for the latency predictions)."""
    state = fit_model(points)
    sf = SpeedFit(points, state)
    if cv:
        for s in schemes:
            sf.held[s], sf.states[s] = holdout(points, state, s, keep_states=bool(latency_points))
    return sf


def calibrate(
    ds: Dataset,
    resolver: feat.Resolver | None = None,
    cv: bool = True,
    memory: bool = True,
    lofo: bool = True,
    schemes=None,
    e2e: bool = True,
) -> Calibration:
    """Speed fit (+ CV) and, when ``memory``, the memory section.  ``schemes`` defaults to lodo, lomo and
    (when ``lofo``) lofo.  ``e2e``: predict the end-to-end latency records."""
    resolver = resolver or feat.Resolver()
    points, rej = feat.speed_points(ds, resolver)
    lat, lat_rej = latency.latency_points(ds, resolver) if e2e else ([], [])
    schemes = schemes or tuple(s for s in SCHEMES if lofo or s != "lofo")
    sf = fit_speed(points, cv, schemes, lat) if points else None
    cal = Calibration(ds, points, list(ds.rejected) + rej, sf, latency=lat, latency_rejected=lat_rej)
    if sf is not None and lat:
        cal.latency_held = latency.predict_schemes(lat, sf)
    if memory:
        from calibration import memory_fit

        cal.memory, cal.memory_notes = memory_fit.fit_memory(ds, resolver)
    return cal


# ------------------------------------------------------------------------------------------ document
def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else float(f"{x:.{nd}g}")


def counts(points) -> tuple[dict, dict]:
    """(families, devices) with their points per phase, as the model section records them; ``units``: the
    same per engine and backend ("llama.cpp/CUDA"), which the estimator's basis reads (a device measured on
    CUDA is not a measured device for Vulkan or for vLLM: ``coefficients.model_basis``)."""
    fams: dict[str, dict] = {}
    devs: dict[str, dict] = {}
    for p in points:
        unit = unit_name(p.engine, p.backend)
        f = fams.setdefault(
            p.family, {"decode": 0, "prefill": 0, "devices": set(), "engines": set(), "units": {}}
        )
        f[p.phase] += 1
        f["devices"].add(p.device)
        f["engines"].add(p.engine)
        f["units"].setdefault(unit, {"decode": 0, "prefill": 0})[p.phase] += 1
        d = devs.setdefault(p.device, {"family": p.family, "decode": 0, "prefill": 0, "units": {}})
        d[p.phase] += 1
        d["units"].setdefault(unit, {"decode": 0, "prefill": 0})[p.phase] += 1
    for f in fams.values():
        f["devices"], f["engines"] = sorted(f["devices"]), sorted(f["engines"])
    return fams, devs


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


def interval_block(sf: SpeedFit) -> dict:
    """Per phase and basis: the group-weighted conformal interval (calibration.validate.interval), its
    residuals and its out-of-sample coverage under each scheme."""
    out: dict = {}
    for phase in PHASES:
        out[phase] = {}
        for basis, scheme in BASIS_SCHEME.items():
            res = basis_residuals(sf.held, phase, basis)
            groups = [FOLDS[scheme](h.point) for h in res]
            if len(res) < MIN_RESIDUALS or len(set(groups)) < MIN_GROUPS:
                out[phase][basis] = {
                    **DEFAULT_INTERVAL,
                    "n_residuals": len(res),
                    "n_groups": len(set(groups)),
                    "scheme": "",
                    "note": "too few held-out residuals: default wide interval",
                }
                continue
            lo, hi = interval([h.log_ratio for h in res], groups=groups)
            out[phase][basis] = {
                "log_lo": _r(lo, 4),
                "log_hi": _r(hi, 4),
                "n_residuals": len(res),
                "n_groups": len(set(groups)),
                "scheme": scheme,
                "coverage": {
                    s: _cov(coverage(_of_basis(sf.phase_held(s, phase), basis), sf.held, FOLDS[s]))
                    for s in SCHEMES
                    if s in sf.held
                },
            }
    return out


def coverage_block(sf: SpeedFit) -> dict:
    """Out-of-sample coverage of the nominal 90 % intervals per phase and scheme (all bases together)."""
    return {
        phase: {
            s: _cov(coverage(sf.phase_held(s, phase), sf.held, FOLDS[s])) for s in SCHEMES if s in sf.held
        }
        for phase in PHASES
    }


def cv_block(sf: SpeedFit) -> dict:
    """Per phase: n, median and p90 APE of each scheme, overall and by basis; and the gate's."""
    out: dict = {}
    for phase in PHASES:
        out[phase] = {}
        for s in SCHEMES:
            hs = sf.phase_held(s, phase)
            if not hs:
                continue
            med, p90 = ape_stats([h.ape for h in hs])
            entry = {"n": len(hs), "median_ape": _r(med, 4), "p90_ape": _r(p90, 4), "by_basis": {}}
            for basis in BASIS_SCHEME:
                bh = [h for h in hs if h.basis == basis]
                if bh:
                    m, q = ape_stats([h.ape for h in bh])
                    entry["by_basis"][basis] = {"n": len(bh), "median_ape": _r(m, 4), "p90_ape": _r(q, 4)}
            out[phase][s] = entry
        gate = [h for h in sf.gate() if h.point.phase == phase]
        if gate:
            med, p90 = ape_stats([h.ape for h in gate])
            out[phase]["gate"] = {"n": len(gate), "median_ape": _r(med, 4), "p90_ape": _r(p90, 4)}
    return out


def family_cv(sf: SpeedFit) -> list[dict]:
    """Per (family, engine, backend, phase): points, devices and the error of each scheme."""
    rows: dict[tuple, dict] = {}
    for s, hs in sf.held.items():
        for h in hs:
            p = h.point
            k = (p.family, p.engine, p.backend, p.phase)
            rows.setdefault(k, defaultdict(list))[s].append(h.ape)
    out = []
    for k in sorted(rows):
        pts = [p for p in sf.points if (p.family, p.engine, p.backend, p.phase) == k]
        entry = {"family": k[0], "engine": k[1], "backend": k[2], "phase": k[3], "n_points": len(pts),
                 "devices": sorted({p.device for p in pts}), "cv": {}}  # fmt: skip
        for s, apes in rows[k].items():
            med, p90 = ape_stats(apes)
            entry["cv"][s] = {"median_ape": _r(med, 4), "p90_ape": _r(p90, 4)}
        out.append(entry)
    return out


def coefficients_document(cal: Calibration) -> dict:
    """The results/coefficients.json document (schema 2, estimator/physics/coefficients.py)."""
    sf = cal.speed
    model = None
    if sf is not None:
        extra = {"coverage": coverage_block(sf)} if sf.held else {}
        model = model_section(sf.state, sf.points, interval_block(sf) if sf.held else {},
                              cv_block(sf) if sf.held else {})  # fmt: skip
        model.update(extra)
        if cal.latency_held:
            model["e2e"] = latency.summary(cal.latency_held)
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
        "families": family_cv(sf) if sf is not None and sf.held else [],
        "uncalibrated": _uncalibrated(cal, fitted),
        "memory": cal.memory,
        "memory_notes": cal.memory_notes,
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
