"""`python -m harness` end to end: bad input exits 2 with one line; ls; import; a real llama.cpp sweep."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from harness.store import iter_all_records

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "reference"


def run(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ("measure", "--plan", "/nonexistent.toml"),
        ("measure",),
        ("import", "/nonexistent.json"),
        ("import", "x.json", "--format", "yaml"),
        ("frobnicate",),
        ("check-plan", "--plan", "/nonexistent.toml"),
        ("ls", "--results", "/nonexistent-results"),
    ],
)
def test_bad_input_exits_2_with_one_line(args):
    res = run(*args)
    assert res.returncode == 2, res
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_import_into_unwritable_target_exits_2(tmp_path):
    if not SHARED.is_dir():
        pytest.skip("../shared/reference not beside the repo")
    fixture = SHARED / "fixtures" / "llama-bench-cpu.json"
    res = run("import", str(fixture), "--out", str(tmp_path))  # a folder, not a file
    assert res.returncode == 2 and res.stderr.startswith("error: cannot write"), res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_measure_bad_plan_runs_nothing(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text('engines = ["llama.cpp"]\nmodels = ["smollm2-135m"]\nquants = ["Q9_K"]\n')
    res = run("measure", "--plan", str(plan), "--results", str(tmp_path / "r"))
    assert res.returncode == 2 and "quants[0] 'Q9_K'" in res.stderr
    assert not (tmp_path / "r").exists()


def test_ls_empty_and_after_import(tmp_path):
    res = run("ls", "--results", str(tmp_path))
    assert res.returncode == 0 and "no records" in res.stdout
    if not SHARED.is_dir():
        pytest.skip("../shared/reference not beside the repo")
    fixture = SHARED / "fixtures" / "llama-bench-cpu.json"
    imp = run("import", str(fixture), "--results", str(tmp_path), "--hardware", "ryzen-9-7950x")
    assert imp.returncode == 0, imp.stderr
    res = run("ls", "--results", str(tmp_path))
    assert res.returncode == 0 and "cpu-x86-avx512" in res.stdout and "llama.cpp" in res.stdout
    assert run("import", str(fixture), "--hardware", "no-such-gpu").returncode == 2


@pytest.mark.llama
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")
def test_real_llama_cpp_sweep_records_validate(tmp_path):
    """A real llama.cpp measurement of a tiny synthetic proxy through the whole harness (no test double)."""
    plan = tmp_path / "tiny.toml"
    plan.write_text(
        'name = "tiny"\nengines = ["llama.cpp"]\nmodels = [{ id = "smollm2-135m", layers = 2 }]\n'
        'quants = ["Q8_0"]\ncontexts = [256]\nprompt_lengths = [32]\ngen_lengths = [8]\ndepths = [0]\n'
        "threads = [2]\nrepetitions = 3\ntimeout_s = 240\n"
    )
    results = tmp_path / "results"
    res = run("measure", "--plan", str(plan), "--results", str(results), "--cache", str(tmp_path / "cache"),
              "--no-progress")  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    recs = list(iter_all_records(results))  # validates every line against the schema
    assert len(recs) == 2, [r.error for r in recs]
    assert all(r.status == "ok" and r.synthetic_weights and r.n_layers_measured == 2 for r in recs)
    assert all(r.n_layers_real == 30 and r.weights_bytes and r.kv_bytes for r in recs)
    pp = next(r for r in recs if r.n_prompt == 32)
    assert pp.prefill_tok_s > 0 and len(pp.prefill_samples_tok_s) == 3
    again = run("measure", "--plan", str(plan), "--results", str(results), "--resume", "--no-progress")
    assert again.returncode == 0 and "1 already recorded" in again.stderr
    assert len(list(iter_all_records(results))) == 2
