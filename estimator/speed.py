"""Speed physics: decode and prefill time from bytes moved and FLOPs done, with calibrated efficiencies.

Features come from the estimator's own memory physics (estimator.weights, estimator.kv), so calibration fits
exactly the model that predicts.  Units: bytes, FLOP, seconds, tokens/s; bandwidth ``*_gbs`` is 10^9 B/s and
``*_tflops`` is 10^12 FLOP/s.

Decode (one step: each of the B = ``workload.n_seq`` sequences gains one token)::

    bytes   = dense + routed experts of the union touched by B tokens + B x KV read at depth  [device]
    t_mem   = bytes / (N_tp x bw x bw_eff) + host_bytes / (host_bw x host_bw_eff)
    t_comp  = B x flops_per_token / (N_tp x peak x flops_eff)          (only when B > 1)
    t_step  = t_fixed_s + t_layer_s x L + moe_route_s x L_moe + max(t_mem, t_comp) + t_comm

Expected distinct experts per MoE layer touched by B tokens each routed to k of E: U = E x (1 - (1 - k/E)^B).

Prefill (n_prompt tokens for each of B sequences on top of n_depth cached tokens, in ubatch passes)::

    t = flops / (peak x flops_eff) + attn_flops / (peak x attn_eff)
        + n_passes x (weight_bytes / (bw x bw_eff) + host_bytes / (host_bw x host_bw_eff) + t_layer_s x L)
        + t_comm

with flops = 2 x matmul params (active) per token, attention FLOPs per layer and key = 4 x n_heads x head_dim
(QK^T and AV; MLA uses its real dims), summed over the keys each token sees (causal: depth + i + 1, capped at
the window on sliding/chunked layers), and weight_bytes = the weights one pass streams.

Multi-device: ``split="tp"`` divides bytes and FLOPs by N and adds 2 all-reduces of hidden x tokens x 2 B per
layer (ring: 2 (N-1)/N x message / one-way link bandwidth, + ``t_allreduce_s`` latency); ``split="pp"``
(layer split) serialises the devices for one stream: bytes/FLOPs at one device's rate plus N-1 activation
hops.
A device whose datasheet TFLOPS is unknown (CPUs) uses the coefficient set's ``flops_abs_tflops``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from estimator import kv as kv_mod
from estimator import weights as weights_mod
from estimator.coefficients import CoefficientSet, CoefficientTable
from estimator.specs import (
    CHUNKED,
    FULL,
    LINEAR,
    MAMBA,
    SLIDING,
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
def is_fp8(quant: QuantSpec) -> bool:
    """True for FP8 weights (compute may use the device's FP8 tensor rate)."""
    return quant.default_type.lower().startswith("fp8")


def matmul_params(model: ModelSpec, active_params: int) -> int:
    """Parameters multiplied per token: active params minus the input-embedding lookup (not a matmul).

    With tied embeddings the same matrix is the output head, so it stays counted once.
    """
    return (
        active_params
        if model.tie_embeddings
        else max(active_params - model.vocab_size * model.hidden_size, 0)
    )


def attn_flops_per_key(model: ModelSpec, absorbed: bool = False) -> int:
    """FLOPs per (query token, key) in one attention layer: 2 x heads x (qk dim + v dim).

    GQA/MHA: 4 x n_heads x head_dim.  MLA: naive form 2 x h x ((nope + rope) + v_head_dim) for prefill; the
    absorbed form used in decode works on the latent: 2 x h x ((kv_lora_rank + rope) + kv_lora_rank).
    """
    h = model.n_heads
    if model.mla is not None:
        m = model.mla
        if absorbed:
            return 2 * h * (m.kv_lora_rank + m.qk_rope_head_dim + m.kv_lora_rank)
        return 2 * h * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    return 4 * h * model.head_dim


def sum_keys(depth: int, n: int, window: int | None) -> int:
    """Keys attended by n new tokens at positions depth .. depth+n-1: sum_i min(depth + i + 1, window)."""
    if n <= 0:
        return 0
    if window is None or depth + n <= window:
        return n * depth + n * (n + 1) // 2
    if depth >= window:
        return n * window
    k = window - depth  # tokens that still see fewer than `window` keys (k < n here)
    return k * depth + k * (k + 1) // 2 + (n - k) * window


def state_flops_per_token(model: ModelSpec) -> int:
    """FLOPs of linear-attention / SSM state updates per token over all such layers (~4 per state element)."""
    if model.state is None:
        return 0
    n = sum(1 for t in model.layer_types if t in (LINEAR, MAMBA))
    return 4 * model.state.recurrent_elems * n


def attention_flops(model: ModelSpec, depth: int, n: int, absorbed: bool = False) -> int:
    """Attention FLOPs (one sequence) for n tokens on top of depth cached tokens, over all layers."""
    per_key = attn_flops_per_key(model, absorbed)
    total = 0
    for kind in model.layer_types:
        if kind == FULL:
            total += per_key * sum_keys(depth, n, None)
        elif kind in (SLIDING, CHUNKED):
            total += per_key * sum_keys(depth, n, model.window)
    return total + n * state_flops_per_token(model)


def expert_union(n_experts: int, k: int, n_tokens: int) -> float:
    """Expected distinct experts of E (k routed per token) touched by B = n_tokens: E (1 - (1 - k/E)^B)."""
    if n_tokens <= 0:
        return 0.0
    return n_experts * (1.0 - (1.0 - k / n_experts) ** n_tokens)


def n_moe_layers(model: ModelSpec) -> int:
    """Layers with a routed-expert FFN."""
    return 0 if model.moe is None else model.n_layers - len(model.moe.dense_layers)


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
    }


