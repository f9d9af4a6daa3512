"""Weight inventory and bytes per quant.

``tensor_inventory(model)`` lists the text decoder's tensors as llama.cpp names them (one row per tensor:
name, class, layer, n_elements, row length = ne[0] = input features, group, 3-D, shape in numpy order), in
block order.  It is also what ``harness.synth`` writes into its synthetic GGUF files, so llama.cpp loading
those files checks it tensor by tensor (names, shapes, nothing missing or extra).  Shapes per layer kind:

* attention (full / sliding / chunked): q = hidden x (heads*head_dim, x2 with an output gate), k and v =
  hidden x (kv_heads*head_dim) (v absent on K==V layers; Gemma 4 full layers use global_head_dim /
  global_n_kv_heads), o = (heads*head_dim) x hidden; phi3 (Phi-3, Phi-4) stores q, k, v as one attn_qkv
  = hidden x (q + 2 kv) and gate / up as one ffn_up of 2 x ff rows (GLM-4-0414 the latter too), as
  llama.cpp's converter writes them;
  MLA: q_a hidden x q_lora, q_b q_lora x heads*(nope+rope) (or q hidden x heads*(nope+rope)), kv_a_mqa
  hidden x (kv_lora + rope), kv_b split as current GGUFs store it: k_b [nope, kv_lora, heads] and v_b
  [kv_lora, v, heads] (3-D), o heads*v x hidden; DSA (DeepSeek-V3.2, GLM-5) adds the lightning indexer:
  k_norm (weight and bias, index_head_dim), proj hidden x index_n_heads, attn_k hidden x index_head_dim,
  attn_q_b q_lora x index_n_heads*index_head_dim; Gemma 2/3/4 and GLM-4-0414 add post_attention_norm and
  post_ffw_norm (hidden, F32) per layer; Gemma 4 MoE layers hold the experts' gate and up in one
  ffn_gate_up_exps, the dense MLP beside them as plain ffn_*, and small F32 tensors (rope_freqs, one
  layer_output_scale per layer, the router's input scale, the per-expert output scale, three norms);
* Gated DeltaNet (linear), as current converters write it: attn_qkv hidden x (2*nk*dk + nv*dv) (an
  attn_v-like tensor for the quantizer: it counts among the attn_v layers and takes their promotions),
  attn_gate hidden x nv*dv, beta / alpha hidden x 2*nv (Qwen3-Next: one ssm_ba; Qwen3.5: ssm_beta and
  ssm_alpha), conv (2*nk*dk + nv*dv) x kernel (F32), dt bias and A (nv each, F32), norm dv, out nv*dv x
  hidden; Qwen3-Next / Qwen3.5 MoE layers add the shared expert's gate ffn_gate_inp_shexp (hidden, F32);
  Mamba2: in_proj hidden x (2*d_inner + 2*groups*state + heads), conv (d_inner + 2*groups*state) x kernel
  with its bias, dt bias, A and D (heads each, F32), the grouped norm, out d_inner x hidden;
* FFN: gated (gate, up: hidden x ff; down: ff x hidden) or ungated (up, down); MoE: router hidden x
  n_experts (F32; the sigmoid routers of GLM-4.5 / GLM-5, MiniMax-M2, Nemotron-H, DeepSeek-V3 / V3.2 and
  Kimi-K2 add their score-correction bias exp_probs_b, n_experts F32: 59 KB of V3), routed experts n_experts x
  (gate, up, down) of expert_ff (on the latent width for latent MoE, plus the hidden<->latent projections),
  shared experts of n_shared*shared_ff; gpt-oss adds the router's and each expert's biases;
* token_embd vocab x hidden, output vocab x hidden unless tied, 1-D norms (and q/k norms, biases); Cohere's
  parallel blocks (attention and FFN on the same normed input) have no FFN norm.

Nemotron-H layers are either Mamba, attention or FFN (from hybrid_override_pattern), so FFN weights sit on the
NONE layers only.  MTP layers and vision towers are not counted (as in the reference's computed params).

``weight_breakdown(model, quant)``: bytes = sum over tensors of ``row_bytes(type_for(...), n_elements)``; with
a GGUF (``model.gguf_tensors``) the exact tensor sizes of the file are summed instead.  Many layers hold
identical tensors, so the sum runs over groups of equal (class, shape) tensors (``_plan``, cached per model):
one type and one byte count per group, except for the layer-dependent attn_v / ffn_down rules, typed per
layer (a catalog recipe's per-layer types of a group are cached, ``_group_types``: models of one structure
share them) and summed per distinct type.  The result is the same as summing tensor by tensor (about 0.3 ms
per model and quant instead of 3).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from functools import lru_cache
from typing import NamedTuple

from estimator.physics.quant import (
    ALWAYS_F32,
    COUNTED_CATEGORIES,
    TYPE_SIZES,
    _llama_type,
    as_listed,
    canonical_type,
    catalog_quant,
    category,
    get_quant,
    type_for,
)
from estimator.specs import FULL, LINEAR, MAMBA, NONE, ModelSpec, QuantSpec


class Tensor(NamedTuple):
    """One weight tensor.  group: embd | output | dense | routed | shared | norm.  is_3d: stored as a 3-D
    tensor (merged routed experts, MLA attn_k_b / attn_v_b): llama.cpp's MXFP4_MOE recipe makes it MXFP4.
    shape: numpy order, outermost first (out_features, in_features; experts x out x in), as a converter
    writes it; n_elements = prod(shape), row_len = shape[-1] (ggml ne[0]).  Build it with ``_t``."""

    name: str
    tclass: str
    layer: int  # -1 for non-layer tensors
    n_elements: int
    row_len: int
    group: str
    is_3d: bool = False
    shape: tuple[int, ...] = ()


def _t(name: str, tclass: str, layer: int, shape: tuple[int, ...], group: str, is_3d: bool = False) -> Tensor:
    """A Tensor of ``shape`` (numpy order): its element count and row length follow from the shape."""
    n = 1
    for d in shape:
        n *= d
    return Tensor(name, tclass, layer, n, shape[-1], group, is_3d, tuple(shape))


class WeightBreakdown(NamedTuple):
    """Weight bytes of one model in one format (bytes; params are element counts).

    active_bytes_per_token = total - token_embd (a decode step reads one embedding row; kept when the
    embedding is tied, since it is also the output head) - per_layer_embd (Gemma 4's per-layer token table:
    one row per token, never the head) - routed_expert_bytes * (1 - n_experts_used / n_experts).
    """

    quant: str
    total_bytes: int
    by_class_bytes: dict[str, int]
    by_type_bytes: dict[str, int]
    routed_expert_bytes: int
    shared_expert_bytes: int
    dense_bytes: int  # everything except routed experts
    token_embd_bytes: int
    output_bytes: int
    n_params_total: int
    n_params_active: int
    active_bytes_per_token: int
    per_layer_bytes: tuple[int, ...]  # bytes of each block (routed experts included)
    per_layer_routed_bytes: tuple[int, ...]
    exact: bool  # True when summed from a GGUF file's tensors
    # bytes of the matmul weights one token reads, by storage type: every 2-D matrix (routed experts x
    # n_experts_used / n_experts), without 1-D tensors and the embedding lookup (unless tied: then it is the
    # output head); what estimator.physics.support splits between device and host
    matmul_bytes_by_type: dict[str, int] = {}
    # the per-layer token table (Gemma 4 E2B / E4B per_layer_token_embd): a lookup like token_embd, input
    # layer (in host RAM where the engine keeps the embedding there), in total_bytes
    per_layer_embd_bytes: int = 0

    @property
    def lookup_bytes(self) -> int:
        """The input layer's token tables (token_embd and Gemma 4's per-layer table): looked up a row per
        token, kept in host RAM where the engine keeps the embedding there."""
        return self.token_embd_bytes + self.per_layer_embd_bytes


# Architectures whose GGUF fuses q/k/v into attn_qkv and gate/up into ffn_up (llama.cpp phi3: Phi-3, Phi-4).
FUSED_QKV_ARCHS = ("phi3",)
# gate and up fused in one ffn_up of 2 x ff rows (mlp.gate_up_proj): Phi-3 / Phi-4, GLM-4-0414
_FUSED_FFN_ARCHS = ("phi3", "glm4")
_SHARED_GATE_ARCHS = ("qwen3_next", "qwen3_5", "qwen2_moe")
# attention and FFN read the same normed input (Cohere's parallel block): one norm per layer
_PARALLEL_BLOCK_ARCHS = ("cohere",)
# routers with a score-correction bias (n_experts F32) that llama.cpp loads as exp_probs_b (dots1:
# DeepSeek-V3's router, transformers models/dots1/modular_dots1.py)
_EXP_PROBS_ARCHS = (
    "glm4_moe", "nemotron_h", "minimax_m2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa", "dots1"
)  # fmt: skip
# (Llama 4's QK norm is an L2 norm without weights: no tensors)
_QK_NORM_ARCHS = ("qwen3", "gemma3", "gemma4", "hunyuan", "olmo2", "minimax_m2", "qwen3_5", "dots1")
# Gemma 2/3/4 also normalise after attention and after the FFN (post_attention_norm, post_ffw_norm, F32).
_SANDWICH_NORM_ARCHS = ("gemma2", "gemma3", "gemma4")
# GLM-4-0414 (glm4) too, next to its ffn_norm; not GLM-4.5 (glm4_moe), hence the exact name


def _sandwich(m: ModelSpec) -> bool:
    return m.architecture.startswith(_SANDWICH_NORM_ARCHS) or m.architecture == "glm4"
# the FFN's norm is stored as post_attention_norm (no ffn_norm): gpt-oss and GLM-4.5 write it with the
# attention's tensors, the Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5) on every layer
_POST_ATTN_NORM_ARCHS = ("gpt_oss", "glm4_moe")
_GDN_ARCHS = ("qwen3_next", "qwen3_5")


def _attn(m: ModelSpec, i: int, kind: str) -> list[Tensor]:
    h, b = m.hidden_size, f"blk.{i}."
    out: list[Tensor] = []
    if m.mla is not None:
        a = m.mla
        qk_nope = a.qk_nope_head_dim
        qk = qk_nope + a.qk_rope_head_dim
        if a.q_lora_rank:
            out += [
                _t(b + "attn_q_a.weight", "other", i, (a.q_lora_rank, h), "dense"),
                _t(b + "attn_q_a_norm.weight", "norm", i, (a.q_lora_rank,), "norm"),
                _t(b + "attn_q_b.weight", "other", i, (m.n_heads * qk, a.q_lora_rank), "dense"),
            ]
        else:
            out.append(_t(b + "attn_q.weight", "attn_q", i, (m.n_heads * qk, h), "dense"))
        # kv_b as current llama.cpp GGUFs store it (convert_hf_to_gguf splits it for MLA absorption):
        # attn_k_b [nope, kv_lora, heads] (rows of qk_nope elements) and attn_v_b [kv_lora, v, heads];
        # neither is an attn_v-like tensor for the quantizer (category OTHER: default type, then the
        # row-length fallback, e.g. q4_K -> q5_0 for 128-element rows).
        out += [
            _t(b + "attn_kv_a_mqa.weight", "other", i, (a.kv_lora_rank + a.qk_rope_head_dim, h), "dense"),
            _t(b + "attn_kv_a_norm.weight", "norm", i, (a.kv_lora_rank,), "norm"),
            _t(b + "attn_k_b.weight", "other", i, (m.n_heads, a.kv_lora_rank, qk_nope), "dense", True),
            _t(b + "attn_v_b.weight", "other", i, (m.n_heads, a.v_head_dim, a.kv_lora_rank), "dense", True),
            _t(b + "attn_output.weight", "attn_output", i, (h, m.n_heads * a.v_head_dim), "dense"),
        ]
        if a.index_n_heads:  # the DSA lightning indexer (its attn_k is an attn_k tensor for the quantizer)
            nih, ihd = a.index_n_heads, a.index_head_dim
            out += [
                _t(b + "indexer.k_norm.weight", "norm", i, (ihd,), "norm"),
                _t(b + "indexer.k_norm.bias", "bias", i, (ihd,), "norm"),
                _t(b + "indexer.proj.weight", "other", i, (nih, h), "dense"),
                _t(b + "indexer.attn_k.weight", "attn_k", i, (ihd, h), "dense"),
                _t(b + "indexer.attn_q_b.weight", "other", i, (nih * ihd, a.q_lora_rank or h), "dense"),
            ]
        return out
    hd, kvh = m.head_dim, m.n_kv_heads
    if kind == FULL and m.global_head_dim:
        hd, kvh = m.global_head_dim, m.global_n_kv_heads or kvh
    qw = m.n_heads * hd * (2 if m.attn_output_gate else 1)
    shared = m.kv_shared(i)  # K / V come from an earlier layer: no K / V projections, no k norm
    if m.architecture in FUSED_QKV_ARCHS:  # one attn_qkv matrix (an attn_v-like tensor for the quantizer)
        out.append(_t(b + "attn_qkv.weight", "attn_qkv", i, (qw + 2 * kvh * hd, h), "dense"))
    else:
        out.append(_t(b + "attn_q.weight", "attn_q", i, (qw, h), "dense"))
        if not shared:
            out.append(_t(b + "attn_k.weight", "attn_k", i, (kvh * hd, h), "dense"))
    if not (m.k_eq_v and kind == FULL) and m.architecture not in FUSED_QKV_ARCHS and not shared:
        out.append(_t(b + "attn_v.weight", "attn_v", i, (kvh * hd, h), "dense"))
    if m.qkv_bias:
        out += [
            _t(b + "attn_q.bias", "bias", i, (m.n_heads * hd,), "norm"),
            _t(b + "attn_k.bias", "bias", i, (kvh * hd,), "norm"),
            _t(b + "attn_v.bias", "bias", i, (kvh * hd,), "norm"),
        ]
    if m.architecture.startswith(_QK_NORM_ARCHS):
        # MiniMax-M2 normalises all query heads together and all key heads together
        qn, kn = (m.n_heads * hd, kvh * hd) if m.architecture == "minimax_m2" else (hd, hd)
        out.append(_t(b + "attn_q_norm.weight", "norm", i, (qn,), "norm"))
        if not shared:
            out.append(_t(b + "attn_k_norm.weight", "norm", i, (kn,), "norm"))
    out.append(_t(b + "attn_output.weight", "attn_output", i, (h, m.n_heads * hd), "dense"))
    if m.architecture == "gpt_oss":  # the output projection's bias (llama.cpp wo_b) and attention sinks
        out.append(_t(b + "attn_output.bias", "bias", i, (h,), "norm"))
        out.append(_t(b + "attn_sinks.weight", "norm", i, (m.n_heads,), "norm"))
    if _sandwich(m) or m.architecture in _POST_ATTN_NORM_ARCHS:
        out.append(_t(b + "post_attention_norm.weight", "norm", i, (h,), "norm"))
    return out


def _mixer_state(m: ModelSpec, i: int, kind: str) -> list[Tensor]:
    s, h, b = m.state, m.hidden_size, f"blk.{i}."
    assert s is not None
    nv = s.n_value_heads
    if kind == LINEAR:
        conv_ch = 2 * s.n_key_heads * s.key_head_dim + nv * s.value_head_dim
        vd = nv * s.value_head_dim
        if m.architecture == "qwen3_next":
            beta_alpha = [_t(b + "ssm_ba.weight", "other", i, (2 * nv, h), "dense")]
        else:
            beta_alpha = [
                _t(b + "ssm_beta.weight", "other", i, (nv, h), "dense"),
                _t(b + "ssm_alpha.weight", "other", i, (nv, h), "dense"),
            ]
        return [
            _t(b + "attn_qkv.weight", "attn_qkv", i, (conv_ch, h), "dense"),
            _t(b + "attn_gate.weight", "other", i, (vd, h), "dense"),
            _t(b + "ssm_conv1d.weight", "ssm_conv1d", i, (conv_ch, s.conv_kernel), "norm"),
            _t(b + "ssm_dt.bias", "bias", i, (nv,), "norm"),
            _t(b + "ssm_a", "ssm_small", i, (nv,), "norm"),
            *beta_alpha,
            _t(b + "ssm_norm.weight", "norm", i, (s.value_head_dim,), "norm"),
            _t(b + "ssm_out.weight", "other", i, (h, vd), "dense"),
        ]
    d_inner = nv * s.value_head_dim
    gs = 2 * s.n_key_heads * s.key_head_dim
    return [
        _t(b + "ssm_in.weight", "other", i, (2 * d_inner + gs + nv, h), "dense"),
        _t(b + "ssm_conv1d.weight", "ssm_conv1d", i, (d_inner + gs, s.conv_kernel), "norm"),
        _t(b + "ssm_conv1d.bias", "bias", i, (d_inner + gs,), "norm"),
        _t(b + "ssm_dt.bias", "bias", i, (nv,), "norm"),
        _t(b + "ssm_a", "ssm_small", i, (nv, 1), "norm"),
        _t(b + "ssm_d", "norm", i, (nv, 1), "norm"),
        _t(b + "ssm_norm.weight", "norm", i, (s.n_key_heads, d_inner // s.n_key_heads), "norm"),
        _t(b + "ssm_out.weight", "other", i, (h, d_inner), "dense"),
    ]


def _dense_ffn(m: ModelSpec, i: int, ff: int, group: str, suffix: str = "") -> list[Tensor]:
    """A gated (gate, up, down) or ungated (up, down) FFN of width ``ff``; names ffn_<x><suffix>."""
    h, b = m.hidden_size, f"blk.{i}."
    if m.architecture in _FUSED_FFN_ARCHS:  # gate and up in one ffn_up matrix of 2 x ff rows
        return [
            _t(b + "ffn_up.weight", "ffn_up", i, (2 * ff, h), group),
            _t(b + "ffn_down.weight", "ffn_down", i, (h, ff), group),
        ]
    out = [_t(f"{b}ffn_gate{suffix}.weight", f"ffn_gate{suffix}", i, (ff, h), group)] if m.ffn_gated else []
    return out + [
        _t(f"{b}ffn_up{suffix}.weight", f"ffn_up{suffix}", i, (ff, h), group),
        _t(f"{b}ffn_down{suffix}.weight", f"ffn_down{suffix}", i, (h, ff), group),
    ]


def _ffn(m: ModelSpec, i: int, moe_layer: bool) -> list[Tensor]:
    h, b = m.hidden_size, f"blk.{i}."
    if not moe_layer:
        return _dense_ffn(m, i, m.ffn_width(i), "dense")
    e = m.moe
    assert e is not None
    ne, ff, width = e.n_experts, e.expert_ff, e.latent_size or h
    out = [_t(b + "ffn_gate_inp.weight", "ffn_gate_inp", i, (ne, h), "dense")]
    if m.architecture in _EXP_PROBS_ARCHS:  # the router's score-correction bias, llama.cpp needs it
        out.append(_t(b + "exp_probs_b.bias", "bias", i, (ne,), "norm"))
    if m.architecture == "gpt_oss":
        out.append(_t(b + "ffn_gate_inp.bias", "bias", i, (ne,), "norm"))
    gemma4 = m.architecture.startswith("gemma4")
    if gemma4:  # the router's input scale and the per-expert output scale (ffn_down_exps.scale)
        out += [
            _t(b + "ffn_gate_inp.scale", "norm", i, (h,), "norm"),
            _t(b + "ffn_down_exps.scale", "norm", i, (ne,), "norm"),
        ]
    if e.latent_size:
        out += [
            _t(b + "ffn_latent_down.weight", "other", i, (width, h), "dense"),
            _t(b + "ffn_latent_up.weight", "other", i, (h, width), "dense"),
        ]
    if gemma4:  # gate and up of the experts in one tensor (the checkpoint's experts.gate_up_proj)
        out.append(_t(b + "ffn_gate_up_exps.weight", "ffn_gate_up_exps", i, (ne, 2 * ff, width), "routed"))
    elif m.ffn_gated:
        out.append(_t(b + "ffn_gate_exps.weight", "ffn_gate_exps", i, (ne, ff, width), "routed"))
    if not gemma4:
        out.append(_t(b + "ffn_up_exps.weight", "ffn_up_exps", i, (ne, ff, width), "routed"))
    out.append(_t(b + "ffn_down_exps.weight", "ffn_down_exps", i, (ne, width, ff), "routed"))
    if m.architecture == "gpt_oss":  # per-expert biases
        out += [
            _t(b + "ffn_gate_exps.bias", "bias", i, (ne, ff), "norm"),
            _t(b + "ffn_up_exps.bias", "bias", i, (ne, ff), "norm"),
            _t(b + "ffn_down_exps.bias", "bias", i, (ne, width), "norm"),
        ]
    if e.n_shared_experts and e.shared_ff:
        sf = e.n_shared_experts * e.shared_ff
        if m.architecture.startswith(_SHARED_GATE_ARCHS):  # the shared expert's sigmoid gate, one F32 row
            out.append(_t(b + "ffn_gate_inp_shexp.weight", "norm", i, (h,), "norm"))
        # Gemma 4's always-on MLP beside the experts is a plain FFN (ffn_gate / ffn_up / ffn_down) with its
        # own pre / post norms
        out += _dense_ffn(m, i, sf, "shared", "" if gemma4 else "_shexp")
        if gemma4:
            out += [
                _t(b + "pre_ffw_norm_2.weight", "norm", i, (h,), "norm"),
                _t(b + "post_ffw_norm_1.weight", "norm", i, (h,), "norm"),
                _t(b + "post_ffw_norm_2.weight", "norm", i, (h,), "norm"),
            ]
    return out


@lru_cache(maxsize=1024)
def tensor_inventory(model: ModelSpec) -> tuple[Tensor, ...]:
    """Every tensor of the text decoder (see module docstring for the shapes), in the order of the blocks;
    ``harness.synth`` writes exactly these tensors into its synthetic GGUF files."""
    m, h = model, model.hidden_size
    out = [_t("token_embd.weight", "token_embd", -1, (m.vocab_size, h), "embd")]
    if m.per_layer_input:  # Gemma 4 E2B / E4B: the per-layer token table and the hidden state's projection
        w = m.per_layer_input * m.n_layers
        out += [
            _t("per_layer_token_embd.weight", "per_layer_token_embd", -1, (m.vocab_size, w), "ple"),
            _t("per_layer_model_proj.weight", "per_layer_model_proj", -1, (w, h), "dense"),
            _t("per_layer_proj_norm.weight", "norm", -1, (m.per_layer_input,), "norm"),
        ]
    if m.architecture.startswith("gemma4") and FULL in m.layer_types and m.global_head_dim:
        # the full layers' proportional-rope frequency factors, one tensor for all of them
        out.append(_t("rope_freqs.weight", "norm", -1, (m.global_head_dim // 2,), "norm"))
    dense = set(m.moe.dense_layers) if m.moe else set()
    nemotron = m.architecture == "nemotron_h"
    for i, kind in enumerate(m.layer_types):
        out.append(_t(f"blk.{i}.attn_norm.weight", "norm", i, (h,), "norm"))
        if kind in (LINEAR, MAMBA):
            out += _mixer_state(m, i, kind)
        elif kind != NONE:
            out += _attn(m, i, kind)
        if nemotron:
            if kind == NONE:
                out += _ffn(m, i, m.moe is not None and i not in dense)
            continue
        if m.architecture.startswith(_GDN_ARCHS):  # the FFN's norm, under this name
            out.append(_t(f"blk.{i}.post_attention_norm.weight", "norm", i, (h,), "norm"))
        elif not (
            m.architecture.startswith(_PARALLEL_BLOCK_ARCHS) or m.architecture in _POST_ATTN_NORM_ARCHS
        ):
            out.append(_t(f"blk.{i}.ffn_norm.weight", "norm", i, (h,), "norm"))
        out += _ffn(m, i, m.moe is not None and i not in dense)
        if _sandwich(m):
            out.append(_t(f"blk.{i}.post_ffw_norm.weight", "norm", i, (h,), "norm"))
        if m.per_layer_input:  # the per-layer input's gate (hidden -> width) and projection back, its norm
            out += [
                _t(f"blk.{i}.inp_gate.weight", "other", i, (m.per_layer_input, h), "dense"),
                _t(f"blk.{i}.proj.weight", "other", i, (h, m.per_layer_input), "dense"),
                _t(f"blk.{i}.post_norm.weight", "norm", i, (h,), "norm"),
            ]
        if m.architecture.startswith("gemma4"):  # the layer's output scalar (layer_scalar)
            out.append(_t(f"blk.{i}.layer_output_scale.weight", "norm", i, (1,), "norm"))
    out.append(_t("output_norm.weight", "norm", -1, (h,), "norm"))
    if not m.tie_embeddings:
        out.append(_t("output.weight", "output", -1, (m.vocab_size, h), "output"))
    return tuple(out)


_BLK = re.compile(r"^blk\.(\d+)\.")


def classify_gguf_tensor(name: str) -> tuple[str, int, str]:
    """(tensor class, layer or -1, group) of a GGUF tensor name."""
    mt = _BLK.match(name)
    layer = int(mt.group(1)) if mt else -1
    base = name[mt.end() :] if mt else name
    stem = base.rsplit(".", 1)[0]
    if name.startswith("token_embd"):
        return "token_embd", layer, "embd"
    if name.startswith("per_layer_token_embd"):
        return "per_layer_token_embd", layer, "ple"
    if name.startswith("output.") or name == "output.weight":
        return "output", layer, "output"
    if not name.endswith(".weight") or stem.endswith("_norm") or "norm" in stem:
        return "norm", layer, "norm"
    if "_exps" in stem:
        return stem, layer, "routed"
    if "_shexp" in stem:
        return stem, layer, "shared"
    return stem, layer, "dense"


def _sum(items, n_layers: int, moe_frac: float, tied: bool, quant: str, exact: bool) -> WeightBreakdown:
    by_class: dict[str, int] = {}
    by_type: dict[str, int] = {}
    per_layer = [0] * n_layers
    per_layer_routed = [0] * n_layers
    total = routed = shared = embd = outb = 0
    n_total = n_routed = 0
    matmul: dict[str, float] = {}
    for tclass, layer, group, ttype, n_el, nb in items:
        _count_matmul(matmul, group, ttype, nb, moe_frac, tied)
        total += nb
        by_class[tclass] = by_class.get(tclass, 0) + nb
        by_type[ttype] = by_type.get(ttype, 0) + nb
        n_total += n_el
        if 0 <= layer < n_layers:
            per_layer[layer] += nb
        if group == "routed":
            routed += nb
            n_routed += n_el
            if 0 <= layer < n_layers:
                per_layer_routed[layer] += nb
        elif group == "shared":
            shared += nb
        elif group == "embd":
            embd += nb
        elif group == "output":
            outb += nb
    return _assemble(
        quant, total, by_class, by_type, routed, shared, embd, outb, n_total, n_routed, moe_frac, tied,
        per_layer, per_layer_routed, exact,
    )._replace(matmul_bytes_by_type={t: round(b) for t, b in matmul.items()})  # fmt: skip


def _count_matmul(acc: dict[str, float], group: str, ttype: str, nb: float, moe_frac: float, tied: bool):
    """Add a tensor's per-token matmul bytes to ``acc`` (see ``WeightBreakdown.matmul_bytes_by_type``)."""
    if group in ("norm", "ple") or (group == "embd" and not tied):
        return
    acc[ttype] = acc.get(ttype, 0.0) + nb * (moe_frac if group == "routed" else 1.0)


