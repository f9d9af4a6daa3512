"""llama.cpp quant recipes: every recipe vs llama.cpp's own quantizer, and the rules one by one.

Known answers: tests/quantizer/bytes.json holds the summed tensor bytes of GGUF files that llama.cpp's
``llama_model_quantize`` (llama-cpp-python 0.3.36) wrote from synthetic F16 probes, one per (probe, recipe)
(regenerate with ``python tests/quantizer/quantizer.py``).  The estimator must equal them to the byte; the
``llama`` test re-quantizes a few probes to show the file is llama.cpp's output.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from estimator.physics.quant import LLAMA_RECIPES, QUANTS, VARIANTS, get_quant, llama_recipe, type_for
from estimator.physics.weights import is_llama_70b, weight_breakdown
from estimator.specs import SpecError

_HERE = Path(__file__).parent / "quantizer"
_SPEC = importlib.util.spec_from_file_location("quantizer", _HERE / "quantizer.py")
quantizer = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(quantizer)
KNOWN = json.loads((_HERE / "bytes.json").read_text())["bytes"]
PROBES = quantizer.probes()
CASES = [(p, q) for p, by_q in KNOWN.items() for q in by_q]


def test_every_llama_recipe_is_measured_on_the_16_layer_probes():
    sixteen = ("llama-16", "llama-16-gqa4", "llama-16-odd", "qwen3moe-16", "gemma3-16-tied", "deepseek2-16")
    for probe in sixteen:
        assert set(KNOWN[probe]) == set(LLAMA_RECIPES), probe


@pytest.mark.parametrize("probe, quant", CASES)
def test_recipe_equals_llama_quantizer_bytes(probe, quant):
    wb = weight_breakdown(PROBES[probe], quant)
    known = KNOWN[probe][quant]
    assert {t: b for t, b in wb.by_type_bytes.items() if b} == known["by_type"]
    assert wb.total_bytes == known["total_bytes"]


@pytest.mark.llama
@pytest.mark.parametrize(
    "probe, quant",
    [
        ("llama-16", "IQ4_XS"),  # imatrix: no first-n/8 ffn_down promotion
        ("llama-16", "Q4_0-imatrix"),  # imatrix: first n/8 ffn_down q4_1
        ("llama-16-gqa4", "IQ1_M"),  # needs an imatrix; attn_v q4_K at GQA 4
        ("llama-16-odd", "Q3_K_XL"),  # output / embedding overrides, row fallbacks
        ("qwen3moe-16", "Q2_K_S"),  # 8 experts, imatrix-only k-quant
    ],
)
def test_known_bytes_are_llama_quantizer_output(probe, quant, tmp_path):
    pytest.importorskip("llama_cpp")
    assert quantizer.measure(PROBES[probe], quant, tmp_path) == KNOWN[probe][quant]


def test_recipe_names_and_variants():
    assert llama_recipe("IQ4_XS").imatrix and not llama_recipe("IQ4_XS-static").imatrix
    assert get_quant("i1-Q4_0") is VARIANTS["Q4_0-imatrix"] and "Q4_0-imatrix" not in QUANTS
    assert get_quant("i1-IQ4_XS") is QUANTS["IQ4_XS"]
    assert get_quant("i1-q4_k_m") is QUANTS["Q4_K_M"]  # an imatrix does not change k-quant types
    assert llama_recipe("Q4_K_L") == llama_recipe("Q4_K_L").__class__("Q4_K_M", False, "q8_0", "q8_0")
    assert llama_recipe("Q3_K_XL").ftype == "Q3_K_L"
    assert llama_recipe("BF16") is None and llama_recipe("NVFP4") is None
    with pytest.raises(SpecError, match="dynamic per-tensor mix.*gguf"):
        get_quant("UD-Q2_K_XL")
    with pytest.raises(SpecError, match="closest"):
        get_quant("IQ5_XS")


def test_imatrix_switches():
    # IQ4_XS: the first n/8 ffn_down layers are q5_K only without an importance matrix
    assert type_for("IQ4_XS-static", "ffn_down", 1, 16, row_len=1024) == "q5_K"
    assert type_for("IQ4_XS", "ffn_down", 1, 16, row_len=1024) == "iq4_xs"
    # Q4_0 / Q5_0: q4_1 / q5_1 for the first n/8 ffn_down layers only with one
    assert type_for("Q4_0-imatrix", "ffn_down", 1, 16, row_len=1024) == "q4_1"
    assert type_for("Q4_0", "ffn_down", 1, 16, row_len=1024) == "q4_0"
    assert type_for("Q5_0-imatrix", "ffn_down", 2, 16, row_len=1024) == "q5_0"  # layer 2 >= 16/8
    # IQ3_XXS keeps attn_v at iq3_xxs below GQA 4 with an imatrix
    assert type_for("IQ3_XXS", "attn_v", 0, 16, n_gqa=2, row_len=1024) == "iq3_xxs"
    assert type_for("IQ3_XXS", "attn_v", 0, 16, n_gqa=4, row_len=1024) == "q4_K"


def test_low_bit_family_rules():
    # output head q5_K, token embedding q2_K / iq3_s, attn_output iq2_xxs / iq3_s
    assert type_for("IQ1_S", "output", row_len=1024) == "q5_K"
    assert type_for("IQ1_S", "token_embd", row_len=1024) == "q2_K"
    assert type_for("IQ2_M", "token_embd", row_len=1024) == "iq3_s"
    assert type_for("IQ1_M", "attn_output", 3, 16, row_len=1024) == "iq2_xxs"
    assert type_for("IQ2_S", "attn_output", 3, 16, row_len=1024) == "iq3_s"
    # attn_v: q4_K at GQA >= 4 or >= 4 experts, else q2_K (iq3_s for IQ2_S / IQ2_M)
    assert type_for("IQ2_XXS", "attn_v", 5, 16, n_gqa=2, row_len=1024) == "q2_K"
    assert type_for("IQ2_XXS", "attn_v", 5, 16, n_gqa=2, n_expert=4, row_len=1024) == "q4_K"
    assert type_for("IQ2_M", "attn_v", 5, 16, n_gqa=2, row_len=1024) == "iq3_s"
    # ffn_down: the counter (not the layer) picks the first n/8 tensors
    assert type_for("IQ2_XS", "ffn_down_exps", 9, 16, counter=1, n_expert=8, row_len=1024) == "q2_K"
    assert type_for("IQ2_XS", "ffn_down_exps", 1, 16, counter=9, n_expert=8, row_len=1024) == "iq2_xs"
    # IQ3_XS: middle ffn_gate / ffn_up and attn_q / attn_k iq3_xxs
    assert type_for("IQ3_XS", "ffn_up", 8, 16, row_len=1024) == "iq3_xxs"
    assert type_for("IQ3_XS", "ffn_up", 1, 16, row_len=1024) == "iq3_s"
    assert type_for("IQ3_XS", "attn_q", 1, 16, row_len=1024) == "iq3_xxs"


def test_k_quant_s_and_l_rules():
    assert type_for("Q3_K_L", "attn_v", 9, 16, row_len=1024) == "q5_K"
    assert type_for("Q3_K_L", "attn_output", 9, 16, row_len=1024) == "q5_K"
    assert type_for("Q3_K_L", "ffn_down", 9, 16, row_len=1024) == "q5_K"
    assert type_for("Q3_K_S", "ffn_down", 0, 16, row_len=1024) == "q3_K"
    assert type_for("Q2_K_S", "ffn_down", 1, 16, row_len=1024) == "q4_K"
    assert type_for("Q2_K_S", "attn_v", 1, 16, n_gqa=4, row_len=1024) == "q4_K"
    # overrides are returned as given: no row-length fallback
    assert type_for("Q6_K_L", "output", row_len=1000) == "q8_0"
    assert type_for("Q6_K_L", "token_embd", row_len=4096) == "q8_0"


def test_70b_rule_needs_gqa_in_llama():
    from estimator.catalog.data import get_model

    assert is_llama_70b(get_model("llama-3.1-70b")) and is_llama_70b(get_model("qwen2.5-72b"))
    assert not is_llama_70b(get_model("llama-1-65b"))  # 80 layers, MHA: llama.cpp's "65B"
    assert not is_llama_70b(get_model("llama-3.1-8b"))
