"""Small GGUF files written with the ``gguf`` package's GGUFWriter, for the loader's tests, the hostile-input
cases and the fuzz suite."""

from __future__ import annotations

from pathlib import Path


def _llama_hparams(
    w, hidden: int, layers: int, ff: int, heads: int, kv_heads: int, head_dim: int, vocab: int
) -> None:
    """The llama.* hyper-parameters both tiny files write, in the order GGUFWriter stores them (the golden
    file's bytes depend on it)."""
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)


def write_tiny_gguf(
    path: str | Path,
    *,
    context: int | None = 256,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    name: str | None = None,
    extra: dict | None = None,
    split_max_tensors: int = 0,
) -> Path:
    """A llama GGUF (hidden 64, ff 128, vocab 96): F16 2-D, F32 1-D and one Q8_0 tensor per the usual layout.

    ``context`` None leaves ``llama.context_length`` out; ``extra`` adds metadata (key -> int / str / bool /
    list of ints), written as given, so tests can plant absurd values (zero heads, top-k above the experts).
    Tensor shapes always follow the true geometry below, whatever the metadata claims.  ``split_max_tensors``
    > 0
    writes a split GGUF (gguf-py names the files ``<stem>-0000K-of-0000N.gguf`` and writes the ``split.*``
    keys)."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    path = Path(path)
    rng = np.random.default_rng(0)
    h, ff, vocab, n_layers = 64, 128, 96, 2
    hd, true_heads, true_kv = 16, 4, 2
    w = gguf.GGUFWriter(str(path), "llama", split_max_tensors=split_max_tensors)
    if context is not None:
        w.add_context_length(context)
    _llama_hparams(w, h, layers, ff, heads, kv_heads, hd, vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    if name is not None:
        w.add_name(name)
    for key, value in (extra or {}).items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            (w.add_int64 if value < 0 or value >= 2**32 else w.add_uint32)(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_array(key, list(value))

    def f16(*shape):
        return rng.standard_normal(shape).astype(np.float16)

    w.add_tensor("token_embd.weight", f16(vocab, h))
    w.add_tensor("output_norm.weight", np.ones(h, dtype=np.float32))
    q8 = quantize(rng.standard_normal((vocab, h)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("output.weight", q8, raw_shape=q8.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    for i in range(n_layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(h, dtype=np.float32))
        w.add_tensor(b + "ffn_norm.weight", np.ones(h, dtype=np.float32))
        w.add_tensor(b + "attn_q.weight", f16(true_heads * hd, h))
        w.add_tensor(b + "attn_k.weight", f16(true_kv * hd, h))
        w.add_tensor(b + "attn_v.weight", f16(true_kv * hd, h))
        w.add_tensor(b + "attn_output.weight", f16(h, true_heads * hd))
        w.add_tensor(b + "ffn_gate.weight", f16(ff, h))
        w.add_tensor(b + "ffn_up.weight", f16(ff, h))
        w.add_tensor(b + "ffn_down.weight", f16(h, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def golden_tiny_llama_path() -> Path:
    """Where ``golden_tiny_llama`` writes its file (in the model cache, ``harness.synth.cache_dir``)."""
    from harness.synth import cache_dir

    return cache_dir() / "fixtures" / "tiny-llama.gguf"


def golden_tiny_llama() -> Path:
    """The golden cases' GGUF (tests/golden/golden.py): a 2-layer llama (hidden 64, ff 128, vocab 96, 4 heads,
    2 KV heads, context 256) with ``general.file_type`` 7 (MOSTLY_Q8_0): token embedding F16, norms F32, every
    matrix Q8_0.  Written with gguf.GGUFWriter (fixed seed) into the model cache (``harness.synth.cache_dir``:
    ``$FITBENCH_CACHE/models`` or ~/.cache/fitbench/models), not kept in git; rewritten on each call (a few
    ms)
    through a temp file and a rename, so a half-written file is never read."""
    import os

    import gguf
    import numpy as np
    from gguf.quants import quantize

    path = golden_tiny_llama_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    rng = np.random.default_rng(0)
    h, ff, vocab, n_layers, hd, heads, kv_heads = 64, 128, 96, 2, 16, 4, 2
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name("fitbench golden tiny llama")
    w.add_context_length(256)
    _llama_hparams(w, h, n_layers, ff, heads, kv_heads, hd, vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)

    def q8(name: str, rows: int, cols: int) -> None:
        data = quantize(rng.standard_normal((rows, cols)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    w.add_tensor("token_embd.weight", rng.standard_normal((vocab, h)).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(h, dtype=np.float32))
    q8("output.weight", vocab, h)
    for i in range(n_layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(h, dtype=np.float32))
        w.add_tensor(b + "ffn_norm.weight", np.ones(h, dtype=np.float32))
        q8(b + "attn_q.weight", heads * hd, h)
        q8(b + "attn_k.weight", kv_heads * hd, h)
        q8(b + "attn_v.weight", kv_heads * hd, h)
        q8(b + "attn_output.weight", h, heads * hd)
        q8(b + "ffn_gate.weight", ff, h)
        q8(b + "ffn_up.weight", ff, h)
        q8(b + "ffn_down.weight", h, ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    return path
