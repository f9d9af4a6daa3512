"""Serving calibration: TTFT, TPOT and batch latencies of vLLM / SGLang records -> serving coefficient sets.

The model is the estimator's own (``estimator.physics.serving``: the mixed scheduler step on the decode step
formula of ``estimator.physics.speed`` and the request queue); its free parameters are the ``serving`` rows of
``estimator.physics.coefficients.PARAMS``.  One serving set is fitted per (hardware family, engine, backend)
in the same three-level hierarchy as decode and prefill (``calibration.hierarchy.fit_hierarchy``: global ->
vendor pool -> family, shrunk towards the shipped prior), cross-validated leave-one-device-out and
leave-one-model-out (``calibration.validate.holdout``), with intervals per metric.

Points (one per measured figure of a record; ``SpeedPoint.extra["metric"]``):

* ``ttft`` (``ttft_s``) and ``tpot`` (``tpot_s``) of a serving benchmark at a stated concurrency
  (aiconfigurator silicon rows, ``vllm bench serve`` / SGLang ``bench_serving`` rows): mode ``serve`` (closed
  loop), isl / osl = n_prompt / n_gen;
* ``e2e`` (``e2e_latency_s``) of an offline batch of ``batch`` requests (Argonne LLM-Inference-Bench: vLLM
  ``LLM.generate``), and ``ttft`` of such a batch with one output token: mode ``batch``.

Measured time of a point = the figure itself (seconds).  Error = |t_meas / t_pred - 1| (as decode and prefill:
the error of the rate 1 / t).  Intervals are of ln(t_meas / t_pred) per metric.

What is left out, each with its reason (``Rejection``): engines without a profile (TensorRT-LLM: its scheduler
and kernels are not modelled; engine ``other`` rows are SGLang when their build says so), disaggregated rows
(separate prefill and decode workers: another system), throughput-only figures (``output_tok_s`` /
``total_tok_s`` are derived from the same runs as TTFT / TPOT / e2e, or suspect), ``itl_s`` (the same steps
as TPOT), a precision the record does not state, instances of more than ``MAX_DEVICES`` devices, requests
longer than the model's context (the engine truncates or refuses them), devices without a datasheet TFLOPS
figure, and models / quants / devices the catalog does not know.

Assumption (stated, checked by the fit): the aiconfigurator silicon rows do not state the KV-cache dtype; rows
of 8- and 4-bit float precision are sized with an fp8 KV cache (aiconfigurator pairs fp8 / fp4 GEMMs with an
fp8 KV cache), bf16 otherwise.

Evaluation is vectorised: points are stacked into bundles of equal scheduler shape (numpy arrays in
``ServingFeatures``) and ``estimator.physics.serving.solve`` runs once per bundle and parameter vector; the
per-point ``predict_s`` the hierarchy calls reads the memoised result.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field

import numpy as np

from calibration.dataset import Dataset, LoadedRecord, Rejection
from calibration.features import Resolver, _point, point_family, workload_for
from calibration.fit import PhaseModel, SpeedPoint
from calibration.hierarchy import Hierarchy, family_key, fit_hierarchy, global_key, pool_key
from calibration.pipeline import _cv_block, _r  # the decode / prefill groups' CV block and rounding
from calibration.validate import MIN_RESIDUALS, HeldOut, ape_stats, holdout, interval, nested_coverage
from estimator.physics.coefficients import fitted_params
from estimator.specs import SpecError

PHASE = "serving"
ENGINES = ("vllm", "sglang")
METRICS = {"ttft_s": "ttft", "tpot_s": "tpot", "e2e_latency_s": "e2e"}
GATED_METRICS = ("tpot", "ttft")
FP_KV_PRECISIONS = ("FP8", "FP8-BLOCK", "NVFP4", "MXFP4")
MAX_DEVICES = 8  # devices of one serving instance the model covers (one node's interconnect)
SERVING_PARAMS = fitted_params(PHASE)


def record_engine(rec) -> str | None:
    """The engine profile of a record: its engine, or SGLang for an ``other`` row built with SGLang."""
    if rec.engine in ENGINES:
        return rec.engine
    if rec.engine == "other" and rec.build_info.lower().startswith("sglang"):
        return "sglang"
    return None


def is_serving_record(rec) -> bool:
    """True when a record carries a serving / batch latency figure this module fits."""
    return any(getattr(rec, k) is not None for k in METRICS)


# ------------------------------------------------------------------------------------------- bundles
@dataclass
class Bundle:
    """Points of one scheduler shape stacked into array features, with a small memo of solved results."""

    key: tuple
    rows: list = field(default_factory=list)  # scalar ServingFeatures
    features: object = None
    memo: OrderedDict = field(default_factory=OrderedDict)
    _last_params: dict | None = None
    _last: dict | None = None

    def stack(self) -> None:
        from estimator.physics.serving import ServingFeatures

        first = self.rows[0]
        uniform = {"fp8", "mixes_prefill", "graph_sizes", "batch_mode", "engine"}
        values = {}
        for f in dataclasses.fields(ServingFeatures):
            if f.name in uniform:
                values[f.name] = getattr(first, f.name)
            else:
                values[f.name] = np.array([float(getattr(r, f.name)) for r in self.rows])
        values["fp8"] = False  # unused by the step formula (the GEMM rate is in gemm_flops_s)
        self.features = ServingFeatures(**values)

    def solved(self, params: dict) -> dict:
        from estimator.physics.serving import solve

        if params is self._last_params:  # calibration.fit.predict_times passes one dict for every point
            return self._last
        key = tuple(sorted((k, float(v)) for k, v in params.items()))
        hit = self.memo.get(key)
        if hit is None:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                hit = solve(self.features, params)
            self.memo[key] = hit
            if len(self.memo) > 8:
                self.memo.popitem(last=False)
        self._last_params, self._last = params, hit
        return hit


@dataclass(frozen=True)
class ServingRef:
    """SpeedPoint.features of a serving point: its bundle, row and metric."""

    bundle: Bundle
    index: int
    metric: str


def predict_s(ref: ServingRef, hardware, params: dict) -> float:  # noqa: ARG001 - device is in the features
    """Predicted seconds of one point: ``estimator.physics.serving.solve`` of its bundle (memoised)."""
    return float(ref.bundle.solved(params)[ref.metric + "_s"][ref.index])


def serving_model() -> PhaseModel:
    """The serving phase: free parameters from PARAMS, prediction through estimator.physics.serving."""
    return PhaseModel(PHASE, SERVING_PARAMS, predict_s)


# -------------------------------------------------------------------------------------------- points
def _kv_dtype(rec) -> str:
    if rec.kv_dtype:
        return rec.kv_dtype
    return "fp8" if rec.quant.upper() in FP_KV_PRECISIONS else "bf16"


def _reject(lr: LoadedRecord, why: str) -> Rejection:
    return Rejection(lr.file, lr.line, lr.record.record_id, f"serving: {why}")


def _why_not(rec) -> str | None:
    """Why a serving record cannot be fitted (None: it can)."""
    if rec.engine == "llama.cpp":
        return "llama.cpp batch latency (llama-bench -pg): its speed is fitted as decode / prefill"
    if record_engine(rec) is None:
        name = "TensorRT-LLM" if rec.engine == "trtllm" else repr(rec.engine)
        return f"engine {name} has no profile (scheduler and kernels not modelled)"
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
    return None


def serving_points(ds: Dataset, resolver: Resolver | None = None) -> tuple[list[SpeedPoint], list[Rejection]]:
    """SpeedPoints (phase ``serving``) of every usable serving record, and the records left out with why."""
    from estimator.physics import serving as sv
    from estimator.physics.serving import ServingLoad

    resolver = resolver or Resolver()
    points: list[SpeedPoint] = []
    rejected: list[Rejection] = []
    bundles: dict[tuple, Bundle] = {}
    table = _prior_table()
    for lr in ds.records:
        r = lr.record
        if not is_serving_record(r):
            continue
        why = _why_not(r)
        if why:
            rejected.append(_reject(lr, why))
            continue
        engine = record_engine(r)
        try:
            model, quant, hw = resolver.spec_for(r)
            if r.n_prompt + r.n_gen > model.max_context:
                raise SpecError(
                    f"requests of {r.n_prompt} + {r.n_gen} tokens exceed the model's context "
                    f"{model.max_context}"
                )
            if not hw.bandwidth_gbs or not hw.bf16_tflops:
                raise SpecError(f"device {hw.id!r} has no datasheet bandwidth / TFLOPS")
            rec = dataclasses.replace(r, engine=engine, kv_dtype=_kv_dtype(r))
            wl = dataclasses.replace(workload_for(rec), split="tp", n_seq=1)
            serve = r.concurrency is not None
            load = ServingLoad(
                int(r.concurrency if serve else r.batch), r.n_prompt, r.n_gen, sv.SERVE if serve else sv.BATCH
            )
            cap = sv.kv_capacity(model, quant, hw, dataclasses.replace(wl, n_ctx=r.n_prompt + r.n_gen), table)
            f = sv.serving_features(model, quant, hw, wl, load, cap, replicas=max(r.dp_size or 1, 1))
        except (SpecError, KeyError, ValueError, ZeroDivisionError) as exc:
            rejected.append(_reject(lr, f"features: {exc}"))
            continue
        family = point_family(r, hw)
        key = (family, engine, r.backend, f.graph_sizes, f.mixes_prefill, f.batch_mode)
        bundle = bundles.setdefault(key, Bundle(key))
        for field_name, metric in METRICS.items():
            value = getattr(r, field_name)
            if value is None:
                continue
            bundle.rows.append(f)
            ref = ServingRef(bundle, len(bundle.rows) - 1, metric)
            serving_extra = {"metric": metric, "concurrency": load.concurrency, "isl": r.n_prompt,
                             "osl": r.n_gen, "mode": load.mode, "quant": r.quant}  # fmt: skip
            p = _point(lr, PHASE, ref, hw, float(value))
            points.append(dataclasses.replace(p, engine=engine, extra=serving_extra))
    for b in bundles.values():
        b.stack()
    return points, rejected


def _prior_table():
    from estimator.physics.coefficients import prior_table

    return prior_table()


# ------------------------------------------------------------------------------------------------ fit
@dataclass
class ServingFit:
    """The serving hierarchy, its held-out predictions and what was left out."""

    points: list[SpeedPoint]
    hierarchy: Hierarchy | None
    rejected: list[Rejection]
    lodo: list[HeldOut] = field(default_factory=list)
    lomo: list[HeldOut] = field(default_factory=list)
    lofo: list[HeldOut] = field(default_factory=list)

    def gate(self) -> list[HeldOut]:
        """Per point: lodo when its family has >= 2 devices, else lomo (>= 2 models), else lodo (pool): the
        decode / prefill gate (calibration.pipeline.PhaseFit.gate) on the serving points."""
        from calibration.pipeline import PhaseFit

        return PhaseFit.gate(self)


def fit_serving(ds: Dataset, resolver=None, cv: bool = True, lofo: bool = True) -> ServingFit:
    """Serving points -> hierarchy (+ lodo / lomo / lofo held-out predictions when ``cv``)."""
    from calibration.pipeline import make_prior_for

    points, rejected = serving_points(ds, resolver)
    if not points:
        return ServingFit(points, None, rejected)
    model = serving_model()
    h = fit_hierarchy(points, model, make_prior_for(model))
    sf = ServingFit(points, h, rejected)
    if cv:
        sf.lodo = holdout(points, h, "lodo")
        sf.lomo = holdout(points, h, "lomo")
        if lofo:
            sf.lofo = holdout(points, h, "lofo")
    return sf


# ------------------------------------------------------------------------------------------ document
def _by_metric(held: list[HeldOut]) -> dict[str, list[HeldOut]]:
    out: dict[str, list[HeldOut]] = defaultdict(list)
    for h in held:
        out[h.point.extra["metric"]].append(h)
    return out


def _time_interval(own: list[HeldOut], pool: list[HeldOut]) -> dict:
    """Interval of ln(t_meas / t_pred) (= -HeldOut.log_ratio) from the group's held-out residuals, or the
    pool's when the group has fewer than MIN_RESIDUALS."""
    use = own if len(own) >= MIN_RESIDUALS else pool
    if len(use) < MIN_RESIDUALS:
        return {"log_lo": -0.9, "log_hi": 0.6, "coverage": None, "n_residuals": len(use),
                "source": "too few held-out residuals: default wide interval"}  # fmt: skip
    lo, hi = interval([-h.log_ratio for h in use])
    flipped = [dataclasses.replace(h, predicted_s=h.point.measured_s**2 / h.predicted_s) for h in own]
    pool_flipped = [dataclasses.replace(h, predicted_s=h.point.measured_s**2 / h.predicted_s) for h in pool]
    return {
        "log_lo": _r(lo, 4),
        "log_hi": _r(hi, 4),
        "coverage": _r(nested_coverage(flipped, pool_flipped), 3),
        "n_residuals": len(use),
        "source": "group" if use is own else "pool",
    }


