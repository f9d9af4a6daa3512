"""Three-level shrinkage: global -> pool -> family.

Levels and their keys:
  global  (engine, phase, kind)            prior: shipped prior of the device kind (``prior_for``), widened
  pool    (engine, phase, kind, vendor)    prior: global params, scale TAU_POOL_EFF (log units)
  family  (family, engine, backend, phase) prior: pool params, scale tau_eff (log units, see below)
Time parameters get a prior scale of max(|mu|, floor) * TAU_TIME_REL seconds at every level.
Each level is a bounded robust fit (calibration.fit.fit_group) whose Gaussian prior is centred on the level
above.  A family with many points is pulled little (its likelihood dominates); a family with few points
borrows the pool's values, so a sparse family gets a sensible prediction; a family with none falls back to
its pool, then to global, and says so (``level`` of ``Hierarchy.params_for``).

tau_eff (family | pool, per pool and efficiency/rate parameter) is estimated from the data where it can be:
the standard deviation of ln(theta) across the pool's families that have >= MIN_POINTS_FOR_TAU points in a
weakly regularised fit, clipped to [TAU_MIN, TAU_MAX]; with fewer than 3 such families it is TAU_FAMILY_EFF.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from calibration.fit import EFF, RATE, TIME, FitError, FitResult, PhaseModel, Prior, SpeedPoint, fit_group

TAU_POOL_EFF = 0.5
TAU_FAMILY_EFF = 0.3
TAU_MIN, TAU_MAX = 0.05, 1.0
TAU_TIME_REL = 1.0
# gemm_k_half is in elements (not seconds): its floor is one model width (4096), the size at which the term
# changes a GEMM's time by a factor of two.
TIME_FLOOR_S = {"t_fixed_s": 1e-4, "t_layer_s": 1e-5, "moe_route_s": 1e-5, "gemm_k_half": 4096.0}
DEFAULT_TIME_FLOOR_S = 1e-5
MIN_POINTS_FOR_TAU = 10
# A level with fewer points than this cannot estimate its own noise scale (the MAD of a handful of in-sample
# residuals of a 3-6 parameter fit is ~0, which would let 1-2 points override the prior): it borrows the
# noise scale of the level above.
MIN_POINTS_FOR_SIGMA = 10

Key = tuple[str, ...]


def family_key(p: SpeedPoint) -> Key:
    return (p.family, p.engine, p.backend, p.phase)


def global_key(p: SpeedPoint) -> Key:
    return (p.engine, p.phase, p.kind or "unknown")


def pool_key(p: SpeedPoint) -> Key:
    return (*global_key(p), (p.vendor or "unknown").lower())


PriorFor = Callable[[Key], Prior]


def prior_around(
    result_params: dict[str, float], model: PhaseModel, tau_eff: float | dict[str, float], source: str
) -> Prior:
    """A prior centred on ``result_params``: log-scale tau for EFF/RATE, relative scale for TIME params."""
    mean, scale = {}, {}
    for d in model.params:
        if d.name not in result_params:
            continue
        mu = result_params[d.name]
        mean[d.name] = mu
        if d.kind == TIME:
            scale[d.name] = max(abs(mu), TIME_FLOOR_S.get(d.name, DEFAULT_TIME_FLOOR_S)) * TAU_TIME_REL
        else:
            scale[d.name] = tau_eff[d.name] if isinstance(tau_eff, dict) else tau_eff
    return Prior(mean, scale, source)


@dataclass
class Hierarchy:
    """Fitted levels; ``params_for`` picks the most specific level that has a fit."""

    model: PhaseModel
    prior_for: PriorFor
    globals_: dict[Key, FitResult] = field(default_factory=dict)
    pools: dict[Key, FitResult] = field(default_factory=dict)
    families: dict[Key, FitResult] = field(default_factory=dict)
    taus: dict[Key, dict[str, float]] = field(default_factory=dict)  # pool key -> tau per EFF/RATE param

    def params_for(self, p: SpeedPoint) -> tuple[dict[str, float], str]:
        """(params, level) for a point: level is 'family', 'pool', 'global' or 'prior'."""
        if family_key(p) in self.families:
            return self.families[family_key(p)].params, "family"
        if pool_key(p) in self.pools:
            return self.pools[pool_key(p)].params, "pool"
        if global_key(p) in self.globals_:
            return self.globals_[global_key(p)].params, "global"
        return dict(self.prior_for(global_key(p)).mean), "prior"


def _group(points: Sequence[SpeedPoint], keyf) -> dict[Key, list[SpeedPoint]]:
    out: dict[Key, list[SpeedPoint]] = defaultdict(list)
    for p in points:
        out[keyf(p)].append(p)
    return dict(out)


def estimate_taus(
    points: Sequence[SpeedPoint], model: PhaseModel, pools: dict[Key, FitResult]
) -> dict[Key, dict]:
    """Between-family spread of ln(efficiency) per pool (see module docstring)."""
    taus: dict[Key, dict[str, float]] = {}
    by_pool = _group(points, pool_key)
    for pk, pts in by_pool.items():
        names = [d.name for d in model.params if d.kind in (EFF, RATE)]
        logs: dict[str, list[float]] = {n: [] for n in names}
        if pk in pools:
            weak = prior_around(pools[pk].params, model, TAU_MAX, "weak")
            for _fk, fpts in _group(pts, family_key).items():
                if len(fpts) < MIN_POINTS_FOR_TAU:
                    continue
                try:
                    r = fit_group(fpts, model, weak)
                except FitError:
                    continue
                for n in names:
                    logs[n].append(math.log(r.params[n]))
        taus[pk] = {
            n: float(np.clip(np.std(v, ddof=1), TAU_MIN, TAU_MAX)) if len(v) >= 3 else TAU_FAMILY_EFF
            for n, v in logs.items()
        }
    return taus


def fit_hierarchy(
    points: Sequence[SpeedPoint],
    model: PhaseModel,
    prior_for: PriorFor,
    taus: dict[Key, dict[str, float]] | None = None,
) -> Hierarchy:
    """Fit global, pool and family levels.  ``taus`` reuses the family-level scales of an earlier fit (CV
    folds)."""
    h = Hierarchy(model=model, prior_for=prior_for)
    for gk, pts in _group(points, global_key).items():
        h.globals_[gk] = fit_group(pts, model, prior_for(gk))
    for pk, pts in _group(points, pool_key).items():
        g = h.globals_[pk[:3]]
        h.pools[pk] = fit_group(
            pts,
            model,
            prior_around(g.params, model, TAU_POOL_EFF, "global " + "/".join(pk[:3])),
            sigma_log=_borrowed_sigma(pts, g),
        )
    h.taus = taus if taus is not None else estimate_taus(points, model, h.pools)
    for fk, pts in _group(points, family_key).items():
        pk = pool_key(pts[0])
        prior = prior_around(
            h.pools[pk].params, model, h.taus.get(pk, TAU_FAMILY_EFF), "pool " + "/".join(pk)
        )
        h.families[fk] = fit_group(pts, model, prior, sigma_log=_borrowed_sigma(pts, h.pools[pk]))
    return h


def _borrowed_sigma(points: Sequence[SpeedPoint], parent: FitResult | None) -> float | None:
    """None (estimate it) when the level has >= MIN_POINTS_FOR_SIGMA points, else the parent's noise scale."""
    if len(points) >= MIN_POINTS_FOR_SIGMA or parent is None:
        return None
    return parent.sigma_log


