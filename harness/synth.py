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
phi3 (Phi-3 / Phi-4: fused attn_qkv and gate+up ffn_up, no rope-factor tensors).
Tensor names come from ``gguf.TENSOR_NAMES``; shapes follow ``src/models/<arch>.cpp`` of llama.cpp@0c1e570
(numpy order = reversed ggml ``ne``).
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

from estimator.physics.quant import LlamaRecipe, llama_recipe
from estimator.specs import FULL, SLIDING, ModelSpec, QuantSpec, SpecError
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
# wrote shared_ff alone, which llama.cpp rejects for DeepSeek-V2-Lite (2 shared experts).
WRITER_VERSION = 3
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
}
# Gemma 2's logit soft-capping (config.json attn_logit_softcapping / final_logit_softcapping of the released
# checkpoints); llama.cpp adds the capping ops to the graph when they are set
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
    root = os.environ.get("FITBENCH_CACHE")
    return Path(root) / "models" if root else Path.home() / ".cache" / "fitbench" / "models"


def gguf_arch(model: ModelSpec) -> str:
    """llama.cpp architecture name for a ModelSpec; SpecError naming the supported ones otherwise."""
    try:
        return GGUF_ARCH[model.architecture]
    except KeyError:
        raise SpecError(
            f"no synthetic GGUF writer for architecture {model.architecture!r} "
            f"(supported: {', '.join(sorted(GGUF_ARCH))})"
        ) from None


def _is_moe_layer(model: ModelSpec, il: int) -> bool:
    return model.moe is not None and il not in model.moe.dense_layers


