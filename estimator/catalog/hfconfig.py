"""Hugging Face ``config.json`` -> ModelSpec.

``load_hf_config(path)`` reads a config.json (or a folder holding one); ``spec_from_config(cfg, source)`` is
the
pure parser used by both the loader and the catalog.  Rules (see ../shared/reference/models.md):

* a nested ``text_config`` is merged over the top-level keys (text_config wins), then transformers' documented
  defaults for that text model type fill keys the file leaves out (Gemma 3's text_config lists only
  non-default
  keys: ``Gemma3TextConfig`` defaults heads 8, kv heads 4, head_dim 256, vocab 262,208, 131,072 positions,
  sliding_window_pattern 6, tied embeddings);
* the GPT-2-era spellings of a few model types are read as the standard keys where the standard key is absent
  (``LEGACY_KEYS``, the renames transformers' config classes document: GPT-J ``n_embd`` / ``n_layer`` /
  ``n_head`` / ``n_positions`` / ``n_inner``, BLOOM ``n_embed`` / ``n_layer`` / ``n_head`` / ``seq_length``,
  OPT ``ffn_dim``, GPT-2 / GPT-BigCode likewise);
* ``head_dim`` (or Hunyuan's ``attention_head_dim``) always wins over hidden/heads;
* an up/down MLP without a gate projection for the model types built that way (``UNGATED_MLP_TYPES``: GPT-2,
  GPT-J, GPT-NeoX, BLOOM, OPT, Falcon, Phi-1/2, MPT, GPT-BigCode, StarCoder2) and for a ``relu2`` activation
  (Nemotron-H); their width defaults to 4 x hidden when the file gives none (``n_inner`` null);
* tied input / output embeddings when ``tie_word_embeddings`` is absent for the types whose config classes
  default to tying (Gemma, GPT-2, BLOOM, OPT), untied otherwise;
* missing ``num_key_value_heads`` means MHA (kv heads = heads);
* per-layer kinds from, in order: ``layer_types``; ``hybrid_override_pattern`` (M Mamba2, * attention, - MLP,
  E MoE); ``full_attention_interval`` (layer i full iff (i+1) % k == 0, else linear attention);
  ``attention_chunk_size`` with ``no_rope_layers`` (1 = RoPE = chunked) or every 4th layer global;
  ``sliding_window_pattern`` p (layer i global iff (i+1) % p == 0); gpt-oss alternation (layer 0 sliding);
  a ``sliding_window`` on every layer (Mistral v0.1) unless ``use_sliding_window`` is false (Qwen2: inert);
* MoE keys in every spelling: experts ``num_experts`` / ``num_local_experts`` / ``n_routed_experts`` /
  ``moe_num_experts``; top-k ``num_experts_per_tok`` / ``moe_k`` / ``moe_topk`` / ``top_k_experts``; shared
  ``n_shared_experts`` / ``moe_num_shared_experts`` / ``num_shared_expert``; dense layers from
  ``first_k_dense_replace`` / ``moe_layer_start_index`` / ``mlp_only_layers`` /
  ``interleave_moe_layer_step`` /
  ``decoder_sparse_step``; expert width ``moe_intermediate_size`` else ``intermediate_size`` (lists: first
  value);
* MLA from ``kv_lora_rank`` (+ ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim``, ``q_lora_rank``);
* fixed state: Gated DeltaNet ``linear_*`` keys (recurrent nv*dk*dv, conv (2*nk*dk + nv*dv)*(kernel-1)) and
  Mamba2 ``mamba_num_heads``/``mamba_head_dim``/``ssm_state_size``/``n_groups``/``conv_kernel`` (recurrent
  heads*head_dim*state, conv (heads*head_dim + 2*groups*state)*(kernel-1)).

A missing required key raises SpecError naming the key and the file.  Before anything is read, every numeric
key the parser uses is checked against ``CONFIG_NUMBERS`` (an integer — or, where noted, a list of integers —
in range; NaN, infinities, booleans and text refused), so a config cannot divide by zero, overflow or make the
parser build a list per layer for 10^12 layers; the built spec is then checked whole
(``estimator.validate.check_model``: consistent heads, experts, windows).  ``load_hf_config`` reads at most
``MAX_CONFIG_BYTES`` of a regular file (``estimator.catalog.files``) as strict JSON
(``estimator.validate.parse_json``: no NaN, no 5,000-digit integers, no deep nesting).
"""

from __future__ import annotations

import os
from pathlib import Path

