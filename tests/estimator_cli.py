"""``python -m estimator`` in a child process, for the tests that check what a user's exact command prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, columns: int = 100) -> subprocess.CompletedProcess:
    """Run ``python -m estimator ARGS`` from the repository root (text output ``columns`` wide)."""
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "estimator", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
    )


def cli(command: str, *extra: str, columns: int = 100) -> subprocess.CompletedProcess:
    """``run`` of a command line written as one string (split at spaces), plus ``extra`` arguments."""
    return run(*command.split(), *extra, columns=columns)


def cli_json(command: str, *extra: str):
    """The JSON a command prints; AssertionError with its stderr when it fails."""
    p = cli(command, *extra)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)
