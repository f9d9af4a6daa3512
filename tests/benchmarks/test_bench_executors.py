"""The Ray executor's overhead over the local one: the same plan swept by both (pytest-benchmark; no timed
assertions).

Run: ``python -m pytest tests/benchmarks/test_bench_executors.py --benchmark-enable -p no:randomly``.

Both sweeps are ``python -m harness measure`` processes on plans/cpu-quick.toml into a fresh results folder.
The Ray one runs against a one-node cluster on this machine (tests/ray_local.py: head only, 1 CPU, so its
points run one after another like the local executor's); the cluster is started once, outside the timing (a
cluster is up before a sweep starts).  What the Ray sweep pays on top: connecting the driver, one Ray worker
process with its own host detection (bandwidth probe) and engine check, a task and a result transfer per
point.

By default the points run through the sweep TEST DOUBLE (tests/test_sweep.py: measures nothing, returns at
once), so the figures are the executors' own cost per sweep.  ``FITBENCH_BENCH_REAL=1`` runs the real engines
(llama.cpp, vLLM CPU; one round each, ~4 min per sweep on 2 cores) for the relative overhead on a real plan:
docs/cluster.md keeps a measured pair.  Model files come from the shared cache, so run a real local sweep once
first if the cache is cold (otherwise the first sweep also pays the model builds).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from ray_local import LocalRayCluster  # noqa: E402

PLAN = ROOT / "plans" / "cpu-quick.toml"
REAL = os.environ.get("FITBENCH_BENCH_REAL") == "1"
ROUNDS = 1 if REAL else 3
DOUBLE = {} if REAL else {"FITBENCH_RUNNER_CMD": f"{sys.executable} {ROOT / 'tests' / 'test_sweep.py'}"}

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray not installed (.[cluster])"),
]


@pytest.fixture(scope="module")
def one_node(tmp_path_factory):
    env = {**DOUBLE, "DOUBLE_DIR": str(tmp_path_factory.mktemp("double"))} if DOUBLE else {}
    cluster = LocalRayCluster(env)
    try:
        cluster.start_head({})
        yield cluster
    finally:
        cluster.stop()


def _sweep(argv: list[str], env: dict, results: Path) -> None:
    shutil.rmtree(results, ignore_errors=True)
    r = subprocess.run(argv + ["--results", str(results), "--no-progress"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert r.returncode == 0 and "4 points run" in r.stderr, r.stderr[-3000:]


def test_bench_sweep_local(benchmark, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **DOUBLE, "DOUBLE_DIR": str(tmp_path)}
    argv = [sys.executable, "-m", "harness", "measure", "--plan", str(PLAN)]
    benchmark.extra_info["engines"] = "real" if REAL else "test double"
    benchmark.pedantic(_sweep, args=(argv, env, tmp_path / "results"), rounds=ROUNDS, iterations=1)


def test_bench_sweep_ray_one_node(benchmark, tmp_path, one_node):
    argv = [sys.executable, "-m", "harness", "measure", "--plan", str(PLAN), "--executor", "ray",
            "--address", one_node.address]  # fmt: skip
    benchmark.extra_info["engines"] = "real" if REAL else "test double"
    benchmark.pedantic(_sweep, args=(argv, one_node.driver_env(), tmp_path / "results"), rounds=ROUNDS,
                       iterations=1)  # fmt: skip
