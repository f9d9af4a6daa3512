"""RunRecord schema 2: the one migration from version 1, and what readers reject."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.records import (
    FIELD_NAMES,
    SCHEMA_VERSION,
    SERVING_FIELDS,
    RecordError,
    migrate_v1_to_v2,
    read_records,
    record_from_dict,
    record_to_dict,
)

REPO = Path(__file__).resolve().parents[1]

# A version-1 line as fitbench wrote it before schema 2 (results/runs/published.jsonl, first row).
V1_LINE = {
    "backend": "CUDA", "batch": 0, "build_info": "llama.cpp (main)", "compute_bytes": None,
    "decode_samples_tok_s": [], "decode_tok_s": None, "decode_tok_s_std": None, "device_name": "RTX 3090",
    "device_total_bytes": None, "driver": "", "engine": "llama.cpp", "engine_version": "", "error": "",
    "extra": {"metric": "weights_gib", "quality": "ok"}, "fitbench_git_sha": "abfd5df5",
    "flash_attn": None, "hardware_family": "nvidia-ampere", "hardware_id": "rtx-3090", "host": "",
    "host_rss_bytes": None, "kv_bytes": None, "kv_dtype": "", "model_fingerprint": "2ec83d1333a8b35c1b22",
    "model_id": "meta-llama/Llama-2-7b-hf", "n_batch": None, "n_ctx": 512, "n_depth": 0, "n_devices": 2,
    "n_gen": 0, "n_gpu_layers": None, "n_layers_measured": 32, "n_layers_real": 32, "n_prompt": 0,
    "n_threads": None, "n_ubatch": None, "origin": "imported", "output_bytes": None,
    "prefill_samples_tok_s": [], "prefill_tok_s": None, "prefill_tok_s_std": None, "quant": "Q4_0",
    "record_id": "7fc834127f0dea6e171e4328", "schema_version": 1, "source": "https://example.org/x",
    "status": "ok", "synthetic_weights": False, "timestamp_utc": "2026-11-29T00:00:00Z", "ttft_s": None,
    "weights_bytes": 3751331811,
}  # fmt: skip


def test_schema_version_is_2_and_serving_fields_are_declared():
    assert SCHEMA_VERSION == 2
    assert set(SERVING_FIELDS) <= set(FIELD_NAMES)
    # units in the names: times in seconds, throughputs in tokens/s, sizes are counts
    for name in SERVING_FIELDS:
        assert name.endswith(("_s", "_tok_s", "_size")) or name in ("concurrency", "serving_mode"), name


def test_v1_record_migrates_with_serving_fields_unstated():
    rec = record_from_dict(dict(V1_LINE))
    assert rec.schema_version == 2
    assert rec.weights_bytes == 3751331811 and rec.model_id == "meta-llama/Llama-2-7b-hf"
    for name in SERVING_FIELDS:
        assert getattr(rec, name) == ("" if name == "serving_mode" else None), name
    again = record_from_dict(json.loads(json.dumps(record_to_dict(rec))))
    assert again == rec and record_to_dict(again)["schema_version"] == 2


def test_v1_record_may_omit_its_defaulted_fields_but_not_required_ones():
    short = {k: v for k, v in V1_LINE.items() if k not in ("ttft_s", "weights_bytes", "extra", "error")}
    rec = record_from_dict(short)
    assert rec.weights_bytes is None and rec.extra == {} and rec.tpot_s is None
    no_engine = {k: v for k, v in V1_LINE.items() if k != "engine"}
    with pytest.raises(RecordError, match="missing key.*engine"):
        record_from_dict(no_engine, "f.jsonl:3")


def test_v1_record_holding_a_stated_v2_field_is_rejected():
    with pytest.raises(RecordError, match="version-2 field.*tpot_s"):
        record_from_dict({**V1_LINE, "tpot_s": 0.01})
    # a v1 row that spells a v2 key with its default is still a v1 row
    assert record_from_dict({**V1_LINE, "tpot_s": None, "serving_mode": ""}).tpot_s is None


def test_migration_function_does_not_touch_its_input():
    raw = dict(V1_LINE)
    out = migrate_v1_to_v2(raw)
    assert raw == V1_LINE and out["schema_version"] == 2 and out["concurrency"] is None


def test_v2_reader_rejects_missing_and_unknown_keys_and_versions():
    full = record_to_dict(record_from_dict(dict(V1_LINE)))
    for key in ("tpot_s", "weights_bytes", "engine"):
        with pytest.raises(RecordError, match=rf"f.jsonl:7: missing key\(s\): {key}"):
            record_from_dict({k: v for k, v in full.items() if k != key}, "f.jsonl:7")
    with pytest.raises(RecordError, match="unknown key.*tpot_ms"):
        record_from_dict({**full, "tpot_ms": 3.0})
    for bad in (3, 0, None, True, "2"):
        with pytest.raises(RecordError, match="unknown schema_version"):
            record_from_dict({**full, "schema_version": bad})
    with pytest.raises(RecordError, match="serving_mode 'mixed'"):
        record_from_dict({**full, "serving_mode": "mixed"})


def test_every_stored_record_still_reads():
    files = sorted((REPO / "results" / "runs").glob("*.jsonl"))
    assert files
    n = 0
    for path in files:
        for rec in read_records(path):
            assert rec.schema_version == SCHEMA_VERSION
            n += 1
    assert n > 0
