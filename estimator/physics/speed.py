"""Speed physics: decode and prefill time from bytes moved and FLOPs done, with calibrated efficiencies.

Features come from the estimator's own memory physics (estimator.physics.weights, estimator.physics.kv), so
calibration fits
exactly the model that predicts.  Units: bytes, FLOP, seconds, tokens/s; bandwidth ``*_gbs`` is 10^9 B/s and
``*_tflops`` is 10^12 FLOP/s.

Decode (one step: each of the B = ``workload.n_seq`` sequences gains one token)::

    bytes   = dense + routed experts of the union touched by B tokens + B x KV read at depth  [device]
    t_mem   = bytes / (N_tp x bw x bw_eff) + host_bytes / (host_bw x host_bw_eff)
    t_comp  = B x flops_per_token / (N_tp x peak x flops_eff)          (only when B > 1)
    t_step  = t_fixed_s + t_layer_s x L + moe_route_s x L_moe + max(t_mem, t_comp) + t_comm

Expected distinct experts per MoE layer touched by B tokens each routed to k of E: U = E x (1 - (1 - k/E)^B).

Prefill (n_prompt tokens for each of B sequences on top of n_depth cached tokens, in ubatch passes)::

    t_c    = (flops - expert_flops + 2 k_half x (gemm_outputs - expert_gemm_outputs)) / (peak x eff)
               x (1 + m_half / u_p)
             + (expert_flops + 2 k_half x expert_gemm_outputs) / (peak x eff x flops_rel_moe)
               x (1 + m_half / m_e),
             eff = flops_eff x rel[class], m_e = expert_rows (rows of a routed expert's GEMM in a pass)
    t_mm   = sum over passes p of max(t_c x u_p / tokens, weight_bytes / (bw x bw_eff))
    t_attn = attn_flops / (peak x attn_eff) + kq_bytes / (bw x bw_eff)
    t      = (t_mm + t_attn + n_passes x (host_bytes / host_bw' + t_layer_s x L + dequant_bytes / (bw x
              bw_eff)) + t_comm) x pipeline_factor

* flops = 2 x matmul params (active, without the output head) per token + 2 x vocab x hidden per output row
  (the head runs only for rows that return logits: the last token of each llama_decode call / sequence);
  each pass p of u_p tokens does flops x u_p / tokens of them
  while streaming the weights once: the matmuls of a pass sit on the larger of their compute and memory roofs.
* rel[class]: prefill GEMM efficiency of the weights' kernel class relative to k-quants (``kernel_class``:
  f16 | legacy | kquant | iq4 | iquant | other; ``flops_rel_f16`` / ``flops_rel_legacy`` / ``flops_rel_iq4``
  (iq4_nl / iq4_xs) / ``flops_rel_iquant`` (the codebook-grid i-quants), 1 when a set does not carry them,
  k-quants and other formats are the reference 1).  llama.cpp runs different GEMM paths per weight type
  (cuBLAS on F16, MMQ / dequantize+GEMM on quants).
* GEMM row term (``gemm_m_half``, tokens, optional, 0 = none; devices with a datasheet peak only): a pass of
  u = tokens / n_passes tokens runs its GEMMs at eff x u / (u + m_half), the tile and wave quantisation of few
  rows, so a pass of a few tokens costs about its weights' read, not a fixed overhead.  A routed expert's
  GEMM has m_e = ``expert_rows`` rows (u x k / U: the pass's routings over the experts they touch), so the
  expert part of t_c grows by (1 + m_half / m_e) instead.
* dequant_bytes (0 for the builds the estimator predicts): an older build that ran quantized GEMMs as
  dequantize-to-F16 + BLAS (llama.cpp CUDA before mid-2024, ``dequant_gemm_features``) reads each pass's
  quantized weights and writes their F16 copies before the GEMMs, which then read the copies at the F16
  kernel class; calibration times such records that way.
* expert_flops: the routed-expert share of flops (``routed_active_params``); MoE expert GEMMs (llama.cpp
  mul_mat_id: about u x k / E rows per expert) run at ``flops_rel_moe`` (optional, 1 when absent) x eff.
* GEMM width term: a weight GEMM of inner dimension K runs at eff x K / (K + k_half) (``gemm_k_half``,
  elements, optional, 0 = no effect): a fixed cost per output element (the dot product's horizontal
  reduction, scales and store, the per-row quantization of the activations for vec_dot) next to the K MACs.
  Summed over the matrices the extra time is 2 x k_half x gemm_outputs / (peak x eff), gemm_outputs = tokens
  x output elements per token (``gemm_outputs_per_token``; routed experts x k / E) + vocab per logit row.
* attention FLOPs per layer and key = 4 x n_heads x head_dim (QK^T and AV; MLA uses its real dims),
  summed over the keys each token sees (causal: depth + i + 1, capped at the window on sliding/chunked
  layers).
* kq_bytes (llama.cpp without flash attention only): the KQ score matrix of each pass is materialised in F32,
  n_heads x u_p x n_kv_p per attention layer, and crosses memory KQ_SCORE_BYTES = 16 B per score (written by
  the KQ matmul, read + written by soft_max_ext, read by the KQV matmul).  Flash attention never writes it.
* one token per pass (n_batch or n_ubatch 1, e.g. llama-bench -b 1): every prompt token is a forward pass of
  one token that returns its logits, i.e. a decode step: the prompt takes B x n_prompt decode steps of one
  sequence over depths n_depth .. n_depth + n_prompt - 1 (``PrefillFeatures.decode_steps``; the decode
  formula and coefficients, not the GEMM model above, which is fitted on passes of 128+ tokens).
* pipeline_factor (llama.cpp layer split over P > 1 fully offloaded devices): llama_decode splits each call of
  up to n_batch tokens into m ubatches and runs them as a pipeline over the P devices (each holding L/P
  layers), at most SCHED_MAX_COPIES in flight; factor = sum over calls of makespan(m, P) / (P x sum of m),
  with makespan in stage times (``pipeline_makespan``).  1 for one device, vLLM, or partial offload.
Multi-device: ``split="tp"`` divides bytes and FLOPs by N and adds 2 all-reduces of hidden x tokens x 2 B per
layer (ring: 2 (N-1)/N x message / one-way link bandwidth, + ``t_allreduce_s`` latency); ``split="pp"``
(layer split) serialises the devices for one decode stream: bytes at one device's rate plus N-1 activation
hops (prefill micro-batches pipeline, see pipeline_factor).
A device whose datasheet TFLOPS is unknown (CPUs) uses the coefficient set's ``flops_abs_tflops``.

Support (estimator.physics.support / fallback): ``speed_sets`` looks up the coefficient sets of the backend
the engine uses on the device and, when the configuration runs on a fallback (matmuls on the host CPU, CPU
cores only, flash attention off, weight-only), the host CPU's sets and the ``SpeedPath``; ``decode_estimate``
/ ``prefill_estimate`` time the device part and the host part with the two formulas above and add the
device<->host switches (estimator.physics.fallback).  A native configuration gives exactly the numbers of
``decode_step_s`` / ``prefill_s``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from estimator.engines import ENGINES, get_engine
from estimator.physics import fallback as fallback_mod
from estimator.physics import kv as kv_mod
from estimator.physics import weights as weights_mod
from estimator.physics.coefficients import CoefficientSet, CoefficientTable, param
from estimator.physics.counts import (  # noqa: F401 - re-exported: the speed physics' public helpers
    DECODE_CLASS_PARAMS,
    ENGINE_KERNELS,
    GEMM_K_HALF_PARAM,
    GEMM_M_HALF_PARAM,
    KERNEL_CLASS_PARAMS,
    KQ_SCORE_BYTES,
    MOE_PARAM,
    SCHED_MAX_COPIES,
    attention_flops,
    attn_flops_per_key,
    class_rel,
    decode_kernel_class,
    expert_rows,
    expert_union,
    gemm_outputs_per_token,
    indexer_flops_per_key,
    is_fp8,
    kernel_class,
    kq_score_elems,
    last_layer_ffn,
    matmul_params,
    n_moe_layers,
    pipeline_factor,
    pipeline_makespan,
    routed_active_params,
    state_flops_per_token,
    sum_keys,
)
from estimator.physics.covariates import (  # noqa: F401 - datasheet_tflops re-exported (speed's public helper)
    TYPICAL_STREAM_FRACTION,
    datasheet_tflops,
    shader_gemm_reason,
)
from estimator.specs import (
    GB,
    HardwareSpec,
    ModelSpec,
    QuantSpec,
    Workload,
)

DEFAULT_HOST_BANDWIDTH_GBS = 89.6  # dual-channel DDR5-5600 peak (2 x 8 B x 5600 MT/s), as the catalog assumes
DEFAULT_INTERCONNECT_GBS = 64.0  # PCIe 4.0 x16, bidirectional aggregate (as the catalog quotes links)
# Optional coefficients applied when a set does not carry them (the same in calibration and prediction): the
# defaults of the parameter table (estimator.physics.coefficients.PARAMS)
DEFAULT_HOST_BW_EFF = param("decode", "host_bw_eff").default
DEFAULT_T_ALLREDUCE_S = param("decode", "t_allreduce_s").default
TTFT_PROMPT_TOKENS = 4096  # the prompt a report's TTFT is for (ttft_prompt_tokens: the context when smaller)
# What each phase's parameters borrow from the other phase's set (merged_params; calibration does the same):
# batched decode's compute roof from prefill, the prefill memory / offload / all-reduce terms from decode.
BORROW_FROM_PREFILL = ("flops_eff", "flops_abs_tflops")
BORROW_FROM_DECODE = ("bw_eff", "host_bw_eff", "t_allreduce_s")
ACTIVATION_BYTES = 2  # bf16/f16 activations exchanged between devices
_MIDPOINT_SEGMENTS = 16  # tg{n} mean: midpoint rule over this many segments (exact for piecewise-linear t)


@dataclass(frozen=True)
class SpeedEstimate:
    """One predicted speed with its interval and the coefficient set behind it.

    tok_s: point estimate (tokens/s); lo_tok_s / hi_tok_s: tok_s x exp(log_lo / log_hi) of the set.
    time_s: the modelled time of the operation (one decode step, or the whole prefill).
    """

    phase: str
    tok_s: float
    lo_tok_s: float
    hi_tok_s: float
    time_s: float
    coefficients: str
    calibrated: bool
    n_points: int
    family: str
    basis: str = ""  # schema-2 coefficients: device | family | pooled (how far from calibrated data)

    def time_at(self, tok_s: float) -> float:
        """The operation's time at another rate for the same tokens: time_s x tok_s / rate (s)."""
        return self.time_s * self.tok_s / tok_s


