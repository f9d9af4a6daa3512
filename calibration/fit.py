"""Fitting the speed model (calibration.hierarchy's structure) to measured points, and predicting held-out
ones.

``fit_model`` solves for z (covariate coefficients, family and device effects; calibration.hierarchy)::

    data residual  (ln t_pred - ln t_meas) / sigma_stratum    t_pred: the estimator's own formulas on arrays
    prior residual (z - prior mean) / prior scale              for every beta, family and device effect

with ``scipy.optimize.least_squares`` (trf, sparse lsmr) on the robust loss LOSS of the data rows
(``robust_rows``; Cauchy at F_SCALE = 2 noise scales: c^2 ln(1 + (r/c)^2) / 2, chosen by cross-validation,
docs/calibration.md "Robust loss") and squares of the prior rows: the Jacobian is the exact chain rule
through the linear predictors, d ln t_i / d eta_ij by one finite difference of all points
per parameter.  Noise and shrinkage scales are estimated (``estimate_scales``: sigma_stratum = 1.4826 MAD of
the residuals of a pass; tau from the well-measured groups, calibration.hierarchy), then the fit runs once
more.
Units: seconds (times), ln units (residuals and scales).

What is fitted is pluggable (``TimeModel``): a set of PARAMS phases and the vectorised time function of
their points.  ``SPEED`` is decode and prefill (calibration.features: one fit, each phase borrowing the
other's terms as the estimator does); calibration.serving plugs in the serving model (TTFT / TPOT at
concurrency) the same way.  A *stratum* is an error group (``SpeedPoint.stratum``: the phase, or
``serving.ttft`` / ``serving.tpot``); each stratum is a noise group with its own sigma, and fitbench's own
runs in it another (``SpeedPoint.noise_group``: ``decode:own``, ``prefill:own``), so that one host's misfit
does not set the published points' noise scale.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.optimize import least_squares

from calibration import features as feat
from calibration.features import SpeedPoint  # noqa: F401 - the fitted point, re-exported
from calibration.hierarchy import (
    MIN_GROUPS_FOR_TAU,
    MIN_POINTS_FOR_TAU,
    SIGMA_FLOOR,
    SIGMA_START,
    SPEED_PHASES,
    TAU_DEFAULT,
    TAU_MIN,
    Design,
    Scales,
    build_design,
    default_scales,
    fitted_params,
    prior_scale,
    tau_max,
    unit_key,
)
from estimator.physics.coefficients import EFF, RATE, TIME, from_eta  # noqa: F401 - kinds re-exported

FD_STEP = 1e-5
# robust loss of the data rows (a RHO key; F_SCALE = c in noise units; robust_rows); chosen by
# cross-validation (docs/calibration.md, "Robust loss")
LOSS, F_SCALE = "cauchy", 2.0
MAX_NFEV = 200  # every fit and fold converges well within it (the fit records converged)


@dataclass(frozen=True)
class TimeModel:
    """A set of phases and the vectorised time function of their points: what a Problem evaluates.

    ``phases``: the PARAMS phases whose fitted rows the design holds (``hierarchy.fitted_params``);
    ``strata``: the noise groups (one sigma each; ``SpeedPoint.stratum``);
    ``stack(points, unit_of)``: the points as blocks evaluated at once, each with ``index`` (into the points),
    ``unit`` (design row per point), ``log_measured`` (ln measured seconds per point), ``strata`` (per point)
    and ``row_unit`` (design row per evaluation row: the rows the parameter arrays are given for);
    ``inputs(block, keys)``: {name the block's formula reads: the fitted key ``phase.name`` supplying it};
    ``seconds(block, params)``: predicted seconds per point of the block from ``params`` (arrays per
    evaluation row).
    """

    phases: tuple[str, ...]
    strata: tuple[str, ...]
    stack: Callable[[Sequence[SpeedPoint], Callable], list]
    inputs: Callable[[object, Sequence[str]], dict[str, str]]
    seconds: Callable[[object, dict], np.ndarray]


def _speed_stack(points: Sequence[SpeedPoint], unit_of) -> list:
    stacked = [feat.stack_phase(points, ph, unit_of) for ph in SPEED_PHASES]
    return [a for a in stacked if a is not None]


SPEED = TimeModel(
    phases=SPEED_PHASES,
    strata=SPEED_PHASES,
    stack=_speed_stack,
    inputs=lambda a, keys: feat.phase_inputs(a.phase, keys),
    seconds=feat.phase_seconds,
)


class Problem:
    """Points stacked against a design (the blocks of ``model``, decode and prefill by default): residuals and
    the sparse Jacobian of the objective."""

    def __init__(self, points: Sequence[SpeedPoint], design: Design, model: TimeModel = SPEED):
        self.points = list(points)
        self.design = design
        self.model = model
        uidx = {u: i for i, u in enumerate(design.units)}
        unit_of = lambda p: uidx[unit_key(p)]  # noqa: E731
        self.arrays = model.stack(self.points, unit_of)
        keys = [p.key for p in design.params]
        self.inputs = [{n: keys.index(k) for n, k in model.inputs(a, keys).items()} for a in self.arrays]
        # point-level selection of each block: rows = the blocks' points in order
        order = np.concatenate([a.unit for a in self.arrays]) if self.arrays else np.zeros(0, int)
        self.n = int(order.size)
        sel = sparse.csr_matrix(
            (np.ones(self.n), (np.arange(self.n), order)), shape=(self.n, len(design.units))
        )
        m = sparse.hstack([sel @ a for a in design.A], format="csr")
        self.M = m
        self.nz_row = np.repeat(np.arange(self.n), np.diff(m.indptr))
        self.nz_param = design.col_param[m.indices]
        self.y = np.concatenate([a.log_measured for a in self.arrays]) if self.arrays else np.zeros(0)
        # the noise group of every row (SpeedPoint.noise_group: the stratum; fitbench's own runs apart)
        rows = np.concatenate([np.asarray(a.index) for a in self.arrays]) if self.arrays else []
        self.phase_of = [self.points[int(i)].noise_group for i in rows]
        self.offsets = [0]
        for a in self.arrays:
            self.offsets.append(self.offsets[-1] + len(a.index))

    def log_times(self, eta_units: np.ndarray) -> np.ndarray:
        """ln seconds of every point (blocks in order) for unit-level transformed values."""
        out = np.empty(self.n)
        for k, a in enumerate(self.arrays):
            eta = eta_units[a.row_unit]
            params = {n: from_eta(self.design.params[j], eta[:, j]) for n, j in self.inputs[k].items()}
            t = self.model.seconds(a, params)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[self.offsets[k] : self.offsets[k + 1]] = np.log(t)
        return out

    def gradient(self, eta_units: np.ndarray, base: np.ndarray) -> np.ndarray:
        """points x params: d ln t_i / d eta_ij (forward differences, all points of a parameter at once)."""
        g = np.zeros((self.n, len(self.design.params)))
        used = {j for m in self.inputs for j in m.values()}
        for j in used:
            e = eta_units.copy()
            e[:, j] += FD_STEP
            g[:, j] = (self.log_times(e) - base) / FD_STEP
        return np.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)


@dataclass
class FitState:
    """A fitted model: the design, z, the scales it was fitted with, and per-point in-sample residuals."""

    design: Design
    z: np.ndarray
    scales: Scales
    residuals: np.ndarray  # ln(t_pred / t_meas) of the problem's points, blocks in order
    converged: bool
    message: str
    n_points: dict[str, int] = field(default_factory=dict)
    train: list | None = None  # the points a cross-validation fold was fitted on (kept when asked)
    model: TimeModel = SPEED  # what was fitted (its folds and predictions use the same)

    @property
    def theta(self) -> np.ndarray:
        return self.design.theta(self.z)


# rho(z) of the robust losses, z = (r / c)^2, as scipy.optimize.least_squares defines them, with rho'(z)
RHO = {
    "linear": (lambda z: z, lambda z: np.ones_like(z)),
    "huber": (
        lambda z: np.where(z <= 1.0, z, 2.0 * np.sqrt(z) - 1.0),
        lambda z: 1.0 / np.sqrt(np.maximum(z, 1.0)),
    ),
    "soft_l1": (lambda z: 2.0 * (np.sqrt(1.0 + z) - 1.0), lambda z: 1.0 / np.sqrt(1.0 + z)),
    "cauchy": (lambda z: np.log1p(z), lambda z: 1.0 / (1.0 + z)),
}


def robust_rows(r: np.ndarray, loss: str, c: float) -> tuple[np.ndarray, np.ndarray]:
    """Residual rows whose half sum of squares is the robust loss of ``r`` (noise units), and dF/dr.

    Per row the loss is c^2 rho(z) / 2 with z = (r / c)^2 (``RHO``: huber, soft_l1, cauchy as scipy defines
    them; linear: r^2 / 2).  Row F(r) = sign(r) c sqrt(rho(z)), so F^2 / 2 is the loss; dF/dr = rho'(z) r / F
    (1 at r = 0).  Plain least squares on F is the robust problem with a Gauss-Newton model that keeps
    curvature everywhere (scipy's own ``loss=`` rescaling zeroes it on Huber's linear part and stalls here).
    """
    rho, drho = RHO[loss]
    z = (r / c) ** 2
    f = np.sign(r) * c * np.sqrt(rho(z))
    small = np.abs(f) < 1e-12
    df = np.where(small, 1.0, drho(z) * r / np.where(small, 1.0, f))
    return f, df


def solve(problem: Problem, scales: Scales, z0: np.ndarray | None = None, max_nfev: int = MAX_NFEV):
    """One robust fit of z for fixed scales (module doc): the data rows r_i = (ln t_pred - ln t_meas) / sigma
    under the robust loss LOSS with c = F_SCALE (``robust_rows``), the prior rows Gaussian; one trust-region
    least-squares solve.  A test checks the result against a direct minimisation
    of the same objective.  Returns (z, ln residuals of the points, converged, message)."""
    d = problem.design
    mean = d.prior_mean
    ps = prior_scale(d, scales)
    sig = np.array([noise_scale(scales.sigma, g) for g in problem.phase_of]) if problem.n else np.zeros(0)
    z0 = mean.copy() if z0 is None else z0.copy()
    cache: dict = {}

    def data_part(z):
        key = z.tobytes()
        if cache.get("key") != key:
            eta = d.eta(z)
            lt = problem.log_times(eta)
            bad = ~np.isfinite(lt)
            lt = np.where(bad, problem.y + 30.0, lt)
            r = (lt - problem.y) / sig
            f, df = robust_rows(r, LOSS, F_SCALE)
            cache.update(key=key, eta=eta, lt=lt, f=f, df=df)
        return cache

    def fun(z):
        return np.concatenate([data_part(z)["f"], (z - mean) / ps])

    def jac(z):
        c = data_part(z)
        g = problem.gradient(c["eta"], c["lt"])
        jd = problem.M.copy()
        row = problem.nz_row
        jd.data = jd.data * g[row, problem.nz_param] * (c["df"] / sig)[row]
        return sparse.vstack([jd, sparse.diags(1.0 / ps)], format="csr")

    res = least_squares(fun, z0, jac=jac, method="trf", tr_solver="lsmr", x_scale="jac", max_nfev=max_nfev)
    return res.x, data_part(res.x)["lt"] - problem.y, bool(res.success), str(res.message)


def noise_scale(sigma: dict[str, float], group: str) -> float:
    """The noise scale of a noise group (SpeedPoint.noise_group): its own, else its stratum's (a group
    ``<stratum>:own`` before its first estimate), else the starting scale."""
    return sigma.get(group, sigma.get(group.split(":", 1)[0], SIGMA_START))


def estimate_scales(problem: Problem, z: np.ndarray, resid: np.ndarray, old: Scales) -> Scales:
    """Noise scale per noise group (the strata, fitbench's own runs apart: SpeedPoint.noise_group) from the
    residuals, random-effect scales from the well-measured groups."""
    d = problem.design
    sigma = {}
    groups = set(problem.phase_of) if problem.n else set()
    for ph in sorted(set(problem.model.strata) | groups):
        r = resid[np.asarray(problem.phase_of) == ph] if problem.n else np.zeros(0)
        sigma[ph] = max(SIGMA_FLOOR, 1.4826 * float(np.median(np.abs(r - np.median(r))))) if r.size >= 10 \
            else noise_scale(old.sigma, ph)  # fmt: skip
    # points per family / device (a group's effect is estimated well enough to count when it has many)
    counts: dict[str, Counter] = {"family": Counter(), "device": Counter()}
    for p in problem.points:
        counts["family"][p.family] += 1
        counts["device"][p.device] += 1
    tau = {}
    for j, eff in old.tau:
        blk = d.block[j]
        vals = [z[blk][i] for i, (k, g) in enumerate(zip(d.col_kind[blk], d.col_group[blk], strict=True))
                if k == eff and counts[eff][g] >= MIN_POINTS_FOR_TAU]  # fmt: skip
        kind = d.params[j].kind
        if len(vals) >= MIN_GROUPS_FOR_TAU:
            tau[(j, eff)] = float(np.clip(np.std(vals, ddof=1), TAU_MIN, tau_max(kind, eff)))
        else:
            tau[(j, eff)] = min(TAU_DEFAULT[kind], tau_max(kind, eff))
    return Scales(sigma, tau)


def fit_model(
    points: Sequence[SpeedPoint],
    design: Design | None = None,
    z0: np.ndarray | None = None,
    scales: Scales | None = None,
    passes: int = 2,
    model: TimeModel = SPEED,
) -> FitState:
    """Fit z with the noise and shrinkage scales estimated from these points (module doc).

    ``design``: reuse a design (cross-validation folds keep the full set's units, their held-out effects at
    0); ``z0`` / ``scales``: warm start (the scales are re-estimated here all the same); ``model``: what is
    fitted (decode and prefill by default).
    """
    design = design or build_design(points, fitted_params(model.phases))
    problem = Problem(points, design, model)
    scales = scales or default_scales(design, model.strata)
    z, resid, ok, msg = solve(problem, scales, z0)
    for _ in range(passes - 1):
        scales = estimate_scales(problem, z, resid, scales)
        z, resid, ok, msg = solve(problem, scales, z)
    n = Counter(p.phase for p in points)
    return FitState(design, z, scales, resid, ok, msg, dict(n), list(points), model)


def predict_log_ratio(state: FitState, points: Sequence[SpeedPoint]) -> np.ndarray:
    """ln(t_pred / t_meas) of ``points`` (whose units are in the state's design) under the fitted z, in the
    order of ``points``."""
    problem = Problem(points, state.design, state.model)
    lt = problem.log_times(state.design.eta(state.z))
    r = lt - problem.y
    order = np.concatenate([a.index for a in problem.arrays])
    out = np.empty(len(points))
    out[order] = r
    return out
