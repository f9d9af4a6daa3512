"""Cross-validation of the speed model: held-out predictions, error summaries, conformal intervals, coverage.

Schemes (folds; every fold refits the whole model on its own data, noise and shrinkage scales included:
calibration.hierarchy.fit_model, warm-started from the full fit with the held-out groups' effects reset):
  lodo  leave-one-device-out: a point is predicted without any point of its device (its family then speaks
        through the other devices of the family, else the covariates alone);
  lomo  leave-one-model-out: without any point of its model (on any device);
  lofo  leave-one-family-out: without any point of its family (what a device of an unmeasured family gets).
  lobo  leave-one-backend-out: without any point of its (engine, backend), that backend's own covariate
        (``backend=<b>``) at its prior: what a backend nobody measured gets (run on the points of the less
        mature backends only: calibration.maturity).
  gate  per point: lodo when its family has >= 2 devices; else lomo when the family has >= 2 models (the
        single-device fallback, named "lomo (single device)"); else lodo.

Basis of a held-out prediction (how far it is from calibrated data, as the estimator labels it): ``device``
when the fold's training data hold points of the point's device in its phase, ``family`` when they hold
points of other devices of its family, else ``pooled``.

Errors, per point (speeds, tokens/s; t = time):
  ape       = |tok_s_pred / tok_s_meas - 1| = |t_meas / t_pred - 1|
  log_ratio = ln(t_pred / t_meas) = ln(tok_s_meas / tok_s_pred)
Intervals (split conformal, per stratum and basis; a stratum is a phase, or ``serving.ttft`` /
``serving.tpot``: ``SpeedPoint.stratum``): the held-out log ratios of the scheme that matches the basis
(device: lomo; family: lodo; pooled: lofo) give [q_lo, q_hi] at the (n+1)-corrected ranks floor((n+1) a/2)
and ceil((n+1)(1 - a/2)), a = 1 - LEVEL, widened to contain 0; a prediction x then has the interval
[x exp(log_lo), x exp(log_hi)].  Coverage is checked out of sample: under lodo each device's points, under
lofo each family's, under lomo each model's, are judged by the interval built without that group.  The same
schemes and intervals serve every fitted TimeModel (calibration.fit): the folds refit with the full fit's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from calibration.features import SpeedPoint
from calibration.fit import FitState, fit_model, predict_log_ratio
from estimator.physics.covariates import effective_backend

LEVEL = 0.90
MIN_RESIDUALS = 5
# an out-of-sample coverage needs the residuals of this many other groups (devices, families, models) for each
# judged group: with fewer, one group's bias decides it and it says nothing about a new group
MIN_GROUPS = 5
BASIS_SCHEME = {"device": "lomo", "family": "lodo", "pooled": "lofo"}


@dataclass(frozen=True)
class HeldOut:
    point: SpeedPoint
    log_ratio: float  # ln(t_pred / t_meas)
    scheme: str  # lodo | lomo | lofo | "lomo (single device)"
    basis: str  # device | family | pooled

    @property
    def predicted_s(self) -> float:
        return self.point.measured_s * math.exp(self.log_ratio)

    @property
    def ape(self) -> float:
        return abs(math.exp(-self.log_ratio) - 1.0)


FoldKey = Callable[[SpeedPoint], str]
FOLDS: dict[str, FoldKey] = {
    "lodo": lambda p: p.device,
    "lomo": lambda p: p.model,
    "lofo": lambda p: p.family,
    "lobo": lambda p: f"{p.engine}/{effective_backend(p.hardware, p.engine, p.backend)}",
}


def basis_of(p: SpeedPoint, train: Sequence[SpeedPoint]) -> str:
    """device | family | pooled: what ``train`` holds of the point's device / family in its phase."""
    same = [q for q in train if q.phase == p.phase]
    if any(q.device == p.device and q.family == p.family for q in same):
        return "device"
    if any(q.family == p.family for q in same):
        return "family"
    return "pooled"


