"""Weight formats: storage type sizes and per-tensor-class type recipes.

Storage types (``TYPE_SIZES``) are ggml's exact block layouts, copied from ``gguf.GGML_QUANT_SIZES`` (gguf-py
0.17; ggml's ``ggml_type_traits``) so this module imports neither gguf nor numpy: a type stores
``block_elems``
elements in ``block_bytes`` bytes, and a row of ``n`` elements takes ``ceil(n / block_elems) * block_bytes``
bytes (ggml requires whole blocks; see the fallback rule below).  Names are ggml's ``ggml_type_name``
spellings
(``q4_K``, ``q8_0``, ``f16`` ...); lookups are case-insensitive.  Engine-only types:

* ``fp8``: 1 byte per element (FP8 E4M3 checkpoints; per-tensor / 128x128-block scales are < 0.03 % and
  ignored);
* ``int4_g128``: AWQ / GPTQ 4-bit, group 128: per group of 128 weights 64 B of nibbles + an fp16 scale (2 B) +
  a 4-bit zero point packed 8 per int32 (0.5 B) = 66.5 B, stored as a 256-element block of 133 B
  (4.156 bits/weight; GPTQ act-order ``g_idx`` int32 per input row is not counted).

llama.cpp recipes (``type_for``) follow ``llama_tensor_get_type`` in ``src/llama-quant.cpp`` (read at
ggml-org/llama.cpp@007dbbf):

* the file type's default type (``llama_ftype_get_default_type``): Q4_K_M/Q4_K_S -> q4_K, Q5_K_M/Q5_K_S ->
  q5_K,
  Q3_K_M -> q3_K, Q2_K -> q2_K, Q6_K -> q6_K, IQ4_XS -> iq4_xs, Q4_0 -> q4_0, Q8_0 -> q8_0, MXFP4
  (MXFP4_MOE) ->
  mxfp4; F16/BF16/F32 leave every tensor in that type (no recipe runs for unquantized targets);
* 1-D tensors (norms, biases, sinks), the MoE router ``ffn_gate_inp`` and ``ssm_conv1d`` are never quantized:
  F32;
* output head (and the token embedding when embeddings are tied): q6_K, except Q8_0 stays q8_0, MXFP4_MOE ->
  q8_0,
  and a row length not divisible by the default type's block -> q8_0;
* attn_v (also attn_qkv / attn_kv_b): Q2_K -> q4_K if n_gqa >= 4 else q3_K; Q3_K_M -> q5_K for the first two,
  q4_K after; Q4_K_M / Q5_K_M -> q6_K when ``use_more_bits(i, n)``; Q4_K_S -> q5_K for i < 4; IQ4_XS -> q5_K
  if
  n_gqa >= 4; a "70B" model (80-layer llama / qwen2) bumps q3_K / q4_K to q5_K; 8-expert models (Mixtral) ->
  q8_0;
* attn_k: 8-expert models -> q8_0;
* ffn_down (dense, shared and routed experts; the layer index comes from the tensor name): Q2_K -> q3_K;
  Q3_K_M -> q5_K for i < n/16 else q4_K; Q4_K_M / Q5_K_M -> q6_K when ``use_more_bits``; IQ4_XS -> q5_K for
  i < n/8 (no imatrix); Q4_K_S -> q5_K for i < n/8;
* attn_output: 8-expert models -> q5_K for Q2_K/Q3_K_M/Q4_K_S/Q4_K_M/IQ4_XS; otherwise Q2_K -> q3_K, Q3_K_M ->
  q4_K;
* MXFP4_MOE: 3-D expert tensors -> mxfp4, every other 2-D tensor -> q8_0;
* ``use_more_bits(i, n) = i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2`` (integer division);
* fallback (``tensor_type_fallback``): when a row length is not a multiple of the chosen type's block, iq4_xs
  ->
  iq4_nl, q2_K/q3_K -> q4_0, q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0; if still not divisible -> f16.
"""

from __future__ import annotations