def shared_width(model: ModelSpec, arch: str) -> int:
    """Width of the fused shared-expert FFN: n_shared_experts x shared_ff (MoESpec: each shared expert is
    shared_ff wide; 0 means expert_ff).  llama.cpp's deepseek2 sizes it n_ff_exp * n_expert_shared, so there
    the per-expert width must equal expert_ff (SpecError otherwise)."""
    moe = model.moe
    if moe is None or not moe.n_shared_experts:
        return 0
    per_expert = moe.shared_ff or moe.expert_ff
    if arch == "deepseek2" and per_expert != moe.expert_ff:
        raise SpecError(
            f"{model.id}: llama.cpp deepseek2 needs shared experts as wide as the routed ones "
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
    """Every tensor of the synthetic GGUF, in file order (see module docstring for the layout source)."""
    import gguf

    arch = gguf_arch(model)
    n = proxy_layers(model, n_layers)
    T, N = gguf.MODEL_TENSOR, gguf.TENSOR_NAMES
    h, hd, nh, nkv, v = model.hidden_size, model.head_dim, model.n_heads, model.n_kv_heads, model.vocab_size
    out: list[TensorPlan] = []

    def add(
        t: gguf.MODEL_TENSOR, shape: tuple[int, ...], il: int | None = None, suffix: str = "weight"
    ) -> None:
        name = (N[t].format(bid=il) if il is not None else N[t]) + "." + suffix
        # 1-D tensors, biases (gpt-oss has 2-D expert biases) and the MoE router stay F32, as
        # convert_hf_to_gguf writes them (llama.cpp never quantizes ffn_gate_inp, so its type carries into
        # every quantized file).
        storage = "f32" if len(shape) == 1 or suffix == "bias" or t == T.FFN_GATE_INP else "f16"
        out.append(TensorPlan(name, tuple(int(s) for s in shape), storage))

    add(T.TOKEN_EMBD, (v, h))
    add(T.OUTPUT_NORM, (h,))
    if not model.tie_embeddings:
        add(T.OUTPUT, (v, h))
    for il in range(n):
        add(T.ATTN_NORM, (h,), il)
        if arch == "deepseek2":
            _mla_attention(model, add, il)
        elif arch == "phi3":  # fused q/k/v (llama.cpp phi3 create_tensor_qkv: q as wide as hidden)
            if nh * hd != h:
                raise SpecError(f"{model.id}: llama.cpp phi3 needs heads x head_dim = hidden ({h})")
            add(T.ATTN_QKV, (nh * hd + 2 * nkv * hd, h), il)
            add(T.ATTN_OUT, (h, nh * hd), il)
        else:
            q_dim = nh * hd
            add(T.ATTN_Q, (q_dim, h), il)
            add(T.ATTN_K, (nkv * hd, h), il)
            add(T.ATTN_V, (nkv * hd, h), il)
            if arch == "qwen2" or model.qkv_bias:
                add(T.ATTN_Q, (q_dim,), il, "bias")
                add(T.ATTN_K, (nkv * hd,), il, "bias")
                add(T.ATTN_V, (nkv * hd,), il, "bias")
            if arch in ("qwen3", "qwen3moe", "gemma3"):
                add(T.ATTN_Q_NORM, (hd,), il)
                add(T.ATTN_K_NORM, (hd,), il)
            add(T.ATTN_OUT, (h, q_dim), il)
            if arch in ("gemma2", "gemma3", "gpt-oss"):  # gpt-oss: the FFN's norm, under this name
                add(T.ATTN_POST_NORM, (h,), il)
            if arch == "gpt-oss":
                add(T.ATTN_OUT, (h,), il, "bias")
                add(T.ATTN_SINKS, (nh,), il)
        if arch != "gpt-oss":
            add(T.FFN_NORM, (h,), il)
        if _is_moe_layer(model, il):
            moe = model.moe
            assert moe is not None
            e, ff = moe.n_experts, moe.expert_ff
            add(T.FFN_GATE_INP, (e, h), il)
            add(T.FFN_GATE_EXP, (e, ff, h), il)
            add(T.FFN_UP_EXP, (e, ff, h), il)
            add(T.FFN_DOWN_EXP, (e, h, ff), il)
            if arch == "gpt-oss":  # router and per-expert biases
                add(T.FFN_GATE_INP, (e,), il, "bias")
                add(T.FFN_GATE_EXP, (e, ff), il, "bias")
                add(T.FFN_UP_EXP, (e, ff), il, "bias")
                add(T.FFN_DOWN_EXP, (e, h), il, "bias")
            if moe.n_shared_experts:
                sff = shared_width(model, arch)
                add(T.FFN_GATE_SHEXP, (sff, h), il)
                add(T.FFN_UP_SHEXP, (sff, h), il)
                add(T.FFN_DOWN_SHEXP, (h, sff), il)
        elif arch == "phi3":  # gate and up fused in ffn_up, 2 x ff rows
            ff = model.intermediate_size
            add(T.FFN_UP, (2 * ff, h), il)
            add(T.FFN_DOWN, (h, ff), il)
        else:
            ff = model.intermediate_size
            add(T.FFN_GATE, (ff, h), il)
            add(T.FFN_UP, (ff, h), il)
            add(T.FFN_DOWN, (h, ff), il)
        if arch in ("gemma2", "gemma3"):
            add(T.FFN_POST_NORM, (h,), il)
    return out


def _mla_attention(model: ModelSpec, add, il: int) -> None:
    """DeepSeek-V2/V3 MLA tensors (llama.cpp deepseek2, split k_b / v_b layout)."""
    import gguf

    T = gguf.MODEL_TENSOR
    mla = model.mla
    if mla is None:
        raise SpecError(f"{model.id}: architecture {model.architecture} needs an MLA spec")
    h, nh = model.hidden_size, model.n_heads
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank:
        add(T.ATTN_Q_A_NORM, (mla.q_lora_rank,), il)
    add(T.ATTN_KV_A_NORM, (mla.kv_lora_rank,), il)
    if mla.q_lora_rank:
        add(T.ATTN_Q_A, (mla.q_lora_rank, h), il)
        add(T.ATTN_Q_B, (nh * qk, mla.q_lora_rank), il)
    else:
        add(T.ATTN_Q, (nh * qk, h), il)
    add(T.ATTN_KV_A_MQA, (mla.kv_lora_rank + mla.qk_rope_head_dim, h), il)
    add(T.ATTN_K_B, (nh, mla.kv_lora_rank, mla.qk_nope_head_dim), il)
    add(T.ATTN_V_B, (nh, mla.v_head_dim, mla.kv_lora_rank), il)
    add(T.ATTN_OUT, (h, nh * mla.v_head_dim), il)


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
    w.add_feed_forward_length(model.intermediate_size or (model.moe.expert_ff if model.moe else 0))
    if arch == "deepseek2":
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
        return _write_moe(w, model)
    w.add_head_count_kv(model.n_kv_heads)
    w.add_key_length(model.head_dim)
    w.add_value_length(model.head_dim)
    w.add_rope_dimension_count(model.head_dim)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(GEMMA2_SOFTCAP["attn"])
        w.add_final_logit_softcapping(GEMMA2_SOFTCAP["final"])
    if arch in ("gemma2", "gemma3", "gpt-oss"):
        kinds = model.layer_types[:n]
        if SLIDING in kinds or arch == "gpt-oss":  # gpt-oss reads the window even without sliding layers
            if not model.window:
                raise SpecError(f"{model.id}: sliding layers need ModelSpec.window")
            w.add_sliding_window(model.window)
            w.add_sliding_window_pattern([k == SLIDING for k in kinds])
        if any(k not in (FULL, SLIDING) for k in kinds):
            raise SpecError(f"{model.id}: {arch} layers must be full or sliding, got {sorted(set(kinds))}")
    if model.moe is not None:
        leading_dense(model, n)
        _write_moe(w, model)


def _write_moe(w, model: ModelSpec) -> None:
    moe = model.moe
    assert moe is not None
    w.add_expert_count(moe.n_experts)
    w.add_expert_used_count(moe.n_experts_used)
    w.add_expert_feed_forward_length(moe.expert_ff)
    if moe.n_shared_experts:
        w.add_expert_shared_feed_forward_length(shared_width(model, gguf_arch(model)))


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
    facts = {k: v for k, v in dataclasses.asdict(model).items() if k not in _VOLATILE}
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
        if not (folder / "config.json").exists():
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
    DeepSeek-V2-Lite-shaped
    MLA model (kv_lora_rank 128, rope 32, nope 64, v 64, no q-LoRA, first layer dense, 8+1 experts); gpt_oss
    alternates sliding (window 128) and full layers with 8 biased experts (2 used, width 256); gemma2 is laid
    out like gemma3; phi3 is dense (fused in its file).
    """
    from estimator.specs import MLASpec, MoESpec

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
        common.update(intermediate_size=0, moe=MoESpec(n_experts=8, n_experts_used=2, expert_ff=256))
    elif architecture == "deepseek_v2":
        common.update(
            n_kv_heads=4,
            head_dim=96,
            moe=MoESpec(
                n_experts=8,
                n_experts_used=2,
                expert_ff=256,
                n_shared_experts=1,
                shared_ff=256,
                dense_layers=(0,),
            ),
            mla=MLASpec(kv_lora_rank=128, qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64),
        )
    elif architecture == "gpt_oss":
        common.update(
            layer_types=tuple(SLIDING if i % 2 == 0 else FULL for i in range(n_layers)),
            window=128,
            qkv_bias=True,
            moe=MoESpec(n_experts=8, n_experts_used=2, expert_ff=256),
        )
    elif architecture not in GGUF_ARCH:
        raise SpecError(f"no tiny geometry for {architecture!r}")
    return ModelSpec(**common)