def _reset_groups(state: FitState, held: Sequence[SpeedPoint], scheme: str) -> np.ndarray:
    """The full fit's z with the random effects of the held-out devices / families set to 0 (their fold
    has no data for them: the prior mean), and under lobo the held-out backends' own covariates
    (``backend=<b>``) at their prior mean 0: a warm start that leaks nothing of the held-out points."""
    z = state.z.copy()
    d = state.design
    devices = {p.device for p in held} if scheme in ("lodo", "lofo") else set()
    families = {p.family for p in held} if scheme == "lofo" else set()
    backends = set()
    if scheme == "lobo":
        backends = {f"backend={effective_backend(p.hardware, p.engine, p.backend)}" for p in held}
    if scheme == "lofo":
        devices |= {u[0] for u, f in zip(d.units, d.family, strict=True) if f in families}
    for i, (kind, group) in enumerate(zip(d.col_kind, d.col_group, strict=True)):
        if (kind == "device" and group in devices) or (kind == "family" and group in families):
            z[i] = 0.0
        elif kind == "cov" and group in backends:
            z[i] = d.prior_mean[i]
    return z


def holdout(
    points: Sequence[SpeedPoint],
    full: FitState,
    scheme: str,
    subset: Iterable[int] | None = None,
    keep_states: bool = False,
) -> tuple[list[HeldOut], dict[str, FitState]]:
    """Held-out predictions under one scheme (lodo | lomo | lofo | lobo) of ``subset`` (indices; default
    all), and with ``keep_states`` each fold's fit by fold name (what other held-out predictions of the fold
    use)."""
    fold_of = FOLDS[scheme]
    targets = list(range(len(points))) if subset is None else list(subset)
    by_fold: dict[str, list[int]] = defaultdict(list)
    for i in targets:
        by_fold[fold_of(points[i])].append(i)
    out: list[HeldOut] = []
    states: dict[str, FitState] = {}
    for fold in sorted(by_fold):
        idx = by_fold[fold]
        train = [p for p in points if fold_of(p) != fold]
        held = [points[i] for i in idx]
        z0 = _reset_groups(full, held, scheme)
        st = fit_model(train, full.design, z0=z0, scales=full.scales, model=full.model)
        if keep_states:
            states[fold] = st
        lr = predict_log_ratio(st, held)
        out += [HeldOut(p, float(r), scheme, basis_of(p, train)) for p, r in zip(held, lr, strict=True)]
    return out, states


def gate_scheme(points: Sequence[SpeedPoint]) -> dict[int, str]:
    """Per point index: "lodo", or "lomo" for a family with one device and >= 2 models (module doc)."""
    devices: dict[tuple, set[str]] = defaultdict(set)
    models: dict[tuple, set[str]] = defaultdict(set)
    for p in points:
        k = (p.family, p.engine, p.phase)
        devices[k].add(p.device)
        models[k].add(p.model)
    out = {}
    for i, p in enumerate(points):
        k = (p.family, p.engine, p.phase)
        out[i] = "lomo" if len(devices[k]) < 2 and len(models[k]) >= 2 else "lodo"
    return out


def gate_holdout(points: Sequence[SpeedPoint], by_scheme: dict[str, list[HeldOut]]) -> list[HeldOut]:
    """The gate's held-out prediction per point from the schemes' results (module doc)."""
    index = {s: {id(h.point): h for h in hs} for s, hs in by_scheme.items()}
    out = []
    for i, s in gate_scheme(points).items():
        h = index.get(s, {}).get(id(points[i]))
        if h is None:
            continue
        out.append(HeldOut(h.point, h.log_ratio, "lomo (single device)", h.basis) if s == "lomo" else h)
    return out


def ape_stats(apes: Sequence[float]) -> tuple[float | None, float | None]:
    """(median, p90) of absolute percentage errors as fractions; (None, None) when empty."""
    if not len(apes):
        return None, None
    a = np.asarray(apes, dtype=float)
    return float(np.median(a)), float(np.quantile(a, 0.9))


