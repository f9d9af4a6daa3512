"""config.json for vLLM's ``load_format="dummy"``, and the depth-reduced proxy geometry both writers share.

* ``hf_config(model, n_layers)``: a config.json dict that vLLM's dummy loader (and transformers' config
  classes) accept for a ModelSpec, with the first ``n_layers`` layers of the real layer pattern (Gemma 4,
  Qwen3-Next and Qwen3.5: the catalog's own config or text_config, cut to those layers).
* ``write_hf_config_dir(model, directory, n_layers)``: a folder holding only that config.json (atomic write).
* ``proxy_layers`` / ``leading_dense``: layer-count checks used by this writer and by the GGUF writer in
  ``harness.synth`` (which imports them from here; this module imports nothing of harness, so there is no
  cycle).  ``RMS_EPS`` / ``ROPE_THETA`` are the fixed hyper-parameters every synthetic model gets.

The public names stay importable from ``harness.synth`` (``hf_config``, ``write_hf_config_dir``,
``HF_ARCH_CLASS``, ``RMS_EPS``, ``ROPE_THETA``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from estimator.specs import SLIDING, ModelSpec, SpecError
from harness.safe_files import atomic_write_text

RMS_EPS = 1e-6
ROPE_THETA = 10000.0

HF_ARCH_CLASS = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "kimi_k2": "DeepseekV3ForCausalLM",
}


def proxy_layers(model: ModelSpec, n_layers: int | None) -> int:
    """Layer count of a (possibly depth-reduced) proxy: ``model.n_layers`` when None, else ``n_layers``
    checked to lie in 1..model.n_layers (SpecError otherwise)."""
    n = model.n_layers if n_layers is None else int(n_layers)
    if not 1 <= n <= model.n_layers:
        raise SpecError(f"n_layers must be in 1..{model.n_layers} for {model.id}, got {n_layers}")
    return n


def leading_dense(model: ModelSpec, n: int) -> int:
    """deepseek2 / MoE: number of leading dense layers among the first ``n``; llama.cpp only supports a
    dense prefix (SpecError when the dense layers are not one)."""
    dense = sorted(i for i in (model.moe.dense_layers if model.moe else ()) if i < n)
    if dense != list(range(len(dense))):
        raise SpecError(
            f"{model.id}: dense layers {dense} are not a leading block (llama.cpp needs a prefix)"
        )
    return len(dense)


def _cut_text_config(text: dict, n: int, cls: str, model_type: str) -> dict:
    """A catalog config (or its text_config) as vLLM's text-only class ``cls`` reads it, with its first ``n``
    layers (``layer_types`` cut when the config lists them), in bf16."""
    out = dict(text)
    out.update(architectures=[cls], model_type=model_type, num_hidden_layers=n, torch_dtype="bfloat16")
    if out.get("layer_types"):
        out["layer_types"] = list(out["layer_types"])[:n]
    return out


def _gemma4_text_config(model: ModelSpec, n: int) -> dict:
    """Gemma 4's text decoder as vLLM's ``Gemma4ForCausalLM`` reads it: the catalog's own ``text_config``
    (every key of the published checkpoint's: global head size and KV heads, K==V full layers, the MoE block,
    per-layer inputs) with its first ``n`` layers.  The published wrapper class
    (``Gemma4ForConditionalGeneration``) makes vLLM load transformers' ``Gemma4Processor``, which imports
    torchvision, absent from the CPU build; the text decoder's weights are the same.

    transformers forces a Gemma 4 config's last layer to full attention, and the KV-sharing layers
    (``num_kv_shared_layers``, E2B / E4B) are the model's last ones: a proxy must end on a full layer and
    cannot cut a model that shares KV (SpecError)."""
    from estimator.catalog.data import model_entry

    text = dict(model_entry(model.id).get("config", {}).get("text_config") or {})
    if not text:
        raise SpecError(f"{model.id}: the catalog holds no Gemma 4 text_config to write")
    types = list(text.get("layer_types") or [])[:n]
    if n < model.n_layers and (text.get("num_kv_shared_layers") or 0):
        raise SpecError(f"{model.id} shares KV across its last layers: vLLM proxies must keep every layer")
    if types and types[-1] != "full_attention":
        raise SpecError(
            f"{model.id}: a Gemma 4 proxy must end on a full-attention layer (transformers forces the last "
            f"layer to full); layer {n - 1} is {types[-1]}"
        )
    return _cut_text_config(text, n, "Gemma4ForCausalLM", "gemma4_text")


# Gated-DeltaNet hybrids written from the catalog's own config: architecture -> vLLM's text-only class.
GDN_TEXT_CLASS = {
    "qwen3_next": "Qwen3NextForCausalLM",
    "qwen3_5_text": "Qwen3_5ForCausalLM",
    "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM",
}


def _gdn_text_config(model: ModelSpec, n: int) -> dict:
    """A Gated-DeltaNet hybrid (Qwen3-Next, Qwen3.5) as vLLM's text-only class reads it: the catalog's own
    config (Qwen3.5: its ``text_config``) with every published key (linear-attention heads and widths, conv
    kernel, output gate, the recurrent state's dtype ``mamba_ssm_dtype``, the MoE block) and its first ``n``
    layers.  The published Qwen3.5 wrapper (``...ForConditionalGeneration``) would load the vision tower and
    its processor; the text decoder is the same."""
    from estimator.catalog.data import model_entry

    cfg = dict(model_entry(model.id).get("config") or {})
    text = dict(cfg.get("text_config") or cfg)
    if not text.get("linear_num_value_heads"):
        raise SpecError(f"{model.id}: the catalog holds no linear-attention config to write")
    text.setdefault("tie_word_embeddings", bool(cfg.get("tie_word_embeddings", model.tie_embeddings)))
    return _cut_text_config(text, n, GDN_TEXT_CLASS[model.architecture], model.architecture)


def hf_config(model: ModelSpec, n_layers: int | None = None) -> dict:
    """A config.json dict that vLLM's dummy loader (and transformers' config classes) accept."""
    n = proxy_layers(model, n_layers)
    if model.architecture == "gemma4_text":
        return _gemma4_text_config(model, n)
    if model.architecture in GDN_TEXT_CLASS:
        return _gdn_text_config(model, n)
    mt = "gemma3_text" if model.architecture == "gemma3" else model.architecture
    cls = HF_ARCH_CLASS.get(model.architecture)
    if model.arch_class and model.arch_class != "Gemma3ForConditionalGeneration":
        cls = model.arch_class
    if cls is None:
        raise SpecError(f"no HF config writer for architecture {model.architecture!r}")
    cfg: dict = {
        "architectures": [cls],
        "model_type": mt,
        "hidden_size": model.hidden_size,
        "intermediate_size": model.intermediate_size,
        "num_hidden_layers": n,
        "num_attention_heads": model.n_heads,
        "num_key_value_heads": model.n_kv_heads,
        "head_dim": model.head_dim,
        "vocab_size": model.vocab_size,
        "max_position_embeddings": model.max_context,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "tie_word_embeddings": model.tie_embeddings,
        "torch_dtype": "bfloat16",
        "hidden_act": "silu",
        "attention_bias": model.qkv_bias,
    }
    if model.window and SLIDING in model.layer_types[:n]:
        cfg["sliding_window"] = model.window
        cfg["layer_types"] = [
            "sliding_attention" if k == SLIDING else "full_attention" for k in model.layer_types[:n]
        ]
        if mt == "gemma3_text":
            cfg["hidden_activation"] = "gelu_pytorch_tanh"
            cfg["query_pre_attn_scalar"] = model.head_dim
    if model.moe is not None:
        moe = model.moe
        cfg.update(
            num_experts=moe.n_experts,
            num_local_experts=moe.n_experts,
            n_routed_experts=moe.n_experts,
            num_experts_per_tok=moe.n_experts_used,
            moe_intermediate_size=moe.expert_ff,
            n_shared_experts=moe.n_shared_experts or None,
            first_k_dense_replace=leading_dense(model, n),
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[],
        )
    if model.mla is not None:
        mla = model.mla
        cfg.update(
            kv_lora_rank=mla.kv_lora_rank,
            q_lora_rank=mla.q_lora_rank,
            qk_rope_head_dim=mla.qk_rope_head_dim,
            qk_nope_head_dim=mla.qk_nope_head_dim,
            v_head_dim=mla.v_head_dim,
        )
    return cfg


def write_hf_config_dir(model: ModelSpec, directory: str | os.PathLike, n_layers: int | None = None) -> Path:
    """Write ``directory/config.json`` (only that file) for vLLM ``load_format="dummy"``; returns the
    folder."""
    directory = Path(directory)
    atomic_write_text(directory / "config.json", json.dumps(hf_config(model, n_layers), indent=2) + "\n")
    return directory