@dataclass(frozen=True)
class SpeedReport:
    """Every speed figure of a report.

    decode: mean single-sequence decode speed over workload.n_gen tokens from workload.n_depth (batch n_seq);
    prefill: pp{n_prompt} at n_depth; ttft_*: prefill of ``ttft_prompt_tokens`` tokens (TTFT_PROMPT_TOKENS,
    or the whole context when it is smaller) + one decode step;
    aggregate: total tokens/s of ``concurrency`` sequences decoding together with KV at half of n_ctx.
    """

    decode: SpeedEstimate
    prefill: SpeedEstimate
    ttft_s: float
    ttft_lo_s: float
    ttft_hi_s: float
    ttft_prompt_tokens: int
    aggregate: SpeedEstimate
    concurrency: int
    per_sequence_tok_s: float
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------- features
@dataclass(frozen=True, slots=True)
class DecodeFeatures:
    """Physics features of one decode step of ``batch`` sequences at one depth (bytes, FLOP, counts).

    weight_bytes: device bytes of weights the step reads (routed experts: the union the batch touches);
    kv_bytes: KV + state bytes the batch reads at its depth; host_bytes: offloaded weight bytes read from host
    RAM; expert_union_bytes: the routed part of weight_bytes before offload; flops_per_token: one sequence.
    Numeric fields may be numpy arrays of broadcastable shapes (estimator.physics.matrix), never on the report
    path.
    """

    weight_bytes: float
    kv_bytes: float
    host_bytes: float
    expert_union_bytes: float
    flops_per_token: float
    batch: int
    n_layers: int
    n_moe_layers: int
    hidden_size: int
    n_devices: int
    split: str
    fp8: bool
    engine: str
    kernel_class: str = "kquant"  # decode kernel class of the weights (counts.decode_kernel_class)
    backend: str = ""  # the engine's backend (Workload.backend; '' = the profile's default for the device)

    @property
    def bytes_per_token(self) -> float:
        """Device bytes read per step: weights + KV of the batch."""
        return self.weight_bytes + self.kv_bytes

    @property
    def flops(self) -> float:
        """FLOPs of the step: batch x flops_per_token."""
        return self.batch * self.flops_per_token


@dataclass(frozen=True, slots=True)
class PrefillFeatures:
    """Physics features of prefilling ``tokens`` tokens (n_prompt for each of B sequences) at a depth.

    flops: 2 x matmul params x tokens (the output head only for the rows that return logits); expert_flops:
    its routed-expert part; gemm_outputs / expert_gemm_outputs: GEMM output elements (all / routed experts,
    for the width term); attn_flops; kq_bytes: the KQ score traffic of an engine that materialises it
    without flash attention; weight_bytes / host_bytes: bytes one ubatch pass streams from the device / host;
    expert_union_bytes: the routed experts' part of one pass's reads before offload (the union its tokens
    touch); decode_steps: with one token per pass, the DecodeFeatures of one sequence's prompt tokens (at the
    ``decode_depths`` of the prompt), which time it instead (module doc), else empty;
    n_passes = ceil(tokens / n_ubatch) of ubatch_tokens each; kernel_class (estimator.physics.counts);
    pipeline_factor (llama.cpp layer split).
    """

    tokens: int
    flops: float
    expert_flops: float
    gemm_outputs: float
    expert_gemm_outputs: float
    attn_flops: float
    kq_bytes: float
    weight_bytes: float
    host_bytes: float
    n_passes: int
    ubatch_tokens: int
    kernel_class: str
    pipeline_factor: float
    n_layers: int
    n_moe_layers: int
    hidden_size: int
    n_devices: int
    split: str
    fp8: bool
    engine: str
    expert_union_bytes: float = 0.0
    decode_steps: tuple = ()
    backend: str = ""  # as DecodeFeatures
    # bytes a pass moves to dequantize its quantized GEMM weights to F16 before the BLAS GEMMs (read + write;
    # an older build's path, ``dequant_gemm_features``), 0 on the quantized kernels' path
    dequant_bytes: float = 0.0
    # rows of each touched routed expert's GEMM in a pass of the mean size u = tokens / n_passes
    # (``counts.expert_rows``: u x k / U(u)); 0 for a dense model (the pass's u rows then apply)
    expert_rows: float = 0.0


_AVERAGED = ("weight_bytes", "kv_bytes", "host_bytes", "expert_union_bytes", "flops_per_token")


def mean_features(features: Sequence[DecodeFeatures]) -> DecodeFeatures:
    """The features with their per-depth quantities averaged.  For one sequence the step time is affine in
    them (no compute roof), so the time of the mean equals the mean of the times: one evaluation instead of
    one per depth (calibration fits thousands of points)."""
    n = len(features)
    return replace(features[0], **{k: sum(getattr(f, k) for f in features) / n for k in _AVERAGED})


def weights_read(
    model: ModelSpec,
    quant: QuantSpec,
    n_tokens: int,
    moe_offload_layers: int = 0,
    offload_bytes: int = 0,
    whole_modules: bool = False,
) -> tuple[float, float, float]:
    """(device_bytes, host_bytes, routed_union_bytes) of weights one forward pass over n_tokens reads.

    Routed experts: routed_expert_bytes x U(n_tokens)/E; the rest of active_bytes_per_token is always read.
    Experts of the first ``moe_offload_layers`` layers live in host RAM; ``offload_bytes`` of other weights
    too, assumed spread evenly, so that fraction (offload_bytes / total weight bytes) of the remaining read is
    on the host; with ``whole_modules`` (an engine that copies every parameter of an offloaded module at each
    forward pass, ``EngineProfile.offload_copies_modules``: SGLang) the host part is that fraction of all
    the weight bytes, every routed expert included.
    """
    wb = breakdown(model, quant)
    active = float(wb.active_bytes_per_token)
    host = 0.0
    union_bytes = 0.0
    if model.moe is not None and wb.routed_expert_bytes:
        e, k = model.moe.n_experts, model.moe.n_experts_used
        routed_active = wb.routed_expert_bytes * k / e
        union_bytes = wb.routed_expert_bytes * expert_union(e, k, n_tokens) / e
        active = active - routed_active + union_bytes
        if moe_offload_layers > 0:
            # llama.cpp --n-cpu-moe N keeps the experts of the first N layers in host RAM
            host_frac = sum(wb.per_layer_routed_bytes[:moe_offload_layers]) / wb.routed_expert_bytes
            host = union_bytes * host_frac
            active -= host
    if offload_bytes > 0 and wb.total_bytes > 0:
        frac = min(offload_bytes / wb.total_bytes, 1.0)
        host += (wb.total_bytes - wb.lookup_bytes if whole_modules else active) * frac
        active *= 1.0 - frac
    return active, host, union_bytes


def breakdown(model: ModelSpec, quant: QuantSpec):
    """Weight breakdown: exact tensor sums for a GGUF model (its file is one quant), else the recipe."""
    if model.gguf_tensors is not None:
        return weights_mod.weight_breakdown(model, None)
    return weights_mod.weight_breakdown(model, quant)


def _lerp(fn, depth: float) -> float:
    """fn at a possibly fractional depth: linear interpolation between floor and ceil."""
    lo = math.floor(depth)
    frac = depth - lo
    if frac == 0:
        return float(fn(int(lo)))
    return (1.0 - frac) * fn(int(lo)) + frac * fn(int(lo) + 1)


