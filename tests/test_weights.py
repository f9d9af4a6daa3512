"""Weight inventory: parameter counts vs the reference, bytes per quant, MoE active bytes."""

from __future__ import annotations

import pytest

from estimator.catalog.data import get_model
from estimator.physics.quant import row_bytes
from estimator.physics.weights import expert_bytes_per_layer, tensor_inventory, weight_breakdown


def test_llama_8b_bf16_bytes_exact():
    m = get_model("llama-3.1-8b")
    wb = weight_breakdown(m, "BF16")
    n_1d = sum(t.n_elements for t in tensor_inventory(m) if t.group == "norm")
    assert wb.total_bytes == 2 * (wb.n_params_total - n_1d) + 4 * n_1d
    assert wb.token_embd_bytes == 2 * 128256 * 4096
    assert wb.active_bytes_per_token == wb.total_bytes - wb.token_embd_bytes


def test_q4_k_m_sits_between_q4_k_and_q6_k():
    m = get_model("llama-3.1-8b")
    q4 = weight_breakdown(m, "Q4_K_M").total_bytes / weight_breakdown(m, "BF16").n_params_total * 8
    assert 4.5 < q4 < 5.2  # published Llama-3-8B Q4_K_M is ~4.89 bpw
    assert weight_breakdown(m, "Q4_K_M").by_class_bytes["output"] == row_bytes("q6_K", 128256 * 4096)
    sizes = [
        weight_breakdown(m, q).total_bytes
        for q in ("Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "BF16")
    ]
    assert sizes == sorted(sizes)


def test_moe_routed_and_active():
    m = get_model("qwen3-30b-a3b")
    wb = weight_breakdown(m, "Q8_0")
    assert wb.routed_expert_bytes > 0.9 * wb.total_bytes
    expected = wb.total_bytes - wb.token_embd_bytes - round(wb.routed_expert_bytes * (1 - 8 / 128))
    assert wb.active_bytes_per_token == expected
    per_layer = expert_bytes_per_layer(m, "Q8_0")
    assert len(per_layer) == 48 and sum(per_layer) == wb.routed_expert_bytes


def test_dense_first_layers_have_no_experts():
    per_layer = expert_bytes_per_layer(get_model("deepseek-v3"), "Q4_K_M")
    assert per_layer[:3] == (0, 0, 0) and all(b > 0 for b in per_layer[3:])


def test_tied_embedding_counts_once():
    m = get_model("qwen3-0.6b")
    wb = weight_breakdown(m, "BF16")
    assert m.tie_embeddings and wb.output_bytes == 0
    assert wb.active_bytes_per_token == wb.total_bytes  # the embedding is read as the output head


def test_quant_by_name_or_spec_same():
    from estimator.physics.quant import get_quant

    m = get_model("gemma-3-27b")
    assert weight_breakdown(m, "q4_k_m") == weight_breakdown(m, get_quant("Q4_K_M"))


def test_mxfp4_gpt_oss_near_published_size():
    wb = weight_breakdown(get_model("gpt-oss-120b"), "MXFP4")
    # official MXFP4 checkpoint ~ 121.54 GiB / 2 (kaito lists both copies); experts at 4.25 bits
    assert wb.total_bytes / 2**30 == pytest.approx(60.8, rel=0.08)


# Summed tensor bytes (gguf.GGUFReader) of files harness.synth wrote for harness.synth.tiny_model(arch)
# (4 layers) and llama.cpp's llama-quantize quantized (llama-cpp-python 0.3.36).  Measured, not estimated.
QUANTIZED_FILE_BYTES = [
    ("llama", "Q4_K_M", 2_259_456),
    ("llama", "Q8_0", 3_908_608),
    ("qwen2", "Q4_K_M", 2_267_648),
    ("qwen3", "Q4_K_M", 2_261_504),
    ("qwen3_moe", "Q4_K_M", 4_822_016),
    ("qwen3_moe", "Q8_0", 8_121_344),
    ("gemma3", "Q4_K_M", 2_122_240),  # post_attention_norm / post_ffw_norm included
    ("gemma3", "Q8_0", 3_640_320),
    ("deepseek_v2", "Q4_K_M", 4_694_016),  # attn_k_b / attn_v_b rows of 64 / 128 fall back to q5_0
    ("deepseek_v2", "Q8_0", 8_008_704),
]


@pytest.mark.parametrize("arch, quant, file_bytes", QUANTIZED_FILE_BYTES)
def test_estimate_equals_llama_quantize_output(arch, quant, file_bytes):
    from harness.synth import tiny_model

    assert weight_breakdown(tiny_model(arch), quant).total_bytes == file_bytes


def test_mla_kv_b_is_split_like_current_ggufs():
    m = get_model("deepseek-v2-lite-16b")
    a = m.mla
    names = {t.name.split(".", 2)[-1] for t in tensor_inventory(m) if t.layer == 0}
    assert {"attn_k_b.weight", "attn_v_b.weight"} <= names and "attn_kv_b.weight" not in names
    wb = weight_breakdown(m, "Q4_K_M")
    # attn_k_b rows hold qk_nope (128) elements: not whole q4_K blocks of 256 -> q5_0 (llama.cpp fallback)
    from estimator.physics.quant import type_for

    k_b = m.n_layers * m.n_heads * a.kv_lora_rank * a.qk_nope_head_dim
    assert type_for("Q4_K_M", "other", 3, m.n_layers, row_len=a.qk_nope_head_dim) == "q5_0"
    assert type_for("Q4_K_M", "other", 3, m.n_layers, row_len=a.kv_lora_rank) == "q4_K"  # attn_v_b
    assert wb.by_type_bytes["q5_0"] >= row_bytes("q5_0", k_b)
    # 3-D tensors become MXFP4 under MXFP4_MOE, as the merged experts do
    assert "mxfp4" in weight_breakdown(m, "MXFP4").by_type_bytes


def test_gemma_sandwich_norms():
    m = get_model("gemma-3-27b")
    per_layer = [t for t in tensor_inventory(m) if t.layer == 5 and t.group == "norm"]
    names = {t.name.split(".", 2)[-1] for t in per_layer}
    assert {"post_attention_norm.weight", "post_ffw_norm.weight"} <= names
    assert weight_breakdown(m, "BF16").by_class_bytes["norm"] >= m.n_layers * 4 * m.hidden_size * 4


def test_phi3_fuses_qkv_and_gate_up_like_its_ggufs():
    m = get_model("phi-4-14b")
    names = {t.name.split(".", 2)[-1] for t in tensor_inventory(m) if t.layer == 0}
    assert {"attn_qkv.weight", "ffn_up.weight", "ffn_down.weight"} <= names
    assert not names & {"attn_q.weight", "attn_k.weight", "attn_v.weight", "ffn_gate.weight"}
    # the fused attn_qkv is attn_v-like for llama.cpp's quantizer: Q4_K_M keeps it in q6_K on use_more_bits
    from estimator.physics.quant import type_for

    assert type_for("Q4_K_M", "attn_qkv", 0, 40, row_len=5120) == "q6_K"
    assert weight_breakdown(m, "BF16").n_params_total == weight_breakdown(m, "Q8_0").n_params_total


def test_rows_that_are_not_whole_blocks_are_reported():
    """gpt-oss's 2,880-wide rows are not whole 256-element k-quant blocks: llama-quantize stores them in the
    fallback types (q4_K -> q5_0, q6_K -> q8_0), so its Q4_K_M is larger than its Q5_0; Gemma 4 26B-A4B's
    704-wide experts and 2,112-wide FFN fall back too (31 %); DeepSeek-V3's 128-wide MLA rows are 0.1 %."""
    from estimator.catalog.data import get_model
    from estimator.physics.weights import block_fallback, weight_breakdown

    oss = get_model("gpt-oss-120b")
    share, widths = block_fallback(oss, "Q4_K_M")
    assert widths == (2880,) and share > 0.99
    assert weight_breakdown(oss, "Q4_K_M").total_bytes > weight_breakdown(oss, "Q5_0").total_bytes
    assert block_fallback(oss, "Q5_0") is None and block_fallback(oss, "MXFP4") is None
    assert block_fallback(oss, "BF16") is None
    share, widths = block_fallback(get_model("gemma-4-26b-a4b"), "Q4_K_M")
    assert widths == (704, 2112) and 0.3 < share < 0.32
    assert block_fallback(get_model("deepseek-v3"), "Q4_K_M")[0] < 0.01
    assert block_fallback(get_model("llama-3.1-8b"), "Q4_K_M") is None


def test_the_report_says_when_a_recipe_falls_back():
    from estimator.report.document import report_to_dict
    from estimator.report.request import ReportRequest, make_report

    def notes(model, quant=None):
        d = report_to_dict(make_report(ReportRequest(model=model, hardware="h100-80gb-sxm", quant=quant)))
        return [n for n in d["notes"] if "not whole" in n]

    (note,) = notes("gpt-oss-120b", "Q4_K_M")
    assert note.startswith("Q4_K_M: 99.6% of the weights have rows of 2,880 elements, not whole q4_K blocks")
    assert "(q4_K -> q5_0)" in note
    assert notes("gpt-oss-120b") == []  # MXFP4, llama.cpp's default for it
    assert notes("deepseek-v3", "Q4_K_M") == [] and notes("llama-3.1-8b") == []
