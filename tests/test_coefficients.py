"""Coefficients file: validation, fallback order, honest labels, widened intervals, env override."""

from __future__ import annotations

import copy
import json
import math

import pytest

from estimator.physics.coefficients import (
    ENV_VAR,
    POOLED_WIDEN,
    CoefficientsError,
    load_coefficients,
    load_prior,
    parse_coefficients,
    prior_table,
)
from estimator.specs import GIB, HardwareSpec


def _hw(family="nvidia-ada", vendor="NVIDIA", kind="gpu", **kw) -> HardwareSpec:
    return HardwareSpec(
        id=kw.pop("id", "test-dev"),
        name="Test",
        vendor=vendor,
        family=family,
        kind=kind,
        memory_bytes=24 * GIB,
        bandwidth_gbs=kw.pop("bandwidth_gbs", 1000.0),
        bf16_tflops=kw.pop("bf16", 100.0),
        **kw,
    )


def _doc() -> dict:
    return {
        "schema_version": 1,
        "fitbench_version": "0.1.0",
        "created_utc": "2026-01-01T00:00:00Z",
        "input_hash": "sha256:abc",
        "groups": [
            {
                "family": "nvidia-ada",
                "engine": "llama.cpp",
                "backend": "CUDA",
                "phase": "decode",
                "params": {"bw_eff": 0.8, "t_layer_s": 1e-5, "t_fixed_s": 1e-4},
                "stderr": {"bw_eff": 0.02},
                "n_points": 40,
                "devices": ["rtx-4090"],
                "models": ["m"],
                "cv": {
                    "lomo_median_ape": 0.05,
                    "lomo_p90_ape": 0.1,
                    "lodo_median_ape": 0.04,
                    "lodo_p90_ape": 0.09,
                },
                "interval": {"log_lo": -0.1, "log_hi": 0.08, "coverage": 0.9},
            },
        ],
        "pooled": [
            {
                "scope": {"vendor": "NVIDIA", "kind": "gpu"},
                "engine": "llama.cpp",
                "phase": "decode",
                "params": {"bw_eff": 0.7, "t_layer_s": 2e-5, "t_fixed_s": 2e-4},
                "n_points": 100,
                "families": ["nvidia-ada"],
                "interval": {"log_lo": -0.2, "log_hi": 0.1},
            },
        ],
        "memory": {"llama.cpp": {"compute_base_bytes": 123}},
    }


def _write(tmp_path, doc) -> str:
    p = tmp_path / "coefficients.json"
    p.write_text(json.dumps(doc))
    return str(p)


def test_prior_is_valid_and_labelled_as_prior():
    prior = load_prior()
    assert prior["groups"] == []
    assert "prior" in prior["note"].lower()
    for e in prior["pooled"]:
        assert e["n_points"] == 0 and e["note"]
        # wide: at least a factor 1.4 either way
        assert e["interval"]["log_lo"] <= -0.6 and e["interval"]["log_hi"] >= 0.35


def test_prior_only_lookup_is_uncalibrated_with_label():
    t = prior_table()
    for kind in ("gpu", "unified", "cpu", "npu", "weird"):
        for phase in ("decode", "prefill"):
            s = t.lookup(_hw(kind=kind), "llama.cpp", phase)
            assert not s.calibrated
            assert s.label == "pooled prior (uncalibrated)"
            assert s.source == "prior"


def test_prior_cpu_prefill_has_absolute_flops():
    s = prior_table().lookup(
        _hw(family="cpu-x86-avx2", vendor="Intel", kind="cpu", bf16=None), "llama.cpp", "prefill"
    )
    assert s.params["flops_abs_tflops"] > 0


def test_exact_then_pooled_then_prior(tmp_path):
    t = load_coefficients(_write(tmp_path, _doc()))
    exact = t.lookup(_hw(), "llama.cpp", "decode")
    assert exact.calibrated and exact.params["bw_eff"] == 0.8
    assert exact.label.startswith("calibrated: nvidia-ada/llama.cpp (40 runs")
    assert "4%" in exact.label

    pooled = t.lookup(_hw(family="nvidia-hopper"), "llama.cpp", "decode")
    assert not pooled.calibrated and pooled.source == "pooled"
    assert "uncalibrated for nvidia-hopper" in pooled.label
    assert pooled.log_lo == pytest.approx(-0.2 * POOLED_WIDEN)
    assert pooled.log_hi == pytest.approx(0.1 * POOLED_WIDEN)

    amd = t.lookup(_hw(family="amd-cdna3", vendor="AMD"), "llama.cpp", "decode")
    assert amd.source == "prior" and amd.label == "pooled prior (uncalibrated)"
    # no prefill group at all -> prior
    assert t.lookup(_hw(), "llama.cpp", "prefill").source == "prior"
    # another engine -> no exact group
    assert t.lookup(_hw(), "vllm", "decode").source != "calibrated"