from estimator.catalog.files import read_text
from estimator.specs import (
    CHUNKED,
    FULL,
    LINEAR,
    MAMBA,
    NONE,
    SLIDING,
    MLASpec,
    ModelSpec,
    MoESpec,
    SpecError,
    StateSpec,
)
from estimator.validate import (
    COUNT,
    EXPERTS,
    HEADS,
    LIST,
    MAX_LAYERS,
    MAX_MODEL_CONTEXT,
    MAX_WIDTH,
    NUMBER,
    PER_LAYER,
    WIDTH,
    WINDOW,
    Bound,
    check_fields,
    check_model,
    parse_json,
)

MAX_CONFIG_BYTES = 16 * 2**20  # config.json files are a few KB; 16 MiB is generous
# Numeric config keys the parser reads -> (their range, NUMBER / PER_LAYER / LIST: estimator.validate).
CONFIG_NUMBERS: dict[str, tuple[Bound, str]] = {
    "hidden_size": (Bound(1, MAX_WIDTH), NUMBER),
    "num_hidden_layers": (Bound(1, MAX_LAYERS), NUMBER),
    "num_attention_heads": (HEADS, PER_LAYER),
    "num_key_value_heads": (HEADS, PER_LAYER),
    "head_dim": (HEADS, NUMBER),
    "attention_head_dim": (HEADS, NUMBER),
    "vocab_size": (Bound(1, MAX_WIDTH), NUMBER),
    "max_position_embeddings": (Bound(1, MAX_MODEL_CONTEXT), NUMBER),
    "intermediate_size": (WIDTH, PER_LAYER),
    "intermediate_size_mlp": (WIDTH, PER_LAYER),
    "moe_intermediate_size": (WIDTH, PER_LAYER),
    "shared_expert_intermediate_size": (WIDTH, PER_LAYER),
    "moe_shared_expert_intermediate_size": (WIDTH, PER_LAYER),
    "moe_latent_size": (WIDTH, NUMBER),
    "num_experts": (EXPERTS, NUMBER),
    "num_local_experts": (EXPERTS, NUMBER),
    "n_routed_experts": (EXPERTS, NUMBER),
    "moe_num_experts": (EXPERTS, PER_LAYER),
    "num_experts_per_tok": (EXPERTS, NUMBER),
    "num_experts_per_token": (EXPERTS, NUMBER),
    "moe_k": (EXPERTS, NUMBER),
    "moe_topk": (EXPERTS, PER_LAYER),
    "top_k_experts": (EXPERTS, NUMBER),
    "n_shared_experts": (EXPERTS, NUMBER),
    "moe_num_shared_experts": (EXPERTS, NUMBER),
    "num_shared_expert": (EXPERTS, PER_LAYER),
    "first_k_dense_replace": (COUNT, NUMBER),
    "moe_layer_start_index": (COUNT, PER_LAYER),
    "mlp_only_layers": (Bound(0, MAX_LAYERS - 1), LIST),
    "interleave_moe_layer_step": (COUNT, NUMBER),
    "decoder_sparse_step": (COUNT, NUMBER),
    "kv_lora_rank": (WIDTH, NUMBER),
    "q_lora_rank": (WIDTH, NUMBER),
    "qk_rope_head_dim": (HEADS, NUMBER),
    "qk_nope_head_dim": (HEADS, NUMBER),
    "v_head_dim": (HEADS, NUMBER),
    "sliding_window": (WINDOW, NUMBER),
    "sliding_window_pattern": (COUNT, NUMBER),
    "attention_chunk_size": (WINDOW, NUMBER),
    "no_rope_layer_interval": (COUNT, NUMBER),
    "full_attention_interval": (COUNT, NUMBER),
    "linear_num_key_heads": (HEADS, NUMBER),
    "linear_num_value_heads": (HEADS, NUMBER),
    "linear_key_head_dim": (HEADS, NUMBER),
    "linear_value_head_dim": (HEADS, NUMBER),
    "linear_conv_kernel_dim": (HEADS, NUMBER),
    "mamba_num_heads": (HEADS, NUMBER),
    "mamba_head_dim": (HEADS, NUMBER),
    "ssm_state_size": (HEADS, NUMBER),
    "n_groups": (HEADS, NUMBER),
    "conv_kernel": (HEADS, NUMBER),
    "global_head_dim": (HEADS, NUMBER),
    "num_global_key_value_heads": (HEADS, NUMBER),
    "hidden_size_per_layer_input": (HEADS, NUMBER),
    "num_kv_shared_layers": (COUNT, NUMBER),
}
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOPK_KEYS = ("num_experts_per_tok", "moe_k", "moe_topk", "top_k_experts", "num_experts_per_token")


