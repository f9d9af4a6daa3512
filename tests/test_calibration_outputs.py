"""`python -m calibration`: outputs never destroy their target or end half-written; an empty or damaged runs/
is bad input (exit 2), never "passed (0 records)"; duplicates and impossible values stay out of the fit
(issue 17: items 1, 3, 7)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.__main__ import main
from calibration.dataset import load_dataset
from harness.records import record_to_dict
from tests.calibration_gen import base_record, generate, write_records
from tests.test_safe_files import special

REPO = Path(__file__).resolve().parents[1]
DEC = {"nvidia-ampere": {"bw_eff": 0.62, "t_layer_s": 2e-5, "t_fixed_s": 4e-4}}
DEVICES = {"rtx-3090": "nvidia-ampere", "a100-80gb-pcie": "nvidia-ampere"}


@pytest.fixture()
def results(tmp_path):
    write_records(tmp_path / "runs" / "gen.jsonl", generate(DEVICES, DEC, quants=("Q4_0",)))
    return tmp_path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_fit_out_that_is_not_a_regular_file_is_refused_and_left_alone(results, capsys, kind):
    out = special(results, kind)  # a device: /dev/full's node, which the bug replaced with a regular file
    before = os.lstat(out)
    assert main(["fit", "--results", str(results), "--out", str(out)]) == 2
    assert "not a regular file; refusing to replace it" in _one_error_line(capsys)
    after = os.lstat(out)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)


def test_fit_out_symlink_updates_the_real_file(results, tmp_path_factory):
    real = tmp_path_factory.mktemp("elsewhere") / "coefficients.json"
    real.write_text("{}\n")
    link = results / "coefficients.json"
    link.symlink_to(real)
    assert main(["fit", "--results", str(results)]) == 0
    assert link.is_symlink() and json.loads(real.read_text())["schema_version"] == 2


@pytest.mark.parametrize("command", ["fit", "check"])
def test_empty_runs_is_exit_2_and_writes_nothing(tmp_path, capsys, command):
    (tmp_path / "runs").mkdir()
    assert main([command, "--results", str(tmp_path)]) == 2
    assert "no usable records under" in _one_error_line(capsys)
    assert not (tmp_path / "coefficients.json").exists()


def test_only_unusable_records_is_exit_2_and_keeps_the_old_coefficients(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    bad = {**record_to_dict(base_record(record_id="x")), "weights_bytes": 1e30}
    (runs / "a.jsonl").write_bytes(json.dumps(bad).encode() + b"\n" + b"\xff\xfe garbage\n")
    (tmp_path / "coefficients.json").write_text('{"old": true}\n')
    assert main(["fit", "--results", str(tmp_path)]) == 2
    assert "(2 left out)" in _one_error_line(capsys)
    assert (tmp_path / "coefficients.json").read_text() == '{"old": true}\n'


def test_duplicates_count_once_and_impossible_values_stay_out(results):
    path = results / "runs" / "gen.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    huge = {**json.loads(lines[0]), "record_id": "huge", "weights_bytes": 1e30}
    path.write_bytes(
        b"".join(lines) + lines[0] + lines[1] + json.dumps(huge).encode() + b"\n" + b"\xc3\x28\n"
    )
    ds = load_dataset(results)
    assert len(ds.records) == len(lines)  # the two repeated lines are counted once
    reasons = {r.line: r.reason for r in ds.rejected}
    n = len(lines)
    assert reasons[n + 1].startswith(f"duplicate of {path}:1") and reasons[n + 2].startswith(
        f"duplicate of {path}:2"
    )
    assert "weights_bytes=1e+30 is not an integer" in reasons[n + 3]
    assert reasons[n + 4].startswith("not UTF-8 text")
    clean = load_dataset(_copy_without_extras(results, lines))
    assert ds.input_hash == clean.input_hash  # the fit sees exactly the clean records


def _copy_without_extras(results: Path, lines: list[bytes]) -> Path:
    other = results / "clean"
    write_records(other / "runs" / "gen.jsonl", [])
    (other / "runs" / "gen.jsonl").write_bytes(b"".join(lines))
    return other


_FULL_DISK_FIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))  # the new coefficients file cannot grow past 64 bytes
from calibration.__main__ import main
sys.exit(main(["fit", "--results", sys.argv[1]]))
"""


def test_fit_on_a_full_disk_keeps_the_old_coefficients_and_says_so(results):
    old = '{"old": true}\n'
    (results / "coefficients.json").write_text(old)
    res = subprocess.run([sys.executable, "-c", _FULL_DISK_FIT, str(results)], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert res.stderr == f"error: cannot write {results / 'coefficients.json'}: File too large\n", res.stderr
    assert (results / "coefficients.json").read_text() == old
    assert not [p for p in results.iterdir() if p.name.endswith(".tmp")]
