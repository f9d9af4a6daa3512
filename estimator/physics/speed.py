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
             + (expert_flops + 2 k_half x expert_gemm_outputs) / (peak x eff x flops_rel_moe),
             eff = flops_eff x rel[class]
    t_mm   = sum over passes p of max(t_c x u_p / tokens, weight_bytes / (bw x bw_eff))
    t_attn = attn_flops / (peak x attn_eff) + kq_bytes / (bw x bw_eff)
    t      = (t_mm + t_attn + n_passes x (host_bytes / host_bw' + t_layer_s x L) + t_comm) x pipeline_factor

* flops = 2 x matmul params (active, without the output head) per token + 2 x vocab x hidden per output row
  (the head runs only for rows that return logits: the last token of each llama_decode call / sequence);
  each pass p of u_p tokens does flops x u_p / tokens of them
  while streaming the weights once: the matmuls of a pass sit on the larger of their compute and memory roofs.
* rel[class]: prefill GEMM efficiency of the weights' kernel class relative to k-quants (``kernel_class``:
  f16 | legacy | kquant | iquant | other; ``flops_rel_f16`` / ``flops_rel_legacy`` / ``flops_rel_iquant``,
  1 when a set does not carry them, k-quants and other formats are the reference 1).  llama.cpp runs
  different GEMM paths per weight type (cuBLAS on F16, MMQ / dequantize+GEMM on quants).
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
* pipeline_factor (llama.cpp layer split over P > 1 fully offloaded devices): llama_decode splits each call of
  up to n_batch tokens into m ubatches and runs them as a pipeline over the P devices (each holding L/P
  layers), at most SCHED_MAX_COPIES in flight; factor = sum over calls of makespan(m, P) / (P x sum of m),
  with makespan in stage times (``pipeline_makespan``).  1 for one device, vLLM, or partial offload.
Multi-device: ``split="tp"`` divides bytes and FLOPs by N and adds 2 all-reduces of hidden x tokens x 2 B per
layer (ring: 2 (N-1)/N x message / one-way link bandwidth, + ``t_allreduce_s`` latency); ``split="pp"``
(layer split) serialises the devices for one decode stream: bytes at one device's rate plus N-1 activation
hops (prefill micro-batches pipeline, see pipeline_factor).
A device whose datasheet TFLOPS is unknown (CPUs) uses the coefficient set's ``flops_abs_tflops``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from estimator.engines import get_engine
from estimator.physics import kv as kv_mod
from estimator.physics import weights as weights_mod
from estimator.physics.coefficients import CoefficientSet, CoefficientTable
from estimator.physics.counts import (  # noqa: F401 - re-exported: the speed physics' public helpers
    GEMM_K_HALF_PARAM,
    KERNEL_CLASS_PARAMS,
    KQ_SCORE_BYTES,
    MOE_PARAM,
    SCHED_MAX_COPIES,
    attention_flops,
    attn_flops_per_key,
    expert_union,
    gemm_outputs_per_token,
    is_fp8,
    kernel_class,
    kq_score_elems,
    matmul_params,
    n_moe_layers,
    pipeline_factor,
    pipeline_makespan,
    routed_active_params,
    state_flops_per_token,
    sum_keys,
)
from estimator.specs import (
    HardwareSpec,
    ModelSpec,
    QuantSpec,
    Workload,
)

DEFAULT_HOST_BANDWIDTH_GBS = 89.6  # dual-channel DDR5-5600 peak (2 x 8 B x 5600 MT/s), as the catalog assumes
DEFAULT_INTERCONNECT_GBS = 64.0  # PCIe 4.0 x16, bidirectional aggregate (as the catalog quotes links)
# Optional coefficients applied when a set does not carry them (the same in calibration and prediction):
DEFAULT_HOST_BW_EFF = 0.6  # assumption: fraction of host DDR peak reached when streaming offloaded weights
DEFAULT_T_ALLREDUCE_S = 2e-5  # assumption: latency of one small tensor-parallel all-reduce (tens of us)
TTFT_PROMPT_TOKENS = 4096
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


@dataclass(frozen=True)
class SpeedReport:
    """Every speed figure of a report.

    decode: mean single-sequence decode speed over workload.n_gen tokens from workload.n_depth (batch n_seq);
    prefill: pp{n_prompt} at n_depth; ttft_*: prefill of TTFT_PROMPT_TOKENS tokens + one decode step;
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
def _weights_read(model: ModelSpec, wb, n_tokens: int, moe_offload_layers: int, offload_bytes: int):
    """(device_bytes, host_bytes, routed_union_bytes) of weights one forward pass over n_tokens reads.

    Routed experts: routed_expert_bytes x U(n_tokens)/E; the rest of active_bytes_per_token is always read.
    Experts of the first ``moe_offload_layers`` layers live in host RAM; ``offload_bytes`` of other weights
    too, assumed spread evenly, so that fraction (offload_bytes / total weight bytes) of the remaining read is
    on the host.
    """
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
        host += active * frac
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


def attn_flops_at(model: ModelSpec, depth: float) -> float:
    """Attention FLOPs of one decoded token at a fractional depth (absorbed MLA form, interpolated)."""
    return _lerp(lambda d: attention_flops(model, d, 1, absorbed=True), depth)


def decode_features(model: ModelSpec, quant: QuantSpec, workload: Workload, depth: float) -> dict:
    """Physics features of one decode step of workload.n_seq sequences, each with ``depth`` cached tokens.

    ``depth`` may be fractional (a midpoint of decode_depths): KV bytes and attention FLOPs are then linearly
    interpolated between the neighbouring integer depths.

    Keys: bytes_per_token (device bytes read per step: weights incl. expert union + B x KV at depth),
    weight_bytes, kv_bytes, host_bytes (offloaded weights read from host RAM), expert_union_bytes,
    flops_per_token (one sequence), flops (B x flops_per_token), n_layers, n_moe_layers, batch, hidden_size,
    n_devices, split.
    """
    b = max(int(workload.n_seq), 1)
    wb = breakdown(model, quant)
    dev, host, union_bytes = _weights_read(model, wb, b, workload.moe_offload_layers, workload.offload_bytes)
    kv_bytes = b * kv_read_at(model, depth, workload.kv_dtype, workload.engine)
    fpt = 2 * matmul_params(model, wb.n_params_active) + attn_flops_at(model, depth)
    return {
        "bytes_per_token": dev + kv_bytes,
        "weight_bytes": dev,
        "kv_bytes": float(kv_bytes),
        "host_bytes": host,
        "expert_union_bytes": union_bytes,
        "flops_per_token": float(fpt),
        "flops": float(b * fpt),
        "n_layers": model.n_layers,
        "n_moe_layers": n_moe_layers(model),
        "batch": b,
        "hidden_size": model.hidden_size,
        "n_devices": max(int(workload.n_devices), 1),
        "split": workload.split,
        "fp8": is_fp8(quant),
        "engine": workload.engine,
    }


def prefill_features(model: ModelSpec, quant: QuantSpec, workload: Workload) -> dict:
    """Physics features of prefilling workload.n_prompt tokens for each of n_seq sequences at n_depth.

    Keys: tokens, flops (2 x matmul params x tokens, the output head only for the rows that return logits),
    expert_flops (the routed-expert part of flops), gemm_outputs / expert_gemm_outputs (GEMM output
    elements, all / routed experts, for the width term), attn_flops, kq_bytes (llama.cpp without flash
    attention), weight_bytes (device bytes one ubatch pass streams), host_bytes (per pass),
    n_passes = ceil(tokens / n_ubatch), ubatch_tokens, kernel_class, pipeline_factor, n_layers,
    n_moe_layers, hidden_size, n_devices, split, fp8.
    """
    b = max(int(workload.n_seq), 1)
    n_prompt = max(int(workload.n_prompt), 0)
    tokens = b * n_prompt
    ubatch = max(min(int(workload.n_ubatch), int(workload.n_batch)), 1)
    n_passes = math.ceil(tokens / ubatch) if tokens else 0
    per_pass = min(tokens, ubatch)
    wb = breakdown(model, quant)
    dev, host, _ = _weights_read(model, wb, per_pass, workload.moe_offload_layers, workload.offload_bytes)
    # The output head runs only for the rows that return logits: the last token of each llama_decode call
    # (llama-bench / llama-cpp-python without logits_all), of each sequence under vLLM.
    head = model.vocab_size * model.hidden_size
    body = max(matmul_params(model, wb.n_params_active) - head, 0)
    n_out = max(b, math.ceil(tokens / max(int(workload.n_batch), ubatch))) if tokens else 0
    outs, routed_outs = gemm_outputs_per_token(model)
    kq = 0.0
    if get_engine(workload.engine).materializes_kq_without_fa and not workload.flash_attn and n_prompt:
        u_seq = max(ubatch // b, 1) if b > 1 else ubatch
        elems = kq_score_elems(model, int(workload.n_depth), n_prompt, u_seq)
        kq = float(b * KQ_SCORE_BYTES * model.n_heads * elems)
    return {
        "tokens": tokens,
        "flops": float(2 * (body * tokens + head * n_out)),
        "expert_flops": float(2 * min(routed_active_params(model), body) * tokens),
        "gemm_outputs": float(outs * tokens + model.vocab_size * n_out),
        "expert_gemm_outputs": float(routed_outs * tokens),
        "attn_flops": float(b * attention_flops(model, int(workload.n_depth), n_prompt)),
        "kq_bytes": kq,
        "weight_bytes": dev,
        "host_bytes": host,
        "n_passes": n_passes,
        "ubatch_tokens": per_pass,
        "kernel_class": kernel_class(model, quant),
        "pipeline_factor": pipeline_factor(workload, tokens, ubatch),
        "n_layers": model.n_layers,
        "n_moe_layers": n_moe_layers(model),
        "hidden_size": model.hidden_size,
        "n_devices": max(int(workload.n_devices), 1),
        "split": workload.split,
        "fp8": is_fp8(quant),
        "engine": workload.engine,
    }


# ------------------------------------------------------------------------------------------------ times
def peak_tflops(hardware: HardwareSpec, params: dict, fp8: bool = False, engine: str = "") -> float:
    """Dense TFLOPS the engine's GEMMs run at (10^12 FLOP/s).

    * FP8 weights: the FP8 rate where the device has one.
    * llama.cpp on NVIDIA with a catalogued INT8 rate: int8_tops / 2.  llama.cpp's CUDA GEMMs are cuBLAS with
      CUBLAS_COMPUTE_16F (F16 weights, and quants dequantized to F16) or int8 MMQ; on Turing and later every
      SKU's dense INT8 rate is twice its FP16-accumulate rate.  The bf16 column is the FP32-accumulate rate,
      which GeForce parts run at half speed (shared/reference/hardware.md), so it would understate GeForce
      cards 2x; on data-centre / workstation parts int8 / 2 equals the bf16 column.
    * otherwise the datasheet BF16 rate; ``flops_abs_tflops`` of the coefficient set when the datasheet figure
      is unknown (CPUs).
    """
    if fp8 and hardware.fp8_tflops:
        return float(hardware.fp8_tflops)
    nvidia = (hardware.vendor or "").lower() == "nvidia"
    if engine and get_engine(engine).int8_gemm and nvidia and hardware.int8_tops:
        return float(hardware.int8_tops) / 2.0
    if hardware.bf16_tflops:
        return float(hardware.bf16_tflops)
    if "flops_abs_tflops" in params:
        return float(params["flops_abs_tflops"])
    raise ValueError(
        f"{hardware.id}: datasheet TFLOPS unknown and the coefficient set has no flops_abs_tflops"
    )


def _bandwidth_gbs(hardware: HardwareSpec) -> float:
    if not hardware.bandwidth_gbs:
        raise ValueError(f"{hardware.id}: memory bandwidth unknown; speed cannot be estimated")
    return float(hardware.bandwidth_gbs)


def host_bandwidth_bs(hardware: HardwareSpec, params: dict, over_link: bool) -> float:
    """Effective bytes/s for offloaded weights: host RAM bandwidth x host_bw_eff.

    Decode runs offloaded layers where they live (host CPU reads host RAM).  Prefill of a discrete device
    (kind gpu/npu) copies offloaded weights over the link each pass, so ``over_link`` caps it at one direction
    of interconnect_gbs (the catalog quotes bidirectional aggregates).
    """
    eff = params.get("host_bw_eff", DEFAULT_HOST_BW_EFF)
    bw = (hardware.host_bandwidth_gbs or DEFAULT_HOST_BANDWIDTH_GBS) * 1e9 * eff
    if over_link and hardware.kind in ("gpu", "npu"):
        bw = min(bw, 0.5 * (hardware.interconnect_gbs or DEFAULT_INTERCONNECT_GBS) * 1e9)
    return bw


def _comm_s(f: dict, hardware: HardwareSpec, params: dict, tokens: int) -> float:
    """Interconnect time of one forward pass of ``tokens`` tokens (see module doc)."""
    n = int(f["n_devices"])
    if n <= 1:
        return 0.0
    link = 0.5 * (hardware.interconnect_gbs or DEFAULT_INTERCONNECT_GBS) * 1e9  # one direction, B/s
    msg = f["hidden_size"] * tokens * ACTIVATION_BYTES
    lat = float(params.get("t_allreduce_s", DEFAULT_T_ALLREDUCE_S))
    if f["split"] == "pp":
        return (n - 1) * (lat + msg / link)
    return f["n_layers"] * 2 * (lat + 2 * (n - 1) / n * msg / link)


def decode_time_per_token_s(features: dict, hardware: HardwareSpec, params: dict) -> float:
    """Seconds of one decode step (each of ``batch`` sequences gains a token); see the module doc.

    params: a decode set's params (bw_eff, t_layer_s, t_fixed_s, optional moe_route_s, host_bw_eff,
    t_allreduce_s, and flops_eff / flops_abs_tflops for the compute roof when batch > 1).
    """
    f = features
    n = int(f["n_devices"])
    tp = n if f["split"] == "tp" else 1
    bw = _bandwidth_gbs(hardware) * 1e9 * params["bw_eff"]
    host_bw = host_bandwidth_bs(hardware, params, over_link=False)
    t_mem = f["bytes_per_token"] / (tp * bw) + f["host_bytes"] / host_bw
    t_comp = 0.0
    if f["batch"] > 1:
        peak = peak_tflops(hardware, params, f.get("fp8", False), f.get("engine", ""))
        peak *= 1e12 * params.get("flops_eff", 1.0)
        t_comp = f["flops"] / (tp * peak)
    overhead = params["t_fixed_s"] + params["t_layer_s"] * f["n_layers"]
    overhead += params.get("moe_route_s", 0.0) * f["n_moe_layers"]
    return overhead + max(t_mem, t_comp) + _comm_s(f, hardware, params, int(f["batch"]))


def prefill_time_s(features: dict, hardware: HardwareSpec, params: dict) -> float:
    """Seconds to prefill ``features['tokens']`` tokens; see the module doc.  0 when there are no tokens.

    Features from before the kernel-class / FA / pipeline terms (no ``kernel_class``, ``kq_bytes``,
    ``pipeline_factor``) get the neutral values (k-quant reference, 0, 1).
    """
    f = features
    if not f["tokens"]:
        return 0.0
    n = int(f["n_devices"])
    tp = n if f["split"] == "tp" else 1
    peak = peak_tflops(hardware, params, f.get("fp8", False), f.get("engine", "")) * 1e12 * tp
    bw = _bandwidth_gbs(hardware) * 1e9 * params.get("bw_eff", 1.0) * tp
    host_bw = host_bandwidth_bs(hardware, params, over_link=True)
    eff = params["flops_eff"] * params.get(KERNEL_CLASS_PARAMS.get(f.get("kernel_class", "kquant"), ""), 1.0)
    ex = f.get("expert_flops", 0.0)
    kw = 2.0 * params.get(GEMM_K_HALF_PARAM, 0.0)  # FLOP-equivalents per GEMM output element
    ex_out = f.get("expert_gemm_outputs", 0.0)
    dense = f["flops"] - ex + kw * (f.get("gemm_outputs", 0.0) - ex_out)
    t_c = dense / (peak * eff) + (ex + kw * ex_out) / (peak * eff * params.get(MOE_PARAM, 1.0))
    passes = max(int(f["n_passes"]), 1)
    t_mm = passes * max(t_c / passes, f["weight_bytes"] / bw)
    t_attn = f["attn_flops"] / (peak * params["attn_eff"]) + f.get("kq_bytes", 0.0) / bw
    t = t_mm + t_attn + f["n_passes"] * (f["host_bytes"] / host_bw + params["t_layer_s"] * f["n_layers"])
    t += f["n_passes"] * _comm_s(f, hardware, params, int(f["ubatch_tokens"]))
    return t * f.get("pipeline_factor", 1.0)


# ------------------------------------------------------------------------------------------- estimates
def merged_params(table: CoefficientTable, hardware: HardwareSpec, engine: str, backend: str | None = None):
    """(decode set, prefill set, decode params, prefill params).

    Decode params borrow flops_eff / flops_abs_tflops from the prefill set (compute roof of batched decode);
    prefill params borrow bw_eff / host_bw_eff / t_allreduce_s from the decode set when they lack them.
    """
    dec = table.lookup(hardware, engine, "decode", backend)
    pre = table.lookup(hardware, engine, "prefill", backend)
    borrow_pre = {k: pre.params[k] for k in ("flops_eff", "flops_abs_tflops") if k in pre.params}
    borrow_dec = {k: dec.params[k] for k in ("bw_eff", "host_bw_eff", "t_allreduce_s") if k in dec.params}
    return dec, pre, {**borrow_pre, **dec.params}, {**borrow_dec, **pre.params}


def decode_step_s(model, quant, hardware, workload, params: dict, depth: float) -> float:
    """Seconds of one decode step at ``depth`` (features + time in one call)."""
    return decode_time_per_token_s(decode_features(model, quant, workload, depth), hardware, params)


def decode_depths(depth: int, n_gen: int) -> list[float]:
    """Depths at which mean_decode_step_s evaluates the step time for tg{n_gen} from ``depth``.

    The tokens are generated at depths depth .. depth+n-1; seen as the interval [depth - 1/2, depth + n - 1/2]
    cut into S = min(n_gen, 16) equal segments, the midpoint rule evaluates t at depth - 1/2 + (j + 1/2) n/S
    (possibly fractional).  The mean of those equals the exact mean of t over the n integer depths whenever t
    is linear in depth (as the KV term is between window breakpoints).
    """
    n = max(int(n_gen), 1)
    s = min(n, _MIDPOINT_SEGMENTS)
    return [depth - 0.5 + (j + 0.5) * n / s for j in range(s)]


def mean_decode_step_s(model, quant, hardware, workload, params: dict, depth: int, n_gen: int) -> float:
    """Mean step time while generating n_gen tokens from ``depth`` (tg{n_gen} at depth, llama-bench).

    llama-bench reports n_gen / total time, so the mean step is (1/n) sum_{i<n} t(depth + i); t is piecewise
    linear in depth, so the sum is taken at ``decode_depths(depth, n_gen)``.
    """
    ds = decode_depths(depth, n_gen)
    return sum(decode_step_s(model, quant, hardware, workload, params, d) for d in ds) / len(ds)


def _estimate(phase: str, tok_s: float, time_s: float, cset: CoefficientSet) -> SpeedEstimate:
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
    )


def estimate_speed(
    model: ModelSpec, quant: QuantSpec, hardware: HardwareSpec, workload: Workload, table: CoefficientTable
) -> SpeedReport:
    """Decode, prefill, TTFT (4K prompt) and aggregate throughput at workload.concurrency.

    Raises ValueError when the device lacks the bandwidth (or TFLOPS with no fallback) the physics needs.
    """
    dec, pre, dparams, pparams = merged_params(table, hardware, workload.engine)
    b = max(int(workload.n_seq), 1)
    n_gen = max(int(workload.n_gen), 1)
    step = mean_decode_step_s(model, quant, hardware, workload, dparams, int(workload.n_depth), n_gen)
    decode = _estimate("decode", 1.0 / step, step, dec)

    n_prompt = int(workload.n_prompt) if workload.n_prompt > 0 else 512
    pw = replace(workload, n_prompt=n_prompt)
    t_pre = prefill_time_s(prefill_features(model, quant, pw), hardware, pparams)
    prefill = _estimate("prefill", b * n_prompt / t_pre, t_pre, pre)

    tw = replace(workload, n_prompt=TTFT_PROMPT_TOKENS, n_depth=0, n_seq=1)
    t_p4 = prefill_time_s(prefill_features(model, quant, tw), hardware, pparams)
    t_d1 = decode_step_s(model, quant, hardware, tw, dparams, TTFT_PROMPT_TOKENS)
    ttft = t_p4 + t_d1
    ttft_lo = t_p4 * math.exp(-pre.log_hi) + t_d1 * math.exp(-dec.log_hi)
    ttft_hi = t_p4 * math.exp(-pre.log_lo) + t_d1 * math.exp(-dec.log_lo)

    conc = max(int(workload.concurrency), 1)
    cw = replace(workload, n_seq=conc)
    t_c = decode_step_s(model, quant, hardware, cw, dparams, int(workload.n_ctx) // 2)
    aggregate = _estimate("decode", conc / t_c, t_c, dec)

    notes: list[str] = []
    if workload.offload_bytes or workload.moe_offload_layers:
        notes.append("offloaded weights are read at host RAM bandwidth each step")
    if not dec.calibrated or not pre.calibrated:
        notes.append("speed from the pooled prior (uncalibrated): wide interval")
    if b > 1:
        notes.append(f"decode is per sequence with {b} sequences decoding together")
    return SpeedReport(
        decode=decode,
        prefill=prefill,
        ttft_s=ttft,
        ttft_lo_s=ttft_lo,
        ttft_hi_s=ttft_hi,
        ttft_prompt_tokens=TTFT_PROMPT_TOKENS,
        aggregate=aggregate,
        concurrency=conc,
        per_sequence_tok_s=1.0 / t_c,
        notes=tuple(notes),
    )
