"""The worst-case graph llama.cpp reserves its CPU compute buffer for, for the dense full-attention
architectures whose graph this module builds, and that buffer (bytes) by replaying ggml's allocator over it
(``estimator.engines.ggml_alloc``).

llama.cpp reserves the compute buffer with a graph of u = n_ubatch tokens (at most the cache's cells), every
token an output, attending to the n_kv cells of one cache stream.  For the llama graph (src/models/llama.cpp
and llm_graph_context's build_attn / build_ffn, llama-cpp-python 0.3.36; its Qwen2 / Qwen3 / Mistral /
Ministral 3 graphs hold the same allocations: biases and Q / K norms run in place), F32 tensors of u rows:

    inputs     inp_tokens (int32 u), inp_embd (u x hidden: allocated, never read), inp_pos (int32 u),
               the K / V row indices (int64 u; without flash attention V is cached transposed: int64 u x
               n_kv_heads x head_dim), the KQ mask (n_kv x u, F16 with flash attention, F32 without),
               out_ids (int32 u)
    embd       GET_ROWS of the token table (u x hidden)
    per layer  RMS norm (x weight in place), Q (u x heads x head_dim) then RoPE into a new tensor, V, K
               (u x kv_heads x head_dim) then RoPE, SET_ROWS into the cache (a view), then
                 flash attention: FLASH_ATTN_EXT -> u x heads x head_dim
                 without:         KQ = n_kv x u x heads (soft-max in place), KQV = u x heads x head_dim,
                                  permuted and copied (CONT) to a new tensor
               the output projection (u x hidden), the residual add in place, RMS norm, gate and up
               (u x ff each), SWIGLU (u x ff), down (u x hidden), the residual add in place; the last
               layer first gathers its attention output and residual rows (GET_ROWS by out_ids)
    head       RMS norm and its weight in place on the last layer's output (graph output), the logits
               (u x vocab, graph output)

Replayed, this gives llama.cpp's own CPU compute buffer for every measured configuration of these
architectures (280 of 280 distinct configurations with an F16 cache: 1K-131K cells, u = 128-2,048,
flash attention on and off, 1-4 sequences, unified or not, one layer to full depth; within the log's 0.01 MiB
rounding; results/runs/cpu-memory-fit--*.jsonl, tests/test_llama_cpp_graph.py), the layouts the fitted
formula of ``estimator.physics.runtime`` misses included (SmolLM2-360M without flash attention at 1K cells,
Ministral-3-14B with it at 4K).  With a quantized KV cache one configuration of three is 2.5 % over the replay
(Qwen3-8B, q8_0, 32K cells): those stay with the formula.
"""

from __future__ import annotations

from functools import lru_cache

from estimator.engines.ggml_alloc import GgmlTensor, high_water_bytes
from estimator.specs import FULL, ModelSpec

# HF model types whose llama.cpp graph is the one built here
GRAPH_ARCHS = frozenset({"llama", "mistral", "ministral3", "qwen2", "qwen3"})
# KV cache types replayed: the graphs were checked with these (a quantized cache adds what is not built here)
GRAPH_KV_DTYPES = frozenset({"f16", "bf16", "f32"})


