"""Synthetic (random-weight, tokenizer-less) models with the exact architecture of a ModelSpec.

* ``write_gguf``: a GGUF file for llama.cpp with F16 random weights (1-D norm tensors in F32), every
  hyper-parameter llama.cpp needs for the architecture, ``tokenizer.ggml.model = "none"`` and
  ``{arch}.vocab_size`` (llama.cpp then creates that many dummy tokens; feed token ids, never text).
* ``write_shape_gguf``: the same header and tensor table with no tensor data: a sparse file of the full size
  (a few KiB on disk).  llama.cpp's memory-fit pass (``llama_model_params.no_alloc``) loads it, builds the
  worst-case graphs and reports the weights, KV cache and compute buffers it would allocate, without
  reading a weight or allocating a byte (``runners.llama_cpp``, engine option ``no_alloc``).
* ``quantize``: llama.cpp's own quantizer (``llama_model_quantize``) turns the F16 file into Q8_0, Q4_K_M, ...
* ``write_hf_config_dir`` / ``hf_config``: a folder holding only config.json, for vLLM's
  ``load_format="dummy"`` (implemented in ``harness.hfconfig_writer``, re-exported here).
* ``proxy_spec``: the ModelSpec of a depth-reduced proxy, i.e. what a file built with ``n_layers`` holds (the
  estimator sizes it to compare with the engine, see ``harness.consistency``).
* ``synthetic_model``: cached builder (files keyed by a hash of the architecture facts, layer count, seed,
  quant and writer version) under ``~/.cache/fitbench/models`` (``$FITBENCH_CACHE/models`` when set).

``n_layers`` builds a depth-reduced proxy: the first ``n_layers`` layers of the real layer pattern with the
real widths.  Callers record both counts (RunRecord.n_layers_real / n_layers_measured).

Supported GGUF architectures (HF model_type -> llama.cpp arch): llama, mistral, mixtral -> llama; qwen2;
qwen3; qwen3_moe -> qwen3moe; gemma3 / gemma3_text -> gemma3 (sliding window + per-layer pattern); deepseek_v2
/ deepseek_v3 / kimi_k2 -> deepseek2 (MLA, written in the split attn_k_b / attn_v_b layout of current
converters); gpt_oss -> gpt-oss (alternating sliding / full attention, attention sinks, biased experts; F16
here where the released checkpoint is MXFP4); gemma2 (sliding / full, sandwich norms, logit soft-capping);
phi3 (Phi-3 / Phi-4: fused attn_qkv and gate+up ffn_up, no rope-factor tensors); qwen3_next -> qwen3next,
qwen3_5_text -> qwen35, qwen3_5_moe_text -> qwen35moe (Gated DeltaNet layers in the current converters'
attn_qkv / attn_gate layout, every fourth layer gated full attention; no MTP layer, which llama.cpp skips
unless asked to load it); glm4_moe -> glm4moe (GLM-4.5 / -Air: dense leading layers, sigmoid router with its
score-correction bias, shared expert; the MTP layer left out as above); llama4_text -> llama4 (Llama 4: three
chunked-attention layers to one full, experts on every MoE-step-th layer with a shared expert); ministral3 ->
mistral3; hunyuan -> hunyuan-moe; minimax_m2 -> minimax-m2 (q / k norms over all heads, a sigmoid router
with its bias); cohere2 (Command A: sliding window x 3 then full, attention and FFN in parallel on one norm,
a tied output); ernie4_5_moe -> ernie4_5-moe (dense leading layers, shared experts); gemma4_text -> gemma4
(Gemma 4: sliding and K==V full layers of two head widths, experts fused gate+up beside a dense MLP; E2B /
E4B: per-layer inputs, KV-shared last layers, a double-wide FFN on those); glm4
(GLM-4-0414: fused gate+up, sandwich norms); dots1 (dots.llm1: Qwen3's attention with q / k norms, multi-head
as llama.cpp's loader requires, dense leading layers, shared experts and DeepSeek-V3's router - a sigmoid with
its score-correction bias, transformers models/dots1/modular_dots1.py; llama.cpp's converter writes the
gating function from the config's scoring function).
The tensors are the estimator's own inventory (``estimator.physics.weights.tensor_inventory`` of the proxy:
names as ``gguf.TENSOR_NAMES`` spells them, shapes as ``src/models/<arch>.cpp`` of llama.cpp reads them, numpy
order = reversed ggml ``ne``), so a file that llama.cpp loads proves that inventory tensor by tensor; this
module adds the hyper-parameters and checks what an architecture's loader cannot express
(``_check_writable``).
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from estimator.catalog.files import cache_root
from estimator.physics.quant import LlamaRecipe, llama_recipe
from estimator.specs import CHUNKED, FULL, LINEAR, MAMBA, NONE, SLIDING, ModelSpec, QuantSpec, SpecError
from harness.hfconfig_writer import (  # noqa: F401  (re-exported: harness.synth.hf_config etc.)
    HF_ARCH_CLASS,
    RMS_EPS,
    ROPE_THETA,
    hf_config,
    leading_dense,
    proxy_layers,
    write_hf_config_dir,
)
from harness.safe_files import fsync_file, remove_stale_temps, temp_path_prefix, write_target

# Bump when the files this module writes change (invalidates the cache).  3: shared experts are
# n_shared_experts x shared_ff wide (MoESpec semantics, llama.cpp's n_ff_exp * n_expert_shared); version 2
# wrote shared_ff alone, which llama.cpp rejects for DeepSeek-V2-Lite (2 shared experts).  4: the tensors
# are the estimator's inventory, in its order (same names and shapes as version 3).
WRITER_VERSION = 4
WEIGHT_STD = 0.02  # standard deviation of the random weights (keeps activations and logits finite)
_CHUNK_ELEMS = 1 << 24  # random numbers generated per numpy call (64 MiB of float32 scratch)

GGUF_ARCH = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3moe",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "deepseek_v2": "deepseek2",
    "deepseek_v3": "deepseek2",
    "kimi_k2": "deepseek2",
    "gpt_oss": "gpt-oss",
    "gemma2": "gemma2",
    "phi3": "phi3",
    "qwen3_next": "qwen3next",
    "qwen3_5_text": "qwen35",
    "qwen3_5_moe_text": "qwen35moe",
    "glm4_moe": "glm4moe",
    "llama4_text": "llama4",
    "nemotron_h": "nemotron_h",  # nemotron_h_moe when the model has experts (gguf_arch)
    "ministral3": "mistral3",
    "hunyuan": "hunyuan-moe",
    "minimax_m2": "minimax-m2",
    "cohere2": "cohere2",
    "ernie4_5_moe": "ernie4_5-moe",
    "gemma4_text": "gemma4",
    "glm4": "glm4",
    "deepseek_v32": "deepseek32",
    "glm_moe_dsa": "glm-dsa",
    "dots1": "dots1",
}
# MLA architectures (llama.cpp deepseek2; deepseek32 and glm-dsa add DeepSeek Sparse Attention's indexer)
MLA_ARCHS = ("deepseek2", "deepseek32", "glm-dsa")
# hybrid Gated DeltaNet + gated full attention (Qwen3-Next, Qwen3.5): llama.cpp src/models/qwen3next.cpp,
# qwen35.cpp, qwen35moe.cpp
GDN_ARCHS = ("qwen3next", "qwen35", "qwen35moe")
# rotary share of the full-attention head: partial_rotary_factor 0.25 in the Qwen3-Next and Qwen3.5 configs
# (../shared/reference configs); llama.cpp reads it as rope.dimension_count = head_dim / 4
GDN_ROPE_FRACTION = 0.25
# Qwen3.5's interleaved M-RoPE sections (config rope_parameters.mrope_section [11, 11, 10]; llama.cpp reads
# four); they sum to the rotary half-width 32 = 256 x 0.25 / 2
QWEN35_ROPE_SECTIONS = (11, 11, 10, 0)
# llama.cpp's llama4 runs its chunked layers with 8,192-token chunks whatever the file says (llama4.cpp)
LLAMA4_CHUNK = 8192
# GLM-4.5 / -Air rotate half of each head (partial_rotary_factor 0.5 in their configs, ../shared/reference);
# GLM-4-0414 too (llama.cpp's converter defaults Glm4ForCausalLM to 0.5)
GLM4_MOE_ROPE_FRACTION = 0.5
# Gemma 2's logit soft-capping (config.json attn_logit_softcapping / final_logit_softcapping of the released
# checkpoints; Gemma 4's final_logit_softcapping is 30.0 too); llama.cpp adds the capping ops to the graph
# when they are set
GEMMA2_SOFTCAP = {"attn": 50.0, "final": 30.0}


@dataclass(frozen=True)
class TensorPlan:
    """One tensor to write: GGUF name, numpy shape (out, in) and storage ("f16" weights, "f32"
    norms/biases)."""

    name: str
    shape: tuple[int, ...]
    storage: str


def cache_dir(base: str | os.PathLike | None = None) -> Path:
    """Model cache folder: ``base`` when given, else ``$FITBENCH_CACHE/models``, else
    ~/.cache/fitbench/models."""
    if base is not None:
        return Path(base)
    return cache_root() / "models"


def gguf_arch(model: ModelSpec) -> str:
    """llama.cpp architecture name for a ModelSpec; SpecError naming the supported ones otherwise."""
    try:
        arch = GGUF_ARCH[model.architecture]
    except KeyError:
        raise SpecError(
            f"no synthetic GGUF writer for architecture {model.architecture!r} "
            f"(supported: {', '.join(sorted(GGUF_ARCH))})"
        ) from None
    return "nemotron_h_moe" if arch == "nemotron_h" and model.moe is not None else arch


def shared_width(model: ModelSpec, arch: str) -> int:
    """Width of the fused shared-expert FFN: n_shared_experts x shared_ff (MoESpec: each shared expert is
    shared_ff wide; 0 means expert_ff).  llama.cpp's deepseek2 sizes it n_ff_exp * n_expert_shared, so there
    the per-expert width must equal expert_ff (SpecError otherwise)."""
    moe = model.moe
    if moe is None or not moe.n_shared_experts:
        return 0
    per_expert = moe.shared_ff or moe.expert_ff
    if arch in (*MLA_ARCHS, "glm4moe", "llama4", "dots1") and per_expert != moe.expert_ff:
        raise SpecError(
            f"{model.id}: llama.cpp {arch} needs shared experts as wide as the routed ones "
            f"({per_expert} != {moe.expert_ff})"
        )
    return moe.n_shared_experts * per_expert


def proxy_spec(model: ModelSpec, n_layers: int | None = None) -> ModelSpec:
    """The ModelSpec of the file ``synthetic_model(model, n_layers=...)`` builds: the same widths and
    ``n_layers`` layers (default: the real depth) carrying the first ``n_layers`` entries of the real layer
    pattern, without the real file's GGUF inventory (the synthetic file has its own tensors).  The estimator
    sizes this spec to compare with the engine (``harness.consistency``); quant rules such as Q4_K_M's
    ffn_down promotion depend on the layer count the quantizer sees, i.e. the proxy's."""
    return model.depth_proxy(proxy_layers(model, n_layers))


