"""Bounded robust least squares for one calibration group (scipy.optimize.least_squares).

A ``PhaseModel`` names the free parameters of one phase (decode or prefill) — rows of the estimator's
parameter table, ``estimator.physics.coefficients.Param``, with their physical bounds — and the function that
predicts the time of one point in seconds from (features, hardware, params).  That function is the
estimator's own (``estimator.physics.speed.decode_step_s`` / ``prefill_s``, wired in calibration.features), so
the fitted model is the estimator's model.

Residual of point i (dimensionless):  r_i = ln(t_pred_i / t_meas_i) / sigma
    sigma: the noise scale in log space, 1.4826 * MAD of the residuals of a first pass (floored at 0.01).
Prior (shrinkage) residuals, one per parameter (see calibration.hierarchy):
    efficiency / rate parameters:  (ln theta - ln mu) / tau        (tau in log units)
    time parameters (seconds):     (theta - mu) / tau               (tau in seconds)
Loss: soft_l1 (or huber) with f_scale 2, i.e. points more than ~2 sigma off are down-weighted.
Bounds: efficiencies in [1e-3, 1], times >= 0, rates > 0.
Standard errors: cov = s^2 (J^T J)^-1 from the Jacobian at the solution, s^2 = sum(r_data^2) / max(n - p, 1);
a parameter sitting on a bound is flagged ``at_bound`` (its standard error is then only indicative).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from estimator.physics.coefficients import EFF, RATE, TIME, Param  # noqa: F401 - kinds re-exported


@dataclass(frozen=True)
class PhaseModel:
    """The free parameters of a phase and the estimator function that predicts seconds per point.

    ``predict_s(features, hardware, params) -> seconds``; ``fixed`` params are passed through unchanged.
    """

    phase: str
    params: tuple[Param, ...]
    predict_s: Callable[[object, object, dict], float]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)


@dataclass(frozen=True)
class SpeedPoint:
    """One measured time (seconds) with its estimator features and hardware, plus identity for grouping/CV."""

    features: object  # estimator.physics.speed PrefillFeatures, or a list of DecodeFeatures (tg depths)
    hardware: object  # estimator.specs.HardwareSpec
    measured_s: float
    phase: str
    family: str
    engine: str
    backend: str
    device: str
    model: str
    where: str = ""
    record_id: str = ""
    vendor: str = ""
    kind: str = ""
    n_devices: int = 1
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Prior:
    """Gaussian prior per parameter: mean and scale (log units for EFF/RATE, seconds for TIME)."""

    mean: dict[str, float]
    scale: dict[str, float]
    source: str = ""


@dataclass(frozen=True)
class FitResult:
    params: dict[str, float]
    stderr: dict[str, float]
    n_points: int
    devices: tuple[str, ...]
    models: tuple[str, ...]
    sigma_log: float  # robust noise scale of ln(pred/meas)
    rms_log: float  # root mean square of ln(pred/meas) on the fitted points
    converged: bool
    message: str
    at_bound: tuple[str, ...] = ()
    prior_source: str = ""


class FitError(RuntimeError):
    """A group could not be fitted (no points, or the model returned a non-positive/non-finite time)."""


def _prior_residuals(x: np.ndarray, defs: Sequence[Param], prior: Prior | None) -> np.ndarray:
    if prior is None:
        return np.zeros(0)
    out = []
    for xi, d in zip(x, defs, strict=True):
        if d.name not in prior.mean:
            continue
        mu, tau = prior.mean[d.name], prior.scale[d.name]
        if d.kind == TIME:
            out.append((xi - mu) / tau)
        else:
            out.append((math.log(max(xi, 1e-12)) - math.log(max(mu, 1e-12))) / tau)
    return np.asarray(out, dtype=float)


def predict_times(
    points: Sequence[SpeedPoint],
    model: PhaseModel,
    params: dict[str, float],
    fixed: dict[str, float] | None = None,
) -> np.ndarray:
    """Seconds predicted by the estimator function for each point.

    Parameters not fitted here come from ``fixed`` and from each point's ``extra["fixed"]`` (e.g. the decode
    ``bw_eff`` of the point's family used by the prefill memory term); fitted ``params`` win.
    """
    base = {**(fixed or {}), **params}
    out = np.empty(len(points), dtype=float)
    for i, p in enumerate(points):
        own = p.extra.get("fixed")
        out[i] = model.predict_s(p.features, p.hardware, {**own, **base} if own else base)
    return out


def fit_group(
    points: Sequence[SpeedPoint],
    model: PhaseModel,
    prior: Prior | None = None,
    fixed: dict[str, float] | None = None,
    loss: str = "soft_l1",
    sigma_log: float | None = None,
    x0: dict[str, float] | None = None,
) -> FitResult:
    """Fit ``model``'s free parameters to ``points`` (see the module docstring for the objective).

    ``sigma_log`` given: one pass with that noise scale (else two passes, the second with the MAD-estimated
    one).
    ``x0``: warm start (cross-validation folds start from the full-data fit).
    """
    if not points:
        raise FitError("no points to fit")
    if loss not in ("soft_l1", "huber", "linear", "cauchy"):
        raise ValueError(f"unknown loss {loss!r}")
    defs = model.params
    names = [d.name for d in defs]
    lo = np.array([d.lower for d in defs], dtype=float)
    hi = np.array([d.upper for d in defs], dtype=float)
    start = np.array([d.default for d in defs], dtype=float)
    if x0 is not None:
        start = np.array([x0.get(d.name, d.default) for d in defs], dtype=float)
    elif prior is not None:
        start = np.array([prior.mean.get(d.name, d.default) for d in defs], dtype=float)
    finite_span = np.where(np.isfinite(hi - lo), hi - lo, 1.0)
    start = np.clip(
        start, lo + 1e-9 * finite_span, np.where(np.isfinite(hi), hi - 1e-9 * finite_span, np.inf)
    )
    y = np.log(np.array([p.measured_s for p in points], dtype=float))
    if not np.all(np.isfinite(y)):
        raise FitError("a measured time is not finite and positive")

    def data_res(x: np.ndarray) -> np.ndarray:
        t = predict_times(points, model, dict(zip(names, x, strict=True)), fixed)
        if not np.all(np.isfinite(t)) or np.any(t <= 0):
            return np.full(len(points), 1e3)
        return np.log(t) - y

    def run(sigma: float, start: np.ndarray):
        def fun(x: np.ndarray) -> np.ndarray:
            return np.concatenate([data_res(x) / sigma, _prior_residuals(x, defs, prior)])

        return least_squares(
            fun,
            start,
            bounds=(lo, hi),
            loss=loss,
            f_scale=2.0,
            x_scale="jac",
            method="trf",
            max_nfev=200 * len(defs),
        )

    if sigma_log is None:
        first = run(0.1, start)
        r = data_res(first.x)
        sigma = max(0.01, 1.4826 * float(np.median(np.abs(r - np.median(r)))))
        res = run(sigma, first.x)
    else:
        sigma = sigma_log
        res = run(sigma, start)
    r = data_res(res.x)
    n, p = len(points), len(defs)
    jac = np.asarray(res.jac, dtype=float)
    s2 = float(np.sum((r / sigma) ** 2)) / max(n - p, 1)
    try:
        # columns scaled to unit norm first: parameters in seconds and in elements differ by ~1e8 in their
        # Jacobian columns, and pinv's relative cutoff would drop the small ones (standard error 0)
        d = np.linalg.norm(jac, axis=0)
        d = np.where(d > 0, d, 1.0)
        cov = np.linalg.pinv((jac / d).T @ (jac / d)) / np.outer(d, d) * s2
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        se = np.full(p, np.nan)
    span = hi - lo
    at_bound = tuple(
        nm
        for nm, xi, a, b, s in zip(names, res.x, lo, hi, span, strict=True)
        if (xi - a) <= 1e-6 * (s if math.isfinite(s) else max(abs(xi), 1.0))
        or (math.isfinite(b) and b - xi <= 1e-6 * s)
    )
    return FitResult(
        params={nm: float(v) for nm, v in zip(names, res.x, strict=True)},
        stderr={nm: float(v) for nm, v in zip(names, se, strict=True)},
        n_points=n,
        devices=tuple(sorted({pt.device for pt in points})),
        models=tuple(sorted({pt.model for pt in points})),
        sigma_log=sigma,
        rms_log=float(np.sqrt(np.mean(r**2))),
        converged=bool(res.success),
        message=str(res.message),
        at_bound=at_bound,
        prior_source=prior.source if prior else "",
    )