def _params(res) -> tuple[dict, dict]:
    return {k: _r(v) for k, v in res.params.items()}, {k: _r(v) for k, v in res.stderr.items()}


def document_entries(sf: ServingFit) -> tuple[list[dict], list[dict]]:
    """(groups, pooled) entries of the coefficients document for the serving phase.

    A group's ``cv`` holds the TPOT errors (the label the estimator prints), ``cv_by_metric`` every metric's;
    ``intervals`` one time interval per metric, ``interval`` TPOT's.
    """
    if sf.hierarchy is None:
        return [], []
    h = sf.hierarchy
    gate = sf.gate()
    by_fam, by_pool = defaultdict(list), defaultdict(list)
    for g in gate:
        by_fam[family_key(g.point)].append(g)
        by_pool[pool_key(g.point)].append(g)
    groups, pooled = [], []
    for fk, res in sorted(h.families.items()):
        pts = [p for p in sf.points if family_key(p) == fk]
        pk = pool_key(pts[0])
        lomo = _by_metric([x for x in sf.lomo if family_key(x.point) == fk])
        lodo = _by_metric([x for x in sf.lodo if family_key(x.point) == fk])
        own, pool = _by_metric(by_fam.get(fk, [])), _by_metric(by_pool.get(pk, []))
        metrics = sorted({p.extra["metric"] for p in pts})
        cv = {m: _cv_block(lomo[m], lodo[m], len(res.devices), len(res.models)) for m in metrics}
        intervals = {m: _time_interval(own[m], pool[m]) for m in metrics}
        primary = "tpot" if "tpot" in metrics else metrics[0]
        params, stderr = _params(res)
        groups.append(
            {
                "family": fk[0],
                "engine": fk[1],
                "backend": fk[2],
                "phase": PHASE,
                "params": params,
                "stderr": stderr,
                "n_points": res.n_points,
                "devices": list(res.devices),
                "models": list(res.models),
                "metrics": {m: sum(1 for p in pts if p.extra["metric"] == m) for m in metrics},
                "cv": cv[primary],
                "cv_by_metric": cv,
                "interval": intervals[primary],
                "intervals": intervals,
                "sigma_log": _r(res.sigma_log, 4),
                "at_bound": list(res.at_bound),
                "prior": res.prior_source,
                "variant": "serving",
                "converged": res.converged,
            }
        )
    for level, fits, keyf in (("pool", h.pools, pool_key), ("global", h.globals_, global_key)):
        for k, res in sorted(fits.items()):
            fams = sorted({p.family for p in sf.points if keyf(p) == k})
            lofo = _by_metric([x for x in sf.lofo if keyf(x.point) == k])
            metrics = sorted({p.extra["metric"] for p in sf.points if keyf(p) == k})
            cv = {}
            for m in metrics:
                med, p90 = ape_stats([x.ape for x in lofo[m]]) if len(fams) >= 2 else (None, None)
                cv[m] = {"lofo_median_ape": _r(med, 4), "lofo_p90_ape": _r(p90, 4)}
            intervals = {m: _time_interval(lofo[m] if len(fams) >= 2 else [], []) for m in metrics}
            primary = "tpot" if "tpot" in metrics else metrics[0]
            params, stderr = _params(res)
            pooled.append(
                {
                    "scope": {"kind": k[2]} if level == "global" else {"kind": k[2], "vendor": k[3]},
                    "engine": k[0],
                    "phase": PHASE,
                    "params": params,
                    "stderr": stderr,
                    "n_points": res.n_points,
                    "families": fams,
                    "devices": list(res.devices),
                    "cv": cv[primary],
                    "cv_by_metric": cv,
                    "interval": intervals[primary],
                    "intervals": intervals,
                    "level": level,
                    "variant": "serving",
                    "note": "leave-one-family-out errors: what a device of an unmeasured family gets",
                }
            )
    return groups, pooled