def test_calibrated_set_gets_missing_optional_params_from_prior(tmp_path):
    doc = _doc()
    doc["groups"].append(
        {
            "family": "nvidia-ada",
            "engine": "llama.cpp",
            "backend": "CUDA",
            "phase": "prefill",
            "params": {"flops_eff": 0.6, "attn_eff": 0.4, "t_layer_s": 1e-4},
            "n_points": 10,
        }
    )
    s = load_coefficients(_write(tmp_path, doc)).lookup(_hw(), "llama.cpp", "prefill")
    assert s.calibrated and s.params["flops_eff"] == 0.6
    prior = prior_table().lookup(_hw(), "llama.cpp", "prefill")
    assert s.params["flops_abs_tflops"] == prior.params["flops_abs_tflops"]
    # no default interval in the group: the default wide one applies
    assert s.log_lo < 0 < s.log_hi


def test_each_fallback_is_wider(tmp_path):
    t = load_coefficients(_write(tmp_path, _doc()))
    exact = t.lookup(_hw(), "llama.cpp", "decode")
    pooled = t.lookup(_hw(family="nvidia-hopper"), "llama.cpp", "decode")
    prior = t.lookup(_hw(family="amd-cdna3", vendor="AMD"), "llama.cpp", "decode")

    def width(s):
        return s.log_hi - s.log_lo

    assert width(exact) < width(pooled) < width(prior)


def test_biased_file_interval_is_widened_to_contain_point(tmp_path):
    doc = _doc()
    doc["groups"][0]["interval"] = {"log_lo": 0.05, "log_hi": 0.2}
    s = load_coefficients(_write(tmp_path, doc)).lookup(_hw(), "llama.cpp", "decode")
    lo, hi = s.interval(10.0)
    assert lo == pytest.approx(10.0) and hi == pytest.approx(10.0 * math.exp(0.2))


def test_interval_contains_point():
    s = prior_table().lookup(_hw(), "llama.cpp", "decode")
    lo, hi = s.interval(50.0)
    assert lo < 50.0 < hi
    assert lo == pytest.approx(50.0 * math.exp(s.log_lo))


def test_backend_preference(tmp_path):
    doc = _doc()
    g = copy.deepcopy(doc["groups"][0])
    g.update(backend="Vulkan", n_points=5)
    g["params"] = dict(g["params"], bw_eff=0.5)
    doc["groups"].append(g)
    t = load_coefficients(_write(tmp_path, doc))
    assert t.lookup(_hw(), "llama.cpp", "decode").params["bw_eff"] == 0.8  # most points by default
    assert t.lookup(_hw(), "llama.cpp", "decode", backend="Vulkan").params["bw_eff"] == 0.5


def test_memory_passthrough(tmp_path):
    t = load_coefficients(_write(tmp_path, _doc()))
    assert t.memory_for("llama.cpp") == {"compute_base_bytes": 123}
    assert t.memory_for("vllm") == {}


def test_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, _write(tmp_path, _doc()))
    t = load_coefficients()
    assert t.calibrated and t.input_hash == "sha256:abc"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("schema_version"), "schema_version"),
        (lambda d: d.update(schema_version=99), "unsupported schema_version 99"),
        (lambda d: d.pop("groups"), "'groups'"),
        (lambda d: d["groups"][0].pop("family"), "missing key 'family'"),
        (lambda d: d["groups"][0]["params"].pop("bw_eff"), "missing 'bw_eff'"),
        (lambda d: d["groups"][0]["params"].update(bw_eff=1.5), "outside (0, 1]"),
        (lambda d: d["groups"][0]["params"].update(t_fixed_s=-1), "must be >= 0"),
        (lambda d: d["groups"][0]["params"].update(bogus=1), "unknown decode param 'bogus'"),
        (lambda d: d["groups"][0].update(phase="train"), "unknown phase"),
        (lambda d: d["groups"][0]["interval"].update(log_lo=0.3), "log_lo <= log_hi"),
        (lambda d: d["pooled"][0].pop("engine"), "missing key 'engine'"),
    ],
)
def test_validation_errors(tmp_path, mutate, message):
    doc = _doc()
    mutate(doc)
    with pytest.raises(CoefficientsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_coefficients(_write(tmp_path, doc))


def test_bad_json_and_missing_file(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{not json")
    with pytest.raises(CoefficientsError, match="not valid JSON"):
        load_coefficients(p)
    with pytest.raises(CoefficientsError, match="cannot read"):
        load_coefficients(tmp_path / "absent.json")
    with pytest.raises(CoefficientsError, match="top level"):
        parse_coefficients([1, 2])
