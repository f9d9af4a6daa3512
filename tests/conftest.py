"""Shared fixtures: a tiny GGUF file written with gguf.GGUFWriter (F16 + Q8_0 tensors)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    """2-layer llama GGUF (hidden 64, 4/2 heads, ff 128, vocab 96): F16 2-D, F32 1-D, one Q8_0 tensor."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    rng = np.random.default_rng(0)
    h, ff, vocab, n_layers, heads, kv = 64, 128, 96, 2, 4, 2
    hd = h // heads
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(256)
    w.add_embedding_length(h)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_dimension_count(hd)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

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
        w.add_tensor(b + "attn_q.weight", f16(heads * hd, h))
        w.add_tensor(b + "attn_k.weight", f16(kv * hd, h))
        w.add_tensor(b + "attn_v.weight", f16(kv * hd, h))
        w.add_tensor(b + "attn_output.weight", f16(h, heads * hd))
        w.add_tensor(b + "ffn_gate.weight", f16(ff, h))
        w.add_tensor(b + "ffn_up.weight", f16(ff, h))
        w.add_tensor(b + "ffn_down.weight", f16(h, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