def tensor_plan(model: ModelSpec, n_layers: int | None = None) -> list[TensorPlan]:
    """Every tensor of the synthetic GGUF, in file order: the estimator's inventory of the proxy
    (``estimator.physics.weights.tensor_inventory``, names and shapes as current converters write them), so
    that llama.cpp loading the file checks that inventory tensor by tensor.  Storage: F32 for the classes
    llama.cpp never quantizes (norms, biases, the router, the short convolution), F16 otherwise.  SpecError
    for a geometry llama.cpp's ``arch`` cannot express (``_check_writable``)."""
    from estimator.physics.quant import ALWAYS_F32
    from estimator.physics.weights import tensor_inventory

    arch = gguf_arch(model)
    proxy = proxy_spec(model, n_layers)
    _check_writable(proxy, arch)
    out = []
    for t in tensor_inventory(proxy):
        f32 = t.tclass in ALWAYS_F32
        assert f32 or len(t.shape) > 1, t.name  # 1-D tensors are norms / biases
        out.append(TensorPlan(t.name, t.shape, "f32" if f32 else "f16"))
    return out


def _check_writable(model: ModelSpec, arch: str) -> None:
    """Raise SpecError when llama.cpp's loader for ``arch`` cannot hold ``model``'s geometry: phi3's fused
    q as wide as hidden, MLA without its spec, Gated DeltaNet / Mamba2 state widths (DeltaNet: key and value
    head dims equal, llama.cpp sizes both from ssm.state_size), Nemotron-H layer kinds, dots1's multi-head
    attention, and shared experts as wide as the routed ones where llama.cpp sizes them n_ff_exp x
    n_expert_shared."""
    h, hd, nh = model.hidden_size, model.head_dim, model.n_heads
    if arch == "phi3" and nh * hd != h:
        raise SpecError(f"{model.id}: llama.cpp phi3 needs heads x head_dim = hidden ({h})")
    if arch in MLA_ARCHS and model.mla is None:
        raise SpecError(f"{model.id}: architecture {model.architecture} needs an MLA spec")
    kinds = set(model.layer_types)
    if kinds & {LINEAR, MAMBA}:
        s = model.state
        if s is None or not (s.n_key_heads and s.n_value_heads and s.key_head_dim and s.conv_kernel):
            raise SpecError(f"{model.id}: Gated DeltaNet / Mamba2 layers need the state widths (StateSpec)")
        if LINEAR in kinds and s.key_head_dim != s.value_head_dim:
            raise SpecError(
                f"{model.id}: llama.cpp needs key and value head dims equal ({s.key_head_dim} != "
                f"{s.value_head_dim})"
            )
    if arch == "dots1" and model.n_kv_heads != nh:  # src/models/dots1.cpp sizes k and v head_dim x n_head
        raise SpecError(
            f"{model.id}: llama.cpp dots1 needs one KV head per head ({model.n_kv_heads} != {nh})"
        )
    first = model.n_layers - model.n_kv_shared_layers
    if model.n_kv_shared_layers and (first < 2 or model.layer_types[first - 2 : first] != (SLIDING, FULL)):
        # llama.cpp (create_memory, gemma3n / gemma4) points shared sliding layers at layer first - 2 and
        # shared full layers at first - 1
        raise SpecError(
            f"{model.id}: llama.cpp needs a sliding then a full layer right before the first KV-shared one"
        )
    if arch.startswith("nemotron_h") and not kinds <= {MAMBA, FULL, NONE}:
        raise SpecError(f"{model.id}: Nemotron-H layers are Mamba, attention or FFN, not {sorted(kinds)}")
    shared_width(model, arch)


