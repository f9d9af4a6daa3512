"""tools/reliability.py (``make reliability``): kill / resume trials count points, duplicates and torn lines.
Run here with the sweep tests' test double (seconds); ``make reliability`` runs it on real llama.cpp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_kill_resume_trials_with_the_test_double(tmp_path):
    p = subprocess.run(
        [sys.executable, "tools/reliability.py", "--double", "--trials", "3", "--max-delay", "2",
         "--results", str(tmp_path / "r")],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "points: 6 planned, 6 recorded" in p.stdout
    assert "duplicates: 0; torn lines: 0; temporaries left: 0" in p.stdout and "verdict: ok" in p.stdout


def test_counts_a_torn_line_and_a_duplicate(tmp_path):
    import json

    from harness.records import record_to_dict
    from tests.test_store import make_record

    sys.path.insert(0, str(REPO / "tools"))
    from reliability import count

    runs = tmp_path / "runs"
    runs.mkdir()
    line = json.dumps(record_to_dict(make_record(0)), sort_keys=True)
    twin = json.dumps(record_to_dict(make_record(0, record_id="r-twin")), sort_keys=True)  # same point, again
    (runs / "a.jsonl").write_text(line + "\n" + twin + "\n" + line[: len(line) // 2] + "\n")
    (runs / ".a.jsonl.123.x.tmp").write_text("")
    c = count(tmp_path)
    assert c["torn"] == 1 and c["duplicates"] == 1 and c["temporaries"] == 1
