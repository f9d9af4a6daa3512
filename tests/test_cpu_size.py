"""A CPU's GEMM rate scales with its cores x clock (covariate ``cpu_size``): catalog facts with sources,
detection, the covariate, and what a report says of CPUs of one family."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from estimator.catalog import detect
from estimator.catalog.data import all_hardware, get_hardware
from estimator.physics import covariates as cov

ROOT = Path(__file__).resolve().parents[1]


def test_cpu_facts_have_sources_and_name_catalog_cpus():
    rows = list(csv.DictReader(open(ROOT / "tools" / "catalog" / "hardware_covariates.csv", newline="")))
    rows = [r for r in rows if r["cpu_cores"]]
    assert len(rows) >= 20
    for r in rows:
        hw = get_hardware(r["hardware_id"])
        assert hw.kind == "cpu" and r["source"].strip()
        assert hw.cpu_cores == int(r["cpu_cores"])
        assert hw.cpu_clock_ghz == pytest.approx(float(r["cpu_clock_ghz"]))
    # the core counts the reference's own names state
    assert get_hardware("threadripper-3970x").cpu_cores == 32  # "32C/64T"
    assert get_hardware("core-i5-4278u").cpu_cores == 2  # "2C/4T"
    assert get_hardware("raspberry-pi-5").cpu_clock_ghz == 2.4  # "4x Cortex-A76 2.4 GHz"


def test_only_cpus_carry_cores():
    assert all(h.cpu_cores is None for h in all_hardware() if h.kind != "cpu")


def test_cpu_size_covariate():
    tr = get_hardware("threadripper-3970x")
    x = cov.covariates(tr, "llama.cpp", "CPU", ("cpu_size",))
    assert x["ln_cpu_size"] == pytest.approx(math.log(32 * 4.5 / cov.CPU_SIZE_SCALE))
    # unknown clock: the default; unknown cores or another kind: no covariate (the pooled level)
    assert cov.cpu_core_ghz(replace(tr, cpu_clock_ghz=None)) == 32 * cov.CPU_DEFAULT_CLOCK_GHZ
    assert cov.covariates(replace(tr, cpu_cores=None), "llama.cpp", "CPU", ("cpu_size",)) == {}
    assert cov.covariates(get_hardware("rtx-4090"), "llama.cpp", "CUDA", ("cpu_size",)) == {}


def test_vllm_bf16_gemm_fallback_on_an_avx2_cpu():
    """vLLM's BF16 GEMMs have no BF16 instructions on an AVX2-only x86 CPU (its profile's
    ``cpu_gemm_fallback``): the prompt rate's covariate ``cpu_gemm_fallback`` there only, never for llama.cpp,
    an AVX-512 CPU or a GPU."""
    from estimator.engines import get_engine
    from estimator.physics.coefficients import param

    avx2 = get_hardware("threadripper-3970x")
    assert avx2.family == "cpu-x86-avx2" and get_engine("vllm").cpu_gemm_fallback_reason(avx2.family)
    groups = ("cpu_fallback",)
    assert cov.covariates(avx2, "vllm", None, groups) == {"cpu_gemm_fallback": 1.0}
    assert cov.covariates(avx2, "llama.cpp", "CPU", groups) == {}
    assert cov.covariates(replace(avx2, family="cpu-x86-avx512"), "vllm", None, groups) == {}
    assert cov.covariates(get_hardware("rtx-4090"), "vllm", None, groups) == {}
    assert "cpu_fallback" in param("prefill", "flops_abs_tflops").covariates


def test_vllm_and_llama_cpp_gemms_on_amx():
    """vLLM's oneDNN BF16 GEMMs and llama.cpp's AMX weight buffer run on AMX tiles where the CPU has them (the
    profiles' ``cpu_matrix_gemm``): the prompt rate's covariate ``cpu_matrix_gemm`` on a CPU whose ISA
    (catalogued or detected) has AMX, never on a Zen 4 without AMX or a GPU."""
    from estimator.engines import get_engine
    from estimator.physics.coefficients import param

    spr, genoa = get_hardware("xeon-platinum-8480-plus"), get_hardware("epyc-9654")
    assert "amx" in spr.cpu_isa and "avx512_bf16" in genoa.cpu_isa and "amx" not in genoa.cpu_isa
    assert get_engine("vllm").cpu_matrix_gemm_reason(spr.cpu_isa)
    groups = ("cpu_matrix",)
    assert cov.covariates(spr, "vllm", None, groups) == {"cpu_matrix_gemm": 1.0}
    assert get_engine("llama.cpp").cpu_matrix_gemm_reason(spr.cpu_isa)
    assert cov.covariates(spr, "llama.cpp", "CPU", groups) == {"cpu_matrix_gemm": 1.0}
    assert cov.covariates(genoa, "vllm", None, groups) == {}
    assert cov.covariates(genoa, "llama.cpp", "CPU", groups) == {}
    assert cov.covariates(replace(spr, cpu_isa=()), "vllm", None, groups) == {}  # ISA not known: no term
    assert cov.covariates(get_hardware("h100-80gb-sxm"), "vllm", None, groups) == {}
    assert "cpu_matrix" in param("prefill", "flops_abs_tflops").covariates
    assert all(h.cpu_isa == () for h in all_hardware() if h.kind != "cpu")
    # a detected host: its ISA from /proc/cpuinfo flags
    cpu = detect.CpuInfo("Intel(R) Xeon(R) Processor", "x86_64", 2, 2, 2**34,
                         detect.isa_features({"avx512f", "amx_tile", "amx_bf16", "avx512_bf16"}, "x86_64"),
                         "cpu-x86-avx512", 4.06)  # fmt: skip
    spec = detect.detected_cpu_spec(cpu, 27.0, cpu.family)
    assert "amx" in spec.cpu_isa and cov.covariates(spec, "vllm", None, groups) == {"cpu_matrix_gemm": 1.0}


def test_detected_clock_from_psutil(monkeypatch):
    import psutil

    # the order of the sources (cpufreq, the probe, the reported clock): tests/test_clockprobe.py
    monkeypatch.setattr(psutil, "cpu_freq", lambda: SimpleNamespace(current=2596.1, min=0.0, max=0.0))
    assert detect.cpu_clock(lambda: None) == (2.596, detect.CLOCK_NOMINAL)  # a VM without the probe
    monkeypatch.setattr(psutil, "cpu_freq", lambda: SimpleNamespace(current=1200.0, min=800.0, max=5100.0))
    assert detect.cpu_clock(lambda: None)[0] == pytest.approx(5.1)
    monkeypatch.setattr(psutil, "cpu_freq", lambda: None)
    assert detect.cpu_clock(lambda: None) == (None, "")
    assert detect.cpu_clock(lambda: 3.66)[0] == 3.66  # psutil knows nothing: the probe still answers


def test_detected_cpu_spec_and_record_carry_cores():
    from calibration.features import hardware_from_detected

    info = detect.CpuInfo("AMD EPYC", "x86_64", 2, 2, 2**34, ("avx2", "avx512"), "cpu-x86-avx512", 2.6)
    spec = detect.detected_cpu_spec(info, 27.8, "cpu-x86-avx512")
    assert (spec.cpu_cores, spec.cpu_clock_ghz) == (2, 2.6)
    rec = SimpleNamespace(
        extra={"detected": {"cpu_model": "AMD EPYC", "physical_cores": 2, "host_bandwidth_probe_gbs": 27.8}},
        device_name="AMD EPYC", hardware_family="cpu-x86-avx512", host="vm",
    )
    hw = hardware_from_detected(rec)
    assert hw.cpu_cores == 2 and hw.cpu_clock_ghz is None  # records before the clock was recorded


def test_every_record_of_a_host_is_fitted_at_its_median_probe_and_clock():
    """Two sweeps of one VM read its probe and clock at different moments (27.0 GB/s at 4.06 GHz, 23.9 at
    3.53): calibration.features.detected_host_basis gives every record of the host the medians, so the fit
    sees one device, not two specs; a catalogued device and another host keep their own."""
    from calibration.features import detected_host_basis, hardware_from_detected

    def rec(bw, ghz, name="Intel(R) Xeon(R) Processor", hardware_id=""):
        det = {"cpu_model": name, "physical_cores": 2, "host_bandwidth_probe_gbs": bw, "cpu_clock_ghz": ghz}
        return SimpleNamespace(
            extra={"detected": det}, device_name=name, hardware_family="cpu-x86-avx512", host="vm",
            hardware_id=hardware_id, origin="measured", n_devices=1, decode_tok_s=10.0, prefill_tok_s=None,
        )  # fmt: skip

    memory_only = rec(13.9, 2.596, "AMD EPYC")  # no speed: an older memory point at the nominal clock
    memory_only.decode_tok_s = None
    recs = [rec(27.0, 4.06), rec(23.9, 3.53), rec(26.0, 4.0), rec(28.6, 3.66, "AMD EPYC"), memory_only]
    recs.append(rec(999.0, 9.0, hardware_id="epyc-9654"))
    basis = detected_host_basis(recs)
    assert sorted(basis) == ["vm:AMD EPYC [cpu-x86-avx512]", "vm:Intel(R) Xeon(R) Processor [cpu-x86-avx512]"]
    assert basis["vm:Intel(R) Xeon(R) Processor [cpu-x86-avx512]"] == (26.0, 4.0)
    assert basis["vm:AMD EPYC [cpu-x86-avx512]"] == (28.6, 3.66)
    hw = hardware_from_detected(recs[1], basis["vm:Intel(R) Xeon(R) Processor [cpu-x86-avx512]"])
    assert (hw.bandwidth_gbs, hw.cpu_clock_ghz) == (26.0, 4.0)
    own = hardware_from_detected(recs[1])
    assert (own.bandwidth_gbs, own.cpu_clock_ghz) == (23.9, 3.53)


def test_the_report_notes_a_known_crash_and_what_its_workaround_costs():
    """llama.cpp on a CPU with AMX: the estimate is of the default run, and the note names the crash, the flag
    that avoids it and the decode cost calibration fitted for that setting (``setting=no_repack`` on
    ``decode.build_scale``), when the coefficients carry it; no note for vLLM or a CPU without AMX."""
    import math

    from estimator.physics.coefficients import CoefficientTable, record_covariate_factor
    from estimator.physics.speed import cpu_crash_note

    spr, genoa = get_hardware("xeon-platinum-8480-plus"), get_hardware("epyc-9654")
    beta = {"1": 0.0, "setting=no_repack": math.log(1.5)}
    model = {"params": [{"key": "decode.build_scale", "beta": beta}]}
    table = CoefficientTable((), (), (), {}, model=model)
    note = cpu_crash_note(spr, "llama.cpp", table)
    assert "ggml-org/llama.cpp#20824" in note and "--no-repack" in note and "x1.50" in note
    assert "weights read" not in note  # no class term in this model
    classes = {**model, "params": [*model["params"], {"key": "decode.bw_rel_q4_0", "beta": {
        "setting=no_repack": math.log(1 / 1.25)}}]}  # fmt: skip
    assert "Q4_0 weights read x1.25 slower on top" in cpu_crash_note(spr, "llama.cpp", CoefficientTable(
        (), (), (), {}, model=classes))  # fmt: skip
    assert "x1.50" not in cpu_crash_note(spr, "llama.cpp", CoefficientTable((), (), (), {}))
    assert "--no-repack" in cpu_crash_note(spr, "llama.cpp")
    assert cpu_crash_note(spr, "vllm", table) == cpu_crash_note(genoa, "llama.cpp", table) == ""
    assert record_covariate_factor(model, "decode.build_scale", "build=2024") is None
    assert record_covariate_factor(None, "decode.build_scale", "setting=no_repack") is None


def test_a_cpu_without_a_tflops_figure_says_its_rate_follows_its_cores_and_clock():
    """A catalogued CPU has no datasheet TFLOPS: the warning says the prompt rate is fitted on measured CPUs
    and scaled to its cores x clock (the cpu_size covariate), not a set's typical figure, and the full report
    carries the crash note of llama.cpp on AMX."""
    from estimator.report.document import report_to_dict
    from estimator.report.request import ReportRequest, make_report

    d = report_to_dict(make_report(ReportRequest(model="llama-3.1-8b", hardware="xeon-platinum-8480-plus",
                                                 quant="Q4_K_M")))  # fmt: skip
    warning = next(w for w in d["warnings"] if "no TFLOPS figure" in w)
    assert "56 cores x 3.8 GHz" in warning and "estimated" in warning and "typical" not in warning
    assert any("--no-repack" in n for n in d["speed"]["notes"])


def test_the_report_notes_a_cpu_gemm_path():
    """An estimate whose CPU GEMMs take another path says so (speed.cpu_gemm_note): vLLM and llama.cpp on an
    AMX Xeon, vLLM on an AVX2 Threadripper, not llama.cpp there, not a Zen 4."""
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.coefficients import load_coefficients
    from estimator.physics.quant import get_quant
    from estimator.physics.speed import cpu_gemm_note, estimate_speed
    from estimator.specs import Workload

    spr, tr, genoa = (get_hardware(h) for h in ("xeon-platinum-8480-plus", "threadripper-3970x", "epyc-9654"))
    assert "cpu_matrix_gemm" in cpu_gemm_note(spr, "vllm") and "AMX" in cpu_gemm_note(spr, "vllm")
    assert "cpu_gemm_fallback" in cpu_gemm_note(tr, "vllm")
    llama_amx = cpu_gemm_note(spr, "llama.cpp")
    assert "cpu_matrix_gemm" in llama_amx and "AMX-INT8" in llama_amx
    assert cpu_gemm_note(tr, "llama.cpp") == cpu_gemm_note(genoa, "vllm") == ""
    assert cpu_gemm_note(genoa, "llama.cpp") == ""
    assert cpu_gemm_note(get_hardware("h100-80gb-sxm"), "vllm") == ""
    table = load_coefficients(ROOT / "results" / "coefficients.json")
    m, q = resolve_model("qwen3-0.6b"), get_quant("BF16")
    est = estimate_speed(m, q, spr, Workload(engine="vllm"), table)
    assert any("cpu_matrix_gemm" in n for n in est.notes)


def test_prefill_scales_with_cores_within_a_family():
    """Shipped coefficients: the 16-core Ryzen 9 7950X prefills faster than the 4-core i7-1165G7 of its
    family (published llama-bench: the 8-core Ryzen 7 8840U 49.8 tok/s, the i7-1165G7 10.5 tok/s)."""
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.coefficients import load_coefficients
    from estimator.physics.quant import get_quant
    from estimator.physics.speed import estimate_speed
    from estimator.specs import Workload

    table = load_coefficients(ROOT / "results" / "coefficients.json")
    m, q = resolve_model("llama-3.1-8b"), get_quant("Q4_0")
    pp = {
        h: estimate_speed(m, q, get_hardware(h), Workload(), table).prefill.tok_s
        for h in ("ryzen-9-7950x", "core-i7-1165g7-cpu")
    }
    assert pp["ryzen-9-7950x"] > 2 * pp["core-i7-1165g7-cpu"]


def test_measure_announcement_passes_detected_cores():
    """`make measure` prints the estimate of each point; a host outside the catalog is a custom CPU row that
    carries the detected cores and clock, as calibration's spec of the same record does."""
    from estimator.app.predict import custom_hardware
    from harness.estimate import hardware_columns

    det = {"cpu_model": "AMD EPYC", "physical_cores": 2, "cpu_clock_ghz": 2.596, "ram_bytes": 2**34,
           "host_bandwidth_probe_gbs": 27.8, "cpu_family": "cpu-x86-avx512"}
    rec = SimpleNamespace(
        hardware_id="", extra={"detected": det}, hardware_family="", device_name="AMD EPYC", host="vm"
    )
    hw = custom_hardware(hardware_columns(rec))
    assert (hw.kind, hw.cpu_cores, hw.cpu_clock_ghz, hw.measured_as) == ("cpu", 2, 2.596, "vm:AMD EPYC")
    assert cov.cpu_core_ghz(hw) == pytest.approx(5.192) and hw.cpu_isa == ()
    amx = dict(det, isa=["amx", "avx512", "avx512_bf16"])  # the ISA the host detected: vLLM's AMX term
    hw = custom_hardware(hardware_columns(SimpleNamespace(**{**vars(rec), "extra": {"detected": amx}})))
    assert hw.cpu_isa == ("amx", "avx512", "avx512_bf16")
    assert cov.covariates(hw, "vllm", None, ("cpu_matrix",)) == {"cpu_matrix_gemm": 1.0}
    older = dict(det, cpu_clock_ghz=None)  # records before the clock was recorded: the default clock
    hw = custom_hardware(hardware_columns(SimpleNamespace(**{**vars(rec), "extra": {"detected": older}})))
    assert hw.cpu_cores == 2 and hw.cpu_clock_ghz is None
