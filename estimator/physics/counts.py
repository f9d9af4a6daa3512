"""Counting helpers of the speed physics (pure functions of the specs; no coefficients, no time).

FLOPs, keys, expert unions, prefill kernel classes, llama.cpp pipeline schedules and KQ score counts used by
estimator.physics.speed to build its features.  Units: FLOP, keys / scores (counts), stage times
(pipeline_makespan).
estimator.physics.speed re-exports every public name here, so ``speed.sum_keys`` etc. keep working.
"""

from __future__ import annotations

import math

from estimator.engines import get_engine
from estimator.physics.weights import tensor_inventory
from estimator.specs import CHUNKED, FULL, LINEAR, MAMBA, SLIDING, ModelSpec, QuantSpec, Workload

# Bytes one F32 KQ score moves without flash attention: written by the KQ matmul, read + written by
# soft_max_ext, read by the KQV matmul (llama.cpp build_attn_mha, non-FA branch): 4 x 4 B.
KQ_SCORE_BYTES = 16
# ggml_backend_sched input copies = micro-batches in flight under llama.cpp pipeline parallelism
# (GGML_SCHED_MAX_COPIES, ggml-backend.cpp; default 4).
SCHED_MAX_COPIES = 4
# Prefill kernel classes and the optional coefficient that scales flops_eff for each (k-quants = reference).
KERNEL_CLASS_PARAMS = {
    "f16": "flops_rel_f16",
    "legacy": "flops_rel_legacy",
    "iq4": "flops_rel_iq4",
    "iquant": "flops_rel_iquant",
}
# Decode kernel classes (``decode_kernel_class``) and the optional coefficient that scales bw_eff for the
# weight bytes of each (k-quants = reference): the mat-vec kernels reach different fractions of the bandwidth.
DECODE_CLASS_PARAMS = {
    "f16": "bw_rel_f16",
    "q4_0": "bw_rel_q4_0",
    "q8_0": "bw_rel_q8_0",
    "mxfp4": "bw_rel_mxfp4",
    "iq4": "bw_rel_iq4",
    "iquant": "bw_rel_iquant",
}
# Optional coefficient scaling the efficiency of routed-expert GEMMs (mul_mat_id) in prefill.
MOE_PARAM = "flops_rel_moe"
_F16_TYPES = ("f32", "f16", "bf16")
_LEGACY_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4")
# The two kinds of i-quant kernels (ggml/src/ggml-common.h): iq4_nl / iq4_xs map each 4-bit index through one
# 16-entry table of int8 values (kvalues_iq4nl) and then run like q4_0 / q4_K; every other i-quant (iq1_s ..
# iq3_s, and the trellis / ``_k`` types of forks) expands lattice codebooks (iq2xxs_grid, iq3s_grid, ...) with
# sign tables, a heavier decode per byte.
_IQ4_TYPES = ("iq4_nl", "iq4_xs")
# A class split off another: a coefficient set without the class's own ratio uses its parent's.
CLASS_PARENT = {"iq4": "iquant"}
# The class of every weight of an engine whose GEMMs are not ggml's kernels per weight type
# (``EngineProfile.quant_kernel_classes`` False: vLLM's torch / cuBLAS / oneDNN linear layers): no class
# ratio applies (1); the engine's covariate carries its level.
ENGINE_KERNELS = "engine"


def _iq_class(t: str) -> str:
    """``iq4`` for the table-lookup 4-bit i-quants, ``iquant`` for the codebook-grid ones (``_IQ4_TYPES``)."""
    return "iq4" if t in _IQ4_TYPES else "iquant"


def is_fp8(quant: QuantSpec) -> bool:
    """True for FP8 weights (compute may use the device's FP8 tensor rate)."""
    return quant.default_type.lower().startswith("fp8")


def matmul_params(model: ModelSpec, active_params: int) -> int:
    """Parameters multiplied per token: active params minus the input-embedding lookups (not matmuls): the
    token table, and Gemma 4's per-layer token table (vocab x per_layer_input x n_layers).

    With tied embeddings the same matrix is the output head, so it stays counted once.
    """
    lookup = model.vocab_size * model.per_layer_input * model.n_layers  # Gemma 4's per-layer token table
    embd = 0 if model.tie_embeddings else model.vocab_size * model.hidden_size
    return max(active_params - lookup - embd, 0)


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


