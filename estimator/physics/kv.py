"""KV cache and fixed recurrent state, per layer kind and engine.

Per-token row elements per layer (one sequence):

* FULL / SLIDING / CHUNKED attention: K row = n_kv_heads*head_dim and V row = n_kv_heads*head_dim (Gemma 4
  full layers: global_n_kv_heads*global_head_dim); a KV-shared layer (Gemma 4 E2B / E4B: the last
  num_kv_shared_layers attend with the cache of the last earlier layer of their kind) stores none.  Gemma 4's
  K==V layers (attention_k_eq_v: no v_proj, V is the K projection under its own norm) still cache V:
  llama.cpp allocates V for every layer that is not MLA (src/llama-kv-cache.cpp ``has_v = !is_mla``;
  measured by its memory-fit pass on Gemma-4-26B-A4B) and vLLM loads K's weights into V's slot and caches
  both (models/gemma4.py);
* MLA (DeepSeek-V2/V3, Kimi-K2): one latent row of kv_lora_rank + qk_rope_head_dim elements.  llama.cpp
  stores it as K with no separate V (``has_v = !is_mla`` in src/llama-kv-cache.cpp); vLLM caches the same
  latent.  DSA models (DeepSeek-V3.2, GLM-5) add the lightning indexer's key, index_head_dim per token and
  layer, counted with the layer's row: in the KV dtype for llama.cpp (a second K-only cache of the same
  cells), FP8 + one FP32 scale per 128 (132 B for 128) for vLLM (``EngineProfile.indexer_key_dtype``).

Bytes of a layer = cells x row_bytes(kv_dtype, row) (q8_0 rows: 34 B per 32 elements).

Cells: the engine profile lays them out (``EngineProfile.kv_layout``; estimator.engines.llama_cpp: padded
contiguous cells in one unified stream or one stream per sequence, sliding-window layers capped at
window x n_seq + n_ubatch (unified) or window + n_ubatch per stream, ``--swa-full`` = full size;
estimator.engines.vllm: paged blocks, windowed layers at window + one block).  Layers an engine does not
run as declared (llama.cpp runs
Mistral v0.1's sliding window as full attention) follow ``EngineProfile.layer_kind``.

Fixed state (LINEAR Gated DeltaNet and MAMBA layers), per sequence and layer: recurrent_elems x
``EngineProfile.state_recurrent_bytes`` + conv_elems x ``state_conv_bytes``.  The recurrent state is F32 in
llama.cpp and SGLang; vLLM keeps it in the model dtype (bf16) unless the model's config asks for float32
(Qwen3.5, Nemotron-H).  The conv state: llama.cpp F32, vLLM / SGLang bf16.  State does not depend on n_ctx or
on kv_dtype.

``kv_cache`` raises SpecError for a cache the engine cannot allocate (``EngineProfile.check_cache``: llama.cpp
needs flash attention for a quantized V cache).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from estimator.engines import get_engine
from estimator.engines.base import CacheLayer
from estimator.physics.counts import sparse_keys
from estimator.physics.quant import kv_type, row_bytes
from estimator.specs import CHUNKED, FULL, LINEAR, MAMBA, SLIDING, ModelSpec, SpecError, Workload


@dataclass(frozen=True)
class KVEstimate:
    """KV cache + state for one configuration (bytes).

    total_bytes = sum(by_kind_bytes) = attention KV (all sequences) + state_bytes.
    bytes_per_token: growing part for one sequence (FULL layers: bytes per extra token of context).
    state_bytes: fixed recurrent state of all sequences.  n_cells: cells of the FULL-attention cache.
    """

    total_bytes: int
    by_kind_bytes: dict[str, int]
    bytes_per_token: int
    state_bytes: int
    n_cells: int
    n_cells_windowed: int
    kv_dtype: str
    engine: str
    n_streams: int = 1  # independent cache streams (llama.cpp without --kv-unified: one per sequence)


def _attn_rows(m: ModelSpec, kind: str) -> tuple[int, int]:
    """(K row elements, V row elements) of one token in one layer of ``kind``."""
    if m.mla is not None:
        return m.mla.kv_lora_rank + m.mla.qk_rope_head_dim, 0
    hd, kvh = m.head_dim, m.n_kv_heads
    if kind == FULL and m.global_head_dim:
        hd, kvh = m.global_head_dim, m.global_n_kv_heads or kvh
    k = kvh * hd
    return k, k


def _indexer_key_bytes(m: ModelSpec, kv_dtype: str, engine: str) -> int:
    """Bytes of one DSA indexer key (one token, one layer): index_head_dim in the KV dtype
    (``EngineProfile.indexer_key_dtype`` "kv": llama.cpp), else FP8 values plus one FP32 scale per 128; 0
    without an indexer."""
    idx = m.mla.index_head_dim if m.mla is not None and m.mla.index_n_heads else 0
    if not idx:
        return 0
    if get_engine(engine).indexer_key_dtype == "kv":
        return row_bytes(kv_type(kv_dtype), idx)
    return idx + idx // 128 * 4


def indexer_token_bytes(m: ModelSpec, kv_dtype: str = "f16", engine: str = "llama.cpp") -> int:
    """DSA indexer key bytes of one token summed over the full-attention layers (part of
    ``layer_token_bytes``' full-attention bytes); 0 without an indexer."""
    per = _indexer_key_bytes(m, kv_dtype, engine)
    profile = get_engine(engine)
    return per * sum(1 for k in m.layer_types if profile.layer_kind(m, k) == FULL)


@lru_cache(maxsize=8192)
def layer_token_bytes(
    m: ModelSpec,
    kv_dtype: str = "f16",
    engine: str = "llama.cpp",
    flash_attn: bool = True,
    stored: bool = True,
) -> dict[str, int]:
    """KV bytes per token per layer kind summed over the layers of that kind: {full, sliding, chunked}.

    ``stored``: the layers that keep a cache (a KV-shared layer, ``ModelSpec.kv_shared``, keeps none:
    llama.cpp allocates the layers below ``n_layer_kv_from_start`` only); False: every attention layer, as a
    decode step reads them (a shared layer reads its source layer's rows again).

    Without flash attention an engine that stores V transposed (``EngineProfile.transposed_v_max_width``,
    llama.cpp's ``n_embd_v_gqa_max``) gives every layer's V rows the widest layer's width (Gemma 4: its
    global layers' 2 x 512 next to 16 x 256 sliding rows)."""
    t = kv_type(kv_dtype)
    profile = get_engine(engine)
    out = {FULL: 0, SLIDING: 0, CHUNKED: 0}
    kinds = [profile.layer_kind(m, kind) for kind in m.layer_types]
    v_max = max((_attn_rows(m, k)[1] for k in kinds if k in out), default=0)
    pad_v = not flash_attn and profile.transposed_v_max_width
    idx_bytes = _indexer_key_bytes(m, kv_dtype, engine)
    for i, kind in enumerate(kinds):
        if kind in out and not (stored and m.kv_shared(i)):
            k, v = _attn_rows(m, kind)
            if v and pad_v:
                v = v_max
            out[kind] += row_bytes(t, k) + (row_bytes(t, v) if v else 0) + idx_bytes
    return out


@lru_cache(maxsize=4096)
def cache_layers(
    m: ModelSpec, kv_dtype: str = "f16", engine: str = "llama.cpp", n_tp: int = 1
) -> tuple[CacheLayer, ...]:
    """Every layer that keeps a cache, as a paged block manager sees it on one of ``n_tp`` tensor-parallel
    devices (``EngineProfile.startup_kv``): an attention layer (kind as the engine runs it) with its bytes
    per token = K + V rows of the device's KV heads (max(1, heads // n_tp) of them, vLLM's split; an MLA
    latent row whole on every device) and its window; a recurrent-state layer with 0 bytes per token and its
    fixed state of one sequence (``state_bytes_per_seq`` per layer, its 1 / n_tp share: the engines split the
    value heads and conv channels); a DSA indexer key as a layer of kind "indexer" next to each full layer.
    KV-shared layers keep none."""
    t = kv_type(kv_dtype)
    profile = get_engine(engine)
    idx = _indexer_key_bytes(m, kv_dtype, engine)
    state = _state_layer_bytes(m, engine) // max(1, n_tp)
    out: list[CacheLayer] = []
    for i, declared in enumerate(m.layer_types):
        if m.kv_shared(i):
            continue
        kind = profile.layer_kind(m, declared)
        if kind not in (FULL, SLIDING, CHUNKED):
            out.append(CacheLayer(kind, 0, state_bytes=state if kind in (LINEAR, MAMBA) else 0))
            continue
        k, v = _attn_rows(m, kind)
        if m.mla is None:
            heads = m.n_kv_heads
            if kind == FULL and m.global_head_dim:
                heads = m.global_n_kv_heads or heads
            share = max(1, heads // max(1, n_tp))
            k, v = k // heads * share, v // heads * share
        span = 0 if kind == FULL else int(m.window or 0)
        out.append(CacheLayer(kind, row_bytes(t, k) + (row_bytes(t, v) if v else 0), span, m.mla is not None))
        if idx and kind == FULL:
            out.append(CacheLayer("indexer", idx))
    return tuple(out)


def _state_layer_bytes(m: ModelSpec, engine: str) -> int:
    """Fixed state of one sequence in one LINEAR / MAMBA layer: recurrent_elems x the engine's recurrent
    dtype + conv_elems x its conv dtype (bytes); 0 without a state."""
    if m.state is None:
        return 0
    profile = get_engine(engine)
    recurrent = profile.state_recurrent_bytes(m) * m.state.recurrent_elems
    return recurrent + profile.state_conv_bytes * m.state.conv_elems


@lru_cache(maxsize=4096)
def state_bytes_per_seq(m: ModelSpec, engine: str = "llama.cpp") -> dict[str, int]:
    """Fixed state bytes of one sequence: {linear, mamba} (see module docstring for dtypes)."""
    out = {LINEAR: 0, MAMBA: 0}
    if m.state is None:
        return out
    per_layer = _state_layer_bytes(m, engine)
    for kind in m.layer_types:
        if kind in out:
            out[kind] += per_layer
    return out


def kv_cache(
    model: ModelSpec,
    n_ctx: int,
    kv_dtype: str = "f16",
    n_seq: int = 1,
    engine: str = "llama.cpp",
    *,
    n_ubatch: int = 512,
    flash_attn: bool = True,
    swa_full: bool = False,
    kv_unified: bool = True,
    kv_pad: int = 0,
) -> KVEstimate:
    """KV cache + state of ``n_seq`` sequences of ``n_ctx`` tokens each (see module docstring; the keyword
    options are Workload's: ``kv_cache_for`` passes them from a workload)."""
    if n_ctx <= 0 or n_seq <= 0:
        raise SpecError(f"context and sequences must be positive (n_ctx={n_ctx}, n_seq={n_seq})")
    if n_ubatch <= 0 or kv_pad < 0:
        raise SpecError(f"n_ubatch must be positive and kv_pad >= 0 (n_ubatch={n_ubatch}, kv_pad={kv_pad})")
    profile = get_engine(engine)
    t = kv_type(kv_dtype)
    profile.check_cache(kv_dtype, flash_attn)
    per_tok = layer_token_bytes(model, kv_dtype, engine, flash_attn)
    layout = profile.kv_layout(
        model, n_ctx, n_seq, n_ubatch, swa_full=swa_full, unified=kv_unified, pad=kv_pad
    )
    cells, cells_w = layout.full, layout.windowed
    st = state_bytes_per_seq(model, engine)
    by_kind = {
        FULL: per_tok[FULL] * cells,
        SLIDING: per_tok[SLIDING] * cells_w,
        CHUNKED: per_tok[CHUNKED] * cells_w,
        LINEAR: st[LINEAR] * n_seq,
        MAMBA: st[MAMBA] * n_seq,
    }
    by_kind = {k: v for k, v in by_kind.items() if v}
    state = st[LINEAR] * n_seq + st[MAMBA] * n_seq
    return KVEstimate(
        total_bytes=sum(by_kind.values()),
        by_kind_bytes=by_kind,
        bytes_per_token=per_tok[FULL],
        state_bytes=state,
        n_cells=cells,
        n_cells_windowed=cells_w if model.window else 0,
        kv_dtype=t,
        engine=engine,
        n_streams=layout.n_streams,
    )


def kv_cache_for(model: ModelSpec, workload: Workload, n_seq: int | None = None) -> KVEstimate:
    """``kv_cache`` for a workload: its n_ctx, KV dtype, engine, n_ubatch, flash attention, --swa-full,
    unified cache and padding; ``n_seq`` overrides the workload's sequences (e.g. a report's concurrency)."""
    wl = workload
    return kv_cache(
        model,
        wl.n_ctx,
        wl.kv_dtype,
        wl.n_seq if n_seq is None else n_seq,
        wl.engine,
        n_ubatch=wl.n_ubatch,
        flash_attn=wl.flash_attn,
        swa_full=wl.swa_full,
        kv_unified=wl.kv_unified,
        kv_pad=wl.kv_pad,
    )


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "f16", engine: str = "llama.cpp") -> int:
    """Bytes one more token of context adds to one sequence, all attention kinds (before window caps)."""
    return sum(layer_token_bytes(model, kv_dtype, engine).values())


def kv_read_bytes(model: ModelSpec, depth: int, kv_dtype: str = "f16", engine: str = "llama.cpp") -> int:
    """KV + state bytes one decoded token reads at ``depth`` tokens of context (one sequence):
    full layers depth x row bytes, windowed layers min(depth, window) x row bytes, plus the fixed state.

    DSA with an engine that attends the selected rows only (``EngineProfile.sparse_attention``): the
    indexer's keys are read for every cached token, the latent rows for min(depth, index_topk) of them."""
    per_tok = layer_token_bytes(model, kv_dtype, engine, stored=False)
    d = max(0, int(depth))
    w = min(d, model.window) if model.window else d
    st = state_bytes_per_seq(model, engine)
    full = per_tok[FULL] * d
    top_k = sparse_keys(model, get_engine(engine).sparse_attention)
    if top_k is not None:
        idx = indexer_token_bytes(model, kv_dtype, engine)
        full = (per_tok[FULL] - idx) * min(d, top_k) + idx * d
    return full + (per_tok[SLIDING] + per_tok[CHUNKED]) * w + st[LINEAR] + st[MAMBA]
