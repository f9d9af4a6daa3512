"""Orchestration: dataset -> speed points -> hierarchical fits -> cross-validation -> coefficients document.

Order: decode is fitted first; each prefill point then takes its family's decode ``bw_eff`` (the
estimator's prefill memory term borrows it the same way, estimator.physics.speed.merged_params) as a fixed
parameter.  Prefill of devices without datasheet TFLOPS (CPUs) fits ``flops_abs_tflops`` with
``flops_eff`` fixed at 1.
Cross-validation note: the prefill points' fixed ``bw_eff`` comes from the full-data decode fit (not
refitted per fold); it only enters the small per-pass weight-streaming term.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from calibration import features as feat
from calibration.dataset import Dataset, Rejection
from calibration.fit import EFF, RATE, TIME, PhaseModel, Prior, SpeedPoint
from calibration.hierarchy import Hierarchy, Key, family_key, fit_hierarchy, global_key, pool_key
from calibration.validate import (
    MIN_RESIDUALS,
    HeldOut,
    ape_stats,
    holdout,
    interval,
    nested_coverage,
)

PRIOR_TAU_EFF = 1.0  # log units: the shipped prior is a weak anchor for the global level
PRIOR_TAU_TIME_REL = 3.0
PRIOR_TIME_FLOOR_S = 1e-4
# Additive non-time parameters: prior scale floor in their own unit (gemm_k_half: elements, one model width).
PRIOR_LINEAR_FLOOR = {"gemm_k_half": 4096.0}
FITBENCH_VERSION = "0.1.0"


@dataclass
class PhaseFit:
    phase: str
    variant: str  # "eff" | "abs" (prefill of devices without datasheet TFLOPS)
    points: list[SpeedPoint]
    hierarchy: Hierarchy
    lodo: list[HeldOut] = field(default_factory=list)
    lomo: list[HeldOut] = field(default_factory=list)
    lofo: list[HeldOut] = field(default_factory=list)

    def gate(self) -> list[HeldOut]:
        """Per point: lodo when the family has >= 2 devices, else lomo (>= 2 models), else lodo (pool)."""
        devs, mods = _per_family(self.points)
        lodo = {id(h.point): h for h in self.lodo}
        lomo = {id(h.point): h for h in self.lomo}
        out = []
        for p in self.points:
            fk = family_key(p)
            if len(devs[fk]) < 2 and len(mods[fk]) >= 2 and id(p) in lomo:
                h = lomo[id(p)]
                out.append(HeldOut(p, h.predicted_s, h.level, "lomo (single device)"))
            elif id(p) in lodo:
                out.append(lodo[id(p)])
        return out


@dataclass
class Calibration:
    dataset: Dataset
    points: list[SpeedPoint]
    rejected: list[Rejection]  # dataset rejections + feature failures
    fits: list[PhaseFit]
    memory: dict = field(default_factory=dict)
    memory_notes: list[str] = field(default_factory=list)
    serving: object = None  # calibration.serving.ServingFit (the serving phase)


def _per_family(points):
    devs: dict[Key, set[str]] = defaultdict(set)
    mods: dict[Key, set[str]] = defaultdict(set)
    for p in points:
        devs[family_key(p)].add(p.device)
        mods[family_key(p)].add(p.model)
    return devs, mods


def make_prior_for(model: PhaseModel):
    """Base prior per global key (engine, phase, kind) from the estimator's shipped prior, widened."""
    from estimator.physics.coefficients import load_prior

    entries = load_prior()["pooled"]

    def prior_for(gk: Key) -> Prior:
        _engine, phase, kind = gk
        cands = [
            e
            for e in entries
            if e["phase"] == phase
            and e.get("scope", {}).get("kind") in (kind, None)
            and "vendor" not in e.get("scope", {})
        ]
        cands.sort(key=lambda e: e.get("scope", {}).get("kind") is None)
        params = cands[0]["params"] if cands else {}
        mean, scale = {}, {}
        for d in model.params:
            mu = float(params.get(d.name, d.default))
            mean[d.name] = mu
            if d.kind == TIME:
                floor = PRIOR_LINEAR_FLOOR.get(d.name, PRIOR_TIME_FLOOR_S)
                scale[d.name] = max(mu, floor) * PRIOR_TAU_TIME_REL
            else:
                scale[d.name] = PRIOR_TAU_EFF
        return Prior(mean, scale, f"shipped prior ({kind}/{phase}), widened")

    return prior_for


def _fit_phase(
    phase: str, variant: str, points: list[SpeedPoint], model: PhaseModel, cv: bool, lofo: bool
) -> PhaseFit:
    h = fit_hierarchy(points, model, make_prior_for(model))
    pf = PhaseFit(phase, variant, points, h)
    if cv:
        pf.lodo = holdout(points, h, "lodo")
        pf.lomo = holdout(points, h, "lomo")
        if lofo:
            pf.lofo = holdout(points, h, "lofo")
    return pf


def _batched(p: SpeedPoint) -> bool:
    return p.phase == "decode" and int(p.extra.get("batch") or 1) > 1


