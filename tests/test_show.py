"""`python -m harness show`: the stored records one row each, filtered, as text / json / csv; a filter value
that names nothing stored is one line naming the nearest values (exit 2)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records import append_records, record_from_dict, with_defaults

REPO = Path(__file__).resolve().parents[1]


def _rec(rid: str, **kw) -> dict:
    row = {
        "record_id": rid, "schema_version": 2, "timestamp_utc": "2026-01-01T00:00:00Z", "origin": "measured",
        "source": "plans/cpu-quick.toml", "fitbench_git_sha": "abc", "host": "box", "engine": "llama.cpp",
        "engine_version": "0.3", "build_info": "", "backend": "CPU", "device_name": "AMD EPYC",
        "hardware_id": "", "hardware_family": "cpu-x86-avx512", "n_devices": 1, "driver": "",
        "model_id": "qwen3-0.6b", "model_fingerprint": "f", "n_layers_real": 28, "n_layers_measured": 2,
        "quant": "Q4_K_M", "synthetic_weights": True, "n_prompt": 512, "n_gen": 0, "n_depth": 0, "batch": 1,
        "n_ctx": 1024, "kv_dtype": "f16", "flash_attn": False, "n_threads": 2, "n_batch": 2048,
        "n_ubatch": 512, "n_gpu_layers": -1, "status": "ok", "prefill_tok_s": 1234.5,
        "prefill_tok_s_std": 12.3, "weights_bytes": 2**29, "kv_bytes": 2**27, "extra": {"plan": "cpu-quick"},
    }  # fmt: skip
    row.update(kw)
    return with_defaults(row)


@pytest.fixture()
def store(tmp_path) -> Path:
    runs = tmp_path / "runs"
    own = [
        _rec("a1", timestamp_utc="2026-01-01T10:00:00Z"),
        _rec("a2", timestamp_utc="2026-01-01T10:01:00Z", n_prompt=0, n_gen=128, n_depth=4096,
             prefill_tok_s=None, prefill_tok_s_std=None, decode_tok_s=56.78, decode_tok_s_std=0.9),
        _rec("a3", timestamp_utc="2026-01-01T10:02:00Z", status="failed", prefill_tok_s=None,
             prefill_tok_s_std=None, error="crashed: killed by SIGABRT", weights_bytes=None, kv_bytes=None),
        _rec("a4", timestamp_utc="2026-01-01T10:03:00Z", n_prompt=0, prefill_tok_s=None,
             prefill_tok_s_std=None, batch=4, compute_bytes=2**28, extra={"plan": "cpu-memory",
             "memory_only": True, "test": "memory"}, source="plans/cpu-memory.toml"),
    ]  # fmt: skip
    append_records(runs / "cpu-quick--cpu-x86-avx512--box.jsonl", [record_from_dict(r) for r in own])
    published = [
        _rec("p1", origin="imported", source="https://example.org/bench", host="", hardware_id="rtx-4090",
             hardware_family="nvidia-ada", device_name="", backend="CUDA", model_id="Qwen/Qwen3-8B",
             quant="Q8_0", n_threads=None, n_layers_measured=36, n_layers_real=36, extra={},
             timestamp_utc="2025-06-01T00:00:00Z", prefill_tok_s=9876.0, prefill_tok_s_std=None),
        _rec("p2", origin="imported", source="https://example.org/serve", host="", hardware_id="h100-sxm",
             hardware_family="nvidia-hopper", device_name="", backend="CUDA", engine="vllm",
             model_id="Qwen/Qwen3-8B", quant="BF16", n_threads=None, n_layers_measured=36, n_layers_real=36,
             extra={}, timestamp_utc="2025-06-02T00:00:00Z", prefill_tok_s=None, prefill_tok_s_std=None,
             n_prompt=1024, n_gen=128, batch=8, concurrency=8, serving_mode="agg", tpot_s=0.0123,
             ttft_s=0.12, output_tok_s=640.0),
    ]  # fmt: skip
    append_records(runs / "published.jsonl", [record_from_dict(r) for r in published])
    return tmp_path


def show(results: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "harness", "show", "--results", str(results), *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_text_table_shows_every_record_in_time_order_with_its_columns(store):
    r = show(store)
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("│")]
    assert len(rows) == 6 and "6 of 6 records" in r.stdout
    assert "Qwen/Qwen3-8B" in rows[0] and "rtx-4090" in rows[0]  # 2025 first
    own = rows[2]
    for cell in ("2026-01-01 10:00", "box / AMD EPYC", "llama.cpp CPU t=2", "qwen3-0.6b (2/28 L)", "Q4_K_M",
                 "pp512", "1,234.50 ± 12.30", "0.625", "ok"):  # fmt: skip
        assert cell in own, (cell, own)
    assert "tg128@d4096" in rows[3] and "56.78 ± 0.90" in rows[3]
    assert "failed" in rows[4] and "mem c1024 x4" in rows[5]
    serve = rows[1]
    assert "serve c8 1024/128" in serve and "640.00" in serve and "TTFT 120.0 ms, TPOT 12.3 ms" in serve


@pytest.mark.parametrize(
    ("args", "ids"),
    [
        (("--model", "qwen3-8b"), ["p1", "p2"]),  # a HF id by its name after the org
        (("--model", "qwen3-0.6b", "--test", "tg"), ["a2"]),
        (("--test", "pp,serve"), ["p1", "p2", "a1", "a3"]),  # a3 failed, planned as pp
        (("--test", "mem"), ["a4"]),
        (("--status", "failed"), ["a3"]),
        (("--hardware", "RTX-4090"), ["p1"]),
        (("--hardware", "amd epyc", "--last", "2"), ["a3", "a4"]),
        (("--family", "nvidia-*"), ["p1", "p2"]),
        (("--engine", "vllm"), ["p2"]),
        (("--quant", "q4_k_m", "--status", "ok"), ["a1", "a2", "a4"]),
        (("--plan", "cpu-memory"), ["a4"]),
        (("--file", "published"), ["p1", "p2"]),
        (("--file", "published.jsonl", "--engine", "llama.cpp"), ["p1"]),
        (("--last", "1"), ["a4"]),
    ],
)
def test_filters_as_json(store, args, ids):
    r = show(store, *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["record_id"] for row in rows] == ids


def test_json_and_csv_carry_raw_numbers_and_where_each_record_is(store):
    (row,) = json.loads(show(store, "--test", "tg", "--format", "json").stdout)
    assert row["tok_s"] == 56.78 and row["tok_s_sd"] == 0.9 and row["speed"] == "decode"
    assert row["test"] == "tg128@d4096" and row["memory_bytes"] == 2**29 + 2**27
    assert row["where"].endswith("cpu-quick--cpu-x86-avx512--box.jsonl:2")
    text = show(store, "--status", "failed", "--format", "csv").stdout
    (rec,) = list(csv.DictReader(io.StringIO(text)))
    assert rec["record_id"] == "a3" and rec["error"] == "crashed: killed by SIGABRT" and rec["tok_s"] == ""


def test_nothing_matching_is_said_not_an_error(store):
    r = show(store, "--engine", "vllm", "--test", "tg")
    assert r.returncode == 0 and "no record matches (engine vllm, test tg); 6 records stored" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", "qwen3-06b"), "--model qwen3-06b: no stored record has this model; nearest: qwen3-0.6b"),
        (("--engine", "llamacpp"), "--engine llamacpp: no stored record has this engine; nearest: llama.cpp"),
        (("--status", "fail"), "error: --status fail: not one of ok, failed, skipped"),
        (("--test", "pp,decode"), "error: --test decode: not one of pp, tg, mem, serve"),
        (("--file", "publishd"), "--file publishd: no stored record has this file; nearest: published"),
        (("--last", "0"), "error: --last must be >= 1"),
        (("--format", "yaml"), "invalid choice: 'yaml'"),
    ],
)
def test_bad_filter_is_one_line_naming_the_nearest_values(store, args, message):
    r = show(store, *args)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


def test_show_reads_the_published_records_shipped_in_results():
    """The user's command on this repository's results/runs (the published records are there)."""
    r = subprocess.run([sys.executable, "-m", "harness", "show", "--file", "published", "--test", "tg",
                        "--last", "3", "--format", "json"], cwd=REPO, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 3
    assert all(row["where"].startswith("results/runs/published") for row in rows)
    assert all(row["origin"] == "imported" for row in rows)
    assert all(row["test"].startswith(("tg", "pp")) for row in rows)
