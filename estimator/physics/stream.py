"""One stream of a serving engine, timed on the serving fit's step.

vLLM and SGLang are measured on GPUs by serving benchmarks (TTFT and TPOT at a concurrency: the serving fit of
estimator.physics.serving), hardly ever by llama-bench-style runs of one batch.  Their decode / prefill sets
on a GPU are therefore the pooled covariates of a fit made of llama.cpp runs and vLLM's CPU build, while the
serving set of the same device and engine may be calibrated on hundreds of its own points.  An engine
profile that says so (``EngineProfile.stream_on_serving_step``) has its single-stream figures (decode tok/s
of B sequences, prefill tok/s, time to first token; the speed section, ``predict``, the quant matrix, the
multi-device table, the recommendations) timed by the serving model's step when

* the configuration runs natively (no support fallback), with every weight on the device (no offload) and
  one device, tensor parallelism or attention data parallelism (the serving model's splits: ``replicas``), on
  a device with the datasheet bandwidth and bf16 TFLOPS the serving fit admits;
* the phase's own set (decode or prefill) is not calibrated; and
* the serving set is fitted: calibrated (basis device / family) or the pool of the serving fit (source
  ``calibrated`` or ``pooled``, not the prior).  ``serving.serving_params`` follows the same rule when it
  prefers the serving set's step terms to an uncalibrated decode step.

Formulas (t(n_d, u) = ``serving.mixed_step_s``, a step of n_d decode and u prompt tokens; see
estimator.physics.serving)::

    decode step of B sequences at depth d = t(B, 0)            (B = 1: the TPOT of one client)
    prefill of T prompt tokens            = floor(T / budget) x t(0, budget) + [rem > 0] x t(0, rem),
                                            rem = T - floor(T / budget) x budget
    time to first token                   = ttft_fixed_s + prefill

budget = the scheduler's ``max_batched_tokens`` (the prompt chunks of the serving model's TTFT and batch
mode; no queue: one request).  The depth-dependent terms come from the speed features of the step: KV bytes
per sequence = kv_bytes / B (x N / kv_ways on N > 1 devices, as ``serving_features`` counts them); attention
FLOPs per decode token = flops_per_token - matmul FLOPs, per prompt token = attn_flops / T.

Intervals: the serving set's TPOT interval (ln of measured / predicted time) for decode, its interval of a
lone request's TTFT (``ttft_lone``: held-out TTFT residuals of at most ``serving.LONE_CONCURRENCY`` clients,
whose queueing a single stream does not have; the TTFT interval of every concurrency where a file lacks it)
for prefill and the time to first token; as speeds, a time interval [lo, hi] is [-hi, -lo].  The sets' labels
say that the figures come from the serving fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.engines import get_engine
from estimator.physics import serving, speed
from estimator.physics.coefficients import CoefficientSet, CoefficientTable
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

FITTED_SOURCES = ("calibrated", "pooled")  # serving sets that come from the serving fit (not the prior)
LABEL_PREFIX = "serving fit"  # how the label of a phase set timed here starts (``phase_set``)


@dataclass(frozen=True)
class ServingStep:
    """A ``speed.StepPath``: the serving model's step with one serving set's params (module doc).

    base: the configuration's ServingFeatures of one request (depth terms replaced per call); params: the
    serving params (``serving.serving_params``); cset: the serving set (its TTFT interval); kv_factor: N /
    kv_ways on N > 1 devices, else 1 (``serving.kv_share``); decode / prefill: which phases it times.
    """

    base: serving.ServingFeatures
    params: dict
    cset: CoefficientSet
    kv_factor: float
    decode: bool
    prefill: bool

    def decode_s(self, f: speed.DecodeFeatures) -> float:
        """Seconds of one decode step of ``f.batch`` sequences at the features' depth: t(B, 0)."""
        b = max(int(f.batch), 1)
        sf = replace(
            self.base,
            kv_bytes_per_seq=f.kv_bytes / b * self.kv_factor,
            attn_decode=max(f.flops_per_token - self.base.matmul_flops, 0.0),
        )
        return float(serving.mixed_step_s(sf, b, 0.0, self.params))

    def prefill_s(self, f: speed.PrefillFeatures) -> float:
        """Seconds to prefill ``f.tokens`` prompt tokens: floor(T / budget) full steps and one step with the
        rest (``serving.chunks_s``, nothing decoding beside them)."""
        tokens = int(f.tokens)
        if tokens <= 0:
            return 0.0
        budget = max(self.base.max_batched_tokens, 1.0)
        sf = replace(self.base, attn_prompt=f.attn_flops / tokens)
        r = serving.rates(sf, self.params)
        return float(serving.chunks_s(sf, 0.0, float(tokens), budget, self.params, r))

    def first_token_s(self, prefill_s: float, step_s: float) -> float:  # noqa: ARG002 - the protocol's
        """The serving model's TTFT of one request: ttft_fixed_s + the prefill (its last chunk samples the
        first token)."""
        return self.params.get("ttft_fixed_s", 0.0) + prefill_s

    def ttft_interval(self, ttft_s: float) -> tuple[float, float]:
        """(lo, hi) seconds from the serving set's TTFT interval."""
        return self.cset.metric_interval(serving.ttft_metric(self.cset, True), ttft_s)