# ---------------------------------------------------------------------------------------------- gate
def gate_samples(sf: ServingFit) -> list[tuple[tuple, float, str]]:
    """(key (family, engine, backend, metric), ape, scheme) of every gated held-out serving point."""
    out = []
    for h in sf.gate():
        p = h.point
        metric = p.extra["metric"]
        scheme = h.scheme if h.level == "family" else f"{h.scheme} -> {h.level}"
        out.append(((p.family, p.engine, p.backend, metric), h.ape, scheme))
    return out


def cv_summary(sf: ServingFit) -> dict[str, dict[str, dict]]:
    """Held-out error per scheme, engine and metric: {scheme: {"engine/metric": {n, median, p90}}}."""
    out: dict[str, dict[str, dict]] = {}
    for scheme, held in (("lodo", sf.lodo), ("lomo", sf.lomo), ("gate", sf.gate())):
        groups: dict[str, list[float]] = defaultdict(list)
        for h in held:
            groups[f"{h.point.engine}/{h.point.extra['metric']}"].append(h.ape)
            groups[f"all/{h.point.extra['metric']}"].append(h.ape)
        out[scheme] = {}
        for k, v in sorted(groups.items()):
            med, p90 = ape_stats(v)
            out[scheme][k] = {"n": len(v), "median": _r(med, 4), "p90": _r(p90, 4)}
    return out