def interval(
    log_ratios: Sequence[float], level: float = LEVEL, groups: Sequence[str] | None = None
) -> tuple[float, float]:
    """Split-conformal interval of ln(measured/predicted) at ``level``, widened to contain 0.

    ``log_ratios`` are ln(t_pred / t_meas) = ln(tok_s_meas / tok_s_pred).  Without ``groups``: the
    (n+1)-corrected order statistics floor((n+1) a/2) and ceil((n+1)(1 - a/2)), a = 1 - level.  With
    ``groups`` (the device / family / model of each residual): each group weighs 1 in total (its residuals
    1/n_g each), so a device with 90 points counts as much as one with a single point: the interval is for
    a new *group*; the tail levels are moved out by the (G+1) correction for G groups, a/2 x G/(G+1).
    """
    r = np.asarray(log_ratios, dtype=float)
    n = r.size
    a = 1.0 - level
    if groups is None:
        r = np.sort(r)
        k_lo = math.floor((n + 1) * a / 2)
        k_hi = math.ceil((n + 1) * (1 - a / 2))
        lo, hi = r[max(k_lo, 1) - 1], r[min(k_hi, n) - 1]
        return min(float(lo), 0.0), max(float(hi), 0.0)
    size: dict[str, int] = defaultdict(int)
    for g in groups:
        size[g] += 1
    w = np.array([1.0 / size[g] for g in groups])
    tail = a / 2 * len(size) / (len(size) + 1)
    order = np.argsort(r)
    r, c = r[order], np.cumsum(w[order]) / w.sum()
    lo = r[min(int(np.searchsorted(c, tail, side="left")), n - 1)]
    hi = r[min(int(np.searchsorted(c, 1.0 - tail, side="left")), n - 1)]
    return min(float(lo), 0.0), max(float(hi), 0.0)


@dataclass(frozen=True)
class Coverage:
    """Out-of-sample coverage: ``groups`` = mean over held-out groups of the share of their points inside
    (each device / family / model one vote: the gated figure), ``points`` = share of all points inside."""

    groups: float
    points: float
    n_groups: int
    n_points: int


def basis_residuals(held: dict[str, list[HeldOut]], stratum: str, basis: str) -> list[HeldOut]:
    """The held-out predictions that calibrate the interval of (stratum, basis); a stratum is a phase, or
    ``serving.<metric>`` (``SpeedPoint.stratum``)."""
    return [h for h in held.get(BASIS_SCHEME[basis], []) if h.point.stratum == stratum and h.basis == basis]


def coverage(
    held: Sequence[HeldOut], calib: dict[str, list[HeldOut]], group: FoldKey, keep=None
) -> Coverage | None:
    """Out-of-sample coverage of the held-out predictions ``held``: each one judged by the group-weighted
    interval of its (stratum, basis) built from ``calib``'s residuals of the *other* groups (``group``:
    device, family or model; at least MIN_RESIDUALS residuals from MIN_GROUPS groups); ``keep``: a predicate
    on the residuals' points (a sub-stratum's, calibration.serving.SUBSTRATA), None = all.  None when no
    group qualifies."""
    by_group: dict[str, list[HeldOut]] = defaultdict(list)
    for h in held:
        by_group[group(h.point)].append(h)
    cache: dict = {}
    shares, inside, total = [], 0, 0
    for g, hs in by_group.items():
        g_in = g_n = 0
        for h in hs:
            key = (g, h.point.stratum, h.basis)
            if key not in cache:
                scheme = BASIS_SCHEME[h.basis]
                others = [
                    x
                    for x in basis_residuals(calib, h.point.stratum, h.basis)
                    if group(x.point) != g and (keep is None or keep(x.point))
                ]
                keys = [FOLDS[scheme](x.point) for x in others]
                enough = len(others) >= MIN_RESIDUALS and len(set(keys)) >= MIN_GROUPS
                cache[key] = interval([x.log_ratio for x in others], groups=keys) if enough else None
            iv = cache[key]
            if iv is None:
                continue
            g_n += 1
            g_in += iv[0] <= h.log_ratio <= iv[1]
        if g_n:
            shares.append(g_in / g_n)
            inside += g_in
            total += g_n
    if not total:
        return None
    return Coverage(float(np.mean(shares)), inside / total, len(shares), total)