def kv_read_at(model: ModelSpec, depth: float, kv_dtype: str, engine: str) -> float:
    """kv.kv_read_bytes at a fractional depth (interpolated), bytes for one sequence."""
    return _lerp(lambda d: kv_mod.kv_read_bytes(model, d, kv_dtype, engine), depth)


def attn_flops_at(model: ModelSpec, depth: float, engine: str = "llama.cpp") -> float:
    """Attention FLOPs of one decoded token at a fractional depth (absorbed MLA form, interpolated; DSA's
    selected keys only on an engine with sparse kernels, ``EngineProfile.sparse_attention``)."""
    sparse = get_engine(engine).sparse_attention
    return _lerp(lambda d: attention_flops(model, d, 1, absorbed=True, sparse=sparse), depth)


def engine_class(cls: str, engine: str) -> str:
    """The kernel class ``cls`` of the weights (counts.kernel_class / decode_kernel_class) as ``engine`` runs
    them: ``cls`` on an engine of ggml's per-type kernels (``EngineProfile.quant_kernel_classes``), else
    ``counts.ENGINE_KERNELS``, which no class ratio scales."""
    return cls if get_engine(engine).quant_kernel_classes else ENGINE_KERNELS


def decode_features(model: ModelSpec, quant: QuantSpec, workload: Workload, depth: float) -> DecodeFeatures:
    """Features of one decode step of workload.n_seq sequences, each with ``depth`` cached tokens.

    ``depth`` may be fractional (a midpoint of ``decode_depths``): KV bytes and attention FLOPs are then
    linearly interpolated between the neighbouring integer depths.
    """
    b = max(int(workload.n_seq), 1)
    wb = breakdown(model, quant)
    moe_off, off = workload.moe_offload_layers, workload.offload_bytes
    whole = get_engine(workload.engine).offload_copies_modules
    dev, host, union_bytes = weights_read(model, quant, b, moe_off, off, whole)
    kv_bytes = b * kv_read_at(model, depth, workload.kv_dtype, workload.engine)
    fpt = 2 * matmul_params(model, wb.n_params_active) + attn_flops_at(model, depth, workload.engine)
    return DecodeFeatures(
        weight_bytes=dev,
        kv_bytes=float(kv_bytes),
        host_bytes=host,
        expert_union_bytes=union_bytes,
        flops_per_token=float(fpt),
        batch=b,
        n_layers=model.n_layers,
        n_moe_layers=n_moe_layers(model),
        hidden_size=model.hidden_size,
        n_devices=max(int(workload.n_devices), 1),
        split=workload.split,
        fp8=is_fp8(quant),
        engine=workload.engine,
        kernel_class=engine_class(decode_kernel_class(model, quant), workload.engine),
        backend=workload.backend,
    )


def decode_depths(depth: int, n_gen: int) -> list[float]:
    """Depths at which the mean step time of tg{n_gen} from ``depth`` is evaluated.

    The tokens are generated at depths depth .. depth+n-1; seen as the interval [depth - 1/2, depth + n - 1/2]
    cut into S = min(n_gen, 16) equal segments, the midpoint rule evaluates t at depth - 1/2 + (j + 1/2) n/S
    (possibly fractional).  The mean of those equals the exact mean of t over the n integer depths whenever t
    is linear in depth (as the KV term is between window breakpoints).
    """
    n = max(int(n_gen), 1)
    s = min(n, _MIDPOINT_SEGMENTS)
    return [depth - 0.5 + (j + 0.5) * n / s for j in range(s)]


def tg_features(model: ModelSpec, quant: QuantSpec, workload: Workload, depth: int, n_gen: int):
    """Features of tg{n_gen} from ``depth`` (llama-bench: n_gen / total time), one per ``decode_depths``;
    ``decode_step_s`` of the list is the mean step time."""
    return [decode_features(model, quant, workload, d) for d in decode_depths(depth, n_gen)]