# -------------------------------------------------------------------------------------------- report
def markdown_section(sf: ServingFit, doc: dict) -> list[str]:
    """The serving section of the calibration report: held-out errors per engine and metric, the groups'
    errors, and the records left out counted by reason."""

    def pct(x) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = [
        "",
        "## Serving at concurrency (TTFT, TPOT, batch latency)",
        "",
        "Model: estimator.physics.serving (the mixed scheduler step on the decode step formula, the "
        "request queue); parameters per (family, engine, backend) in the same hierarchy.  Error = "
        "|t_meas / t_pred - 1| of the time (TTFT, TPOT, end-to-end batch latency), held out by device "
        "(lodo) and by model (lomo); the gate takes lodo where a family has two devices, else lomo.",
        "",
        "| scheme | engine / metric | n | median | p90 |",
        "|---|---|---:|---:|---:|",
    ]
    for scheme, rows in cv_summary(sf).items():
        for k, v in rows.items():
            lines.append(f"| {scheme} | {k} | {v['n']} | {pct(v['median'])} | {pct(v['p90'])} |")
    lines += [
        "",
        "| family | engine | backend | metric | n | lodo median (p90) | lomo median (p90) | interval "
        "(ln t) |",
        "|---|---|---|---|---:|---|---|---|",
    ]
    for g in doc["groups"]:
        if g["phase"] != PHASE:
            continue
        for m, cv in g["cv_by_metric"].items():
            iv = g["intervals"][m]
            lines.append(
                f"| {g['family']} | {g['engine']} | {g['backend']} | {m} | {g['metrics'][m]} | "
                f"{pct(cv['lodo_median_ape'])} ({pct(cv['lodo_p90_ape'])}) | "
                f"{pct(cv['lomo_median_ape'])} ({pct(cv['lomo_p90_ape'])}) | "
                f"[{iv['log_lo']}, {iv['log_hi']}] |"
            )
    reasons: dict[str, int] = defaultdict(int)
    for r in sf.rejected:
        reasons[r.reason.split(" [")[0] if r.reason.startswith("serving: features") else r.reason] += 1
    lines += ["", f"Serving records left out: {len(sf.rejected)}.", ""]
    lines += [f"- {n} x {why}" for why, n in sorted(reasons.items(), key=lambda x: -x[1])]
    return lines