def _assemble(
    quant: str, total: int, by_class: dict[str, int], by_type: dict[str, int], routed: int, shared: int,
    embd: int, outb: int, n_total: int, n_routed: int, moe_frac: float, tied: bool,
    per_layer: list[int], per_layer_routed: list[int], exact: bool,
) -> WeightBreakdown:  # fmt: skip
    """The breakdown from summed bytes.  Active per token (MoE): routed experts count moe_frac of their
    bytes / parameters (n_experts_used / n_experts); the token embedding is a lookup, not read whole, unless
    it is tied (then it is also the output head, read every token)."""
    ple = by_class.get("per_layer_token_embd", 0)
    return WeightBreakdown(
        quant=quant,
        total_bytes=total,
        by_class_bytes=by_class,
        by_type_bytes=by_type,
        routed_expert_bytes=routed,
        shared_expert_bytes=shared,
        dense_bytes=total - routed,
        token_embd_bytes=embd,
        output_bytes=outb,
        n_params_total=n_total,
        n_params_active=n_total - round(n_routed * (1.0 - moe_frac)),
        active_bytes_per_token=total - (0 if tied else embd) - ple - round(routed * (1.0 - moe_frac)),
        per_layer_bytes=tuple(per_layer),
        per_layer_routed_bytes=tuple(per_layer_routed),
        exact=exact,
        per_layer_embd_bytes=ple,
    )


