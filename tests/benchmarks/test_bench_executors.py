"""The Ray executor's overhead over the local one: the same plan swept by both (pytest-benchmark; no timed
assertions).

Run: ``python -m pytest tests/benchmarks/test_bench_executors.py --benchmark-enable -p no:randomly``.

Both sweeps are ``python -m harness measure`` processes on plans/cpu-quick.toml into a fresh results folder.
The Ray one runs against a one-node cluster on this machine (tests/ray_local.py: head only, 1 CPU, so its
points run one after another like the local executor's); the cluster is started once, outside the timing (a
cluster is up before a sweep starts).  What the Ray sweep pays on top: connecting the driver, one Ray worker
process with its own host detection (bandwidth probe) and engine check, a task and a result transfer per
point.

Each round also lands in ``extra_info["rounds"]``: ``wall_s``, ``children_s`` (the points' model builds and
measurements, the same work under both executors, from the records' ``build_s`` / ``child_elapsed_s``),
``other_s`` = wall - children (the executor's own time) and, for Ray, ``cluster_cpu_s`` (CPU seconds the head
node's Ray daemons - GCS, raylet, agents - used during the sweep: what they could take from a measurement on
the same box; the job's worker processes are gone when it is read, their time is in ``other_s``).  On a
shared machine the wall times swing with other load; ``other_s`` and ``cluster_cpu_s`` are the overhead.

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
import time
from pathlib import Path

import psutil
import pytest

from harness.store import iter_all_records

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from ray_local import LocalRayCluster, session_pids  # noqa: E402

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


def _cluster_cpu_s(cluster: LocalRayCluster | None) -> float:
    """CPU seconds (user + system) used so far by every process of the cluster's head node."""
    if cluster is None:
        return 0.0
    total = 0.0
    for pid in session_pids(cluster.nodes["head"].sid):
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _sweep(argv: list[str], env: dict, results: Path, info: dict, cluster: LocalRayCluster | None) -> None:
    """One sweep; ``info`` gets its wall time, the time its points' children took (model builds +
    measurements: the same work for both executors) and the rest (the executor's own time), in seconds."""
    shutil.rmtree(results, ignore_errors=True)
    cpu0, t0 = _cluster_cpu_s(cluster), time.monotonic()
    r = subprocess.run(argv + ["--results", str(results), "--no-progress"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)  # fmt: skip
    wall_s = time.monotonic() - t0
    assert r.returncode == 0 and "4 points run" in r.stderr, r.stderr[-3000:]
    points = {rec.extra["point_index"]: rec.extra for rec in iter_all_records(results)}
    children_s = sum(e.get("child_elapsed_s", 0.0) + e.get("build_s", 0.0) for e in points.values())
    info.setdefault("rounds", []).append({
        "wall_s": round(wall_s, 2), "children_s": round(children_s, 2),
        "other_s": round(wall_s - children_s, 2), "cluster_cpu_s": round(_cluster_cpu_s(cluster) - cpu0, 2),
    })  # fmt: skip


def test_bench_sweep_local(benchmark, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **DOUBLE, "DOUBLE_DIR": str(tmp_path)}
    argv = [sys.executable, "-m", "harness", "measure", "--plan", str(PLAN)]
    benchmark.extra_info["engines"] = "real" if REAL else "test double"
    args = (argv, env, tmp_path / "results", benchmark.extra_info, None)
    benchmark.pedantic(_sweep, args=args, rounds=ROUNDS, iterations=1)


def test_bench_sweep_ray_one_node(benchmark, tmp_path, one_node):
    argv = [sys.executable, "-m", "harness", "measure", "--plan", str(PLAN), "--executor", "ray",
            "--address", one_node.address]  # fmt: skip
    benchmark.extra_info["engines"] = "real" if REAL else "test double"
    args = (argv, one_node.driver_env(), tmp_path / "results", benchmark.extra_info, one_node)
    benchmark.pedantic(_sweep, args=args, rounds=ROUNDS, iterations=1)
