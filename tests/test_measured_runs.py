"""Measured runs shown beside the estimate (estimator/catalog/measured.py) read robustly: a runs folder
holding a non-UTF-8 line, a FIFO, ``decode_tok_s: "fast"``, a NaN, an ``inf``, a list, a duplicated line
and an overlong line still gives a report (exit 0) that shows only the good rows; the range table mirrors
the harness's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from estimator.catalog.measured import FIELD_RANGES, find_measured, row_problem

REPO = Path(__file__).resolve().parents[1]


def good_row(**changes) -> dict:
    row = {
        "record_id": "r1",
        "schema_version": 2,
        "timestamp_utc": "2026-01-01T00:00:00Z",
        "origin": "measured",
        "source": "plans/x.toml",
        "engine": "llama.cpp",
        "engine_version": "b6000",
        "device_name": "RTX 4090",
        "hardware_id": "rtx-4090",
        "n_devices": 1,
        "model_id": "qwen3-0.6b",
        "n_layers_real": 28,
        "n_layers_measured": 28,
        "quant": "Q8_0",
        "synthetic_weights": True,
        "n_prompt": 0,
        "n_gen": 128,
        "n_depth": 0,
        "batch": 1,
        "n_ctx": 4096,
        "kv_dtype": "f16",
        "status": "ok",
        "decode_tok_s": 321.5,
    }
    row.update(changes)
    return row


def hostile_runs(folder: Path) -> Path:
    runs = folder / "runs"
    runs.mkdir()
    good = json.dumps(good_row())
    lines = [
        good.encode(),
        good.encode(),  # the same line again: a duplicate, dropped
        b'{"schema_version": 2, "model_id": "qwen3-0.6b\xff"}',  # not UTF-8
        json.dumps(good_row(record_id="r2", decode_tok_s="fast", n_devices="fast")).encode(),
        json.dumps(good_row(record_id="r3", decode_tok_s=float("nan"))).encode(),  # NaN (json writes it)
        json.dumps(good_row(record_id="r4", decode_tok_s=float("inf"))).encode(),
        json.dumps(good_row(record_id="r5", n_devices=[1, 2])).encode(),
        json.dumps(good_row(record_id="r6", n_depth=1e300)).encode(),
        json.dumps(good_row(record_id="r7", decode_tok_s=-5.0)).encode(),
        b'{"record_id": "r8", ' + b'"x": "' + b"a" * (2 << 20) + b'"}',  # a 2 MiB line
        b"[1, 2, 3]",
        b"{not json",
    ]
    (runs / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    os.mkfifo(runs / "x.jsonl")  # a FIFO named like a runs file: never opened for reading, never waited on
    (runs / "folder.jsonl").mkdir()
    return runs


def test_hostile_runs_folder_keeps_only_the_good_row(tmp_path):
    runs = hostile_runs(tmp_path)
    m = find_measured(runs, ["qwen3-0.6b"], "rtx-4090", "Q8_0")
    assert [r.decode_tok_s for r in m.runs] == [321.5]
    assert m.duplicates == 1
    assert m.skipped == 10 + 2  # 10 bad lines in a.jsonl, the FIFO and the folder


def test_report_html_with_hostile_runs_exits_0(tmp_path):
    runs = hostile_runs(tmp_path)
    out = tmp_path / "r.html"
    p = subprocess.run(
        [sys.executable, "-m", "estimator", "report", "--model", "qwen3-0.6b", "--hardware", "rtx-4090",
         "--quant", "Q8_0", "--format", "html", "--results", str(runs), "-o", str(out)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    html = out.read_text()
    assert 'data-measured="decode" data-value="321.5"' in html
    assert "a.jsonl:1" in html and "a.jsonl:2" not in html  # the duplicate is not listed twice


def test_row_problem_names_the_field():
    assert row_problem(good_row()) == ""
    assert "decode_tok_s" in row_problem(good_row(decode_tok_s="fast"))
    assert "not an integer" in row_problem(good_row(n_devices=1.5))
    assert "outside" in row_problem(good_row(weights_bytes=2**60))
    assert "not text" in row_problem(good_row(engine=["llama.cpp"]))
    assert "synthetic_weights" in row_problem(good_row(synthetic_weights="yes"))
    assert "schema_version" in row_problem(good_row(schema_version=True))


def test_field_ranges_mirror_the_harness():
    from harness.records import FIELD_RANGES as HARNESS_RANGES

    assert FIELD_RANGES == HARNESS_RANGES