def _moe_frac(m: ModelSpec) -> float:
    return m.moe.n_experts_used / m.moe.n_experts if m.moe else 1.0


@lru_cache(maxsize=4096)
def _breakdown_catalog_quant(model: ModelSpec, qname: str) -> WeightBreakdown:
    return _breakdown(model, catalog_quant(qname))


def _counted(tclass: str) -> bool:
    """True for a class whose llama.cpp type depends on its layer / counter (attn_v-like and the ffn_down,
    ffn_gate, ffn_up categories, experts and shared experts included); every other class gets one type per
    (quant, class, shape) whatever its layer."""
    return tclass not in ALWAYS_F32 and category(tclass) in COUNTED_CATEGORIES


class _Plan(NamedTuple):
    """A model's tensors grouped by (class, group, n_elements, row length, 3-D expert): the layers of each
    group with each tensor's counter (its position among the tensors of its llama.cpp category, in
    llama.cpp's (layer, name) order), so a quant's bytes are computed once per group, not per tensor.
    Quant-independent sums (parameter counts) are precomputed."""

    groups: tuple[tuple[str, str, int, int, bool, tuple[tuple[int, int], ...]], ...]
    n_wv: int
    n_gqa: int
    n_expert: int
    is_70b: bool
    n_params_total: int
    n_params_routed: int


