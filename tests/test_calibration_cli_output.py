"""What `make calibrate` (`python -m calibration fit --report`) prints: how many records were left out with
their causes grouped (not one line per record), and, last, the gate table of `python -m calibration check`
from the same fit."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from calibration.dataset import Rejection
from calibration.leftout import group
from tests.calibration_gen import generate, write_records

REPO = Path(__file__).resolve().parents[1]
DEC = {"nvidia-ampere": {"bw_eff": 0.62, "t_layer_s": 2e-5, "t_fixed_s": 4e-4}}
DEVICES = {"rtx-3090": "nvidia-ampere", "a100-80gb-pcie": "nvidia-ampere"}


def test_equal_causes_group_and_keep_an_example():
    rej = [
        Rejection("a.jsonl", 3, "r1", "features: device 'tesla-k80' has no datasheet TFLOPS; no prefill"),
        Rejection("a.jsonl", 9, "r2", "features: device 'adreno-840' has no datasheet TFLOPS; no prefill"),
        Rejection("b.jsonl", 1, "r3", "decode_tok_s given but n_gen is 0 (generated length not stated)"),
        Rejection("b.jsonl", 2, "r4", "decode_tok_s given but n_gen is 0 (generated length not stated)"),
        Rejection("b.jsonl", 5, "r5", "decode_tok_s given but n_gen is 0 (generated length not stated)"),
        Rejection("b.jsonl", 7, "r6", "features: quant 'Q6_0': unknown quant 'Q6_0'; closest: Q8_0, Q6_K"),
        Rejection("b.jsonl", 8, "r7", "features: quant 'IQ4_KT': unknown quant 'IQ4_KT'; closest: Q4_K_S"),
        Rejection("c.jsonl", 4, "r8", "prefill repetitions disagree 3.3x (max/min of 3 samples > 2)"),
    ]
    causes = group(rej)
    assert [(c.count, c.reason, c.example, c.where) for c in causes] == [
        (3, "decode_tok_s given but n_gen is 0 (generated length not stated)", "", "b.jsonl:1"),
        (2, "features: device … has no datasheet TFLOPS; no prefill", "'tesla-k80'", "a.jsonl:3"),
        (2, "features: quant …: unknown quant …; closest: …", "'Q6_0', Q8_0, Q6_K", "b.jsonl:7"),
        (1, "prefill repetitions disagree 3.3x (max/min of 3 samples > 2)", "", "c.jsonl:4"),
    ]


@pytest.fixture()
def results(tmp_path):
    tmp_path = tmp_path / "results"
    good = generate(DEVICES, DEC, quants=("Q4_0",))
    no_gen = [replace(r, record_id=f"ng{i}", n_gen=0) for i, r in enumerate(good[:3])]  # decode, n_gen 0
    quants = [replace(good[3], record_id="q1", quant="Q6_0"), replace(good[4], record_id="q", quant="IQ4_KT")]
    write_records(tmp_path / "runs" / "gen.jsonl", good + no_gen + quants)
    return tmp_path


def _calibrate(results: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m calibration fit --results results --report` run next to its results folder, as the
    Makefile runs it."""
    argv = [sys.executable, "-m", "calibration", "fit", "--results", results.name, "--report", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(argv, cwd=results.parent, env=env, capture_output=True, text=True, timeout=600)


def test_make_calibrate_groups_the_left_out_records_and_ends_with_the_gate_table(results):
    r = _calibrate(results)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    report = Path(results.name) / "calibration" / "calibration.md"
    assert f"5 records left out, 2 causes (each with its file:line in {report})" in " ".join(out.split())
    table = out[: out.index("Held-out")].splitlines()
    rows = [ln for ln in table if ln.startswith("│") and ln[1:9].strip()]  # each cause's first line
    assert len(rows) == 2
    assert "│       3 │ decode_tok_s given but n_gen is 0" in rows[0]
    assert "results/runs/gen.jsonl:11" in rows[0]
    assert "│       2 │ features: quant …: unknown quant …; closest: …" in rows[1] and "'Q6_0'" in rows[1]
    assert "left out: " not in out and "... and" not in out  # no line per record
    # the gate table of `python -m calibration check`, last
    held, overall = out.index("Held-out absolute percentage error"), out.index("Overall (gate")
    assert out.index("records left out") < held < overall
    assert "decode" in out[overall:] and "threshold" in out[overall:]
    # the report keeps every record with its file:line
    text = (results / "calibration" / "calibration.md").read_text()
    assert all(f"gen.jsonl:{n}" in text for n in (11, 12, 13, 14, 15))


def test_verbose_lists_every_record_left_out(results):
    r = _calibrate(results, "--verbose")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("  ") and "gen.jsonl:" in ln]
    assert len(lines) == 5 and "5 records left out:" in r.stdout