def prefill_features(model: ModelSpec, quant: QuantSpec, workload: Workload) -> PrefillFeatures:
    """Features of prefilling workload.n_prompt tokens for each of n_seq sequences at n_depth."""
    b = max(int(workload.n_seq), 1)
    n_prompt = max(int(workload.n_prompt), 0)
    tokens = b * n_prompt
    ubatch = max(min(int(workload.n_ubatch), int(workload.n_batch)), 1)
    n_passes = math.ceil(tokens / ubatch) if tokens else 0
    per_pass = min(tokens, ubatch)
    wb = breakdown(model, quant)
    moe_off, off = workload.moe_offload_layers, workload.offload_bytes
    whole = get_engine(workload.engine).offload_copies_modules
    dev, host, union = weights_read(model, quant, per_pass, moe_off, off, whole)
    # The output head runs only for the rows that return logits: the last token of each llama_decode call
    # (llama-bench / llama-cpp-python without logits_all), of each sequence under vLLM.
    head = model.vocab_size * model.hidden_size
    body = max(matmul_params(model, wb.n_params_active) - head, 0)
    n_out = max(b, math.ceil(tokens / max(int(workload.n_batch), ubatch))) if tokens else 0
    outs, routed_outs = gemm_outputs_per_token(model)
    # llama.cpp runs the last layer's FFN only for the n_out rows that return logits (EngineProfile
    # .last_layer_ffn_outputs_only): its work for the other tokens - n_out rows is not done
    skip = tokens - n_out if get_engine(workload.engine).last_layer_ffn_outputs_only else 0
    ffn, ffn_routed, ffn_outs, ffn_routed_outs = last_layer_ffn(model) if skip else (0, 0, 0, 0)
    kq = 0.0
    if get_engine(workload.engine).materializes_kq_without_fa and not workload.flash_attn and n_prompt:
        u_seq = max(ubatch // b, 1) if b > 1 else ubatch
        elems = kq_score_elems(model, int(workload.n_depth), n_prompt, u_seq)
        kq = float(b * KQ_SCORE_BYTES * model.n_heads * elems)
    return PrefillFeatures(
        tokens=tokens,
        flops=float(2 * (body * tokens + head * n_out - ffn * skip)),
        expert_flops=float(2 * (min(routed_active_params(model), body) * tokens - ffn_routed * skip)),
        gemm_outputs=float(outs * tokens + model.vocab_size * n_out - ffn_outs * skip),
        expert_gemm_outputs=float(routed_outs * tokens - ffn_routed_outs * skip),
        attn_flops=float(b * attention_flops(model, int(workload.n_depth), n_prompt,
                                             sparse=get_engine(workload.engine).sparse_attention)),
        kq_bytes=kq,
        weight_bytes=dev,
        host_bytes=host,
        n_passes=n_passes,
        ubatch_tokens=per_pass,
        kernel_class=engine_class(kernel_class(model, quant), workload.engine),
        pipeline_factor=pipeline_factor(workload, tokens, ubatch),
        n_layers=model.n_layers,
        n_moe_layers=n_moe_layers(model),
        hidden_size=model.hidden_size,
        n_devices=max(int(workload.n_devices), 1),
        split=workload.split,
        fp8=is_fp8(quant),
        engine=workload.engine,
        expert_union_bytes=union,
        decode_steps=one_token_steps(model, quant, workload) if per_pass == 1 else (),
        backend=workload.backend,
        expert_rows=expert_rows(model, tokens / n_passes if n_passes else 0),  # at the mean pass, as u
    )


def dequant_gemm_features(f: PrefillFeatures, model: ModelSpec, quant: QuantSpec) -> PrefillFeatures:
    """The features of ``f`` on a build that runs quantized GEMMs as dequantize-to-F16 + BLAS GEMM
    (``EngineProfile.older_build_dequant_gemm``: llama.cpp CUDA before mid-2024): per pass, the body's
    quantized weights q (the bytes the pass reads, less the output head, which its logit rows run on the
    quantized mat-vec kernel) are read and written as F16 copies of f16 = q x 2 B / (bytes per parameter)
    bytes (``dequant_bytes`` = q + f16, timed at the weight-streaming rate), and the GEMMs then read those
    copies at the F16 kernel class.  ``f`` unchanged for F16 weights or one token per pass."""
    if f.kernel_class == "f16" or f.decode_steps or not f.tokens:
        return f
    wb = breakdown(model, quant)
    head = model.vocab_size * model.hidden_size
    head_bytes = wb.output_bytes or (wb.token_embd_bytes if model.tie_embeddings else 0)
    body_bytes = sum(wb.matmul_bytes_by_type.values()) - head_bytes
    body_params = matmul_params(model, wb.n_params_active) - head
    if body_bytes <= 0 or body_params <= 0:
        return f
    q = max(f.weight_bytes - head_bytes, 0.0)
    f16 = q * 2.0 * body_params / body_bytes
    return replace(f, kernel_class="f16", weight_bytes=f.weight_bytes - q + f16, dequant_bytes=q + f16)


def one_token_steps(model: ModelSpec, quant: QuantSpec, workload: Workload) -> tuple:
    """DecodeFeatures of a prompt prefilled one token per pass (module doc): one sequence's n_prompt steps
    from n_depth, as ``tg_features`` evaluates a generation of that length (a prompt token's pass reads the
    same weights and KV and runs the output head, as a decode step does)."""
    wl = replace(workload, n_seq=1)
    return tuple(tg_features(model, quant, wl, int(workload.n_depth), max(int(workload.n_prompt), 1)))


# ------------------------------------------------------------------------------------------------ times
def peak_tflops(
    hardware: HardwareSpec, params: dict, fp8: bool = False, engine: str = "", backend: str | None = ""
) -> float:
    """Dense TFLOPS of the GEMMs: ``datasheet_tflops`` (of the engine's ``backend``, '' = its default), else
    ``flops_abs_tflops`` of the coefficient set (a device without a datasheet figure: CPUs); ValueError when
    neither is known."""
    peak = datasheet_tflops(hardware, fp8, engine, backend)
    if peak is not None:
        return peak
    if "flops_abs_tflops" in params:
        return float(params["flops_abs_tflops"])
    raise ValueError(
        f"{hardware.id}: datasheet TFLOPS unknown and the coefficient set has no flops_abs_tflops"
    )


def _bandwidth_gbs(hardware: HardwareSpec) -> float:
    if not hardware.bandwidth_gbs:
        raise ValueError(f"{hardware.id}: memory bandwidth unknown; speed cannot be estimated")
    return float(hardware.bandwidth_gbs)


def host_link_cap_bs(hardware: HardwareSpec) -> float:
    """Cap on the rate offloaded weights reach a discrete device (kind gpu/npu) in prefill: one direction of
    interconnect_gbs (the catalog quotes bidirectional aggregates), B/s; infinite for CPUs and unified
    memory."""
    if hardware.kind in ("gpu", "npu"):
        return 0.5 * (hardware.interconnect_gbs or DEFAULT_INTERCONNECT_GBS) * 1e9
    return math.inf


def link_bs(hardware: HardwareSpec) -> float:
    """One direction of the device interconnect, B/s (tensor-parallel all-reduces, pipeline hops)."""
    return 0.5 * (hardware.interconnect_gbs or DEFAULT_INTERCONNECT_GBS) * 1e9


@dataclass(frozen=True)
class DeviceRates:
    """What a device contributes to the time formulas before any coefficient: B/s and FLOP/s.

    bandwidth_bs: datasheet memory bandwidth; peak_flops_s: the GEMM rate of ``datasheet_tflops`` (None when
    not catalogued: a coefficient set's flops_abs_tflops stands in); host_bandwidth_bs: host RAM (offload);
    link_cap_bs: ``host_link_cap_bs``; link_bs: one direction of the interconnect; decode_link_cap_bs: the cap
    on offloaded weights in decode, ``link_cap_bs`` for an engine that copies them to the device at every
    forward pass (``EngineProfile.offload_over_link``: vLLM, SGLang), infinite where the host CPU computes
    the offloaded layers (llama.cpp); stream_roof: ``stream_roof`` of the device.  Fields may be numpy arrays
    over points (calibration) or devices (estimator.physics.matrix).
    """

    bandwidth_bs: float
    peak_flops_s: float | None
    host_bandwidth_bs: float
    link_cap_bs: float
    link_bs: float
    decode_link_cap_bs: float = math.inf
    stream_roof: float = 1.0


def stream_roof(hardware: HardwareSpec) -> float:
    """The largest fraction of ``bandwidth_gbs`` a decode step streams its weights at, whatever the kernel
    class: 1 for a datasheet bandwidth (no kernel reads memory faster than its interface); 1 /
    TYPICAL_STREAM_FRACTION when the only figure is a measured streaming rate (``bandwidth_measured_gbs`` =
    ``bandwidth_gbs``: a detected host's copy probe), which stands ~0.85 of the datasheet that bounds a
    read-only stream (estimator.physics.covariates ``bw_measured``)."""
    bw, measured = hardware.bandwidth_gbs, hardware.bandwidth_measured_gbs
    if bw and measured and abs(float(measured) - float(bw)) <= 1e-9 * float(bw):
        return 1.0 / TYPICAL_STREAM_FRACTION
    return 1.0


def device_rates(
    hardware: HardwareSpec, engine: str = "", fp8: bool = False, backend: str | None = ""
) -> DeviceRates:
    """The DeviceRates of a device under the engine's ``backend`` ('' = its default; raises ValueError when
    the device's bandwidth is unknown)."""
    peak = datasheet_tflops(hardware, fp8, engine, backend)
    cap = host_link_cap_bs(hardware)
    return DeviceRates(
        bandwidth_bs=_bandwidth_gbs(hardware) * 1e9,
        peak_flops_s=None if peak is None else peak * 1e12,
        host_bandwidth_bs=(hardware.host_bandwidth_gbs or DEFAULT_HOST_BANDWIDTH_GBS) * 1e9,
        link_cap_bs=cap,
        link_bs=link_bs(hardware),
        decode_link_cap_bs=cap if engine and get_engine(engine).offload_over_link else math.inf,
        stream_roof=stream_roof(hardware),
    )


def gemm_peak_s(peak_flops_s, params: dict):
    """FLOP/s the GEMMs run at before efficiencies: the datasheet peak, else the set's flops_abs_tflops x 1e12
    (None when neither is known).  An array of peaks (calibration) holds NaN where the datasheet has none."""
    absolute = params.get("flops_abs_tflops")
    if peak_flops_s is None:
        return None if absolute is None else absolute * 1e12
    if absolute is not None and _is_array(peak_flops_s):
        import numpy as np

        return np.where(np.isnan(peak_flops_s), absolute * 1e12, peak_flops_s)
    return peak_flops_s


@dataclass(frozen=True)
class DecodeRates:
    """What one device with one decode coefficient set gives the step-time formula (B/s, FLOP/s, s).

    bw_bs = bandwidth x bw_eff; weight_rel: the decode kernel class's bandwidth ratio (``bw_rel_*``, 1 for
    k-quants and sets without it), applied to the weight bytes; host_bw_bs = host RAM bandwidth x
    host_bw_eff; host_link_bs: one device's link when the engine copies offloaded weights to the device
    (``DeviceRates.decode_link_cap_bs``; infinite otherwise), which ``host_read_bs`` caps host_bw_bs with;
    flops_s = GEMM peak x flops_eff (None when the device has no TFLOPS figure: only batched decode needs it,
    and then it is an error); link_bs = one direction of the interconnect; the overheads of the set.  Fields
    may be numpy arrays over devices (estimator.physics.matrix) or points (calibration).
    """

    bw_bs: float
    host_bw_bs: float
    flops_s: float | None
    link_bs: float
    t_fixed_s: float
    t_layer_s: float
    moe_route_s: float
    t_allreduce_s: float
    flops_error: str = ""
    weight_rel: float = 1.0
    host_link_bs: float = math.inf


def rates_for_decode(
    d: DeviceRates, params: dict, kernel_class="kquant", flops_error: str = ""
) -> DecodeRates:
    """DecodeRates from a device's rates and a decode set's params (arrays allowed: one formula for the
    report, the vectorised matrix and calibration).  A device without a datasheet peak uses flops_abs_tflops
    for the compute roof when the set carries it."""
    peak = gemm_peak_s(d.peak_flops_s, params)
    return DecodeRates(
        bw_bs=d.bandwidth_bs * params["bw_eff"],
        host_bw_bs=d.host_bandwidth_bs * params.get("host_bw_eff", DEFAULT_HOST_BW_EFF),
        host_link_bs=d.decode_link_cap_bs,
        flops_s=None if peak is None else peak * params.get("flops_eff", 1.0),
        link_bs=d.link_bs,
        t_fixed_s=params["t_fixed_s"],
        t_layer_s=params["t_layer_s"],
        moe_route_s=params.get("moe_route_s", 0.0),
        t_allreduce_s=params.get("t_allreduce_s", DEFAULT_T_ALLREDUCE_S),
        flops_error=flops_error if peak is None else "",
        weight_rel=_minimum(class_rel(params, kernel_class, DECODE_CLASS_PARAMS),
                            d.stream_roof / params["bw_eff"]),  # fmt: skip
    )


def decode_rates(
    hardware: HardwareSpec,
    params: dict,
    engine: str = "",
    fp8: bool = False,
    kernel_class: str = "kquant",
    backend: str | None = "",
) -> DecodeRates:
    """The DecodeRates of a device (raises ValueError when its bandwidth is unknown)."""
    try:
        peak_tflops(hardware, params, fp8, engine, backend)
        error = ""
    except ValueError as exc:
        error = str(exc)
    return rates_for_decode(device_rates(hardware, engine, fp8, backend), params, kernel_class, error)


def _is_array(x) -> bool:
    return getattr(x, "ndim", 0) > 0


def _maximum(a, b):
    """max(a, b) for numbers; element-wise for numpy arrays (numpy is imported only when arrays come in, so
    the report path stays free of it)."""
    try:
        return a if a >= b else b
    except ValueError:  # the truth value of an array
        import numpy as np

        return np.maximum(a, b)


def _minimum(a, b):
    """min(a, b) for numbers; element-wise for numpy arrays."""
    try:
        return a if a <= b else b
    except ValueError:
        import numpy as np

        return np.minimum(a, b)


def _where(cond, a, b):
    """``a if cond else b`` for a scalar condition; element-wise (numpy.where) for an array one."""
    if not _is_array(cond):
        return a if cond else b
    import numpy as np

    return np.where(cond, a, b)


def _tp(n_devices, split):
    """Devices a tensor-parallel step divides bytes and FLOPs over (1 under layer split)."""
    if isinstance(split, str):
        return n_devices if split == "tp" else 1
    return _where(split == "tp", n_devices, 1)


def comm_s(n_devices: int, split: str, n_layers, hidden_size, tokens: int, link_bs, t_allreduce_s):
    """Interconnect time of one forward pass of ``tokens`` tokens over n_devices (see module doc): pipeline
    (pp) N-1 activation hops; tensor parallel (tp) 2 ring all-reduces per layer.  Arrays allowed (points of
    a calibration: every argument element-wise)."""
    if not (_is_array(n_devices) or _is_array(split)):
        n = int(n_devices)
        if n <= 1:
            return 0.0
        msg = hidden_size * tokens * ACTIVATION_BYTES
        if split == "pp":
            return (n - 1) * (t_allreduce_s + msg / link_bs)
        return n_layers * 2 * (t_allreduce_s + 2 * (n - 1) / n * msg / link_bs)
    n = n_devices
    msg = hidden_size * tokens * ACTIVATION_BYTES
    pp = (n - 1) * (t_allreduce_s + msg / link_bs)
    tp = n_layers * 2 * (t_allreduce_s + 2 * (n - 1) / n * msg / link_bs)
    return _where(n <= 1, 0.0, _where(split == "pp", pp, tp))


def offload_links(n_devices, split):
    """Device links offloaded weights cross at once when the engine copies them to the devices: under tensor
    parallelism each of the N devices copies its own share over its own link (N), under a layer split one
    stage at a time (1)."""
    return _tp(n_devices, split)


def host_read_bs(f: DecodeFeatures, r: DecodeRates):
    """B/s at which a decode step reads its offloaded weights: host RAM x host_bw_eff, capped by the links
    they cross when the engine copies them to the devices (``host_link_bs`` x ``offload_links``)."""
    return _minimum(r.host_bw_bs, r.host_link_bs * offload_links(f.n_devices, f.split))


def step_s(f: DecodeFeatures, r: DecodeRates):
    """Seconds of one decode step from features and rates: the one formula of decode (module doc).  Feature
    and rate fields may be numpy arrays (the vectorised matrix, calibration)."""
    tp = _tp(f.n_devices, f.split)
    t_mem = (f.weight_bytes / r.weight_rel + f.kv_bytes) / (tp * r.bw_bs) + f.host_bytes / host_read_bs(f, r)
    t_comp = 0.0
    if _is_array(f.batch):
        if r.flops_s is not None:
            t_comp = _where(f.batch > 1, f.flops / (tp * r.flops_s), 0.0)
    elif f.batch > 1:
        if r.flops_s is None:
            raise ValueError(r.flops_error)
        t_comp = f.flops / (tp * r.flops_s)
    overhead = r.t_fixed_s + r.t_layer_s * f.n_layers + r.moe_route_s * f.n_moe_layers
    comm = comm_s(f.n_devices, f.split, f.n_layers, f.hidden_size, f.batch, r.link_bs, r.t_allreduce_s)
    return overhead + _maximum(t_mem, t_comp) + comm


def roof_step_s(features: DecodeFeatures | Sequence[DecodeFeatures], hardware: HardwareSpec) -> float:
    """The least seconds a decode step can take (the mean over a tg list): ``step_s`` with the device's
    bytes streamed at ``stream_roof`` x its datasheet bandwidth whatever the kernel class, host bytes at the
    host's datasheet bandwidth, no overhead and no compute.  The upper end of a decode interval stops at
    this speed (``decode_estimate``): a conformal band around an estimate near the roof would otherwise
    reach past what the memory can deliver (an RTX A400's 96 GB/s, say)."""
    feats = [features] if isinstance(features, DecodeFeatures) else list(features)
    f0 = feats[0]
    d = device_rates(hardware, f0.engine, f0.fp8, f0.backend)
    roof = DecodeRates(bw_bs=d.bandwidth_bs * d.stream_roof, host_bw_bs=d.host_bandwidth_bs, flops_s=math.inf,
                       link_bs=d.link_bs, t_fixed_s=0.0, t_layer_s=0.0, moe_route_s=0.0, t_allreduce_s=0.0,
                       host_link_bs=d.decode_link_cap_bs)  # fmt: skip
    return sum(step_s(f, roof) for f in feats) / len(feats)


def decode_step_s(features: DecodeFeatures | Sequence[DecodeFeatures], hardware: HardwareSpec, params: dict):
    """Seconds of one decode step (each of ``batch`` sequences gains a token); the mean over a list of
    features (``tg_features``: the mean step of tg{n_gen}).

    params: a decode set's params (bw_eff, t_layer_s, t_fixed_s, optional bw_rel_* per decode kernel class,
    moe_route_s, host_bw_eff, t_allreduce_s, and flops_eff / flops_abs_tflops for the compute roof when
    batch > 1).
    """
    feats = [features] if isinstance(features, DecodeFeatures) else list(features)
    f0 = feats[0]
    rates = decode_rates(hardware, params, f0.engine, f0.fp8, f0.kernel_class, f0.backend)
    return sum(step_s(f, rates) for f in feats) / len(feats)


@dataclass(frozen=True)
class PrefillRates:
    """What one device with one prefill coefficient set gives the prefill formula (FLOP/s, B/s, s).

    peak_s: GEMM peak (datasheet, or flops_abs_tflops); eff = flops_eff x rel[kernel class]; moe_rel:
    flops_rel_moe; k_half: gemm_k_half (elements); attn_eff; bw_bs = bandwidth x bw_eff; host_bw_bs: host RAM
    x host_bw_eff, capped by the link on discrete devices; link_bs; t_layer_s; t_allreduce_s.  Fields may be
    numpy arrays over points (calibration).
    """

    peak_s: float
    eff: float
    moe_rel: float
    k_half: float
    attn_eff: float
    bw_bs: float
    host_bw_bs: float
    link_bs: float
    t_layer_s: float
    t_allreduce_s: float
    m_half: float = 0.0


def rates_for_prefill(d: DeviceRates, params: dict, kernel_class="kquant") -> PrefillRates:
    """PrefillRates from a device's rates and a prefill set's params (arrays allowed).  The peak is the
    datasheet rate, else the set's flops_abs_tflops (ValueError when neither is known)."""
    peak = gemm_peak_s(d.peak_flops_s, params)
    if peak is None:
        raise ValueError("datasheet TFLOPS unknown and the coefficient set has no flops_abs_tflops")
    return PrefillRates(
        peak_s=peak,
        eff=params["flops_eff"] * class_rel(params, kernel_class, KERNEL_CLASS_PARAMS),
        moe_rel=params.get(MOE_PARAM, 1.0),
        k_half=params.get(GEMM_K_HALF_PARAM, 0.0),
        attn_eff=params["attn_eff"],
        bw_bs=d.bandwidth_bs * params.get("bw_eff", 1.0),
        host_bw_bs=_minimum(
            d.host_bandwidth_bs * params.get("host_bw_eff", DEFAULT_HOST_BW_EFF), d.link_cap_bs
        ),
        link_bs=d.link_bs,
        t_layer_s=params["t_layer_s"],
        t_allreduce_s=params.get("t_allreduce_s", DEFAULT_T_ALLREDUCE_S),
        m_half=_with_peak(d.peak_flops_s, params.get(GEMM_M_HALF_PARAM, 0.0)),
    )


def _with_peak(peak_flops_s, value):
    """``value`` on a device with a datasheet GEMM peak, 0 on one without (a CPU: its GEMM tiles are a few
    rows, so the pass-size term of a GPU's tile and wave quantisation does not apply); arrays allowed (NaN
    peak = none)."""
    if peak_flops_s is None:
        return 0.0
    if _is_array(peak_flops_s):
        import numpy as np

        return np.where(np.isnan(peak_flops_s), 0.0, value)
    return value


def prefill_time(f: PrefillFeatures, r: PrefillRates):
    """Seconds to prefill ``f.tokens`` tokens from features and rates: the one formula of prefill (module
    doc).  Fields may be numpy arrays (calibration evaluates its points at once); 0 when there are no
    tokens."""
    tp = _tp(f.n_devices, f.split)
    peak = r.peak_s * tp
    bw = r.bw_bs * tp
    kw = 2.0 * r.k_half  # FLOP-equivalents per GEMM output element
    dense = f.flops - f.expert_flops + kw * (f.gemm_outputs - f.expert_gemm_outputs)
    t_dense = dense / (peak * r.eff)
    t_expert = (f.expert_flops + kw * f.expert_gemm_outputs) / (peak * r.eff * r.moe_rel)
    passes = _maximum(f.n_passes, 1)
    u = _maximum(f.tokens / passes, 1.0)  # tokens of a pass: its dense GEMMs' rows
    # rows of each routed expert's GEMM in a pass (>= 1: u x k routings over at most u x k experts)
    m_e = _where(f.expert_rows > 0, f.expert_rows, u)
    t_c = t_dense * (1.0 + r.m_half / u) + t_expert * (1.0 + r.m_half / m_e)
    t_mm = passes * _maximum(t_c / passes, f.weight_bytes / bw)
    t_attn = f.attn_flops / (peak * r.attn_eff) + f.kq_bytes / bw
    per_pass = f.host_bytes / r.host_bw_bs + r.t_layer_s * f.n_layers + f.dequant_bytes / bw
    t = t_mm + t_attn + f.n_passes * per_pass
    t += f.n_passes * comm_s(
        f.n_devices, f.split, f.n_layers, f.hidden_size, f.ubatch_tokens, r.link_bs, r.t_allreduce_s
    )
    return _where(f.tokens > 0, t * f.pipeline_factor, 0.0)


def prefill_s(f: PrefillFeatures, hardware: HardwareSpec, params: dict) -> float:
    """Seconds to prefill ``f.tokens`` tokens; see the module doc.  0 when there are no tokens."""
    if not f.tokens:
        return 0.0
    d = device_rates(hardware, f.engine, f.fp8, f.backend)
    if d.peak_flops_s is None:
        peak_tflops(hardware, params, f.fp8, f.engine, f.backend)  # the error names the device
    return prefill_time(f, rates_for_prefill(d, params, f.kernel_class))


def prompt_s(f: PrefillFeatures, hardware: HardwareSpec, pparams: dict, dparams: dict) -> float:
    """Seconds of a prompt on the device's native path: its decode steps when it is prefilled one token per
    pass (``f.decode_steps``, module doc), else ``prefill_s``."""
    if f.decode_steps:
        return f.tokens * decode_step_s(list(f.decode_steps), hardware, dparams)
    return prefill_s(f, hardware, pparams)


# ------------------------------------------------------------------------------------------- estimates
def merged_params(table: CoefficientTable, hardware: HardwareSpec, engine: str, backend: str | None = None):
    """(decode set, prefill set, decode params, prefill params).

    Decode params borrow flops_eff / flops_abs_tflops from the prefill set (compute roof of batched decode);
    prefill params borrow bw_eff / host_bw_eff / t_allreduce_s from the decode set when they lack them.
    """
    dec = table.lookup(hardware, engine, "decode", backend)
    pre = table.lookup(hardware, engine, "prefill", backend)
    borrow_pre = {k: pre.params[k] for k in BORROW_FROM_PREFILL if k in pre.params}
    borrow_dec = {k: dec.params[k] for k in BORROW_FROM_DECODE if k in dec.params}
    return dec, pre, {**borrow_pre, **dec.params}, {**borrow_dec, **pre.params}


def estimate(phase: str, tok_s: float, time_s: float, cset: CoefficientSet) -> SpeedEstimate:
    """A speed with the interval and label of the coefficient set it came from."""
    lo, hi = cset.interval(tok_s)
    return SpeedEstimate(
        phase=phase,
        tok_s=tok_s,
        lo_tok_s=lo,
        hi_tok_s=hi,
        time_s=time_s,
        coefficients=cset.label,
        calibrated=cset.calibrated,
        n_points=cset.n_points,
        family=cset.family,
        basis=cset.basis,
    )


def tg_estimate(model, quant, hardware, workload, dec: CoefficientSet, params: dict) -> SpeedEstimate:
    """Decode tok/s of tg{n_gen} from n_depth for batch n_seq (the aggregate when n_seq > 1): n_seq / mean
    step, on the device's native path (``decode_estimate`` applies support fallbacks)."""
    feats = tg_features(model, quant, workload, int(workload.n_depth), max(int(workload.n_gen), 1))
    step = decode_step_s(feats, hardware, params)
    return estimate("decode", max(int(workload.n_seq), 1) / step, step, dec)


def pp_estimate(model, quant, hardware, workload, pre: CoefficientSet, params: dict) -> SpeedEstimate:
    """Prefill tok/s of B x n_prompt tokens (pp{n_prompt}; 512 when unset) at n_depth, native path."""
    n_prompt = int(workload.n_prompt) if workload.n_prompt > 0 else 512
    t = prefill_s(prefill_features(model, quant, replace(workload, n_prompt=n_prompt)), hardware, params)
    return estimate("prefill", max(int(workload.n_seq), 1) * n_prompt / t, t, pre)


def aggregate_step_s(model, quant, hardware, workload, params: dict) -> float:
    """One decode step of ``concurrency`` sequences with the KV cache at half of n_ctx (native path)."""
    conc = max(int(workload.concurrency), 1)
    f = decode_features(model, quant, replace(workload, n_seq=conc), int(workload.n_ctx) // 2)
    return decode_step_s(f, hardware, params)


# --------------------------------------------------------------------------------- support-aware estimates
class StepPath(Protocol):
    """Another step formula that times a native configuration (estimator.physics.stream: a serving engine's
    single stream on the serving fit's step).  Seconds of one decode step of ``f.batch`` sequences, of a
    prefill, and to the first token; the TTFT interval (seconds)."""

    decode: bool  # times the decode steps
    prefill: bool  # times the prefills and the first token

    def decode_s(self, f: DecodeFeatures) -> float: ...

    def prefill_s(self, f: PrefillFeatures) -> float: ...

    def first_token_s(self, prefill_s: float, step_s: float) -> float: ...

    def ttft_interval(self, ttft_s: float) -> tuple[float, float]: ...


@dataclass(frozen=True)
class SpeedSets:
    """The coefficient sets one configuration's speed uses (module doc, "Support").

    dec / pre / dparams / pparams: the device's sets for the engine's backend (``merged_params``); path: the
    fallback SpeedPath (None = native); host_*: the host CPU's sets when part of the work runs there;
    widen_lo: extra ln-units below an uncalibrated interval for the backend's maturity (``widen_maturity``;
    ``widen_measured``: the coefficients file's leave-one-backend-out value, else the shipped assumption);
    stream: the StepPath that times the native path in place of the formulas above
    (estimator.physics.stream), None = these.
    """

    dec: CoefficientSet
    pre: CoefficientSet
    dparams: dict
    pparams: dict
    path: fallback_mod.SpeedPath | None = None
    host_dec: CoefficientSet | None = None
    host_pre: CoefficientSet | None = None
    host_dparams: dict | None = None
    host_pparams: dict | None = None
    widen_lo: float = 0.0
    stream: StepPath | None = None
    widen_maturity: str = ""
    widen_measured: bool = False
    # why the device's prefill set does not describe these weights (``unmodelled_prefill``), "" when it does
    unmodelled: str = ""

    def streams(self, phase: str) -> bool:
        """True when ``stream`` times ``phase`` ("decode" | "prefill", the latter with the first token): a
        native path with a StepPath that times it."""
        return self.path is None and self.stream is not None and bool(getattr(self.stream, phase))

    def workload(self, wl: Workload) -> Workload:
        """The workload the engine really runs on this path (flash attention off when it falls back)."""
        return self.path.workload(wl) if self.path is not None else wl


# Lower bound of the prefill interval where the prefill model does not describe the weights' GEMMs
# (``unmodelled_prefill``), ln(measured / estimated): the H200's quantized prefill measured at 0.44-0.87x of
# the estimate (median 0.59x) of the coefficients fitted without those points
# (results/runs/gpu-lease--nvidia-hopper--vm.jsonl;
# tests/test_cuda_records.py checks that every one lies inside); 0.3 leaves room below the lowest for the
# other Hopper parts, which nobody measured
UNMODELLED_LOG_LO = math.log(0.3)


def vector_gemm_note(hardware: HardwareSpec, engine: str, backend: str | None = "") -> str:
    """The report's note when the engine's backend runs its GEMMs on the shader ALUs of this device at the
    catalog's vector FP16 rate (``covariates.shader_gemm_reason``, the rate ``datasheet_tflops`` takes), ""
    otherwise."""
    why = shader_gemm_reason(hardware, engine, backend) if hardware.vector_fp16_tflops else ""
    if not why:
        return ""
    matrix = f", not the matrix engines' {hardware.bf16_tflops:g}" if hardware.bf16_tflops else ""
    return f"prefill GEMMs at the shader FP16 rate, {hardware.vector_fp16_tflops:g} TFLOPS{matrix}: {why}"


def cpu_gemm_note(hardware: HardwareSpec, engine: str) -> str:
    """The report's note when the engine's GEMMs take another path on this CPU than on the CPUs most of its
    runs measured: a matrix extension the CPU has (the profile's ``cpu_matrix_gemm``, covariate
    ``cpu_matrix_gemm``) or a slower path for its ISA family (``cpu_gemm_fallback``); "" otherwise."""
    if hardware.kind != "cpu" or engine not in ENGINES:
        return ""
    profile = get_engine(engine)
    why = profile.cpu_matrix_gemm_reason(hardware.cpu_isa)
    if why:
        return f"prefill GEMMs on the CPU's matrix extension (fitted term cpu_matrix_gemm): {why}"
    why = profile.cpu_gemm_fallback_reason(hardware.family)
    return f"prefill GEMMs on a slower path (fitted term cpu_gemm_fallback): {why}" if why else ""


def cpu_crash_note(hardware: HardwareSpec, engine: str, table: CoefficientTable | None = None) -> str:
    """The report's note when the engine has a known crash on a CPU with this one's ISA features (the
    profile's ``cpu_crash_workarounds``: llama.cpp's AMX buffer, ggml-org/llama.cpp#20824): the estimate is of
    the default run, and where the default crashes the workaround runs at the cost the calibration fitted
    for that setting (``setting=<name>`` on ``decode.build_scale``, from runs measured both ways), when it
    did, and what the setting adds for the weight classes it slows further (``setting=<name>`` on
    ``decode.bw_rel_q4_0`` / ``bw_rel_q8_0``: those bytes are read at e^beta the rate, so they take e^-beta
    the time); "" otherwise."""
    from estimator.physics.coefficients import record_covariate_factor

    if hardware.kind != "cpu" or engine not in ENGINES:
        return ""
    model = table.model if table else None
    notes = []
    for why, workaround, setting in get_engine(engine).crash_workarounds_for(hardware.cpu_isa):
        covariate = f"setting={setting}"
        factor = record_covariate_factor(model, "decode.build_scale", covariate) if setting else None
        cost = (f"; its decode steps take x{factor:.2f} the default's (fitted term setting={setting}, from "
                "runs measured with and without it)") if factor else ""  # fmt: skip
        more = []
        for key, label in (("decode.bw_rel_q4_0", "Q4_0"), ("decode.bw_rel_q8_0", "Q8_0")):
            rate = record_covariate_factor(model, key, covariate) if factor else None
            if rate and 1.0 / rate > 1.005:
                more.append(f"{label} weights read x{1.0 / rate:.2f} slower on top")
        if more:
            cost += f" ({', '.join(more)})"
        notes.append(f"{why}: the estimate is of the default run; where it crashes, use {workaround}{cost}")
    return "; ".join(notes)


def unmodelled_prefill(model: ModelSpec, quant, hardware: HardwareSpec, engine: str) -> str:
    """Why the prefill model does not describe this configuration, "" when it does: its quantized GEMMs run
    on a device family whose datasheet tensor rate they cannot reach (the engine profile's
    ``unmodelled_quant_gemm``: llama.cpp's MMQ on Hopper).  Calibration leaves such prefill points out of the
    fit (calibration.features); estimates of them are marked and get a wide interval (``speed_sets``)."""
    if engine not in ENGINES:
        return ""
    reasons = dict(get_engine(engine).unmodelled_quant_gemm)
    if hardware.family not in reasons or kernel_class(model, quant) == "f16":
        return ""
    return f"prefill of quantized weights on {hardware.family}: {reasons[hardware.family]}"


def speed_sets(table: CoefficientTable, model: ModelSpec, quant, hardware: HardwareSpec, workload: Workload):
    """The SpeedSets of a configuration: the backend's device sets, and the host CPU's on a fallback path.
    A prefill the model does not describe (``unmodelled_prefill``) keeps the device's prefill set, marked
    uncalibrated, its lower bound widened to UNMODELLED_LOG_LO."""
    engine = workload.engine
    backend = get_engine(engine).backend_for(hardware, workload.backend) or None
    dec, pre, dparams, pparams = merged_params(table, hardware, engine, backend)
    unmodelled = unmodelled_prefill(model, quant, hardware, engine)
    if unmodelled:
        pre = replace(
            pre,
            calibrated=False,
            log_lo=min(pre.log_lo, UNMODELLED_LOG_LO),
            label=f"NOT MODELLED for these weights (see the notes); {pre.label}",
        )
    path = fallback_mod.speed_path(model, quant, hardware, workload)
    verdict = path.verdict if path is not None else fallback_mod.judge(model, quant, hardware, workload)
    widen = fallback_mod.maturity_log_lo(verdict, table.maturity_log_lo)
    maturity = verdict.maturity if verdict is not None else ""
    how = {"widen_lo": widen, "widen_maturity": maturity,
           "widen_measured": bool(maturity) and table.maturity_log_lo(maturity) is not None}  # fmt: skip
    how["unmodelled"] = unmodelled
    if path is None or path.host is None:
        return SpeedSets(dec, pre, dparams, pparams, path, **how)
    hdec, hpre, hdparams, hpparams = merged_params(table, path.host, engine)
    return SpeedSets(dec, pre, dparams, pparams, path, hdec, hpre, hdparams, hpparams, **how)


def _label(sets: SpeedSets, phase: str) -> str:
    dev = sets.dec if phase == "decode" else sets.pre
    if sets.path is None:
        return dev.label
    host = sets.host_dec if phase == "decode" else sets.host_pre
    if host is not None and not sets.path.device_part:
        return f"fallback path (uncalibrated): CPU cores only, {host.label}"
    where = f"; host CPU: {host.label}" if host is not None else ""
    return f"fallback path (uncalibrated): device {dev.label}{where}"


def _composed(phase: str, n_tokens: float, parts, switches: float, t_split: float, sets: SpeedSets):
    """SpeedEstimate of ``n_tokens`` tokens from (time, coefficient set) parts plus device<->host switches:
    the point is the sum; the interval sums each part at its own set's bounds and the switches at
    x1/SPLIT_FACTOR .. xSPLIT_FACTOR, then widens the lower bound for the backend's maturity."""
    parts = [(t, c) for t, c in parts if t > 0]
    t = sum(x for x, _ in parts) + switches * t_split
    k = fallback_mod.SPLIT_FACTOR
    fast = sum(x * math.exp(-c.log_hi) for x, c in parts) + switches * t_split / k
    slow = sum(x * math.exp(-c.log_lo) for x, c in parts) + switches * t_split * k
    dev = sets.dec if phase == "decode" else sets.pre
    return SpeedEstimate(
        phase=phase,
        tok_s=n_tokens / t,
        lo_tok_s=n_tokens / slow * math.exp(sets.widen_lo),
        hi_tok_s=n_tokens / fast,
        time_s=t,
        coefficients=_label(sets, phase),
        calibrated=False,
        n_points=dev.n_points,
        family=dev.family,
    )


def _native(phase: str, n_tokens: float, t: float, cset: CoefficientSet, sets: SpeedSets) -> SpeedEstimate:
    e = estimate(phase, n_tokens / t, t, cset)
    if cset.calibrated or not sets.widen_lo:
        return e
    return replace(e, lo_tok_s=e.lo_tok_s * math.exp(sets.widen_lo))


def decode_estimate(feats, hardware: HardwareSpec, sets: SpeedSets, n_seq: int = 1) -> SpeedEstimate:
    """Decode tok/s (n_seq / mean step) of decode features (one or a tg list) on the configuration's path."""
    feats = [feats] if isinstance(feats, DecodeFeatures) else list(feats)
    path = sets.path
    if sets.streams("decode"):
        t = sum(sets.stream.decode_s(f) for f in feats) / len(feats)
        return _native("decode", n_seq, t, sets.dec, sets)
    if path is None or (path.host is None and path.device_part):
        if path is not None:
            feats = [fallback_mod.split_decode(f, path)[0] for f in feats]
        e = _native("decode", n_seq, decode_step_s(feats, hardware, sets.dparams), sets.dec, sets)
        cap = n_seq / roof_step_s(feats, hardware)
        return replace(e, hi_tok_s=max(min(e.hi_tok_s, cap), e.tok_s))
    pairs = [fallback_mod.split_decode(f, path) for f in feats]
    t_dev = decode_step_s([d for d, _ in pairs], hardware, sets.dparams) if path.device_part else 0.0
    t_host = decode_step_s([h for _, h in pairs], path.host, sets.host_dparams)
    switches = path.switches(feats[0].n_layers)
    t_split = float(sets.dparams.get("t_split_s", fallback_mod.DEFAULT_T_SPLIT_S))
    return _composed("decode", n_seq, [(t_dev, sets.dec), (t_host, sets.host_dec)], switches, t_split, sets)


def prefill_estimate(f: PrefillFeatures, hardware: HardwareSpec, sets: SpeedSets) -> SpeedEstimate:
    """Prefill tok/s (f.tokens / time) on the configuration's path; a prompt prefilled one token per pass is
    timed as the decode steps it is (``f.decode_steps``, module doc)."""
    if f.decode_steps:  # tok/s of one step = of the prompt; the time is the prompt's, not one step's
        e = decode_estimate(list(f.decode_steps), hardware, sets, 1)
        return replace(e, phase="prefill", time_s=f.tokens / e.tok_s)
    path = sets.path
    if sets.streams("prefill"):
        return _native("prefill", f.tokens, sets.stream.prefill_s(f), sets.pre, sets)
    if path is None or (path.host is None and path.device_part):
        if path is not None:
            f = fallback_mod.split_prefill(f, path)[0]
        return _native("prefill", f.tokens, prefill_s(f, hardware, sets.pparams), sets.pre, sets)
    dev, host = fallback_mod.split_prefill(f, path)
    t_dev = prefill_s(dev, hardware, sets.pparams) if path.device_part else 0.0
    t_host = prefill_s(host, path.host, sets.host_pparams)
    switches = path.switches(f.n_layers) * max(int(f.n_passes), 1)
    t_split = float(sets.dparams.get("t_split_s", fallback_mod.DEFAULT_T_SPLIT_S))
    parts = [(t_dev, sets.pre), (t_host, sets.host_pre)]
    return _composed("prefill", f.tokens, parts, switches, t_split, sets)


def tg_path_estimate(model, quant, hardware, workload, sets: SpeedSets) -> SpeedEstimate:
    """tg{n_gen} from n_depth (batch n_seq; n_seq / mean step) on the configuration's path."""
    wl = sets.workload(workload)
    feats = tg_features(model, quant, wl, int(wl.n_depth), max(int(wl.n_gen), 1))
    return decode_estimate(feats, hardware, sets, max(int(wl.n_seq), 1))


def pp_path_estimate(model, quant, hardware, workload, sets: SpeedSets) -> SpeedEstimate:
    """pp{n_prompt} (512 when unset) at n_depth for n_seq sequences on the configuration's path."""
    wl = sets.workload(workload)
    n_prompt = int(wl.n_prompt) if wl.n_prompt > 0 else 512
    return prefill_estimate(prefill_features(model, quant, replace(wl, n_prompt=n_prompt)), hardware, sets)


def aggregate_path_estimate(model, quant, hardware, workload, sets: SpeedSets) -> SpeedEstimate:
    """Total decode tok/s of ``concurrency`` sequences with the KV cache at half of n_ctx."""
    wl = sets.workload(workload)
    conc = max(int(wl.concurrency), 1)
    f = decode_features(model, quant, replace(wl, n_seq=conc), int(wl.n_ctx) // 2)
    return decode_estimate(f, hardware, sets, conc)


def first_token_s(sets: SpeedSets, prefill_s: float, step_s: float) -> float:
    """Seconds to the first token of a prompt whose prefill takes ``prefill_s``: the prefill and one decode
    step of ``step_s``; on a StepPath that times prefills, its own (``StepPath.first_token_s``)."""
    if sets.streams("prefill"):
        return sets.stream.first_token_s(prefill_s, step_s)
    return prefill_s + step_s


def ttft_prompt_tokens(workload: Workload) -> int:
    """Tokens of the prompt a report's time to first token is for: TTFT_PROMPT_TOKENS, or the context
    (``workload.n_ctx``) when it holds fewer (a model of 2,048 positions is not asked a 4,096-token prompt;
    the first token is sampled from the last prompt position's logits and needs no cell of its own)."""
    n_ctx = int(workload.n_ctx or 0)
    return min(TTFT_PROMPT_TOKENS, n_ctx) if n_ctx > 0 else TTFT_PROMPT_TOKENS


def estimate_speed(
    model: ModelSpec,
    quant: QuantSpec,
    hardware: HardwareSpec,
    workload: Workload,
    table: CoefficientTable,
    sets: SpeedSets | None = None,
) -> SpeedReport:
    """Decode, prefill, TTFT (a 4K prompt, ``ttft_prompt_tokens``) and aggregate throughput at
    workload.concurrency, on the path the support table gives the configuration (native, or a fallback:
    ``speed_sets``).  ``sets``: the SpeedSets to use (estimator.physics.stream.speed_sets, which may time a
    serving engine on the serving fit's step); None = ``speed_sets`` of the decode / prefill fit.

    Raises ValueError when the device lacks the bandwidth (or TFLOPS with no fallback) the physics needs.
    """
    sets = sets or speed_sets(table, model, quant, hardware, workload)
    b = max(int(workload.n_seq), 1)
    decode_b = tg_path_estimate(model, quant, hardware, workload, sets)
    step = decode_b.time_s
    decode = replace(
        decode_b, tok_s=1.0 / step, lo_tok_s=decode_b.lo_tok_s / b, hi_tok_s=decode_b.hi_tok_s / b
    )
    prefill = pp_path_estimate(model, quant, hardware, workload, sets)

    n_ttft = ttft_prompt_tokens(workload)
    tw = replace(sets.workload(workload), n_prompt=n_ttft, n_depth=0, n_seq=1)
    p4 = prefill_estimate(prefill_features(model, quant, tw), hardware, sets)
    d1 = decode_estimate(decode_features(model, quant, tw, n_ttft), hardware, sets)
    ttft = first_token_s(sets, p4.time_s, d1.time_s)
    if sets.streams("prefill"):
        ttft_lo, ttft_hi = sets.stream.ttft_interval(ttft)
        ttft_hi *= 1.0 if sets.pre.calibrated else math.exp(-sets.widen_lo)  # as _native widens the speed
    elif sets.path is None:  # the sets' own bounds (written as before, so native figures keep every digit)
        w_pre = 0.0 if sets.pre.calibrated else sets.widen_lo
        w_dec = 0.0 if sets.dec.calibrated else sets.widen_lo
        ttft_lo = p4.time_s * math.exp(-sets.pre.log_hi) + d1.time_s * math.exp(-sets.dec.log_hi)
        ttft_hi = p4.time_s * math.exp(-sets.pre.log_lo - w_pre)
        ttft_hi += d1.time_s * math.exp(-sets.dec.log_lo - w_dec)
    else:
        ttft_lo = p4.time_at(p4.hi_tok_s) + d1.time_at(d1.hi_tok_s)
        ttft_hi = p4.time_at(p4.lo_tok_s) + d1.time_at(d1.lo_tok_s)

    conc = max(int(workload.concurrency), 1)
    aggregate = aggregate_path_estimate(model, quant, hardware, workload, sets)

    notes: list[str] = []
    if workload.offload_bytes or workload.moe_offload_layers:
        notes.append("offloaded weights are read at host RAM bandwidth each step")
    if sets.path is not None:
        notes.append(fallback_note(sets))
    if sets.unmodelled:
        notes.append(f"{sets.unmodelled}: not calibrated, wide interval")
    shader = vector_gemm_note(hardware, workload.engine, workload.backend)
    if shader:
        notes.append(shader)
    cpu_path = cpu_gemm_note(hardware, workload.engine)
    if cpu_path:
        notes.append(cpu_path)
    crash = cpu_crash_note(hardware, workload.engine, table)
    if crash:
        notes.append(crash)
    if not sets.dec.calibrated or (not sets.pre.calibrated and not sets.unmodelled):
        notes.append(
            "speed from devices like this one (family not calibrated): wide interval"
            if sets.dec.basis or sets.pre.basis
            else "speed from the pooled prior (uncalibrated): wide interval"
        )
    notes += [f"{cs.phase} interval basis: {cs.interval_note}" for cs in (sets.dec, sets.pre) if cs.basis]
    if sets.widen_lo and (sets.path is not None or not (sets.dec.calibrated and sets.pre.calibrated)):
        how = "measured: backends of this maturity held out" if sets.widen_measured else "assumed"
        notes.append(
            f"backend maturity ({sets.widen_maturity or 'not listed'}): the lower bound is widened "
            f"x{math.exp(sets.widen_lo):.2f} ({how})"
        )
    if b > 1:
        notes.append(f"decode is per sequence with {b} sequences decoding together")
    return SpeedReport(
        decode=decode,
        prefill=prefill,
        ttft_s=ttft,
        ttft_lo_s=ttft_lo,
        ttft_hi_s=ttft_hi,
        ttft_prompt_tokens=n_ttft,
        aggregate=aggregate,
        concurrency=conc,
        per_sequence_tok_s=aggregate.tok_s / conc,
        notes=tuple(notes),
    )


def fallback_note(sets: SpeedSets) -> str:
    """One line saying how a fallback path is estimated."""
    p = sets.path
    parts = []
    if p.host is not None and p.device_part:
        parts.append(f"{p.host_share:.0%} of the matmul bytes run on the host CPU ({p.host.name})")
    elif p.host is not None:
        parts.append(f"everything runs on the host CPU ({p.host.name})")
    if p.switches_per_layer or p.switches_per_pass:
        parts.append(f"{p.switches_per_layer} device<->host switches per layer")
    if not p.flash_attn:
        parts.append("attention without flash attention")
    if p.weight_only:
        parts.append("weight-only kernels (16-bit compute)")
    if p.routed_token_bytes:
        parts.append(
            f"each token's experts copied before their matmul ({p.routed_token_bytes / GB:.2f} GB per token, "
            f"moved {fallback_mod.EXPERT_COPY_PASSES:g}x)"
        )
    return "fallback path: " + ", ".join(parts) if parts else "fallback path"
