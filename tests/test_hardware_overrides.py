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
