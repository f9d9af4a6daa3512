"""`python -m harness import`: targets that are not regular files are refused and left alone, symlinks are
written through, inputs are never read from a device or FIFO, timestamps are ISO-8601, published hardware ids
must be in the catalog, and numbering the rows of a big file is linear (issue 17: items 1, 7, 8)."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.importers import ImportFormatError, _json_values_with_lines, import_file
from harness.records import read_records
from tests.test_safe_files import FULL_DEV, NULL_DEV, ZERO_DEV, special

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "reference"
LB_JSON = SHARED / "fixtures" / "llama-bench-cpu.json"
PUBLISHED = SHARED / "published" / "published_measurements.csv"

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/reference not beside the repo")


def harness_import(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "harness", "import", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def _one_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, res
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    return res.stderr


@pytest.mark.parametrize("kind", ["fifo", "null-device", "full-device"])
def test_out_that_is_not_a_regular_file_is_refused_quickly_and_left_alone(tmp_path, kind):
    """`--out /dev/null` as root would have destroyed /dev/null; `--out /dev/full` hung reading zeros."""
    # a FIFO blocked the old writer reading it; devices were replaced by a regular file (or read forever)
    out = special(tmp_path, kind.split("-")[-1], "out.jsonl", NULL_DEV if kind == "null-device" else FULL_DEV)
    before = os.lstat(out)
    res = harness_import(str(LB_JSON), "--out", str(out))
    assert "not a regular file; refusing to replace it" in _one_error(res)
    after = os.lstat(out)
    assert (stat.S_IFMT(after.st_mode), after.st_ino, after.st_rdev) == (
        stat.S_IFMT(before.st_mode), before.st_ino, before.st_rdev)  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["out.jsonl"]


def test_out_symlink_appends_to_the_real_file(tmp_path):
    real = tmp_path / "store" / "real.jsonl"
    real.parent.mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    res = harness_import(str(LB_JSON), "--out", str(link), "--hardware", "ryzen-9-7950x")
    assert res.returncode == 0, res.stderr
    assert link.is_symlink() and len(read_records(real)) == len(json.loads(LB_JSON.read_text()))
    again = harness_import(str(LB_JSON), "--out", str(link), "--hardware", "ryzen-9-7950x")
    assert "imported 0" in again.stdout and link.is_symlink()  # the link's target was read for the ids


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_input_that_is_a_fifo_or_device_is_refused_without_reading(tmp_path, kind):
    src = special(tmp_path, kind, "in.json", ZERO_DEV)
    res = harness_import(str(src), "--results", str(tmp_path / "r"))
    assert "refusing to read it" in _one_error(res)


def test_non_utf8_input_names_its_line(tmp_path):
    src = tmp_path / "lb.jsonl"
    rows = [json.dumps(o).encode() for o in json.loads(LB_JSON.read_text())]
    src.write_bytes(rows[0] + b"\n" + rows[1].replace(b"AMD", b"AM\xe9") + b"\n")
    res = harness_import(str(src), "--results", str(tmp_path / "r"))
    assert "lb.jsonl:2: not UTF-8 text (byte 0xe9)" in _one_error(res)


@pytest.mark.parametrize("stamp", ["notatime", "2026-13-01T00:00:00Z", "2026-01-01", "2026-01-01T10:00:00"])
def test_timestamp_must_be_iso8601_with_a_zone(tmp_path, stamp):
    vllm = SHARED / "fixtures" / "vllm-bench-latency-cpu.json"  # carries no time of its own
    res = harness_import(str(vllm), "--timestamp", stamp, "--results", str(tmp_path))
    assert _one_error(res).startswith(f"error: --timestamp '{stamp}'")
    assert not (tmp_path / "runs").exists()


def test_valid_timestamp_is_stored_as_given(tmp_path):
    vllm = SHARED / "fixtures" / "vllm-bench-latency-cpu.json"
    res = harness_import(str(vllm), "--timestamp", "2026-02-03T04:05:06+00:00", "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    (rec,) = read_records(next((tmp_path / "runs").glob("*.jsonl")))
    assert rec.timestamp_utc == "2026-02-03T04:05:06+00:00"


def _published(tmp_path: Path, hw_ids: list[str], names: list[str | None] | None = None) -> Path:
    """The first rows of the published CSV with these hardware ids (and hardware names where given)."""
    with PUBLISHED.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [next(reader) for _ in range(len(hw_ids))]
    for row, hw in zip(rows, hw_ids, strict=True):
        row["hardware_id"] = hw
    for row, name in zip(rows, names or (), strict=False):
        if name is not None:
            row["hardware_name"] = name
    path = tmp_path / "pub.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_unknown_published_hardware_id_is_an_error_with_the_nearest_ids(tmp_path):
    src = _published(tmp_path, ["rtx-4090", "h100-sxm-80gbx"])
    res = harness_import(str(src), "--results", str(tmp_path / "r"))
    err = _one_error(res)
    assert "pub.csv:3: hardware_id: unknown hardware 'h100-sxm-80gbx'; closest: h100-80gb-sxm" in err
    assert not (tmp_path / "r").exists()


def test_published_rows_without_hardware_are_imported_with_a_warning(tmp_path):
    src = _published(tmp_path, ["rtx-4090", ""], names=[None, "a GPU (model not stated)"])
    res = harness_import(str(src), "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith("warning: 1 of 2 records have no hardware family")


def test_published_device_names_reach_their_catalog_ids_through_aliases(tmp_path):
    """A row with no hardware_id keeps the source's device name; the catalog's documented aliases
    (tools/catalog/hardware_aliases.csv) map the names of Argonne's tables and the scoreboard's V100 to
    catalog devices on import."""
    names = {"Nvidia A100 GPU": "a100-40gb-sxm", "Nvidia H100 GPU": "h100-80gb-sxm",
             "AMD MI250 GPU": "instinct-mi250", "Habana Gaudi2": "gaudi-2", "Nvidia GH200 GPU": "gh200-96gb",
             "NVIDIA Tesla V100 32 GB": "tesla-v100-pcie-32gb"}
    src = _published(tmp_path, [""] * len(names), names=list(names))
    res = harness_import(str(src), "--results", str(tmp_path / "r"))
    assert res.returncode == 0 and "no hardware family" not in res.stderr, res.stderr
    recs = read_records(next((tmp_path / "r" / "runs").glob("*.jsonl")))
    assert [r.hardware_id for r in recs] == list(names.values())
    assert all(r.hardware_family for r in recs)


def test_a_published_device_name_without_alias_maps_when_its_tokens_name_one_device(tmp_path):
    """A scoreboard's "NVIDIA GeForce RTX 3060 Ti" has no alias; its tokens name one catalog device, which the
    record takes (extra.mapped says how); a name that fits several devices stays unmapped with the warning."""
    names = ["NVIDIA GeForce RTX 3060 Ti", "AMD Radeon RX 6800 XT", "NVIDIA TITAN V",
             "NVIDIA GeForce RTX 3080", "Apple M3 Max"]
    src = _published(tmp_path, [""] * len(names), names=list(names))
    res = harness_import(str(src), "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    # the 10 or 12 GB 3080?  the 30- or the 40-core M3 Max (a person typing "m3 max" gets the full chip)?
    assert res.stderr.startswith("warning: 2 of 5 records have no hardware family")
    recs = read_records(next((tmp_path / "r" / "runs").glob("*.jsonl")))
    assert [r.hardware_id for r in recs] == ["rtx-3060-ti", "rx-6800-xt", "titan-v", "", ""]
    assert "token match" in recs[0].extra["mapped"]["hardware_id"] and "mapped" not in recs[3].extra


class _CountingStr(str):
    """A str that adds up how many characters its ``count`` calls scan."""

    scanned = 0

    def count(self, sub, start=0, end=None):  # type: ignore[override]
        stop = len(self) if end is None else end
        _CountingStr.scanned += max(0, stop - start)
        return super().count(sub, start, end)


def test_numbering_the_rows_of_a_json_array_scans_the_text_once():
    """The 100k-row import was quadratic: a text.count from the start of the file per row.  Counting the
    characters scanned (not seconds) shows it linear without a flaky timing."""
    rows = json.loads(LB_JSON.read_text())
    text = _CountingStr(json.dumps([rows[i % len(rows)] for i in range(2000)], indent=2))
    _CountingStr.scanned = 0
    values = _json_values_with_lines(text, Path("x.json"))
    assert len(values) == 2000
    assert _CountingStr.scanned <= len(text)  # quadratic scanning would be ~1000x the text
    lines = str(text).splitlines()
    assert all(lines[ln - 1].strip() == "{" for ln, _ in values)  # and the numbers are right
    assert values[1][0] - values[0][0] == values[2][0] - values[1][0] > 1


def test_import_file_refuses_a_folder(tmp_path):
    with pytest.raises(ImportFormatError, match="is a folder, not a regular file"):
        import_file(tmp_path)
