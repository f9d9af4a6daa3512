"""The worst-case graph llama.cpp reserves its CPU compute buffer for, for the architectures whose graph
this module builds, and that buffer (bytes) by replaying ggml's allocator over it
(``estimator.engines.ggml_alloc``).

llama.cpp reserves the compute buffer with a graph of u = n_ubatch tokens (at most the cache's cells), every
token an output, attending to the cells of one cache stream (n_kv in a full-attention layer, the window's in
a sliding or chunked one).  For the llama graph (src/models/llama.cpp and llm_graph_context's build_attn /
build_ffn / build_moe_ffn, llama-cpp-python 0.3.36; the Qwen2 / Qwen3 / Mistral / Ministral 3 / Mixtral /
Qwen3-MoE / gpt-oss / GLM-4.5 / dots.llm1 / MiniMax-M2 / ERNIE-4.5-MoE / Hunyuan-A13B / Llama 4, Gemma 2 /
Gemma 3 and Phi-3 graphs hold the same allocations: biases, Q / K norms, attention sinks, Gemma's embedding
scale, query scale and post-norms run in place; gpt-oss weighs its experts by a soft-max over the selected
logits and gathers the output rows after its last layer, whose output stays a graph output; Phi-3 projects
Q, K and V, and gate and up, through one matrix each), F32 tensors of u rows:

    inputs     inp_tokens (int32 u), inp_embd (u x hidden: allocated, never read), inp_pos (int32 u), per
               attention kind the K / V row indices (int64 u; without flash attention V is cached transposed:
               int64 u x kv_heads x head_dim) and the KQ mask (cells x u, F16 with flash attention, F32
               without), out_ids (int32 u); each where the graph first uses it, the order ggml allocates them
    embd       GET_ROWS of the token table (u x hidden)
    per layer  RMS norm (x weight in place), Q (u x heads x head_dim), V and K (u x kv_heads x head_dim) in
               that order (Gemma, gpt-oss, Llama 4: Q, K, V), Q and K through RoPE into tensors of their own
               (Llama 4's NoPE layers: Q times the attn_scale input, a new tensor; K as projected), SET_ROWS
               into the cache (a view), then
                 flash attention: FLASH_ATTN_EXT -> u x heads x head_dim
                 without:         KQ = cells x u x heads (soft-max in place), KQV = u x heads x head_dim,
                                  permuted and copied (CONT) to a new tensor
               the output projection (u x hidden), the residual add in place, RMS norm, and
                 dense:  gate and up (u x ff each), SWIGLU / GEGLU (u x ff), down (u x hidden)
                 MoE:    router logits and soft-max (u x experts, in place), argsort (int32) and its top-k
                         view, the selected weights (u x k), their sum (clamped in place) and the renormalised
                         weights, gate and up (MUL_MAT_ID, u x k x ff_e), SWIGLU, down (u x k x hidden),
                         weighted in place, the k views summed (the first ADD new, the rest in place);
                         sigmoid routers (MOE_ARCHS) pick by a biased copy and may skip the renormalising;
                         shared experts run a gated FFN after and add onto the sum in place; leading dense
                         layers run the dense FFN
               the residual add in place; the last layer first gathers its attention output and residual
               rows (GET_ROWS by out_ids)
    head       RMS norm and its weight in place on the last layer's output (graph output), the logits
               (u x vocab, graph output)

The Gated DeltaNet hybrids (Qwen3.5 / Qwen3.5-MoE / Qwen3-Next: src/models/qwen35*.cpp, qwen3next.cpp) run in
their "linear" layers the conv and recurrent states gathered from the cache (and a 0-byte gather of the other
sequences'), the mixed QKV projection concatenated after the conv state, SSM_CONV and SiLU, Q and K normed
(Qwen3-Next: repeated to the value heads; alpha and beta from one projection), the decay and beta gates,
GATED_DELTA_NET (output and new state in one tensor), the output normed and gated by SiLU(z), the output
projection; their full layers project Q with its output gate (a copy of that half, sigmoid and product in
place after the attention); a shared expert is scaled by a sigmoid gate of its own; the head gathers the
output rows after the final norm, whose result stays a graph output; Qwen3.5 positions carry 4 sections.

The MLA models (DeepSeek-V2 / V3, Kimi-K2: src/models/deepseek2.cpp, not DeepSeek Sparse Attention) run
llama.cpp's absorbed form: Q (through the q LoRA and its norm when there is one), its no-RoPE part absorbed
by wk_b, its RoPE part roped, both concatenated; the compressed KV normed and concatenated with the roped
K part into the cache row; flash attention over the latent or KQ / soft-max / KQV against a copy of the
cache's latent part transposed; wv_b and a copy out of the permuted result.

Gemma 4 (src/models/gemma4.cpp) has a builder of its own (``_gemma4_graph``): per-layer inputs, KV-shared
layers, wide global heads, K == V layers, V normed, and without flash attention a narrower V padded to the
widest before the transposed cache takes it.

Checked twice. Every allocation (size and offset) of the replay equals the allocator's own trace
(tools/alloc_trace.py's tracing build) in 22 traces of 17 of these architectures (331-1,607 allocations each;
the other seven, Mistral, Qwen2, Qwen3, Gemma 2, Mixtral, DeepSeek-V3 and Kimi-K2, share builders traced
through Llama-3.1-8B, Qwen3-30B-A3B, Gemma 3 and DeepSeek-V2-Lite; 2026-12-05). And the replay gives
llama.cpp's own CPU compute buffer for every measured configuration of these architectures (661 of 661
distinct configurations with an unquantized cache: 1K-131K cells, u = 128-2,048, flash attention on and off,
1-4 sequences, unified or not, windows full or not, one layer to full depth; within the log's 0.01 MiB
rounding; results/runs/cpu-memory-fit--*.jsonl, tests/test_llama_cpp_graph.py), the layouts the fitted formula
of ``estimator.physics.runtime`` misses included (SmolLM2-360M without flash attention at 1K cells,
Ministral-3-14B with it at 4K, Gemma-3-1B without it at 32K, Gemma 4 E2B / E4B at 131K, gpt-oss at u = 2,048,
GLM-4.5 without flash attention at 4K, Llama 4 Maverick, Qwen3.5-27B at 131K, Qwen3-Next at 8K-32K, a
two-layer DeepSeek-V2-Lite at u = 128). With a quantized KV cache one configuration of three is 2.5 % over the
replay (Qwen3-8B, q8_0, 32K cells): those stay with the formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from estimator.engines.ggml_alloc import GgmlTensor, high_water_bytes
from estimator.specs import CHUNKED, FULL, LINEAR, SLIDING, ModelSpec

# HF model types whose llama.cpp graph is built here, and the order its layers project Q, K and V in (llama's
# build_attn expands Q, then V, then K; Gemma's graphs run Q, K, V)
GRAPH_ARCHS = {
    "llama": "QVK", "mistral": "QVK", "ministral3": "QVK", "qwen2": "QVK", "qwen3": "QVK",
    "gemma2": "QKV", "gemma3_text": "QKV", "qwen3_moe": "QVK", "mixtral": "QVK", "phi3": "QVK",
    "gpt_oss": "QKV", "glm4_moe": "QVK", "dots1": "QVK", "minimax_m2": "QVK", "ernie4_5_moe": "QVK",
    "hunyuan": "QVK", "llama4_text": "QKV", "qwen3_5_text": "QVK", "qwen3_5_moe_text": "QVK",
    "qwen3_next": "QVK", "deepseek_v2": "QVK", "deepseek_v3": "QVK", "kimi_k2": "QVK",
}  # fmt: skip
# of those, the MLA ones (llama.cpp's deepseek2 build, absorbed; not DeepSeek Sparse Attention)
MLA_ARCHS = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2"})
# of those, the ones with one fused attn_qkv projection (Q, V, K its views), a fused gate+up FFN projection
# (SWIGLU of its two halves) and the layer's output added onto the residual rather than the residual onto it
FUSED_ARCHS = frozenset({"phi3"})
# of those, the MoE ones and how their router weighs the selected experts: "softmax" = soft-max over all
# experts, the top-k weights renormalised ("softmax_nonorm": not renormalised, DeepSeek-V2); "softmax_weight"
# = soft-max over the top-k logits (gpt-oss);
# "sigmoid_bias" = sigmoids, the experts picked by sigmoid + a selection bias (a new tensor), weighed by the
# sigmoids unnormalised (GLM-4.5, dots.llm1); "sigmoid_bias_norm" = the same, renormalised (MiniMax-M2,
# DeepSeek-V3, Kimi-K2); a
# shared expert runs after the routed ones, leading dense layers run a dense FFN; "sigmoid_input" = experts
# picked by their logits and weighed by sigmoids applied to the input before the experts, whose output is
# copied out of its view (Llama 4, one expert per token)
MOE_ARCHS = {
    "qwen3_moe": "softmax", "mixtral": "softmax", "gpt_oss": "softmax_weight", "glm4_moe": "sigmoid_bias",
    "dots1": "sigmoid_bias", "minimax_m2": "sigmoid_bias_norm", "ernie4_5_moe": "softmax",
    "hunyuan": "softmax", "llama4_text": "sigmoid_input", "qwen3_5_moe_text": "softmax",
    "qwen3_next": "softmax", "deepseek_v2": "softmax_nonorm", "deepseek_v3": "sigmoid_bias_norm",
    "kimi_k2": "sigmoid_bias_norm",
}  # fmt: skip
# of those, the ones whose shared expert is scaled by a sigmoid gate of its own (Qwen3.5-MoE, Qwen3-Next)
SHARED_GATE_ARCHS = frozenset({"qwen3_5_moe_text", "qwen3_next"})
# the ones whose full-attention layers run without RoPE, the query scaled by the attn_scale input (Llama 4)
NOPE_ARCHS = frozenset({"llama4_text"})
# the ones that gather the output rows after the last layer, whose output stays a graph output (gpt-oss)
GATHER_AFTER_ARCHS = frozenset({"gpt_oss"})
# the hybrids of Gated DeltaNet (linear attention) and gated full attention (Qwen3.5): the output rows are
# gathered after the final norm, whose result stays a graph output (the MTP head's input), and positions
# carry 4 sections (M-RoPE)
DELTANET_ARCHS = frozenset({"qwen3_5_text", "qwen3_5_moe_text", "qwen3_next"})
GEMMA4 = "gemma4_text"  # its own graph builder (_gemma4_graph)
# KV cache types replayed: the graphs were checked with these (a quantized cache adds what is not built here)
GRAPH_KV_DTYPES = frozenset({"f16", "bf16", "f32"})


class GraphBuilder:
    """A graph under construction, in ggml's execution order: ``leafs`` (the graph inputs, in the order the
    graph first uses them: ggml lists and allocates its leafs that way) and ``nodes``."""

    def __init__(self) -> None:
        self.leafs: list[GgmlTensor] = []
        self.nodes: list[GgmlTensor] = []
        self._inputs: dict[str, GgmlTensor] = {}

    @staticmethod
    def ext(name: str) -> GgmlTensor:
        """A tensor with storage of its own elsewhere (a weight, a cache)."""
        return GgmlTensor(name, "NONE", external=True)

    def leaf(self, name: str, nbytes: int) -> GgmlTensor:
        """The graph input ``name``, created at its first use."""
        if name not in self._inputs:
            self._inputs[name] = GgmlTensor(name, "NONE", nbytes, is_input=True)
            self.leafs.append(self._inputs[name])
        return self._inputs[name]

    def node(self, name: str, op: str, nbytes: int, *srcs: GgmlTensor, out: bool = False) -> GgmlTensor:
        t = GgmlTensor(name, op, nbytes, srcs, is_output=out)
        self.nodes.append(t)
        return t

    def view(self, name: str, op: str, src: GgmlTensor) -> GgmlTensor:
        """A view of ``src``'s memory (RESHAPE, VIEW, PERMUTE, TRANSPOSE)."""
        t = GgmlTensor(name, op, src.nbytes, (src,), view_of=src.view_of or src)
        self.nodes.append(t)
        return t

    def attend(
        self,
        il: int,
        qp: GgmlTensor,
        cache_k: GgmlTensor,
        cache_v: GgmlTensor,
        mask: GgmlTensor,
        u: int,
        heads: int,
        q: int,
        n_kv: int,
        flash_attn: bool,
    ) -> GgmlTensor:
        """Attention over the cache (q = heads x V head width, F32 rows of u tokens): FLASH_ATTN_EXT and a
        reshape, or KQ (n_kv x u x heads), soft-max in place, KQV and a copy out of its permutation."""
        if flash_attn:
            att = self.node(f"fattn-{il}", "FLASH_ATTN_EXT", 4 * u * q, qp, cache_k, cache_v, mask)
            return self.view(f"kqv_out-{il}", "RESHAPE", att)
        kq = self.node(f"kq-{il}", "MUL_MAT", 4 * n_kv * u * heads, cache_k, qp)
        kq = self.node(f"kq_soft_max-{il}", "SOFT_MAX", 4 * n_kv * u * heads, kq, mask)
        kqv = self.node(f"kqv-{il}", "MUL_MAT", 4 * u * q, cache_v, kq)
        return self.node(
            f"kqv_out-{il}", "CONT", 4 * u * q, self.view(f"kqv-{il} (permuted)", "PERMUTE", kqv)
        )

    def store(self, name: str, op: str, *srcs: GgmlTensor) -> None:
        """SET_ROWS / CPY of ``srcs[0]`` into the cache ``srcs[-1]``: a view of the cache, no memory here."""
        self.nodes.append(GgmlTensor(name, op, 0, srcs, view_of=srcs[-1]))


