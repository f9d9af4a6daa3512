"""Serving calibration: TTFT and TPOT of vLLM / SGLang serving records, fitted as one model across devices.

The model is the estimator's own (``estimator.physics.serving.solve``: the mixed scheduler step on the decode
step formula of ``estimator.physics.speed``, the closed loop and the request queue); its free parameters are
the ``serving`` rows of ``estimator.physics.coefficients.PARAMS``.  They are fitted with the machinery of
decode and prefill (calibration.hierarchy / calibration.fit): per unit u = (device, engine, backend),

    eta_uj = prior offset_j(kind of u) + sum_c beta_jc x_uc + a_j[family(u)] + b_j[device(u)]

with the covariates and effects each serving row names, solved by the same robust least squares; this module
plugs the serving time function into it (``SERVING``, a ``calibration.fit.TimeModel``).  The serving fit is
its own design over the serving points (its own parameters): the step efficiencies it fits are the serving
engines' (vLLM / SGLang on datacenter GPUs), which the decode / prefill records (llama.cpp almost only) do not
measure.  Cross-validation, intervals and coverage are calibration.validate's (lodo / lomo / lofo; the gate:
lodo, lomo for a family with one device), per *stratum* ``serving.ttft`` / ``serving.tpot`` (each with its
own noise scale).

Points (one per measured figure of a record; ``SpeedPoint.extra["metric"]``): ``ttft`` (``ttft_s``) and
``tpot`` (``tpot_s``) of a serving benchmark at a stated concurrency (aiconfigurator silicon rows, ``vllm
bench serve`` / SGLang ``bench_serving`` rows): mode ``serve`` (closed loop), isl / osl = n_prompt / n_gen;
and the ``ttft`` of an offline batch with one output token (mode ``batch``; Argonne's vLLM ``LLM.generate``
rows were such points until their build was known to predate V1, below).
Measured time of a point = the figure itself (seconds); error = |t_meas / t_pred - 1|.  End-to-end latencies
of offline batches are not fitted here: calibration.latency predicts them from the decode / prefill fit.

What is left out, each with its reason (``Rejection``): engines without a profile, and engines whose profile
says their serving records are not fitted (``EngineProfile.fits_serving`` False, the reason in
``serving_not_fitted``): llama.cpp (its speed is the decode / prefill fit) and TensorRT-LLM (fitted with vLLM
and SGLang it moved their held-out figures; its reports use the pooled terms, which tools/engine_check.py
checks on its records out of sample); engine ``other`` rows are SGLang when their build says so;
disaggregated rows (separate prefill and decode workers: another
system), builds older than the scheduler the engine profile describes (``EngineProfile.serving_since``: vLLM
before its V1 engine; ``calibration.dataset.record_build``: a record's ``engine_version``, else what its
notes or its source state, e.g. Argonne's 2024 runs), a precision the record does not state, pipeline-parallel
instances, instances of more than ``MAX_DEVICES`` devices, requests longer than the model's context (the
engine truncates or refuses them), devices without a datasheet TFLOPS figure, and models / quants / devices
the catalog does not know.
Throughput-only figures (``output_tok_s`` / ``total_tok_s``: derived from the same runs) and ``itl_s`` (the
same steps as TPOT) are not points.

Assumption (stated, checked by the fit): the aiconfigurator silicon rows do not state the KV-cache dtype; rows
of 8- and 4-bit float precision are sized with an fp8 KV cache (aiconfigurator pairs fp8 / fp4 GEMMs with an
fp8 KV cache), bf16 otherwise.

Evaluation is vectorised: the points are stacked into blocks of one scheduler shape (engine, captured graph
sizes, mixing, batch mode: the fields ``solve`` needs uniform), one row per record (its TTFT and TPOT points
share it), and ``estimator.physics.serving.solve`` runs once per block on numpy arrays.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from calibration.dataset import Dataset, LoadedRecord, Rejection, record_build
from calibration.features import Resolver, SpeedPoint, _point, check_context, workload_for
from calibration.fit import TimeModel
from calibration.validate import HeldOut, ape_stats
from estimator.engines import engine_names, get_engine
from estimator.specs import SpecError

PHASE = "serving"
# the engines whose profile says their serving records are fitted (vLLM, SGLang)
ENGINES = tuple(e for e in engine_names() if get_engine(e).fits_serving)
METRICS = {"ttft_s": "ttft", "tpot_s": "tpot"}
GATED_METRICS = ("tpot", "ttft")
STRATA = tuple(f"{PHASE}.{m}" for m in METRICS.values())


def lone_request(point) -> bool:
    """A TTFT point of at most ``estimator.physics.serving.LONE_CONCURRENCY`` clients in serve mode: the
    request's own prefill with hardly any queue (the single-stream prefill's evidence)."""
    from estimator.physics.serving import LONE_CONCURRENCY, SERVE

    e = point.extra
    return e.get("mode") == SERVE and (e.get("concurrency") or 0) <= LONE_CONCURRENCY


# Sub-strata: intervals from a subset of a stratum's held-out residuals (not fitted, not gated):
# name -> (stratum, predicate).  serving.ttft_lone: a lone request's TTFT (estimator.physics.stream's
# single-stream prefill and the serving table's rows of <= LONE_CONCURRENCY clients use it).
SUBSTRATA = {f"{PHASE}.ttft_lone": (f"{PHASE}.ttft", lone_request)}
FP_KV_PRECISIONS = ("FP8", "FP8-BLOCK", "NVFP4", "MXFP4")
MAX_DEVICES = 8  # devices of one serving instance the model covers (one node's interconnect)


def record_engine(rec, engines: tuple[str, ...] | None = None) -> str | None:
    """The engine profile of a record among ``engines`` (default ``ENGINES``, the fitted ones): its engine,
    or SGLang for an ``other`` row built with SGLang."""
    engines = ENGINES if engines is None else engines
    if rec.engine in engines:
        return rec.engine
    if rec.engine == "other" and rec.build_info.lower().startswith("sglang") and "sglang" in engines:
        return "sglang"
    return None


def fixed_lengths(rec) -> bool:
    """True when a record's requests all had exactly n_prompt / n_gen tokens (the importer says so:
    ``extra["request_lengths"] == "fixed"``, aiconfigurator's silicon rows); other benchmarks (``vllm bench
    serve`` / SGLang ``bench_serving`` on random datasets) spread their lengths unless they state
    otherwise."""
    return (rec.extra or {}).get("request_lengths") == "fixed"


def is_serving_record(rec) -> bool:
    """True when a record carries a figure this module fits (TTFT or TPOT)."""
    return any(getattr(rec, k) is not None for k in METRICS)


# -------------------------------------------------------------------------------------------- points
def _kv_dtype(rec) -> str:
    if rec.kv_dtype:
        return rec.kv_dtype
    return "fp8" if rec.quant.upper() in FP_KV_PRECISIONS else "bf16"


def _reject(lr: LoadedRecord, why: str) -> Rejection:
    return Rejection(lr.file, lr.line, lr.record.record_id, f"serving: {why}")


def _why_not(rec, engines: tuple[str, ...] | None = None) -> str | None:
    """Why a serving record cannot be fitted (None: it can); ``engines`` as ``record_engine``."""
    if record_engine(rec, engines) is None:
        if rec.engine in engine_names():  # a profile whose serving records are not fitted says why
            return get_engine(rec.engine).serving_not_fitted
        return f"engine {rec.engine!r} has no profile (scheduler and kernels not modelled)"
    if rec.serving_mode == "disagg":
        return "disaggregated serving (separate prefill and decode workers) is not modelled"
    if not rec.quant:
        return "precision not stated"
    if rec.n_prompt < 1 or rec.n_gen < 1:
        return "input / output lengths not stated"
    if (rec.pp_size or 1) > 1:
        return "pipeline parallel serving is not modelled"
    if rec.n_devices > MAX_DEVICES:
        return (
            f"an instance of {rec.n_devices} devices (more than one {MAX_DEVICES}-GPU node, rack-scale "
            "NVLink or wide expert parallelism) is not modelled: the interconnect term is one node's"
        )
    profile = get_engine(record_engine(rec, engines))
    build = record_build(rec, profile.name)
    if not profile.describes_build(build):
        return (
            f"{profile.label} {build} predates {profile.serving_since}, the first build whose scheduler the "
            f"profile describes"
        )
    return None


def serving_points(
    ds: Dataset, resolver: Resolver | None = None, engines: tuple[str, ...] | None = None
) -> tuple[list[SpeedPoint], list[Rejection]]:
    """SpeedPoints (phase ``serving``, ``features`` = the record's scalar ``ServingFeatures``, shared by its
    TTFT and TPOT points) of every usable serving record (``Dataset.serving_records``) of ``engines``
    (default ``ENGINES``: the fitted engines; another engine's for an out-of-sample check such as
    tools/engine_check.py), and the records with a TTFT / TPOT figure that are left out, with why."""
    from estimator.physics import serving as sv
    from estimator.physics.coefficients import prior_table

    resolver = resolver or Resolver()
    points: list[SpeedPoint] = []
    rejected: list[Rejection] = []
    table = prior_table()
    for lr in ds.serving_records:
        r = lr.record
        if not is_serving_record(r):
            continue  # e2e / throughput only: calibration.latency
        why = _why_not(r, engines)
        if why:
            rejected.append(_reject(lr, why))
            continue
        engine = record_engine(r, engines)
        try:
            model, quant, hw = resolver.spec_for(dataclasses.replace(r, engine=engine))
            check_context(model, dataclasses.replace(r, engine=engine))
            if not hw.bandwidth_gbs or not hw.bf16_tflops:
                raise SpecError(f"device {hw.id!r} has no datasheet bandwidth / TFLOPS")
            rec = dataclasses.replace(r, engine=engine, kv_dtype=_kv_dtype(r))
            wl = dataclasses.replace(workload_for(rec), split="tp", n_seq=1)
            serve = r.concurrency is not None
            load = sv.ServingLoad(
                int(r.concurrency if serve else r.batch),
                r.n_prompt,
                r.n_gen,
                sv.SERVE if serve else sv.BATCH,
                equal_lengths=fixed_lengths(r),
            )
            sized = dataclasses.replace(wl, n_ctx=r.n_prompt + r.n_gen)
            cap, state_cap = sv.pool_capacity(model, quant, hw, sized, table)
            f = sv.serving_features(
                model, quant, hw, wl, load, cap, replicas=max(r.dp_size or 1, 1), state_max_requests=state_cap
            )
        except (SpecError, KeyError, ValueError, ZeroDivisionError) as exc:
            rejected.append(_reject(lr, f"features: {exc}"))
            continue
        for field_name, metric in METRICS.items():
            value = getattr(r, field_name)
            if value is None:
                continue
            extra = {"metric": metric, "concurrency": load.concurrency, "isl": r.n_prompt, "osl": r.n_gen,
                     "mode": load.mode, "quant": r.quant}  # fmt: skip
            p = _point(lr, PHASE, f, hw, float(value))
            points.append(dataclasses.replace(p, engine=engine, extra=extra))
    return points, rejected


# ------------------------------------------------------------------------------ vectorised evaluation
# Fields of ServingFeatures that solve() needs uniform within a block (the rest become numpy arrays).
_UNIFORM = ("fp8", "mixes_prefill", "graph_sizes", "batch_mode", "engine", "equal_lengths")


@dataclass
class ServingBlock:
    """Serving points of one scheduler shape, stacked (a calibration.fit.TimeModel block).

    Per point: ``index`` (into the point list), ``unit`` (design row), ``log_measured``, ``strata``,
    ``row`` (its record's row) and ``is_ttft``; per row: ``row_unit`` and the array ``features``.
    """

    index: np.ndarray
    unit: np.ndarray
    log_measured: np.ndarray
    strata: list[str]
    row: np.ndarray
    is_ttft: np.ndarray
    row_unit: np.ndarray
    features: object  # estimator.physics.serving.ServingFeatures with array fields


def _shape_key(f) -> tuple:
    return tuple(getattr(f, k) for k in _UNIFORM if k != "fp8")


def stack(points, unit_of) -> list[ServingBlock]:
    """The serving points as blocks (see ServingBlock): one row per (record features, unit)."""
    from estimator.physics.serving import ServingFeatures

    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        if p.phase == PHASE:
            groups[_shape_key(p.features)].append(i)
    blocks = []
    for key in sorted(groups, key=repr):
        idx = groups[key]
        rows: dict[tuple, int] = {}
        feats, row_unit, row_of = [], [], []
        for i in idx:
            p = points[i]
            rk = (id(p.features), unit_of(p))
            if rk not in rows:
                rows[rk] = len(feats)
                feats.append(p.features)
                row_unit.append(rk[1])
            row_of.append(rows[rk])
        first = feats[0]
        values = {}
        for fld in dataclasses.fields(ServingFeatures):
            if fld.name in _UNIFORM:
                values[fld.name] = getattr(first, fld.name)
            else:
                values[fld.name] = np.array([float(getattr(f, fld.name)) for f in feats])
        values["fp8"] = False  # unused by the step formula (the GEMM rate of the format is in gemm_flops_s)
        pts = [points[i] for i in idx]
        blocks.append(
            ServingBlock(
                index=np.asarray(idx),
                unit=np.asarray([unit_of(p) for p in pts]),
                log_measured=np.log([p.measured_s for p in pts]),
                strata=[p.stratum for p in pts],
                row=np.asarray(row_of),
                is_ttft=np.array([p.extra["metric"] == "ttft" for p in pts]),
                row_unit=np.asarray(row_unit),
                features=ServingFeatures(**values),
            )
        )
    return blocks


def inputs(block: ServingBlock, keys) -> dict[str, str]:  # noqa: ARG001 - every block reads the same
    """{name serving.solve reads: fitted key} of the serving rows among ``keys``."""
    return {k.split(".", 1)[1]: k for k in keys if k.startswith(PHASE + ".")}


def seconds(block: ServingBlock, params: dict) -> np.ndarray:
    """Predicted seconds of every point of ``block`` (``params``: arrays per row): TTFT or TPOT of
    ``estimator.physics.serving.solve`` on the block's features."""
    from estimator.physics.serving import solve

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = solve(block.features, params)
    return np.where(block.is_ttft, s["ttft_s"][block.row], s["tpot_s"][block.row])


SERVING = TimeModel(phases=(PHASE,), strata=STRATA, stack=stack, inputs=inputs, seconds=seconds)


# ------------------------------------------------------------------------------------- summaries
def gate_samples(held: list[HeldOut]) -> list[tuple[tuple, float, str]]:
    """(key (family, engine, backend, metric), ape, scheme) of every gated held-out serving point."""
    out = []
    for h in held:
        p = h.point
        scheme = h.scheme if h.basis != "pooled" else f"{h.scheme} -> pooled"
        out.append(((p.family, p.engine, p.backend, p.extra["metric"]), h.ape, scheme))
    return out


def cv_summary(held: dict[str, list[HeldOut]]) -> dict[str, dict[str, dict]]:
    """Held-out error per scheme, engine and metric: {scheme: {"engine/metric": {n, median, p90}}}
    (``held``: scheme -> held-out predictions, the gate's under "gate")."""
    out: dict[str, dict[str, dict]] = {}
    for scheme, hs in held.items():
        groups: dict[str, list[float]] = defaultdict(list)
        for h in hs:
            groups[f"{h.point.engine}/{h.point.extra['metric']}"].append(h.ape)
            groups[f"all/{h.point.extra['metric']}"].append(h.ape)
        out[scheme] = {}
        for k, v in sorted(groups.items()):
            med, p90 = ape_stats(v)
            out[scheme][k] = {"n": len(v), "median": med, "p90": p90}
    return out


def rejection_reason(r: Rejection) -> str:
    """The reason of a left-out serving record without the ``serving:`` prefix (the report counts them)."""
    return r.reason.removeprefix("serving: ")