def check_config_numbers(t: dict, src: str) -> None:
    """SpecError naming the file, key and value for a numeric key outside CONFIG_NUMBERS (not an integer, not
    finite, out of range, a list where none is allowed), and for a config that asks for more experts per token
    than it has or divides its width by a head count it does not give evenly."""
    check_fields(t, CONFIG_NUMBERS, src)
    experts = next((_first(t[k]) for k in _EXPERT_KEYS if t.get(k) is not None), None)
    top_k = next((_first(t[k]) for k in _TOPK_KEYS if t.get(k) is not None), None)
    if experts is not None and top_k and top_k > experts and (experts > 1 or experts == 0):
        raise SpecError(f"{src}: {top_k} experts per token is above the {int(experts)} experts")
    heads = _first(t.get("num_attention_heads"))
    explicit = any(t.get(k) for k in ("head_dim", "attention_head_dim", "kv_lora_rank"))
    if not explicit and heads and t["hidden_size"] % heads:
        raise SpecError(
            f"{src}: hidden_size {t['hidden_size']} is not divisible by num_attention_heads {heads} "
            "(and no head_dim is given)"
        )
    for key in ("quantization_config", "text_config"):
        if t.get(key) is not None and not isinstance(t[key], dict):
            raise SpecError(f"{src}: {key} must be a JSON object, got {type(t[key]).__name__}")
    if t.get("architectures") is not None and not (
        isinstance(t["architectures"], list) and all(isinstance(a, str) for a in t["architectures"])
    ):
        raise SpecError(f"{src}: architectures must be a list of names")


# transformers defaults the reference documents for configs that omit keys (text model_type -> defaults).
TEXT_DEFAULTS: dict[str, dict] = {
    "gemma3_text": {
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
        "sliding_window": 4096,
    },
}
_LAYER_NAMES = {
    "full_attention": FULL,
    "attention": FULL,
    "global": FULL,
    "sliding_attention": SLIDING,
    "sliding": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": LINEAR,
    "mamba": MAMBA,
    "mamba2": MAMBA,
    "mlp": NONE,
    "moe": NONE,
    "none": NONE,
}
# model types whose config classes tie the input and output embeddings when the file says nothing
_TIED_DEFAULT_TRUE = ("gemma", "gpt2", "bloom", "opt")
# model_type -> {old spelling: standard key}: the attribute maps of transformers' config classes for these
# types (GPTJConfig, BloomConfig, OPTConfig, GPT2Config, GPTBigCodeConfig); read only where the standard key
# is absent
LEGACY_KEYS: dict[str, dict[str, str]] = {
    "gptj": {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
             "n_positions": "max_position_embeddings", "n_inner": "intermediate_size"},
    "gpt2": {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
             "n_positions": "max_position_embeddings", "n_inner": "intermediate_size"},
    "gpt_bigcode": {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
                    "n_positions": "max_position_embeddings", "n_inner": "intermediate_size"},
    # BLOOM has ALiBi positions and no learned limit: its training length (seq_length) is the context
    "bloom": {"n_embed": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
              "seq_length": "max_position_embeddings", "n_inner": "intermediate_size"},
    "opt": {"ffn_dim": "intermediate_size"},
}  # fmt: skip
# model types whose MLP is up -> activation -> down with no gate projection (GPT-2 c_fc / c_proj, GPT-J
# fc_in / fc_out, GPT-NeoX / BLOOM / Falcon dense_h_to_4h / dense_4h_to_h, OPT / Phi fc1 / fc2, MPT up / down)
UNGATED_MLP_TYPES = frozenset(
    {"gpt2", "gptj", "gpt_neox", "bloom", "opt", "falcon", "phi", "mpt", "gpt_bigcode", "starcoder2"}
)
UNGATED_DEFAULT_WIDTH = 4  # x hidden_size: the width those config classes take when n_inner / ffn_dim is null
_REQUIRED = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "vocab_size",
    "max_position_embeddings",
)


def _first(v):
    return v[0] if isinstance(v, list) and v else v


