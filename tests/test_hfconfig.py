"""config.json loader: nested text_config, explicit head_dim, layer patterns, MoE/MLA keys, missing keys."""

from __future__ import annotations

import json

import pytest

from estimator.catalog.hfconfig import load_hf_config, spec_from_config
from estimator.catalog.resolve import resolve_model
from estimator.specs import CHUNKED, FULL, LINEAR, MAMBA, SLIDING, SpecError

BASE = {
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "intermediate_size": 3072,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


def test_missing_key_names_key_and_file(tmp_path):
    cfg = dict(BASE)
    del cfg["num_hidden_layers"]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(SpecError) as exc:
        load_hf_config(tmp_path)
    assert "num_hidden_layers" in str(exc.value) and str(p) in str(exc.value)


def test_folder_and_file_resolve(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(BASE))
    assert resolve_model(str(tmp_path)).n_layers == 4
    assert resolve_model(str(tmp_path / "config.json")).hidden_size == 1024


def test_bad_json_is_spec_error(tmp_path):
    (tmp_path / "config.json").write_text("{nope")
    with pytest.raises(SpecError, match="JSON"):
        load_hf_config(tmp_path)


def test_explicit_head_dim_wins_qwen3_0_6b():
    m = resolve_model("qwen3-0.6b")
    assert m.head_dim == 128 and m.hidden_size // m.n_heads == 64


def test_mha_default_and_derived_head_dim():
    cfg = dict(BASE)
    del cfg["num_key_value_heads"]
    m = spec_from_config(cfg)
    assert m.n_kv_heads == 16 and m.head_dim == 64


def test_gemma3_text_config_defaults_apply():
    cfg = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "num_hidden_layers": 34,
            "intermediate_size": 10240,
            "sliding_window": 1024,
        },
    }
    m = spec_from_config(cfg)
    assert (m.n_heads, m.n_kv_heads, m.head_dim, m.vocab_size) == (8, 4, 256, 262208)
    assert m.tie_embeddings and m.window == 1024
    assert m.layer_types.count(SLIDING) == 29 and m.layer_types.count(FULL) == 5


def test_layer_patterns():
    assert resolve_model("gpt-oss-120b").layer_types[:2] == (SLIDING, FULL)
    ll4 = resolve_model("llama-4-scout-17b-16e")
    assert ll4.layer_types.count(CHUNKED) == 36 and ll4.window == 8192
    qn = resolve_model("qwen3-next-80b-a3b")
    assert qn.layer_types.count(LINEAR) == 36 and qn.layer_types[3] == FULL
    nem = resolve_model("nemotron-3-super-120b-a12b")
    assert nem.layer_types.count(MAMBA) == 40 and nem.layer_types.count(FULL) == 8
    assert nem.moe.latent_size == 1024 and not nem.ffn_gated
    qwen2 = resolve_model("qwen2.5-7b")  # sliding_window present but use_sliding_window false
    assert qwen2.window is None and set(qwen2.layer_types) == {FULL}


def test_moe_key_spellings():
    assert resolve_model("mixtral-8x7b").moe.expert_ff == 14336
    glm = resolve_model("glm-4.5").moe
    assert (glm.n_experts, glm.n_experts_used, glm.n_shared_experts, glm.dense_layers) == (
        160,
        8,
        1,
        (0, 1, 2),
    )
    hun = resolve_model("hunyuan-a13b").moe  # per-layer lists
    assert hun.n_experts_used == 8 and hun.expert_ff == 3072
    ern = resolve_model("ernie-4.5-300b-a47b").moe
    assert ern.dense_layers == (0, 1, 2)
    mav = resolve_model("llama-4-maverick-17b-128e")
    assert len(mav.moe.dense_layers) == 24 and mav.intermediate_size == 16384


def test_mla_keys():
    m = resolve_model("deepseek-v3")
    assert m.mla.kv_lora_rank == 512 and m.mla.qk_rope_head_dim == 64 and m.native_dtype == "fp8"
    cfg = dict(BASE, kv_lora_rank=512)
    with pytest.raises(SpecError, match="qk_rope_head_dim"):
        spec_from_config(cfg, "x/config.json")
    v32 = resolve_model("deepseek-v3.2").mla  # the DSA indexer from config.json
    assert (v32.index_n_heads, v32.index_head_dim, v32.index_topk) == (64, 128, 2048)
    dsa = dict(cfg, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, q_lora_rank=1536)
    with pytest.raises(SpecError, match="index_topk"):
        spec_from_config(dict(dsa, index_n_heads=64, index_head_dim=128), "x/config.json")


def test_gemma4_global_layers():
    m = resolve_model("gemma-4-26b-a4b")
    assert m.global_head_dim == 512 and m.global_n_kv_heads == 2 and m.k_eq_v
    assert (m.per_layer_input, m.n_kv_shared_layers, m.double_wide_mlp) == (0, 0, False)


def test_gemma4_e_keys():
    """hidden_size_per_layer_input, num_kv_shared_layers and use_double_wide_mlp (Gemma 4 E2B's config)."""
    m = resolve_model("gemma-4-e2b")
    assert (m.per_layer_input, m.n_kv_shared_layers, m.double_wide_mlp) == (256, 20, True)
    assert [m.kv_shared(i) for i in (14, 15)] == [False, True] and m.ffn_width(15) == 2 * m.ffn_width(14)


