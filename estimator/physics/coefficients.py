"""Speed coefficients: the file calibration writes, the shipped prior, and the fallback lookup.

A *coefficient set* holds the free parameters of one phase of the speed physics (see
estimator.physics.speed) for one (hardware family, engine, backend), plus how well they are known.  The
parameters themselves are one table, ``PARAMS`` (name, phase, kind, default, bounds, whether every set must
carry it, which fits estimate it, meaning): the file validator, the speed physics' defaults and calibration's
fits all read it.  Decode: ``bw_eff``, ``t_layer_s``, ``t_fixed_s`` required; ``moe_route_s``,
``host_bw_eff``, ``t_allreduce_s`` optional.  Prefill: ``flops_eff``, ``attn_eff``, ``t_layer_s`` required;
``flops_abs_tflops`` (CPUs), the kernel-class and MoE ratios and ``gemm_k_half`` optional.  Serving
(estimator.physics.serving, the mixed scheduler step and the request queue): ``t_seq_s``, ``ttft_fixed_s``,
``queue_share`` required; the step efficiencies and overheads optional (absent: the family's decode / prefill
values, ``serving_params``).

``interval`` is the prediction interval of ln(measured / predicted) tokens/s: a point estimate ``x`` becomes
``[x * exp(log_lo), x * exp(log_hi)]``; a file interval that excludes 0 (a biased fit) is widened to include
it when used, so the interval always contains the point estimate.

Lookup (``CoefficientTable.lookup``): a schema-2 file answers decode and prefill from its ``model`` section
(below), and serving too when the section carries the serving fit (``model_carries``: ``serving.*``
parameters, and a device with the datasheet bandwidth and bf16 TFLOPS the serving fit admits).  Otherwise
(schema 1, or serving absent from the model): exact calibrated (family, engine[, backend]) -> calibrated
pooled set of the same vendor and kind -> same kind -> any (each widened by ``POOLED_WIDEN``) -> the shipped
prior for the device kind.  When a backend is asked for and the family is calibrated on other backends only,
that group is used as an uncalibrated set (``source`` "other-backend", widened like a pooled set): the same
card runs at a different speed under Vulkan / SYCL than under CUDA / ROCm.  Missing optional params of a
calibrated set are filled from the prior.

File format, schema_version 2 (JSON; written by calibration since the transfer model)::

    {"schema_version": 2, "fitbench_version", "created_utc", "input_hash", "quality_filter", ...,
     "model": {
        "params": [{"key": "decode.bw_eff", "beta": {"1": b0, "<covariate>": b, ...},
                    "family": {"<family>": a, ...}, "device": {"<device>": v, ...},
                    "tau": {"family": t, "device": t}}],
        "sigma": {"decode": s, "prefill": s, "serving.ttft": s, "serving.tpot": s},
        "families": {"<family>": {"decode": n, "prefill": n, "serving"?: n, "devices": [...],
                                  "engines": [...], "units": {"<engine>/<backend>": {"decode": n, ...}}}},
        "devices": {"<device>": {"family": f, "decode": n, "prefill": n, "serving"?: n, "units": {...}}},
        "intervals": {"decode": {"device" | "family" | "pooled": {"log_lo", "log_hi", "n_residuals",
                                  "scheme", "coverage": {"lodo", "lofo", "lomo"}}}, "prefill": {...},
                      "serving.ttft": {...}, "serving.tpot": {...}},
        "cv": {...}, "coverage": {...}, "fits": {"decode+prefill" | "serving": {"converged"}},
        "maturity"?: {"developing" | "experimental": {"log_lo", "n_residuals", "backends", "source", ...}}},
     "uncalibrated": [...], "memory": {...}, "memory_bands"?: {...},
     "serving": {"n_points", "left_out", "cv"}}

``memory_bands`` (optional; calibration.memory_fit.memory_bands): per engine and runtime term
(``compute_bytes``, ``context_overhead_bytes``), how the engine's own measured buffers spread around the
fitted estimate: {"n", "median_ape", "within_5pct", "ratio_p05", "ratio_p95", "ratio_min", "ratio_max",
"basis", "by_kind"?: {device kind: a band of the same keys but basis}}, ratios measured / estimated.

The decode / prefill parameters are one fit; the serving parameters (``serving.*``) another of the same kind
(calibration.serving) whose strata ``serving.ttft`` / ``serving.tpot`` have their own noise scales,
intervals and cross-validation.  The decode / prefill intervals are of ln(measured / predicted) tokens/s,
the serving ones of ln(measured / predicted) *time* (TTFT, TPOT: ``CoefficientSet.intervals`` per metric,
``metric_interval``).

A parameter's value for a device is ``from_eta(offset + sum beta_c x_c + a[family] + v[device])``
(estimator.physics.covariates gives x; the offset is the shipped prior of the device kind; a family or
device the fit never saw has a = 0 / v = 0).  Its *basis* says how far the prediction is from calibrated
data: ``device`` (this device measured in this phase), ``family`` (other devices of its family measured) or
``pooled`` (nothing of its family: covariates only); the interval is the one calibrated for that basis from
held-out residuals (conformal: leave-one-model-out for ``device``, leave-one-device-out for ``family``,
leave-one-family-out for ``pooled``).

Schema 1 (still read, e.g. tests/golden/coefficients.json)::

    {"schema_version": 1, "fitbench_version": "0.1.0", "created_utc": "...", "input_hash": "sha256:...",
     "groups": [{"family", "engine", "backend", "phase", "params", "stderr", "n_points", "devices", "models",
                 "cv": {"lomo_median_ape", "lomo_p90_ape", "lodo_median_ape", "lodo_p90_ape"},
                 "interval": {"log_lo", "log_hi", "coverage"},
                 "intervals"?: {"ttft" | "tpot" | "e2e": {"log_lo", "log_hi", "coverage"}}}],
     "pooled": [{"scope": {"vendor"?: str, "kind"?: str}, "engine": str | "*", "phase", "params", "stderr",
                 "n_points", "families", "cv", "interval", "note"?}],
     "memory": {"llama.cpp": {...}, "vllm": {...}}}

``memory`` is passed through untouched for estimator.physics.runtime.  Only ``load_coefficients`` touches
files.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from estimator.physics.covariates import datasheet_tflops, default_backend
from estimator.specs import HardwareSpec, SpecError

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
BASES = ("device", "family", "pooled")
PHASES = ("decode", "prefill", "serving")
MODEL_PHASES = ("decode", "prefill", "serving")  # phases the schema-2 model section can carry
# serving intervals: one per metric, of the time (model_set); ttft_lone: the TTFT of a lone request
# (estimator.physics.serving.LONE_CONCURRENCY), absent from older files
SERVING_METRICS = ("ttft", "tpot", "ttft_lone")
ENV_VAR = "FITBENCH_COEFFICIENTS"
PRIOR_PATH = Path(__file__).resolve().parent.parent / "data" / "prior_coefficients.json"
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "results" / "coefficients.json"
# A pooled calibrated set used for a family it was not fitted on: interval half-widths x this factor.
POOLED_WIDEN = 1.5
# how the label of a set of a family nobody measured starts (its parameters come from the schema-2 model's
# covariates: devices like it)
COVARIATES_LABEL = "covariates"

EFF = "eff"  # dimensionless efficiency in (0, 1]: log-scale prior
RATE = "rate"  # positive multiplier or rate with no physical upper bound: log-scale prior
TIME = "time"  # additive term >= 0 (seconds, or elements for gemm_k_half): linear prior


@dataclass(frozen=True)
class Param:
    """One free parameter of the speed physics: the one table calibration and prediction share.

    kind: EFF | RATE | TIME (bounds and prior scale, see calibration.fit); ``default``: the value applied when
    a coefficient set does not carry it and the start / prior mean of a fit; ``lower`` / ``upper``: the fit's
    bounds.  ``required``: every set of the phase carries it.  ``fit``: which devices inform it — ``"all"``,
    ``"peak"`` (devices with datasheet TFLOPS only), ``"absolute"`` (devices without: CPUs, whose effective
    TFLOPS are fitted instead, flops_eff 1), or ``""`` (never fitted: a documented assumption or borrowed from
    the other phase).
    ``covariates``: the covariate groups (estimator.physics.covariates) the parameter is regressed on across
    devices; ``effects``: its random effects (``"family"``, ``"device"``) — the schema-2 model
    (``to_eta`` / ``from_eta`` give the transformed space the regression lives in).  ``intercept_sd``: the
    prior scale of the parameter's intercept (its value on the reference backend and every backend without
    evidence) when it must be tighter than the kind's (calibration.hierarchy.PRIOR_INTERCEPT): a kernel
    class's ratio to k-quants is a property of each backend's kernels, so evidence from one backend must stay
    in that backend's term instead of moving the ratio everywhere.  ``covariate_sd``: likewise for the
    covariate terms (calibration.hierarchy.PRIOR_COVARIATE x the phase's factor).
    """

    name: str
    phase: str
    kind: str
    default: float
    lower: float
    upper: float
    required: bool = False
    fit: str = ""
    doc: str = ""
    covariates: tuple[str, ...] = ()
    effects: tuple[str, ...] = ()
    intercept_sd: float | None = None
    covariate_sd: float | None = None

    @property
    def key(self) -> str:
        """``phase.name``: t_layer_s exists in both phases."""
        return f"{self.phase}.{self.name}"


# covariate groups of every fitted parameter's level (maturity: the support table's, calibration.maturity)
_LEVEL = ("engine", "backend", "maturity", "vendor", "kind", "year")
_OVERHEAD = ("engine", "backend", "kind")
_FD = ("family", "device")
# Prior scales (eta units) of the i-quant ratios: their intercept is their value on CUDA (the reference
# backend) and on every backend without i-quant rows, and i-quant kernels are written per backend, so one
# backend's rows must stay in that backend's term: a tight intercept (no CUDA i-quant row exists) and a wide
# backend term (an RX 570's IQ1_S row runs at about half the k-quant rate; docs/calibration.md).  With every
# kernel-class ratio's intercept this tight, held-out decode got worse (leave-one-device-out median 9.1 % ->
# 9.7 %): the well-measured classes keep the kind's scales.
IQ_PRIOR = {"intercept_sd": 0.1, "covariate_sd": 1.0}
_SERVE = ("engine_vendor",)  # serving rows: vLLM / SGLang per vendor (covariates: engine=<e>@<vendor>)
_SERVE_EFF = ("engine_vendor", "vendor")
# an engine's MoE path (routing, token dispatch, its grouped-GEMM kernels) is its own software on every
# vendor: an engine-wide term (engine=<e>@accel) and a per-vendor one (docs/calibration.md, 2026-12-05)
_SERVE_MOE = ("engine", "engine_vendor")
PARAMS: tuple[Param, ...] = (
    # decode (estimator.physics.speed: t_step = t_fixed_s + t_layer_s L + moe_route_s L_moe + max(...) + comm)
    Param("bw_eff", "decode", EFF, 0.7, 1e-3, 1.0, True, "all", "fraction of datasheet bandwidth reached",
          covariates=(*_LEVEL, "mem", "ln_bw", "multi_die", "bw_measured"), effects=_FD),
    Param("t_layer_s", "decode", TIME, 1e-5, 0.0, 1e-2, True, "all", "per-layer overhead of one step, s",
          covariates=_OVERHEAD, effects=_FD),
    # the fixed cost of a llama.cpp step (graph build, launch, sampling, synchronisation) is a few hundred
    # microseconds: its intercept's prior is tight (x1.65 at one sd) so that the data, which fit a large
    # fixed cost and a per-layer one alike, cannot move what layers cost into it (docs/calibration.md,
    # "A tight fixed cost and the 2024 step factor")
    Param("t_fixed_s", "decode", TIME, 3e-4, 0.0, 1.0, True, "all", "fixed overhead of one step, s",
          covariates=_OVERHEAD, effects=_FD, intercept_sd=0.5),
    # a decode step of a llama.cpp build of 2024, or of a run with a non-default kernel setting (--no-repack),
    # / the same step of a current build's default run: the record-level covariates build and settings only
    # (calibration.dataset.record_era, record_settings), the intercept pinned at 1, which the estimator
    # predicts (it never applies this parameter: estimates are of current builds run with their defaults)
    Param("build_scale", "decode", RATE, 1.0, 0.2, 5.0, fit="all",
          doc="decode step time of a 2024 llama.cpp build or a non-default setting / a current default run's",
          covariates=("build", "settings"), intercept_sd=1e-3, covariate_sd=0.3),
    Param("moe_route_s", "decode", TIME, 0.0, 0.0, 1e-2,
          doc="per MoE layer and step (router, expert gather), s"),
    Param("host_bw_eff", "decode", EFF, 0.6, 1e-3, 1.0,
          doc="fraction of host RAM bandwidth reached streaming offloaded weights (assumption)"),
    Param("t_allreduce_s", "decode", TIME, 2e-5, 0.0, 1e-2,
          doc="latency of one small tensor-parallel all-reduce (assumption: tens of microseconds)"),
    Param("t_split_s", "decode", TIME, 5e-4, 0.0, 1e-1,
          doc="one device<->host switch of a fallback path, s (assumption, estimator.physics.fallback)"),
    Param("flops_eff", "decode", EFF, 1.0, 1e-3, 1.0, doc="compute roof of batched decode (from prefill)"),
    Param("flops_abs_tflops", "decode", RATE, 0.5, 1e-4, 1e4, doc="effective TFLOPS (from prefill, CPUs)"),
    # decode kernel classes (estimator.physics.counts.decode_kernel_class): the weight bytes of a class are
    # read at bw_eff x bw_rel_<class> (k-quants = 1, the reference); per backend, shrunk to 1.  Q4_0 and
    # Q8_0 take the record setting too: llama.cpp's --no-repack costs their decode more than the k-quants'
    # (measured on the Xeon guest both ways: x2.1-2.4 and x1.9 against x1.2; docs/calibration.md "llama.cpp's
    # AMX prompt path"), which the step factor build_scale alone cannot follow
    Param("bw_rel_f16", "decode", RATE, 1.0, 0.2, 5.0, fit="all",
          doc="decode bandwidth ratio of F16/BF16/F32", covariates=("backend",), effects=("family",)),
    Param("bw_rel_q4_0", "decode", RATE, 1.0, 0.2, 5.0, fit="all",
          doc="decode bandwidth ratio of q4_0/q4_1/q5_0/q5_1", covariates=("backend", "settings"),
          effects=("family",)),
    Param("bw_rel_q8_0", "decode", RATE, 1.0, 0.2, 5.0, fit="all", doc="decode bandwidth ratio of q8_0",
          covariates=("backend", "settings"), effects=("family",)),
    Param("bw_rel_mxfp4", "decode", RATE, 1.0, 0.2, 5.0, fit="all", doc="decode bandwidth ratio of mxfp4",
          covariates=("backend",), effects=("family",)),
    # i-quants: evidence from a backend stays in its term (IQ_PRIOR; one RX 570 row set it everywhere), and
    # the two kernel kinds (estimator.physics.counts._IQ4_TYPES) have a ratio each: the RX 570's IQ1_S row
    # says nothing of an iq4_xs table lookup
    Param("bw_rel_iq4", "decode", RATE, 1.0, 0.2, 5.0, fit="all",
          doc="decode bandwidth ratio of iq4_nl / iq4_xs (table-lookup i-quants)",
          covariates=("backend",), effects=("family",), **IQ_PRIOR),
    Param("bw_rel_iquant", "decode", RATE, 1.0, 0.2, 5.0, fit="all",
          doc="decode bandwidth ratio of the codebook-grid i-quants (iq1_s .. iq3_s)",
          covariates=("backend",), effects=("family",), **IQ_PRIOR),
    # prefill
    # memory technology, FLOP per byte and die count as prefill covariates made held-out prefill worse
    # (leave-one-device-out median 14.3 % without them, 19.0 % with them: confounded with vendor / kind)
    # board power per TFLOPS (covariate ``power``) on the GEMM efficiency only: chosen on the cross-validation
    # folds (docs/calibration.md, "Power per TFLOPS")
    Param("flops_eff", "prefill", EFF, 0.5, 1e-3, 1.0, True, "peak", "fraction of datasheet GEMM TFLOPS",
          covariates=_LEVEL + ("power", "build"), effects=_FD),
    Param("attn_eff", "prefill", EFF, 0.3, 1e-3, 1.0, True, "all", "fraction of peak reached by attention",
          covariates=_LEVEL, effects=_FD),
    Param("t_layer_s", "prefill", TIME, 5e-5, 0.0, 1e-1, True, "all", "per layer and ubatch pass, s",
          covariates=_OVERHEAD, effects=_FD),
    Param("flops_abs_tflops", "prefill", RATE, 0.5, 1e-4, 1e4, fit="absolute",
          doc="effective 10^12 FLOP/s when the datasheet TFLOPS are unknown (CPUs)",
          covariates=("ln_bw", "cpu_size", "cpu_fallback", "cpu_matrix", "settings"), effects=_FD),
    Param("bw_eff", "prefill", EFF, 1.0, 1e-3, 1.0, doc="memory term (from decode when absent)"),
    Param("host_bw_eff", "prefill", EFF, 0.6, 1e-3, 1.0, doc="as decode"),
    Param("t_allreduce_s", "prefill", TIME, 2e-5, 0.0, 1e-2, doc="as decode"),
    Param("flops_rel_f16", "prefill", RATE, 1.0, 0.1, 10.0, fit="all",
          doc="GEMM efficiency of F16/BF16/F32 weights relative to k-quants",
          covariates=("backend",), effects=("family",)),
    Param("flops_rel_legacy", "prefill", RATE, 1.0, 0.1, 10.0, fit="all",
          doc="relative GEMM efficiency of legacy 32-element-block types (q4_0 .. q8_0, mxfp4)",
          covariates=("backend",), effects=("family",)),
    Param("flops_rel_iq4", "prefill", RATE, 1.0, 0.1, 10.0, fit="all",
          doc="relative GEMM efficiency of iq4_nl / iq4_xs", covariates=("backend",), effects=("family",),
          **IQ_PRIOR),
    Param("flops_rel_iquant", "prefill", RATE, 1.0, 0.1, 10.0, fit="all",
          doc="relative GEMM efficiency of the codebook-grid i-quants (iq1_s .. iq3_s)",
          covariates=("backend",), effects=("family",), **IQ_PRIOR),
    # <= 1: a routed expert's GEMM gets ~u x k / E of the u rows a dense GEMM gets, so it cannot run more
    # efficiently than the dense ones; the row term prices those rows (gemm_m_half at ``expert_rows``), this
    # ratio what is left (the grouped GEMM's gather / scatter of rows, its routing)
    Param("flops_rel_moe", "prefill", RATE, 0.999, 0.05, 1.0, fit="all",
          doc="efficiency of routed-expert GEMMs relative to dense ones",
          covariates=("backend",), effects=("family",)),
    # a pass of u tokens runs its GEMMs at eff x u / (u + gemm_m_half) (tile and wave quantisation of few
    # rows), so small passes cost what their rows do, not a fixed overhead per pass; prior centred on 16
    # tokens (TIME_PRIOR_FLOOR); applied on devices with a datasheet peak only (speed.rates_for_prefill)
    Param("gemm_m_half", "prefill", TIME, 0.0, 0.0, 1e4, fit="peak",
          doc="GEMM row term: a pass of u tokens runs its GEMMs at eff x u / (u + gemm_m_half), tokens",
          covariates=("backend",), effects=("family",)),
    # additive (linear prior around 0 = no effect), bounded at 1e6 elements (far beyond any model width)
    Param("gemm_k_half", "prefill", TIME, 0.0, 0.0, 1e6, fit="all",
          doc="GEMM width term: a GEMM of inner dimension K runs at eff x K / (K + gemm_k_half), elements",
          covariates=("backend", "kind"), effects=("family",)),
    # serving at concurrency (estimator.physics.serving: one scheduler step mixes decode tokens and prompt
    # chunks; a request queues behind other prompts).  Absent optional ones come from the family's decode /
    # prefill sets (serving_params); the serving fit (calibration.serving) estimates them all, per engine
    # and vendor (vLLM vs SGLang schedulers and kernels, CUDA vs ROCm builds) with family / device effects,
    # efficiencies also per vendor.  The GEMM efficiencies (flops_eff, flops_rel_moe, flops_rel_fp4) have no
    # engine term: both engines run their dense, grouped-expert and 4-bit GEMMs through the same libraries
    # (cuBLAS / CUTLASS / DeepGEMM / FlashInfer on NVIDIA), and with engine terms SGLang's GEMM rate was
    # learnt from its B200 MoE rows alone (docs/calibration.md, "Serving at concurrency").
    Param("bw_eff", "serving", EFF, 0.75, 1e-3, 1.0, fit="all", doc="weights streamed per step, as decode",
          covariates=_SERVE_EFF, effects=_FD),
    # no engine term either (2026-12-05): the decode attention kernels that read the cache are shared
    # libraries too (FlashInfer, FlashAttention, FlashMLA), and with an engine term SGLang's KV rate was
    # learnt from its B200 MLA / DSA / hybrid models alone and read a dense model's GQA cache at a third of
    # the bandwidth
    Param("kv_bw_eff", "serving", EFF, 0.75, 1e-3, 1.0, fit="all",
          doc="fraction of datasheet bandwidth reached reading the decoding requests' KV cache",
          covariates=("vendor",), effects=("family",)),
    Param("flops_eff", "serving", EFF, 0.5, 1e-3, 1.0, fit="all",
          doc="fraction of the datasheet GEMM rate (FP8 for 8- and 4-bit float formats) in a step",
          covariates=("vendor",), effects=_FD),
    Param("flops_rel_fp4", "serving", RATE, 1.0, 0.1, 10.0, fit="all",
          doc="GEMM rate of 4-bit float weights (NVFP4, MXFP4) relative to FP8: FP4 tensor cores > 1, "
          "weight-only kernels that dequantize to bf16 < 1", covariates=(), effects=("family",)),
    Param("flops_rel_moe", "serving", RATE, 0.999, 0.05, 1.0, fit="all",
          doc="efficiency of routed-expert GEMMs relative to dense ones (as prefill)",
          covariates=(), effects=("family",)),
    Param("bw_rel_moe", "serving", RATE, 0.999, 0.05, 1.0, fit="all",
          doc="bandwidth reached reading routed-expert weights relative to dense weights (grouped GEMMs over "
          "few rows per expert stream weights less efficiently than one dense GEMM)",
          covariates=_SERVE_MOE, effects=("family",)),
    Param("attn_eff", "serving", EFF, 0.3, 1e-3, 1.0, fit="all",
          doc="fraction of the bf16 rate reached by prompt attention",
          covariates=_SERVE, effects=("family",)),
    # the decoding requests' attention is other kernels than a prompt's (one query per request against the
    # cache; MLA's absorbed form on the few heads one device holds under tensor parallelism): its own
    # efficiency, default that of attn_eff, a vendor term like the KV read's (shared libraries).  With one
    # attn_eff for both, DeepSeek's decode at 8K-token prompts was 1.3-1.5x too fast on the B200 in sample
    # (docs/calibration.md, 2026-12-05 evening)
    Param("attn_decode_eff", "serving", EFF, 0.3, 1e-3, 1.0, fit="all",
          doc="fraction of the bf16 rate reached by the decoding requests' attention",
          covariates=("vendor",), effects=("family",)),
    Param("t_fixed_s", "serving", TIME, 3e-4, 0.0, 1.0, fit="all", doc="fixed overhead of one step, s",
          covariates=_SERVE, effects=_FD),
    Param("t_layer_s", "serving", TIME, 1e-5, 0.0, 1e-2, fit="all", doc="per layer of one step, s",
          covariates=_SERVE, effects=("family",)),
    # a vendor term, no engine term (2026-12-05): a small all-reduce's latency is the interconnect's and the
    # collective kernel's, not the scheduler's (each engine's share of the link's rate is link_eff)
    Param("t_allreduce_s", "serving", TIME, 2e-5, 0.0, 1e-2, fit="all",
          doc="latency of one tensor-parallel all-reduce, s", covariates=("vendor",), effects=("family",)),
    # a vendor term, no engine term (2026-12-05): SGLang's per-request term was learnt from its B200 MoE rows
    # when the H100 was held out (60 us against 26 us in the full fit) and made its dense H100 rows 1.3x too
    # slow; one term for both engines transfers better both ways (docs/calibration.md)
    Param("t_seq_s", "serving", TIME, 1e-5, 0.0, 1e-2, True, "all",
          "per running request and step (scheduling, sampling, output processing), s",
          covariates=("vendor",), effects=_FD),
    Param("ttft_fixed_s", "serving", TIME, 0.02, 0.0, 10.0, True, "all",
          "per request before its first token is out (API, tokenisation, streaming), s",
          covariates=_SERVE, effects=_FD),
    Param("queue_share", "serving", EFF, 0.5, 1e-3, 1.0, True, "all",
          "share of the other running requests' prompts a new one waits behind (1: every request of a "
          "benchmark's equal-length cohort arrives together; small: arrivals spread out)",
          covariates=_SERVE, effects=("family",)),
    # < 1: a tensor-parallel all-reduce of a prompt chunk (tens of MB) reaches less than the link's one-way
    # rate (NCCL / the engines' own all-reduce kernels); per engine: vLLM and SGLang ship different all-reduce
    # paths.  Without it the B200's vLLM TTFT was predicted too slow at TP 1 and too fast at TP 8 (2026-12-05)
    Param("link_eff", "serving", EFF, 0.999, 1e-3, 1.0, fit="all",
          doc="fraction of the one-way interconnect bandwidth a tensor-parallel all-reduce reaches",
          covariates=_SERVE, effects=("family",)),
    Param("flops_abs_tflops", "serving", RATE, 0.5, 1e-4, 1e4, doc="effective TFLOPS (from prefill, CPUs)"),
    Param("host_bw_eff", "serving", EFF, 0.6, 1e-3, 1.0, doc="as decode"),
    Param("moe_route_s", "serving", TIME, 0.0, 0.0, 1e-2, fit="all",
          doc="per MoE layer of one step (router, token dispatch and combine, grouped-GEMM launches), s",
          covariates=_SERVE_MOE, effects=("family",)),
)  # fmt: skip

# Transformed space of the schema-2 model (calibration.hierarchy fits eta, the estimator turns it back):
#   EFF and RATE parameters with an upper bound of 1: soft-capped log, theta = (e^(-k eta) + upper^-k)^(-1/k)
#       (log-linear far below the cap, saturating at it; k = SOFTCAP_K);
#   other RATE: log, theta = e^eta clipped to [lower, upper];
#   TIME: log with a floor, theta = e^eta (an additive term cannot be exactly 0, only negligible).
SOFTCAP_K = 4.0
# smallest theta a log-transformed TIME parameter's prior is centred on (its default may be 0)
TIME_PRIOR_FLOOR = {"gemm_k_half": 409.6, "gemm_m_half": 16.0, "moe_route_s": 1e-5}


def _np(x):
    """numpy when ``x`` is an array (calibration), else None: the report path never imports numpy."""
    if hasattr(x, "shape"):
        import numpy as np

        return np
    return None


def _exp(x):
    np = _np(x)
    return np.exp(x) if np else math.exp(x)


def _clip(x, lo, hi):
    np = _np(x)
    return np.clip(x, lo, hi) if np else min(max(x, lo), hi)


def softcapped(p: Param) -> bool:
    """True when the parameter's transform saturates at its upper bound (efficiencies, flops_rel_moe)."""
    return p.kind in (EFF, RATE) and p.upper <= 1.0


def from_eta(p: Param, eta):
    """Parameter value of a transformed value (numbers or numpy arrays); see the transform table above."""
    if softcapped(p):
        k = SOFTCAP_K
        return _clip((_exp(-k * eta) + p.upper ** (-k)) ** (-1.0 / k), p.lower, p.upper)
    if p.kind == RATE:
        return _clip(_exp(eta), p.lower, p.upper)
    return _clip(_exp(eta), 0.0, p.upper)


def to_eta(p: Param, value: float) -> float:
    """The transformed value of a parameter value (inverse of ``from_eta``; values at or beyond the cap are
    taken at 0.98 of it, a zero time at 1e-12)."""
    if softcapped(p):
        v = min(max(value, p.lower), 0.98 * p.upper)
        return -math.log(v ** (-SOFTCAP_K) - p.upper ** (-SOFTCAP_K)) / SOFTCAP_K
    if p.kind == RATE:
        return math.log(min(max(value, p.lower), p.upper))
    return math.log(max(value, 1e-12))


def phase_params(phase: str) -> tuple[Param, ...]:
    """The parameters of one phase, in table order."""
    return tuple(p for p in PARAMS if p.phase == phase)


def param(phase: str, name: str) -> Param:
    """One parameter of the table; KeyError when the phase has no such parameter."""
    for p in PARAMS:
        if p.phase == phase and p.name == name:
            return p
    raise KeyError(f"{phase}.{name}")


REQUIRED_PARAMS = {ph: tuple(p.name for p in phase_params(ph) if p.required) for ph in PHASES}
OPTIONAL_PARAMS = {ph: tuple(p.name for p in phase_params(ph) if not p.required) for ph in PHASES}


class CoefficientsError(SpecError):
    """A coefficients file that is missing, unreadable, of an unknown version, or has impossible values."""


@dataclass(frozen=True)
class CoefficientSet:
    """Parameters of one phase for one (family, engine, backend), with their uncertainty and provenance.

    label: one line saying where the numbers come from, e.g.
    ``"calibrated: cpu-x86-avx512/llama.cpp (40 runs, CV median 4%)"`` or ``"pooled prior (uncalibrated)"``.
    source: "calibrated" | "other-backend" | "pooled" | "prior".
    """

    family: str
    engine: str
    backend: str
    phase: str
    params: dict[str, float]
    stderr: dict[str, float] = field(default_factory=dict)
    n_points: int = 0
    cv: dict[str, float | None] = field(default_factory=dict)
    log_lo: float = -0.7
    log_hi: float = 0.5
    coverage: float | None = None
    calibrated: bool = False
    label: str = "pooled prior (uncalibrated)"
    source: str = "prior"
    # serving sets: one interval of ln(measured / predicted) per metric ("ttft", "tpot", "e2e"), and where
    # each comes from, worded as a phase set's interval_note (schema 2)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    metric_notes: dict[str, str] = field(default_factory=dict)
    basis: str = ""  # schema 2: device | family | pooled (how far from calibrated data); "" for schema 1
    interval_note: str = ""  # schema 2: where the interval comes from, one line

    def interval(self, value: float) -> tuple[float, float]:
        """(lo, hi) of a positive point estimate: value x exp(log_lo), value x exp(log_hi)."""
        return value * math.exp(self.log_lo), value * math.exp(self.log_hi)

    def metric_interval(self, metric: str, value: float) -> tuple[float, float]:
        """(lo, hi) of a positive estimate of ``metric`` from its own interval (``intervals``), else the
        set's."""
        lo, hi = self.intervals.get(metric, (self.log_lo, self.log_hi))
        return value * math.exp(lo), value * math.exp(hi)


@dataclass(frozen=True)
class CoefficientTable:
    """A loaded coefficients file plus the shipped prior it falls back on."""

    groups: tuple[dict, ...]
    pooled: tuple[dict, ...]
    prior: tuple[dict, ...]
    memory: dict[str, Any]
    path: str | None = None
    input_hash: str | None = None
    created_utc: str | None = None
    model: dict | None = None  # schema 2: the covariate / random-effect model (module doc)
    memory_bands: dict[str, Any] = field(default_factory=dict)  # module doc; only a calibrated file has them

    @property
    def calibrated(self) -> bool:
        """True when a calibrated file (not only the prior) was loaded."""
        return self.path is not None

    def lookup(
        self, hardware: HardwareSpec, engine: str, phase: str, backend: str | None = None
    ) -> CoefficientSet:
        """The coefficient set for one phase on one device: exact -> pooled -> prior (see module doc)."""
        if phase not in PHASES:
            raise CoefficientsError(f"unknown phase {phase!r}; expected one of {PHASES}")
        prior = _match_pooled(self.prior, hardware, engine, phase)
        if prior is None:  # the shipped prior always has a global "*" entry; guard anyway
            raise CoefficientsError(f"the coefficient prior has no entry for phase {phase!r}")
        prior_params = dict(prior["params"])
        if self.model is not None and model_carries(self.model, phase, hardware):
            return model_set(self.model, prior_params, hardware, engine, phase, backend)
        exact = [
            g
            for g in self.groups
            if g["family"] == hardware.family and g["engine"] == engine and g["phase"] == phase
        ]
        if exact:
            same_backend = [g for g in exact if backend is not None and g.get("backend") == backend]
            g = max(same_backend or exact, key=lambda x: x.get("n_points", 0))
            if backend is not None and not same_backend:  # the family is calibrated on other backends only
                src, widen = "other-backend", POOLED_WIDEN
                return _make_set(g, prior_params, hardware, engine, phase, src, widen, backend)
            return _make_set(g, prior_params, hardware, engine, phase, "calibrated", 1.0)
        pooled = _match_pooled(self.pooled, hardware, engine, phase)
        if pooled is not None:
            return _make_set(pooled, prior_params, hardware, engine, phase, "pooled", POOLED_WIDEN)
        return _make_set(prior, prior_params, hardware, engine, phase, "prior", 1.0)

    def maturity_log_lo(self, maturity: str) -> float | None:
        """The calibrated widening (ln units, <= 0) below an uncalibrated interval on a backend of this
        maturity (``model.maturity``, calibration.maturity: leave-one-backend-out), None when the file has
        none or only repeats the shipped default (``source`` "default": too few backends were measured)."""
        entry = ((self.model or {}).get("maturity") or {}).get(maturity)
        return float(entry["log_lo"]) if entry and entry.get("source") != "default" else None

    def memory_for(self, engine: str) -> dict[str, Any]:
        """The ``memory`` section's entry for one engine (empty dict when absent)."""
        return dict(self.memory.get(engine, {}))

    def memory_band(
        self, engine: str, term: str = "compute_bytes", kind: str | None = None
    ) -> dict[str, Any] | None:
        """How ``engine``'s own measured ``term`` spread around the calibrated estimate (module doc,
        ``memory_bands``): the band of device ``kind`` where the file has one, else the band over every
        kind; its ``scope`` says which (the kind, or "all").  None when the file has no band for it (the
        prior has none)."""
        band = self.memory_bands.get(engine, {}).get(term)
        if not band:
            return None
        own = (band.get("by_kind") or {}).get(kind) if kind else None
        out = {k: v for k, v in (own or band).items() if k != "by_kind"}
        out.setdefault("basis", band.get("basis", ""))
        out["scope"] = kind if own else "all"
        return out


def _scope_rank(scope: dict, hardware: HardwareSpec) -> int | None:
    """How specific a pooled scope is for this device (higher = closer), or None when it does not apply."""
    vendor, kind = scope.get("vendor"), scope.get("kind")
    if vendor is not None and vendor.lower() != (hardware.vendor or "").lower():
        return None
    if kind is not None and kind != hardware.kind:
        return None
    return (vendor is not None) + (kind is not None)


def _match_pooled(entries: tuple[dict, ...], hardware: HardwareSpec, engine: str, phase: str) -> dict | None:
    """The most specific pooled entry for (vendor, kind, engine, phase); an exact engine beats ``"*"``."""
    best, best_key = None, None
    for e in entries:
        if e["phase"] != phase or e["engine"] not in (engine, "*"):
            continue
        rank = _scope_rank(e.get("scope", {}), hardware)
        if rank is None:
            continue
        key = (rank, e["engine"] == engine)
        if best_key is None or key > best_key:
            best, best_key = e, key
    return best


def _make_set(
    entry: dict,
    prior_params: dict,
    hardware: HardwareSpec,
    engine: str,
    phase: str,
    source: str,
    widen: float,
    backend: str | None = None,
) -> CoefficientSet:
    params = {**prior_params, **entry["params"]}
    interval = entry.get("interval", {})
    log_lo = float(interval.get("log_lo", -0.7)) * widen
    log_hi = float(interval.get("log_hi", 0.5)) * widen
    n = int(entry.get("n_points", 0))
    cv = dict(entry.get("cv", {}))
    if source == "calibrated":
        med = (
            cv.get("lodo_median_ape") if cv.get("lodo_median_ape") is not None else cv.get("lomo_median_ape")
        )
        cv_txt = f", CV median {med:.0%}" if med is not None else ""
        label = f"calibrated: {entry['family']}/{entry['engine']} ({n} runs{cv_txt})"
    elif source == "other-backend":
        label = (
            f"calibrated on {entry.get('backend') or '?'}: {entry['family']}/{entry['engine']} ({n} runs; "
            f"uncalibrated for {backend})"
        )
    elif source == "pooled":
        scope = entry.get("scope", {})
        where = "/".join(str(scope[k]) for k in ("vendor", "kind") if k in scope) or "all devices"
        label = f"pooled {where} ({n} runs; uncalibrated for {hardware.family})"
    else:
        label = "pooled prior (uncalibrated)"
    intervals = {
        str(m): (
            min(float(iv.get("log_lo", -0.7)) * widen, 0.0),
            max(float(iv.get("log_hi", 0.5)) * widen, 0.0),
        )
        for m, iv in (entry.get("intervals") or {}).items()
    }
    return CoefficientSet(
        intervals=intervals,
        family=entry.get("family", hardware.family),
        engine=entry.get("engine", engine) if entry.get("engine") != "*" else engine,
        backend=entry.get("backend", ""),
        phase=phase,
        params=params,
        stderr=dict(entry.get("stderr", {})),
        n_points=n,
        cv=cv,
        log_lo=min(log_lo, 0.0),
        log_hi=max(log_hi, 0.0),
        coverage=interval.get("coverage"),
        calibrated=source == "calibrated",
        label=label,
        source=source,
    )


def prior_eta(p: Param, kind: str, prior_entries=None) -> float:
    """The transformed value of the shipped prior for a parameter on a device kind: the schema-2 model's
    offset (the global prior entry of the kind, else the ``*`` entry, else ``Param.default``)."""
    entries = prior_entries if prior_entries is not None else _prior_entries()
    cands = [e for e in entries if e["phase"] == p.phase and "vendor" not in e.get("scope", {})
             and e.get("scope", {}).get("kind") in (kind, None)]  # fmt: skip
    cands.sort(key=lambda e: e.get("scope", {}).get("kind") is None)
    value = cands[0]["params"].get(p.name, p.default) if cands else p.default
    return to_eta(p, max(float(value), TIME_PRIOR_FLOOR.get(p.name, 0.0)))


_PRIOR_CACHE: list = []


def _prior_entries() -> list:
    if not _PRIOR_CACHE:
        _PRIOR_CACHE.append(load_prior()["pooled"])
    return _PRIOR_CACHE[0]


DETECTED_SUFFIX = " (detected host {device})"


def detected_family(family: str, device: str) -> str:
    """The calibration family of a host outside the catalog: ``"<family> (detected host <device>)"``.  Its
    runs form their own group (calibration.features.point_family): their bandwidth is a copy probe, not a
    datasheet peak, so they are not pooled with the catalog devices of the same ISA family."""
    return family + DETECTED_SUFFIX.format(device=device)


def device_key(hardware: HardwareSpec) -> str:
    """The device name the schema-2 model's device effects use (the catalog id)."""
    return hardware.id


def calibration_keys(model: dict, hardware: HardwareSpec) -> tuple[str, str]:
    """(device, family) under which the schema-2 model knows ``hardware``.

    A detected host whose own runs are in the fit (``hardware.measured_as`` names a device of the model, in
    the family ``detected_family`` gives it) answers with that device's and family's effects; anything else
    with its catalog id and family (a detected host not in the fit: its family's level, then covariates)."""
    dev = (model.get("devices") or {}).get(hardware.measured_as) if hardware.measured_as else None
    if dev and dev.get("family") == detected_family(hardware.family, hardware.measured_as):
        return hardware.measured_as, str(dev["family"])
    return device_key(hardware), hardware.family


def model_carries(model: dict, phase: str, hardware: HardwareSpec) -> bool:
    """True when a schema-2 model section answers ``phase`` on ``hardware``: decode and prefill always (one
    fit); serving when the section holds the serving fit's parameters (files written before it keep serving
    as groups / pooled entries, and the lookup falls back to those, then to the prior) and the device has the
    datasheet bandwidth and bf16 TFLOPS the serving fit admits (calibration.serving: CPUs and devices without
    a TFLOPS figure are outside it, so they keep the prior's serving terms)."""
    if phase not in MODEL_PHASES:
        return False
    if phase != "serving":
        return True
    fitted = any(str(e.get("key", "")).startswith("serving.") for e in model["params"])
    return fitted and bool(hardware.bandwidth_gbs and hardware.bf16_tflops)


def model_params(model: dict, hardware: HardwareSpec, engine: str, phase: str, backend: str | None):
    """{name: value} of the fitted parameters of ``phase`` for one device under the schema-2 model."""
    from estimator.physics import covariates as cov

    (dev, fam), kind = calibration_keys(model, hardware), hardware.kind or "gpu"
    basis = bandwidth_basis(model, hardware)
    spec = replace(hardware, bandwidth_gbs=basis, bandwidth_measured_gbs=basis) if basis else hardware
    clock = clock_basis(model, hardware)
    spec = replace(spec, cpu_clock_ghz=clock) if clock else spec
    out = {}
    for entry in model["params"]:
        p = param(*entry["key"].split(".", 1))
        if p.phase != phase:
            continue
        beta = entry.get("beta", {})
        eta = prior_eta(p, kind) + beta.get("1", 0.0)
        for c, x in cov.covariates(spec, engine, backend, p.covariates).items():
            eta += beta.get(c, 0.0) * x
        eta += entry.get("family", {}).get(fam, 0.0) + entry.get("device", {}).get(dev, 0.0)
        out[p.name] = float(from_eta(p, eta))
    if basis and "bw_eff" in out:  # bandwidth x bw_eff stays what the host's own runs were fitted at
        out["bw_eff"] *= basis / float(hardware.bandwidth_gbs)
    return out


def record_covariate_factor(model: dict | None, key: str, covariate: str) -> float | None:
    """e^beta of a record-level covariate (``build=<era>``, ``setting=<name>``; estimator.physics.covariates)
    on the RATE parameter ``key`` (``decode.build_scale``: a factor on a decode step) in a schema-2 model,
    None when the model did not fit it.  The estimator never applies such a factor to an estimate (it predicts
    current builds run with their defaults); a report may say what the record's condition cost."""
    if not model:
        return None
    for entry in model.get("params", []):
        if entry.get("key") == key and covariate in entry.get("beta", {}):
            return math.exp(float(entry["beta"][covariate]))
    return None


def bandwidth_basis(model: dict, hardware: HardwareSpec) -> float | None:
    """GB/s: the bandwidth a detected host's own calibrated runs carried (``devices[...]["bandwidth_gbs"]``,
    calibration.pipeline.detected_bandwidth_basis) when the model answers ``hardware`` with that host's
    effects and the spec's bandwidth (a fresh probe) differs from it; None otherwise.

    The host's effects are relative to that figure, so ``model_params`` evaluates the covariates at it and
    scales ``bw_eff`` by basis / probe: the streaming rate bandwidth x bw_eff is the calibrated one whatever
    the new probe says (a copy probe varies by tens of percent between runs on a shared host, and the probe
    itself became multi-threaded on 2026-12-05: estimator.catalog.detect.bandwidth_probe_gbs)."""
    if not hardware.bandwidth_gbs:
        return None
    return _host_basis(model, hardware, "bandwidth_gbs", hardware.bandwidth_gbs)


def clock_basis(model: dict, hardware: HardwareSpec) -> float | None:
    """GHz: the clock a detected CPU host's own calibrated runs were fitted at
    (``devices[...]["cpu_clock_ghz"]``, calibration.pipeline.detected_clock_basis) when the model answers
    ``hardware`` with that host's effects and the spec's clock differs from it; None otherwise.
    ``model_params`` evaluates the covariates (``cpu_size``) at it: the host's effects absorbed whatever clock
    its records stated (none, 3 GHz assumed, before the clock was measured on virtual machines:
    estimator.catalog.clockprobe), so a clock found another way today keeps the calibrated speed."""
    if hardware.kind != "cpu":
        return None
    return _host_basis(model, hardware, "cpu_clock_ghz", hardware.cpu_clock_ghz)


def _host_basis(model: dict, hardware: HardwareSpec, field: str, current) -> float | None:
    """``model.devices[<host>][field]`` when ``hardware`` is a detected host the model answers with its own
    effects (``measured_as`` = its device key) and ``current`` (the spec's figure, None when unknown) differs
    from it; None otherwise."""
    if not hardware.measured_as:
        return None
    dev_key, _ = calibration_keys(model, hardware)
    if dev_key != hardware.measured_as:
        return None
    basis = (model.get("devices") or {}).get(dev_key, {}).get(field)
    if not basis or (current and abs(float(basis) - float(current)) < 1e-9):
        return None
    return float(basis)


def unit_name(engine: str, backend: str | None) -> str:
    """'engine/backend' as the model section counts its points (backend spelt one way: 'HIP' -> 'ROCm')."""
    from estimator.physics.covariates import normalise_backend

    return f"{engine}/{normalise_backend(backend)}"


def model_basis(
    model: dict, hardware: HardwareSpec, phase: str, engine: str = "", backend: str | None = None
) -> tuple[str, int]:
    """(basis, points behind it): the device measured in this phase with this engine and backend, else its
    family measured so, else pooled.  The backend defaults to the engine profile's for the device.  A model
    section without per-unit counts (``units``, older files) counts any engine and backend."""
    unit = unit_name(engine, backend or default_backend(hardware, engine)) if engine else ""

    def n_of(entry: dict) -> int:
        if not unit or "units" not in entry:
            return int(entry.get(phase, 0))
        return int(entry["units"].get(unit, {}).get(phase, 0))

    dev_key, fam_key = calibration_keys(model, hardware)
    dev = model.get("devices", {}).get(dev_key, {})
    if dev.get("family") == fam_key and n_of(dev):
        return "device", n_of(dev)
    fam = model.get("families", {}).get(fam_key, {})
    if n_of(fam):
        return "family", n_of(fam)
    return "pooled", int(sum(f.get(phase, 0) for f in model.get("families", {}).values()))


_BASIS_SCHEME = {"device": "lomo", "family": "lodo", "pooled": "lofo"}  # what calibrates each interval
_BASIS_TEXT = {
    "device": "device measured",
    "family": "family calibrated, device not measured",
    "pooled": "family not measured: covariates of similar devices",
}
_SCHEME_TEXT = {"lomo": "leave-one-model-out", "lodo": "leave-one-device-out", "lofo": "leave-one-family-out"}


def _interval_source(iv: dict) -> str:
    """Where an interval of the model section comes from, in words."""
    scheme = iv.get("scheme", "")
    if not scheme:
        return "of default width (too few held-out residuals)"
    return (
        f"from {_SCHEME_TEXT.get(scheme, scheme)} held-out residuals (conformal, {iv.get('n_residuals')} "
        "residuals)"
    )


def model_set(
    model: dict, prior_params: dict, hardware: HardwareSpec, engine: str, phase: str, backend: str | None
) -> CoefficientSet:
    """The CoefficientSet of one phase on one device under the schema-2 model (module doc)."""
    params = {**prior_params, **model_params(model, hardware, engine, phase, backend)}
    if phase == "prefill" and datasheet_tflops(hardware, False, engine, backend) is None:
        params["flops_eff"] = 1.0  # no datasheet peak: the fitted absolute rate is the effective one
    basis, n = model_basis(model, hardware, phase, engine, backend)
    unit_text = f"{engine} {backend or default_backend(hardware, engine)}".strip()
    # the serving metrics each have their own interval (of the time); the set's own is TPOT's
    by_basis = model.get("intervals", {})
    metrics = {m: by_basis.get(f"{phase}.{m}", {}).get(basis, {}) for m in SERVING_METRICS}
    iv = metrics["tpot"] if phase == "serving" else by_basis.get(phase, {}).get(basis, {})
    lo, hi = float(iv.get("log_lo", -0.7)), float(iv.get("log_hi", 0.5))
    if phase == "serving":
        note = f"{basis} ({_BASIS_TEXT[basis]}); 90 % intervals: " + "; ".join(
            f"{m.upper()} {_interval_source(iv_m)}" for m, iv_m in metrics.items() if iv_m or m != "ttft_lone"
        )
        intervals = {
            m: (min(float(iv_m.get("log_lo", lo)), 0.0), max(float(iv_m.get("log_hi", hi)), 0.0))
            for m, iv_m in metrics.items()
            if iv_m
        }
        notes = {m: f"{basis} ({_BASIS_TEXT[basis]}); 90 % interval {_interval_source(metrics[m])}"
                 for m in intervals}  # fmt: skip
    else:
        note = f"{basis} ({_BASIS_TEXT[basis]}); 90 % interval {_interval_source(iv)}"
        intervals, notes = {}, {}
    dev_key, fam_key = calibration_keys(model, hardware)
    own = " (this host's own runs)" if dev_key != device_key(hardware) else ""
    held_to, clock = bandwidth_basis(model, hardware), clock_basis(model, hardware)
    if own and (held_to or clock):
        carried = " and ".join(
            x for x in (f"the {held_to:.1f} GB/s probe" if held_to else "",
                        f"the {clock:.2f} GHz clock" if clock else "") if x
        )  # fmt: skip
        own = f" (this host's own runs, at {carried} they carried)"
    where = {
        "device": f"{dev_key} measured{own}, {fam_key}/{engine}",
        "family": f"family {hardware.family}/{engine}",
        "pooled": f"pooled over calibrated families (uncalibrated for {hardware.family} on {unit_text})",
    }[basis]
    what = "point" if phase == "serving" else "run"  # a serving record gives a TTFT and a TPOT point
    what += "" if n == 1 else "s"
    label = f"{'calibrated' if basis != 'pooled' else COVARIATES_LABEL}: {where} ({n} {what}); basis {basis}"
    return CoefficientSet(
        family=hardware.family,
        engine=engine,
        backend=backend or "",
        phase=phase,
        params=params,
        n_points=n,
        cv=dict(model.get("cv", {}).get(phase, {}).get(basis, {})),
        log_lo=min(lo, 0.0),
        log_hi=max(hi, 0.0),
        coverage=((iv.get("coverage") or {}).get(_BASIS_SCHEME[basis]) or {}).get("groups"),
        calibrated=basis != "pooled",
        label=label,
        source="calibrated" if basis != "pooled" else "pooled",
        intervals=intervals,
        metric_notes=notes,
        basis=basis,
        interval_note=note,
    )


def _validate_model(model: Any, where: str) -> None:
    """Raise CoefficientsError naming the first problem of a schema-2 ``model`` section."""
    if not isinstance(model, dict):
        raise CoefficientsError(f"{where}: 'model' must be an object")
    entries = model.get("params")
    if not isinstance(entries, list) or not entries:
        raise CoefficientsError(f"{where}: model.params must be a non-empty list")
    for i, e in enumerate(entries):
        at = f"{where}: model.params[{i}]"
        if not isinstance(e, dict) or "key" not in e:
            raise CoefficientsError(f"{at}: missing key 'key'")
        try:
            param(*str(e["key"]).split(".", 1))
        except (KeyError, TypeError):
            raise CoefficientsError(f"{at}: unknown parameter {e['key']!r}") from None
        for part in ("beta", "family", "device"):
            vals = e.get(part, {})
            if not isinstance(vals, dict):
                raise CoefficientsError(f"{at}: {part!r} must be an object")
            for k, v in vals.items():
                if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
                    raise CoefficientsError(f"{at}: {part}[{k!r}] must be a finite number, got {v!r}")
    for phase, by_basis in (model.get("intervals") or {}).items():
        for basis, iv in by_basis.items():
            lo, hi = iv.get("log_lo"), iv.get("log_hi")
            if not (isinstance(lo, int | float) and isinstance(hi, int | float) and lo <= hi):
                raise CoefficientsError(
                    f"{where}: model.intervals.{phase}.{basis} needs numbers log_lo <= log_hi, "
                    f"got {lo!r}, {hi!r}"
                )
    for level, entry in (model.get("maturity") or {}).items():
        lo = entry.get("log_lo") if isinstance(entry, dict) else None
        if not isinstance(lo, int | float) or isinstance(lo, bool) or not -10.0 <= lo <= 0.0:
            raise CoefficientsError(
                f"{where}: model.maturity.{level}.log_lo must be a number in [-10, 0], got {lo!r}"
            )


def _validate_entry(entry: Any, where: str, need_family: bool) -> None:
    """Raise CoefficientsError naming the first missing key or impossible value of one group/pooled entry."""
    if not isinstance(entry, dict):
        raise CoefficientsError(f"{where}: expected an object, got {type(entry).__name__}")
    keys = ("family", "engine", "phase", "params") if need_family else ("engine", "phase", "params")
    for k in keys:
        if k not in entry:
            raise CoefficientsError(f"{where}: missing key {k!r}")
    phase = entry["phase"]
    if phase not in PHASES:
        raise CoefficientsError(f"{where}: unknown phase {phase!r}; expected one of {PHASES}")
    params = entry["params"]
    if not isinstance(params, dict):
        raise CoefficientsError(f"{where}: 'params' must be an object")
    for k in REQUIRED_PARAMS[phase]:
        if k not in params:
            raise CoefficientsError(f"{where}: {phase} params missing {k!r}")
    for k, v in params.items():
        if k not in REQUIRED_PARAMS[phase] + OPTIONAL_PARAMS[phase]:
            raise CoefficientsError(f"{where}: unknown {phase} param {k!r}")
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
            raise CoefficientsError(f"{where}: param {k!r} must be a finite number, got {v!r}")
        kind = param(phase, k).kind
        if kind == EFF and not 0 < v <= 1:
            raise CoefficientsError(f"{where}: {k} = {v} is outside (0, 1]")
        if kind != EFF and v < 0:
            raise CoefficientsError(f"{where}: {k} = {v} must be >= 0")
        if kind == RATE and v <= 0:
            raise CoefficientsError(f"{where}: {k} must be > 0")
    interval = entry.get("interval", {})
    lo, hi = interval.get("log_lo", -0.7), interval.get("log_hi", 0.5)
    if not (isinstance(lo, int | float) and isinstance(hi, int | float) and lo <= hi):
        raise CoefficientsError(f"{where}: interval needs numbers log_lo <= log_hi, got {lo!r}, {hi!r}")


def parse_coefficients(data: Any, where: str = "<coefficients>") -> dict:
    """Validate a decoded coefficients document and return it.

    Raises CoefficientsError naming the key at fault.
    """
    if not isinstance(data, dict):
        raise CoefficientsError(f"{where}: expected a JSON object at the top level")
    if "schema_version" not in data:
        raise CoefficientsError(f"{where}: missing key 'schema_version'")
    if data["schema_version"] not in READABLE_VERSIONS:
        raise CoefficientsError(
            f"{where}: unsupported schema_version {data['schema_version']!r} "
            f"(this fitbench reads {', '.join(map(str, READABLE_VERSIONS))})"
        )
    if data["schema_version"] == 2:
        if "model" not in data:
            raise CoefficientsError(f"{where}: missing key 'model'")
        _validate_model(data["model"], where)
        data.setdefault("groups", [])
        data.setdefault("pooled", [])
    for k in ("groups", "pooled"):
        if k not in data:
            raise CoefficientsError(f"{where}: missing key {k!r}")
        if not isinstance(data[k], list):
            raise CoefficientsError(f"{where}: {k!r} must be a list")
    for i, g in enumerate(data["groups"]):
        _validate_entry(g, f"{where}: groups[{i}]", need_family=True)
    for i, p in enumerate(data["pooled"]):
        _validate_entry(p, f"{where}: pooled[{i}]", need_family=False)
    if not isinstance(data.get("memory", {}), dict):
        raise CoefficientsError(f"{where}: 'memory' must be an object")
    _validate_bands(data.get("memory_bands", {}), where)
    return data


BAND_KEYS = ("n", "ratio_p05", "ratio_p95", "ratio_min", "ratio_max", "median_ape", "within_5pct")


def _validate_bands(bands: object, where: str) -> None:
    """``memory_bands``: {engine: {term: band}}, each band (and each of its optional ``by_kind`` bands) with
    the numeric ``BAND_KEYS``, ratios > 0 and p05 <= p95."""
    if not isinstance(bands, dict):
        raise CoefficientsError(f"{where}: 'memory_bands' must be an object")
    for engine, per in bands.items():
        if not isinstance(per, dict):
            raise CoefficientsError(f"{where}: memory_bands[{engine!r}] must be an object")
        for term, b in per.items():
            at = f"{where}: memory_bands[{engine!r}][{term!r}]"
            _validate_band(b, at)
            kinds = b.get("by_kind", {})
            if not isinstance(kinds, dict):
                raise CoefficientsError(f"{at}: 'by_kind' must be an object")
            for kind, kb in kinds.items():
                _validate_band(kb, f"{at}['by_kind'][{kind!r}]")


def _validate_band(b: object, at: str) -> None:
    """One band: the numeric ``BAND_KEYS``, ratios > 0 and p05 <= p95."""
    if not isinstance(b, dict):
        raise CoefficientsError(f"{at} must be an object")
    for k in BAND_KEYS:
        v = b.get(k)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise CoefficientsError(f"{at}: missing or non-numeric key {k!r}")
    if min(b["ratio_p05"], b["ratio_min"]) <= 0 or b["ratio_p05"] > b["ratio_p95"]:
        raise CoefficientsError(f"{at}: ratios must be > 0 with ratio_p05 <= ratio_p95")


MAX_COEFFICIENTS_BYTES = 64 * 2**20


def _read(path: Path) -> dict:
    """A coefficients file: a regular file (a FIFO or device is refused without blocking) of at most
    MAX_COEFFICIENTS_BYTES, strict JSON (estimator.validate.parse_json), then ``parse_coefficients``."""
    from estimator.catalog.files import read_text
    from estimator.validate import parse_json

    try:
        data = parse_json(read_text(path, MAX_COEFFICIENTS_BYTES), str(path))
    except CoefficientsError:
        raise
    except SpecError as e:
        raise CoefficientsError(f"coefficients file {e}") from None
    return parse_coefficients(data, str(path))


def load_prior() -> dict:
    """The shipped prior document (estimator/data/prior_coefficients.json), validated."""
    return _read(PRIOR_PATH)


def load_coefficients(path: str | os.PathLike | None = None) -> CoefficientTable:
    """Load the coefficient table.

    path: explicit file; else env ``FITBENCH_COEFFICIENTS``; else the repo's results/coefficients.json when it
    exists; else only the shipped prior (every lookup then says "pooled prior (uncalibrated)").
    """
    prior = load_prior()
    chosen: Path | None = None
    if path is not None:
        chosen = Path(path)
    elif os.environ.get(ENV_VAR):
        chosen = Path(os.environ[ENV_VAR])
    elif DEFAULT_PATH.is_file():
        chosen = DEFAULT_PATH
    if chosen is None:
        return CoefficientTable(
            groups=(), pooled=(), prior=tuple(prior["pooled"]), memory=dict(prior.get("memory", {}))
        )
    data = _read(chosen)
    memory = {**prior.get("memory", {}), **data.get("memory", {})}
    return CoefficientTable(
        groups=tuple(data["groups"]),
        pooled=tuple(data["pooled"]),
        prior=tuple(prior["pooled"]),
        memory=memory,
        memory_bands=dict(data.get("memory_bands", {})),
        path=str(chosen),
        input_hash=data.get("input_hash"),
        created_utc=data.get("created_utc"),
        model=data.get("model"),
    )


def prior_table() -> CoefficientTable:
    """A table holding only the shipped prior, ignoring any results/coefficients.json (for tests and docs)."""
    prior = load_prior()
    return CoefficientTable(
        groups=(), pooled=(), prior=tuple(prior["pooled"]), memory=dict(prior.get("memory", {}))
    )
