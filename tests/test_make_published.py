"""`make published` imports the untracked published record files when they are missing and again when the
catalog they are mapped through changed (a new model or device alias maps more rows); otherwise it leaves
them alone.  Checked with make's dry run (-n): nothing is imported here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(results: Path, *extra: str) -> str:
    out = subprocess.run(
        ["make", "-n", "published", f"RESULTS={results}", *extra],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return out.stdout


def test_published_files_are_imported_when_missing_and_when_the_catalog_changed(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    out = _dry_run(tmp_path)
    assert out.count("harness import") == 2 and f"rm -f {runs}/published-2.jsonl" in out
    for name in ("published-2.jsonl", "published-serving.jsonl"):
        (runs / name).write_text("")  # newer than the catalog files of the checkout
    assert "harness import" not in _dry_run(tmp_path)
    changed = _dry_run(tmp_path, "-W", "estimator/data/models.json")  # as if the catalog were just rebuilt
    assert changed.count("harness import") == 2
    assert changed.index(f"rm -f {runs}/published-2.jsonl") < changed.index("published_measurements_2.csv")