def merged_text_config(cfg: dict) -> dict:
    """Top-level keys, overridden by ``text_config``, then the documented defaults for missing keys."""
    if not isinstance(cfg, dict):
        raise SpecError("config is not a JSON object")
    text = cfg.get("text_config")
    out = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config", "audio_config")}
    if isinstance(text, dict):
        out.update(text)
        out.setdefault("architectures", cfg.get("architectures"))
    for old_key, key in LEGACY_KEYS.get(str(out.get("model_type")), {}).items():
        if out.get(key) is None and out.get(old_key) is not None:
            out[key] = out[old_key]
    for k, v in TEXT_DEFAULTS.get(str(out.get("model_type")), {}).items():
        out.setdefault(k, v)
    return out


def _get(t: dict, keys: tuple[str, ...], default=None):
    for k in keys:
        if t.get(k) is not None:
            return _first(t[k])
    return default


def _layer_types(t: dict, n: int, model_type: str, src: str) -> tuple[tuple[str, ...], int | None]:
    """Per-layer kinds and the window (tokens) of SLIDING / CHUNKED layers."""
    window = t.get("sliding_window")
    if t.get("use_sliding_window") is False:
        window = None
    lt = t.get("layer_types")
    if isinstance(lt, list) and lt:
        if len(lt) != n:
            raise SpecError(f"{src}: layer_types has {len(lt)} entries for {n} layers")
        try:
            kinds = tuple(_LAYER_NAMES[str(x)] for x in lt)
        except KeyError as exc:
            raise SpecError(f"{src}: unknown layer type {exc.args[0]!r} in layer_types") from None
        if CHUNKED in kinds:
            window = t.get("attention_chunk_size") or window
        return kinds, (window if (SLIDING in kinds or CHUNKED in kinds) else None)
    pat = t.get("hybrid_override_pattern")
    if isinstance(pat, str) and pat:
        if len(pat) != n:
            raise SpecError(f"{src}: hybrid_override_pattern has {len(pat)} entries for {n} layers")
        m = {"M": MAMBA, "*": FULL, "-": NONE, "E": NONE}
        return tuple(m.get(c, NONE) for c in pat), None
    k = t.get("full_attention_interval")
    if k:
        return tuple(FULL if (i + 1) % int(k) == 0 else LINEAR for i in range(n)), None
    chunk = t.get("attention_chunk_size")
    if chunk:
        nrl = t.get("no_rope_layers")
        if isinstance(nrl, list) and len(nrl) == n:
            return tuple(CHUNKED if x else FULL for x in nrl), int(chunk)
        step = int(t.get("no_rope_layer_interval") or 4)
        return tuple(FULL if (i + 1) % step == 0 else CHUNKED for i in range(n)), int(chunk)
    p = t.get("sliding_window_pattern")
    if p and window:
        return tuple(FULL if (i + 1) % int(p) == 0 else SLIDING for i in range(n)), int(window)
    if model_type in ("gpt_oss", "gemma2") and window:
        # alternate sliding / full from layer 0 (transformers' Gemma2 ``is_sliding = not layer_idx % 2``;
        # llama.cpp gemma2 swa pattern 2)
        return tuple(SLIDING if i % 2 == 0 else FULL for i in range(n)), int(window)
    if window and model_type in ("mistral", "mixtral") and int(window) < int(t["max_position_embeddings"]):
        return (SLIDING,) * n, int(window)
    return (FULL,) * n, None