def _graph(
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    ffs: tuple[int, ...],
    vocab: int,
    u: int,
    n_kv: int,
    flash_attn: bool,
) -> tuple[list[GgmlTensor], list[GgmlTensor]]:
    """(leafs, nodes) of the reserve graph (module docstring); ``ffs`` the FFN width of each layer."""
    q, kv = heads * head_dim, kv_heads * head_dim
    leafs: list[GgmlTensor] = []
    nodes: list[GgmlTensor] = []

    def ext(name: str) -> GgmlTensor:
        return GgmlTensor(name, "NONE", external=True)

    def leaf(name: str, nbytes: int) -> GgmlTensor:
        t = GgmlTensor(name, "NONE", nbytes, is_input=True)
        leafs.append(t)
        return t

    def node(name: str, op: str, nbytes: int, *srcs: GgmlTensor, out: bool = False) -> GgmlTensor:
        t = GgmlTensor(name, op, nbytes, srcs, is_output=out)
        nodes.append(t)
        return t

    def view(name: str, op: str, src: GgmlTensor) -> GgmlTensor:
        t = GgmlTensor(name, op, src.nbytes, (src,), view_of=src.view_of or src)
        nodes.append(t)
        return t

    def store(name: str, rows: GgmlTensor, idxs: GgmlTensor, cache: GgmlTensor) -> None:
        """SET_ROWS of ``rows`` into the cache: a view of the cache, no memory here."""
        nodes.append(GgmlTensor(name, "SET_ROWS", 0, (rows, idxs, cache), view_of=cache))

    tokens = leaf("inp_tokens", 4 * u)
    leaf("inp_embd", 4 * u * hidden)
    pos = leaf("inp_pos", 4 * u)
    k_idxs = leaf("attn_inp_k_idxs", 8 * u)
    v_idxs = leaf("attn_inp_v_idxs", 8 * u if flash_attn else 8 * u * kv)
    mask = leaf("attn_inp_kq_mask", (2 if flash_attn else 4) * n_kv * u)
    out_ids = leaf("out_ids", 4 * u)
    row = 4 * u * hidden
    x = node("embd", "GET_ROWS", row, ext("token_embd"), tokens)
    for il, ff in enumerate(ffs):
        w = ext(f"blk.{il}")
        norm = node(f"norm-{il}", "RMS_NORM", row, x)
        cur = node(f"attn_norm-{il}", "MUL", row, norm, w)
        qm = node(f"Qcur-{il}", "MUL_MAT", 4 * u * q, w, cur)
        qr = node(f"Qcur-{il}", "ROPE", 4 * u * q, view(f"Qcur-{il} (reshaped)", "RESHAPE", qm), pos)
        vm = node(f"Vcur-{il}", "MUL_MAT", 4 * u * kv, w, cur)
        vv = view(f"Vcur-{il} (reshaped)", "RESHAPE", vm)
        km = node(f"Kcur-{il}", "MUL_MAT", 4 * u * kv, w, cur)
        kr = node(f"Kcur-{il}", "ROPE", 4 * u * kv, view(f"Kcur-{il} (reshaped)", "RESHAPE", km), pos)
        cache_k, cache_v = ext(f"cache_k_l{il}"), ext(f"cache_v_l{il}")
        store(f"cache_k_l{il} (view)", view(f"Kcur-{il} (view)", "VIEW", kr), k_idxs, cache_k)
        if flash_attn:
            store(f"cache_v_l{il} (view)", view(f"Vcur-{il} (view)", "VIEW", vv), v_idxs, cache_v)
        else:  # V cached transposed: one index per element
            vt = view(f"Vcur-{il} (reshaped)", "RESHAPE", view(f"Vcur-{il} (reshaped)", "RESHAPE", vv))
            store(f"cache_v_l{il} (view)", vt, v_idxs, cache_v)
        qp = view(f"Qcur-{il} (permuted)", "PERMUTE", view(f"Qcur-{il} (view)", "VIEW", qr))
        if flash_attn:
            att = node(f"fattn-{il}", "FLASH_ATTN_EXT", 4 * u * q, qp, cache_k, cache_v, mask)
            att = view(f"kqv_out-{il}", "RESHAPE", att)
        else:
            kq = node(f"kq-{il}", "MUL_MAT", 4 * n_kv * u * heads, cache_k, qp)
            kq = node(f"kq_soft_max-{il}", "SOFT_MAX", 4 * n_kv * u * heads, kq, mask)
            kqv = node(f"kqv-{il}", "MUL_MAT", 4 * u * q, cache_v, kq)
            att = node(f"kqv_out-{il}", "CONT", 4 * u * q, view(f"kqv-{il} (permuted)", "PERMUTE", kqv))
        cur = node(f"attn_out-{il}", "MUL_MAT", row, w, att)
        res = x
        if il == len(ffs) - 1:  # the output rows only (all of them in the reserve graph)
            cur = node(f"attn_out_rows-{il}", "GET_ROWS", row, cur, out_ids)
            res = node(f"inp_rows-{il}", "GET_ROWS", row, res, out_ids)
        ffn_inp = node(f"ffn_inp-{il}", "ADD", row, cur, res)
        norm = node(f"norm-{il}", "RMS_NORM", row, ffn_inp)
        cur = node(f"ffn_norm-{il}", "MUL", row, norm, w)
        gate = node(f"ffn_gate-{il}", "MUL_MAT", 4 * u * ff, w, cur)
        up = node(f"ffn_up-{il}", "MUL_MAT", 4 * u * ff, w, cur)
        act = node(f"ffn_swiglu-{il}", "GLU", 4 * u * ff, gate, up)
        down = node(f"ffn_out-{il}", "MUL_MAT", row, w, act)
        x = node(f"l_out-{il}", "ADD", row, down, ffn_inp)
    norm = node("norm", "RMS_NORM", row, x)
    result = node("result_norm", "MUL", row, norm, ext("output_norm"), out=True)
    node("result_output", "MUL_MAT", 4 * u * vocab, ext("output"), result, out=True)
    return leafs, nodes


@lru_cache(maxsize=4096)
def _replayed(
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    ffs: tuple[int, ...],
    vocab: int,
    u: int,
    n_kv: int,
    flash_attn: bool,
) -> int:
    return high_water_bytes(*_graph(hidden, heads, kv_heads, head_dim, ffs, vocab, u, n_kv, flash_attn))


def replayable(model: ModelSpec, kinds: set[str], kv_dtype: str) -> bool:
    """Whether this module builds ``model``'s graph: a dense gated-FFN model of GRAPH_ARCHS whose layers all
    run full attention in llama.cpp (``kinds``: the engine's layer kinds), with a GRAPH_KV_DTYPES cache."""
    return (
        model.architecture in GRAPH_ARCHS
        and model.moe is None
        and model.mla is None
        and model.state is None
        and model.ffn_gated
        and not model.attn_output_gate
        and not model.per_layer_input
        and not model.n_kv_shared_layers
        and model.global_head_dim is None
        and kinds == {FULL}
        and kv_dtype in GRAPH_KV_DTYPES
    )


def cpu_compute_bytes(model: ModelSpec, u: int, n_kv: int, flash_attn: bool) -> int:
    """llama.cpp's CPU compute buffer (bytes) for ``model`` (``replayable``) with micro-batches of ``u``
    tokens attending to ``n_kv`` cells of one stream: the allocator's high-water mark over the reserve
    graph."""
    ffs = tuple(model.ffn_width(i) for i in range(model.n_layers))
    return _replayed(
        model.hidden_size, model.n_heads, model.n_kv_heads, model.head_dim, ffs, model.vocab_size, int(u),
        int(n_kv), bool(flash_attn),
    )
