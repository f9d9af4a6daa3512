"""Forgiving names (issue 13: 3): what a user types for a device or a model reaches the catalog entry, an
ambiguous name asks which, and the report says how a name was mapped."""

from __future__ import annotations

import pytest

from estimator.catalog import data as catalog
from estimator.catalog.names import tokens
from estimator.catalog.resolve import resolve_hardware, resolve_model_noted
from estimator.specs import SpecError
from tests.estimator_cli import cli, cli_json


@pytest.mark.parametrize(
    "typed, hw_id",
    [
        ("4090", "rtx-4090"),
        ("rtx4090", "rtx-4090"),
        ("RTX 4090", "rtx-4090"),
        ("3090", "rtx-3090"),
        ("h100 pcie", "h100-80gb-pcie"),
        ("H100 NVL", "h100-nvl-94gb"),
        ("m3 max", "apple-m3-max"),
        ("MI300X", "mi300x"),
        ("l40", "l40"),
        ("h100_sxm", "h100-80gb-sxm"),  # a catalog alias stays exact
        # the vendor's name with the device's: the full chip, not its bin (apple-m4-max-32c) or a machine
        ("m4 max", "apple-m4-max"),
        ("macbook pro m4 max", "macbook-pro-m4-max-128gb"),
        ("apple-m4-max-40c", "apple-m4-max"),  # a catalog alias: exact
        ("nvidia h200", "h200-141gb-sxm"),
        ("AMD MI300X", "mi300x"),
    ],
)
def test_device_names(typed, hw_id):
    hw = resolve_hardware(typed, forgiving=True)
    assert hw.id == hw_id
    assert bool(hw.notes) == (typed.lower() != hw_id and typed not in ("h100_sxm", "apple-m4-max-40c"))


@pytest.mark.parametrize(
    "typed, some", [("h100", "h100-80gb-pcie"), ("a100", "a100-40gb-sxm"), ("h20", "h20-96gb")]
)
def test_ambiguous_device_asks_which(typed, some):
    with pytest.raises(SpecError, match="matches .* catalog entries") as err:
        resolve_hardware(typed, forgiving=True)
    assert some in str(err.value)


@pytest.mark.parametrize(
    "typed, hw_id",
    [("3060", "rtx-3060-12gb"), ("4060", "rtx-4060-8gb"), ("2060", "rtx-2060-6gb"), ("6800", "rx-6800"),
     ("apple m4", "apple-m4-10c"), ("m1", "apple-m1"), ("m3 max", "apple-m3-max"),
     ("m3 max 30c", "apple-m3-max-30c")],
)
def test_an_unstated_memory_size_does_not_count_against_a_variant(typed, hw_id):
    """"3060" is the RTX 3060 (12 GB): its id's memory size is not a token beyond the name, the 3060 Ti's "ti"
    is; before this rule the shorter rtx-3060-ti id won.  A GPU core count is a bin of the same kind, and the
    full chip wins among bins ("m3 max"); "apple m4" is the 10-core M4, not the M4 Pro or Max."""
    assert resolve_hardware(typed, forgiving=True).id == hw_id


def test_memory_sizes_of_one_chip_are_a_question_listing_the_near_misses():
    with pytest.raises(SpecError, match="matches 2 catalog entries: rtx-4060-ti-16gb, rtx-4060-ti-8gb;"):
        resolve_hardware("4060 ti", forgiving=True)
    with pytest.raises(SpecError, match=r"tesla-v100-pcie-32gb \(also: tesla-v100-sxm2-32gb\)"):
        resolve_hardware("v100", forgiving=True)


def test_h100_from_the_command_line_names_every_variant():
    p = cli("report --model qwen3-30b-a3b --hardware h100")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    for hid in ("h100-80gb-sxm", "h100-80gb-pcie", "h100-nvl-94gb"):
        assert hid in p.stderr
    assert "a10," not in p.stderr and "b300" not in p.stderr  # the old difflib suggestions


def test_harness_lookups_stay_exact():
    with pytest.raises(SpecError, match="unknown hardware '4090'"):
        resolve_hardware("4090")
    with pytest.raises(SpecError, match="unknown model"):
        catalog.model_entry("Qwen/Qwen3-30B-A3B-Instruct-2507")


@pytest.mark.parametrize(
    "typed, model_id",
    [
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"),
        ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),  # a catalog alias
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
        ("google/gemma-3-12b-pt", "gemma-3-12b"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"),
        ("Qwen/Qwen3-Coder-30B-A3B", "qwen3-coder-30b-a3b"),
    ],
)
def test_release_names_map_to_the_base_entry_with_a_note(typed, model_id):
    m, notes = resolve_model_noted(typed)
    assert m.id == model_id
    assert notes and model_id in notes[0] and typed in notes[0]


def test_catalog_ids_need_no_note():
    for typed in ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "GLM-4.5", "google/gemma-3-27b-it"):
        assert resolve_model_noted(typed)[1] == ()


def test_ambiguous_model_asks_which():
    with pytest.raises(SpecError, match="matches"):
        resolve_model_noted("llama 70b")


def test_tokens():
    assert tokens("Qwen/Qwen3-30B-A3B-Instruct-2507", model=True) == ("qwen3", "30b", "a3b")
    assert tokens("meta-llama/Llama-3.1-70B-Instruct", model=True) == ("llama", "3.1", "70b")
    assert tokens("RTX4090") == ("rtx", "4090")
    assert tokens("h100-80gb-sxm") == ("h", "100", "80", "gb", "sxm")


def test_the_users_questions_are_answered():
    # "Qwen3-30B-A3B at 32K on my 4090?"
    d = cli_json("report --model Qwen/Qwen3-30B-A3B-Instruct-2507 --hardware 4090 --ctx 32768 --format json")
    assert d["model"]["id"] == "qwen3-30b-a3b" and d["hardware"]["id"] == "rtx-4090"
    assert d["workload"]["n_ctx"] == 32768
    assert any("Qwen/Qwen3-30B-A3B-Instruct-2507" in n for n in d["notes"])
    assert any("'4090' is catalog device rtx-4090" in n for n in d["notes"])
    # "which Llama-3.1-70B quant fits two 3090s?"
    d = cli_json("report --model meta-llama/Llama-3.1-70B-Instruct --hardware 3090 --devices 2 --format json")
    assert d["model"]["id"] == "llama-3.1-70b" and d["hardware"]["id"] == "rtx-3090"
    assert any(r["verdict"] == "fits" for r in d["quant_matrix"])
    assert any("instruct fine-tune" in n for n in d["notes"])
