"""Cross-validation of the speed fit: held-out predictions, error summaries, prediction intervals, coverage.

Schemes (folds):
  lodo  leave-one-device-out: every point is predicted by a hierarchy refitted without any point of its
        device (its family then borrows from the pool if the device was the family's only one).
  lomo  leave-one-model-out: without any point of its model (on any device).
  lofo  leave-one-family-out: without any point of its family (what an unmeasured family gets).
  gate  per point: lodo when its family has >= 2 devices; else lomo when the family has >= 2 models (the
        single-device fallback, named "lomo (single device)"); else lodo (pool only).

Errors, per point (speeds, tokens/s; t = time):
  ape       = |tok_s_pred / tok_s_meas - 1| = |t_meas / t_pred - 1|
  log_ratio = ln(tok_s_meas / tok_s_pred)   = ln(t_pred / t_meas)
Prediction interval of a group: [q05, q95] of the held-out log_ratio (central 90 %), so a prediction x has
the interval [x exp(log_lo), x exp(log_hi)].  Coverage is checked out of sample: for each device, the
interval built from the *other* devices' held-out residuals is applied to this device's residuals.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from calibration.fit import SpeedPoint, predict_times
from calibration.hierarchy import Hierarchy, family_key, fit_partial

LEVEL = 0.90
MIN_RESIDUALS = 5


@dataclass(frozen=True)
class HeldOut:
    point: SpeedPoint
    predicted_s: float
    level: str  # hierarchy level that supplied the params: family | pool | global | prior
    scheme: str  # lodo | lomo | lofo | "lomo (single device)"

    @property
    def ape(self) -> float:
        return abs(self.point.measured_s / self.predicted_s - 1.0)

    @property
    def log_ratio(self) -> float:
        return math.log(self.predicted_s / self.point.measured_s)


FoldKey = Callable[[SpeedPoint], str]
FOLDS: dict[str, FoldKey] = {
    "lodo": lambda p: p.device,
    "lomo": lambda p: p.model,
    "lofo": lambda p: p.family,
}


def holdout(
    points: Sequence[SpeedPoint], full: Hierarchy, scheme: str, subset: Iterable[SpeedPoint] | None = None
) -> list[HeldOut]:
    """Held-out predictions of ``subset`` (default: all points) under one scheme (lodo | lomo | lofo)."""
    fold_of = FOLDS[scheme]
    targets = list(points if subset is None else subset)
    by_fold: dict[str, list[SpeedPoint]] = defaultdict(list)
    for p in targets:
        by_fold[fold_of(p)].append(p)
    out: list[HeldOut] = []
    for fold, fpts in by_fold.items():
        train = [p for p in points if fold_of(p) != fold]
        by_group: dict[tuple, list[SpeedPoint]] = defaultdict(list)
        for p in fpts:
            by_group[family_key(p)].append(p)
        for gpts in by_group.values():
            params, level = fit_partial(train, gpts[0], full)
            pred = predict_times(gpts, full.model, params)
            out.extend(HeldOut(p, float(t), level, scheme) for p, t in zip(gpts, pred, strict=True))
    return out


def gate_holdout(points: Sequence[SpeedPoint], full: Hierarchy) -> list[HeldOut]:
    """Held-out predictions for the CI gate (scheme per point as in the module docstring)."""
    devices: dict[tuple, set[str]] = defaultdict(set)
    models: dict[tuple, set[str]] = defaultdict(set)
    for p in points:
        devices[family_key(p)].add(p.device)
        models[family_key(p)].add(p.model)
    lodo = [p for p in points if len(devices[family_key(p)]) >= 2 or len(models[family_key(p)]) < 2]
    lomo = [p for p in points if len(devices[family_key(p)]) < 2 and len(models[family_key(p)]) >= 2]
    out = holdout(points, full, "lodo", lodo) if lodo else []
    if lomo:
        out += [
            HeldOut(h.point, h.predicted_s, h.level, "lomo (single device)")
            for h in holdout(points, full, "lomo", lomo)
        ]
    return out


def ape_stats(apes: Sequence[float]) -> tuple[float | None, float | None]:
    """(median, p90) of absolute percentage errors as fractions; (None, None) when empty."""
    if not len(apes):
        return None, None
    a = np.asarray(apes, dtype=float)
    return float(np.median(a)), float(np.quantile(a, 0.9))


def interval(log_ratios: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Central ``level`` interval of ln(measured/predicted), widened to contain 0."""
    r = np.asarray(log_ratios, dtype=float)
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
    return min(float(lo), 0.0), max(float(hi), 0.0)


def nested_coverage(
    held: Sequence[HeldOut], pool: Sequence[HeldOut] = (), level: float = LEVEL
) -> float | None:
    """Out-of-sample coverage: per device, the interval from the other devices' residuals (group first, the
    ``pool`` residuals when the group has fewer than MIN_RESIDUALS others) applied to this device's
    residuals."""
    if not held:
        return None
    inside = 0
    total = 0
    for dev in {h.point.device for h in held}:
        others = [h.log_ratio for h in held if h.point.device != dev]
        if len(others) < MIN_RESIDUALS:
            others = [h.log_ratio for h in pool if h.point.device != dev]
        if len(others) < MIN_RESIDUALS:
            continue
        lo, hi = interval(others, level)
        for h in held:
            if h.point.device == dev:
                total += 1
                inside += lo <= h.log_ratio <= hi
    return inside / total if total else None
