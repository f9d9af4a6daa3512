"""issue 11: the memory switches a user sets in ``report`` (--flash-attn, --ubatch, --swa-full, --kv-unified,
--kv-pad) reach the sizing, the summary, the JSON and the launch command; other engines refuse them."""

from __future__ import annotations

import json

import pytest

from estimator.physics.kv import kv_cache
from estimator.report.request import ReportRequest, make_report
from estimator.specs import SpecError
from tests.estimator_cli import run

GEMMA = dict(model="gemma-3-27b", hardware="rtx-4090", quant="Q4_K_M", ctx=32768)


def _report(**kw):
    from estimator.report.document import report_to_dict

    return report_to_dict(make_report(ReportRequest(**{**GEMMA, **kw})))


def _argv(d: dict) -> list[str]:
    """The llama.cpp launch command of a report."""
    return next(c["argv"] for c in d["launch"] if c["engine"] == "llama.cpp")


def _gemma():
    from estimator.catalog.resolve import resolve_model

    return resolve_model("gemma-3-27b")


def test_swa_full_sizes_the_window_layers_at_full_context():
    plain, full = _report(), _report(swa_full=True)
    model = _gemma()
    want = kv_cache(model, 32768, "f16", 1, "llama.cpp", swa_full=True).total_bytes
    assert full["memory"]["kv_bytes"] == want > 3 * plain["memory"]["kv_bytes"]
    assert full["workload"]["swa_full"] is True and plain["workload"]["swa_full"] is False
    assert "--swa-full" in _argv(full) and "--swa-full" not in _argv(plain)


def test_flash_attention_off_grows_the_compute_buffer_and_says_so():
    on, off = _report(), _report(flash_attn="off")
    assert off["memory"]["runtime_bytes"] > on["memory"]["runtime_bytes"]
    assert off["workload"]["flash_attn"] is False and on["workload"]["flash_attn"] is True
    i = _argv(off).index("-fa")
    assert _argv(off)[i + 1] == "off"


def test_ubatch_grows_the_compute_buffer_and_reaches_the_command():
    small, big = _report(), _report(ubatch=4096)
    assert big["memory"]["runtime_bytes"] > small["memory"]["runtime_bytes"]
    argv = _argv(big)
    assert argv[argv.index("-ub") + 1] == "4096" and argv[argv.index("-b") + 1] == "4096"
    assert "-ub" not in _argv(small)


def test_per_sequence_streams_cost_more_window_cells_than_one_unified_cache():
    unified = _report(concurrency=4)
    streams = _report(concurrency=4, kv_unified=False)
    assert streams["memory"]["kv_bytes"] > unified["memory"]["kv_bytes"]
    assert "--kv-unified" in _argv(unified) and "--kv-unified" not in _argv(streams)


def test_old_build_padding_changes_the_cells():
    model = _gemma()
    padded = _report(ctx=1100, flash_attn="off", kv_pad=32)
    want = kv_cache(model, 1100, "f16", 1, "llama.cpp", flash_attn=False, kv_pad=32).total_bytes
    assert padded["memory"]["kv_bytes"] == want != _report(ctx=1100, flash_attn="off")["memory"]["kv_bytes"]


def test_the_summary_names_every_non_default_option_in_english_and_spanish():
    args = "report --model gemma-3-27b --hardware rtx-4090 --quant Q4_K_M --brief"
    args += " --flash-attn off --ubatch 1024"
    p = run(*args.split(), "--swa-full", "--concurrency", "2", "--no-kv-unified")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    wanted = ("flash attention off", "micro-batch 1,024 tokens", "--swa-full", "one KV stream per sequence")
    for words in wanted:
        assert words in text.replace("│ ", "").replace(" │", ""), words
    es = run(*args.split(), "--lang", "es")
    assert "atención flash desactivada" in es.stdout and "micro-lote de 1.024 tokens" in es.stdout
    plain = run(*"report --model gemma-3-27b --hardware rtx-4090 --brief".split())
    assert "Options:" not in plain.stdout


@pytest.mark.parametrize(
    "engine,kw,needle",
    [
        ("vllm", dict(swa_full=True), "--swa-full: llama.cpp option"),
        ("vllm", dict(ubatch=1024, kv_pad=32), "--kv-pad, --ubatch: llama.cpp options"),
        ("sglang", dict(concurrency=4, kv_unified=False), "--no-kv-unified: llama.cpp option"),
        ("vllm", dict(flash_attn="off"), "--flash-attn off is a llama.cpp option"),
    ],
)
def test_engines_that_lay_out_their_own_cache_refuse_the_llama_cpp_switches(engine, kw, needle):
    req = ReportRequest(model="qwen3-30b-a3b", hardware="h100-sxm", engine=engine, **kw)
    with pytest.raises(SpecError, match=needle.replace("-", r"\-")):
        make_report(req)


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--ubatch", "0"], "--ubatch"),
        (["--kv-pad", "5000"], "--kv-pad"),
        (["--flash-attn", "maybe"], "maybe"),
    ],
)
def test_bad_values_are_one_line_usage_errors(extra, needle):
    p = run("report", "--model", "qwen3-0.6b", "--hardware", "rtx-4090", *extra)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_json_workload_carries_the_switches():
    p = run(*"report --model qwen3-0.6b --hardware rtx-4090 --format json --ubatch 256".split())
    w = json.loads(p.stdout)["workload"]
    assert (w["n_ubatch"], w["swa_full"], w["kv_unified"], w["kv_pad"], w["flash_attn"]) == (
        256,
        False,
        True,
        0,
        True,
    )
