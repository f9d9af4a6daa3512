"""The estimator's outputs are unchanged by refactors: reports, errors, fit/list and predict against
tests/golden/out (see tests/golden/golden.py; regenerate there when a change is meant to alter numbers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("golden", Path(__file__).parent / "golden" / "golden.py")
golden = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(golden)


def test_normalise_replaces_only_the_time():
    text = '"generated_utc": "2026-12-01T10:22:47+00:00", created 2026-11-29T18:48:31Z, x 10:22:47'
    assert golden.normalise(text) == '"generated_utc": "<time>", created 2026-11-29T18:48:31Z, x 10:22:47'


def test_golden_outputs_identical():
    problems = golden.check()
    assert not problems, "\n".join(problems)


def test_no_golden_output_is_a_traceback():
    """A golden file records behaviour, so a crash must never be recorded as the expected output."""
    crashed = [p.name for p in golden.OUT.glob("*") if "Traceback (most recent call last)" in p.read_text()]
    assert not crashed, crashed