def indexer_flops_per_key(model: ModelSpec) -> int:
    """FLOPs per (query token, key) of one DSA lightning indexer: 2 x index_n_heads x index_head_dim (the
    scores of every cached key); 0 without an indexer."""
    m = model.mla
    return 2 * m.index_n_heads * m.index_head_dim if m is not None and m.index_n_heads else 0


def sparse_keys(model: ModelSpec, sparse: bool) -> int | None:
    """The most keys one query attends in a full layer: DSA's index_topk when the engine's kernels attend
    the selected rows only (``EngineProfile.sparse_attention``), else None (every cached key)."""
    m = model.mla
    return m.index_topk if sparse and m is not None and m.index_n_heads and m.index_topk else None


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


def attention_flops(
    model: ModelSpec, depth: int, n: int, absorbed: bool = False, sparse: bool = False, dense_upto: int = 0
) -> int:
    """Attention FLOPs (one sequence) for n tokens on top of depth cached tokens, over all layers.

    DSA (DeepSeek-V3.2, GLM-5): the lightning indexer scores every cached key (``indexer_flops_per_key``);
    with ``sparse`` (the engine's sparse MLA kernels) the attention itself multiplies at most index_topk keys
    per query (``sparse_keys``: sum_i min(depth + i + 1, index_topk)), in the latent (absorbed) form for
    prompts too (vLLM's FlashMLA sparse kernels take 576-wide queries and keys, 512-wide values, in prefill
    and decode), else every key (llama.cpp masks a dense attention).  ``dense_upto``: a prompt (n > 1) whose
    sequence ends within that many keys (depth + n <= dense_upto) runs dense attention in the naive form
    instead (SGLang's MHA_ONE_SHOT below index_topk keys, ``EngineProfile.dense_prompt_keys``); its keys
    are all of them then, as the sparse count gives below index_topk."""
    top_k, idx = sparse_keys(model, sparse), indexer_flops_per_key(model)
    dense_prompt = n > 1 and depth + n <= dense_upto
    per_key = attn_flops_per_key(model, not dense_prompt and (absorbed or top_k is not None))
    kinds = model.layer_types  # every full layer costs the same, and so does every windowed one
    n_full, n_window = kinds.count(FULL), kinds.count(SLIDING) + kinds.count(CHUNKED)
    total = n_full * (per_key * sum_keys(depth, n, top_k) + idx * sum_keys(depth, n, None))
    if n_window:
        total += n_window * per_key * sum_keys(depth, n, model.window)
    return total + n * state_flops_per_token(model)


def expert_union(n_experts: int, k: int, n_tokens: int) -> float:
    """Expected distinct experts of E (k routed per token) touched by B = n_tokens: E (1 - (1 - k/E)^B)."""
    if n_tokens <= 0:
        return 0.0
    return n_experts * (1.0 - (1.0 - k / n_experts) ** n_tokens)


def expert_rows(model: ModelSpec, n_tokens: float) -> float:
    """Rows of each routed expert's GEMM when a pass of ``n_tokens`` tokens runs its MoE layers (llama.cpp's
    mul_mat_id, vLLM's fused MoE): the n_tokens x k routings spread over the U experts they touch,
    n_tokens x k / U with U = ``expert_union(E, k, n_tokens)`` (1 row at one token, -> n_tokens x k / E for
    large passes: 64 rows for gpt-oss-20b's 4 of 32 experts at 512 tokens against 512 for a dense GEMM).
    0 for a dense model or no tokens."""
    if model.moe is None or n_tokens <= 0:
        return 0.0
    k, e = model.moe.n_experts_used, model.moe.n_experts
    return n_tokens * k / expert_union(e, k, n_tokens)


def routed_active_params(model: ModelSpec) -> int:
    """Routed-expert parameters one token multiplies: n_moe_layers x k x (3 gated | 2) x width x expert_ff
    (width = the latent size for latent MoE, else hidden).  0 for dense models."""
    if model.moe is None:
        return 0
    m = model.moe
    width = m.latent_size or model.hidden_size
    return n_moe_layers(model) * m.n_experts_used * (3 if model.ffn_gated else 2) * width * m.expert_ff


def n_moe_layers(model: ModelSpec) -> int:
    """Layers with a routed-expert FFN."""
    return 0 if model.moe is None else model.n_layers - len(model.moe.dense_layers)


