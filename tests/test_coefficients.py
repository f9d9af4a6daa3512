"""Coefficients file: validation, fallback order, honest labels, widened intervals, env override."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace

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


# ------------------------------------------------------------------------------------------- schema 2
def _model_doc() -> dict:
    """A schema-2 document: bw_eff regressed on the memory technology, one family and one device effect."""
    return {
        "schema_version": 2,
        "input_hash": "sha256:abc",
        "model": {
            "params": [
                {"key": "decode.bw_eff", "beta": {"1": 0.5, "mem=hbm": -0.4}, "family": {"nvidia-ada": 0.2},
                 "device": {"test-dev": 0.3}, "tau": {"family": 0.2, "device": 0.1}},
                {"key": "decode.t_fixed_s", "beta": {"1": 0.0}},
                {"key": "prefill.flops_eff", "beta": {"1": 0.0}},
            ],
            "families": {"nvidia-ada": {"decode": 40, "prefill": 0}},
            "devices": {"test-dev": {"family": "nvidia-ada", "decode": 12, "prefill": 0}},
            "intervals": {
                "decode": {
                    "device": {"log_lo": -0.1, "log_hi": 0.1, "n_residuals": 50, "scheme": "lomo",
                               "coverage": {"lomo": {"groups": 0.9}}},
                    "family": {"log_lo": -0.2, "log_hi": 0.2, "n_residuals": 50, "scheme": "lodo"},
                    "pooled": {"log_lo": -0.5, "log_hi": 0.4, "n_residuals": 50, "scheme": "lofo"},
                },
            },
        },
        "memory": {},
    }  # fmt: skip


def _eta_value(p, eta: float) -> float:
    from estimator.physics.coefficients import from_eta

    return from_eta(p, eta)


def test_schema2_lookup_adds_covariates_and_effects_and_names_the_basis(tmp_path):
    from estimator.physics.coefficients import param, prior_eta

    path = tmp_path / "c.json"
    path.write_text(json.dumps(_model_doc()))
    table = load_coefficients(path)
    bw = param("decode", "bw_eff")
    base = prior_eta(bw, "gpu") + 0.5
    measured = table.lookup(_hw(memory_type="GDDR6X"), "llama.cpp", "decode")
    assert measured.basis == "device" and measured.calibrated and measured.n_points == 12
    assert measured.params["bw_eff"] == pytest.approx(_eta_value(bw, base + 0.2 + 0.3))
    assert (measured.log_lo, measured.log_hi) == (-0.1, 0.1) and measured.coverage == 0.9
    assert measured.interval_note.startswith("device (device measured)")
    assert "leave-one-model-out" in measured.interval_note
    sibling = table.lookup(_hw(id="other", memory_type="GDDR6X"), "llama.cpp", "decode")
    assert sibling.basis == "family" and sibling.params["bw_eff"] == pytest.approx(_eta_value(bw, base + 0.2))
    hbm = table.lookup(_hw(id="x", family="nvidia-hopper", memory_type="HBM3"), "llama.cpp", "decode")
    assert hbm.basis == "pooled" and not hbm.calibrated and hbm.source == "pooled"
    assert hbm.params["bw_eff"] == pytest.approx(_eta_value(bw, base - 0.4))  # inherits the HBM covariate
    assert (hbm.log_lo, hbm.log_hi) == (-0.5, 0.4)
    # parameters the model does not carry come from the prior; a phase without intervals gets the default
    pre = table.lookup(_hw(), "llama.cpp", "prefill")
    assert pre.basis == "pooled" and "attn_eff" in pre.params and (pre.log_lo, pre.log_hi) == (-0.7, 0.5)


def test_a_detected_host_answers_with_its_own_calibrated_runs(tmp_path):
    """A host outside the catalog whose own runs are in the fit (family "<isa family> (detected host
    <device>)", device "<host>:<cpu> [<isa family>]") is predicted from that device's effects when the
    detected spec names it (``measured_as``); another host of the same ISA family keeps the catalog family's
    level."""
    from estimator.physics.coefficients import detected_family, param, prior_eta

    doc = _model_doc()
    own = "vm:AMD EPYC [cpu-x86-avx512]"
    vm_family = detected_family("cpu-x86-avx512", own)
    assert vm_family == "cpu-x86-avx512 (detected host vm:AMD EPYC [cpu-x86-avx512])"
    doc["model"]["params"][0]["family"].update({"cpu-x86-avx512": -0.6, vm_family: 0.4})
    doc["model"]["params"][0]["device"][own] = 0.1
    doc["model"]["families"].update(
        {"cpu-x86-avx512": {"decode": 30, "prefill": 0}, vm_family: {"decode": 7}}
    )
    doc["model"]["devices"][own] = {"family": vm_family, "decode": 7, "prefill": 0}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    table = load_coefficients(path)
    bw = param("decode", "bw_eff")
    base = prior_eta(bw, "cpu") + 0.5
    cpu = dict(family="cpu-x86-avx512", vendor="AMD", kind="cpu", id="detected-cpu", bf16=None)
    host = table.lookup(_hw(measured_as=own, **cpu), "llama.cpp", "decode")
    assert host.basis == "device" and host.n_points == 7
    assert host.params["bw_eff"] == pytest.approx(_eta_value(bw, base + 0.4 + 0.1))
    assert "vm:AMD EPYC [cpu-x86-avx512] measured (this host's own runs)" in host.label
    other = table.lookup(_hw(measured_as="other:AMD EPYC", **cpu), "llama.cpp", "decode")
    assert other.basis == "family" and other.params["bw_eff"] == pytest.approx(_eta_value(bw, base - 0.6))


def _with_and_without(tmp_path, doc: dict, device: str, field: str):
    """(path, old_path): ``doc`` written as it is, and as a file written before ``device`` kept ``field``."""
    path, old_path = tmp_path / "c.json", tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    old = copy.deepcopy(doc)
    del old["model"]["devices"][device][field]
    old_path.write_text(json.dumps(old))
    return path, old_path


def test_a_detected_host_is_held_to_the_probe_its_calibrated_runs_carried(tmp_path):
    """A detected host's effects are relative to the bandwidth its own records carried (the model's
    ``devices[...]["bandwidth_gbs"]``): a fresh probe of another figure (a multi-threaded probe, a busy
    moment) evaluates the covariates at that basis and scales bw_eff by basis / probe, so bandwidth x bw_eff
    is the calibrated rate.  A file without the basis (written before it) and another host are not
    rescaled."""
    from estimator.physics.coefficients import detected_family, param, prior_eta

    own = "vm:AMD EPYC"
    vm_family = detected_family("cpu-x86-avx512", own)
    doc = _model_doc()
    doc["model"]["params"][0]["beta"]["ln_bw"] = -0.2
    doc["model"]["params"][0]["family"][vm_family] = 0.4
    doc["model"]["params"][0]["device"][own] = 0.1
    doc["model"]["families"][vm_family] = {"decode": 7}
    doc["model"]["devices"][own] = {"family": vm_family, "decode": 7, "prefill": 0, "bandwidth_gbs": 25.0}
    path, old_path = _with_and_without(tmp_path, doc, own, "bandwidth_gbs")
    bw = param("decode", "bw_eff")
    base = prior_eta(bw, "cpu") + 0.5 + 0.4 + 0.1
    cpu = dict(family="cpu-x86-avx512", vendor="AMD", kind="cpu", id="detected-cpu", bf16=None)
    probe = _hw(measured_as=own, bandwidth_gbs=50.0, bandwidth_measured_gbs=50.0, **cpu)
    at_basis = _eta_value(bw, base - 0.2 * math.log(25.0 / 500.0))
    got = load_coefficients(path).lookup(probe, "llama.cpp", "decode").params["bw_eff"]
    assert got == pytest.approx(at_basis * 25.0 / 50.0)
    assert got * 50.0 == pytest.approx(at_basis * 25.0)  # the calibrated streaming rate
    label = load_coefficients(path).lookup(probe, "llama.cpp", "decode").label
    assert "(this host's own runs, at the 25.0 GB/s probe they carried)" in label
    same = _hw(measured_as=own, bandwidth_gbs=25.0, bandwidth_measured_gbs=25.0, **cpu)
    got_same = load_coefficients(path).lookup(same, "llama.cpp", "decode").params["bw_eff"]
    assert got_same == pytest.approx(at_basis)
    unscaled = _eta_value(bw, base - 0.2 * math.log(50.0 / 500.0))
    got_old = load_coefficients(old_path).lookup(probe, "llama.cpp", "decode").params["bw_eff"]
    assert got_old == pytest.approx(unscaled)
    other = _hw(measured_as="other:AMD EPYC", bandwidth_gbs=50.0, bandwidth_measured_gbs=50.0, **cpu)
    got_other = load_coefficients(path).lookup(other, "llama.cpp", "decode").params["bw_eff"]
    assert got_other == pytest.approx(_eta_value(bw, prior_eta(bw, "cpu") + 0.5 - 0.2 * math.log(0.1)))


def test_a_detected_host_is_held_to_the_clock_its_calibrated_runs_were_fitted_at(tmp_path):
    """A detected CPU host's effects absorbed the clock its records stated (none: the covariate took 3 GHz):
    a clock found another way today (the VM's measured 3.66 GHz) evaluates ``cpu_size`` at the calibrated
    clock, so the host's prefill rate is the calibrated one; a host without the basis in the file, or another
    host, takes its own clock."""
    from estimator.physics.coefficients import detected_family, param, prior_eta

    own = "vm:AMD EPYC"
    vm_family = detected_family("cpu-x86-avx512", own)
    doc = _model_doc()
    doc["model"]["params"].append({"key": "prefill.flops_abs_tflops", "beta": {"1": 0.1, "ln_cpu_size": 0.9},
                                   "family": {}, "device": {own: 0.3}})  # fmt: skip
    doc["model"]["families"][vm_family] = {"decode": 7, "prefill": 7}
    doc["model"]["devices"][own] = {"family": vm_family, "decode": 7, "prefill": 7, "cpu_clock_ghz": 3.0}
    path, old_path = _with_and_without(tmp_path, doc, own, "cpu_clock_ghz")
    flops = param("prefill", "flops_abs_tflops")
    cpu = dict(family="cpu-x86-avx512", vendor="AMD", kind="cpu", id="detected-cpu", bf16=None, cpu_cores=2)
    vm = _hw(measured_as=own, cpu_clock_ghz=3.66, **cpu)

    def rate(table_path, hw):
        return load_coefficients(table_path).lookup(hw, "llama.cpp", "prefill").params["flops_abs_tflops"]

    def expected(clock, device=0.3):
        return _eta_value(flops, prior_eta(flops, "cpu") + 0.1 + 0.9 * math.log(2 * clock / 24) + device)

    assert rate(path, vm) == pytest.approx(expected(3.0))
    assert "(this host's own runs, at the 3.00 GHz clock they carried)" in (
        load_coefficients(path).lookup(vm, "llama.cpp", "prefill").label
    )
    assert rate(path, replace(vm, cpu_clock_ghz=None)) == pytest.approx(expected(3.0))
    assert rate(old_path, vm) == pytest.approx(expected(3.66))
    other = replace(vm, measured_as="other:AMD EPYC")
    assert rate(path, other) == pytest.approx(expected(3.66, device=0.0))


def test_schema2_speed_report_says_the_interval_basis(tmp_path):
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.quant import get_quant
    from estimator.physics.speed import estimate_speed
    from estimator.specs import Workload

    path = tmp_path / "c.json"
    path.write_text(json.dumps(_model_doc()))
    s = estimate_speed(resolve_model("llama-3.1-8b"), get_quant("Q4_K_M"), _hw(), Workload(),
                       load_coefficients(path))  # fmt: skip
    assert s.decode.basis == "device" and "basis device" in s.decode.coefficients
    head = "decode interval basis: device (device measured); 90 % interval"
    assert any(n.startswith(head) for n in s.notes)
    assert any(n.startswith("prefill interval basis") for n in s.notes)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("model"), "missing key 'model'"),
        (lambda d: d["model"]["params"][0].update(key="decode.bogus"), "unknown parameter"),
        (lambda d: d["model"]["params"][0]["beta"].update(x=float("nan")), "finite number"),
        (lambda d: d["model"]["intervals"]["decode"]["device"].update(log_lo=0.5), "log_lo <= log_hi"),
        (lambda d: d.update(schema_version=3), "reads 1, 2"),
    ],
)
def test_schema2_validation_errors(tmp_path, mutate, message):
    doc = _model_doc()
    mutate(doc)
    with pytest.raises(CoefficientsError, match=message):
        parse_coefficients(doc, "c.json")