@pytest.mark.parametrize(
    "change, needle",
    [
        (dict(num_attention_heads=0), "n_heads must be at least 1"),
        (dict(num_hidden_layers=0), "num_hidden_layers must be between 1 and 4096"),
        (dict(num_hidden_layers=10**12), "num_hidden_layers must be between 1 and 4096"),
        (dict(hidden_size="abc"), "hidden_size must be an integer"),
        (dict(hidden_size=True), "hidden_size must be an integer"),
        (dict(hidden_size=1024.5), "whole number"),
        (dict(hidden_size=1000), "not divisible by num_attention_heads 16"),
        (dict(num_key_value_heads=32), "above the attention heads"),
        (dict(model_type="mistral", sliding_window=-5), "sliding_window must be between 0"),
        (dict(num_experts=8, num_experts_per_tok=16, moe_intermediate_size=64), "16 experts per token"),
        (dict(num_experts=0, num_experts_per_tok=2, moe_intermediate_size=64), "above the 0 experts"),
        (dict(n_routed_experts=8, num_experts_per_tok=2, first_k_dense_replace=10**12), "first_k_dense"),
        (dict(num_experts=8, num_experts_per_tok=2, mlp_only_layers=[99]), "dense layer 99"),
        (dict(quantization_config="fp8"), "quantization_config must be a JSON object"),
        (dict(architectures=5), "architectures must be a list"),
        (dict(full_attention_interval="x"), "full_attention_interval must be an integer"),
        (dict(num_kv_shared_layers=4), "leave no layer of the 4 to share from"),
    ],
)
def test_hostile_config_values_are_one_line(change, needle):
    with pytest.raises(SpecError) as exc:
        spec_from_config({**BASE, **change}, "c/config.json")
    assert needle in str(exc.value) and str(exc.value).startswith("c/config.json: ")


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"hidden_size": NaN}', "NaN"),
        ('{"vocab_size": ' + "9" * 5001 + "}", "5001 digits"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper"),
    ],
)
def test_hostile_config_files(tmp_path, text, needle):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(SpecError, match=needle):
        load_hf_config(tmp_path)


def test_config_fifo_and_huge_file_refused(tmp_path):
    import os

    os.mkfifo(tmp_path / "config.json")
    with pytest.raises(SpecError, match="FIFO"):
        load_hf_config(tmp_path)
    with pytest.raises(SpecError, match="FIFO"):
        resolve_model(str(tmp_path / "config.json"))
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(20 * 2**20)
    with pytest.raises(SpecError, match="more than the"):
        load_hf_config(big)


def test_gpt2_era_spellings_are_read_as_the_standard_keys():
    """GPT-J / BLOOM / OPT configs name their sizes the old way; the standard key wins where both exist."""
    gptj = {"model_type": "gptj", "n_embd": 256, "n_layer": 3, "n_head": 4, "n_inner": None,
            "n_positions": 2048, "vocab_size": 1000, "tie_word_embeddings": False}  # fmt: skip
    m = spec_from_config(gptj)
    assert (m.hidden_size, m.n_layers, m.n_heads, m.n_kv_heads, m.max_context) == (256, 3, 4, 4, 2048)
    assert m.intermediate_size == 4 * 256 and not m.ffn_gated and not m.tie_embeddings
    bloom = {"model_type": "bloom", "n_embed": 256, "n_layer": 2, "n_head": 8, "seq_length": 2048,
             "vocab_size": 1000}  # fmt: skip
    m = spec_from_config(bloom)
    assert (m.hidden_size, m.n_layers, m.n_heads, m.max_context) == (256, 2, 8, 2048)
    assert m.intermediate_size == 1024 and not m.ffn_gated and m.tie_embeddings  # BloomConfig ties by default
    opt = {"model_type": "opt", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "ffn_dim": 768, "max_position_embeddings": 2048, "vocab_size": 1000}  # fmt: skip
    m = spec_from_config(opt)
    assert m.intermediate_size == 768 and not m.ffn_gated and m.tie_embeddings
    both = dict(gptj, hidden_size=512, num_attention_heads=8)
    assert spec_from_config(both).hidden_size == 512
    # a bloom without any context key still names the key it lacks
    with pytest.raises(SpecError, match="max_position_embeddings"):
        spec_from_config({k: v for k, v in bloom.items() if k != "seq_length"})


def test_ungated_mlp_counts_two_matrices_per_layer():
    """An up/down MLP has 2 x hidden x width weights a layer, a gated one 3 x: GPT-J 6B's published geometry
    (28 layers, 4,096 wide, MLP 16,384, vocabulary 50,400, untied head) counts 6.05 B parameters."""
    from estimator.physics.weights import weight_breakdown

    gptj = {"model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_inner": None,
            "n_positions": 2048, "vocab_size": 50400, "tie_word_embeddings": False}  # fmt: skip
    m = spec_from_config(gptj)
    per_layer = 4 * 4096 * 4096 + 2 * 4096 * 16384
    embeddings = 2 * 50400 * 4096
    n = weight_breakdown(m, "F16").n_params_total
    assert abs(n - (28 * per_layer + embeddings)) / n < 1e-3
    llama = dict(BASE, hidden_size=4096, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=16,
                 intermediate_size=16384, vocab_size=50400, tie_word_embeddings=False)
    gated = weight_breakdown(spec_from_config(llama), "F16")
    assert gated.n_params_total - n == pytest.approx(28 * 4096 * 16384, rel=1e-3)