def _moe(t: dict, n: int, model_type: str, kinds: tuple[str, ...]) -> MoESpec | None:
    n_exp = _get(t, ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"))
    if not n_exp or int(n_exp) <= 1:
        return None
    used = _get(t, ("num_experts_per_tok", "moe_k", "moe_topk", "top_k_experts", "num_experts_per_token"), 1)
    expert_ff = int(_get(t, ("moe_intermediate_size",), None) or _first(t.get("intermediate_size")) or 0)
    n_shared = int(_get(t, ("n_shared_experts", "moe_num_shared_experts", "num_shared_expert"), 0) or 0)
    shared_ff = _get(t, ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"))
    if shared_ff and not n_shared:
        n_shared = 1
    if model_type.startswith("llama4"):  # one shared expert of the expert width on every MoE layer
        n_shared, shared_ff = 1, int(t["intermediate_size"])
    elif model_type.startswith("gemma4"):  # dense GeGLU MLP beside the MoE block on every layer
        n_shared, shared_ff = 1, int(t["intermediate_size"])
    elif model_type == "hunyuan" and n_shared:
        shared_ff = int(_first(t["intermediate_size"]))
    if shared_ff and n_shared > 1 and t.get("shared_expert_intermediate_size") is None:
        pass
    shared_ff = int(shared_ff or (expert_ff if n_shared else 0))
    dense: set[int] = set()
    k = _get(t, ("first_k_dense_replace", "moe_layer_start_index"))
    if k:
        dense.update(range(int(k)))
    for i in t.get("mlp_only_layers") or []:
        dense.add(int(i))
    step = t.get("interleave_moe_layer_step") or t.get("decoder_sparse_step")
    if step and int(step) > 1:
        dense.update(i for i in range(n) if (i + 1) % int(step) != 0)
    pat = t.get("hybrid_override_pattern")
    if isinstance(pat, str) and len(pat) == n:
        dense = {i for i, c in enumerate(pat) if c == "-"}
    return MoESpec(
        n_experts=int(n_exp),
        n_experts_used=int(used),
        expert_ff=expert_ff,
        n_shared_experts=n_shared,
        shared_ff=shared_ff,
        dense_layers=tuple(sorted(dense)),
        latent_size=int(t.get("moe_latent_size") or 0),
    )


def _state(t: dict) -> StateSpec | None:
    if t.get("linear_num_value_heads"):
        nk, nv = int(t["linear_num_key_heads"]), int(t["linear_num_value_heads"])
        dk, dv = int(t["linear_key_head_dim"]), int(t["linear_value_head_dim"])
        kern = int(t.get("linear_conv_kernel_dim") or 4)
        return StateSpec(
            recurrent_elems=nv * dk * dv,
            conv_elems=(2 * nk * dk + nv * dv) * (kern - 1),
            n_key_heads=nk,
            n_value_heads=nv,
            key_head_dim=dk,
            value_head_dim=dv,
            conv_kernel=kern,
            ssm_dtype=str(t.get("mamba_ssm_dtype") or ""),
        )
    if t.get("mamba_num_heads"):
        nh, hd = int(t["mamba_num_heads"]), int(t["mamba_head_dim"])
        ds, ng = int(t["ssm_state_size"]), int(t.get("n_groups") or 1)
        kern = int(t.get("conv_kernel") or 4)
        return StateSpec(
            recurrent_elems=nh * hd * ds,
            conv_elems=(nh * hd + 2 * ng * ds) * (kern - 1),
            n_key_heads=ng,
            n_value_heads=nh,
            key_head_dim=ds,
            value_head_dim=hd,
            conv_kernel=kern,
            ssm_dtype=str(t.get("mamba_ssm_cache_dtype") or t.get("mamba_ssm_dtype") or ""),
        )
    return None


def _native_dtype(t: dict) -> str:
    qc = t.get("quantization_config") or {}
    method = str(qc.get("quant_method") or "").lower()
    if method in ("fp8", "mxfp4"):
        return method
    if method:
        algo = str(qc.get("quant_algo") or "").lower()
        return "nvfp4" if "nvfp4" in algo or "fp4" in method else method
    dt = str(t.get("torch_dtype") or t.get("dtype") or "bfloat16").lower()
    return {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(dt, dt)


def spec_from_config(cfg: dict, origin: str = "config.json", **meta) -> ModelSpec:
    """ModelSpec from a config dict.  ``origin`` names the file in error messages (and is the default
    ModelSpec.source); ``meta`` overrides ModelSpec fields (id, name, hf_id, license, source, verified,
    ...).  SpecError (one line naming ``origin``) for anything the parser cannot use."""
    t = merged_text_config(cfg)
    for key in _REQUIRED:
        if t.get(key) is None:
            raise SpecError(f"{origin}: missing required key '{key}'")
    check_config_numbers(t, origin)
    try:
        spec = _spec_from_text_config(t, origin, meta)
    except SpecError:
        raise
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as exc:
        # a combination of keys the checks above did not foresee: still one line naming the file, never a
        # traceback (the fuzz suite, tests/test_fuzz_inputs.py, looks for these)
        raise SpecError(f"{origin}: unusable config ({type(exc).__name__}: {exc})") from None
    return check_model(spec, origin)


def _spec_from_text_config(t: dict, source: str, meta: dict) -> ModelSpec:
    mt = str(t.get("model_type") or "")
    arch_list = t.get("architectures") or []
    n = int(t["num_hidden_layers"])
    heads = int(_first(t["num_attention_heads"]))
    hidden = int(t["hidden_size"])
    kv_heads = int(_get(t, ("num_key_value_heads",), heads))
    mla = None
    if t.get("kv_lora_rank"):
        for key in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if t.get(key) is None:
                raise SpecError(f"{source}: missing required key '{key}' (MLA model)")
        mla = MLASpec(
            kv_lora_rank=int(t["kv_lora_rank"]),
            qk_rope_head_dim=int(t["qk_rope_head_dim"]),
            qk_nope_head_dim=int(t["qk_nope_head_dim"]),
            v_head_dim=int(t["v_head_dim"]),
            q_lora_rank=int(t["q_lora_rank"]) if t.get("q_lora_rank") else None,
            index_n_heads=int(t.get("index_n_heads") or 0),
            index_head_dim=int(t.get("index_head_dim") or 0),
            index_topk=int(t.get("index_topk") or 0),
        )
        if mla.index_n_heads and not (mla.index_head_dim and mla.index_topk and mla.q_lora_rank):
            raise SpecError(
                f"{source}: missing required key 'index_head_dim' / 'index_topk' / 'q_lora_rank' "
                "(DSA indexer)"
            )
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    else:
        head_dim = int(_get(t, ("head_dim", "attention_head_dim"), 0) or (hidden // heads if heads else 0))
    kinds, window = _layer_types(t, n, mt, source)
    moe = _moe(t, n, mt, kinds)
    inter = t.get("intermediate_size_mlp") or t.get("intermediate_size")
    legacy_mlp = mt in UNGATED_MLP_TYPES
    ungated = legacy_mlp or str(t.get("mlp_hidden_act") or t.get("hidden_act") or "") == "relu2"
    if inter is None and moe is None and legacy_mlp:
        inter = UNGATED_DEFAULT_WIDTH * hidden
    if inter is None and moe is None:
        raise SpecError(f"{source}: missing required key 'intermediate_size'")
    state = _state(t)
    if (LINEAR in kinds or MAMBA in kinds) and state is None:
        raise SpecError(
            f"{source}: missing required key 'linear_num_value_heads' / 'mamba_num_heads' "
            "(hybrid model without its state geometry)"
        )
    tied = t.get("tie_word_embeddings")
    if tied is None:
        tied = mt.startswith(_TIED_DEFAULT_TRUE)
    notes: list[str] = []
    if mt in ("mistral",) and SLIDING in kinds:
        notes.append("sliding_window from config.json: vLLM honours it, llama.cpp runs full attention")
    fields = dict(
        id=meta.pop("id", None) or (t.get("_name_or_path") or Path(source).stem),
        name=meta.pop("name", None) or (t.get("_name_or_path") or Path(source).stem),
        architecture=mt,
        hidden_size=hidden,
        n_layers=n,
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=int(_first(inter) or 0),
        vocab_size=int(t["vocab_size"]),
        max_context=int(t["max_position_embeddings"]),
        layer_types=kinds,
        tie_embeddings=bool(tied),
        window=int(window) if window else None,
        moe=moe,
        mla=mla,
        state=state,
        arch_class=arch_list[0] if arch_list else None,
        native_dtype=_native_dtype(t),
        custom_code=bool(t.get("auto_map")),  # merged_text_config keeps the top-level auto_map
        qkv_bias=bool(t.get("attention_bias") or t.get("qkv_bias") or mt == "qwen2"),
        source=source,
        global_head_dim=int(t["global_head_dim"]) if t.get("global_head_dim") else None,
        global_n_kv_heads=int(t["num_global_key_value_heads"])
        if t.get("num_global_key_value_heads")
        else None,
        k_eq_v=bool(t.get("attention_k_eq_v")),
        ffn_gated=not ungated,
        attn_output_gate=bool(t.get("attn_output_gate", mt == "qwen3_next" or mt.startswith("qwen3_5"))),
        per_layer_input=int(t.get("hidden_size_per_layer_input") or 0),
        n_kv_shared_layers=int(t.get("num_kv_shared_layers") or 0),
        double_wide_mlp=bool(t.get("use_double_wide_mlp")),
        notes=tuple(notes),
    )
    fields.update(meta)
    return ModelSpec(**fields)


def load_hf_config(path: str | Path) -> ModelSpec:
    """ModelSpec from a config.json file or a folder holding one (never touches the network).  The file must
    be a regular file of at most MAX_CONFIG_BYTES holding strict JSON."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not os.path.lexists(p):
        raise SpecError(f"{p}: no such config.json")
    cfg = parse_json(read_text(p, MAX_CONFIG_BYTES), str(p))
    name = p.parent.name if p.name == "config.json" else p.stem
    return spec_from_config(cfg, str(p), id=str(p), name=name)
