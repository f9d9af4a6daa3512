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


def test_kv_layouts_unified_streams_swa_full_and_padding():
    m = get_model("gemma-3-27b")  # 10 full layers, 52 sliding (window 1024)
    per_full, per_swa = 10 * 2 * 16 * 128 * 2, 52 * 2 * 16 * 128 * 2
    # 4 sequences of 8,192 tokens in one unified cache: window cells = pad256(1024 x 4 + 512)
    uni = kv_cache(m, 8192, n_seq=4)
    assert (uni.n_cells, uni.n_cells_windowed, uni.n_streams) == (32768, 4608, 1)
    # one stream per sequence: each holds 8,192 full cells and pad256(1024 + 512) window cells
    split = kv_cache(m, 8192, n_seq=4, kv_unified=False)
    assert (split.n_cells, split.n_cells_windowed, split.n_streams) == (32768, 4 * 1536, 4)
    assert split.total_bytes == per_full * 32768 + per_swa * 6144
    # --swa-full: window layers as large as the full ones
    assert kv_cache(m, 8192, n_seq=4, swa_full=True).by_kind_bytes["sliding"] == per_swa * 32768
    # padding by build: 32 (May 2024 - Oct 2025 builds without flash attention) vs 256 today
    assert kv_cache(get_model("llama-3.1-8b"), 1000, kv_pad=32).n_cells == 1024
    assert kv_cache(get_model("llama-3.1-8b"), 1000, kv_pad=32, n_seq=3).n_cells == 3008
    # vLLM has none of these switches
    assert kv_cache(m, 8192, n_seq=4, engine="vllm") == kv_cache(
        m, 8192, n_seq=4, engine="vllm", kv_unified=False, swa_full=True, kv_pad=32
    )
    with pytest.raises(SpecError):
        kv_cache(m, 8192, kv_pad=-1)


def test_kv_cache_for_passes_the_workload_switches():
    from estimator.physics.kv import kv_cache_for
    from estimator.specs import Workload

    m = get_model("gemma-3-27b")
    wl = Workload(n_ctx=8192, n_seq=4, swa_full=False, kv_unified=False, n_ubatch=256)
    assert kv_cache_for(m, wl) == kv_cache(m, 8192, "f16", 4, n_ubatch=256, kv_unified=False)
    assert kv_cache_for(m, wl, n_seq=1).n_streams == 1
    # defaults are the layout every earlier output used
    assert kv_cache_for(m, Workload(n_ctx=8192)) == kv_cache(m, 8192)


def _gemma_probe():
    """6-layer gemma3 probe (5 sliding, window 300, 1 full) as harness.synth writes it."""
    import dataclasses

    from harness.synth import tiny_model

    return dataclasses.replace(tiny_model("gemma3", n_layers=6), window=300)


# (n_ctx per sequence, sequences, unified, --swa-full, KV dtype, flash attention, n_ubatch)
LLAMA_KV_CASES = [
    (1000, 1, True, False, "f16", True, 512),
    (1000, 4, True, False, "f16", True, 512),
    (1000, 4, False, False, "f16", True, 512),
    (1000, 4, False, True, "f16", False, 128),
    (5000, 3, False, False, "q8_0", True, 256),
    (300, 5, False, False, "f16", False, 64),
]


@pytest.mark.llama
def test_kv_layouts_equal_llama_cpp(tmp_path):
    """llama.cpp's own cache (llama_init_from_model of llama-cpp-python 0.3.36, log summaries): cells per
    cache and stream exactly, bytes to the log's 0.01 MiB rounding; the sliding-window cache takes the KV
    dtype."""
    pytest.importorskip("llama_cpp")
    from harness import synth
    from runners.base import PointSpec
    from runners.llama_cpp import LlamaCppRunner

    m = _gemma_probe()
    path = synth.synthetic_model(m, "F16", cache_dir_path=tmp_path)
    runner = LlamaCppRunner()
    for n_ctx, n_seq, unified, swa_full, kv, fa, ub in LLAMA_KV_CASES:
        opts = {"n_seq": n_seq, "kv_unified": unified, "swa_full": swa_full}
        spec = PointSpec(
            model_path=str(path), n_ctx=n_ctx, prompt_lengths=(), gen_lengths=(), kv_dtype=kv,
            flash_attn=fa, n_ubatch=ub, engine_options=opts,
        )  # fmt: skip
        meas = runner.measure(spec)
        est = kv_cache(
            m, n_ctx, kv, n_seq, n_ubatch=ub, flash_attn=fa, swa_full=swa_full, kv_unified=unified
        )
        full, swa = meas.extra["kv_summaries"]
        assert full["cells"] * est.n_streams == est.n_cells
        assert swa["cells"] * est.n_streams == est.n_cells_windowed
        assert swa["type_k"] == swa["type_v"] == kv  # no F16 sliding-window cache for a quantized KV
        assert abs(meas.kv_bytes - est.total_bytes) <= 2 * 5243  # two caches, each printed to 0.01 MiB


def test_without_flash_attention_v_rows_take_the_widest_layer():
    import dataclasses

    # a Gemma-4-like geometry whose global layers keep a separate V of 4 x 512 next to 16 x 256 sliding rows
    m = dataclasses.replace(get_model("gemma-4-31b"), k_eq_v=False, global_n_kv_heads=4)
    fa, no_fa = layer_token_bytes(m, "f16"), layer_token_bytes(m, "f16", flash_attn=False)
    n_full = m.layer_types.count("full")
    assert no_fa["sliding"] == fa["sliding"]  # the widest rows already
    assert no_fa["full"] - fa["full"] == n_full * 2 * (16 * 256 - 4 * 512)
    assert kv_cache(m, 4096, flash_attn=False).total_bytes > kv_cache(m, 4096).total_bytes
    assert layer_token_bytes(m, "f16", "vllm", flash_attn=False) == layer_token_bytes(m, "f16", "vllm")


def test_dsa_kv_read_is_every_indexer_key_and_the_selected_latent_rows():
    """An engine with sparse MLA kernels (EngineProfile.sparse_attention: vLLM, SGLang, TensorRT-LLM) reads
    the indexer key of every cached token and the latent rows of at most index_topk; llama.cpp (masked dense
    attention) reads every latent row.  DeepSeek-V3.2: 61 layers, FP8 indexer keys of 128 values + one FP32
    scale (132 B) on vLLM."""
    from estimator.catalog.resolve import resolve_model
    from estimator.engines import get_engine
    from estimator.physics import kv
    from estimator.specs import FULL

    m = resolve_model("deepseek-v3.2")
    assert kv.indexer_token_bytes(m, "fp8", "vllm") == 61 * 132
    assert get_engine("vllm").sparse_attention and not get_engine("llama.cpp").sparse_attention
    top = m.mla.index_topk
    at_top = kv.kv_read_bytes(m, top, "fp8", "vllm")
    assert at_top == kv.layer_token_bytes(m, "fp8", "vllm")[FULL] * top  # nothing skipped up to top-k
    for d in (top + 1, 8192, 131072):
        assert kv.kv_read_bytes(m, d, "fp8", "vllm") == at_top + 61 * 132 * (d - top)
        dense = kv.layer_token_bytes(m, "f16", "llama.cpp")[FULL] * d
        assert kv.kv_read_bytes(m, d, "f16", "llama.cpp") == dense
