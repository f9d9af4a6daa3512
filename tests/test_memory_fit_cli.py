"""``python -m harness memory-fit``: llama.cpp's own memory-fit pass for one full-depth model next to the
estimator (harness.memfit).  Bad input exits 2 with one line; the pass itself needs llama-cpp-python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "harness", "memory-fit", "--cache", str(tmp_path / "models"), *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--model", "qwen3-0.6", "--ctx", "4096"), "qwen3-0.6b"),  # the nearest catalog ids
        (("--model", "qwen3-0.6b", "--ctx", "0"), "--ctx 0"),
        (("--model", "qwen3-0.6b", "--ctx", "4096", "--n-seq", "0"), "--n-seq 0"),
        (("--model", "OLMO2", "--ctx", "4096"), "architecture 'olmo2'"),  # no GGUF writer for it
    ],
)
def test_bad_input_exits_2_with_one_line(args, says, unwritable_config, tmp_path):
    r = _run(*[str(unwritable_config) if a == "OLMO2" else a for a in args], tmp_path=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and says in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.llama
def test_memory_fit_of_a_full_depth_model_against_the_estimator(tmp_path):
    pytest.importorskip("llama_cpp")
    r = _run("--model", "qwen3-0.6b", "--ctx", "8192", "--fa", "off", "--format", "json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    eng, est = out["llama_cpp"], out["estimator"]
    assert "memory-fit pass" in out["engine"] and out["n_ctx"] == 8192 and out["flash_attn"] is False
    assert eng["weights_bytes"] == est["weights_bytes"]  # F16 weights: exact tensor bytes
    assert eng["kv_bytes"] == pytest.approx(est["kv_bytes"], abs=5243)  # 28 layers x 8192 cells, MiB log
    assert eng["compute_bytes"] == pytest.approx(est["compute_bytes"], rel=0.05)
    assert not list((tmp_path / "models").glob("*.part"))
    table = _run("--model", "qwen3-0.6b", "--ctx", "8192", tmp_path=tmp_path)
    assert table.returncode == 0 and table.stdout.lstrip().startswith("qwen3-0.6b at 8,192 cells")