def _fold_sigma(points: Sequence[SpeedPoint], full: FitResult | None, parent: FitResult | None):
    """Noise scale of a level refitted in a CV fold: the parent's when the fold leaves it too few points,
    else the full-data fit's."""
    if len(points) < MIN_POINTS_FOR_SIGMA and parent is not None:
        return parent.sigma_log
    return full.sigma_log if full else None


def fit_partial(
    points: Sequence[SpeedPoint], target: SpeedPoint, full: Hierarchy
) -> tuple[dict[str, float], str]:
    """Params for ``target`` from a hierarchy refitted on ``points`` (the caller has removed the held-out
    data).

    Only the levels on the target's path are refitted (its global, pool and family), warm-started from the
    full-data fit ``full`` with its noise scales and family-level taus, which keeps cross-validation fast.
    """
    model = full.model
    gk, pk, fk = global_key(target), pool_key(target), family_key(target)
    gpts = [p for p in points if global_key(p) == gk]
    if not gpts:
        return dict(full.prior_for(gk).mean), "prior"
    gfull = full.globals_.get(gk)
    g = fit_group(
        gpts,
        model,
        full.prior_for(gk),
        sigma_log=gfull.sigma_log if gfull else None,
        x0=gfull.params if gfull else None,
    )
    ppts = [p for p in gpts if pool_key(p) == pk]
    if not ppts:
        return g.params, "global"
    pfull = full.pools.get(pk)
    pool = fit_group(
        ppts,
        model,
        prior_around(g.params, model, TAU_POOL_EFF, "global"),
        sigma_log=_fold_sigma(ppts, pfull, g),
        x0=pfull.params if pfull else None,
    )
    fpts = [p for p in ppts if family_key(p) == fk]
    if not fpts:
        return pool.params, "pool"
    ffull = full.families.get(fk)
    fam = fit_group(
        fpts,
        model,
        prior_around(pool.params, model, full.taus.get(pk, TAU_FAMILY_EFF), "pool"),
        sigma_log=_fold_sigma(fpts, ffull, pool),
        x0=ffull.params if ffull else None,
    )
    return fam.params, "family"