def _prior_roof(p: SpeedPoint) -> dict:
    """Compute-roof params of a batched decode point from the shipped prior's prefill set of its kind."""
    from estimator.physics.coefficients import prior_table

    pp = prior_table().lookup(p.hardware, p.engine, "prefill").params
    roof = {"flops_eff": pp["flops_eff"]}
    if not feat.has_datasheet_peak(p.hardware, p.engine):
        roof = {"flops_eff": 1.0, "flops_abs_tflops": pp["flops_abs_tflops"]}
    return roof


def _fitted_roof(p: SpeedPoint, pre_fits: list[PhaseFit]) -> dict:
    """Compute-roof params of a batched decode point from the prefill fit (as the estimator borrows them)."""
    absolute = not feat.has_datasheet_peak(p.hardware, p.engine)
    for pf in pre_fits:
        if (pf.variant == "abs") == absolute:
            params, _ = pf.hierarchy.params_for(dataclasses.replace(p, phase="prefill"))
            if absolute:
                return {"flops_eff": 1.0, "flops_abs_tflops": params["flops_abs_tflops"]}
            return {"flops_eff": params["flops_eff"]}
    return _prior_roof(p)


def _with_fixed(p: SpeedPoint, fixed: dict) -> SpeedPoint:
    return dataclasses.replace(p, extra={**p.extra, "fixed": {**p.extra.get("fixed", {}), **fixed}})


def fit_speed(points: list[SpeedPoint], cv: bool = True, lofo: bool = True) -> list[PhaseFit]:
    """Fit decode, then prefill (eff and abs variants) hierarchies, with cross-validation when ``cv``.

    Batched decode points (batch > 1) need the compute roof (flops_eff, and flops_abs_tflops on devices
    without datasheet TFLOPS): the first decode fit takes it from the shipped prior; when such points
    exist, decode is fitted once more with the roof of the fitted prefill hierarchy (what
    estimator.physics.speed.merged_params borrows at prediction time).
    """
    dec = [p for p in points if p.phase == "decode"]
    batched = any(_batched(p) for p in dec)
    dec = [_with_fixed(p, _prior_roof(p)) if _batched(p) else p for p in dec]
    dec_fit = _fit_phase("decode", "eff", dec, feat.decode_model(), cv and not batched, lofo) if dec else None
    pre = [p for p in points if p.phase == "prefill"]
    fixed_pts = []
    for p in pre:
        fixed = {}
        if dec_fit is not None:
            params, _ = dec_fit.hierarchy.params_for(dataclasses.replace(p, phase="decode"))
            fixed["bw_eff"] = params["bw_eff"]
        if feat.is_absolute(p):
            fixed["flops_eff"] = 1.0
        fixed_pts.append(dataclasses.replace(p, extra={**p.extra, "fixed": fixed}))
    pre_fits: list[PhaseFit] = []
    for variant, absolute in (("eff", False), ("abs", True)):
        vpts = [p for p in fixed_pts if feat.is_absolute(p) == absolute]
        if vpts:
            pre_fits.append(_fit_phase("prefill", variant, vpts, feat.prefill_model(absolute), cv, lofo))
    if batched:
        dec = [_with_fixed(p, _fitted_roof(p, pre_fits)) if _batched(p) else p for p in dec]
        dec_fit = _fit_phase("decode", "eff", dec, feat.decode_model(), cv, lofo)
    return ([dec_fit] if dec_fit is not None else []) + pre_fits


def calibrate(
    ds: Dataset,
    resolver: feat.Resolver | None = None,
    cv: bool = True,
    memory: bool = True,
    lofo: bool = True,
) -> Calibration:
    """Speed fits (+ CV) and, when ``memory``, the memory section.  ``lofo`` adds leave-one-family-out CV."""
    points, rej = feat.speed_points(ds, resolver)
    cal = Calibration(ds, points, list(ds.rejected) + rej, fit_speed(points, cv, lofo))
    # --- serving phase (calibration.serving): its own points, hierarchy and held-out errors -------------
    from calibration import serving

    cal.serving = serving.fit_serving(ds, resolver, cv, lofo)  # its left-out records: cal.serving.rejected
    if memory:
        from calibration import memory_fit

        cal.memory, cal.memory_notes = memory_fit.fit_memory(ds, resolver)
    return cal


# ------------------------------------------------------------------------------------------ document
def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else float(f"{x:.{nd}g}")


def _entry_params(pf: PhaseFit, res) -> tuple[dict, dict]:
    params = {k: _r(v) for k, v in res.params.items()}
    stderr = {k: _r(v) for k, v in res.stderr.items()}
    if pf.variant == "abs":
        params["flops_eff"] = 1.0
        stderr["flops_eff"] = 0.0
    return params, stderr


