"""Records are validated on read and before a write (issue 17, item 7): types, finite numbers, ranges from the
unit in each name, enumerations, the timestamp; bad bytes and bad lines name FILE:LINE; exact duplicates by
record_id are counted once.  The rules come from the RunRecord annotations, so new fields are covered too."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records import (
    Deduplicator,
    RecordError,
    RunRecord,
    append_records,
    check_record,
    check_value,
    field_rules,
    iter_records,
    record_from_dict,
    record_to_dict,
    scan_records,
)
from harness.store import iter_all_records, runs_dir
from tests.test_store import make_record
from tests.test_sweep import DOUBLE_CMD

REPO = Path(__file__).resolve().parents[1]


def _raw(**change) -> dict:
    raw = record_to_dict(make_record(0, decode_tok_s=12.5, weights_bytes=10**9))
    raw.update(change)
    return raw


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"decode_tok_s": "fast"}, "decode_tok_s='fast' is not a finite number"),
        ({"decode_tok_s": float("nan")}, "decode_tok_s=nan is not a finite number"),
        ({"prefill_tok_s": float("inf")}, "prefill_tok_s=inf is not a finite number"),
        ({"decode_tok_s": -1.0}, "decode_tok_s=-1.0 is negative"),
        ({"decode_tok_s": 1e12}, "is above 1e+09, not a possible value"),
        ({"n_ctx": -512}, "n_ctx=-512 is negative"),
        ({"weights_bytes": 1e30}, "weights_bytes=1e+30 is not an integer"),
        ({"weights_bytes": 10**30}, "weights_bytes=1000000000000000000000000000000 is above"),
        ({"weights_bytes": 2.5}, "weights_bytes=2.5 is not an integer"),
        ({"batch": True}, "batch=True is not an integer"),
        ({"n_devices": None}, "n_devices=None is null"),
        ({"synthetic_weights": "yes"}, "synthetic_weights='yes' is not true or false"),
        ({"flash_attn": 1}, "flash_attn=1 is not true or false"),
        ({"host": 7}, "host=7 is not a string"),
        ({"status": "great"}, "status 'great' not in"),
        ({"origin": "scraped"}, "origin 'scraped' not in"),
        ({"n_gpu_layers": -2}, "n_gpu_layers=-2 is below -1"),
        ({"ttft_s": -0.5}, "ttft_s=-0.5 is negative"),
        ({"timestamp_utc": "notatime"}, "timestamp_utc: 'notatime' is not an ISO-8601 date-time"),
        ({"timestamp_utc": "2026-01-01T00:00:00"}, "has no time zone"),
        ({"decode_samples_tok_s": ["fast"]}, "decode_samples_tok_s is not a list of numbers"),
        ({"decode_samples_tok_s": [1.0, -2.0]}, "impossible sample -2.0"),
        ({"extra": {"a": {"b": [1, float("nan")]}}}, "extra holds a number that is not finite at .a.b[1]"),
        ({"extra": []}, "extra is not a JSON object"),
    ],
)
def test_impossible_field_values_are_record_errors_naming_the_field(change, message):
    with pytest.raises(RecordError) as info:
        record_from_dict(_raw(**change), "runs/a.jsonl:7")
    assert str(info.value).startswith("runs/a.jsonl:7: ") and message in str(info.value), str(info.value)


def test_valid_edge_values_pass():
    rec = record_from_dict(
        _raw(n_gpu_layers=-1, n_ctx=0, timestamp_utc="2026-01-01T00:00:00+00:00", prefill_tok_s=3)
    )
    assert rec.n_gpu_layers == -1 and rec.prefill_tok_s == 3


def test_rules_come_from_the_annotations_so_new_fields_are_validated_too():
    """A schema bump (e.g. new serving fields) needs no validator change: types from the annotation, ranges
    from the unit in the name or from field metadata."""

    @dataclasses.dataclass(frozen=True)
    class Bumped(RunRecord):
        tpot_s: float | None = None
        kv_pool_bytes: int | None = None
        output_tok_s_p99: float | None = None
        concurrency: int | None = None
        request_rate: float | None = dataclasses.field(default=None, metadata={"range": (0.001, 1e6)})
        phases: tuple[str, ...] = ()

    rules = field_rules(Bumped)
    assert check_value(rules["tpot_s"], -0.01)[0] == "is negative"
    assert check_value(rules["tpot_s"], float("nan"))[0] == "is not a finite number"
    assert check_value(rules["kv_pool_bytes"], 1.5)[0] == "is not an integer"
    assert check_value(rules["kv_pool_bytes"], 2**60)[0].startswith("is above")
    assert check_value(rules["output_tok_s_p99"], "fast")[0] == "is not a finite number"
    assert check_value(rules["concurrency"], -3)[0] == "is negative"  # no unit rule: nothing is negative
    assert check_value(rules["request_rate"], 0.0)[0] == "is below 0.001"
    assert check_value(rules["phases"], ["pp", 3])[0] == "is not a list"
    assert check_value(rules["phases"], ["pp", "tg"]) == ("", ("pp", "tg"))
    assert check_value(rules["tpot_s"], None) == ("", None)


def test_an_annotation_the_validator_does_not_know_fails_at_definition():
    @dataclasses.dataclass(frozen=True)
    class Odd:
        x: int | str

    with pytest.raises(TypeError, match=r"Odd.x: annotation"):
        field_rules(Odd)


def test_append_refuses_an_invalid_record_and_writes_nothing(tmp_path):
    path = tmp_path / "runs" / "a.jsonl"
    append_records(path, [make_record(0)])
    before = path.read_bytes()
    bad = make_record(1, decode_tok_s=float("nan"))
    with pytest.raises(RecordError, match="decode_tok_s=nan"):
        append_records(path, [make_record(2), bad])
    assert path.read_bytes() == before
    assert check_record(make_record(3)).record_id == "r3"


def _write_lines(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _line(rec: RunRecord) -> bytes:
    return json.dumps(record_to_dict(rec), sort_keys=True).encode()


def test_non_utf8_byte_is_an_error_line_and_reading_goes_on(tmp_path):
    good = _line(make_record(1))
    bad = _line(make_record(2)).replace(b'"host": "h"', b'"host": "h\xff"')
    path = _write_lines(tmp_path / "a.jsonl", [good, bad, b"{not json", _line(make_record(3))])
    lines = list(scan_records(path))
    assert [ln.line for ln in lines] == [1, 2, 3, 4]
    assert lines[1].record is None and lines[1].error.startswith("not UTF-8 text (byte 0xff at column")
    assert lines[2].message == f"{path}:3: not valid JSON (Expecting property name enclosed in double quotes)"
    assert lines[3].record.record_id == "r3"
    with pytest.raises(RecordError, match=r"a.jsonl:2: not UTF-8 text"):
        list(iter_records(path))


def test_exact_duplicates_are_dropped_and_conflicting_ids_are_errors(tmp_path):
    a = _write_lines(tmp_path / "a.jsonl", [_line(make_record(1)), _line(make_record(2))])
    b = _write_lines(tmp_path / "b.jsonl", [_line(make_record(1)), _line(make_record(2, host="other"))])
    dedup = Deduplicator()
    lines = [ln for p in (a, b) for ln in dedup(scan_records(p))]
    assert [ln.record.record_id for ln in lines if ln.record] == ["r1", "r2"]
    assert dedup.duplicates == [(f"{b}:1", f"{a}:1", "r1")]
    (conflict,) = [ln for ln in lines if ln.record is None]
    assert conflict.message == f"{b}:2: record_id r2 is also at {a}:2 with different content"


def test_store_reader_counts_a_duplicated_line_once(tmp_path):
    path = runs_dir(tmp_path) / "a.jsonl"
    append_records(path, [make_record(1), make_record(2)])
    path.write_bytes(path.read_bytes() + path.read_bytes().splitlines(keepends=True)[0])
    assert [r.record_id for r in iter_all_records(tmp_path)] == ["r1", "r2"]


def harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_ls_lists_valid_records_and_exits_2_naming_the_first_bad_line(tmp_path):
    path = runs_dir(tmp_path) / "a.jsonl"
    good, dup = _line(make_record(1)), _line(make_record(2))
    bad_type = json.dumps({**record_to_dict(make_record(3)), "decode_tok_s": "fast"}).encode()
    bad_ctx = json.dumps({**record_to_dict(make_record(4)), "n_ctx": -1}).encode()
    _write_lines(path, [good, dup, bad_type, dup, b"\xff\xfe", bad_ctx])
    res = harness("ls", "--results", str(tmp_path))
    assert res.returncode == 2, res
    assert (
        res.stderr
        == f"error: {path}:3: decode_tok_s='fast' is not a finite number (and 2 more bad line(s))\n"
    )
    assert "2 records in 1 files" in res.stdout and "1 duplicate line(s) counted once" in res.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["consistency"],
        # the damaged store stops the sweep before anything is measured (a test double stands in anyway)
        ["measure", "--plan", str(REPO / "plans" / "cpu-quick.toml"), "--no-progress"],
    ],
    ids=["ls", "consistency", "measure"],
)
def test_a_non_utf8_record_file_is_one_line_exit_2_naming_file_and_line(tmp_path, argv):
    path = _write_lines(runs_dir(tmp_path) / "a.jsonl", [_line(make_record(1)), b'{"record_id": "\xc3\x28"}'])
    env = {**os.environ, "PYTHONPATH": str(REPO), "FITBENCH_RUNNER_CMD": DOUBLE_CMD}
    res = subprocess.run([sys.executable, "-m", "harness", *argv, "--results", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert res.returncode == 2, res
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert "Traceback" not in res.stderr and len(errors) == 1, res.stderr
    assert f"{path}:2: not UTF-8 text (byte 0xc3 at column 16)" in errors[0]


def test_runner_values_no_record_may_hold_make_a_failed_point():
    from harness.provenance import records_from_measurement
    from runners.base import Measurement, Test
    from tests.test_provenance import ctx

    m = Measurement(engine="llama.cpp", engine_version="x", build_info="", backend="CPU",
                    tests=(Test("tg", 16, 0, 1, (1.0,), float("nan"), 0.0),))  # fmt: skip
    recs = records_from_measurement(ctx(), m)
    assert recs and all(r.status == "failed" for r in recs)
    assert (
        "runner returned an impossible measurement" in recs[0].error and "decode_tok_s=nan" in recs[0].error
    )