def prefill_features(model: ModelSpec, quant: QuantSpec, workload: Workload) -> dict:
    """Physics features of prefilling workload.n_prompt tokens for each of n_seq sequences at n_depth.

    Keys: tokens, flops (2 x matmul params x tokens), attn_flops, weight_bytes (device bytes one ubatch pass
    streams), host_bytes (per pass), n_passes = ceil(tokens / n_ubatch), ubatch_tokens, n_layers,
    n_moe_layers, hidden_size, n_devices, split.
    """
    b = max(int(workload.n_seq), 1)
    tokens = b * max(int(workload.n_prompt), 0)
    ubatch = max(min(int(workload.n_ubatch), int(workload.n_batch)), 1)
    n_passes = math.ceil(tokens / ubatch) if tokens else 0
    per_pass = min(tokens, ubatch)
    wb = breakdown(model, quant)
    dev, host, _ = _weights_read(model, wb, per_pass, workload.moe_offload_layers, workload.offload_bytes)
    return {
        "tokens": tokens,
        "flops": float(2 * matmul_params(model, wb.n_params_active) * tokens),
        "attn_flops": float(b * attention_flops(model, int(workload.n_depth), int(workload.n_prompt))),
        "weight_bytes": dev,
        "host_bytes": host,
        "n_passes": n_passes,
        "ubatch_tokens": per_pass,
        "n_layers": model.n_layers,
        "n_moe_layers": n_moe_layers(model),
        "hidden_size": model.hidden_size,
        "n_devices": max(int(workload.n_devices), 1),
        "split": workload.split,
        "fp8": is_fp8(quant),
    }


# ------------------------------------------------------------------------------------------------ times
def peak_tflops(hardware: HardwareSpec, params: dict, fp8: bool = False) -> float:
    """Datasheet dense TFLOPS used for compute: FP8 for fp8 weights where the device has it, else BF16;
    ``flops_abs_tflops`` of the coefficient set when the datasheet figure is unknown (CPUs)."""
    if fp8 and hardware.fp8_tflops:
        return float(hardware.fp8_tflops)
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
        peak = peak_tflops(hardware, params, f.get("fp8", False)) * 1e12 * params.get("flops_eff", 1.0)
        t_comp = f["flops"] / (tp * peak)
    overhead = params["t_fixed_s"] + params["t_layer_s"] * f["n_layers"]
    overhead += params.get("moe_route_s", 0.0) * f["n_moe_layers"]
    return overhead + max(t_mem, t_comp) + _comm_s(f, hardware, params, int(f["batch"]))


def prefill_time_s(features: dict, hardware: HardwareSpec, params: dict) -> float:
    """Seconds to prefill ``features['tokens']`` tokens; see the module doc.  0 when there are no tokens."""
    f = features
    if not f["tokens"]:
        return 0.0
    n = int(f["n_devices"])
    tp = n if f["split"] == "tp" else 1
    peak = peak_tflops(hardware, params, f.get("fp8", False)) * 1e12 * tp
    bw = _bandwidth_gbs(hardware) * 1e9 * params.get("bw_eff", 1.0) * tp
    host_bw = host_bandwidth_bs(hardware, params, over_link=True)
    t = f["flops"] / (peak * params["flops_eff"]) + f["attn_flops"] / (peak * params["attn_eff"])
    per_pass = f["weight_bytes"] / bw + f["host_bytes"] / host_bw + params["t_layer_s"] * f["n_layers"]
    t += f["n_passes"] * per_pass
    return t + f["n_passes"] * _comm_s(f, hardware, params, int(f["ubatch_tokens"]))


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