# HF model types that llama.cpp converts to its ``llama`` architecture (its 70B rule needs GQA there)
_LLAMA_ARCHS = ("llama", "mistral", "mixtral")


def is_llama_70b(m: ModelSpec) -> bool:
    """llama.cpp's LLM_TYPE_70B, the only model type its quantizer asks about: 80 layers in its llama
    architecture with grouped-query attention (an 80-layer MHA llama is "65B"), or 80 layers in qwen2."""
    if m.n_layers != 80:
        return False
    if m.architecture in _LLAMA_ARCHS:
        return m.n_heads != m.n_kv_heads
    return m.architecture == "qwen2"


def _llama_order(t: Tensor) -> tuple[int, str]:
    """llama.cpp's tensor order (llama_model_loader's weight_name_comparer): block number (-1 for tensors
    outside the blocks), then name."""
    return (t.layer, t.name)


@lru_cache(maxsize=1024)
def _plan(model: ModelSpec) -> _Plan:
    m = model
    inv = tensor_inventory(m)
    counters: dict[str, int] = {}
    counter_of: dict[str, int] = {}
    for t in sorted(inv, key=_llama_order):
        if _counted(t.tclass):
            cat = category(t.tclass)
            counter_of[t.name] = counters.get(cat, 0)
            counters[cat] = counter_of[t.name] + 1
    groups: dict[tuple, list[tuple[int, int]]] = {}
    n_total = n_routed = 0
    for t in inv:
        key = (t.tclass, t.group, t.n_elements, t.row_len, t.is_3d or t.group == "routed")
        groups.setdefault(key, []).append((t.layer, counter_of.get(t.name, -1)))
        n_total += t.n_elements
        if t.group == "routed":
            n_routed += t.n_elements
    return _Plan(
        groups=tuple((*k, tuple(v)) for k, v in groups.items()),
        n_wv=counters.get("attn_v", 0),
        n_gqa=max(1, m.n_heads // max(1, m.n_kv_heads)),
        n_expert=m.moe.n_experts if m.moe else 0,
        is_70b=is_llama_70b(m),
        n_params_total=n_total,
        n_params_routed=n_routed,
    )


def _nbytes(t: str, n_el: int) -> int:
    """row_bytes for a canonical type name (what the recipes return): ceil(n / block) x block bytes."""
    be, bb = TYPE_SIZES[t]
    return -(-n_el // be) * bb


def _typer(model: ModelSpec, q: QuantSpec, p: _Plan):
    """typ(tclass, layer, n, row_len, is_3d, counter) -> the storage type of one tensor under ``q``."""
    q = as_listed(q)
    if catalog_quant(q.name) is q:  # catalog recipe: straight to the memoised llama.cpp rule
        tied = model.tie_embeddings

        def typ(tclass: str, layer: int, n: int, row_len: int, x3d: bool, counter: int) -> str:
            return _llama_type(
                q.name, tclass, layer, n, p.n_gqa, p.n_expert, p.is_70b, tied, row_len, x3d, counter
            )

        return typ

    def typ_custom(tclass: str, layer: int, n: int, row_len: int, x3d: bool, counter: int) -> str:
        return type_for(q, tclass, layer, n, row_len=row_len, is_expert3d=x3d, counter=counter)

    return typ_custom


def class_types(model: ModelSpec, quant: QuantSpec | None) -> dict[str, set[str]]:
    """Storage types (lower case) of each tensor class: a GGUF file's own tensors when ``quant`` is None,
    else the format's per-tensor types (``types_by_class``: llama.cpp's recipe, layer by layer)."""
    out: dict[str, set[str]] = {}
    if quant is None and model.gguf_tensors is not None:
        for name, ttype, _, _ in model.gguf_tensors:
            tclass, _, _ = classify_gguf_tensor(name)
            out.setdefault(tclass, set()).add(ttype.lower())
        return out
    if quant is None:
        return out
    return {cls: {t.lower() for t in types} for cls, types in types_by_class(model, quant).items()}


def types_by_class(model: ModelSpec, q: QuantSpec) -> dict[str, set[str]]:
    """The storage types each tensor class takes under ``q`` (every layer's; the same per-tensor rule as
    ``weight_breakdown``), e.g. {"ffn_down": {"q4_K", "q6_K"}, "output": {"q6_K"}, ...}."""
    p = _plan(model)
    typ = _typer(model, q, p)
    out: dict[str, set[str]] = {}
    for tclass, _group, _n_el, row_len, x3d, layers in p.groups:
        n_cat = p.n_wv if category(tclass) == "attn_v" else model.n_layers
        for layer, counter in layers if _counted(tclass) else layers[:1]:
            out.setdefault(tclass, set()).add(typ(tclass, max(layer, 0), n_cat, row_len, x3d, counter))
    return out


@lru_cache(maxsize=16384)
def _group_types(
    qname: str, tclass: str, n_cat: int, n_gqa: int, n_expert: int, is_70b: bool, tied: bool, row_len: int,
    x3d: bool, layers: tuple[tuple[int, int], ...],
) -> tuple[str, ...]:  # fmt: skip
    """A catalog recipe's storage type of each (layer, counter) of one tensor group (llama.cpp's rule)."""
    return tuple(
        _llama_type(qname, tclass, max(layer, 0), n_cat, n_gqa, n_expert, is_70b, tied, row_len, x3d, counter)
        for layer, counter in layers
    )


def _breakdown(model: ModelSpec, q: QuantSpec) -> WeightBreakdown:
    """Sum of ``row_bytes(type_for(...), n_elements)`` over the inventory, one type per tensor group (a
    layer-typed class is typed per layer).  Equal to summing tensor by tensor."""
    m, p = model, _plan(model)
    n_layers, tied = m.n_layers, m.tie_embeddings
    by_class: dict[str, int] = {}
    by_type: dict[str, int] = {}
    per_layer = [0] * n_layers
    per_layer_routed = [0] * n_layers
    total = routed = shared = embd = outb = 0
    matmul: dict[str, float] = {}
    moe_frac = _moe_frac(m)
    typ = _typer(m, q, p)
    recipe = catalog_quant(q.name) is q
    for tclass, group, n_el, row_len, x3d, layers in p.groups:
        is_routed = group == "routed"
        if _counted(tclass):
            n_cat = p.n_wv if category(tclass) == "attn_v" else n_layers
            if recipe:  # the recipe's types of the group's layers, shared by models of the same structure
                types = _group_types(q.name, tclass, n_cat, p.n_gqa, p.n_expert, p.is_70b, tied, row_len, x3d,
                                     layers)  # fmt: skip
            else:
                types = tuple(typ(tclass, max(layer, 0), n_cat, row_len, x3d, c) for layer, c in layers)
            sizes = {t: _nbytes(t, n_el) for t in set(types)}
            g_bytes = 0
            for t, count in Counter(types).items():
                nb = sizes[t] * count
                g_bytes += nb
                by_type[t] = by_type.get(t, 0) + nb
                _count_matmul(matmul, group, t, nb, moe_frac, tied)
            for (layer, _), t in zip(layers, types, strict=True):
                if 0 <= layer < n_layers:
                    per_layer[layer] += sizes[t]
                    if is_routed:
                        per_layer_routed[layer] += sizes[t]
        else:
            t = typ(tclass, 0, n_layers, row_len, x3d, 0)
            nb = _nbytes(t, n_el)
            g_bytes = nb * len(layers)
            by_type[t] = by_type.get(t, 0) + g_bytes
            _count_matmul(matmul, group, t, g_bytes, moe_frac, tied)
            for layer, _ in layers:
                if 0 <= layer < n_layers:
                    per_layer[layer] += nb
                    if is_routed:
                        per_layer_routed[layer] += nb
        total += g_bytes
        by_class[tclass] = by_class.get(tclass, 0) + g_bytes
        if is_routed:
            routed += g_bytes
        elif group == "shared":
            shared += g_bytes
        elif group == "embd":
            embd += g_bytes
        elif group == "output":
            outb += g_bytes
    return _assemble(
        q.name, total, by_class, by_type, routed, shared, embd, outb, p.n_params_total, p.n_params_routed,
        moe_frac, tied, per_layer, per_layer_routed, False,
    )._replace(matmul_bytes_by_type={t: round(b) for t, b in matmul.items()})  # fmt: skip


@lru_cache(maxsize=256)
def _breakdown_gguf(model: ModelSpec) -> WeightBreakdown:
    items = []
    for name, ttype, n_el, nb in model.gguf_tensors or ():
        tclass, layer, group = classify_gguf_tensor(name)
        items.append((tclass, layer, group, canonical_type(ttype), n_el, nb))
    return _sum(items, model.n_layers, _moe_frac(model), model.tie_embeddings, "gguf", exact=True)


def weight_breakdown(model: ModelSpec, quant: QuantSpec | str | None = None) -> WeightBreakdown:
    """Weight bytes of ``model`` in ``quant``.

    Exact file tensor sums when ``model.gguf_tensors`` is set and quant is None, "gguf" or the file's own
    format (``QuantSpec.from_file``, ``estimator.physics.quant.file_quant``).  A format an engine loads with a
    V projection on K==V layers (``QuantSpec.fills_k_eq_v``: vLLM, SGLang, TensorRT-LLM) counts their attn_v
    as well.
    """
    if model.gguf_tensors is not None and (
        quant is None
        or (isinstance(quant, str) and quant.lower() == "gguf")
        or (isinstance(quant, QuantSpec) and quant.from_file)
    ):
        return _breakdown_gguf(model)
    if quant is None:
        raise ValueError("quant is required for a model without GGUF tensors")
    q = get_quant(quant) if isinstance(quant, str) else quant
    if q.fills_k_eq_v and model.k_eq_v:  # the engine loads a V projection on K==V layers
        model = replace(model, k_eq_v=False)
    q = as_listed(q)  # otherwise the format as listed
    if catalog_quant(q.name) is q:
        return _breakdown_catalog_quant(model, q.name)
    return _breakdown(model, q)


def block_fallback(model: ModelSpec, quant: QuantSpec | str) -> tuple[float, tuple[int, ...]] | None:
    """(share of the quantizable weight elements whose rows are not whole blocks of the recipe's default
    type, those row lengths) for a llama.cpp recipe with block types (256 elements for the k- and
    i-quants); None when every row fits, or for another format.  llama-quantize stores such rows in the
    recipe's fallback type (``quant.fallback_type``: q4_K -> q5_0, q6_K -> q8_0, ...): gpt-oss's 2,880-wide
    rows make its Q4_K_M larger than its Q5_0."""
    from estimator.physics.quant import llama_recipe

    q = get_quant(quant) if isinstance(quant, str) else quant
    if q.from_file or llama_recipe(q) is None or q.default_type not in TYPE_SIZES:
        return None
    block = TYPE_SIZES[q.default_type][0]
    if block <= 32:  # legacy 32-element types: a row that is not whole blocks is rare (f16 fallback)
        return None
    total = odd = 0
    widths: set[int] = set()
    for t in tensor_inventory(model):
        if len(t.shape) < 2 or t.tclass in ALWAYS_F32:
            continue
        total += t.n_elements
        if t.row_len % block:
            odd += t.n_elements
            widths.add(t.row_len)
    if not odd or not total:
        return None
    return odd / total, tuple(sorted(widths))


def expert_bytes_per_layer(model: ModelSpec, quant: QuantSpec | str | None = None) -> tuple[int, ...]:
    """Routed-expert bytes of each layer (what llama.cpp --n-cpu-moe moves to host RAM, from layer 0)."""
    return weight_breakdown(model, quant).per_layer_routed_bytes
