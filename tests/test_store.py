"""Records store: stable point keys, atomic de-duplicating appends, done keys, listing table."""

from __future__ import annotations

import dataclasses
import json

import pytest

from harness.records import SCHEMA_VERSION, RecordError, RunRecord, append_records
from harness.store import (
    append_new,
    done_point_keys,
    load_all_records,
    measured_path,
    point_key,
    record_files,
    runs_dir,
    safe_name,
    summary_frame,
)


def make_record(i: int = 0, **kw) -> RunRecord:
    base = dict(
        record_id=f"r{i}", schema_version=SCHEMA_VERSION, timestamp_utc="2026-01-01T00:00:00Z",
        origin="measured", source="plans/x.toml", fitbench_git_sha="abc", host="h", engine="llama.cpp",
        engine_version="0.3.36", build_info="", backend="CPU", device_name="cpu", hardware_id="",
        hardware_family="cpu-x86-avx2", n_devices=1, driver="", model_id="smollm2-135m",
        model_fingerprint="f", n_layers_real=30, n_layers_measured=4, quant="Q8_0", synthetic_weights=True,
        n_prompt=64, n_gen=0, n_depth=0, batch=1, n_ctx=512, kv_dtype="f16", flash_attn=False, n_threads=2,
        n_batch=2048, n_ubatch=512, n_gpu_layers=-1, status="ok", extra={"point_key": f"k{i}"},
    )  # fmt: skip
    base.update(kw)
    return RunRecord(**base)


def test_point_key_is_stable_and_ignores_model_path():
    body = {"model_id": "m", "quant": "Q8_0", "spec": {"n_ctx": 512}, "model_path": "/a/b.gguf"}
    k1 = point_key("h", "llama.cpp", "0.3.36", body)
    assert k1 == point_key("h", "llama.cpp", "0.3.36", {**body, "model_path": "/other/c.gguf"})
    assert k1 == point_key("h", "llama.cpp", "0.3.36", dict(reversed(list(body.items()))))
    assert k1 != point_key("h2", "llama.cpp", "0.3.36", body)
    assert k1 != point_key("h", "llama.cpp", "0.3.37", body)
    assert k1 != point_key("h", "llama.cpp", "0.3.36", {**body, "spec": {"n_ctx": 1024}})
    assert len(k1) == 20 and int(k1, 16) >= 0


def test_append_new_deduplicates_and_rejects_conflicting_ids(tmp_path):
    path = runs_dir(tmp_path) / "a.jsonl"
    assert append_new(path, [make_record(0), make_record(1)]) == (2, 0)
    assert append_new(path, [make_record(1), make_record(2)]) == (1, 1)
    assert [r.record_id for r in load_all_records(tmp_path)] == ["r0", "r1", "r2"]
    with pytest.raises(RecordError, match="share record_id"):
        append_new(path, [make_record(5), make_record(5)])
    assert len(load_all_records(tmp_path)) == 3


def test_torn_last_line_is_refused_not_extended(tmp_path):
    path = runs_dir(tmp_path) / "a.jsonl"
    append_records(path, [make_record(0)])
    with path.open("ab") as fh:
        fh.write(b'{"record_id": "half')
    with pytest.raises(RecordError, match="incomplete"):
        append_records(path, [make_record(1)])


def test_done_point_keys_counts_own_measurements_only(tmp_path):
    append_records(
        runs_dir(tmp_path) / "m.jsonl", [make_record(0), make_record(1, status="failed", error="x")]
    )
    append_records(runs_dir(tmp_path) / "i.jsonl", [make_record(2, origin="imported")])
    assert done_point_keys(tmp_path) == {"k0", "k1"}
    assert done_point_keys(tmp_path, statuses=("ok",)) == {"k0"}


def test_done_point_keys_of_one_machine(tmp_path):
    """Host names repeat across machines (cloud VMs are all "vm", their CPU often just "AMD EPYC"): with
    ``machine`` only the records of the same hardware family and device name count as done."""
    append_records(runs_dir(tmp_path) / "a.jsonl", [
        make_record(0, host="vm", device_name="AMD EPYC", hardware_family="cpu-x86-avx512"),
        make_record(1, host="vm", device_name="AMD EPYC", hardware_family="cpu-x86-avx2"),
    ])  # fmt: skip
    assert done_point_keys(tmp_path) == {"k0", "k1"}
    assert done_point_keys(tmp_path, machine=("cpu-x86-avx2", "AMD EPYC")) == {"k1"}
    assert done_point_keys(tmp_path, machine=("cpu-x86-avx2", "Other CPU")) == set()


def test_record_files_ignore_temporaries_and_paths_are_safe(tmp_path):
    d = runs_dir(tmp_path)
    d.mkdir(parents=True)
    (d / ".x.jsonl.123.tmp").write_text("partial")
    (d / "a.jsonl").write_text("")
    assert [p.name for p in record_files(tmp_path)] == ["a.jsonl"]
    p = measured_path(tmp_path, "cpu quick", "cpu-x86-avx2", "my host/1")
    assert p.name == "cpu-quick--cpu-x86-avx2--my-host-1.jsonl"
    assert safe_name("///") == "unnamed"


def test_summary_frame_counts_per_family_engine_model():
    recs = [
        make_record(0),
        make_record(1, status="failed", error="boom"),
        make_record(2, origin="imported", hardware_family="", model_id="x"),
    ]
    df = summary_frame(recs)
    row = df[(df.model == "smollm2-135m")].iloc[0]
    assert (row.ok, row.failed, row.skipped, row.measured, row.total) == (1, 1, 0, 2, 2)
    other = df[df.model == "x"].iloc[0]
    assert other.family == "(unknown)" and other.imported == 1
    assert summary_frame([]).empty


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("extra", "not a dict", "extra is not a JSON object"),
        ("prefill_samples_tok_s", 5, "prefill_samples_tok_s is not a list of numbers"),
        ("decode_samples_tok_s", ["fast"], "decode_samples_tok_s is not a list of numbers"),
    ],
)
def test_malformed_record_is_a_record_error_naming_its_line(tmp_path, key, value, message):
    """A record of the wrong shape stops ls / resume with FILE:LINE, not a TypeError / AttributeError."""
    path = runs_dir(tmp_path) / "a.jsonl"
    append_records(path, [make_record(0)])
    good = path.read_text()
    bad = json.loads(good)
    bad[key] = value
    path.write_text(good + json.dumps(bad) + "\n")
    with pytest.raises(RecordError, match=rf"a.jsonl:2: {message}"):
        load_all_records(tmp_path)
    with pytest.raises(RecordError, match=rf"a.jsonl:2: {message}"):
        done_point_keys(tmp_path)


def test_make_record_covers_schema():
    names = {f.name for f in dataclasses.fields(RunRecord)}
    assert {"record_id", "status", "extra"} <= names


def _append_many(path: str, start: int, n: int) -> None:  # runs in a child process
    for i in range(start, start + n):
        append_records(path, [make_record(i)])


def test_concurrent_appends_from_several_processes_lose_nothing(tmp_path):
    import multiprocessing as mp

    from harness.records import read_records

    path = str(tmp_path / "runs" / "x.jsonl")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(path, k * 25, 25)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    ids = [r.record_id for r in read_records(path)]
    assert sorted(ids) == sorted(f"r{i}" for i in range(100))  # every append survived, none twice
