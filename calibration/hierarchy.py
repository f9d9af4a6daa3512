"""One speed model across devices, families and backends: covariates + family and device random effects.

Every free speed parameter theta_j (``estimator.physics.coefficients.PARAMS`` rows that calibration fits,
decode and prefill together) is modelled per *unit* u = (device, engine, backend) in its transformed space
(``coefficients.to_eta`` / ``from_eta``: soft-capped log for efficiencies, log for rates and times)::

    eta_uj = offset_uj + sum_c beta_jc x_uc + a_j[family(u)] + b_j[device(u)]

* offset: the shipped prior (estimator/data/prior_coefficients.json) of the device kind, so beta = 0 is the
  prior;
* x: the device covariates of the parameter's groups (``estimator.physics.covariates``: engine, backend,
  backend maturity, vendor, kind, year, memory technology, ln bandwidth, die count, published achievable
  bandwidth), and the record-level ``build`` and ``settings`` (``record_covariates``: a llama.cpp build
  of 2024; a run with a non-default kernel setting such as --no-repack);
  prior beta ~ N(0, PRIOR_INTERCEPT) for the intercept "1", N(mean, PRIOR_COVARIATE x PRIOR_COVARIATE_PHASE)
  for the others (a parameter may set its own: ``Param.intercept_sd`` / ``covariate_sd``, the i-quant ratios;
  mean 1 for ``bw_measured``: the published fraction moves bw_eff one for one, 0 otherwise;
  prefill's covariate scale halved, chosen by cross-validation: docs/calibration.md "Robust loss");
* a, b: family and device random effects (the parameter's ``effects``), a ~ N(0, tau_family_j^2),
  b ~ N(0, tau_device_j^2).

A device nobody measured gets offset + x beta + a[its family] (0 when the family is unmeasured too): it
inherits from devices *like it*, not only from its family mean.  The time of each point is the estimator's
own formula on the point's parameters (calibration.features.phase_seconds: speed.step_s / prefill_time), so
decode and prefill are one fit: the prefill memory term uses the device's decode bw_eff and batched decode
the prefill compute roof, as estimator.physics.speed.merged_params borrows them.  calibration.fit solves it.
The same structure serves the serving parameters (``fitted_params(("serving",))``; calibration.serving): a
design is built for whichever parameter rows a fit names, over the units of its points.

Scales: the prior of beta (PRIOR_INTERCEPT, PRIOR_COVARIATE), and the random-effect scales tau_j estimated per
fit (calibration.fit.estimate_scales): the standard deviation (ddof 1) of the fitted effects of the groups
(families / devices) with >= MIN_POINTS_FOR_TAU points, clipped to [TAU_MIN, TAU_MAX] (family effects at most
TAU_FAMILY_CAP, see there; TAU_DEFAULT with fewer than MIN_GROUPS_FOR_TAU such groups): the spread between
well-measured groups, their common offset being the covariates' part.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from calibration.features import SpeedPoint
from estimator.physics import covariates as cov
from estimator.physics.coefficients import EFF, PARAMS, RATE, TIME, Param, from_eta

# decode and prefill are one fit; the serving rows of PARAMS are the serving fit's (calibration.serving)
SPEED_PHASES = ("decode", "prefill")
PRIOR_INTERCEPT = {EFF: 1.0, RATE: 1.0, TIME: 2.0}  # eta units: the shipped prior is a weak anchor
PRIOR_COVARIATE = {EFF: 0.5, RATE: 0.5, TIME: 1.0}
# per phase factor on PRIOR_COVARIATE (1 when absent): chosen by cross-validation (docs/calibration.md)
PRIOR_COVARIATE_PHASE: dict[str, float] = {"prefill": 0.5}
COVARIATE_PRIOR_MEAN = {
    ("decode.bw_eff", "bw_measured"): 1.0,
    ("prefill.flops_abs_tflops", "ln_cpu_size"): 1.0,
}
TAU_DEFAULT = {EFF: 0.3, RATE: 0.3, TIME: 0.5}
TAU_MIN = 0.05
TAU_MAX = {EFF: 1.0, RATE: 1.0, TIME: 2.0}
# Family effects are capped: with a family scale as large as the well-measured families' spread (~0.3), the
# covariate coefficients average the families one vote each, and the dozen one-row families (old parts, odd
# backends) pull them away from the well-measured ones.  Chosen by cross-validation among 0.05 / 0.1 / 0.15 /
# estimated (docs/calibration.md): leave-one-family-out decode 9.6-10.3 % at a cap of 0.05-0.15 against 22.5 %
# estimated, leave-one-device-out prefill 13.7-14.3 % at 0.1-0.15.
TAU_FAMILY_CAP = 0.15
MIN_POINTS_FOR_TAU = 10
MIN_GROUPS_FOR_TAU = 3
SIGMA_START = 0.1
SIGMA_FLOOR = 0.01


def fitted_params(phases: Sequence[str] = SPEED_PHASES) -> tuple[Param, ...]:
    """The parameters one fit of ``phases`` estimates (the PARAMS rows with a ``fit``).  The speed fit
    (default): decode ``fit="all"``, prefill ``"all"``, ``"peak"`` and ``"absolute"`` (flops_abs_tflops: only
    devices without a datasheet peak inform it); the serving fit: ``("serving",)``."""
    return tuple(p for p in PARAMS if p.fit and p.phase in phases)


def unit_key(p: SpeedPoint) -> tuple[str, str, str, str, str]:
    """(device, engine, backend, build era, settings) of a point: one row of the covariate table.  The era
    (``SpeedPoint.era``, calibration.dataset.record_era) and the settings (``SpeedPoint.settings``,
    calibration.dataset.record_settings) are a record's, not a device's: the rows of one device from builds
    of 2024 and from current ones, or run with --no-repack and with the defaults, are units sharing the
    device's effects."""
    return (p.device, p.engine, cov.normalise_backend(p.backend), p.era, p.settings)


