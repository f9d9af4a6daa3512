"""Imports of the 2026-12-01 published sources: serving_silicon.csv (S12) and published_measurements_2.csv
(S13), both whole, through `python -m harness import`; malformed rows name their line."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.catalog.resolve import resolve_hardware, resolve_model
from harness.import_serving import parse_data_source
from harness.importers import ImportContext, ImportFormatError, import_file
from harness.store import import_target

REPO = Path(__file__).resolve().parents[1]
PUB = REPO.parent / "shared" / "reference" / "published"
SERVING = PUB / "serving_silicon.csv"
PUB2 = PUB / "published_measurements_2.csv"

pytestmark = pytest.mark.skipif(not PUB.is_dir(), reason="../shared/reference not beside the repo")


def ctx() -> ImportContext:
    return ImportContext(source="fixture", timestamp_utc="2026-12-01T00:00:00Z",
                         resolve_hardware=resolve_hardware, resolve_model=resolve_model)  # fmt: skip


def test_serving_silicon_every_row_imported_and_traceable():
    fmt, recs = import_file(SERVING, ctx=ctx())
    with SERVING.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert fmt == "serving-silicon" and len(recs) == len(rows) == 3422
    assert len({r.record_id for r in recs}) == len(recs)
    for r, row in zip(recs, rows, strict=True):
        assert r.source == row["source_url"] and r.extra["source_file"] == "serving_silicon.csv"
        assert r.extra["published"]["id"] == row["id"]
        assert r.extra["request_lengths"] == "fixed"  # one ISL x OSL configuration of equal-length requests
        assert r.engine == row["backend"] and r.engine in ("vllm", "sglang", "trtllm")
        assert r.ttft_s == pytest.approx(float(row["silicon_ttft_ms"]) / 1000)
        assert r.tpot_s == pytest.approx(float(row["silicon_tpot_ms"]) / 1000)
        assert (r.n_prompt, r.n_gen) == (int(row["isl"]), int(row["osl"])) and r.serving_mode == row["mode"]
        assert r.hardware_id in ("h100-80gb-sxm", "b200", "gb200-per-gpu") and r.model_fingerprint
    lines = [r.extra["source_line"] for r in recs]
    assert lines[0] == 2 and lines == sorted(lines)
    first = recs[0]  # MiniMax-M2.5 on 16 B200: TP 4 x attention-DP 4, EP 16, concurrency 256 (64 per rank)
    assert (first.tp_size, first.dp_size, first.ep_size, first.n_devices) == (4, 4, 16, 16)
    assert (first.concurrency, first.extra["batch_size"], first.quant) == (256, 64.0, "FP8")
    assert first.model_id == "MiniMaxAI/MiniMax-M2"
    assert first.extra["model_alias"]["alias"] == "MiniMaxAI/MiniMax-M2.5"
    assert first.timestamp_utc == "2026-04-22T00:00:00Z"
    assert first.build_info == "vllm/vllm-openai:v0.19.0-cu130"
    disagg = [r for r in recs if r.serving_mode == "disagg"]
    assert disagg and all(r.tp_size is None and "prefill" in r.extra["disagg"] for r in disagg)
    quants = {r.quant for r in recs}
    assert quants == {"FP8", "FP8-BLOCK", "NVFP4", "BF16"}
    # an empty precision of a bf16 checkpoint served as published (Qwen/Qwen3-32B, Llama-3.1-8B-Instruct): the
    # checkpoint's own dtype, said to be assumed; rows stating a precision are never marked so
    assumed = [(r, row) for r, row in zip(recs, rows, strict=True) if r.extra.get("quant_assumed")]
    assert len(assumed) == sum(1 for row in rows if not row["precision"].strip()) == 366
    assert all(r.quant == "BF16" and "assumed" in r.extra["quant_note"] and not row["gemm_quant_mode"]
               for r, row in assumed)  # fmt: skip
    assert {row["model_path"] for _, row in assumed} == {"Qwen/Qwen3-32B", "meta-llama/Llama-3.1-8B-Instruct"}


def test_an_unstated_precision_is_assumed_only_for_a_bf16_checkpoint():
    from harness.import_serving import checkpoint_quant

    qwen, dsv3 = resolve_model("Qwen/Qwen3-32B"), resolve_model("deepseek-ai/DeepSeek-V3")
    row = {"gemm_quant_mode": "", "moe_quant_mode": ""}
    assert checkpoint_quant(row, qwen, None) == "BF16"
    assert checkpoint_quant(row, dsv3, None) == ""  # an FP8 checkpoint: its scales are not stated
    assert checkpoint_quant({**row, "gemm_quant_mode": "fp8_block"}, qwen, None) == ""
    assert checkpoint_quant(row, qwen, {"alias": "x/Qwen3-32B-AWQ", "quant": "AWQ-INT4"}) == ""
    assert checkpoint_quant(row, None, None) == ""


def test_data_source_parser():
    d = parse_data_source(
        "source_file=2026-04-06.csv; model=GLM-5; silicon_concurrency=128; "
        "measured=2026-03-20T00:00:00.000Z; wip=False; image=lmsysorg/sglang:nightly-dev-cu13"
    )
    assert d["silicon_concurrency"] == "128" and d["image"] == "lmsysorg/sglang:nightly-dev-cu13"
    image = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post2"
    assert parse_data_source(f"db-dump/2026-04-27; {image}")["image"] == image


def test_published_2_new_metrics_engines_and_name_mapping():
    fmt, recs = import_file(PUB2, ctx=ctx())
    assert fmt == "published" and len(recs) == 3218
    by = {r.extra["published"]["row_id"]: r for r in recs}
    tpot = by["100085"]  # vllm bench serve, MI300X, mean TPOT 6.42 ms at max-concurrency 32
    assert tpot.tpot_s == pytest.approx(0.00642) and tpot.concurrency == 32 and tpot.hardware_id == "mi300x"
    sgl = next(r for r in recs if r.extra["source_group"] == "sglang-mi300x")
    assert sgl.engine == "other" and "SGLang" in sgl.build_info  # kept as the source says
    # bench_serving on a random dataset: lengths spread, so the serving fit does not take it as a cohort
    from calibration.serving import fixed_lengths

    assert "request_lengths" not in sgl.extra and not fixed_lengths(sgl)
    e2e = next(r for r in recs if r.extra["metric"] == "e2e_latency_s")
    assert e2e.e2e_latency_s > 0 and e2e.decode_tok_s is None
    pvc = next(r for r in recs if r.device_name == "Intel PVC GPU")
    assert pvc.hardware_id == "intel-max-1550" and "hardware_id" in pvc.extra["mapped"]
    assert sum(r.hardware_id == "mi300x" for r in recs) >= 1914
    assert {r.extra["quality"] for r in recs} >= {"ok", "aggregate", "suspect", "approximate"}
    assert all(r.extra["source_file"] == PUB2.name and r.extra["source_line"] >= 2 for r in recs)


def test_bad_serving_row_names_its_line(tmp_path):
    with SERVING.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [next(reader) for _ in range(3)]
    rows[1]["silicon_tpot_ms"] = "-3"
    bad = tmp_path / "serving.csv"
    with bad.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(ImportFormatError, match=r"serving.csv:3: silicon_tpot_ms = '-3'"):
        import_file(bad, ctx=ctx())


def test_cli_reimport_is_byte_identical(tmp_path):
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "harness", "import", str(SERVING), "--results", str(results),
            "--timestamp", "2026-12-01T00:00:00Z"]  # fmt: skip
    first = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    target = import_target(results, "serving-silicon", SERVING)
    assert target.name == "published-serving.jsonl"
    before = target.read_bytes()
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0 and "imported 0" in again.stdout and target.read_bytes() == before