def _write_hparams(w, model: ModelSpec, arch: str, n: int) -> None:
    """All hyper-parameters llama.cpp reads for ``arch`` (methods.md B2 + src/models/<arch>.cpp)."""
    import gguf

    w.add_context_length(model.max_context)
    w.add_embedding_length(model.hidden_size)
    w.add_block_count(n)
    w.add_head_count(model.n_heads)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_vocab_size(model.vocab_size)
    w.add_tokenizer_model("none")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    if arch.startswith("nemotron_h"):  # per-layer arrays
        return _write_nemotron_h_hparams(w, model, n)
    if model.double_wide_mlp:  # per layer: the KV-shared layers' FFN is twice as wide (Gemma 4 E2B)
        proxy = model.depth_proxy(n)
        w.add_feed_forward_length([proxy.ffn_width(i) for i in range(n)])
    else:
        w.add_feed_forward_length(model.intermediate_size or (model.moe.expert_ff if model.moe else 0))
    if arch in MLA_ARCHS:
        mla = model.mla
        assert mla is not None and model.moe is not None
        # MLA as current converters write it: one shared latent "KV head" of width kv_lora_rank + rope.
        w.add_head_count_kv(1)
        w.add_key_length(mla.kv_lora_rank + mla.qk_rope_head_dim)
        w.add_value_length(mla.kv_lora_rank)
        w.add_key_length_mla(mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        w.add_value_length_mla(mla.v_head_dim)
        w.add_rope_dimension_count(mla.qk_rope_head_dim)
        w.add_q_lora_rank(mla.q_lora_rank or 0)
        w.add_kv_lora_rank(mla.kv_lora_rank)
        w.add_leading_dense_block_count(leading_dense(model, n))
        w.add_expert_shared_count(model.moe.n_shared_experts)
        w.add_expert_weights_scale(1.0)
        if arch != "deepseek2":  # DSA: the indexer and the sigmoid router (deepseek32 requires the key)
            if not (mla.index_n_heads and mla.index_head_dim and mla.index_topk and mla.q_lora_rank):
                raise SpecError(f"{model.id}: {arch} needs the DSA indexer widths and a q LoRA rank")
            w.add_indexer_head_count(mla.index_n_heads)
            w.add_indexer_key_length(mla.index_head_dim)
            w.add_indexer_top_k(mla.index_topk)
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        return _write_moe(w, model)
    if arch == "gemma4":
        return _write_gemma4_hparams(w, model, n)
    w.add_head_count_kv(model.n_kv_heads)
    w.add_key_length(model.head_dim)
    w.add_value_length(model.head_dim)
    if arch in GDN_ARCHS:
        _write_gdn_hparams(w, model, arch, n)
    elif arch == "llama4":
        _write_llama4_hparams(w, model, n)

    elif arch == "glm4":  # GLM-4-0414: partial rotary 0.5 (the converter's default for Glm4ForCausalLM)
        w.add_rope_dimension_count(int(model.head_dim * GLM4_MOE_ROPE_FRACTION))
    elif arch == "glm4moe":
        assert model.moe is not None
        w.add_rope_dimension_count(int(model.head_dim * GLM4_MOE_ROPE_FRACTION))
        w.add_expert_shared_count(model.moe.n_shared_experts)
        w.add_leading_dense_block_count(leading_dense(model, n))
        w.add_expert_weights_scale(1.0)
    else:
        w.add_rope_dimension_count(model.head_dim)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(GEMMA2_SOFTCAP["attn"])
        w.add_final_logit_softcapping(GEMMA2_SOFTCAP["final"])
    if arch == "cohere2":
        if model.n_heads * model.head_dim != model.hidden_size or not model.tie_embeddings:
            raise SpecError(
                f"{model.id}: llama.cpp's cohere2 needs heads x head_dim = hidden and a tied output"
            )
        w.add_logit_scale(1.0)  # a scale on the logits: no memory effect
        w.add_layer_norm_eps(RMS_EPS)
    if arch in ("gemma2", "gemma3", "gpt-oss", "cohere2"):
        kinds = model.layer_types[:n]
        if SLIDING in kinds or arch in (
            "gpt-oss",
            "cohere2",
        ):  # both read the window even with no sliding layer
            if not model.window:
                raise SpecError(f"{model.id}: sliding layers need ModelSpec.window")
            w.add_sliding_window(model.window)
            w.add_sliding_window_pattern([k == SLIDING for k in kinds])
        if any(k not in (FULL, SLIDING) for k in kinds):
            raise SpecError(f"{model.id}: {arch} layers must be full or sliding, got {sorted(set(kinds))}")
    if model.moe is not None:
        if arch != "llama4":  # llama4 interleaves its dense layers (checked above)
            leading_dense(model, n)
        _write_moe(w, model)
        if arch == "minimax-m2":  # a sigmoid router; llama.cpp has no default for it and aborts
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        if arch == "dots1":  # dense leading layers, shared experts, DeepSeek-V3's sigmoid router (module doc)
            w.add_leading_dense_block_count(leading_dense(model, n))
            w.add_expert_shared_count(model.moe.n_shared_experts)
            w.add_expert_weights_scale(1.0)  # routed_scaling_factor: a scalar on the expert mix
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        if arch == "ernie4_5-moe":  # dense leading layers, then experts on every layer
            w.add_leading_dense_block_count(leading_dense(model, n))
            w.add_interleave_moe_layer_step(1)
        ff = model.intermediate_size or model.moe.expert_ff
        if arch == "hunyuan-moe" and ff != model.moe.expert_ff:  # its experts are n_ff wide
            raise SpecError(f"{model.id}: llama.cpp's hunyuan-moe needs experts as wide as the FFN ({ff})")


def _write_gdn_hparams(w, model: ModelSpec, arch: str, n: int) -> None:
    """Qwen3-Next / Qwen3.5 keys: partial rotary, the Gated DeltaNet widths (ssm.state_size = head dim,
    group_count = key heads, time_step_rank = value heads, inner_size = value_dim) and the layer pattern as
    full_attention_interval (llama.cpp: layer i is linear unless (i + 1) % interval == 0)."""
    s = model.state
    assert s is not None
    w.add_rope_dimension_count(int(model.head_dim * GDN_ROPE_FRACTION))
    if arch != "qwen3next":
        w.add_rope_dimension_sections(list(QWEN35_ROPE_SECTIONS))
    w.add_ssm_conv_kernel(s.conv_kernel)
    w.add_ssm_state_size(s.key_head_dim)
    w.add_ssm_group_count(s.n_key_heads)
    w.add_ssm_time_step_rank(s.n_value_heads)
    w.add_ssm_inner_size(s.n_value_heads * s.value_head_dim)
    kinds = model.layer_types
    interval = kinds.index(FULL) + 1 if FULL in kinds else 0
    if not interval or any((k == LINEAR) != ((i + 1) % interval != 0) for i, k in enumerate(kinds)):
        raise SpecError(
            f"{model.id}: {arch} needs every {interval or 'n'}-th layer full attention and the rest linear"
        )
    w.add_full_attention_interval(interval)


def _write_gemma4_hparams(w, model: ModelSpec, n: int) -> None:
    """Gemma 4 (llama.cpp gemma4.cpp): sliding and full layers named per layer, with their own head widths
    (key_length / value_length = the full layers' global_head_dim, the *_swa keys = head_dim) and KV head
    counts (an array: global_n_kv_heads on full layers); full layers rotate their whole head through the
    rope_freqs factors (rope.dimension_count = global_head_dim), sliding ones all of head_dim; the per-layer
    embeddings' width (0: the 26B-A4B and 31B) and the KV-shared layers among the first ``n`` (E2B / E4B);
    experts with the dense MLP beside them."""
    kinds = model.layer_types[:n]
    if any(k not in (FULL, SLIDING) for k in kinds) or not model.window:
        raise SpecError(f"{model.id}: gemma4 layers must be full or sliding, with a window")
    g_hd = model.global_head_dim or model.head_dim
    g_kv = model.global_n_kv_heads or model.n_kv_heads
    w.add_head_count_kv([model.n_kv_heads if k == SLIDING else g_kv for k in kinds])
    w.add_key_length(g_hd)
    w.add_value_length(g_hd)
    w.add_key_length_swa(model.head_dim)
    w.add_value_length_swa(model.head_dim)
    w.add_rope_dimension_count(g_hd)
    w.add_rope_dimension_count_swa(model.head_dim)
    w.add_rope_freq_base_swa(ROPE_THETA)
    w.add_sliding_window(model.window)
    w.add_sliding_window_pattern([k == SLIDING for k in kinds])
    w.add_shared_kv_layers(model.depth_proxy(n).n_kv_shared_layers)
    w.add_embedding_length_per_layer_input(model.per_layer_input)
    w.add_final_logit_softcapping(GEMMA2_SOFTCAP["final"])
    if model.moe is not None:
        moe = model.moe
        if moe.dense_layers or moe.n_shared_experts != 1 or moe.shared_ff != model.intermediate_size:
            raise SpecError(
                f"{model.id}: gemma4 puts experts on every layer beside one dense MLP of intermediate_size"
            )
        _write_moe(w, model)


def _write_nemotron_h_hparams(w, model: ModelSpec, n: int) -> None:
    """Nemotron-H: the layer kind is in per-layer arrays (llama.cpp: a layer is Mamba when its KV heads and
    FFN width are both 0, attention when only its FFN width is 0), the Mamba2 widths, and the MoE keys."""
    s = model.state
    if s is None:
        raise SpecError(f"{model.id}: Nemotron-H needs the Mamba2 state widths")
    kinds = model.layer_types[:n]
    ff = model.moe.expert_ff if model.moe is not None else model.intermediate_size
    w.add_head_count_kv([model.n_kv_heads if k == FULL else 0 for k in kinds])
    w.add_feed_forward_length([ff if k == NONE else 0 for k in kinds])
    w.add_key_length(model.head_dim)
    w.add_value_length(model.head_dim)
    w.add_rope_dimension_count(model.head_dim)
    w.add_layer_norm_eps(RMS_EPS)
    w.add_ssm_conv_kernel(s.conv_kernel)
    w.add_ssm_inner_size(s.n_value_heads * s.value_head_dim)
    w.add_ssm_state_size(s.key_head_dim)
    w.add_ssm_time_step_rank(s.n_value_heads)
    w.add_ssm_group_count(s.n_key_heads)
    if model.moe is not None:
        _write_moe(w, model)
        w.add_expert_shared_count(model.moe.n_shared_experts)
        w.add_expert_weights_norm(True)
        w.add_expert_weights_scale(1.0)
        if model.moe.latent_size:
            w.add_moe_latent_size(model.moe.latent_size)


def _write_llama4_hparams(w, model: ModelSpec, n: int) -> None:
    """Llama 4: chunked attention layers named per layer (sliding_window_pattern as an array; llama.cpp fixes
    the chunk at 8,192 tokens) and MoE on every ``step``-th layer (interleave_moe_layer_step: layer i is MoE
    when (i + 1) % step == 0; Scout 1, Maverick 2), the others dense."""
    w.add_rope_dimension_count(model.head_dim)
    kinds = model.layer_types[:n]
    if CHUNKED in kinds and model.window != LLAMA4_CHUNK:
        raise SpecError(
            f"{model.id}: llama.cpp runs llama4 chunks of {LLAMA4_CHUNK} tokens, not {model.window}"
        )
    if any(k not in (FULL, CHUNKED) for k in kinds):
        raise SpecError(f"{model.id}: llama4 layers must be full or chunked, got {sorted(set(kinds))}")
    w.add_sliding_window_pattern([k == CHUNKED for k in kinds])
    moe = model.moe
    if moe is None:
        raise SpecError(f"{model.id}: llama.cpp's llama4 needs experts")
    first_moe = next((i for i in range(model.n_layers) if i not in moe.dense_layers), None)
    step = (first_moe or 0) + 1
    if any((i not in moe.dense_layers) != ((i + 1) % step == 0) for i in range(model.n_layers)):
        raise SpecError(f"{model.id}: llama4 needs MoE on every {step}-th layer, dense elsewhere")
    w.add_interleave_moe_layer_step(step)


def _write_moe(w, model: ModelSpec) -> None:
    moe = model.moe
    assert moe is not None
    w.add_expert_count(moe.n_experts)
    w.add_expert_used_count(moe.n_experts_used)
    w.add_expert_feed_forward_length(moe.expert_ff)
    arch = gguf_arch(model)
    if moe.n_shared_experts and arch not in MLA_ARCHS:  # MLA: n_ff_exp x n_expert_shared, no key
        w.add_expert_shared_feed_forward_length(shared_width(model, arch))


def _random_f16(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """N(0, WEIGHT_STD) float16 array, generated in chunks so the float32 scratch stays small."""
    flat = np.empty(int(np.prod(shape)), dtype=np.float16)
    for start in range(0, flat.size, _CHUNK_ELEMS):
        stop = min(flat.size, start + _CHUNK_ELEMS)
        chunk = rng.standard_normal(stop - start, dtype=np.float32)
        chunk *= WEIGHT_STD
        flat[start:stop] = chunk
    return flat.reshape(shape)


def _open_writer(model: ModelSpec, tmp: str, n: int, seed: int, plan: list[TensorPlan]):
    """A GGUFWriter on ``tmp`` holding the header, hyper-parameters and tensor table of ``plan`` (written)."""
    import gguf

    arch = gguf_arch(model)
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(f"fitbench synthetic {model.id} ({n}/{model.n_layers} layers, seed {seed})")
    _write_hparams(w, model, arch, n)
    for t in plan:
        dtype = np.float16 if t.storage == "f16" else np.float32
        w.add_tensor_info(t.name, t.shape, np.dtype(dtype), int(np.prod(t.shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    return w


def _write_atomically(
    model: ModelSpec, path: str | os.PathLike, n_layers: int | None, seed: int, data: bool
) -> Path:
    n = proxy_layers(model, n_layers)
    plan = tensor_plan(model, n)
    path = Path(path)
    real = write_target(path)  # a device / FIFO / folder there is refused; a symlink is written through
    real.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temp_path_prefix(real), suffix=".part", dir=real.parent)
    os.close(fd)
    try:
        w = _open_writer(model, tmp, n, seed, plan)
        if data:
            rng = np.random.default_rng(seed)
            for t in plan:
                if t.storage == "f16":
                    w.write_tensor_data(_random_f16(rng, t.shape))
                elif len(t.shape) > 1:  # F32 matrices (router): random like the F16 weights
                    w.write_tensor_data(_random_f16(rng, t.shape).astype(np.float32))
                else:  # norm weights and biases
                    w.write_tensor_data(np.ones(t.shape, dtype=np.float32))
            w.close()
        else:
            # data section: every tensor padded to the alignment, starting at the aligned end of the table
            align = w.data_alignment
            data_bytes = sum(ti.nbytes + (-ti.nbytes) % align for ti in w.tensors[0].values())
            w.close()
            head = os.path.getsize(tmp)
            os.truncate(tmp, head + (-head) % align + data_bytes)  # a hole: no block is written
        fsync_file(tmp)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_gguf(model: ModelSpec, path: str | os.PathLike, n_layers: int | None = None, seed: int = 0) -> Path:
    """Write an F16 random-weight GGUF of ``model`` (first ``n_layers`` layers) to ``path`` atomically.

    Returns the path.  Tensors are generated one at a time (peak memory ~ the largest tensor).
    """
    return _write_atomically(model, path, n_layers, seed, data=True)


def write_shape_gguf(model: ModelSpec, path: str | os.PathLike, n_layers: int | None = None) -> Path:
    """Write the F16 GGUF of ``model`` without tensor data: header, hyper-parameters and tensor table as
    ``write_gguf`` writes them, then the file is extended to its full size as a hole (sparse: a few KiB on
    disk whatever the model).  Only llama.cpp's memory-fit pass (``no_alloc``) may load it: every weight
    reads as zeros.  Returns the path."""
    return _write_atomically(model, path, n_layers, 0, data=False)


def _quant_name(quant: str | QuantSpec) -> str:
    return (quant.name if isinstance(quant, QuantSpec) else str(quant)).upper()


def _recipe(quant: str | QuantSpec) -> LlamaRecipe:
    """The llama-quantize recipe of a quant: the estimator's recipe for a catalog quant (imatrix and
    output / embedding overrides included), else a plain llama.cpp file type of that name."""
    try:
        r = llama_recipe(quant)
    except SpecError:
        r = None
    return r if r is not None else LlamaRecipe(_quant_name(quant))


def uniform_imatrix(f16_path: str | os.PathLike) -> dict[str, int]:
    """Importance-matrix entries for every quantizable weight of a GGUF: {tensor name: ne[0] * ne[2]} (the
    size llama.cpp checks).  Values are all 1.0 (every column equally important): llama.cpp's type choices
    depend only on an imatrix being present, not on its values, so the file's tensor types and byte counts
    are those of a real imatrix quantization."""
    import gguf

    out = {}
    for t in gguf.GGUFReader(str(f16_path)).tensors:
        shape = [int(x) for x in t.shape]  # ggml order: ne[0] first
        if len(shape) >= 2 and t.name.endswith(".weight"):
            out[t.name] = shape[0] * (shape[2] if len(shape) > 2 else 1)
    return out


def quantize(
    f16_path: str | os.PathLike,
    out_path: str | os.PathLike,
    quant: str | QuantSpec,
    n_threads: int | None = None,
) -> Path:
    """Quantize a GGUF with llama.cpp's own quantizer (``llama_model_quantize``) to ``quant``, atomically.

    The quant's recipe (``estimator.physics.quant.LLAMA_RECIPES``) sets the file type, the output-tensor and
    token-embedding overrides of the ``_L`` / ``_XL`` recipes and, for imatrix recipes, a uniform importance
    matrix (``uniform_imatrix``); another name is taken as a llama.cpp file type (LLAMA_FTYPE_MOSTLY_<name>).
    Raises SpecError for a format llama.cpp does not know, RuntimeError when the quantizer fails.
    """
    import llama_cpp
    import numpy as np

    recipe = _recipe(quant)
    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{recipe.ftype}", None)
    if ftype is None:
        known = sorted(
            k.removeprefix("LLAMA_FTYPE_MOSTLY_")
            for k in dir(llama_cpp)
            if k.startswith("LLAMA_FTYPE_MOSTLY_")
        )
        raise SpecError(f"llama.cpp has no quantization {recipe.ftype!r}; known: {', '.join(known)}")
    out_path = Path(out_path)
    real = write_target(out_path)
    real.parent.mkdir(parents=True, exist_ok=True)
    tmp = real.parent / f"{temp_path_prefix(real)}quant.part"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = n_threads or (os.cpu_count() or 1)
    if recipe.output_type:
        params.output_tensor_type = getattr(llama_cpp, f"GGML_TYPE_{recipe.output_type.upper()}")
    if recipe.token_embd_type:
        params.token_embedding_type = getattr(llama_cpp, f"GGML_TYPE_{recipe.token_embd_type.upper()}")
    keep = []  # the imatrix arrays must outlive the call
    if recipe.imatrix:
        entries = uniform_imatrix(f16_path)
        table = (llama_cpp.llama_model_imatrix_data * (len(entries) + 1))()
        for i, (name, size) in enumerate(entries.items()):
            data, raw_name = np.ones(size, dtype=np.float32), name.encode()
            keep += [data, raw_name]
            table[i].name = raw_name
            table[i].data = data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            table[i].size = size
        table[len(entries)].name = None  # terminator
        params.imatrix = table
        keep.append(table)
    try:
        rc = llama_cpp.llama_model_quantize(str(f16_path).encode(), str(tmp).encode(), ctypes.byref(params))
        if rc != 0 or not tmp.exists():
            target = _quant_name(quant)
            raise RuntimeError(f"llama_model_quantize({f16_path} -> {target}) failed with rc={rc}")
        fsync_file(tmp)
        os.replace(tmp, real)
    except BaseException:  # a failure or an interrupt (SIGTERM arrives once the C call returns)
        tmp.unlink(missing_ok=True)
        raise
    return out_path


_VOLATILE = (
    "id",
    "name",
    "source",
    "verified",
    "notes",
    "license",
    "hf_id",
    "gguf_path",
    "gguf_tensors",
    "published_total_params",
    "published_active_params",
)


def spec_hash(model: ModelSpec, n_layers: int | None, seed: int = 0, extra: str = "") -> str:
    """16 hex digits of sha256 over the architecture facts that shape the file (not names or sources)."""
    from harness.provenance import LATER_TOP_DEFAULTS  # later fields at their defaults keep a file's key

    facts = {
        k: v
        for k, v in dataclasses.asdict(model).items()
        if k not in _VOLATILE and LATER_TOP_DEFAULTS.get(k, object()) != v
    }
    blob = json.dumps(
        [facts, proxy_layers(model, n_layers), seed, extra, WRITER_VERSION], sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def synthetic_model(
    model: ModelSpec,
    quant: str | QuantSpec = "F16",
    engine: str = "llama.cpp",
    n_layers: int | None = None,
    cache_dir_path: str | os.PathLike | None = None,
    seed: int = 0,
    shape_only: bool = False,
) -> Path:
    """Path of a cached synthetic model, building it when missing.

    ``shape_only``: llama.cpp's data-less file ``<stem>-F16-shape.gguf`` (``write_shape_gguf``; F16 only).

    llama.cpp: ``<cache>/<arch>-<hash>-L<n>-<QUANT>.gguf`` (the F16 file is built first and kept).
    vllm: ``<cache>/<arch>-<hash>-L<n>-hf/`` holding config.json (vLLM casts dummy weights to its dtype,
    so ``quant`` only selects a vLLM quantization when the engine supports it; F16/BF16 give the same folder).
    """
    root = cache_dir(cache_dir_path)
    remove_stale_temps(root)  # *.part files of builds that were killed (timeout, kill -9)
    n = proxy_layers(model, n_layers)
    key = spec_hash(model, n, seed)
    stem = f"{model.architecture}-{key}-L{n}"
    if shape_only and engine != "llama.cpp":
        raise SpecError(f"shape-only models are llama.cpp GGUF files, not for {engine}")
    if engine == "vllm":
        folder = root / f"{stem}-hf"
        # a few hundred bytes: written again whenever the cached file is not what the writer gives now
        # (missing, unreadable, or from an older writer)
        try:
            current = json.loads((folder / "config.json").read_text()) == hf_config(model, n)
        except (OSError, ValueError):
            current = False
        if not current:
            write_hf_config_dir(model, folder, n)
        return folder
    if engine != "llama.cpp":
        raise SpecError(f"unknown engine {engine!r} (llama.cpp | vllm)")
    name = _quant_name(quant)
    if shape_only:
        if name not in ("F16", "BF16"):  # nothing to quantize; the buffers do not depend on weight types
            raise SpecError(f"a shape-only model is F16 (no data to quantize), not {name}")
        out = root / f"{stem}-F16-shape.gguf"
        if not out.exists():
            write_shape_gguf(model, out, n)
        return out
    f16 = root / f"{stem}-F16.gguf"
    if not f16.exists():
        write_gguf(model, f16, n, seed)
    if name == "F16":
        return f16
    out = root / f"{stem}-{name}.gguf"
    if not out.exists():
        quantize(f16, out, name)
    return out


def tiny_model(architecture: str, vocab_size: int = 1024, n_layers: int = 4) -> ModelSpec:
    """A tiny ModelSpec of a real architecture (hidden 256, 4 heads / 2 KV heads x 64) for tests and smoke
    runs.

    Widths are multiples of 256 so every k-quant applies without fallback.  gemma3 alternates sliding (window
    128) and full layers; qwen3_moe has 8 experts (2 used, width 256); deepseek_v2 is a
    DeepSeek-V2-Lite-shaped MLA model (kv_lora_rank 128, rope 32, nope 64, v 64, no q-LoRA, first layer dense,
    8+1 experts); gpt_oss alternates sliding (window 128) and full layers with 8 biased experts (2 used, width
    256); gemma2 is laid out like gemma3, cohere2 with three sliding layers to a full one; ernie4_5_moe has a
    dense first layer then 8 + 2 shared experts (tied output), dots1 too but multi-head (4 KV heads) and
    untied; phi3 and ministral3 are dense (phi3 fused in
    its file); hunyuan (tied embeddings, a shared expert) and minimax_m2 have 8 experts (2 used, width 256);
    llama4_text has Maverick's layout (chunked x 3 then full, experts on odd layers: 8 + 1 shared, 1 used);
    qwen3_next / qwen3_5_moe_text / qwen3_5_text repeat three Gated DeltaNet layers (2 key / 4 value heads x
    64) and one gated full-attention layer, with 8+1 experts (2 used, width 256) except the dense
    qwen3_5_text; glm4_moe has a dense first layer then 8+1 experts (2 used, width 256); gemma4_text has
    the 26B-A4B's layout: three sliding layers (window 128) to one full layer of one K==V head x 128, and 8
    experts (2 used, width 256) beside a dense MLP of 768 on every layer; deepseek_v32 / glm_moe_dsa take
    deepseek_v2's layout with a q LoRA of 128 and a DSA indexer of 4 heads x 64 keeping 256 tokens.
    """
    from estimator.specs import MLASpec, MoESpec, StateSpec

    def experts(**kw) -> MoESpec:  # 8 experts of width 256, 2 per token, unless told otherwise
        return MoESpec(**{"n_experts": 8, "n_experts_used": 2, "expert_ff": 256, **kw})

    kinds = tuple(FULL for _ in range(n_layers))
    common = dict(
        id=f"tiny-{architecture}",
        name=f"tiny {architecture}",
        architecture=architecture,
        hidden_size=256,
        n_layers=n_layers,
        n_heads=4,
        n_kv_heads=2,
        head_dim=64,
        intermediate_size=768,
        vocab_size=vocab_size,
        max_context=4096,
        layer_types=kinds,
        source="fitbench synthetic test geometry",
    )
    if architecture in ("gemma2", "gemma3"):
        common.update(
            layer_types=tuple(SLIDING if i % 2 == 0 else FULL for i in range(n_layers)),
            window=128,
            tie_embeddings=True,
        )
    elif architecture == "qwen2":
        common.update(qkv_bias=True)
    elif architecture == "phi3":  # llama.cpp's phi3 sizes q as wide as hidden: 4 heads x 64
        common.update(n_kv_heads=2)
    elif architecture == "qwen3_moe":
        common.update(intermediate_size=0, moe=experts())
    elif architecture == "deepseek_v2":
        common.update(
            n_kv_heads=4,
            head_dim=96,
            moe=experts(n_shared_experts=1, shared_ff=256, dense_layers=(0,)),
            mla=MLASpec(kv_lora_rank=128, qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64),
        )
    elif architecture in ("deepseek_v32", "glm_moe_dsa"):  # V2-Lite's MLA with a q LoRA and a DSA indexer
        common.update(
            n_kv_heads=4,
            head_dim=96,
            moe=experts(n_shared_experts=1, shared_ff=256, dense_layers=(0,)),
            mla=MLASpec(
                kv_lora_rank=128, qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64, q_lora_rank=128,
                index_n_heads=4, index_head_dim=64, index_topk=256,
            ),  # fmt: skip
        )
    elif architecture == "gpt_oss":
        common.update(
            layer_types=tuple(SLIDING if i % 2 == 0 else FULL for i in range(n_layers)),
            window=128,
            qkv_bias=True,
            moe=experts(),
        )
    elif architecture in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        nk, nv, dk = 2, 4, 64  # Gated DeltaNet: 2 key heads, 4 value heads, 64 wide
        common.update(
            layer_types=tuple(FULL if (i + 1) % 4 == 0 else LINEAR for i in range(n_layers)),
            attn_output_gate=True,
            state=StateSpec(
                recurrent_elems=dk * nv * dk,  # llama.cpp n_embd_s: state_size x inner_size
                conv_elems=3 * (2 * nk * dk + nv * dk),  # (kernel - 1) x conv channels
                n_key_heads=nk,
                n_value_heads=nv,
                key_head_dim=dk,
                value_head_dim=dk,
                conv_kernel=4,
            ),
        )
        if architecture != "qwen3_5_text":
            common.update(
                intermediate_size=0,
                moe=experts(n_shared_experts=1, shared_ff=256),
            )
    elif architecture == "llama4_text":  # Maverick's layout: MoE on odd layers, chunked 3 : 1 full
        common.update(
            layer_types=tuple(FULL if (i + 1) % 4 == 0 else CHUNKED for i in range(n_layers)),
            window=8192,
            moe=experts(
                n_experts_used=1, n_shared_experts=1, shared_ff=256, dense_layers=tuple(range(0, n_layers, 2))
            ),
        )
    elif architecture == "nemotron_h":  # Mamba2, FFN (MoE, latent 256), attention, FFN; 2 groups x 64 state
        common.update(
            layer_types=(MAMBA, NONE, FULL, NONE)[:n_layers] + (MAMBA,) * max(0, n_layers - 4),
            intermediate_size=256,
            ffn_gated=False,
            state=StateSpec(
                recurrent_elems=4 * 64 * 64,  # d_inner (4 heads x 64) x state 64
                conv_elems=3 * (4 * 64 + 2 * 2 * 64),  # (kernel - 1) x (d_inner + 2 groups x state)
                n_key_heads=2,
                n_value_heads=4,
                key_head_dim=64,
                value_head_dim=64,
                conv_kernel=4,
            ),
            moe=experts(n_shared_experts=1, shared_ff=512, latent_size=256),
        )
    elif architecture == "glm4_moe":
        common.update(moe=experts(n_shared_experts=1, shared_ff=256, dense_layers=(0,)))
    elif architecture == "cohere2":  # sliding (window 128) x 3 then full, like Command A
        common.update(
            layer_types=tuple(FULL if (i + 1) % 4 == 0 else SLIDING for i in range(n_layers)),
            window=128,
            n_heads=4,
            tie_embeddings=True,
        )
    elif architecture == "dots1":  # multi-head, a dense first layer, 8 + 2 shared experts
        common.update(n_kv_heads=4, moe=experts(n_shared_experts=2, shared_ff=256, dense_layers=(0,)))
    elif architecture == "ernie4_5_moe":  # a dense first layer, 8 + 2 shared experts, tied output
        common.update(tie_embeddings=True, moe=experts(n_shared_experts=2, shared_ff=256, dense_layers=(0,)))
    elif architecture == "hunyuan":
        shared = experts(n_shared_experts=1, shared_ff=256)
        common.update(tie_embeddings=True, intermediate_size=0, moe=shared)
    elif architecture == "minimax_m2":
        common.update(intermediate_size=0, moe=experts())
    elif architecture == "gemma4_text":  # the 26B-A4B's layout: sliding x 3 then a wider K==V full layer
        common.update(
            layer_types=tuple(FULL if (i + 1) % 4 == 0 else SLIDING for i in range(n_layers)),
            window=128,
            tie_embeddings=True,
            global_head_dim=128,
            global_n_kv_heads=1,
            k_eq_v=True,
            moe=experts(n_shared_experts=1, shared_ff=768),
        )
    elif architecture not in GGUF_ARCH:
        raise SpecError(f"no tiny geometry for {architecture!r}")
    return ModelSpec(**common)
