"""Quant formats: exact ggml block sizes, llama.cpp recipe rules, fallbacks, bad names."""

from __future__ import annotations

import pytest

from estimator.physics.quant import (
    QUANTS,
    TYPE_SIZES,
    get_quant,
    kv_type_bytes,
    row_bytes,
    type_for,
    use_more_bits,
)
from estimator.specs import SpecError

REQUIRED = (
    "F32",
    "F16",
    "BF16",
    "FP8",
    "Q8_0",
    "Q6_K",
    "Q5_K_M",
    "Q5_K_S",
    "Q4_K_M",
    "Q4_K_S",
    "Q4_0",
    "IQ4_XS",
    "Q3_K_M",
    "Q2_K",
    "MXFP4",
    "AWQ-INT4",
    "GPTQ-INT4",
)


def test_type_sizes_match_gguf_package():
    from gguf import GGML_QUANT_SIZES

    for qt, (be, bb) in GGML_QUANT_SIZES.items():
        key = next(k for k in TYPE_SIZES if k.lower() == qt.name.lower())
        assert TYPE_SIZES[key] == (be, bb), qt.name


def test_all_formats_present_and_case_insensitive():
    for name in REQUIRED:
        assert get_quant(name.lower()) is QUANTS[name]
    with pytest.raises(SpecError, match="closest"):
        get_quant("Q4_K_X")


def test_row_bytes_and_kv():
    assert row_bytes("q8_0", 1024) == 1088
    assert row_bytes("q4_K", 4096) == 16 * 144
    assert kv_type_bytes("q8_0", 32) == 34
    assert kv_type_bytes("fp8", 100) == 100
    assert row_bytes("int4_g128", 4096) == 4096 * 133 // 256
    with pytest.raises(SpecError):
        kv_type_bytes("q3_x", 10)


def test_use_more_bits_pattern():
    # 32 layers: first 4, last 4, and every third from layer 6
    got = [i for i in range(32) if use_more_bits(i, 32)]
    assert got == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]


def test_q4_k_m_recipe():
    q = get_quant("Q4_K_M")
    assert type_for(q, "output", row_len=4096) == "q6_K"
    assert type_for(q, "token_embd", row_len=4096) == "q4_K"
    assert type_for(q, "token_embd", row_len=4096, tied=True) == "q6_K"
    assert type_for(q, "attn_v", 0, 32, row_len=4096) == "q6_K"
    assert type_for(q, "attn_v", 4, 32, row_len=4096) == "q4_K"
    assert type_for(q, "ffn_down_exps", 31, 32, row_len=1536) == "q6_K"
    assert type_for(q, "attn_q", 0, 32, row_len=4096) == "q4_K"
    assert type_for(q, "norm", row_len=4096) == "f32"
    assert type_for(q, "attn_v", 11, 80, row_len=8192, is_70b=True) == "q5_K"
    assert type_for(q, "attn_v", 4, 32, row_len=4096, n_expert=8) == "q8_0"


def test_other_recipes():
    assert type_for("Q2_K", "attn_v", 5, 32, n_gqa=4, row_len=4096) == "q4_K"
    assert type_for("Q2_K", "attn_v", 5, 32, n_gqa=1, row_len=4096) == "q3_K"
    assert type_for("Q2_K", "ffn_down", 5, 32, row_len=4096) == "q3_K"
    assert type_for("Q3_K_M", "attn_v", 0, 32, row_len=4096) == "q5_K"
    assert type_for("Q3_K_M", "attn_v", 2, 32, row_len=4096) == "q4_K"
    assert type_for("Q3_K_M", "attn_output", 2, 32, row_len=4096) == "q4_K"
    assert type_for("Q8_0", "output", row_len=4096) == "q8_0"
    assert type_for("Q4_0", "output", row_len=4096) == "q6_K"
    assert type_for("IQ4_XS", "attn_v", 9, 32, n_gqa=8, row_len=4096) == "q5_K"
    assert type_for("MXFP4", "ffn_up_exps", 3, 24, row_len=2880, is_expert3d=True) == "mxfp4"
    assert type_for("MXFP4", "attn_q", 3, 24, row_len=2880) == "q8_0"
    assert type_for("F16", "attn_q", 3, 24, row_len=100) == "f16"


def test_fallback_for_odd_rows():
    assert type_for("Q4_K_M", "ffn_down", 5, 32, row_len=1408) == "q5_0"  # 1408 % 256 != 0
    assert type_for("Q6_K", "attn_q", 5, 32, row_len=1408) == "q8_0"
    assert type_for("IQ4_XS", "attn_q", 5, 32, row_len=1408) == "iq4_nl"
    assert type_for("Q4_K_M", "attn_q", 5, 32, row_len=100) == "f16"
    assert type_for("Q4_K_M", "output", row_len=2880) == "q8_0"  # head row not a multiple of 256


@pytest.mark.parametrize("row_len,expected", [(960, "q8_0"), (896, "q8_0"), (1152, "q8_0"), (1024, "q6_K")])
def test_output_head_q6k_falls_back_when_rows_are_not_whole_blocks(row_len, expected):
    # Measured: SmolLM2 (960), Qwen2.5-0.5B (896) and Gemma-3-1B (1152) Q4_0 files store the tied token_embd
    # as Q8_0 (llama.cpp's Q6_K choice needs rows that are a multiple of 256); Qwen3-0.6B (1024) keeps Q6_K.
    assert type_for("Q4_0", "token_embd", tied=True, row_len=row_len) == expected
    assert type_for("Q4_0", "output", row_len=row_len) == expected
