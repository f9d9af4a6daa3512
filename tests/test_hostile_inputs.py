"""Every hostile or careless input of tests/hostile_cases.py has its expected clean outcome (issue 14): a
one-line error with exit 2, or a valid result — never a traceback, a hang or a silent wrong answer."""

from __future__ import annotations

import pytest

from tests.hostile_cases import CASES, run_all


@pytest.mark.slow
def test_every_hostile_case_is_clean():
    results = run_all()
    bad = [f"{kind}: {case.name}: {detail}" for case, kind, detail in results if kind != "clean"]
    assert not bad, "\n".join(bad)
    assert len(results) == len(CASES) > 100