def phase_set(sset: CoefficientSet, phase: str) -> CoefficientSet:
    """The serving set as the coefficient set of a speed phase: the TPOT (decode) or TTFT (prefill)
    interval as an interval of tok/s, and a label that names the serving fit."""
    metric = "tpot" if phase == "decode" else serving.ttft_metric(sset, True)
    lo, hi = sset.intervals.get(metric, (sset.log_lo, sset.log_hi))
    what = "TPOT of one stream" if phase == "decode" else "prompt chunks of TTFT"
    label = f"{LABEL_PREFIX} ({what}): {sset.label}"
    note = sset.metric_notes.get(metric, sset.interval_note)
    return replace(sset, phase=phase, log_lo=-hi, log_hi=-lo, label=label, interval_note=note)


def serving_step(
    table: CoefficientTable,
    model: ModelSpec,
    quant: QuantSpec | None,
    hardware: HardwareSpec,
    workload: Workload,
    sets: speed.SpeedSets,
) -> ServingStep | None:
    """The ServingStep that times this configuration's single stream, or None when the decode / prefill fit
    does (module doc: the conditions)."""
    profile = get_engine(workload.engine)
    if not profile.stream_on_serving_step or quant is None or sets.path is not None:
        return None
    if workload.offload_bytes or workload.moe_offload_layers:
        return None
    if not hardware.bandwidth_gbs or not hardware.bf16_tflops:  # what the serving fit admits (no CPUs)
        return None
    n = max(int(workload.n_devices), 1)
    if n > 1 and workload.split not in ("tp", "dp"):  # a layer split: the decode / prefill fit times it
        return None
    decode, prefill = not sets.dec.calibrated, not sets.pre.calibrated
    if not (decode or prefill):
        return None
    sp = serving.serving_params(table, hardware, workload.engine)
    if sp.cset.source not in FITTED_SOURCES:
        return None
    try:
        load = serving.ServingLoad(1, 1, 1, serving.SERVE)
        base = serving.serving_features(model, quant, hardware, replace(workload, n_seq=1), load)
    except (SpecError, ValueError):  # no bandwidth / TFLOPS figure: the decode / prefill fit's path says why
        return None
    return ServingStep(base, sp.params, sp.cset, serving.kv_share(model, n, workload.split), decode, prefill)


def speed_sets(
    table: CoefficientTable,
    model: ModelSpec,
    quant: QuantSpec | None,
    hardware: HardwareSpec,
    workload: Workload,
) -> speed.SpeedSets:
    """``speed.speed_sets``, with a serving engine's single stream on the serving fit's step where the module
    doc's conditions hold (its decode / prefill sets then are the serving set's ``phase_set``)."""
    sets = speed.speed_sets(table, model, quant, hardware, workload)
    step = serving_step(table, model, quant, hardware, workload, sets)
    if step is None:
        return sets
    return replace(
        sets,
        dec=phase_set(step.cset, "decode") if step.decode else sets.dec,
        pre=phase_set(step.cset, "prefill") if step.prefill else sets.pre,
        stream=step,
    )
