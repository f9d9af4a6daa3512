"""The answer first (issue 13: 6): ``report --brief``, the summary's speed labels, cost cards at the top of
the HTML, dated cloud offers for the catalog's data-centre devices, and ``--usd-per-hour`` shown with its
value."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from estimator.catalog.rates import RATES_PATH, load_cloud_rates
from tests.estimator_cli import run

ROOT = Path(__file__).resolve().parents[1]


def test_brief_is_the_answer_in_about_ten_lines():
    p = run("report", "--model", "qwen3-30b-a3b", "--hardware", "rtx-4090", "--ctx", "32768", "--brief")
    assert p.returncode == 0 and p.stderr == ""
    text = p.stdout
    for word in ("Verdict: fits", "Memory: weights", "Decode:", "Prefill:", "time to first token", "Cost: $"):
        assert word in text, word
    assert "── Model" not in text  # the sections are left out
    assert len(text.splitlines()) <= 16  # a framed panel of ~10 statements at 100 columns
    bad = run("report", "--model", "qwen3-30b-a3b", "--hardware", "rtx-4090", "--brief", "--format", "json")
    assert bad.returncode == 2 and "--brief is a text output" in bad.stderr


def test_speed_labels_say_where_the_cache_is():
    p = run("report", "--model", "llama-3.1-8b", "--hardware", "rtx-4090", columns=400)
    assert (
        "one stream, empty context; " in p.stdout and "with the KV cache half full (4,096 tokens)" in p.stdout
    )
    speed = p.stdout.split("\n── Speed")[1].split("\n── ")[0]
    assert "empty context (tg128)" in speed and re.search(r"KV half\s+full \(4,096", speed)


def test_html_header_has_speed_and_cost_cards_next_to_the_verdict(tmp_path):
    out = tmp_path / "r.html"
    p = run("report", "--model", "glm-4.5", "--hardware", "mi300x", "--format", "html", "-o", str(out))
    assert p.returncode == 0, p.stderr
    header = out.read_text().split("</header>")[0]
    for path in (
        "memory.verdict",
        "memory.total_bytes",
        "speed.decode.tok_s",
        "speed.ttft_s",
        "cost.usd_per_1m_output_tokens",
    ):
        assert f'data-path="{path}"' in header, path
    assert "empty context" in header and "KV half full at 4,096 tokens" in header


def test_the_seed_cost_question_has_a_dated_sourced_rate():
    d = json.loads(
        run(
            "report",
            "--model",
            "glm-4.5",
            "--hardware",
            "mi300x",
            "--devices",
            "8",
            "--engine",
            "vllm",
            "--concurrency",
            "64",
            "--format",
            "json",
        ).stdout
    )
    c = d["cost"]
    assert c["usd_per_hour"] and c["usd_per_1m_output_tokens"] and c["rate_source_url"].startswith("https://")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", c["rate_verified_date"])
    single = json.loads(
        run("report", "--model", "glm-4.5", "--hardware", "mi300x", "--format", "json").stdout
    )
    assert single["cost"]["usd_per_hour"] == min(
        r.usd_per_hour for r in load_cloud_rates() if r.hardware_id == "mi300x" and r.n_devices == 1
    )


def test_every_rate_row_is_dated_and_sourced_and_common_datacentre_parts_have_one():
    rows = list(csv.DictReader(RATES_PATH.open()))
    for r in rows:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", r["verified_date"]), r
        assert r["source_url"] and r["source_note"], r
    have = {r["hardware_id"] for r in rows}
    for hid in (
        "mi300x",
        "mi325x",
        "h100-80gb-sxm",
        "h100-80gb-pcie",
        "h200-141gb-sxm",
        "b200",
        "a100-80gb-sxm",
        "a100-80gb-pcie",
        "l40s",
        "l4",
        "a10",
    ):
        assert hid in have, hid


def test_usd_per_hour_shows_its_value(tmp_path):
    args = ("report", "--model", "mixtral-8x7b", "--hardware", "a100-80gb-sxm", "--usd-per-hour", "2.5")
    text = run(*args, columns=400).stdout
    assert "Hourly rate $2.50/h (set with --usd-per-hour 2.5)" in text
    assert "Cost: $2.50/h (set with --usd-per-hour 2.5)" in text
    out = tmp_path / "r.html"
    run(*args, "--format", "html", "-o", str(out))
    assert re.search(
        r"--usd-per-hour <span[^>]*data-path=\"cost.usd_per_hour\"[^>]*>\$2\.50<", out.read_text()
    )
    d = json.loads(run(*args, "--format", "json").stdout)
    chosen = next(o for o in d["chart_data"]["hardware_comparison"] if o["selected"])
    assert chosen["usd_per_hour"] == 2.5 and chosen["rate_origin"] == "--usd-per-hour"


def test_a_configuration_that_does_not_fit_names_the_largest_format_that_does():
    """Llama-3.1-70B on one RTX 4090: Q4_K_M does not fit, the summary names the largest format of the
    quantization matrix that fits on llama.cpp (its total and decode), and on vLLM over two RTX 3090s the
    largest checkpoint format that fits; nothing is named when the sized format fits."""
    from estimator.report.document import report_to_dict, to_brief
    from estimator.report.request import ReportRequest, make_report
    from estimator.report.sections.summary import best_fitting_format

    d = report_to_dict(make_report(ReportRequest(model="llama-3.1-70b", hardware="rtx-4090")))
    best = best_fitting_format(d)
    fitting = [r for r in d["quant_matrix"] if r["verdict"] == "fits" and "llama.cpp" in r["engines"]]
    assert best is not None and best["weights_bytes"] == max(r["weights_bytes"] for r in fitting)
    assert best["total_bytes"] <= d["memory"]["usable_bytes"]
    assert f"Fits as {best['quant']}: " in " ".join(to_brief(d, width=300).split())
    vllm = report_to_dict(
        make_report(ReportRequest(model="llama-3.1-70b", hardware="rtx-3090", devices=2, engine="vllm"))
    )
    assert "vllm" in best_fitting_format(vllm)["engines"]
    fits = report_to_dict(make_report(ReportRequest(model="llama-3.1-8b", hardware="rtx-4090")))
    assert best_fitting_format(fits) is None


def test_the_cost_line_says_what_throughput_it_is_priced_at():
    """The summary's USD per 1M output tokens is priced at the serving point within the SLO, not at the
    requested concurrency: the line says which (the cost section's ``aggregate_basis``)."""
    args = ("report", "--model", "qwen3-30b-a3b", "--hardware", "mi300x", "--engine", "vllm")
    args += ("--concurrency", "32")
    d = json.loads(run(*args, "--format", "json").stdout)
    c = d["cost"]
    assert c["aggregate_concurrency"] > 32  # the SLO's point, not the 32 clients asked for
    text = " ".join(run(*args, "--brief", columns=400).stdout.split())
    assert f"per 1M output tokens at {c['aggregate_tok_s']:,.0f} tok/s: {c['aggregate_basis']}." in text
    assert f"serving model at {c['aggregate_concurrency']} clients, the most within" in text


def test_a_cache_that_does_not_fit_names_the_cheaper_kv_dtype_that_does():
    """Gemma 3 27B Q4_K_M at 131K on a 24 GB card: the f16 cache does not fit, q8_0 does (before any smaller
    weight format); the figures are those of the report sized with --kv-dtype q8_0."""
    args = ("report", "--model", "gemma-3-27b", "--hardware", "rtx-3090", "--ctx", "131072")
    mem = json.loads(run(*args, "--format", "json").stdout)["memory"]
    q8 = json.loads(run(*args, "--kv-dtype", "q8_0", "--format", "json").stdout)["memory"]
    assert mem["verdict"] == "does not fit" and q8["verdict"] == "fits"
    assert mem["kv_dtype_fit"] == "q8_0"
    assert mem["kv_dtype_fit_total_bytes"] == q8["total_bytes"]
    assert mem["kv_dtype_fit_kv_bytes"] == q8["kv_bytes"]
    assert q8["kv_dtype_fit"] is None  # already quantized
    text = " ".join(run(*args, "--brief", columns=400).stdout.split())
    assert "With --kv-dtype q8_0 it fits:" in text and text.index("--kv-dtype q8_0") < text.index("Fits as")
    # without flash attention llama.cpp cannot quantize the V cache: no suggestion it would refuse
    off = json.loads(run(*args, "--flash-attn", "off", "--format", "json").stdout)["memory"]
    assert off["kv_dtype_fit"] is None


def test_of_one_precision_the_answer_is_the_format_served_from_the_published_checkpoint():
    """Llama-3.1-405B in BF16 on 8 x H100 with vLLM does not fit; FP8 and FP8-BLOCK both fit and differ by
    their scales.  vLLM quantizes the bf16 checkpoint to FP8 at load time (--quantization fp8) but needs a
    published block-scaled checkpoint for FP8-BLOCK: the summary names FP8."""
    from estimator.report.document import report_to_dict
    from estimator.report.request import ReportRequest, make_report
    from estimator.report.sections.summary import best_fitting_format

    req = ReportRequest(model="llama-3.1-405b", hardware="h100-80gb-sxm", devices=8, engine="vllm")
    d = report_to_dict(make_report(req))
    rows = {r["quant"]: r for r in d["quant_matrix"]}
    assert rows["FP8"]["from_published"] is True and rows["FP8-BLOCK"]["from_published"] is False
    assert rows["FP8-BLOCK"]["weights_bytes"] > rows["FP8"]["weights_bytes"]  # the block scales
    assert best_fitting_format(d)["quant"] == "FP8"
    # llama.cpp's GGUF recipes are not checkpoints
    gguf = report_to_dict(make_report(ReportRequest(model="llama-3.1-70b", hardware="rtx-4090")))
    assert {r["from_published"] for r in gguf["quant_matrix"]} == {None}


def test_a_reserving_engine_that_starts_says_how_many_sequences_it_holds_at_once():
    """vLLM with 64 slots of 8K tokens for Llama-3.1-8B on a 24 GB card: the 64 full-length caches do not fit,
    but vLLM starts (its pool holds more than one sequence) and serves as many as its pool holds at once.  The
    summary says so and names the concurrency that fits, which does fit; the weights are in device memory, so
    the "as if it fit" line says what is assumed instead (every sequence's KV at once).  llama.cpp allocates
    every slot's cache up front: no such line."""
    args = ("report", "--model", "llama-3.1-8b", "--hardware", "rtx-4090", "--engine", "vllm")
    d = json.loads(run(*args, "--concurrency", "64", "--format", "json").stdout)
    mem = d["memory"]
    most = mem["max_concurrency"]
    assert mem["verdict"] == "does not fit" and 1 <= most < 64
    text = " ".join(run(*args, "--concurrency", "64", "--brief", columns=400).stdout.split())
    assert (
        f"vLLM starts: its KV pool holds {mem['kv_capacity_tokens']:,} tokens, {most} sequences of 8,192 "
        f"tokens at once; with --concurrency {most} it fits" in text
    )
    assert "As if they fit at once: the total at concurrency 64" in text and "As if it fit:" not in text
    ok = json.loads(run(*args, "--concurrency", str(most), "--format", "json").stdout)["memory"]
    assert ok["verdict"] == "fits"
    es = " ".join(run(*args, "--concurrency", "64", "--brief", "--lang", "es", columns=400).stdout.split())
    assert "vLLM arranca: su pool KV admite" in es and "starts:" not in es
    # the HTML decode card of one stream is not "as if it fit": one sequence does fit
    html = run(*args, "--concurrency", "64", "--format", "html").stdout
    assert "as if it fit" not in html and "vLLM starts: KV pool tokens (--concurrency " in html
    cpp = run("report", "--model", "llama-3.1-8b", "--hardware", "rtx-4090", "--concurrency", "64", "--brief")
    assert "starts: its KV pool" not in " ".join(cpp.stdout.split())