def _cv_block(held_lomo: list[HeldOut], held_lodo: list[HeldOut], n_dev: int, n_mod: int) -> dict:
    lomo_med, lomo_p90 = ape_stats([h.ape for h in held_lomo]) if n_mod >= 2 else (None, None)
    lodo_med, lodo_p90 = ape_stats([h.ape for h in held_lodo]) if n_dev >= 2 else (None, None)
    return {
        "lomo_median_ape": _r(lomo_med, 4),
        "lomo_p90_ape": _r(lomo_p90, 4),
        "lodo_median_ape": _r(lodo_med, 4),
        "lodo_p90_ape": _r(lodo_p90, 4),
    }


def _interval_block(own: list[HeldOut], pool: list[HeldOut]) -> dict:
    use = own if len(own) >= MIN_RESIDUALS else pool
    if len(use) < MIN_RESIDUALS:
        return {
            "log_lo": -0.7,
            "log_hi": 0.5,
            "coverage": None,
            "n_residuals": len(use),
            "source": "too few held-out residuals: default wide interval",
        }
    lo, hi = interval([h.log_ratio for h in use])
    return {
        "log_lo": _r(lo, 4),
        "log_hi": _r(hi, 4),
        "coverage": _r(nested_coverage(own, pool), 3),
        "n_residuals": len(use),
        "source": "group" if use is own else "pool",
    }


def coefficients_document(cal: Calibration) -> dict:
    """The results/coefficients.json document (schema in estimator/physics/coefficients.py)."""
    groups, pooled = [], []
    for pf in cal.fits:
        h = pf.hierarchy
        gate = pf.gate()
        by_fam = defaultdict(list)
        by_pool = defaultdict(list)
        for g in gate:
            by_fam[family_key(g.point)].append(g)
            by_pool[pool_key(g.point)].append(g)
        for fk, res in sorted(h.families.items()):
            pk = None
            lomo = [x for x in pf.lomo if family_key(x.point) == fk]
            lodo = [x for x in pf.lodo if family_key(x.point) == fk]
            pk = pool_key(next(p for p in pf.points if family_key(p) == fk))
            params, stderr = _entry_params(pf, res)
            groups.append(
                {
                    "family": fk[0],
                    "engine": fk[1],
                    "backend": fk[2],
                    "phase": fk[3],
                    "params": params,
                    "stderr": stderr,
                    "n_points": res.n_points,
                    "devices": list(res.devices),
                    "models": list(res.models),
                    "cv": _cv_block(lomo, lodo, len(res.devices), len(res.models)),
                    "interval": _interval_block(by_fam.get(fk, []), by_pool.get(pk, [])),
                    "sigma_log": _r(res.sigma_log, 4),
                    "at_bound": list(res.at_bound),
                    "prior": res.prior_source,
                    "variant": pf.variant,
                    "converged": res.converged,
                }
            )
        for level, fits, keyf in (("pool", h.pools, pool_key), ("global", h.globals_, global_key)):
            for k, res in sorted(fits.items()):
                lofo = [x for x in pf.lofo if keyf(x.point) == k]
                fams = sorted({p.family for p in pf.points if keyf(p) == k})
                med, p90 = ape_stats([x.ape for x in lofo]) if len(fams) >= 2 else (None, None)
                params, stderr = _entry_params(pf, res)
                scope = {"kind": k[2]} if level == "global" else {"kind": k[2], "vendor": k[3]}
                iv = _interval_block(lofo if len(fams) >= 2 else [], [])
                pooled.append(
                    {
                        "scope": scope,
                        "engine": k[0],
                        "phase": k[1],
                        "params": params,
                        "stderr": stderr,
                        "n_points": res.n_points,
                        "families": fams,
                        "devices": list(res.devices),
                        "cv": {"lofo_median_ape": _r(med, 4), "lofo_p90_ape": _r(p90, 4)},
                        "interval": iv,
                        "level": level,
                        "variant": pf.variant,
                        "note": "leave-one-family-out errors: what a device of an unmeasured family gets",
                    }
                )
    # --- serving phase (calibration.serving) ---------------------------------------------------------
    serving_cv = None
    if cal.serving is not None:
        from calibration import serving

        serving_groups, serving_pooled = serving.document_entries(cal.serving)
        groups += serving_groups
        pooled += serving_pooled
        serving_cv = serving.cv_summary(cal.serving)
    fitted = {(g["family"], g["engine"], g["backend"], g["phase"]) for g in groups}
    uncal = _uncalibrated(cal, fitted)
    return {
        "schema_version": 1,
        "fitbench_version": FITBENCH_VERSION,
        "created_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "input_hash": cal.dataset.input_hash,
        "quality_filter": list(cal.dataset.qualities),
        "n_records": len(cal.dataset.records),
        "n_rejected": len(cal.rejected),
        "groups": groups,
        "pooled": pooled,
        "uncalibrated": uncal,
        "memory": cal.memory,
        "memory_notes": cal.memory_notes,
        "serving_cv": serving_cv,
    }


def _uncalibrated(cal: Calibration, fitted: set) -> list[dict]:
    """Families seen in the records (usable or rejected) with no fitted group, per engine/backend/phase."""
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


__all__ = ["Calibration", "PhaseFit", "calibrate", "coefficients_document", "fit_speed", "EFF", "RATE"]