@dataclass(frozen=True)
class GraphShape:
    """What the reserve graph's tensor sizes depend on: widths, the FFN width and attention kind ("full" |
    "swa") of each layer, the vocabulary, the Q / K / V order, u tokens, the cells a full / windowed layer
    attends to in one stream, flash attention."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffs: tuple[int, ...]
    kinds: tuple[str, ...]
    vocab: int
    qkv_order: str
    u: int
    n_kv: int
    n_kv_swa: int
    flash_attn: bool
    # (experts, experts per token, expert FFN width, shared experts' FFN width) of a MOE_ARCHS model;
    # None: dense FFNs
    moe: tuple[int, int, int, int] | None = None
    dense: tuple[bool, ...] = ()  # a MoE model's layers that run a dense FFN
    fused: bool = False  # a FUSED_ARCHS graph
    gating: str = "softmax"  # MOE_ARCHS' value
    # layers without RoPE whose query is scaled by the attn_scale input instead (Llama 4's NoPE layers)
    nope: tuple[bool, ...] = ()
    shared_gate: bool = False  # a SHARED_GATE_ARCHS graph
    deltanet_repeat: bool = False  # Qwen3-Next's DeltaNet: Q / K repeated to the value heads, one alpha-beta
    # an MLA_ARCHS graph: (kv_lora_rank, rope width, nope width, V head width, q_lora_rank or 0, cache element
    # bytes); its attention is llama.cpp's absorbed form
    mla: tuple[int, int, int, int, int, int] | None = None
    # a DELTANET_ARCHS graph: (key heads, value heads, key head width, value head width, conv kernel,
    # sequences); its "linear" layers run Gated DeltaNet, its full ones a gated query
    deltanet: tuple[int, int, int, int, int, int] | None = None
    gather_after: bool = False  # a GATHER_AFTER_ARCHS graph


def _graph(g: GraphShape) -> tuple[list[GgmlTensor], list[GgmlTensor]]:
    """(leafs, nodes) of the reserve graph (module docstring).  Inputs are created where the graph first
    uses them: ggml lists its leafs in that order and allocates them first, in that order."""
    u, fa = g.u, g.flash_attn
    q, kv = g.heads * g.head_dim, g.kv_heads * g.head_dim
    b = GraphBuilder()
    ext, leaf, node, view = b.ext, b.leaf, b.node, b.view

    def moe_ffn(il: int, cur: GgmlTensor, w: GgmlTensor) -> GgmlTensor:
        """llama.cpp's build_moe_ffn with soft-max gating and renormalised top-k weights: router logits and
        probabilities (in place), their argsort (int32) and its top-k view, the selected weights, their sum
        (clamped in place) and the weights divided by it, the selected experts' gate and up (MUL_MAT_ID,
        n_used x ff_e per token), SWIGLU, down (n_used x hidden), weighted in place, and the n_used views
        summed (the first ADD new, the rest in place)."""
        n_exp, n_used, ff_e, ff_shared = g.moe  # type: ignore[misc]
        logits = node(f"ffn_moe_logits-{il}", "MUL_MAT", 4 * u * n_exp, w, cur)
        if g.gating == "sigmoid_input":
            return moe_ffn_weighted_input(il, cur, w, logits)
        # soft-max over all experts, sigmoids, or the router bias (gpt-oss): in place either way
        op = "SOFT_MAX" if g.gating.startswith("softmax_n") or g.gating == "softmax" else (
            "UNARY" if g.gating.startswith("sigmoid") else "ADD")  # fmt: skip
        probs = node(f"ffn_moe_probs-{il}", op, 4 * u * n_exp, logits)
        probs_r = view(f"ffn_moe_probs-{il} (reshaped)", "RESHAPE", probs)
        pick = probs
        if g.gating.startswith("sigmoid_bias"):  # probs has a view by now: the biased copy is a new tensor
            pick = node(f"ffn_moe_probs_biased-{il}", "ADD", 4 * u * n_exp, probs, w)
        argsort = node(f"ffn_moe_argsort-{il}", "ARGSORT", 4 * u * n_exp, pick)
        topk = view(f"ffn_moe_topk-{il}", "VIEW", argsort)
        weights = node(f"ffn_moe_weights-{il}", "GET_ROWS", 4 * u * n_used, probs_r, topk)
        unnormed = g.gating in ("sigmoid_bias", "softmax_nonorm")  # the selected weights used as they are
        weights_r = weights if unnormed else view(f"ffn_moe_weights-{il} (reshaped)", "RESHAPE", weights)
        if g.gating in ("softmax", "sigmoid_bias_norm"):
            total = node(f"ffn_moe_weights_sum-{il}", "SUM_ROWS", 4 * u, weights_r)
            total = node(f"ffn_moe_weights_sum_clamped-{il}", "CLAMP", 4 * u, total)
            normed = node(f"ffn_moe_weights_norm-{il}", "DIV", 4 * u * n_used, weights_r, total)
            normed_r = view(f"ffn_moe_weights_norm-{il} (reshaped)", "RESHAPE", normed)
        elif g.gating == "softmax_weight":  # soft-max over the selected logits: a new tensor (parent a view)
            normed = node(f"ffn_moe_weights_softmax-{il}", "SOFT_MAX", 4 * u * n_used, weights_r)
            normed_r = view(f"ffn_moe_weights_norm-{il} (reshaped)", "RESHAPE", normed)
        else:
            normed_r = weights
        cur_r = view(f"ffn_norm-{il} (reshaped)", "RESHAPE", cur)
        gate = node(f"ffn_moe_gate-{il}", "MUL_MAT_ID", 4 * u * n_used * ff_e, w, cur_r, topk)
        up = node(f"ffn_moe_up-{il}", "MUL_MAT_ID", 4 * u * n_used * ff_e, w, cur_r, topk)
        act = node(f"ffn_moe_swiglu-{il}", "GLU", 4 * u * n_used * ff_e, gate, up)
        down = node(f"ffn_moe_down-{il}", "MUL_MAT_ID", 4 * u * n_used * g.hidden, w, act, topk)
        weighted = node(f"ffn_moe_weighted-{il}", "MUL", 4 * u * n_used * g.hidden, down, normed_r)
        parts = [GgmlTensor(f"ffn_moe_weighted-{il} (view)", "VIEW", row, (weighted,), view_of=weighted)
                 for _ in range(n_used)]  # fmt: skip
        b.nodes.extend(parts)
        out = parts[0]
        for part in parts[1:]:
            out = node(f"ffn_moe_out-{il}", "ADD", row, out, part)
        if ff_shared:  # the shared expert, added in place onto the routed experts' sum
            gate = node(f"ffn_gate_shexp-{il}", "MUL_MAT", 4 * u * ff_shared, w, cur)
            up = node(f"ffn_up_shexp-{il}", "MUL_MAT", 4 * u * ff_shared, w, cur)
            act = node(f"ffn_swiglu_shexp-{il}", "GLU", 4 * u * ff_shared, gate, up)
            shared = node(f"ffn_shexp_out-{il}", "MUL_MAT", row, w, act)
            if g.shared_gate:  # its gate: a one-column projection, sigmoid and product in place
                sg = node(f"shared_expert_gate-{il}", "UNARY", 4 * u,
                          node(f"shared_expert_gate-{il}", "MUL_MAT", 4 * u, w, cur))  # fmt: skip
                shared = node(f"ffn_shexp_gated-{il}", "MUL", row, shared, sg)
            out = node(f"ffn_out-{il}", "ADD", row, out, shared)
        return out

    def moe_ffn_weighted_input(il: int, cur: GgmlTensor, w: GgmlTensor, logits: GgmlTensor) -> GgmlTensor:
        """Llama 4's routed experts: sigmoids of the logits (a new tensor: the argsort reads the logits too),
        the selected sigmoids weighing a repeated copy of the input (in place), the experts, their output
        copied out of its view; then the shared expert, added in place."""
        n_exp, n_used, ff_e, ff_shared = g.moe  # type: ignore[misc]
        probs = node(f"ffn_moe_probs-{il}", "UNARY", 4 * u * n_exp, logits)
        probs_r = view(f"ffn_moe_probs-{il} (reshaped)", "RESHAPE", probs)
        argsort = node(f"ffn_moe_argsort-{il}", "ARGSORT", 4 * u * n_exp, logits)
        topk = view(f"ffn_moe_topk-{il}", "VIEW", argsort)
        weights = node(f"ffn_moe_weights-{il}", "GET_ROWS", 4 * u * n_used, probs_r, topk)
        shaped = view(f"ffn_in-{il} (reshaped)", "RESHAPE", cur)
        rep = node(f"ffn_moe_repeat-{il}", "REPEAT", row * n_used, shaped)
        weighted = node(f"ffn_moe_weighted-{il}", "MUL", row * n_used, rep, weights)
        gate = node(f"ffn_moe_gate-{il}", "MUL_MAT_ID", 4 * u * n_used * ff_e, w, weighted, topk)
        up = node(f"ffn_moe_up-{il}", "MUL_MAT_ID", 4 * u * n_used * ff_e, w, weighted, topk)
        act = node(f"ffn_moe_swiglu-{il}", "GLU", 4 * u * n_used * ff_e, gate, up)
        down = node(f"ffn_moe_down-{il}", "MUL_MAT_ID", row * n_used, w, act, topk)
        out = node(f"ffn_moe_out-{il}", "CONT", row, view(f"ffn_moe_down-{il} (view)", "VIEW", down))
        gate = node(f"ffn_gate_shexp-{il}", "MUL_MAT", 4 * u * ff_shared, w, cur)
        up = node(f"ffn_up_shexp-{il}", "MUL_MAT", 4 * u * ff_shared, w, cur)
        act = node(f"ffn_swiglu_shexp-{il}", "GLU", 4 * u * ff_shared, gate, up)
        return node(f"ffn_out-{il}", "ADD", row, out, node(f"ffn_shexp_out-{il}", "MUL_MAT", row, w, act))

    def mla_attention(il: int, kind: str, n_kv: int, cur: GgmlTensor, w: GgmlTensor) -> GgmlTensor:
        """llama.cpp's absorbed MLA (deepseek2 build): Q (through the q LoRA and its norm in place when there
        is one), its no-RoPE part absorbed by wk_b (a new tensor), its RoPE part roped (new) and both
        concatenated (new); the compressed KV (its norm new, weight in place) and the roped K part
        concatenated into the cache row; flash attention over the latent (heads x rank), or KQ / soft-max in
        place / KQV against a copy of the cache's latent part transposed; wv_b and a copy out of the
        permuted result; the output projection."""
        r, rope, nope, vd, q_lora, kv_bytes = g.mla  # type: ignore[misc]
        h = g.heads
        if q_lora:
            qa = node(f"q_a-{il}", "MUL_MAT", 4 * u * q_lora, w, cur)
            qa = node(
                f"q_a_norm-{il}",
                "MUL",
                4 * u * q_lora,
                node(f"q_a_norm-{il}", "RMS_NORM", 4 * u * q_lora, qa),
                w,
            )
            qm = node(f"q-{il}", "MUL_MAT", 4 * u * h * (nope + rope), w, qa)
        else:
            qm = node(f"q-{il}", "MUL_MAT", 4 * u * h * (nope + rope), w, cur)
        qv = view(f"q-{il} (r)", "RESHAPE", qm)
        q_nope = view(f"q_nope_perm-{il}", "PERMUTE", view(f"q_nope-{il}", "VIEW", qv))
        absorbed = node(f"q_nope_absorbed-{il}", "MUL_MAT", 4 * u * h * r, w, q_nope)
        q_pe = node(
            f"q_pe-{il}", "ROPE", 4 * u * h * rope, view(f"q_pe-{il}", "VIEW", qv), leaf("inp_pos", 4 * u)
        )
        q = node(
            f"Qcur-{il}",
            "CONCAT",
            4 * u * h * (r + rope),
            view(f"q_abs_perm-{il}", "PERMUTE", absorbed),
            q_pe,
        )
        kv = node(f"kv_cmpr_pe-{il}", "MUL_MAT", 4 * u * (r + rope), w, cur)
        cmpr = node(f"kv_cmpr_norm-{il}", "RMS_NORM", 4 * u * r, view(f"kv_cmpr-{il}", "VIEW", kv))
        cmpr = view(f"Vcur-{il}", "RESHAPE", node(f"kv_cmpr-{il}", "MUL", 4 * u * r, cmpr, w))
        k_pe = node(
            f"k_pe-{il}", "ROPE", 4 * u * rope, view(f"k_pe-{il}", "VIEW", kv), leaf("inp_pos", 4 * u)
        )
        k = node(f"Kcur-{il}", "CONCAT", 4 * u * (r + rope), cmpr, k_pe)
        cache = ext(f"cache_k_l{il}")
        b.store(
            f"cache_k_l{il} (view)",
            "SET_ROWS",
            view(f"Kcur-{il} (view)", "VIEW", k),
            leaf(f"k_idxs-{kind}", 8 * u),
            cache,
        )
        qp = view(f"Qcur-{il} (permuted)", "PERMUTE", view(f"Qcur-{il} (view)", "VIEW", q))
        mask = leaf(f"kq_mask-{kind}", (2 if fa else 4) * n_kv * u)
        if fa:
            att = node(f"fattn-{il}", "FLASH_ATTN_EXT", 4 * u * h * r, qp, cache, cache, mask)
            att = node(
                f"fattn_mla-{il}", "MUL_MAT", 4 * u * h * vd, w, view(f"fattn-{il} (p)", "PERMUTE", att)
            )
        else:
            v = node(f"v_cont-{il}", "CONT", n_kv * r * kv_bytes, view(f"cache_v-{il}", "TRANSPOSE", cache))
            kq = node(f"kq-{il}", "MUL_MAT", 4 * n_kv * u * h, cache, qp)
            kq = node(f"kq_soft_max-{il}", "SOFT_MAX", 4 * n_kv * u * h, kq, mask)
            att = node(f"kqv-{il}", "MUL_MAT", 4 * u * h * r, v, kq)
            att = node(f"kqv_mla-{il}", "MUL_MAT", 4 * u * h * vd, w, att)
        att = node(f"kqv_out-{il}", "CONT", 4 * u * h * vd, view(f"kqv_mla-{il} (p)", "PERMUTE", att))
        return node(f"attn_out-{il}", "MUL_MAT", row, w, view(f"kqv_out-{il} (r)", "RESHAPE", att))

    def deltanet(il: int, cur: GgmlTensor, w: GgmlTensor) -> GgmlTensor:
        """A Gated DeltaNet layer (llama.cpp's qwen35 build of it): the conv and recurrent states gathered
        from the cache (and a 0-byte gather of the other sequences'), the mixed QKV projection concatenated
        after the conv state, the short convolution and SiLU (in place), Q and K normed (new, their parent a
        view) and scaled in place, the decay (a new tensor, softplus and scale in place) and beta (sigmoid,
        new), GATED_DELTA_NET (its output and the new state in one tensor), the output normed (new) and gated
        by SiLU of the z projection (new, multiplied in place), the output projection."""
        kh, vh, kd, vd, ck, ns = g.deltanet  # type: ignore[misc]
        k_dim, v_dim = kh * kd, vh * vd
        channels = 2 * k_dim + v_dim
        rs = leaf("rs_s_copy", 4 * ns)
        cache_r, cache_s = ext(f"cache_r_l{il}"), ext(f"cache_s_l{il}")

        def copy_into(src: GgmlTensor, cache: GgmlTensor) -> None:
            b.store(f"{cache.name} (copy)", "CPY", src, cache)

        conv_states = node(f"conv_states-{il}", "GET_ROWS", 4 * (ck - 1) * channels * ns, cache_r, rs)
        copy_into(node(f"conv_states_other-{il}", "GET_ROWS", 0, cache_r, rs), cache_r)
        conv_states = view(f"conv_states_reshaped-{il}", "RESHAPE", conv_states)
        mixed = node(f"qkv_mixed-{il}", "MUL_MAT", 4 * u * channels, w, cur)
        mixed = view(f"qkv_mixed_transposed-{il}", "TRANSPOSE", view(f"qkv_mixed-{il} (r)", "RESHAPE", mixed))
        conv_in = node(f"conv_input-{il}", "CONCAT", 4 * (u + (ck - 1) * ns) * channels, conv_states, mixed)
        copy_into(view(f"conv_state_last-{il}", "VIEW", conv_in), cache_r)
        state = node(f"state-{il}", "GET_ROWS", 4 * vh * vd * kd * ns, cache_s, rs)
        copy_into(node(f"state_other-{il}", "GET_ROWS", 0, cache_s, rs), cache_s)
        conv = node(f"conv_output-{il}", "UNARY", 4 * u * channels,
                    node(f"conv_output_raw-{il}", "SSM_CONV", 4 * u * channels, conv_in, w))  # fmt: skip
        qk = []
        for which in "qk":  # normed (new: the parent is a view) and scaled in place; Qwen3-Next repeats them
            t = node(
                f"{which}_norm-{il}", "RMS_NORM", 4 * u * k_dim, view(f"{which}_conv-{il}", "VIEW", conv)
            )
            t = node(f"{which}_conv-{il}", "SCALE", 4 * u * k_dim, t)
            if g.deltanet_repeat:  # to the value heads
                t = node(
                    f"{which}_rep-{il}", "REPEAT", 4 * u * vh * kd, view(f"{which}_r-{il}", "RESHAPE", t)
                )
            qk.append(view(f"{which}_predelta-{il}", "RESHAPE", t) if g.deltanet_repeat else t)
        qn, kn = qk
        vv = view(f"v_conv-{il}", "VIEW", conv)
        if g.deltanet_repeat:  # alpha and beta from one projection, each copied out of its view
            ba = view(f"mixed_ba-{il} (r)", "RESHAPE", node(f"mixed_ba-{il}", "MUL_MAT", 8 * u * vh, w, cur))
            alpha = node(f"a-{il} (cont)", "CONT", 4 * u * vh, view(f"a-{il}", "VIEW", ba))
            biased = node(f"alpha_biased-{il}", "ADD", 4 * u * vh, alpha, w)
            decay = node(f"a_softplus-{il}", "UNARY", 4 * u * vh, biased)
            decay = view(f"gate-{il} (r)", "RESHAPE", node(f"gate-{il}", "MUL", 4 * u * vh, decay, w))
            beta = node(f"b-{il} (cont)", "CONT", 4 * u * vh, view(f"b-{il}", "VIEW", ba))
            beta = view(f"beta-{il} (r)", "RESHAPE", node(f"beta_sigmoid-{il}", "UNARY", 4 * u * vh, beta))
        else:
            alpha = view(f"alpha-{il}", "RESHAPE", node(f"alpha-{il}", "MUL_MAT", 4 * u * vh, w, cur))
            biased = node(f"alpha_biased-{il}", "ADD", 4 * u * vh, alpha, w)
            decay = node(f"a_softplus-{il}", "UNARY", 4 * u * vh, biased)
            decay = view(f"gate-{il} (r)", "RESHAPE", node(f"gate-{il}", "MUL", 4 * u * vh, decay, w))
            beta = view(f"beta-{il}", "RESHAPE", node(f"beta-{il}", "MUL_MAT", 4 * u * vh, w, cur))
            beta = node(f"beta_sigmoid-{il}", "UNARY", 4 * u * vh, beta)
        state = view(f"state_predelta-{il}", "RESHAPE", state)
        nbytes = 4 * (u * v_dim + vh * vd * kd * ns)  # the output and the new state
        out = node(f"gdn-{il}", "GATED_DELTA_NET", nbytes, qn, kn, vv, decay, beta, state)
        copy_into(view(f"new_state-{il}", "VIEW", out), cache_s)
        attn = node(f"ssm_norm-{il}", "RMS_NORM", 4 * u * v_dim, view(f"attn_output-{il}", "VIEW", out))
        normed = node(f"ssm_norm-{il}", "MUL", 4 * u * v_dim, attn, w)
        z = view(f"z-{il} (r)", "RESHAPE", node(f"z-{il}", "MUL_MAT", 4 * u * v_dim, w, cur))
        gated = node(
            f"gated-{il}", "MUL", 4 * u * v_dim, normed, node(f"z_silu-{il}", "UNARY", 4 * u * v_dim, z)
        )
        out = node(f"linear_attn_out-{il}", "MUL_MAT", row, w, view(f"final_output-{il}", "RESHAPE", gated))
        return view(f"linear_attn_out-{il} (r)", "RESHAPE", out)

    row = 4 * u * g.hidden
    tokens = leaf("inp_tokens", 4 * u)
    leaf("inp_embd", row)
    x = node("embd", "GET_ROWS", row, ext("token_embd"), tokens)
    last = len(g.ffs) - 1
    pos_bytes = 16 * u if g.deltanet is not None and not g.deltanet_repeat else 4 * u  # M-RoPE: 4 per token
    for il, (ff, kind) in enumerate(zip(g.ffs, g.kinds, strict=True)):
        n_kv = g.n_kv_swa if kind == "swa" else g.n_kv
        w = ext(f"blk.{il}")
        norm = node(f"norm-{il}", "RMS_NORM", row, x)
        cur = node(f"attn_norm-{il}", "MUL", row, norm, w)
        if kind == "linear":
            cur = deltanet(il, cur, w)
        elif g.mla is not None:
            cur = mla_attention(il, kind, n_kv, cur, w)
        else:
            proj: dict[str, GgmlTensor] = {}
            mms: dict[str, GgmlTensor] = {}
            qkv = node(f"wqkv-{il}", "MUL_MAT", 4 * u * (q + 2 * kv), w, cur) if g.fused else None
            for which in g.qkv_order:  # the projection, then RoPE into a tensor of its own (Q and K)
                width = q if which == "Q" else kv
                if qkv is not None:
                    shaped = view(f"{which}cur-{il}", "VIEW", qkv)
                else:
                    gated_q = (
                        g.deltanet is not None and which == "Q"
                    )  # Q and its output gate in one projection
                    mm = node(f"{which}cur-{il}", "MUL_MAT", 4 * u * width * (2 if gated_q else 1), w, cur)
                    mms[which] = mm
                    shaped = view(f"{which}cur-{il} (reshaped)", "VIEW" if gated_q else "RESHAPE", mm)
                if which == "V" or (g.nope and g.nope[il] and which == "K"):
                    proj[which] = shaped
                elif g.nope and g.nope[il]:  # Q scaled by the attention-temperature input: a new tensor
                    proj[which] = node(
                        f"Qcur-{il}", "MUL", 4 * u * width, shaped, leaf("inp_attn_scale", 4 * u)
                    )
                else:
                    # (a Q / K norm first: the same one new tensor, RoPE then in place)
                    proj[which] = node(
                        f"{which}cur-{il}", "ROPE", 4 * u * width, shaped, leaf("inp_pos", pos_bytes)
                    )
            cache_k, cache_v = ext(f"cache_k_l{il}"), ext(f"cache_v_l{il}")
            k_idxs = leaf(f"k_idxs-{kind}", 8 * u)
            b.store(
                f"cache_k_l{il} (view)",
                "SET_ROWS",
                view(f"Kcur-{il} (view)", "VIEW", proj["K"]),
                k_idxs,
                cache_k,
            )
            v_idxs = leaf(f"v_idxs-{kind}", 8 * u if fa else 8 * u * kv)  # without FA V is cached transposed
            if fa:
                b.store(
                    f"cache_v_l{il} (view)",
                    "SET_ROWS",
                    view(f"Vcur-{il} (view)", "VIEW", proj["V"]),
                    v_idxs,
                    cache_v,
                )
            else:
                vt = view(
                    f"Vcur-{il} (reshaped)", "RESHAPE", view(f"Vcur-{il} (reshaped)", "RESHAPE", proj["V"])
                )
                b.store(f"cache_v_l{il} (view)", "SET_ROWS", vt, v_idxs, cache_v)
            qp = view(f"Qcur-{il} (permuted)", "PERMUTE", view(f"Qcur-{il} (view)", "VIEW", proj["Q"]))
            mask = leaf(f"kq_mask-{kind}", (2 if fa else 4) * n_kv * u)  # F16 with flash attention, else F32
            att = b.attend(il, qp, cache_k, cache_v, mask, u, g.heads, q, n_kv, fa)
            if (
                g.deltanet is not None
            ):  # the output gate: a copy of Q's gate half, sigmoid and product in place
                gate = view(f"Qcur_full-{il} (view)", "VIEW", mms["Q"])
                gate = node(
                    f"gate_sigmoid-{il}", "UNARY", 4 * u * q, node(f"gate-{il}", "CONT", 4 * u * q, gate)
                )
                att = node(f"attn_gated-{il}", "MUL", 4 * u * q, att, gate)
            cur = node(f"attn_out-{il}", "MUL_MAT", row, w, att)
        res = x
        if il == last and not g.gather_after and g.deltanet is None:  # the output rows only (all of them)
            out_ids = leaf("out_ids", 4 * u)
            cur = node(f"attn_out_rows-{il}", "GET_ROWS", row, cur, out_ids)
            res = node(f"inp_rows-{il}", "GET_ROWS", row, res, out_ids)
        ffn_inp = node(f"ffn_inp-{il}", "ADD", row, cur, res)
        norm = node(f"norm-{il}", "RMS_NORM", row, ffn_inp)
        cur = node(f"ffn_norm-{il}", "MUL", row, norm, w)
        if g.moe is not None and not g.dense[il]:
            down = moe_ffn(il, cur, w)
        elif g.fused:  # gate and up in one projection: SWIGLU of its halves
            up = node(f"ffn_up-{il}", "MUL_MAT", 8 * u * ff, w, cur)
            down = node(f"ffn_out-{il}", "MUL_MAT", row, w, node(f"ffn_act-{il}", "GLU", 4 * u * ff, up))
        else:
            gate = node(f"ffn_gate-{il}", "MUL_MAT", 4 * u * ff, w, cur)
            up = node(f"ffn_up-{il}", "MUL_MAT", 4 * u * ff, w, cur)
            act = node(f"ffn_act-{il}", "GLU", 4 * u * ff, gate, up)
            down = node(f"ffn_out-{il}", "MUL_MAT", row, w, act)
        # the ADD runs in place on its first operand: the FFN output (llama) or the residual (phi3)
        x = node(f"l_out-{il}", "ADD", row, *((ffn_inp, down) if g.fused else (down, ffn_inp)))
    if g.gather_after:  # the last layer's output is a graph output; its output rows are gathered from it
        x.is_output = True
        x = node("out_rows", "GET_ROWS", row, x, leaf("out_ids", 4 * u))
    norm = node("norm", "RMS_NORM", row, x)
    result = node("result_norm", "MUL", row, norm, ext("output_norm"), out=True)
    if g.deltanet is not None:  # the normed output is the MTP head's input: the output rows gathered from it
        result = node("result_rows", "GET_ROWS", row, result, leaf("out_ids", 4 * u), out=True)
    node("result_output", "MUL_MAT", 4 * u * g.vocab, ext("output"), result, out=True)
    return b.leafs, b.nodes


@dataclass(frozen=True)
class Gemma4Layer:
    """One Gemma 4 layer of the reserve graph: attention kind ("full" | "swa"), head width and KV heads (a
    full layer's own: global_head_dim / global_n_kv_heads), whether it reuses an earlier layer's cache
    (KV-shared), whether V is the K projection (attention_k_eq_v) and its FFN width."""

    kind: str
    head_dim: int
    kv_heads: int
    shared: bool
    k_eq_v: bool
    ff: int


@dataclass(frozen=True)
class Gemma4Shape:
    """What Gemma 4's reserve graph depends on (src/models/gemma4.cpp): the layers, hidden width, query heads,
    per-layer input width (0: none), vocabulary, u, the full / windowed cells of one stream, flash
    attention."""

    layers: tuple[Gemma4Layer, ...]
    hidden: int
    heads: int
    per_layer: int
    vocab: int
    v_width: int  # the widest V (kv_heads x head_dim) of a layer with a cache: the transposed V cache's
    u: int
    n_kv: int
    n_kv_swa: int
    flash_attn: bool


def _gemma4_graph(g: Gemma4Shape) -> tuple[list[GgmlTensor], list[GgmlTensor]]:
    """(leafs, nodes) of Gemma 4's reserve graph with flash attention: the token and per-layer embeddings
    (scaled in place), per layer Q, K and V each normed after a reshape (a new tensor: the parent is a view;
    weights, RoPE and the query scale in place; V normed without a weight; a K == V layer normalises one
    projection twice; a KV-shared layer projects Q only and reads an earlier cache), flash attention, the
    output projection with its post-norm and residual add in place, the GEGLU FFN with its post-norm and add,
    the per-layer input (gate, GELU, the per-layer slice of a projection of the scaled embeddings built at
    the first layer, proj, post-norm, add) and the layer scale in place; the head norms the last layer's
    output (a graph output), gathers the output rows (another) and computes the logits, soft-capped in
    place."""
    u, L = g.u, len(g.layers)
    b = GraphBuilder()
    ext, leaf, node, view = b.ext, b.leaf, b.node, b.view

    row = 4 * u * g.hidden
    per_all = 4 * u * g.per_layer * L
    tokens = leaf("inp_tokens", 4 * u)
    leaf("inp_embd", row)
    embd = node("embd", "GET_ROWS", row, ext("token_embd"), tokens)
    selected = None
    if g.per_layer:
        ids = leaf("leaf_4", 4 * u)  # the token ids again, for the per-layer table
        looked = node("per_layer_rows", "GET_ROWS", per_all, ext("per_layer_token_embd"), ids)
        selected = node("inp_per_layer_selected", "SCALE", per_all, view("(reshaped)", "RESHAPE", looked))
    x = scaled = node("inp_scaled", "SCALE", row, embd)
    per_layer_all = None
    caches: dict[str, tuple[GgmlTensor, GgmlTensor]] = {}
    for il, ly in enumerate(g.layers):
        w = ext(f"blk.{il}")
        q, kv = g.heads * ly.head_dim, ly.kv_heads * ly.head_dim
        cur = node(f"attn_norm-{il}", "MUL", row, node(f"norm-{il}", "RMS_NORM", row, x), w)

        def normed(name: str, mm: GgmlTensor, nbytes: int, w: GgmlTensor | None) -> GgmlTensor:
            """RMS norm after a reshape (a new tensor: the parent is a view), its weight in place."""
            t = node(name, "RMS_NORM", nbytes, view(f"{name} (reshaped)", "RESHAPE", mm))
            return node(name, "MUL", nbytes, t, w) if w is not None else t

        pos = leaf("inp_pos", 4 * u)
        qm = node(f"Qcur-{il}", "MUL_MAT", 4 * u * q, w, cur)
        qr = node(f"Qcur_pos-{il}", "ROPE", 4 * u * q, normed(f"Qcur-{il}", qm, 4 * u * q, w), pos)
        if ly.shared:
            cache_k, cache_v = caches[ly.kind]
        else:
            cache_k, cache_v = ext(f"cache_k_l{il}"), ext(f"cache_v_l{il}")
            caches[ly.kind] = (cache_k, cache_v)
            km = node(f"Kcur-{il}", "MUL_MAT", 4 * u * kv, w, cur)
            kr = node(f"Kcur_pos-{il}", "ROPE", 4 * u * kv, normed(f"Kcur-{il}", km, 4 * u * kv, w), pos)
            vm = km if ly.k_eq_v else node(f"Vcur-{il}", "MUL_MAT", 4 * u * kv, w, cur)
            vn = normed(f"Vcur_normed-{il}", vm, 4 * u * kv, None)
            kview = view(f"Kcur_pos-{il} (view)", "VIEW", kr)
            b.store(f"cache_k_l{il} (view)", "SET_ROWS", kview, leaf(f"k_idxs-{ly.kind}", 8 * u), cache_k)
            if g.flash_attn:
                vview = view(f"Vcur_normed-{il} (view)", "VIEW", vn)
                b.store(f"cache_v_l{il} (view)", "SET_ROWS", vview, leaf(f"v_idxs-{ly.kind}", 8 * u), cache_v)
            else:  # V cached transposed at the widest layer's width: a narrower V is padded (a new tensor)
                vt = view(f"Vcur_normed-{il} (reshaped)", "RESHAPE", vn)
                if kv < g.v_width:
                    vt = node(f"Vcur_padded-{il}", "PAD", 4 * u * g.v_width, vt)
                vt = view(f"Vcur-{il} (reshaped)", "RESHAPE", vt)
                b.store(
                    f"cache_v_l{il} (view)",
                    "SET_ROWS",
                    vt,
                    leaf(f"v_idxs-{ly.kind}", 8 * u * g.v_width),
                    cache_v,
                )
        qp = view(f"Qcur_pos-{il} (permuted)", "PERMUTE", view(f"Qcur_pos-{il} (view)", "VIEW", qr))
        n_kv = g.n_kv_swa if ly.kind == "swa" else g.n_kv
        mask = leaf(f"kq_mask-{ly.kind}", (2 if g.flash_attn else 4) * n_kv * u)
        att = b.attend(il, qp, cache_k, cache_v, mask, u, g.heads, q, n_kv, g.flash_attn)
        att = node(f"attn_out-{il}", "MUL_MAT", row, w, att)
        att = node(f"attn_post_norm-{il}", "MUL", row, node(f"norm-{il}", "RMS_NORM", row, att), w)
        attn_out = node(f"attn_out-{il}", "ADD", row, att, x)
        cur = node(f"ffn_norm-{il}", "MUL", row, node(f"norm-{il}", "RMS_NORM", row, attn_out), w)
        gate = node(f"ffn_gate-{il}", "MUL_MAT", 4 * u * ly.ff, w, cur)
        up = node(f"ffn_up-{il}", "MUL_MAT", 4 * u * ly.ff, w, cur)
        act = node(f"ffn_geglu-{il}", "GLU", 4 * u * ly.ff, gate, up)
        down = node(f"ffn_out-{il}", "MUL_MAT", row, w, act)
        down = node(f"ffn_post_norm-{il}", "MUL", row, node(f"norm-{il}", "RMS_NORM", row, down), w)
        pe_in = node(f"pe_in-{il}", "ADD", row, down, attn_out)
        if g.per_layer:
            gated = node(f"gelu-{il}", "UNARY", 4 * u * g.per_layer,
                         node(f"inp_gate-{il}", "MUL_MAT", 4 * u * g.per_layer, w, pe_in))  # fmt: skip
            if per_layer_all is None:  # the per-layer projection of the scaled embeddings, at first use
                pm = node("per_layer_model_proj", "SCALE", per_all,
                          node("per_layer_model_proj", "MUL_MAT", per_all, ext("proj"), scaled))  # fmt: skip
                pm = node("norm", "RMS_NORM", per_all, view("(reshaped)", "RESHAPE", pm))
                pm = node("per_layer_proj", "MUL", per_all, pm, ext("norm_w"))
                pm = node("per_layer_sum", "ADD", per_all, pm, selected)
                pm = node("inp_per_layer", "SCALE", per_all, pm)
                per_layer_all = node("inp_per_layer (cont)", "CONT", per_all,
                                     view("inp_per_layer (permuted)", "PERMUTE", pm))  # fmt: skip
            gated = node(f"per_layer_in-{il}", "MUL", 4 * u * g.per_layer, gated,
                         view(f"inp_per_layer-{il}", "VIEW", per_layer_all))  # fmt: skip
            out = node(f"proj-{il}", "MUL_MAT", row, w, gated)
            out = node(f"per_layer_embd_out-{il}", "MUL", row, node(f"norm-{il}", "RMS_NORM", row, out), w)
            pe_in = node(f"pe_out-{il}", "ADD", row, pe_in, out)
        x = node(f"l_out-{il}", "MUL", row, pe_in, w)  # the layer output scale
    h = node("h_nextn", "MUL", row, node("norm", "RMS_NORM", row, x), ext("output_norm"), out=True)
    rows = node("result_norm", "GET_ROWS", row, h, leaf("out_ids", 4 * u), out=True)
    logits = node("logits", "MUL_MAT", 4 * u * g.vocab, ext("output"), rows)
    logits = node("logits_scaled", "SCALE", 4 * u * g.vocab, logits)
    logits = node("logits_tanh", "UNARY", 4 * u * g.vocab, logits)
    node("result_output", "SCALE", 4 * u * g.vocab, logits, out=True)
    return b.leafs, b.nodes


def reserve_graph(shape: GraphShape | Gemma4Shape) -> tuple[list[GgmlTensor], list[GgmlTensor]]:
    """(leafs, nodes) of the reserve graph of ``shape`` (a fresh graph: a replay leaves state in it)."""
    return _gemma4_graph(shape) if isinstance(shape, Gemma4Shape) else _graph(shape)


@lru_cache(maxsize=4096)
def replayed_bytes(shape: GraphShape | Gemma4Shape) -> int:
    """llama.cpp's CPU compute buffer (bytes) for ``shape`` (``graph_shape``): the allocator's high-water
    mark over the reserve graph, cached per shape."""
    return high_water_bytes(*reserve_graph(shape))


def replayable(model: ModelSpec, kinds: set[str], kv_dtype: str) -> bool:
    """Whether this module builds ``model``'s graph: a model of GRAPH_ARCHS whose layers run full or
    sliding-window attention in llama.cpp (``kinds``: the engine's layer kinds), dense or a MOE_ARCHS MoE,
    or a dense Gemma 4, with a GRAPH_KV_DTYPES cache."""
    if kv_dtype not in GRAPH_KV_DTYPES or not kinds <= {FULL, SLIDING, CHUNKED, LINEAR}:
        return False
    if model.architecture == GEMMA4:
        return model.moe is None
    if model.architecture in DELTANET_ARCHS:
        st = model.state
        moe = model.moe
        return (
            (moe is None) == (model.architecture not in MOE_ARCHS)
            and (moe is None or (moe.n_experts_used > 1 and not moe.latent_size))
            and st is not None and model.attn_output_gate and kinds <= {FULL, LINEAR}
            and bool(st.n_key_heads and st.n_value_heads and st.key_head_dim and st.value_head_dim)
        )  # fmt: skip
    moe = model.moe
    return (
        model.architecture in GRAPH_ARCHS
        and (moe is None) == (model.architecture not in MOE_ARCHS)
        and (
            moe is None
            or (
                not moe.latent_size
                and (moe.n_experts_used > 1) != (MOE_ARCHS.get(model.architecture) == "sigmoid_input")
            )
        )
        and (model.mla is None) == (model.architecture not in MLA_ARCHS)
        and (model.mla is None or not model.mla.index_n_heads)
        and LINEAR not in kinds
        and model.state is None
        and model.ffn_gated
        and not model.attn_output_gate
        and not model.per_layer_input
        and not model.n_kv_shared_layers
        and model.global_head_dim is None
    )


def graph_shape(
    model: ModelSpec,
    layer_kinds: tuple[str, ...],
    u: int,
    n_kv: int,
    n_kv_swa: int,
    flash_attn: bool,
    n_seq: int = 1,
    kv_bytes: int = 2,
) -> GraphShape | Gemma4Shape:
    """What llama.cpp's CPU reserve graph depends on, the shape ``reserve_graph`` builds and
    ``replayed_bytes`` replays: ``model`` (``replayable``; ``layer_kinds`` the engine's kind of each layer)
    with micro-batches of ``u`` tokens attending to ``n_kv`` cells of one stream in a full-attention layer and
    ``n_kv_swa`` in a windowed one, ``n_seq`` sequences, a cache of ``kv_bytes`` per element."""
    if model.architecture == GEMMA4:
        return _gemma4_shape(model, layer_kinds, u, n_kv, n_kv_swa, flash_attn)
    moe = model.moe
    shape = GraphShape(
        hidden=model.hidden_size,
        heads=model.n_heads,
        kv_heads=model.n_kv_heads,
        head_dim=model.head_dim,
        ffs=tuple(model.ffn_width(i) for i in range(model.n_layers)),
        kinds=tuple({FULL: "full", LINEAR: "linear"}.get(k, "swa") for k in layer_kinds),  # swa: windowed
        vocab=model.vocab_size,
        qkv_order=GRAPH_ARCHS[model.architecture],
        u=int(u),
        n_kv=int(n_kv),
        n_kv_swa=int(n_kv_swa),
        flash_attn=bool(flash_attn),
        moe=None
        if moe is None
        else (
            moe.n_experts,
            moe.n_experts_used,
            moe.expert_ff,
            moe.n_shared_experts * moe.shared_ff,
        ),  # fmt: skip
        dense=tuple(moe is not None and i in moe.dense_layers for i in range(model.n_layers)),
        fused=model.architecture in FUSED_ARCHS,
        gating=MOE_ARCHS.get(model.architecture, "softmax"),
        gather_after=model.architecture in GATHER_AFTER_ARCHS,
        nope=tuple(k == FULL for k in layer_kinds) if model.architecture in NOPE_ARCHS else (),
        shared_gate=model.architecture in SHARED_GATE_ARCHS,
        deltanet_repeat=model.architecture == "qwen3_next",
        mla=None
        if model.mla is None
        else (
            model.mla.kv_lora_rank,
            model.mla.qk_rope_head_dim,
            model.mla.qk_nope_head_dim,
            model.mla.v_head_dim,
            model.mla.q_lora_rank or 0,
            int(kv_bytes),
        ),  # fmt: skip
        deltanet=None
        if model.architecture not in DELTANET_ARCHS or model.state is None
        else (
            model.state.n_key_heads,
            model.state.n_value_heads,
            model.state.key_head_dim,
            model.state.value_head_dim,
            model.state.conv_kernel,
            int(n_seq),
        ),  # fmt: skip
    )
    return shape


def _gemma4_shape(
    model: ModelSpec, layer_kinds: tuple[str, ...], u: int, n_kv: int, n_kv_swa: int, flash_attn: bool
) -> Gemma4Shape:
    layers = []
    for il, k in enumerate(layer_kinds):
        wide = k == FULL and bool(model.global_head_dim)
        layers.append(Gemma4Layer(
            kind="swa" if k == SLIDING else "full",
            head_dim=model.global_head_dim if wide else model.head_dim,
            kv_heads=(model.global_n_kv_heads or model.n_kv_heads) if wide else model.n_kv_heads,
            shared=model.kv_shared(il),
            k_eq_v=model.k_eq_v and k == FULL,
            ff=model.ffn_width(il),
        ))  # fmt: skip
    return Gemma4Shape(
        layers=tuple(layers), hidden=model.hidden_size, heads=model.n_heads, per_layer=model.per_layer_input,
        vocab=model.vocab_size, v_width=max(x.kv_heads * x.head_dim for x in layers if not x.shared),
        u=int(u), n_kv=int(n_kv), n_kv_swa=int(n_kv_swa), flash_attn=bool(flash_attn),
    )  # fmt: skip
