"""Serving-engine checkpoint formats: exact bytes of a given tensor (known answers worked out by hand from
each format's layout) and the recipes that size a whole model with them."""

from __future__ import annotations

import pytest

from estimator.catalog.resolve import resolve_model
from estimator.physics.quant import (
    CHECKPOINT_FORMATS,
    QUANTS,
    SERVING_RECIPES,
    bits_per_weight,
    checkpoint_tensor_bytes,
    get_quant,
    row_bytes,
    type_for,
)
from estimator.physics.weights import weight_breakdown
from estimator.specs import SpecError


@pytest.mark.parametrize(
    ("fmt", "rows", "cols", "expected"),
    [
        # NVFP4: values rows*cols/2, one E4M3 byte per 16 inputs, FP32 weight_scale_2 + input_scale
        ("NVFP4", 4096, 4096, 4096 * 2048 + 4096 * 256 + 8),
        ("NVFP4", 14336, 4096, 14336 * 2048 + 14336 * 256 + 8),
        # MXFP4 (gpt-oss): values /2, one E8M0 byte per 32 inputs
        ("MXFP4", 5760, 2880, 5760 * 1440 + 5760 * 90),
        # FP8 per tensor: 1 B per value + 2 FP32 scalars
        ("FP8", 8192, 8192, 8192 * 8192 + 8),
        # FP8 block 128: DeepSeek-V3 kv_a_proj_with_mqa [576, 7168] -> weight_scale_inv [5, 56] FP32
        ("FP8-BLOCK", 576, 7168, 576 * 7168 + 5 * 56 * 4),
        ("FP8-BLOCK", 4096, 4096, 4096 * 4096 + 32 * 32 * 4),
        # W4A16: int32 words of 8 nibbles, bf16 scale per group, int64 weight_shape [2]
        ("W4A16-G128", 4096, 4096, 4096 * 512 * 4 + 4096 * 32 * 2 + 16),
        ("W4A16-G32", 4096, 4096, 4096 * 512 * 4 + 4096 * 128 * 2 + 16),
        # ragged input dimension: padded to whole words and whole groups
        ("W4A16-G128", 10, 200, 10 * 25 * 4 + 10 * 2 * 2 + 16),
    ],
)  # fmt: skip
def test_checkpoint_tensor_bytes_known_answers(fmt, rows, cols, expected):
    assert checkpoint_tensor_bytes(fmt, rows, cols) == expected


def test_headline_bits_per_weight():
    n = 4096 * 4096
    assert (checkpoint_tensor_bytes("NVFP4", 4096, 4096) - 8) * 8 / n == 4.5
    assert checkpoint_tensor_bytes("MXFP4", 4096, 4096) * 8 / n == 4.25
    assert (checkpoint_tensor_bytes("W4A16-G128", 4096, 4096) - 16) * 8 / n == 4.125
    assert (checkpoint_tensor_bytes("W4A16-G32", 4096, 4096) - 16) * 8 / n == 4.5
    assert bits_per_weight("nvfp4") == 4.5 and bits_per_weight("int4_g32_sym") == 4.5
    assert bits_per_weight("int4_g128_sym") == 4.125 and bits_per_weight("mxfp4") == 4.25
    assert 8 < bits_per_weight("fp8_b128") < 8.002


@pytest.mark.parametrize(
    ("name", "type_name"),
    [("NVFP4", "nvfp4"), ("FP8-BLOCK", "fp8_b128"), ("W4A16-G128", "int4_g128_sym"),
     ("W4A16-G32", "int4_g32_sym")],
)
def test_recipe_type_bytes_equal_checkpoint_bytes_without_per_tensor_scalars(name, type_name):
    fmt = CHECKPOINT_FORMATS[name]
    rows, cols = 14336, 4096  # every dimension a multiple of every group / block
    exact = checkpoint_tensor_bytes(fmt, rows, cols)
    assert row_bytes(type_name, rows * cols) == exact - fmt.per_tensor_bytes


def test_recipes_are_vllm_formats_with_bf16_embeddings_head_and_router():
    for name in SERVING_RECIPES:
        q = get_quant(name)
        assert q is QUANTS[name] and q.containers == ("safetensors",)
        for tclass in ("token_embd", "output", "ffn_gate_inp", "norm"):
            assert type_for(q, tclass, row_len=4096) == "bf16", (name, tclass)
    assert get_quant("fp8_block").name == "FP8-BLOCK" and get_quant("w4a16").name == "W4A16-G128"
    with pytest.raises(SpecError):
        checkpoint_tensor_bytes("NVFP4", 0, 16)


def test_fp8_keeps_embeddings_head_and_norms_in_bf16():
    """vLLM's --quantization fp8 quantizes the Linear layers only: embeddings, head, norms and router stay
    bf16, as the FP8 format says (the llama.cpp-recipe path once typed embeddings and head fp8: 1.16 GB
    short on gpt-oss-20b)."""
    q = get_quant("FP8")
    for tclass in ("token_embd", "output", "norm", "ffn_gate_inp"):
        assert type_for(q, tclass, row_len=4096) == "bf16", tclass
    assert type_for(q, "attn_q", row_len=4096) == "fp8"
    m = resolve_model("gpt-oss-20b")
    wb = weight_breakdown(m, q)
    assert wb.by_class_bytes["token_embd"] == m.vocab_size * m.hidden_size * 2
    assert wb.by_class_bytes["output"] == m.vocab_size * m.hidden_size * 2


def test_nvfp4_quantizes_ffn_and_experts_only():
    q = get_quant("NVFP4")
    assert type_for(q, "ffn_down_exps", row_len=2048) == "nvfp4"
    assert type_for(q, "ffn_up", row_len=4096) == "nvfp4"
    assert type_for(q, "attn_q", row_len=4096) == "bf16"  # NVIDIA checkpoints exclude self_attn
    assert type_for(q, "ffn_up", row_len=100) == "bf16"  # no whole 16-element scale group
    assert type_for(get_quant("FP8-BLOCK"), "attn_q", row_len=4096) == "fp8_b128"


def test_deepseek_r1_sizes_in_serving_formats():
    m = resolve_model("deepseek-r1")
    bf16 = weight_breakdown(m, "BF16").total_bytes
    fp8b = weight_breakdown(m, "FP8-BLOCK")
    nvfp4 = weight_breakdown(m, "NVFP4")
    assert fp8b.total_bytes < 0.51 * bf16 and set(fp8b.by_type_bytes) == {"bf16", "fp8_b128"}
    # routed experts dominate: NVFP4 lands a little above 4.5/16 of BF16 (attention stays bf16)
    assert 0.2812 * bf16 < nvfp4.total_bytes < 0.32 * bf16
    assert nvfp4.by_type_bytes["nvfp4"] > 0.9 * nvfp4.total_bytes
