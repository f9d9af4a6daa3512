"""Hardware figures the user gives override the catalog and say so; Apple's GPU working set bounds usable
memory; a device without TFLOPS warns before its prefill figure; an unknown family is an error (issue 13:
2)."""

from __future__ import annotations

import json

import pytest

from estimator.catalog.data import apple_working_set_bytes, get_hardware
from estimator.catalog.resolve import resolve_hardware
from estimator.report.document import report_to_dict
from estimator.report.request import ReportRequest, make_report
from estimator.specs import GIB, SpecError
from tests.estimator_cli import cli, cli_json, run


def report(**kw) -> dict:
    return report_to_dict(make_report(ReportRequest(**kw)))


def test_the_users_fit_answers_for_the_64_gb_machine():
    p = run("fit", "--hardware", "apple-m3-max", "--memory-gib", "64", "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    fitting = [r for r in rows if r["verdict"] == "fits"]
    # usable = the GPU working set of a 64 GiB Mac (3/4), not 3/4 of the catalog's 128 GiB
    assert fitting and all(
        r["total_gib"] + r["headroom_gib"] == pytest.approx(48.0, abs=0.02) for r in fitting
    )
    assert "64 GiB (--memory-gib) instead of the catalog's 128 GiB" in p.stderr
    text = run("fit", "--hardware", "apple-m3-max", "--memory-gib", "64").stdout
    assert "(64 GiB)" in text and "instead of the catalog's 128 GiB" in text


def test_memory_override_in_a_report():
    d = report(model="llama-3.1-70b", hardware="apple-m3-max", memory_gib=64)
    assert d["hardware"]["memory_bytes"] == 64 * GIB and d["hardware"]["status"] == "overridden"
    assert d["memory"]["usable_bytes"] == 48 * GIB
    assert any("--memory-gib" in n for n in d["notes"]) and "64 GiB" in d["hardware"]["name"]


def test_apple_working_set_follows_the_wired_limit():
    assert apple_working_set_bytes(128 * GIB) == 96 * GIB
    assert apple_working_set_bytes(36 * GIB) == 24 * GIB  # 2/3 on machines up to 36 GiB
    assert apple_working_set_bytes(128 * GIB, 120 * 1024) == 120 * GIB
    assert get_hardware("apple-m3-pro").gpu_working_set_bytes == 24 * GIB
    d = report(model="llama-3.1-70b", hardware="apple-m3-max", memory_gib=64, wired_limit_mb=56 * 1024)
    assert d["memory"]["usable_bytes"] == 56 * GIB
    assert any("iogpu.wired_limit_mb = 57344" in n for n in d["notes"])
    d = report(model="llama-3.1-8b", hardware="apple-m3-max", engine="vllm")  # a reserving engine too
    assert d["memory"]["usable_bytes"] == int(0.92 * 96 * GIB)


def test_wired_limit_is_for_apple_only():
    with pytest.raises(SpecError, match="Apple"):
        resolve_hardware("rtx-4090", wired_limit_mb=1024, forgiving=True)


def test_bandwidth_and_tflops_overrides_change_the_speeds():
    base = report(model="llama-3.1-8b", hardware="rtx-4090")
    slow = report(model="llama-3.1-8b", hardware="rtx-4090", bandwidth_gbs=504)
    assert slow["speed"]["decode"]["tok_s"] < 0.7 * base["speed"]["decode"]["tok_s"]
    assert slow["hardware"]["bandwidth_gbs"] == 504 and any("504 GB/s" in n for n in slow["notes"])
    weak = report(model="llama-3.1-8b", hardware="rtx-4090", tflops=20)
    assert weak["speed"]["prefill"]["tok_s"] < base["speed"]["prefill"]["tok_s"]
    assert weak["hardware"]["bf16_tflops"] == 20 and any("FP8 / INT8" in n for n in weak["notes"])


def test_custom_device_without_tflops_warns_about_prefill():
    d = report(model="qwen3-0.6b", hardware="custom", memory_gib=8, bandwidth_gbs=120)
    assert d["speed"]["prefill"]["tok_s"] > 0
    assert any("no TFLOPS figure" in w and "--tflops" in w for w in d["warnings"])
    with_tflops = report(model="qwen3-0.6b", hardware="custom", memory_gib=8, bandwidth_gbs=120, tflops=50)
    assert not any("no TFLOPS" in w for w in with_tflops["warnings"])


def test_unknown_family_is_an_error_naming_the_known_ones():
    custom = "report --model qwen3-0.6b --hardware custom --memory-gib 8 --bandwidth-gbs 100 --family"
    p = cli(custom, "nvidia-adda")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "unknown hardware family 'nvidia-adda'" in p.stderr and "nvidia-ada" in p.stderr
    assert cli_json(custom, "nvidia-ada", "--format", "json")["hardware"]["family"] == "nvidia-ada"


def test_a_custom_device_of_a_cpu_family_is_a_cpu():
    """`--hardware custom --family cpu-x86-avx512` describes a CPU: before, it was sized as a GPU (prefill
    from a GPU's typical TFLOPS: ~8,700 tok/s pp512 for Llama-3.2-1B on a 60 GB/s machine)."""
    from estimator.catalog.data import family_kind

    assert family_kind("cpu-x86-avx512") == "cpu" and family_kind("amd-zen4") == "cpu"
    assert family_kind("apple-m3") == "unified" and family_kind("nvidia-blackwell") == "gpu"
    assert family_kind("cpu-something-new") == "cpu" and family_kind("custom") is None
    fig = dict(model="llama-3.2-1b", quant="Q4_0", hardware="custom", memory_gib=32, bandwidth_gbs=60)
    cpu = report(family="cpu-x86-avx512", **fig)
    assert cpu["hardware"]["kind"] == "cpu"
    assert not any("no TFLOPS figure" in w for w in cpu["warnings"])  # a CPU's rate is the fitted one
    gpu = report(family="cpu-x86-avx512", kind="gpu", **fig)  # --kind overrides the family's kind
    assert gpu["hardware"]["kind"] == "gpu"
    assert cpu["speed"]["prefill"]["tok_s"] < 0.2 * gpu["speed"]["prefill"]["tok_s"]


def test_cpu_cores_and_clock_scale_a_cpus_prefill():
    fig = dict(model="llama-3.2-1b", quant="Q4_0", hardware="custom", memory_gib=32, bandwidth_gbs=60,
               family="cpu-x86-avx512")  # fmt: skip
    base = report(**fig)
    big = report(cpu_cores=16, cpu_clock_ghz=5.7, **fig)
    assert big["hardware"]["cpu_cores"] == 16 and big["hardware"]["cpu_clock_ghz"] == 5.7
    assert any("16 physical cores as given" in n for n in big["notes"])
    # 16 x 5.7 against the reference 8 x 3 core-GHz: the fitted exponent (~0.9) on a 3.8x larger product
    assert big["speed"]["prefill"]["tok_s"] > 2.5 * base["speed"]["prefill"]["tok_s"]
    assert big["speed"]["decode"]["tok_s"] == pytest.approx(base["speed"]["decode"]["tok_s"], rel=0.02)
    catalog = report(model="llama-3.2-1b", quant="Q4_0", hardware="ryzen-9-7950x", cpu_cores=8)
    assert catalog["hardware"]["cpu_cores"] == 8 and any("(the device's own figure: 16)" in n
                                                         for n in catalog["notes"])  # fmt: skip


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(hardware="rtx-4090", cpu_cores=8), "figures of a CPU, and rtx-4090 is a gpu"),
        (dict(hardware="custom", memory_gib=32, bandwidth_gbs=60, family="cpu-x86-avx2", cpu_clock_ghz=4.0),
         "--cpu-clock-ghz needs --cpu-cores"),
        (dict(hardware="rtx-4090", kind="cpu"), "--kind describes a custom device"),
    ],
)  # fmt: skip
def test_cpu_figures_refuse_what_they_cannot_describe(kw, message):
    with pytest.raises(SpecError, match=message):
        make_report(ReportRequest(model="llama-3.2-1b", **kw))


def test_the_cli_and_the_page_take_the_cpu_figures():
    d = cli_json(
        "report --model llama-3.2-1b --quant Q4_0 --hardware custom --memory-gib 32 --bandwidth-gbs 60",
        "--family", "cpu-x86-avx512", "--cpu-cores", "12", "--cpu-clock-ghz", "4.5", "--format", "json",
    )  # fmt: skip
    hw = d["hardware"]
    assert (hw["kind"], hw["cpu_cores"], hw["cpu_clock_ghz"]) == ("cpu", 12, 4.5)
    from estimator.app.params import parse_params

    q = {"hardware": ["custom"], "memory_gib": ["32"], "bandwidth_gbs": ["60"], "family": ["cpu-x86-avx512"],
         "cpu_cores": ["12"], "cpu_clock_ghz": ["4.5"]}
    params = parse_params(q)
    assert (params.cpu_cores, params.cpu_clock_ghz) == (12, 4.5) and params.query()["cpu_cores"] == "12"
    assert (params.request().cpu_cores, params.request().cpu_clock_ghz) == (12, 4.5)
