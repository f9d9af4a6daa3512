"""estimator/validate.py, the one validation layer (issue 14: 1): numbers finite and in range with the range
in the message, strict JSON, consistent model specs, names usable as file names."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from estimator.catalog.data import get_model
from estimator.specs import MoESpec, SpecError
from estimator.validate import (
    BOUNDS,
    MAX_DEVICES,
    check_model,
    check_name,
    check_number,
    json_depth,
    parse_json,
    parse_number,
)


@pytest.mark.parametrize(
    "text, rule, expected",
    [("512", "ctx", 512), ("512.0", "ctx", 512), ("1e3", "ctx", 1000), ("1_024", "devices", 1024),
     ("0.5", "gpu_memory_utilization", 0.5), (" 24 ", "memory_gib", 24.0)],
)  # fmt: skip
def test_parse_number_accepts(text, rule, expected):
    assert parse_number(text, rule, "--x") == expected


@pytest.mark.parametrize(
    "text, rule, needle",
    [
        ("1000000000000", "devices", f"--x must be between 1 and {MAX_DEVICES}, got 1000000000000"),
        ("1e300", "offload_gib", "between 0 and 1048576"),
        ("nan", "offload_gib", "(a finite number), got 'nan'"),
        ("-inf", "usd_per_hour", "finite"),
        ("1.5", "devices", "whole number"),
        ("x", "ctx", "must be an integer between 1 and 16777216, got 'x'"),
        ("9" * 5000, "ctx", "must be an integer"),
        ("0", "gpu_memory_utilization", "above 0 and at most 1, got 0"),
        ("1e-300", "memory_gib", "between 0.001 and"),
        ("", "ctx", "must be an integer"),
    ],
)
def test_parse_number_refuses_with_the_range(text, rule, needle):
    with pytest.raises(SpecError) as exc:
        parse_number(text, rule, "--x")
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_check_number_refuses_bools_and_text():
    for bad in (True, "4", [4], None, float("inf")):
        with pytest.raises(SpecError, match="--devices"):
            check_number(bad, "devices", "--devices")
    assert check_number(4.0, "devices", "--devices") == 4 and isinstance(
        check_number(4.0, "devices", ""), int
    )


def test_every_bound_is_finite_and_ordered():
    for name, b in BOUNDS.items():
        assert b.lo < b.hi and b.hi < float("inf"), name


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"a": NaN}', "NaN is not a number JSON allows"),
        ('{"a": Infinity}', "Infinity"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": 1e999}', "overflows"),
        ('{"a": ' + "9" * 5001 + "}", "5001 digits"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64"),
        ('{"a": ' + "[" * 65 + "]" * 65 + "}", "nested deeper than 64"),
        ("{not json", "Expecting property name"),
    ],
)
def test_parse_json_is_strict(text, needle):
    with pytest.raises(SpecError) as exc:
        parse_json(text, "f.json")
    assert str(exc.value).startswith("f.json: not valid JSON") and needle in str(exc.value)


def test_parse_json_accepts_ordinary_configs():
    cfg = {"hidden_size": 4096, "rope_theta": 5e5, "layers": [[1, 2], {"a": None}]}
    assert parse_json(json.dumps(cfg), "c") == cfg
    assert json_depth(cfg) == 3 and json_depth(1) == 0


def test_check_model_accepts_every_catalog_model():
    from estimator.catalog.data import all_models

    for m in all_models():
        check_model(m, m.id)


@pytest.mark.parametrize(
    "change, needle",
    [
        (dict(n_layers=0, layer_types=()), "n_layers must be between 1"),
        (dict(n_heads=0), "n_heads must be at least 1"),
        (dict(n_kv_heads=0), "n_kv_heads must be at least 1"),
        (dict(n_kv_heads=64), "above the attention heads"),
        (dict(head_dim=0), "head_dim must be at least 1"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(max_context=0), "max_context"),
        (dict(window=-4), "window"),
        (dict(layer_types=("full",)), "layer kinds for"),
        (dict(layer_types=("sliding",) * 28), "without a window"),
    ],
)
def test_check_model_refuses(change, needle):
    m = get_model("qwen3-0.6b")
    with pytest.raises(SpecError) as exc:
        check_model(replace(m, **change), "m.json")
    assert str(exc.value).startswith("m.json: ") and needle in str(exc.value)


def test_check_model_moe():
    m = get_model("qwen3-30b-a3b")
    with pytest.raises(SpecError, match="above the experts"):
        check_model(replace(m, moe=replace(m.moe, n_experts_used=200)), "x")
    with pytest.raises(SpecError, match="dense layer 99"):
        check_model(replace(m, moe=replace(m.moe, dense_layers=(99,))), "x")
    with pytest.raises(SpecError, match="moe.n_experts"):
        check_model(replace(m, moe=MoESpec(n_experts=0, n_experts_used=0, expert_ff=64)), "x")


@pytest.mark.parametrize("name", ["cpu-quick", "gpu.v2", "A_1"])
def test_check_name_accepts(name):
    assert check_name(name, "name") == name


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", ".hidden", "", 5, "a..b", "x" * 101, "a b", "é"])
def test_check_name_refuses(name):
    with pytest.raises(SpecError, match="name"):
        check_name(name, "name")
