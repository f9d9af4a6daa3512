#!/usr/bin/env python3
"""Regenerate estimator/data/models.json and estimator/data/hardware.json from ../shared/reference.

Stdlib only.  Usage (from the repository root)::

    python tools/build_catalog.py [--reference ../shared/reference] [--out estimator/data]

Models: every entry of models.json and models_extra.json.  Each catalog entry carries an HF-style ``config``
dict
that ``estimator.catalog.hfconfig.spec_from_config`` turns into a ModelSpec:

* when a public config.json copy behind the entry exists in ``reference/configs/`` (matched by HF id through
  CONFIG_FILES and checked against the reference geometry) that config is embedded verbatim
  (``config_source = "configs/<file>"``);
* otherwise the config is rebuilt from the reference's flattened fields (they use the config.json key names),
  plus
  an explicit ``layer_types`` list derived from the documented layer pattern
  (``config_source = "synthesized from models.json fields"``).

Entries whose geometry is incomplete are kept with ``sizable: false`` and the reason.  The reference's derived
numbers are kept under ``reference`` as cross-check fields only.

Hardware: every row of hardware.csv and hardware_extra.csv with the same ids, typed columns, the status parsed
from
``verified_notes``, a ``kind`` (gpu | unified | cpu | npu) and a host-RAM bandwidth (see HOST_BW_NOTE).

Additions kept in this repository (tools/catalog/, each row or entry with its source):

* ``models_added.json``: models the reference lacks, each with a public config.json copy in
  ``tools/catalog/configs/`` (embedded verbatim, ``config_source = "tools/catalog/configs/<file>"``); an
  entry marked ``"completes": true`` instead completes a reference entry of the same HF id that has no
  config.json (its id, name and cross-check fields kept; ``verified`` as the entry says: Gemma 4 E2B / E4B,
  transcribed from public copies of the Hub's config.json, are not);
* ``model_aliases.json``: ids that name the architecture of an existing entry (fine-tunes, quantized
  re-uploads, renamed repositories), stored on the target as ``aliases`` [{alias, quant, note}];
* ``checkpoints.json``: the weight format of the checkpoint an entry's HF id names where the reference's
  ``weight_quantization`` describes another file (the config.json copy behind the geometry) or is empty;
  it replaces the entry's ``weight_quantization``;
* ``hardware_added.csv``: devices the reference lacks (same 16 columns as hardware.csv, ``source`` and
  ``verified_notes`` per row);
* ``hardware_aliases.csv``: names under which published data names a catalog device (aiconfigurator system
  ids, published hardware_name strings), stored on the device as ``aliases`` [{alias, used_by, note}];
* ``hardware_covariates.csv``: device facts the speed model uses as covariates that the reference's columns
  lack, each row with its source: ``n_dies`` (compute dies presented as one device: Apple Ultra, Blackwell,
  MI300-series), ``bandwidth_measured_gbs`` (achievable bandwidth where a measurement is published) and, for
  CPUs, ``cpu_cores`` / ``cpu_clock_ghz`` (physical cores, maximum clock in GHz: the ``cpu_size`` covariate)
  and, for GPUs whose bf16 column is a matrix-engine rate, ``vector_fp16_tflops`` (the shader FP16 rate an
  engine backend without the matrix instructions runs its GEMMs at: ``EngineProfile.vector_gemm``); stored
  on the device as ``n_dies`` (default 1), ``bandwidth_measured_gbs``, ``cpu_cores``, ``cpu_clock_ghz``,
  ``vector_fp16_tflops`` and ``covariate_source``.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADDED = ROOT / "tools" / "catalog"  # this repository's additions to the reference catalog (see module doc)

# reference/configs file -> HF id of the catalog entry it documents (file names that do not spell the HF id).
CONFIG_FILES = {
    "gemma3.json": "google/gemma-3-27b-it",
    "gpt_oss_20b.json": "openai/gpt-oss-20b",
    "hunyuan_a13b_github_config.json": "tencent/Hunyuan-A13B-Instruct",
    "llama3_2_1b.json": "meta-llama/Llama-3.2-1B-Instruct",
    "llama3_2_3b.json": "meta-llama/Llama-3.2-3B-Instruct",
    "llama4_scout_17b_16e.json": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama--Meta-Llama-3.1-8B_config.json": "meta-llama/Llama-3.1-8B",
    "meta-llama--Meta-Llama-3.1-70B_config.json": "meta-llama/Llama-3.1-70B",
    "meta-llama--Meta-Llama-3.1-405B_config.json": "meta-llama/Llama-3.1-405B",
    "qwen2.5_0.5b.json": "Qwen/Qwen2.5-0.5B",
    "qwen3_4b.json": "Qwen/Qwen3-4B",
    "ome_qwen2.5_32b.json": "Qwen/Qwen2.5-32B",
    "ome_llama3.json": "meta-llama/Meta-Llama-3-70B",
    "ome_mistral.json": "mistralai/Mistral-7B-v0.1",
    "ome_mistral_7b_instruct.json": "mistralai/Mistral-7B-Instruct-v0.2",
    "nvidia--Gemma-4-31B-IT-NVFP4.json": "google/gemma-4-31B-it",
    "google--gemma-4-26B-A4B.json": "google/gemma-4-26B-A4B-it",
    "Qwen--Qwen3-Next-80B-A3B-Thinking_config.json": "Qwen/Qwen3-Next-80B-A3B-Thinking",
}
# keys of the multi-config files (mlc-llm presets) -> HF id
MLC_KEYS = {
    "llama2_7b": "meta-llama/Llama-2-7b-hf",
    "llama2_13b": "meta-llama/Llama-2-13b-hf",
    "llama2_70b": "meta-llama/Llama-2-70b-hf",
    "mistral_7b_v03": "mistralai/Mistral-7B-v0.3",
    "ministral3_3b_2512": "mistralai/Ministral-3-3B-Instruct-2512",
    "deepseek_v2_lite": "deepseek-ai/DeepSeek-V2-Lite",
    "gemma3_1b_it": "google/gemma-3-1b-it",
    "llama3_8b": "meta-llama/Meta-Llama-3-8B",
    "llama3_70b": "meta-llama/Meta-Llama-3-70B",
    "tinyllama_1b_chat_v1.0": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "llama3_2_1b": "meta-llama/Llama-3.2-1B-Instruct",
    "llama3_2_3b": "meta-llama/Llama-3.2-3B-Instruct",
    "smollm2_135m": "HuggingFaceTB/SmolLM2-135M",
    "smollm2_360m": "HuggingFaceTB/SmolLM2-360M",
}

# Licenses by HF id, as shown on each model card (https://huggingface.co/<hf_id>).  Recalled from the model
# cards,
# not re-fetched for this build; models not listed have license null ("unknown").
_LLAMA31 = "Llama 3.1 Community License"
LICENSES = {
    "meta-llama/Llama-3.1-8B": _LLAMA31,
    "meta-llama/Llama-3.1-70B": _LLAMA31,
    "meta-llama/Llama-3.1-405B": _LLAMA31,
    "meta-llama/Llama-3.2-1B-Instruct": "Llama 3.2 Community License",
    "meta-llama/Llama-3.2-3B-Instruct": "Llama 3.2 Community License",
    "meta-llama/Llama-3.3-70B-Instruct": "Llama 3.3 Community License",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "Llama 4 Community License",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "Llama 4 Community License",
    "meta-llama/Meta-Llama-3-8B": "Meta Llama 3 Community License",
    "meta-llama/Meta-Llama-3-70B": "Meta Llama 3 Community License",
    "meta-llama/Llama-2-7b-hf": "Llama 2 Community License",
    "meta-llama/Llama-2-13b-hf": "Llama 2 Community License",
    "meta-llama/Llama-2-70b-hf": "Llama 2 Community License",
    "zai-org/GLM-4.5": "MIT",
    "zai-org/GLM-4.5-Air": "MIT",
    "zai-org/GLM-4-32B-0414": "MIT",
    "deepseek-ai/DeepSeek-V3": "MIT (code); DeepSeek Model License (weights)",
    "deepseek-ai/DeepSeek-R1": "MIT",
    "openai/gpt-oss-20b": "Apache-2.0",
    "openai/gpt-oss-120b": "Apache-2.0",
    "google/gemma-3-1b-it": "Gemma Terms of Use",
    "google/gemma-3-4b-it": "Gemma Terms of Use",
    "google/gemma-3-12b-it": "Gemma Terms of Use",
    "google/gemma-3-27b-it": "Gemma Terms of Use",
    "mistralai/Mistral-7B-v0.1": "Apache-2.0",
    "mistralai/Mistral-7B-v0.3": "Apache-2.0",
    "mistralai/Mixtral-8x7B-v0.1": "Apache-2.0",
    "mistralai/Mixtral-8x22B-v0.1": "Apache-2.0",
    "mistralai/Mistral-Nemo-Instruct-2407": "Apache-2.0",
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": "Apache-2.0",
    "mistralai/Mistral-Large-Instruct-2407": "Mistral Research License",
    "microsoft/phi-4": "MIT",
    "moonshotai/Kimi-K2-Instruct": "Modified MIT",
    "CohereLabs/c4ai-command-a-03-2025": "CC-BY-NC-4.0",
    "baidu/ERNIE-4.5-21B-A3B-PT": "Apache-2.0",
    "baidu/ERNIE-4.5-300B-A47B-PT": "Apache-2.0",
    "HuggingFaceTB/SmolLM2-135M": "Apache-2.0",
    "HuggingFaceTB/SmolLM2-360M": "Apache-2.0",
    "HuggingFaceTB/SmolLM2-1.7B": "Apache-2.0",
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": "Apache-2.0",
    "MiniMaxAI/MiniMax-M2": "MIT",
}
_QWEN_APACHE = ("Qwen/Qwen3-", "Qwen/Qwen3.5-", "Qwen/Qwen3.6-", "Qwen/QwQ-32B")
_QWEN25_APACHE = {
    "Qwen/Qwen2.5-0.5B",
    "Qwen/Qwen2.5-7B",
    "Qwen/Qwen2.5-32B",
    "Qwen/Qwen2.5-Coder-7B",
    "Qwen/Qwen2.5-Coder-14B-Instruct",
    "Qwen/Qwen2.5-Coder-32B-Instruct",
}

# Reference fields that are config.json keys under the same name.
CONFIG_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "intermediate_size_mlp",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "num_experts_per_tok",
    "n_shared_experts",
    "first_k_dense_replace",
    "interleave_moe_layer_step",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
    "attention_chunk_size",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "q_lora_rank",
    "partial_rotary_factor",
    "num_nextn_predict_layers",
    "torch_dtype",
)
# reference layer_type_counts names -> HF layer_types names
LAYER_NAMES = {
    "full_attention": "full_attention",
    "sliding_attention": "sliding_attention",
    "chunked_attention": "chunked_attention",
    "linear_attention": "linear_attention",
    "mamba2": "mamba",
    "moe_mlp": "mlp",
}

HOST_BW_NOTE = (
    "host_bandwidth_gbs: unified-memory devices use their own bandwidth (one memory pool); CPUs use "
    "their own memory bandwidth; discrete GPUs/NPUs get a DEFAULT of 89.6 GB/s = dual-channel DDR5-5600 "
    "(2 channels x 5600 MT/s x 8 B), an assumption about the host, not a property of the device. "
    "Offloaded weights are also limited by the PCIe link (interconnect_gbs / 2 per direction) when smaller."
)
DEFAULT_HOST_BW_GBS = 89.6


def slugify(name: str) -> str:
    """Catalog id from a display name: lower case, runs of other characters -> '-'."""
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-")


def load_configs(ref: Path) -> dict[str, tuple[dict, str]]:
    """HF id -> (raw config dict, file name) for every public config copy in reference/configs."""
    out: dict[str, tuple[dict, str]] = {}
    for path in sorted((ref / "configs").glob("*.json")):
        data = json.loads(path.read_text())
        if path.name.startswith("mlc_"):
            for key, cfg in data.items():
                if key in MLC_KEYS:
                    out.setdefault(MLC_KEYS[key], (cfg, f"configs/{path.name}#{key}"))
            continue
        hf_id = CONFIG_FILES.get(path.name)
        if hf_id is None:
            stem = re.sub(r"(_config)?\.json$", "", path.name)
            if "--" not in stem:
                continue
            hf_id = stem.replace("--", "/", 1)
        out[hf_id] = (data, f"configs/{path.name}")
    return out


def _text(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg


def _layer_types(entry: dict) -> list[str] | None:
    """Explicit per-layer kinds from the reference's documented pattern (only for synthesized configs)."""
    n = entry["num_hidden_layers"]
    counts = entry.get("layer_type_counts") or {}
    mt = entry.get("model_type") or ""
    if set(counts) <= {"full_attention"}:
        return None
    if "sliding_attention" in counts and mt.startswith("gemma3"):
        return ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    if mt == "cohere2":
        return ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]
    if mt == "gpt_oss":
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if "linear_attention" in counts:
        return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)]
    if "chunked_attention" in counts:
        return ["full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(n)]
    raise SystemExit(f"no layer pattern rule for {entry['name']}: {counts}")


def synthesize_config(entry: dict) -> dict:
    """An HF-style config from the reference's flattened fields (same key names as config.json)."""
    cfg: dict = {
        "model_type": entry.get("text_model_type") or entry.get("model_type"),
        "architectures": [entry["architectures0"]] if entry.get("architectures0") else [],
    }
    for key in CONFIG_KEYS:
        if entry.get(key) is not None:
            cfg[key] = entry[key]
    if entry.get("head_dim_effective"):
        cfg["head_dim"] = entry["head_dim_effective"]
    if entry.get("num_experts"):
        cfg["num_experts"] = entry["num_experts"]
        if entry.get("expert_intermediate_size_effective"):
            cfg["moe_intermediate_size"] = entry["expert_intermediate_size_effective"]
    if entry.get("sliding_window"):
        cfg["sliding_window"] = entry["sliding_window"]
    if entry.get("weight_quantization"):
        cfg["quantization_config"] = {"quant_method": entry["weight_quantization"]}
    lt = _layer_types(entry)
    if lt is not None:
        cfg["layer_types"] = lt
    la = entry.get("linear_attention")
    if la and la.get("kind") == "Gated DeltaNet":
        for key in (
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel_dim",
        ):
            cfg[key] = la[key]
    if (entry.get("model_type") or "").startswith("ernie") and entry.get("first_k_dense_replace") is not None:
        cfg["moe_layer_start_index"] = entry["first_k_dense_replace"]
        cfg.pop("first_k_dense_replace", None)
    return cfg


def unsizable_reason(entry: dict, cfg: dict | None) -> str | None:
    if entry.get("hidden_size") is None or entry.get("num_hidden_layers") is None:
        return "geometry incomplete in the reference: " + (entry.get("source") or "no config found")
    la = entry.get("linear_attention")
    counts = entry.get("layer_type_counts") or {}
    if cfg is None and "linear_attention" in counts and not la:
        return "linear-attention head counts unknown (no config.json found); " + "; ".join(
            entry.get("notes", [])
        )
    return None


def geometry_matches(entry: dict, cfg: dict) -> bool:
    t = _text(cfg)
    return all(t.get(k) == entry.get(k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads"))


def config_max_context(cfg: dict) -> int | None:
    """max_position_embeddings of a config (its text_config for multimodal configs), None when absent."""
    return _text(cfg).get("max_position_embeddings")


def reconcile_max_context(entry: dict, cfg: dict, cfg_source: str) -> tuple[dict, str | None]:
    """The config with the reference entry's ``max_position_embeddings`` when the embedded copy disagrees.

    Some public copies are not the model's current config.json: mlc-llm's presets carry Llama 2's 2048 from
    an early Hugging Face revision, where the model (and the reference, which says why in its notes) has 4096.
    The reference value wins; the copy is patched (a new dict, the copy itself untouched) and the entry gets a
    note naming both values.  A reference without a value leaves the copy as it is.
    """
    want = entry.get("max_position_embeddings")
    have = config_max_context(cfg)
    if want is None or have is None or want == have:
        return cfg, None
    patched = json.loads(json.dumps(cfg))
    _text(patched)["max_position_embeddings"] = want
    return patched, (
        f"max context {want:,} tokens from the reference entry; the config copy ({cfg_source}) says {have:,}"
    )


def license_for(hf_id: str) -> str | None:
    if hf_id in LICENSES:
        return LICENSES[hf_id]
    if hf_id.startswith(_QWEN_APACHE) or hf_id in _QWEN25_APACHE:
        return "Apache-2.0"
    return None


REFERENCE_FIELDS = (
    "computed_total_params_B",
    "computed_active_params_B",
    "computed_params_note",
    "kv_bytes_per_token_bf16_full_layers",
    "kv_bytes_per_token_bf16_windowed_layers",
    "kv_window_tokens",
    "kv_cache_GiB_bf16_at_8192",
    "kv_cache_GiB_bf16_at_max_pos",
    "layer_pattern",
    "layer_type_counts",
    "linear_attention",
    "head_dim_effective",
)


# Reference notes about the reference's own computed figures that fitbench's sizing no longer shares: the
# note a user reads must say what fitbench counts (hf_id -> {note prefix -> replacement, or None to drop}).
NOTE_REWRITES: dict[str, dict[str, str | None]] = {
    "deepseek-ai/DeepSeek-V3.2": {
        "DeepseekV32ForCausalLM: V3 geometry plus DSA lightning indexer": (
            "DeepseekV32ForCausalLM: V3 geometry plus the DSA lightning indexer (index_n_heads 64, "
            "index_head_dim 128, index_topk 2048); its weights and its key cache (one 128-wide key per token "
            "and layer: FP8 + scale in vLLM / SGLang, the KV dtype in llama.cpp) are counted"
        ),
        "indexer weights not in computed params": None,
    },
    "google/gemma-4-26B-A4B-it": {
        "global layers: 2 kv heads x 512 with attention_k_eq_v (one cached tensor)": (
            "global layers: 2 kv heads x 512 with attention_k_eq_v (no v_proj; llama.cpp and vLLM still "
            "cache V); sliding layers: 8 kv x 256, window 1024"
        ),
    },
}


def rewrite_notes(hf_id: str, notes: list[str]) -> list[str]:
    """``notes`` with NOTE_REWRITES applied (a rule that matches no note is an error: the reference moved)."""
    rules = NOTE_REWRITES.get(hf_id, {})
    out, used = [], set()
    for note in notes:
        prefix = next((p for p in rules if note.startswith(p)), None)
        if prefix is None:
            out.append(note)
            continue
        used.add(prefix)
        if rules[prefix] is not None:
            out.append(rules[prefix])
    missing = set(rules) - used
    if missing:
        raise SystemExit(f"{hf_id}: note rewrite(s) match no reference note: {sorted(missing)}")
    return out


def build_models(ref: Path) -> list[dict]:
    configs = load_configs(ref)
    entries = json.loads((ref / "models.json").read_text()) + json.loads(
        (ref / "models_extra.json").read_text()
    )
    out, seen = [], set()
    for e in entries:
        mid = slugify(e["name"])
        if mid in seen:
            raise SystemExit(f"duplicate catalog id {mid}")
        seen.add(mid)
        raw = configs.get(e["hf_id"])
        cfg, cfg_source = None, None
        if raw is not None and e.get("hidden_size") and geometry_matches(e, raw[0]):
            cfg, cfg_source = raw[0], raw[1]
        reason = unsizable_reason(e, cfg)
        if cfg is None and reason is None:
            cfg, cfg_source = synthesize_config(e), "synthesized from models.json fields"
        notes = rewrite_notes(e["hf_id"], list(e.get("notes") or []))
        if cfg is not None:
            cfg, ctx_note = reconcile_max_context(e, cfg, cfg_source)
            notes += [ctx_note] if ctx_note else []
        lic = license_for(e["hf_id"])
        out.append(
            {
                "id": mid,
                "name": e["name"],
                "hf_id": e["hf_id"],
                "license": lic,
                "license_source": f"https://huggingface.co/{e['hf_id']} (model card; recalled)"
                if lic
                else None,
                "sizable": reason is None,
                "unsizable_reason": reason,
                "config": cfg if reason is None else None,
                "config_source": cfg_source if reason is None else None,
                "weight_quantization": checkpoint_format(e["hf_id"], e.get("weight_quantization")),
                "published_total_params": e.get("published_total_params"),
                "published_active_params": e.get("published_active_params"),
                "published_params_source": e.get("published_params_source"),
                "checkpoint_size_on_disk": e.get("checkpoint_size_on_disk"),
                "source": e.get("source") or "",
                "verified": bool(e.get("verified")),
                "notes": notes,
                "reference": {k: e.get(k) for k in REFERENCE_FIELDS},
                "aliases": [],
            }
        )
    out = complete_models(out) + added_models(seen)
    attach_model_aliases(out)
    return out


def checkpoint_format(hf_id: str, reference_value: str | None) -> str | None:
    """The weight format of ``hf_id``'s checkpoint: tools/catalog/checkpoints.json's entry, else the
    reference's ``weight_quantization``."""
    doc = json.loads((ADDED / "checkpoints.json").read_text())
    for c in doc["checkpoints"]:
        if c["hf_id"] == hf_id:
            return c["weight_quantization"]
    return reference_value


def complete_models(models: list[dict]) -> list[dict]:
    """Reference entries without a config.json (``sizable`` false) that tools/catalog/models_added.json
    completes (``"completes": true``, same HF id): the reference's id, name and cross-check fields, the added
    config, source, verification and notes."""
    doc = json.loads((ADDED / "models_added.json").read_text())
    added = {e["hf_id"]: e for e in doc["models"] if e.get("completes")}
    out = []
    for m in models:
        e = added.pop(m["hf_id"], None)
        if e is not None:
            if m["sizable"]:
                raise SystemExit(f"{m['id']}: models_added.json completes an entry that has a config")
            new = _added_entry(m["id"], e)
            m = {**new, "name": m["name"], "reference": m["reference"]}
        out.append(m)
    if added:
        raise SystemExit(f"models_added.json completes no reference entry for {sorted(added)}")
    return out


def _added_entry(mid: str, e: dict) -> dict:
    """A catalog entry from one tools/catalog/models_added.json entry."""
    cfg = json.loads((ADDED / e["config"]).read_text())
    lic = e.get("license") or license_for(e["hf_id"])
    lic_source = f"https://huggingface.co/{e['hf_id']} (model card; recalled)" if lic else None
    return {
        "id": mid,
        "name": e["name"],
        "hf_id": e["hf_id"],
        "license": lic,
        "license_source": lic_source,
        "sizable": True,
        "unsizable_reason": None,
        "config": cfg,
        "config_source": f"tools/catalog/{e['config']}",
        "weight_quantization": None,
        "published_total_params": e.get("published_total_params"),
        "published_active_params": e.get("published_active_params"),
        "published_params_source": e.get("published_params_source"),
        "checkpoint_size_on_disk": None,
        "source": e["source"],
        "verified": bool(e.get("verified", True)),  # False: transcribed, not read from the Hub
        "notes": list(e.get("notes") or []),
        "reference": {k: None for k in REFERENCE_FIELDS},
        "aliases": [],
    }


def added_models(seen: set[str]) -> list[dict]:
    """Entries of tools/catalog/models_added.json that the reference lacks, config.json embedded verbatim
    (tools/catalog/configs); the entries that complete a reference entry are ``complete_models``'."""
    doc = json.loads((ADDED / "models_added.json").read_text())
    out = []
    for e in doc["models"]:
        if e.get("completes"):
            continue
        mid = slugify(e["name"])
        if mid in seen:
            raise SystemExit(f"duplicate catalog id {mid} (tools/catalog/models_added.json)")
        seen.add(mid)
        out.append(_added_entry(mid, e))
    return out


def attach_model_aliases(models: list[dict]) -> None:
    """tools/catalog/model_aliases.json -> ``aliases`` of the target entry (matched by HF id)."""
    by_hf = {m["hf_id"].lower(): m for m in models}
    taken = {m["id"].lower() for m in models} | set(by_hf)
    for a in json.loads((ADDED / "model_aliases.json").read_text())["aliases"]:
        target = by_hf.get(a["target"].lower())
        if target is None:
            raise SystemExit(f"model alias {a['alias']!r}: no catalog entry with hf_id {a['target']!r}")
        if a["alias"].lower() in taken:
            raise SystemExit(f"model alias {a['alias']!r} is already a catalog id or HF id")
        taken.add(a["alias"].lower())
        target["aliases"].append({"alias": a["alias"], "quant": a.get("quant"), "note": a["note"]})


def _num(s: str) -> float | None:
    s = (s or "").strip()
    return float(s) if s else None


def hw_kind(row: dict) -> str:
    fam, vendor = row["family"], row["vendor"]
    if fam.startswith("cpu-") or fam in ("amd-zen4", "intel-sapphire-rapids"):
        return "cpu"
    if (
        vendor == "Apple"
        or fam.endswith("-igpu")
        or fam in ("amd-rdna3.5", "qualcomm-adreno", "nvidia-ampere-embedded")
        or row["id"] == "dgx-spark-gb10"
    ):
        return "unified"
    if vendor in ("Huawei", "Cambricon", "Kunlunxin (Baidu)") or fam.startswith("intel-gaudi"):
        return "npu"
    return "gpu"


def build_hardware(ref: Path) -> list[dict]:
    out, seen = [], set()
    files = (ref / "hardware.csv", ref / "hardware_extra.csv", ADDED / "hardware_added.csv")
    for path in files:
        fname = path.name if path.parent == ref else f"tools/catalog/{path.name}"
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                if row["id"] in seen:
                    raise SystemExit(f"duplicate hardware id {row['id']}")
                seen.add(row["id"])
                m = re.match(r"\s*status=(\w+)", row["verified_notes"] or "")
                kind = hw_kind(row)
                bw = _num(row["bandwidth_gbs"])
                host_bw = bw if kind in ("unified", "cpu") else DEFAULT_HOST_BW_GBS
                year = _num(row["year"])
                out.append(
                    {
                        "id": row["id"],
                        "name": row["name"],
                        "vendor": row["vendor"],
                        "family": row["family"],
                        "kind": kind,
                        "memory_gb": _num(row["memory_gb"]),
                        "memory_type": row["memory_type"] or None,
                        "bandwidth_gbs": bw,
                        "bf16_tflops": _num(row["bf16_tflops_dense"]),
                        "fp8_tflops": _num(row["fp8_tflops_dense"]),
                        "int8_tops": _num(row["int8_tops_dense"]),
                        "tdp_w": _num(row["tdp_w"]),
                        "interconnect_gbs": _num(row["interconnect_gbs"]),
                        "price_usd": _num(row["price_usd"]),
                        "year": int(year) if year else None,
                        "host_bandwidth_gbs": host_bw,
                        "host_bandwidth_assumed": kind not in ("unified", "cpu"),
                        "status": m.group(1) if m else "unverified",
                        "source": row["source"],
                        "verified_notes": row["verified_notes"],
                        "catalog_file": fname,
                        "aliases": [],
                    }
                )
    attach_hardware_aliases(out)
    attach_hardware_covariates(out)
    return out


def attach_hardware_covariates(devices: list[dict]) -> None:
    """tools/catalog/hardware_covariates.csv -> n_dies, bandwidth_measured_gbs, cpu_cores, cpu_clock_ghz and
    cpu_isa (CPUs only; ISA features as harness.hwdetect names them, space-separated in the file),
    vector_fp16_tflops (GPUs only), covariate_source."""
    by_id = {d["id"]: d for d in devices}
    for d in devices:
        d.update(n_dies=1, bandwidth_measured_gbs=None, cpu_cores=None, cpu_clock_ghz=None, cpu_isa=[])
        d["vector_fp16_tflops"] = None
        d["covariate_source"] = None
    with open(ADDED / "hardware_covariates.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            dev = by_id.get(row["hardware_id"])
            if dev is None:
                raise SystemExit(f"hardware covariates: no device {row['hardware_id']!r}")
            if not row["source"].strip():
                raise SystemExit(f"hardware covariates of {row['hardware_id']!r}: no source")
            dev["n_dies"] = int(row["n_dies"] or 1)
            dev["bandwidth_measured_gbs"] = _num(row["bandwidth_measured_gbs"])
            if row["cpu_cores"] and dev["kind"] != "cpu":
                raise SystemExit(f"cpu cores of {row['hardware_id']!r}: a {dev['kind']} device, not a CPU")
            dev["cpu_cores"] = int(row["cpu_cores"]) if row["cpu_cores"] else None
            dev["cpu_clock_ghz"] = _num(row["cpu_clock_ghz"])
            isa = sorted(row["cpu_isa"].split())
            if isa and dev["kind"] != "cpu":
                raise SystemExit(f"cpu ISA of {row['hardware_id']!r}: a {dev['kind']} device, not a CPU")
            dev["cpu_isa"] = isa
            if row["vector_fp16_tflops"] and dev["kind"] == "cpu":
                raise SystemExit(f"vector FP16 rate of {row['hardware_id']!r}: a CPU, not a GPU")
            dev["vector_fp16_tflops"] = _num(row["vector_fp16_tflops"])
            dev["covariate_source"] = f"{row['source']} ({row['note']})"


def attach_hardware_aliases(devices: list[dict]) -> None:
    """tools/catalog/hardware_aliases.csv -> ``aliases`` of each device (names published data uses)."""
    by_id = {d["id"]: d for d in devices}
    taken = {d["id"].lower() for d in devices}
    with open(ADDED / "hardware_aliases.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            dev = by_id.get(row["hardware_id"])
            if dev is None:
                raise SystemExit(f"hardware alias {row['alias']!r}: no device {row['hardware_id']!r}")
            if row["alias"].lower() in taken:
                raise SystemExit(f"hardware alias {row['alias']!r} is already a device id or alias")
            taken.add(row["alias"].lower())
            dev["aliases"].append({"alias": row["alias"], "used_by": row["used_by"], "note": row["note"]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "reference")
    ap.add_argument("--out", type=Path, default=ROOT / "estimator" / "data")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    models = build_models(args.reference)
    hardware = build_hardware(args.reference)
    meta = {"generated_by": "tools/build_catalog.py", "reference": "../shared/reference"}
    (args.out / "models.json").write_text(
        json.dumps({**meta, "models": models}, indent=1, sort_keys=False) + "\n"
    )
    (args.out / "hardware.json").write_text(
        json.dumps({**meta, "host_bandwidth_note": HOST_BW_NOTE, "devices": hardware}, indent=1) + "\n"
    )
    n_raw = sum(1 for m in models if (m["config_source"] or "").startswith("configs/"))
    print(
        f"models: {len(models)} ({sum(m['sizable'] for m in models)} sizable, {n_raw} from raw configs); "
        f"devices: {len(hardware)}"
    )


if __name__ == "__main__":
    main()
