"""Weight formats: storage type sizes and per-tensor-class type recipes.

Storage types (``TYPE_SIZES``) are ggml's exact block layouts, copied from ``gguf.GGML_QUANT_SIZES`` (gguf-py
0.17; ggml's ``ggml_type_traits``) so this module imports neither gguf nor numpy: a type stores
``block_elems`` elements in ``block_bytes`` bytes, and a row of ``n`` elements takes
``ceil(n / block_elems) * block_bytes`` bytes (ggml requires whole blocks; see the fallback rule below).
Names are ggml's ``ggml_type_name`` spellings (``q4_K``, ``q8_0``, ``f16`` ...); lookups are case-insensitive.
Engine-only types:

* ``fp8``: 1 byte per element (FP8 E4M3 checkpoints; per-tensor / 128x128-block scales are < 0.03 % and
  ignored);
* ``int4_g128``: AWQ / GPTQ 4-bit, group 128: per group of 128 weights 64 B of nibbles + an fp16 scale (2 B) +
  a 4-bit zero point packed 8 per int32 (0.5 B) = 66.5 B, stored as a 256-element block of 133 B
  (4.156 bits/weight; GPTQ act-order ``g_idx`` int32 per input row is not counted).

llama.cpp recipes (``LLAMA_RECIPES``, ``type_for``) follow ``llama_tensor_get_type`` in
``src/llama-quant.cpp`` (read at ggml-org/llama.cpp@007dbbf and in the llama.cpp tree vendored by
llama-cpp-python 0.3.36, whose quantizer the tests run).  A recipe is a llama-quantize file type
(``ftype``), whether an importance matrix was given (``imatrix``) and the ``--output-tensor-type`` /
``--token-embedding-type`` overrides.
docs/memory-model.md (section 1) lists every recipe with its rules; in short:

* the file type's default type (``llama_ftype_get_default_type``), e.g. Q4_K_M -> q4_K, IQ2_S -> iq2_xs,
  IQ2_M -> iq2_s, IQ3_XS / IQ3_S / IQ3_M -> iq3_s, Q2_K_S -> q2_K, MXFP4_MOE -> mxfp4; F16 / BF16 / F32 leave
  every tensor in that type (no recipe runs for unquantized targets);
* 1-D tensors (norms, biases, sinks), the MoE router ``ffn_gate_inp`` and ``ssm_conv1d`` are never quantized;
* tensor categories come from the name: output, token_embd, attn_qkv / attn_kv_b / attn_v ("attn_v-like"),
  attn_k, attn_q, attn_output, ffn_up*, ffn_gate*, ffn_down*, other;
* counters: llama.cpp walks the tensors sorted by (layer, name) and counts the attn_v-like tensors
  (``i_attention_wv`` of ``n_attention_wv``) and the ffn_down / ffn_gate / ffn_up tensors (``i_ffn_*`` of
  ``n_layer``); the layer rules use the counter, except that models with more than one expert take the layer
  from the tensor name; the 2-bit i-quant family always uses the ffn_down counter;
* output head (and the token embedding when embeddings are tied): the ``--output-tensor-type`` override, else
  q8_0 for MXFP4_MOE or a row length that is not a multiple of the default type's block, else q5_K for
  IQ1_S / IQ1_M / IQ2_XXS / IQ2_XS / IQ2_S / IQ2_M / IQ3_XXS, else q6_K unless the default is q8_0;
* token embedding (untied): the ``--token-embedding-type`` override, else q2_K for IQ1_S / IQ1_M / IQ2_XXS /
  IQ2_XS, iq3_s for IQ2_S / IQ2_M / IQ3_XXS, q4_K for TQ1_0 / TQ2_0, else the default type;
* the per-category promotions of ``_impl`` (attn_v, attn_k, attn_q, ffn_down, attn_output, attn_qkv,
  ffn_gate, ffn_up), with the importance-matrix switches: IQ4_XS / IQ4_NL drop the first-n/8 ffn_down q5_K
  promotion when an imatrix is used, Q4_0 / Q5_0 store the first n/8 ffn_down tensors as q4_1 / q5_1 only
  with an imatrix, IQ3_XXS keeps attn_v at iq3_xxs (GQA < 4) and drops its ffn_down promotion with one;
* ``use_more_bits(i, n) = i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2`` (integer division); a "70B" model
  (llama with 80 layers and GQA, qwen2 with 80 layers) bumps attn_v q3_K / q4_K to q5_K; 8-expert models
  (Mixtral) keep attn_v and attn_k at q8_0 (q4_K for attn_k in the 2-bit i-quants) and attn_output at q5_K;
* fallback (``tensor_type_fallback``): when a row length is not a multiple of the chosen type's block, the
  i-quants -> iq4_nl, q2_K / q3_K / tq1_0 / tq2_0 -> q4_0, q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0; if still
  not divisible -> f16.  The two overrides skip the fallback (llama.cpp returns them as given).

Dynamic per-tensor mixes (Unsloth's ``UD-*`` files) follow no file-type rule: they are sized from their GGUF
file only (``get_quant`` says so for a ``UD-`` name).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import PurePath as Path

from estimator.specs import ModelSpec, QuantSpec, SpecError

# type -> (block elements, block bytes); ggml exact (gguf.GGML_QUANT_SIZES), plus engine-only types.
TYPE_SIZES: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "f64": (1, 8),
    "i8": (1, 1),
    "i16": (1, 2),
    "i32": (1, 4),
    "i64": (1, 8),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
    "q8_0": (32, 34),
    "q8_1": (32, 40),
    "q2_K": (256, 84),
    "q3_K": (256, 110),
    "q4_K": (256, 144),
    "q5_K": (256, 176),
    "q6_K": (256, 210),
    "q8_K": (256, 292),
    "iq2_xxs": (256, 66),
    "iq2_xs": (256, 74),
    "iq2_s": (256, 82),
    "iq3_xxs": (256, 98),
    "iq3_s": (256, 110),
    "iq1_s": (256, 50),
    "iq1_m": (256, 56),
    "iq4_nl": (32, 18),
    "iq4_xs": (256, 136),
    "tq1_0": (256, 54),
    "tq2_0": (256, 66),
    "mxfp4": (32, 17),
    "nvfp4": (64, 36),
    "q1_0": (128, 18),
    # engine-only (not ggml): see module docstring
    "fp8": (1, 1),
    "int4_g128": (256, 133),
}
_CANON = {k.lower(): k for k in TYPE_SIZES}

# llama.cpp fallback chain for rows that are not a multiple of the block size (tensor_type_fallback).
_FALLBACK = {
    "iq4_xs": "iq4_nl",
    "q2_K": "q4_0",
    "q3_K": "q4_0",
    "q4_K": "q5_0",
    "q5_K": "q5_1",
    "q6_K": "q8_0",
    "iq2_xxs": "iq4_nl",
    "iq2_xs": "iq4_nl",
    "iq2_s": "iq4_nl",
    "iq3_xxs": "iq4_nl",
    "iq3_s": "iq4_nl",
    "iq1_s": "iq4_nl",
    "iq1_m": "iq4_nl",
    "tq1_0": "q4_0",
    "tq2_0": "q4_0",
}

# Tensor classes never quantized by llama.cpp (kept F32 by the converter and skipped by the quantizer).
ALWAYS_F32 = frozenset({"norm", "bias", "ffn_gate_inp", "ssm_conv1d", "ssm_small"})
# 2-D tensors llama.cpp's quantizer keeps in the file's float type (llama-quant.cpp: "not too big so keep
# them"): Gemma 4's per_layer_model_proj; 2 bytes per element (F16 or BF16 files)
KEEP_FLOAT = frozenset({"per_layer_model_proj"})

_GGUF = ("gguf",)
_HF = ("safetensors",)
_BOTH = ("gguf", "safetensors")


@dataclass(frozen=True)
class LlamaRecipe:
    """How a llama.cpp GGUF of one quant name is made: ``llama-quantize [--imatrix F] [--output-tensor-type T]
    [--token-embedding-type T] in.gguf out.gguf FTYPE``.  ``ftype`` is the LLAMA_FTYPE_MOSTLY_<ftype> name
    (MXFP4_MOE for MXFP4)."""

    ftype: str
    imatrix: bool = False
    output_type: str | None = None
    token_embd_type: str | None = None


# ftype -> default storage type (llama_ftype_get_default_type)
_FTYPE_DEFAULT = {
    "Q8_0": "q8_0", "Q6_K": "q6_K", "Q5_K_M": "q5_K", "Q5_K_S": "q5_K", "Q5_1": "q5_1", "Q5_0": "q5_0",
    "Q4_K_M": "q4_K", "Q4_K_S": "q4_K", "Q4_1": "q4_1", "Q4_0": "q4_0", "IQ4_NL": "iq4_nl",
    "IQ4_XS": "iq4_xs", "Q3_K_L": "q3_K", "Q3_K_M": "q3_K", "Q3_K_S": "q3_K", "IQ3_M": "iq3_s",
    "IQ3_S": "iq3_s", "IQ3_XS": "iq3_s", "IQ3_XXS": "iq3_xxs", "Q2_K": "q2_K", "Q2_K_S": "q2_K",
    "IQ2_M": "iq2_s", "IQ2_S": "iq2_xs", "IQ2_XS": "iq2_xs", "IQ2_XXS": "iq2_xxs", "TQ2_0": "tq2_0",
    "IQ1_M": "iq1_m", "TQ1_0": "tq1_0", "IQ1_S": "iq1_s", "MXFP4_MOE": "mxfp4",
}  # fmt: skip
# file types whose attn_v / ffn_down / attn_output follow the 2-bit i-quant rules (output head q5_K)
_IQ2_FAMILY = frozenset({"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M"})
_OUTPUT_Q5K = _IQ2_FAMILY | {"IQ3_XXS"}
# 8-expert models: attn_output -> q5_K for these file types
_MOE8_ATTN_OUT = frozenset(
    {"Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M",
     "IQ4_XS"}
)  # fmt: skip
# quantized types that need an importance matrix (tensor_requires_imatrix; q2_K only inside a Q2_K_S file)
_NEEDS_IMATRIX = frozenset({"iq3_xxs", "iq2_xxs", "iq2_xs", "iq2_s", "iq1_m", "iq1_s"})


def _q(name: str, default: str, desc: str, containers: tuple[str, ...] = _GGUF, **types: str) -> QuantSpec:
    base = {"norm": "f32", "bias": "f32", "ffn_gate_inp": "f32"}
    return QuantSpec(
        name=name, default_type=default, types={**base, **types}, description=desc, containers=containers
    )


# name -> (recipe, description); the QuantSpec's default_type is the ftype's default type
_LLAMA: tuple[tuple[str, LlamaRecipe, str], ...] = (
    ("Q8_0", LlamaRecipe("Q8_0"), "ggml 8-bit, 32-element blocks (8.5 bits/weight)"),
    ("Q6_K_L", LlamaRecipe("Q6_K", output_type="q8_0", token_embd_type="q8_0"),
     "Q6_K with output head and token embedding in q8_0 (--output-tensor-type / --token-embedding-type)"),
    ("Q6_K", LlamaRecipe("Q6_K"), "ggml 6-bit k-quant (6.5625 bits/weight)"),
    ("Q5_K_L", LlamaRecipe("Q5_K_M", output_type="q8_0", token_embd_type="q8_0"),
     "Q5_K_M with output head and token embedding in q8_0"),
    ("Q5_K_M", LlamaRecipe("Q5_K_M"), "5-bit k-quant; attn_v / ffn_down q6_K on use_more_bits layers"),
    ("Q5_K_S", LlamaRecipe("Q5_K_S"), "5-bit k-quant, no promotions except the head"),
    ("Q5_1", LlamaRecipe("Q5_1"), "ggml legacy 5-bit with offset, 32-element blocks (6 bits/weight)"),
    ("Q5_0", LlamaRecipe("Q5_0"), "ggml legacy 5-bit, 32-element blocks (5.5 bits/weight)"),
    ("Q5_0-imatrix", LlamaRecipe("Q5_0", imatrix=True),
     "Q5_0 made with an importance matrix: first n/8 ffn_down q5_1"),
    ("Q4_K_L", LlamaRecipe("Q4_K_M", output_type="q8_0", token_embd_type="q8_0"),
     "Q4_K_M with output head and token embedding in q8_0"),
    ("Q4_K_M", LlamaRecipe("Q4_K_M"), "4-bit k-quant; attn_v / ffn_down q6_K on use_more_bits layers"),
    ("Q4_K_S", LlamaRecipe("Q4_K_S"), "4-bit k-quant; first attn_v and ffn_down layers q5_K"),
    ("Q4_1", LlamaRecipe("Q4_1"), "ggml legacy 4-bit with offset, 32-element blocks (5 bits/weight)"),
    ("Q4_0", LlamaRecipe("Q4_0"), "ggml legacy 4-bit, 32-element blocks (4.5 bits/weight)"),
    ("Q4_0-imatrix", LlamaRecipe("Q4_0", imatrix=True),
     "Q4_0 made with an importance matrix: first n/8 ffn_down q4_1"),
    ("IQ4_NL", LlamaRecipe("IQ4_NL", imatrix=True),
     "4.5-bit non-linear i-quant, 32-element blocks (imatrix); attn_v q5_K (GQA >= 4)"),
    ("IQ4_NL-static", LlamaRecipe("IQ4_NL"), "IQ4_NL made without an imatrix: first n/8 ffn_down q5_K"),
    ("IQ4_XS", LlamaRecipe("IQ4_XS", imatrix=True),
     "4.25-bit i-quant (imatrix, as published files); attn_v q5_K (GQA >= 4)"),
    ("IQ4_XS-static", LlamaRecipe("IQ4_XS"), "IQ4_XS made without an imatrix: first n/8 ffn_down q5_K"),
    ("Q3_K_XL", LlamaRecipe("Q3_K_L", output_type="q8_0", token_embd_type="q8_0"),
     "Q3_K_L with output head and token embedding in q8_0"),
    ("Q3_K_L", LlamaRecipe("Q3_K_L"), "3-bit k-quant; attn_v, attn_output and ffn_down q5_K"),
    ("Q3_K_M", LlamaRecipe("Q3_K_M"),
     "3-bit k-quant; attn_v q5_K/q4_K, attn_output q4_K, ffn_down q4_K/q5_K"),
    ("IQ3_M", LlamaRecipe("IQ3_M", imatrix=True),
     "3.4-bit i-quant; attn_v / attn_output q4_K, first n/8 ffn_down q4_K"),
    ("Q3_K_S", LlamaRecipe("Q3_K_S"), "3-bit k-quant, no promotions except the head"),
    ("IQ3_S", LlamaRecipe("IQ3_S", imatrix=True), "3.44-bit i-quant; attn_v q4_K (GQA >= 4)"),
    ("IQ3_XS", LlamaRecipe("IQ3_XS", imatrix=True),
     "3.3-bit i-quant mix: iq3_s with attn_q / attn_k and middle ffn_gate / ffn_up iq3_xxs"),
    ("IQ3_XXS", LlamaRecipe("IQ3_XXS", imatrix=True),
     "3.06-bit i-quant (needs an imatrix); attn_q / attn_k iq2_s, attn_output iq3_s"),
    ("Q2_K_L", LlamaRecipe("Q2_K", output_type="q8_0", token_embd_type="q8_0"),
     "Q2_K with output head and token embedding in q8_0"),
    ("Q2_K", LlamaRecipe("Q2_K"), "2-bit k-quant; attn_v q4_K/q3_K, attn_output and ffn_down q3_K"),
    ("Q2_K_S", LlamaRecipe("Q2_K_S", imatrix=True),
     "2-bit k-quant (needs an imatrix); attn_v q4_K (GQA >= 4), first n/8 ffn_down q4_K"),
    ("IQ2_M", LlamaRecipe("IQ2_M", imatrix=True),
     "2.7-bit i-quant (needs an imatrix); iq2_s with attn_v / first ffn_down iq3_s"),
    ("IQ2_S", LlamaRecipe("IQ2_S", imatrix=True),
     "2.5-bit i-quant (needs an imatrix); iq2_xs with attn_v / first ffn_down iq3_s"),
    ("IQ2_XS", LlamaRecipe("IQ2_XS", imatrix=True),
     "2.31-bit i-quant (needs an imatrix); attn_v / first ffn_down q2_K"),
    ("IQ2_XXS", LlamaRecipe("IQ2_XXS", imatrix=True),
     "2.06-bit i-quant (needs an imatrix); attn_v / first ffn_down q2_K"),
    ("TQ2_0", LlamaRecipe("TQ2_0"), "ternary 2.06-bit (TriLM / BitNet-style models only)"),
    ("IQ1_M", LlamaRecipe("IQ1_M", imatrix=True),
     "1.75-bit i-quant (needs an imatrix); attn_output iq2_xxs, attn_v / first ffn_down q2_K"),
    ("TQ1_0", LlamaRecipe("TQ1_0"), "ternary 1.69-bit (TriLM / BitNet-style models only)"),
    ("IQ1_S", LlamaRecipe("IQ1_S", imatrix=True),
     "1.56-bit i-quant (needs an imatrix); attn_output iq2_xxs, attn_v / first ffn_down q2_K"),
    ("MXFP4", LlamaRecipe("MXFP4_MOE"),
     "llama.cpp MXFP4_MOE: experts MXFP4 (4.25 bits), other matrices q8_0"),
)  # fmt: skip

LLAMA_RECIPES: dict[str, LlamaRecipe] = {name: r for name, r, _ in _LLAMA}

# ``types`` lists the layer-independent class types; layer rules live in ``type_for``.
QUANTS: dict[str, QuantSpec] = {
    q.name: q
    for q in (
        _q("F32", "f32", "32-bit float everywhere", _BOTH),
        _q("F16", "f16", "16-bit float", _BOTH),
        _q("BF16", "bf16", "bfloat16 (native checkpoint dtype of most models)", _BOTH),
        _q(
            "FP8",
            "fp8",
            "FP8 E4M3 linear layers; embeddings, head, norms in bf16 (vLLM / HF fp8)",
            _HF,
            token_embd="bf16",
            output="bf16",
            norm="bf16",
            bias="bf16",
            ffn_gate_inp="bf16",
        ),
        *(
            _q(name, _FTYPE_DEFAULT[r.ftype], desc, _BOTH if r.ftype == "MXFP4_MOE" else _GGUF)
            for name, r, desc in _LLAMA
        ),
        _q(
            "AWQ-INT4",
            "int4_g128",
            "AWQ 4-bit, group 128, fp16 scales + 4-bit zeros; embeddings/head fp16",
            _HF,
            token_embd="f16",
            output="f16",
            norm="f16",
            bias="f16",
            ffn_gate_inp="f16",
        ),
        _q(
            "GPTQ-INT4",
            "int4_g128",
            "GPTQ 4-bit, group 128, fp16 scales + 4-bit zeros; embeddings/head fp16",
            _HF,
            token_embd="f16",
            output="f16",
            norm="f16",
            bias="f16",
            ffn_gate_inp="f16",
        ),
    )
}
# Variants that differ from a listed recipe only by the importance matrix: resolvable by name (and ``i1-``),
# not listed in QUANTS, so a quant matrix shows one row per llama-quantize file type.
VARIANTS: dict[str, QuantSpec] = {
    name: QUANTS.pop(name) for name in ("Q5_0-imatrix", "Q4_0-imatrix", "IQ4_NL-static", "IQ4_XS-static")
}
_QUANT_KEYS = {k.upper(): k for k in (*QUANTS, *VARIANTS)} | {
    "MXFP4_MOE": "MXFP4",
    "AWQ": "AWQ-INT4",
    "GPTQ": "GPTQ-INT4",
}
_UNQUANTIZED = frozenset({"f32", "f16", "bf16"})


def canonical_type(type_name: str) -> str:
    """ggml spelling of a storage type name (case-insensitive); SpecError when unknown."""
    canon = _CANON.get(str(type_name).lower())
    if canon is None:
        raise SpecError(f"unknown storage type {type_name!r}; known: {', '.join(sorted(TYPE_SIZES))}")
    return canon


def _imatrix_name(name: str) -> str | None:
    """The recipe name an ``i1-`` prefix (mradermacher's spelling of an imatrix quant) stands for."""
    base = name[3:]
    key = _QUANT_KEYS.get(base)
    if key is None or key not in LLAMA_RECIPES:
        return None
    if LLAMA_RECIPES[key].imatrix:
        return key
    return _QUANT_KEYS.get(f"{key}-IMATRIX", key)  # k-quants: an imatrix does not change their types


def get_quant(name: str) -> QuantSpec:
    """QuantSpec by name (case-insensitive; ``i1-<name>`` = the imatrix recipe); SpecError naming the three
    nearest names when unknown, or saying that a ``UD-`` dynamic mix is sized from its GGUF file."""
    text = str(name).strip().upper()
    key = _QUANT_KEYS.get(text)
    if key is None and text.startswith("I1-"):
        key = _imatrix_name(text)
    if key is None:
        if text.startswith("UD-"):
            raise SpecError(
                f"{name} is a dynamic per-tensor mix (Unsloth Dynamic): no file-type rule reproduces it; "
                "pass the .gguf file (the first shard of a split file) as the model to size its tensors"
            )
        near = difflib.get_close_matches(text, list(QUANTS), n=3, cutoff=0.0)
        raise SpecError(f"unknown quant {name!r}; closest: {', '.join(near)}")
    return QUANTS.get(key) or VARIANTS[key]


def catalog_quant(name: str) -> QuantSpec | None:
    """The shipped QuantSpec of that exact name (a listed one or an imatrix / static variant), else None."""
    return QUANTS.get(name) or VARIANTS.get(name)


def as_listed(quant: QuantSpec) -> QuantSpec:
    """``quant`` without an engine's loading flag (``QuantSpec.fills_k_eq_v``, which adds tensors, not types):
    the shipped object when that is what remains, so a listed format keeps its recipe rules (serving formats'
    bf16 attention, llama.cpp's promotions) in what an engine loads."""
    if not quant.fills_k_eq_v:
        return quant
    q = replace(quant, fills_k_eq_v=False)
    listed = catalog_quant(q.name)
    return listed if listed == q else q


def llama_recipe(quant: QuantSpec | str) -> LlamaRecipe | None:
    """The llama-quantize recipe behind a quant (None for unquantized, checkpoint and serving formats)."""
    name = quant.name if isinstance(quant, QuantSpec) else get_quant(quant).name
    return LLAMA_RECIPES.get(name)


def file_quant(model: ModelSpec) -> QuantSpec:
    """The weight format of a GGUF model's own file: its tensors as stored (exact bytes), named after the
    file's type (``ModelSpec.native_dtype``, e.g. "Q8_0" -> "Q8_0 (GGUF file)"), default type the storage type
    holding most bytes.  SpecError for a model without GGUF tensors."""
    if model.gguf_tensors is None:
        raise SpecError(f"{model.id} is not a GGUF file: name a weight format to size it in")
    by_type: dict[str, int] = {}
    for _, ttype, _, nb in model.gguf_tensors:
        by_type[ttype] = by_type.get(ttype, 0) + nb
    main = max(by_type, key=by_type.get) if by_type else "f16"
    return QuantSpec(
        name=f"{model.native_dtype} (GGUF file)",
        default_type=main,
        description=f"the file's own tensor types, exact bytes ({Path(model.gguf_path or model.id).name})",
        containers=_GGUF,
        from_file=True,
    )


def row_bytes(type_name: str, n_elements: int) -> int:
    """Bytes of ``n_elements`` stored as ``type_name``: ceil(n / block_elems) * block_bytes."""
    be, bb = TYPE_SIZES[canonical_type(type_name)]
    return -(-int(n_elements) // be) * bb


def bits_per_weight(type_name: str) -> float:
    """8 * block_bytes / block_elems."""
    be, bb = TYPE_SIZES[canonical_type(type_name)]
    return 8.0 * bb / be


_KV_TYPES = {
    "f32": "f32",
    "f16": "f16",
    "bf16": "bf16",
    "q8_0": "q8_0",
    "q4_0": "q4_0",
    "q4_1": "q4_1",
    "q5_0": "q5_0",
    "q5_1": "q5_1",
    "iq4_nl": "iq4_nl",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "auto": "bf16",
}


def kv_type(kv_dtype: str) -> str:
    """Storage type of a KV-cache dtype name (llama.cpp -ctk/-ctv names, vLLM --kv-cache-dtype names)."""
    t = _KV_TYPES.get(str(kv_dtype).lower())
    if t is None:
        raise SpecError(f"unknown KV cache dtype {kv_dtype!r}; known: {', '.join(sorted(_KV_TYPES))}")
    return t


def kv_type_bytes(kv_dtype: str, n_elements: int) -> int:
    """Bytes of one KV row of ``n_elements`` (e.g. n_kv_heads*head_dim) in ``kv_dtype``.

    q8_0 stores 32 elements in 34 bytes, so a 1,024-element row takes 1,088 bytes (not 1,024).
    """
    return row_bytes(kv_type(kv_dtype), n_elements)


def use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama.cpp's promotion rule: first and last eighth of the layers, plus every third layer between."""
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def fallback_type(type_name: str, row_len: int) -> str:
    """Type llama.cpp stores a row of ``row_len`` elements in when ``type_name`` needs whole blocks."""
    t = type_name if type_name in TYPE_SIZES else canonical_type(type_name)
    if row_len % TYPE_SIZES[t][0] == 0:
        return t
    fb = _FALLBACK.get(t, "f16")
    return fb if row_len % TYPE_SIZES[fb][0] == 0 else "f16"


def category(tclass: str) -> str:
    """llama.cpp's tensor category of a tensor class (``tensor_get_category``): output, token_embd, attn_v
    (attn_v, attn_qkv, attn_kv_b: the attn_v-like tensors), attn_k, attn_q, attn_output, ffn_up, ffn_gate,
    ffn_down (their expert and shared-expert forms included) or other."""
    if tclass in ("output", "token_embd", "attn_k", "attn_q", "attn_output"):
        return tclass
    if tclass == "per_layer_token_embd":  # llama-quant.cpp tensor_name_match_token_embd
        return "token_embd"
    if tclass in ("attn_v", "attn_qkv", "attn_kv_b"):
        return "attn_v"
    for prefix in ("ffn_up", "ffn_gate", "ffn_down"):
        if tclass.startswith(prefix):
            return prefix
    return "other"


# categories whose type depends on the tensor's counter / layer (see ``_llama_type``)
COUNTED_CATEGORIES = frozenset({"attn_v", "ffn_down", "ffn_gate", "ffn_up"})


def _output_type(ftype: str, default: str, row_len: int) -> str:
    """Output head (and a tied embedding) without an override, before the fallback."""
    if ftype == "MXFP4_MOE" or row_len % TYPE_SIZES[default][0] != 0:
        return "q8_0"
    if ftype in _OUTPUT_Q5K:
        return "q5_K"
    return default if default == "q8_0" else "q6_K"


def _iq2_family_type(
    ftype: str, cat: str, default: str, n_gqa: int, n_expert: int, counter: int, n_layers: int
) -> str:
    """attn_v / attn_k / ffn_down / attn_output of IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M."""
    wide = "iq3_s" if ftype in ("IQ2_S", "IQ2_M") else "q2_K"
    if cat == "attn_v":
        return "q4_K" if n_gqa >= 4 or n_expert >= 4 else wide
    if cat == "attn_k" and n_expert == 8:
        return "q4_K"
    if cat == "ffn_down":
        return wide if counter < n_layers // 8 else default
    if cat == "attn_output":
        if n_expert == 8:
            return "q5_K"
        if ftype in ("IQ1_S", "IQ1_M"):
            return "iq2_xxs"
        if ftype in ("IQ2_S", "IQ2_M"):
            return "iq3_s"
    return default


def _attn_v_type(
    ftype: str, imatrix: bool, default: str, n_gqa: int, n_expert: int, is_70b: bool, i: int, n: int
) -> str:
    t = default
    if ftype == "Q2_K":
        t = "q4_K" if n_gqa >= 4 else "q3_K"
    elif ftype == "Q2_K_S" and n_gqa >= 4:
        t = "q4_K"
    elif ftype == "IQ3_XXS":
        t = "q4_K" if n_gqa >= 4 else ("iq3_xxs" if imatrix else "iq3_s")
    elif ftype in ("IQ3_XS", "IQ3_S") and n_gqa >= 4:
        t = "q4_K"
    elif ftype == "IQ3_M":
        t = "q4_K"
    elif ftype == "Q3_K_M":
        t = "q5_K" if i < 2 else "q4_K"
    elif ftype == "Q3_K_L":
        t = "q5_K"
    elif ftype in ("IQ4_NL", "IQ4_XS") and n_gqa >= 4:
        t = "q5_K"
    elif ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n):
        t = "q6_K"
    elif ftype == "Q4_K_S" and i < 4:
        t = "q5_K"
    if is_70b and t in ("q3_K", "q4_K"):
        t = "q5_K"
    return "q8_0" if n_expert == 8 else t


def _ffn_down_type(ftype: str, imatrix: bool, default: str, n_expert: int, i: int, n: int) -> str:
    if ftype == "Q2_K":
        return "q3_K"
    if ftype == "Q2_K_S":
        return "q4_K" if i < n // 8 else default
    if ftype == "IQ3_XXS" and not imatrix:
        return "q4_K" if i < n // 8 else "q3_K"
    if ftype == "Q3_K_M":
        return "q5_K" if i < n // 16 else "q4_K"
    if ftype == "IQ3_M":
        return "q4_K" if i < n // 8 or (n_expert == 8 and use_more_bits(i, n)) else default
    if ftype == "Q3_K_L":
        return "q5_K"
    if ftype in ("Q4_K_M", "Q5_K_M"):
        return "q6_K" if use_more_bits(i, n) else default
    if ftype in ("IQ4_NL", "IQ4_XS"):
        return "q5_K" if i < n // 8 and not imatrix else default
    if ftype == "Q4_K_S":
        return "q5_K" if i < n // 8 else default
    if ftype in ("Q4_0", "Q5_0") and imatrix and i < n // 8:
        return "q4_1" if ftype == "Q4_0" else "q5_1"
    return default


def _attn_output_type(ftype: str, default: str, n_expert: int) -> str:
    if n_expert == 8:
        return "q5_K" if ftype in _MOE8_ATTN_OUT else default
    return {"Q2_K": "q3_K", "IQ3_XXS": "iq3_s", "Q3_K_M": "q4_K", "Q3_K_L": "q5_K", "IQ3_M": "q4_K"}.get(
        ftype, default
    )


@lru_cache(maxsize=65536)
def _llama_type(
    qname: str,
    tclass: str,
    layer: int,
    n_layers: int,
    n_gqa: int,
    n_expert: int,
    is_70b: bool,
    tied: bool,
    row_len: int,
    is_expert3d: bool,
    counter: int,
) -> str:
    """Storage type of one tensor (``type_for`` documents the arguments).  ``n_layers`` is the number of
    attn_v-like tensors for an attn_v-like class and the model's layer count otherwise."""
    q = catalog_quant(qname)
    default = q.default_type
    if tclass in ALWAYS_F32:
        return q.types.get(tclass, "f32")
    if qname in SERVING_RECIPES:  # serving-engine checkpoint formats (block at the end of this module)
        return _serving_type(qname, tclass, row_len)
    if default in _UNQUANTIZED or default == "fp8":  # the format's own class types (FP8: bf16 embeddings)
        return q.types.get(tclass, default)
    if tclass in KEEP_FLOAT:
        return "f16"
    if qname in ("AWQ-INT4", "GPTQ-INT4"):
        t = q.types.get(tclass, default)
        return t if t != default or row_len % 128 == 0 else "f16"
    r = LLAMA_RECIPES[qname]
    ftype = r.ftype
    cat = category(tclass)
    if cat == "token_embd" and r.token_embd_type:
        return r.token_embd_type  # llama.cpp returns the override as given (no fallback)
    if cat == "output" and r.output_type:
        return r.output_type
    if cat == "output" or (tied and cat == "token_embd"):
        return fallback_type(r.output_type or _output_type(ftype, default, row_len), row_len)
    if ftype == "MXFP4_MOE":
        return fallback_type("mxfp4" if is_expert3d else "q8_0", row_len)
    t = default
    # the layer the ffn rules see: the tensor's counter, or its layer (from the name) with experts
    i_ffn = layer if n_expert > 1 else counter
    if cat == "token_embd":
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            t = "q2_K"
        elif ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            t = "iq3_s"
        elif ftype in ("TQ1_0", "TQ2_0"):
            t = "q4_K"
    elif ftype in _IQ2_FAMILY:
        t = _iq2_family_type(ftype, cat, default, n_gqa, n_expert, counter, n_layers)
    elif cat == "attn_v":
        t = _attn_v_type(ftype, r.imatrix, default, n_gqa, n_expert, is_70b, counter, n_layers)
    elif cat in ("attn_k", "attn_q"):
        if cat == "attn_k" and n_expert == 8:
            t = "q8_0"
        elif ftype == "IQ3_XS":
            t = "iq3_xxs"
        elif ftype == "IQ3_XXS":
            t = "iq2_s"
    elif cat == "ffn_down":
        t = _ffn_down_type(ftype, r.imatrix, default, n_expert, i_ffn, n_layers)
    elif cat == "attn_output":
        t = _attn_output_type(ftype, default, n_expert)
    elif cat in ("ffn_gate", "ffn_up"):
        if ftype == "IQ3_XS" and n_layers // 8 <= i_ffn < 7 * n_layers // 8:
            t = "iq3_xxs"
    # (llama.cpp's separate attn_qkv branch is never reached: attn_qkv is attn_v-like and takes that branch)
    return fallback_type(t, row_len)


def type_for(
    quant: QuantSpec | str,
    tensor_class: str,
    layer: int = 0,
    n_layers: int = 1,
    *,
    n_gqa: int = 1,
    n_expert: int = 0,
    is_70b: bool = False,
    tied: bool = False,
    row_len: int = 256,
    is_expert3d: bool = False,
    wv_index: int | None = None,
    counter: int | None = None,
) -> str:
    """Storage type of one tensor under ``quant``.

    tensor_class: a QuantSpec tensor class (token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_gate,
    ffn_up, ffn_down, ffn_*_exps, ffn_*_shexp, norm, bias, ffn_gate_inp, other ...).  ``layer`` / ``n_layers``
    drive the ffn rules (for an attn_v-like class ``n_layers`` is the number of attn_v-like tensors);
    ``counter`` (default: ``wv_index``, else ``layer``) is the tensor's position among the tensors of its
    category in llama.cpp's (layer, name) order.  ``row_len`` is the tensor's ne[0] (input features) for the
    block-size fallback.
    """
    q = as_listed(get_quant(quant) if isinstance(quant, str) else quant)
    if catalog_quant(q.name) is not q:
        t = q.types.get(tensor_class, q.default_type)
        return fallback_type(t, row_len)
    if counter is None:
        counter = layer if wv_index is None else wv_index
    return _llama_type(
        q.name,
        tensor_class,
        int(layer),
        int(n_layers),
        int(n_gqa),
        int(n_expert),
        bool(is_70b),
        bool(tied),
        int(row_len),
        bool(is_expert3d),
        int(counter),
    )


# ==========================================================================================================
# Serving-engine checkpoint formats (vLLM / SGLang / TensorRT-LLM): NVFP4, FP8 per-tensor and block-128,
# compressed-tensors W4A16 (group 32 / 128), MXFP4.  Exact tensor bytes in ``CHECKPOINT_FORMATS`` /
# ``checkpoint_tensor_bytes``; the estimator recipes (QuantSpecs below) sum the same bytes per element through
# block storage types, without the few per-tensor scalars (8 B or 16 B per tensor, < 1e-6 of a model).
# ==========================================================================================================


@dataclass(frozen=True)
class CheckpointFormat:
    """How one weight matrix of ``rows`` (output) x ``cols`` (input) elements is stored in a checkpoint.

    bytes = rows x ceil(cols / pack_elems) x pack_bytes                     (values, padded per row)
          + n_scales x scale_bytes                                          (group or block scales)
          + per_tensor_bytes                                                (scalars / metadata)
    n_scales = rows x ceil(cols / group)                    for a 1-D group along the input dimension,
             = ceil(rows / block[0]) x ceil(cols / block[1]) for a 2-D block,
             = 0                                            with neither.
    """

    name: str
    pack_elems: int  # values per storage word
    pack_bytes: int  # bytes of that word
    scale_bytes: int
    per_tensor_bytes: int
    group: int | None = None
    block: tuple[int, int] | None = None
    description: str = ""


CHECKPOINT_FORMATS: dict[str, CheckpointFormat] = {
    f.name: f
    for f in (
        CheckpointFormat(
            "NVFP4", 2, 1, 1, 8, group=16,
            description="ModelOpt NVFP4 (vLLM modelopt.py): E2M1 values 2 per byte (weight uint8 [rows, "
            "cols/2]), one FP8 E4M3 scale per 16 inputs (weight_scale [rows, cols/16]), FP32 weight_scale_2 "
            "(global) + FP32 input_scale per tensor: 4.5 bits/weight + 8 B",
        ),
        CheckpointFormat(
            "MXFP4", 2, 1, 1, 0, group=32,
            description="OCP MXFP4 (gpt-oss *_blocks / *_scales): E2M1 values 2 per byte, one E8M0 scale "
            "byte per 32 inputs: 4.25 bits/weight",
        ),
        CheckpointFormat(
            "FP8", 1, 1, 0, 8,
            description="FP8 E4M3, per-tensor static scales (ModelOpt / compressed-tensors FP8): 1 B per "
            "value + FP32 weight_scale + FP32 input_scale per tensor (dynamic-activation checkpoints store "
            "no input_scale: 4 B less)",
        ),
        CheckpointFormat(
            "FP8-BLOCK", 1, 1, 4, 0, block=(128, 128),
            description="FP8 E4M3 with one FP32 weight_scale_inv per 128 x 128 block (DeepSeek-V3/R1, "
            "Qwen3-FP8, MiniMax-M2.5, GLM-5-FP8: quant_method fp8, weight_block_size [128, 128]; "
            "activations quantized dynamically, no stored input scale)",
        ),
        CheckpointFormat(
            "W4A16-G128", 8, 4, 2, 16, group=128,
            description="compressed-tensors pack-quantized W4A16 (symmetric INT4, group 128): weight_packed "
            "int32 [rows, ceil(cols/8)], weight_scale in the checkpoint dtype (bf16/fp16, 2 B) [rows, "
            "ceil(cols/128)], weight_shape int64 [2] (16 B); symmetric: no zero point stored",
        ),
        CheckpointFormat(
            "W4A16-G32", 8, 4, 2, 16, group=32,
            description="compressed-tensors pack-quantized W4A16 (symmetric INT4, group 32): as W4A16-G128 "
            "with one bf16 scale per 32 inputs",
        ),
    )
}  # fmt: skip


def checkpoint_tensor_bytes(fmt: CheckpointFormat | str, rows: int, cols: int) -> int:
    """Exact stored bytes of one ``rows`` x ``cols`` weight matrix in ``fmt`` (formula: CheckpointFormat).

    E.g. a 4096 x 4096 matrix: NVFP4 9,437,192 B; MXFP4 8,912,896 B; FP8 16,777,224 B; FP8-BLOCK
    16,781,312 B; W4A16-G128 8,650,768 B; W4A16-G32 9,437,200 B.
    """
    f = CHECKPOINT_FORMATS[fmt.upper()] if isinstance(fmt, str) else fmt
    if rows < 1 or cols < 1:
        raise SpecError(f"a weight matrix needs rows, cols >= 1 (got {rows} x {cols})")
    values = rows * -(-cols // f.pack_elems) * f.pack_bytes
    if f.group is not None:
        n_scales = rows * -(-cols // f.group)
    elif f.block is not None:
        n_scales = -(-rows // f.block[0]) * -(-cols // f.block[1])
    else:
        n_scales = 0
    return values + n_scales * f.scale_bytes + f.per_tensor_bytes


# Block storage types of the recipes (bytes per element as stored; per-tensor scalars left out, see above).
# nvfp4 (ggml's 64-element block: 4 x (8 B values + 1 B E4M3 scale)) and mxfp4 are already exact above.
TYPE_SIZES.update(
    {
        "fp8_b128": (16384, 16388),  # 128 x 128 FP8 values + one FP32 scale (exact when rows, cols % 128 = 0)
        "int4_g128_sym": (128, 66),  # 64 B of nibbles + one bf16 scale
        "int4_g32_sym": (32, 18),  # 16 B of nibbles + one bf16 scale
    }
)
_CANON.update({k.lower(): k for k in ("fp8_b128", "int4_g128_sym", "int4_g32_sym")})

# Tensor classes of the FFN (dense, shared and routed experts): what NVIDIA's NVFP4 checkpoints quantize.
_FFN_CLASSES = frozenset(
    {"ffn_gate", "ffn_up", "ffn_down", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_shexp",
     "ffn_up_shexp", "ffn_down_shexp"}
)  # fmt: skip
_BF16_KEEP = dict(token_embd="bf16", output="bf16", norm="bf16", bias="bf16", ffn_gate_inp="bf16")


def _serving_q(name: str, default: str, desc: str) -> QuantSpec:
    return QuantSpec(name=name, default_type=default, types={**_BF16_KEEP}, description=desc, containers=_HF)


# name -> (recipe, quantize only FFN matrices, minimum row length the format's scale group needs)
SERVING_RECIPES: dict[str, tuple[QuantSpec, bool, int]] = {
    "NVFP4": (
        _serving_q(
            "NVFP4", "nvfp4",
            "NVFP4 (ModelOpt): FFN/expert matrices E2M1 + E4M3 scale per 16 (4.5 bits); attention, "
            "embeddings, head, router bf16 (NVIDIA NVFP4 checkpoints' exclude_modules)",
        ),
        True, 16,
    ),
    "FP8-BLOCK": (
        _serving_q(
            "FP8-BLOCK", "fp8_b128",
            "FP8 E4M3 linear layers, FP32 scale per 128x128 block (DeepSeek/Qwen3/MiniMax FP8 checkpoints); "
            "embeddings, head, router bf16",
        ),
        False, 1,
    ),
    "W4A16-G128": (
        _serving_q(
            "W4A16-G128", "int4_g128_sym",
            "compressed-tensors W4A16: symmetric INT4, bf16 scale per 128 inputs (4.125 bits); "
            "embeddings, head, router bf16",
        ),
        False, 1,
    ),
    "W4A16-G32": (
        _serving_q(
            "W4A16-G32", "int4_g32_sym",
            "compressed-tensors W4A16: symmetric INT4, bf16 scale per 32 inputs (4.5 bits); "
            "embeddings, head, router bf16",
        ),
        False, 1,
    ),
}  # fmt: skip
QUANTS.update({name: recipe for name, (recipe, _, _) in SERVING_RECIPES.items()})
_QUANT_KEYS.update(
    {name: name for name in SERVING_RECIPES} | {"FP8_BLOCK": "FP8-BLOCK", "W4A16": "W4A16-G128"}
)


def _serving_type(qname: str, tclass: str, row_len: int) -> str:
    """Storage type of a matrix under a serving recipe: the recipe's type, bf16 where the checkpoints keep
    bf16 (embeddings, head, router; attention too for FFN-only NVFP4) or where a row is shorter than one
    scale group."""
    recipe, ffn_only, min_row = SERVING_RECIPES[qname]
    if tclass in recipe.types:
        return recipe.types[tclass]
    if ffn_only and tclass not in _FFN_CLASSES:
        return "bf16"
    return recipe.default_type if row_len % min_row == 0 else "bf16"