def dominant_type(model: ModelSpec, quant: QuantSpec | None) -> str:
    """The storage type of the weight GEMMs (lower case): a GGUF model's type holding most elements of its 2-D
    layer tensors, else the quant's default type (f16 without a quant)."""
    t = quant.default_type if quant is not None else "f16"
    if model.gguf_tensors is not None:
        count: dict[str, int] = {}
        for name, typ, n, _ in model.gguf_tensors:
            if name.endswith(".weight") and "norm" not in name and "token_embd" not in name:
                count[typ.lower()] = count.get(typ.lower(), 0) + n
        t = max(count, key=count.__getitem__) if count else t
    return t.lower()


def kernel_class(model: ModelSpec, quant: QuantSpec | None) -> str:
    """Prefill GEMM kernel class of the weights: f16 (f32/f16/bf16), legacy (q4_0/q4_1/q5_0/q5_1/q8_0/mxfp4:
    32-element blocks with one scale), kquant (q2_K .. q6_K super-blocks), iq4 (iq4_nl / iq4_xs), iquant (the
    other iq*: codebook grids), or other (fp8, int4 AWQ/GPTQ, ...).  A GGUF model is classed by the type
    holding most elements of its 2-D tensors."""
    t = dominant_type(model, quant)
    if t in _F16_TYPES:
        return "f16"
    if t in _LEGACY_TYPES:
        return "legacy"
    if t.startswith("iq"):
        return _iq_class(t)
    if t.endswith("_k"):
        return "kquant"
    return "other"


def decode_kernel_class(model: ModelSpec, quant: QuantSpec | None) -> str:
    """Decode (mat-vec) kernel class of the weights, finer than the prefill class because the per-byte cost of
    dequantizing differs per block layout: f16 (f32/f16/bf16), q4_0 (q4_0/q4_1/q5_0/q5_1: 32-element blocks of
    4-5 bit), q8_0, mxfp4, kquant (q2_K .. q6_K, the reference), iq4 (iq4_nl / iq4_xs), iquant (the other iq*:
    codebook grids), other (fp8, AWQ/GPTQ ...)."""
    t = dominant_type(model, quant)
    if t in _F16_TYPES:
        return "f16"
    if t in ("q4_0", "q4_1", "q5_0", "q5_1"):
        return "q4_0"
    if t in ("q8_0", "mxfp4"):
        return t
    if t.startswith("iq"):
        return _iq_class(t)
    if t.endswith("_k"):
        return "kquant"
    return "other"


def _rel_of(params: dict, cls: str, table: dict[str, str]):
    """The ratio a set gives kernel class ``cls`` (None when the class has no parameter or the set carries
    neither it nor its ``CLASS_PARENT``'s)."""
    name = table.get(cls)
    if name is None:
        return None
    if name not in params and cls in CLASS_PARENT:
        return _rel_of(params, CLASS_PARENT[cls], table)
    return params.get(name)


def class_rel(params: dict, kernel_class, table: dict[str, str]):
    """The relative efficiency ``params[table[class]]`` of a kernel class (1 when the class has no parameter
    or the set does not carry it; a set from before a class was split off carries its parent's,
    ``CLASS_PARENT``: the iq4 class of an older file takes its single i-quant ratio).  ``kernel_class`` may
    be a numpy array of class names (calibration evaluates many points at once): then the result is an
    array."""
    if isinstance(kernel_class, str):
        rel = _rel_of(params, kernel_class, table)
        return 1.0 if rel is None else rel
    import numpy as np

    out = np.ones(np.shape(kernel_class), dtype=float)
    for cls in table:
        rel = _rel_of(params, cls, table)
        if rel is not None:
            out = np.where(kernel_class == cls, rel, out)
    return out


