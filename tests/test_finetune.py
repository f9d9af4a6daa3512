"""Fine-tuning memory formulas against hand-computed values."""

import pytest

from estimator.physics.finetune import (
    NF4_BITS,
    FinetuneConfig,
    activation_bytes,
    embedding_params,
    estimate_all,
    estimate_finetune,
    lora_params,
)
from estimator.specs import FULL, ModelSpec, MoESpec, SpecError

# Llama-3.1-8B shapes (config.json): h 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128, FFN 14336,
# vocab 128256.
LLAMA8B = ModelSpec(
    id="llama-3.1-8b",
    name="Llama 3.1 8B",
    architecture="llama",
    hidden_size=4096,
    n_layers=32,
    n_heads=32,
    n_kv_heads=8,
    head_dim=128,
    intermediate_size=14336,
    vocab_size=128256,
    max_context=131072,
    layer_types=(FULL,) * 32,
)
P8B = 8_030_261_248
MOE = ModelSpec(
    id="toy-moe",
    name="toy",
    architecture="x",
    hidden_size=64,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    head_dim=16,
    intermediate_size=256,
    vocab_size=1000,
    max_context=4096,
    layer_types=(FULL,) * 2,
    moe=MoESpec(
        n_experts=8, n_experts_used=2, expert_ff=32, n_shared_experts=1, shared_ff=32, dense_layers=(0,)
    ),
)


def test_lora_params_llama8b_rank16_all_linear():
    # per layer: q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096, gate/up 4096+14336 (x2), down 14336+4096
    per_layer = 16 * (8192 + 5120 + 5120 + 8192 + 3 * 18432)
    assert lora_params(LLAMA8B, FinetuneConfig()) == 32 * per_layer == 41_943_040


def test_lora_params_moe_shared_only_and_with_experts():
    cfg = FinetuneConfig(rank=1, targets=("gate", "up", "down"))
    dense = 3 * (64 + 256)  # layer 0 dense
    shared = 3 * (64 + 32)  # layer 1 shared expert only
    assert lora_params(MOE, cfg) == dense + shared
    cfg2 = FinetuneConfig(rank=1, targets=("gate", "up", "down"), include_routed_experts=True)
    assert lora_params(MOE, cfg2) == dense + shared + 8 * 3 * (64 + 32)


def test_qlora_lora_full_llama8b():
    cfg = FinetuneConfig()
    act = activation_bytes(LLAMA8B, cfg)
    s, h = 2048, 4096
    expected_act = 32 * s * h * 2 + s * (4 * h + 2 * 4096 + 2 * 1024 + 3 * 14336) * 2 + s * 128256 * 10
    assert act == expected_act
    q, lo, full = estimate_all(LLAMA8B, P8B, cfg, overhead_bytes=500)
    emb = embedding_params(LLAMA8B)
    assert emb == 2 * 128256 * 4096
    assert q.weights_bytes == int((P8B - emb) * NF4_BITS / 8) + emb * 2
    n = 41_943_040
    assert (q.adapter_bytes, q.gradients_bytes, q.optimizer_bytes) == (4 * n, 4 * n, 8 * n)
    assert q.total_bytes == q.weights_bytes + 16 * n + act + 500
    assert lo.weights_bytes == 2 * P8B and lo.total_bytes == 2 * P8B + 16 * n + act + 500
    assert full.total_bytes == 16 * P8B + act + 500 and full.trainable_params == P8B
    assert q.total_bytes < lo.total_bytes < full.total_bytes
    assert NF4_BITS == pytest.approx(4.127, abs=1e-3)


def test_bad_finetune_input():
    with pytest.raises(SpecError):
        estimate_finetune(LLAMA8B, P8B, "dora")
    with pytest.raises(SpecError):
        estimate_finetune(LLAMA8B, P8B, "lora", FinetuneConfig(rank=0))
    with pytest.raises(SpecError):
        estimate_finetune(LLAMA8B, 0, "full")