def build_covariates(era: str, groups) -> dict[str, float]:
    """The record-level covariate of group ``build``: ``build=<era>`` = 1 for a unit of an older build (a
    current build, era "", is the reference level, which the estimator predicts)."""
    return {f"build={era}": 1.0} if era and "build" in groups else {}


def settings_covariates(settings: str, groups) -> dict[str, float]:
    """The record-level covariates of group ``settings``: ``setting=<name>`` = 1 for each non-default
    setting of a unit (``settings`` joined by "+"; the default run, "", is the reference level)."""
    if not settings or "settings" not in groups:
        return {}
    return {f"setting={name}": 1.0 for name in settings.split("+")}


def record_covariates(unit: tuple[str, str, str, str, str], groups) -> dict[str, float]:
    """Both record-level covariate groups (build, settings) of a unit (``unit_key``)."""
    return build_covariates(unit[3], groups) | settings_covariates(unit[4], groups)


@dataclass
class Design:
    """The linear predictors of every fitted parameter over the units of a point set.

    units: (device, engine, backend, build era, settings) rows with their hardware and family; ``names[j]``:
    the columns of parameter j's block of z (``"cov:<name>"``, ``"family:<f>"``, ``"device:<d>"``); ``A[j]``:
    units x block (sparse); ``offset[:, j]``; prior means and kinds per column.
    """

    params: tuple[Param, ...]
    units: list[tuple[str, str, str, str, str]]
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
        xs = [cov.covariates(hw, u[1], u[2], par.covariates) | record_covariates(u, par.covariates)
              for u, hw in zip(units, hardware, strict=True)]  # fmt: skip
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
    """Noise scale per stratum (ln units; the phase, or ``serving.<metric>``) and random-effect scale per
    (parameter index, effect)."""

    sigma: dict[str, float]
    tau: dict[tuple[int, str], float]


def tau_max(kind: str, effect: str) -> float:
    return min(TAU_MAX[kind], TAU_FAMILY_CAP) if effect == "family" else TAU_MAX[kind]


def default_scales(design: Design, strata: Sequence[str] = SPEED_PHASES) -> Scales:
    tau = {}
    for j, p in enumerate(design.params):
        for eff in p.effects:
            tau[(j, eff)] = min(TAU_DEFAULT[p.kind], tau_max(p.kind, eff))
    return Scales({s: SIGMA_START for s in strata}, tau)


def prior_scale(design: Design, scales: Scales) -> np.ndarray:
    out = np.empty(design.n_z)
    for i, (kind, j, g) in enumerate(zip(design.col_kind, design.col_param, design.col_group, strict=True)):
        par = design.params[j]
        if kind == "cov":
            phase = par.key.split(".", 1)[0]
            cov = PRIOR_COVARIATE[par.kind] * PRIOR_COVARIATE_PHASE.get(phase, 1.0)
            if par.covariate_sd is not None:
                cov = par.covariate_sd
            intercept = PRIOR_INTERCEPT[par.kind] if par.intercept_sd is None else par.intercept_sd
            out[i] = intercept if g == "1" else cov
        else:
            out[i] = scales.tau[(j, kind)]
    return out


def group_points(points: Sequence[SpeedPoint], key) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        out[key(p)].append(i)
    return dict(out)