def pipeline_makespan(m: int, p: int, copies: int = SCHED_MAX_COPIES) -> float:
    """Stage times to push m micro-batches through p pipeline stages with at most ``copies`` in flight.

    Micro-batch j enters stage 0 at start_j = max(j, start_{j-copies} + p) (its input copy is free again when
    micro-batch j-copies has left the last stage), so start_j = floor(j/c) x p + (j mod c) when p > c, else
    j; makespan = start_{m-1} + p.  m <= copies gives the textbook m + p - 1.
    """
    if m <= 0:
        return 0.0
    j = m - 1
    start = j if p <= copies else (j // copies) * p + j % copies
    return float(start + p)


def pipeline_factor(workload: Workload, tokens: int, ubatch: int) -> float:
    """Prefill time under llama.cpp layer-split pipeline parallelism / the serial time (see module doc).

    Enabled (llama-context.cpp) for llama.cpp with N > 1 devices, layer split and every layer offloaded
    (no host-resident weights); one llama_decode call (<= n_batch tokens) is the unit that pipelines.
    """
    p = max(int(workload.n_devices), 1)
    if (
        p == 1
        or not get_engine(workload.engine).pipelines_layer_split
        or workload.split != "pp"
        or workload.offload_bytes
        or workload.moe_offload_layers
        or tokens <= 0
    ):
        return 1.0
    call = max(int(workload.n_batch), ubatch)
    ms = [math.ceil(min(call, tokens - s) / ubatch) for s in range(0, tokens, call)]
    return sum(pipeline_makespan(m, p) for m in ms) / (p * sum(ms))


def kq_score_elems(model: ModelSpec, depth: int, n: int, ubatch: int) -> int:
    """KQ scores one sequence materialises over all attention layers without flash attention (per head).

    Pass p covers tokens [s, s + u_p) and builds a u_p x n_kv_p matrix, n_kv_p = depth + s + u_p keys on full
    layers, min(that, window + u_p) on sliding/chunked ones (llama.cpp's SWA cache keeps window + ubatch).
    """
    total = 0
    for s0 in range(0, n, ubatch):
        u = min(ubatch, n - s0)
        n_kv = depth + s0 + u
        for kind in model.layer_types:
            if kind == FULL:
                total += u * n_kv
            elif kind in (SLIDING, CHUNKED):
                total += u * min(n_kv, (model.window or n_kv) + u)
    return total


# Optional coefficient: GEMM inner-dimension half-saturation (elements); absent = 0 = no width effect.
GEMM_K_HALF_PARAM = "gemm_k_half"
# Optional coefficient: GEMM row-count half-saturation (tokens of a pass); absent = 0 = no pass-size effect.
GEMM_M_HALF_PARAM = "gemm_m_half"
_NO_GEMM_GROUPS = ("embd", "output", "norm")


def last_layer_ffn(model: ModelSpec) -> tuple[int, int, int, int]:
    """(params, routed params, output elements, routed output elements) one token multiplies / produces in
    the FFN of the last decoder layer (its ``ffn_*`` matmul tensors of ``tensor_inventory``: dense or shared
    FFN, router, routed experts counted x k / E): the work an engine with
    ``EngineProfile.last_layer_ffn_outputs_only`` (llama.cpp) skips for the prompt rows that return no
    logits."""
    params = routed = outs = routed_outs = 0
    moe = model.moe
    last = model.n_layers - 1
    for t in tensor_inventory(model):
        if t.layer != last or not t.tclass.startswith("ffn_") or t.group in _NO_GEMM_GROUPS or t.row_len <= 0:
            continue
        n, rows = t.n_elements, t.n_elements // t.row_len
        if t.group == "routed" and moe is not None and moe.n_experts:
            n, rows = n * moe.n_experts_used // moe.n_experts, rows * moe.n_experts_used // moe.n_experts
            routed += n
            routed_outs += rows
        params += n
        outs += rows
    return params, routed, outs, routed_outs


def gemm_outputs_per_token(model: ModelSpec) -> tuple[int, int]:
    """(all, routed-expert) output elements the layer weight GEMMs produce per token (counts).

    Sum over the matmul tensors of the decoder layers (``estimator.physics.weights.tensor_inventory``,
    without the
    token embedding, the output head and the norms) of their rows N = n_elements / row_len; a routed-expert
    tensor (E experts stacked) counts N x k / E.  Used by the GEMM width term: a GEMM of inner dimension K
    runs at eff x K / (K + k_half), so its time is flops x (1 + k_half / K) / (peak x eff) and the extra part
    summed over matrices is 2 x k_half x tokens x sum(N) (see estimator.physics.speed).
    """
    total = routed = 0
    moe = model.moe
    for t in tensor_inventory(model):
        if t.group in _NO_GEMM_GROUPS or t.row_len <= 0:
            continue
        n = t.n_elements // t.row_len
        if t.group == "routed" and moe is not None and moe.n_experts:
            n = n * moe.n_experts_used // moe.n_experts
            routed += n
        total += n
    return total, routed
