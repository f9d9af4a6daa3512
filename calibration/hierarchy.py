"""One speed model across devices, families and backends: covariates + family and device random effects.

Every free speed parameter theta_j (``estimator.physics.coefficients.PARAMS`` rows that calibration fits,
decode and prefill together) is modelled per *unit* u = (device, engine, backend) in its transformed space
(``coefficients.to_eta`` / ``from_eta``: soft-capped log for efficiencies, log for rates and times)::

    eta_uj = offset_uj + sum_c beta_jc x_uc + a_j[family(u)] + b_j[device(u)]

* offset: the shipped prior (estimator/data/prior_coefficients.json) of the device kind, so beta = 0 is the
  prior;
* x: the device covariates of the parameter's groups (``estimator.physics.covariates``: engine, backend,
  vendor, kind, memory technology, ln bandwidth, die count, published achievable bandwidth, FLOP per byte);
  prior beta ~ N(0, PRIOR_INTERCEPT) for the intercept "1", N(mean, PRIOR_COVARIATE) for the others (mean 1
  for ``bw_measured``: the published fraction moves bw_eff one for one, 0 otherwise);
* a, b: family and device random effects (the parameter's ``effects``), a ~ N(0, tau_family_j^2),
  b ~ N(0, tau_device_j^2).

A device nobody measured gets offset + x beta + a[its family] (0 when the family is unmeasured too): it
inherits from devices *like it*, not only from its family mean.  The time of each point is the estimator's
own formula on the point's parameters (calibration.features.phase_seconds: speed.step_s / prefill_time), so
decode and prefill are one fit: the prefill memory term uses the device's decode bw_eff and batched decode
the prefill compute roof, as estimator.physics.speed.merged_params borrows them.

Objective (scipy.optimize.least_squares, trf, sparse lsmr, soft_l1 with f_scale 2):
    data residual  (ln t_pred - ln t_meas) / sigma_phase
    prior residual (z - prior mean) / prior scale         for every beta, a, b
Jacobian: exact chain rule through the linear predictor, d ln t_i / d eta_ij by a finite difference of all
points at once per parameter.  Noise and shrinkage scales are estimated, not fixed (``fit_model``):
sigma_phase = 1.4826 MAD of the residuals of a first pass; tau_j = RMS of the fitted effects of the groups
(families / devices) with >= MIN_POINTS_FOR_TAU points, clipped to [TAU_MIN, TAU_MAX] (TAU_DEFAULT with
fewer than MIN_GROUPS_FOR_TAU such groups); then a second pass.  Every cross-validation fold repeats both
estimates on its own data (calibration.validate).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.optimize import least_squares

from calibration import features as feat
from calibration.fit import SpeedPoint
from estimator.physics import covariates as cov
from estimator.physics.coefficients import EFF, PARAMS, RATE, TIME, Param, from_eta

PRIOR_INTERCEPT = {EFF: 1.0, RATE: 1.0, TIME: 2.0}  # eta units: the shipped prior is a weak anchor
PRIOR_COVARIATE = {EFF: 0.5, RATE: 0.5, TIME: 1.0}
COVARIATE_PRIOR_MEAN = {("decode.bw_eff", "bw_measured"): 1.0}
TAU_DEFAULT = {EFF: 0.3, RATE: 0.3, TIME: 0.5}
TAU_MIN = 0.05
TAU_MAX = {EFF: 1.0, RATE: 1.0, TIME: 2.0}
MIN_POINTS_FOR_TAU = 10
MIN_GROUPS_FOR_TAU = 3
SIGMA_START = 0.1
SIGMA_FLOOR = 0.01
FD_STEP = 1e-5
LOSS, F_SCALE = "soft_l1", 2.0


def fitted_params() -> tuple[Param, ...]:
    """The parameters one fit estimates: decode ``fit="all"``, prefill ``"all"``, ``"peak"`` and
    ``"absolute"`` (flops_abs_tflops: only devices without a datasheet peak inform it)."""
    return tuple(p for p in PARAMS if p.fit)


def unit_key(p: SpeedPoint) -> tuple[str, str, str]:
    """(device, engine, backend) of a point: one row of the covariate table."""
    return (p.device, p.engine, cov.normalise_backend(p.backend))


@dataclass
class Design:
    """The linear predictors of every fitted parameter over the units of a point set.

    units: (device, engine, backend) rows with their hardware and family; ``names[j]``: the columns of
    parameter j's block of z (``"cov:<name>"``, ``"family:<f>"``, ``"device:<d>"``); ``A[j]``: units x block
    (sparse); ``offset[:, j]``; prior means and kinds per column.
    """

    params: tuple[Param, ...]
    units: list[tuple[str, str, str]]
    hardware: list
    family: list[str]
    kind: list[str]
    names: list[list[str]]
    A: list
    offset: np.ndarray
    block: list[slice]
    prior_mean: np.ndarray
    col_kind: list[str]  # "cov" | "family" | "device" per z column
    col_param: np.ndarray  # parameter index per z column
    col_group: list[str]  # covariate name / family / device per z column

    @property
    def n_z(self) -> int:
        return int(self.prior_mean.size)

    def eta(self, z: np.ndarray) -> np.ndarray:
        """units x params transformed values."""
        return self.offset + np.column_stack([self.A[j] @ z[self.block[j]] for j in range(len(self.params))])

    def theta(self, z: np.ndarray) -> np.ndarray:
        eta = self.eta(z)
        return np.column_stack([from_eta(p, eta[:, j]) for j, p in enumerate(self.params)])


def _prior_offsets(hardware, params: Sequence[Param]) -> np.ndarray:
    """eta of the shipped prior of each unit's device kind (``coefficients.prior_eta``: what the estimator
    adds back at prediction time)."""
    from estimator.physics.coefficients import _prior_entries, prior_eta

    entries = _prior_entries()
    return np.array([[prior_eta(p, hw.kind or "gpu", entries) for p in params] for hw in hardware])


def build_design(points: Sequence[SpeedPoint], params: Sequence[Param] | None = None) -> Design:
    """The design of a point set: every unit and every family / device the points name (a fold's held-out
    units keep their rows, with no data their effects stay at 0)."""
    params = tuple(params or fitted_params())
    first: dict[tuple, SpeedPoint] = {}
    for p in points:
        first.setdefault(unit_key(p), p)
    units = sorted(first)
    hardware = [first[u].hardware for u in units]
    family = [first[u].family for u in units]
    families = sorted(set(family))
    devices = sorted({u[0] for u in units})
    names, mats, blocks, means, kinds, cparam, cgroup = [], [], [], [], [], [], []
    start = 0
    for j, par in enumerate(params):
        xs = [cov.covariates(hw, u[1], u[2], par.covariates) for u, hw in zip(units, hardware, strict=True)]
        cov_names = ["1"] + sorted({k for x in xs for k in x})
        cols = [f"cov:{c}" for c in cov_names]
        rows, cidx, vals = [], [], []
        for ui, x in enumerate(xs):
            rows.append(ui)
            cidx.append(0)
            vals.append(1.0)
            for c, v in x.items():
                rows.append(ui)
                cidx.append(cov_names.index(c))
                vals.append(v)
        nc = len(cols)
        if "family" in par.effects:
            for ui, f in enumerate(family):
                rows.append(ui)
                cidx.append(nc + families.index(f))
                vals.append(1.0)
            cols += [f"family:{f}" for f in families]
        nd = len(cols)
        if "device" in par.effects:
            for ui, u in enumerate(units):
                rows.append(ui)
                cidx.append(nd + devices.index(u[0]))
                vals.append(1.0)
            cols += [f"device:{d}" for d in devices]
        mats.append(sparse.csr_matrix((vals, (rows, cidx)), shape=(len(units), len(cols))))
        names.append(cols)
        blocks.append(slice(start, start + len(cols)))
        start += len(cols)
        for c in cols:
            kind, _, group = c.partition(":")
            kinds.append(kind)
            cparam.append(j)
            cgroup.append(group)
            means.append(COVARIATE_PRIOR_MEAN.get((par.key, group), 0.0) if kind == "cov" else 0.0)
    return Design(
        params=params,
        units=units,
        hardware=hardware,
        family=family,
        kind=[hw.kind or "gpu" for hw in hardware],
        names=names,
        A=mats,
        offset=_prior_offsets(hardware, params),
        block=blocks,
        prior_mean=np.asarray(means, dtype=float),
        col_kind=kinds,
        col_param=np.asarray(cparam),
        col_group=cgroup,
    )


@dataclass
class Scales:
    """Noise scale per phase (ln units) and random-effect scale per (parameter index, effect)."""

    sigma: dict[str, float]
    tau: dict[tuple[int, str], float]


def default_scales(design: Design) -> Scales:
    tau = {}
    for j, p in enumerate(design.params):
        for eff in p.effects:
            tau[(j, eff)] = TAU_DEFAULT[p.kind]
    return Scales({"decode": SIGMA_START, "prefill": SIGMA_START}, tau)


def prior_scale(design: Design, scales: Scales) -> np.ndarray:
    out = np.empty(design.n_z)
    for i, (kind, j, g) in enumerate(zip(design.col_kind, design.col_param, design.col_group, strict=True)):
        pk = design.params[j].kind
        if kind == "cov":
            out[i] = PRIOR_INTERCEPT[pk] if g == "1" else PRIOR_COVARIATE[pk]
        else:
            out[i] = scales.tau[(j, kind)]
    return out


class Problem:
    """Points of both phases stacked against a design: residuals and the sparse Jacobian of the objective."""

    def __init__(self, points: Sequence[SpeedPoint], design: Design):
        self.points = list(points)
        self.design = design
        uidx = {u: i for i, u in enumerate(design.units)}
        unit_of = lambda p: uidx[unit_key(p)]  # noqa: E731
        stacked = [feat.stack_phase(self.points, ph, unit_of) for ph in ("decode", "prefill")]
        self.arrays = [a for a in stacked if a is not None]
        keys = [p.key for p in design.params]
        self.inputs = {a.phase: {n: keys.index(k) for n, k in feat.phase_inputs(a.phase, keys).items()}
                       for a in self.arrays}  # fmt: skip
        # point-level selection of each block: rows = the phase arrays' points in order
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
        self.phase_of = np.concatenate([[a.phase] * len(a.index) for a in self.arrays]) if self.arrays else []
        self.offsets = [0]
        for a in self.arrays:
            self.offsets.append(self.offsets[-1] + len(a.index))

    def log_times(self, eta_units: np.ndarray) -> np.ndarray:
        """ln seconds of every point (phase arrays in order) for unit-level transformed values."""
        out = np.empty(self.n)
        for k, a in enumerate(self.arrays):
            eta = eta_units[a.unit]
            params = {n: from_eta(self.design.params[j], eta[:, j]) for n, j in self.inputs[a.phase].items()}
            t = feat.phase_seconds(a, params)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[self.offsets[k] : self.offsets[k + 1]] = np.log(t)
        return out

    def gradient(self, eta_units: np.ndarray, base: np.ndarray) -> np.ndarray:
        """points x params: d ln t_i / d eta_ij (forward differences, all points of a parameter at once)."""
        g = np.zeros((self.n, len(self.design.params)))
        used = {j for m in self.inputs.values() for j in m.values()}
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
    residuals: np.ndarray  # ln(t_pred / t_meas) of the problem's points, phase arrays in order
    converged: bool
    message: str
    n_points: dict[str, int] = field(default_factory=dict)
    train: list | None = None  # the points a cross-validation fold was fitted on (kept when asked)

    @property
    def theta(self) -> np.ndarray:
        return self.design.theta(self.z)


def solve(problem: Problem, scales: Scales, z0: np.ndarray | None = None, max_nfev: int = 60):
    """One bounded-free robust fit of z for fixed scales (module doc)."""
    d = problem.design
    mean = d.prior_mean
    ps = prior_scale(d, scales)
    sig = np.array([scales.sigma[ph] for ph in problem.phase_of]) if problem.n else np.zeros(0)
    z0 = mean.copy() if z0 is None else z0.copy()
    cache: dict = {}

    def data_part(z):
        key = z.tobytes()
        if cache.get("key") != key:
            eta = d.eta(z)
            lt = problem.log_times(eta)
            bad = ~np.isfinite(lt)
            lt = np.where(bad, problem.y + 30.0, lt)
            cache.update(key=key, eta=eta, lt=lt)
        return cache["eta"], cache["lt"]

    def fun(z):
        _, lt = data_part(z)
        return np.concatenate([(lt - problem.y) / sig, (z - mean) / ps])

    def jac(z):
        eta, lt = data_part(z)
        g = problem.gradient(eta, lt)
        jd = problem.M.copy()
        jd.data = jd.data * g[problem.nz_row, problem.nz_param] / sig[problem.nz_row]
        return sparse.vstack([jd, sparse.diags(1.0 / ps)], format="csr")

    res = least_squares(fun, z0, jac=jac, method="trf", tr_solver="lsmr", loss=LOSS, f_scale=F_SCALE,
                        x_scale="jac", max_nfev=max_nfev)  # fmt: skip
    _, lt = data_part(res.x)
    return res.x, lt - problem.y, bool(res.success), str(res.message)


def estimate_scales(problem: Problem, z: np.ndarray, resid: np.ndarray, old: Scales) -> Scales:
    """Noise scale per phase from the residuals, random-effect scales from the well-measured groups."""
    d = problem.design
    sigma = {}
    for ph in ("decode", "prefill"):
        r = resid[np.asarray(problem.phase_of) == ph] if problem.n else np.zeros(0)
        sigma[ph] = max(SIGMA_FLOOR, 1.4826 * float(np.median(np.abs(r - np.median(r))))) if r.size >= 10 \
            else old.sigma.get(ph, SIGMA_START)  # fmt: skip
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
            tau[(j, eff)] = float(np.clip(math.sqrt(float(np.mean(np.square(vals)))), TAU_MIN, TAU_MAX[kind]))
        else:
            tau[(j, eff)] = TAU_DEFAULT[kind]
    return Scales(sigma, tau)


def fit_model(
    points: Sequence[SpeedPoint],
    design: Design | None = None,
    z0: np.ndarray | None = None,
    scales: Scales | None = None,
    passes: int = 2,
) -> FitState:
    """Fit z with the noise and shrinkage scales estimated from these points (module doc).

    ``design``: reuse a design (cross-validation folds keep the full set's units, their held-out effects at
    0); ``z0`` / ``scales``: warm start (the scales are re-estimated here all the same).
    """
    design = design or build_design(points)
    problem = Problem(points, design)
    scales = scales or default_scales(design)
    z, resid, ok, msg = solve(problem, scales, z0)
    for _ in range(passes - 1):
        scales = estimate_scales(problem, z, resid, scales)
        z, resid, ok, msg = solve(problem, scales, z)
    n = Counter(p.phase for p in points)
    return FitState(design, z, scales, resid, ok, msg, dict(n), list(points))


def predict_log_ratio(state: FitState, points: Sequence[SpeedPoint]) -> np.ndarray:
    """ln(t_pred / t_meas) of ``points`` (whose units are in the state's design) under the fitted z, in the
    order of ``points``."""
    problem = Problem(points, state.design)
    lt = problem.log_times(state.design.eta(state.z))
    r = lt - problem.y
    order = np.concatenate([a.index for a in problem.arrays])
    out = np.empty(len(points))
    out[order] = r
    return out


def group_points(points: Sequence[SpeedPoint], key) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        out[key(p)].append(i)
    return dict(out)