import difflib
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

_GGUF = ("gguf",)
_HF = ("safetensors",)
_BOTH = ("gguf", "safetensors")


def _q(name: str, default: str, desc: str, containers: tuple[str, ...] = _GGUF, **types: str) -> QuantSpec:
    base = {"norm": "f32", "bias": "f32", "ffn_gate_inp": "f32"}
    return QuantSpec(
        name=name, default_type=default, types={**base, **types}, description=desc, containers=containers
    )


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
        _q("Q8_0", "q8_0", "ggml 8-bit, 32-element blocks (8.5 bits/weight)", output="q8_0"),
        _q("Q6_K", "q6_K", "ggml 6-bit k-quant (6.5625 bits/weight)", output="q6_K"),
        _q("Q5_K_M", "q5_K", "5-bit k-quant; attn_v / ffn_down q6_K on use_more_bits layers", output="q6_K"),
        _q("Q5_K_S", "q5_K", "5-bit k-quant, no promotions except the head", output="q6_K"),
        _q("Q4_K_M", "q4_K", "4-bit k-quant; attn_v / ffn_down q6_K on use_more_bits layers", output="q6_K"),
        _q("Q4_K_S", "q4_K", "4-bit k-quant; first attn_v and ffn_down layers q5_K", output="q6_K"),
        _q("Q4_0", "q4_0", "ggml legacy 4-bit, 32-element blocks (4.5 bits/weight)", output="q6_K"),
        _q(
            "IQ4_XS", "iq4_xs", "4.25-bit i-quant; attn_v q5_K (GQA >= 4), first ffn_down q5_K", output="q6_K"
        ),
        _q(
            "Q3_K_M",
            "q3_K",
            "3-bit k-quant; attn_v q5_K/q4_K, attn_output q4_K, ffn_down q4_K/q5_K",
            output="q6_K",
            attn_output="q4_K",
        ),
        _q(
            "Q2_K",
            "q2_K",
            "2-bit k-quant; attn_v q4_K/q3_K, attn_output and ffn_down q3_K",
            output="q6_K",
            attn_output="q3_K",
            ffn_down="q3_K",
        ),
        _q(
            "MXFP4",
            "mxfp4",
            "llama.cpp MXFP4_MOE: experts MXFP4 (4.25 bits), other matrices q8_0",
            _BOTH,
            output="q8_0",
            token_embd="q8_0",
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
_QUANT_KEYS = {k.upper(): k for k in QUANTS} | {"MXFP4_MOE": "MXFP4", "AWQ": "AWQ-INT4", "GPTQ": "GPTQ-INT4"}
_UNQUANTIZED = frozenset({"f32", "f16", "bf16"})


def canonical_type(type_name: str) -> str:
    """ggml spelling of a storage type name (case-insensitive); SpecError when unknown."""
    canon = _CANON.get(str(type_name).lower())
    if canon is None:
        raise SpecError(f"unknown storage type {type_name!r}; known: {', '.join(sorted(TYPE_SIZES))}")
    return canon


def get_quant(name: str) -> QuantSpec:
    """QuantSpec by name (case-insensitive); SpecError naming the three nearest names when unknown."""
    key = _QUANT_KEYS.get(str(name).strip().upper())
    if key is None:
        near = difflib.get_close_matches(str(name).upper(), list(QUANTS), n=3, cutoff=0.0)
        raise SpecError(f"unknown quant {name!r}; closest: {', '.join(near)}")
    return QUANTS[key]


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
    wv_index: int,
) -> str:
    q = QUANTS[qname]
    default = q.default_type
    if tclass in ALWAYS_F32:
        return q.types.get(tclass, "f32")
    if qname in SERVING_RECIPES:  # serving-engine checkpoint formats (block at the end of this module)
        return _serving_type(qname, tclass, row_len)
    if default in _UNQUANTIZED or default == "fp8":
        return default
    if qname in ("AWQ-INT4", "GPTQ-INT4"):
        t = q.types.get(tclass, default)
        return t if t != default or row_len % 128 == 0 else "f16"
    if tclass == "output" or (tied and tclass == "token_embd"):
        if qname == "MXFP4":
            return "q8_0"
        if row_len % TYPE_SIZES[default][0] != 0:
            return "q8_0"
        # llama.cpp picks Q6_K for the output head, then falls back (Q6_K -> Q8_0) when the row length is not
        # a multiple of 256 (e.g. SmolLM2 hidden 960, Qwen2.5-0.5B 896, Gemma-3-1B 1152).
        return "q8_0" if default == "q8_0" else fallback_type("q6_K", row_len)
    t = default
    if qname == "MXFP4":
        return fallback_type("mxfp4" if is_expert3d else "q8_0", row_len)
    if tclass == "token_embd":
        return fallback_type(t, row_len)
    if tclass == "attn_v":
        i = wv_index
        if qname == "Q2_K":
            t = "q4_K" if n_gqa >= 4 else "q3_K"
        elif qname == "Q3_K_M":
            t = "q5_K" if i < 2 else "q4_K"
        elif qname == "IQ4_XS" and n_gqa >= 4:
            t = "q5_K"
        elif qname in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n_layers):
            t = "q6_K"
        elif qname == "Q4_K_S" and i < 4:
            t = "q5_K"
        if is_70b and t in ("q3_K", "q4_K"):
            t = "q5_K"
        if n_expert == 8:
            t = "q8_0"
    elif tclass == "attn_k":
        if n_expert == 8:
            t = "q8_0"
    elif tclass in ("ffn_down", "ffn_down_exps", "ffn_down_shexp"):
        i, n = layer, n_layers
        if qname == "Q2_K":
            t = "q3_K"
        elif qname == "Q3_K_M":
            t = "q5_K" if i < n // 16 else "q4_K"
        elif qname in ("Q4_K_M", "Q5_K_M"):
            if use_more_bits(i, n):
                t = "q6_K"
        elif qname == "IQ4_XS" and i < n // 8:
            t = "q5_K"
        elif qname == "Q4_K_S" and i < n // 8:
            t = "q5_K"
    elif tclass == "attn_output":
        if n_expert == 8:
            if qname in ("Q2_K", "Q3_K_M", "Q4_K_S", "Q4_K_M", "IQ4_XS"):
                t = "q5_K"
        elif qname == "Q2_K":
            t = "q3_K"
        elif qname == "Q3_K_M":
            t = "q4_K"
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
) -> str:
    """Storage type of one tensor under ``quant``.

    tensor_class: a QuantSpec tensor class (token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_gate,
    ffn_up, ffn_down, ffn_*_exps, ffn_*_shexp, norm, bias, ffn_gate_inp, other ...).  ``layer`` / ``n_layers``
    drive the ffn_down rule, ``wv_index`` (default: ``layer``) the attn_v rule (llama.cpp counts attn_v
    tensors
    in file order).  ``row_len`` is the tensor's ne[0] (input features) for the block-size fallback.
    """
    q = get_quant(quant) if isinstance(quant, str) else quant
    if q.name not in QUANTS or QUANTS[q.name] is not q:
        t = q.types.get(tensor_class, q.default_type)
        return fallback_type(t, row_len)
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
        int(layer if wv_index is None else wv_index),
    )


# ==========================================================================================================
# Serving-engine checkpoint formats (vLLM / SGLang / TensorRT-LLM): NVFP4, FP8 per-tensor and block-128,
# compressed-tensors W4A16 (group 32 / 128), MXFP4.  Exact tensor bytes in ``CHECKPOINT_FORMATS`` /
# ``checkpoint_tensor_bytes``; the estimator recipes (QuantSpecs below) sum the same bytes per element through
# block storage types, without the few per-tensor scalars (8 B or 16 B per tensor, < 1e-6 of a model).
# ==========================================================================================================
from dataclasses import dataclass  # noqa: E402


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
