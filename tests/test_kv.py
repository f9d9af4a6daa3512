"""KV cache known answers (exact to 0.1 %) and per-kind behaviour."""

from __future__ import annotations

import pytest

from estimator.catalog.data import get_model
from estimator.physics.kv import kv_cache, kv_read_bytes, layer_token_bytes
from estimator.specs import GIB, SpecError


def test_glm45_f16_and_q8():
    m = get_model("glm-4.5")
    assert kv_cache(m, 8192).total_bytes / GIB == pytest.approx(2.875, rel=1e-3)
    assert kv_cache(m, 32768).total_bytes / GIB == pytest.approx(11.5, rel=1e-3)
    assert kv_cache(m, 32768, "q8_0").total_bytes / GIB == pytest.approx(11.5 * 34 / 64, rel=1e-3)


def test_deepseek_v3_mla_latent():
    m = get_model("deepseek-v3")
    kv = kv_cache(m, 8192)
    assert kv.bytes_per_token == 61 * (512 + 64) * 2
    assert kv.total_bytes / GIB == pytest.approx(0.536, rel=1e-3)
    gqa = 2 * 61 * 128 * 192 * 2 * 8192 / GIB  # what a head_dim GQA formula would wrongly give
    assert gqa / (kv.total_bytes / GIB) > 60


def test_gemma3_27b_sliding_capped():
    m = get_model("gemma-3-27b")
    per_layer = 2 * 16 * 128 * 2
    for n_ctx in (32768, 131072):
        kv = kv_cache(m, n_ctx, n_ubatch=512)
        # 10 global layers hold every token; 52 sliding layers hold window 1024 + ubatch 512 cells (pad 256)
        assert kv.by_kind_bytes["full"] == 10 * per_layer * n_ctx
        assert kv.by_kind_bytes["sliding"] == 52 * per_layer * 1536
    vl = kv_cache(m, 32768, engine="vllm")
    assert vl.by_kind_bytes["sliding"] == 52 * per_layer * (1024 + 16)
    full = kv_cache(m, 32768, swa_full=True)
    assert full.by_kind_bytes["sliding"] == 52 * per_layer * 32768


def test_qwen3_0_6b_uses_config_head_dim():
    m = get_model("qwen3-0.6b")
    assert kv_cache(m, 8192).bytes_per_token == 2 * 28 * 8 * 128 * 2  # not 64


def test_qwen3_next_state_fixed_full_grows():
    m = get_model("qwen3-next-80b-a3b")
    a, b = kv_cache(m, 8192), kv_cache(m, 65536)
    assert a.by_kind_bytes["full"] == 12 * 2 * 2 * 256 * 2 * 8192
    assert b.by_kind_bytes["full"] == 8 * a.by_kind_bytes["full"]
    per_seq = 36 * (4 * 524288 + 4 * 24576)  # f32 recurrent + conv state in llama.cpp
    assert a.state_bytes == b.state_bytes == per_seq
    assert kv_cache(m, 8192, n_seq=4).state_bytes == 4 * per_seq


def test_padding_and_sequences():
    m = get_model("llama-3.1-8b")
    assert kv_cache(m, 1000).n_cells == 1024
    assert kv_cache(m, 1000, n_seq=3).n_cells == 3072
    assert kv_cache(m, 1000, engine="vllm").n_cells == 1008


def test_quantized_v_needs_flash_attention():
    with pytest.raises(SpecError, match="flash attention"):
        kv_cache(get_model("llama-3.1-8b"), 4096, "q8_0", flash_attn=False)
    with pytest.raises(SpecError):
        kv_cache(get_model("llama-3.1-8b"), 0)


def test_kv_read_bytes():
    m = get_model("gemma-3-27b")
    per = layer_token_bytes(m, "f16")
    assert kv_read_bytes(m, 4096) == per["full"] * 4096 + per["sliding"] * 1024
    assert kv_read_bytes(m, 0) == 0
