"""Executor choice, plan targeting (device_kinds / gpus) and the Ray executor's pure placement rules.

Nothing here needs Ray: the cluster itself is exercised in tests/test_executor_ray.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.executors.ray_cluster import (
    fits,
    gcs_unreachable,
    plan_point_key,
    point_resources,
    why_unplaceable,
)
from harness.plan import PlanError, parse_plan
from harness.provenance import model_fingerprint
from harness.store import point_key

REPO = Path(__file__).resolve().parents[1]

PLAN = """
name = "kinds"
engines = ["llama.cpp"]
models = [{ id = "smollm2-135m", layers = 1 }]
quants = ["Q8_0"]
contexts = [256]
prompt_lengths = [16]
gen_lengths = [4]
"""


def _plan(extra: str = ""):
    return parse_plan(PLAN + extra, "kinds.toml")


def test_device_kinds_are_an_axis_and_enter_the_key_only_when_set():
    plain = _plan().points
    assert len(plain) == 1 and plain[0].device_kind == "" and plain[0].gpus == 0
    body = plain[0].key_body(model_fingerprint(plain[0].model))
    assert "device_kind" not in body and "gpus" not in body  # old plans keep their point keys
    kinds = _plan('device_kinds = ["H100", "L40S"]\ngpus = 1\n').points
    assert [p.device_kind for p in kinds] == ["H100", "L40S"] and all(p.gpus == 1 for p in kinds)
    keys = {plan_point_key(p) for p in kinds} | {plan_point_key(plain[0])}
    assert len(keys) == 3
    assert "@H100" in kinds[0].label


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('device_kinds = ["H 100"]\n', "device_kinds[0]"),
        ("gpus = -1\n", "gpus"),
        ('gpus = "one"\n', "gpus"),
        ("device_kinds = []\n", "empty list"),
    ],
)
def test_bad_targets_are_plan_errors(extra, message):
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _plan(extra)


def test_plan_point_key_ignores_the_host_that_measures():
    p = _plan().points[0]
    body = p.key_body(model_fingerprint(p.model))
    assert point_key("host-a", p.engine, "1", body) != point_key("host-b", p.engine, "1", body)
    assert plan_point_key(p) == plan_point_key(_plan().points[0])  # stable, no host, no engine version


def test_point_resources_and_placement():
    cpu = _plan().points[0]
    gpu = _plan('device_kinds = ["H100"]\ngpus = 2\n').points[0]
    assert point_resources(cpu) == {"CPU": 1.0}
    assert point_resources(gpu) == {"CPU": 1.0, "GPU": 2.0, "accelerator_type:H100": 0.001}
    h100 = {"CPU": 8.0, "GPU": 8.0, "accelerator_type:H100": 1.0}
    mac = {"CPU": 1.0, "accelerator_type:M2": 1.0}
    assert fits(point_resources(cpu), [mac]) and fits(point_resources(gpu), [mac, h100])
    assert not fits(point_resources(gpu), [mac])
    assert not fits(point_resources(gpu), [{"CPU": 8.0, "GPU": 1.0, "accelerator_type:H100": 1.0}])
    why = why_unplaceable(point_resources(gpu), [mac])
    assert "accelerator_type:H100=0.001" in why and "GPU=2" in why and "[M2: 0 GPU, 1 CPU]" in why
    assert "no alive Ray node" in why_unplaceable(point_resources(cpu), [])


def test_gcs_unreachable_answers_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        assert "nothing answers" in gcs_unreachable(f"127.0.0.1:{port}")
        assert "nothing answers" in gcs_unreachable(f"ray://127.0.0.1:{port}")
    assert "not HOST:PORT" in gcs_unreachable("no-port-here")


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "measure", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cluster_options_need_the_ray_executor(tmp_path):
    r = _cli("--plan", "plans/cpu-quick.toml", "--results", str(tmp_path), "--address", "auto")
    assert r.returncode == 2 and "need --executor ray" in r.stderr
    r = _cli("--plan", "plans/cpu-quick.toml", "--results", str(tmp_path), "--executor", "dask")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_ray_executor_without_ray_is_one_line_exit_2(tmp_path):
    # Ray hidden from the interpreter: the extra is missing
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from harness.__main__ import main\n"
        f"sys.exit(main(['measure', '--plan', 'plans/cpu-quick.toml', '--results', r'{tmp_path}', "
        "'--executor', 'ray']))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert r.returncode == 2 and "pip install -e '.[cluster]'" in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("*.jsonl"))


def test_local_executor_does_not_import_ray(tmp_path):
    """The default executor measures a plan (test double) without importing Ray."""
    double = f"{sys.executable} {REPO / 'tests' / 'test_sweep.py'}"
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    code = (
        "import sys\n"
        "from harness.__main__ import main\n"
        f"rc = main(['measure', '--plan', r'{plan}', '--results', r'{tmp_path / 'results'}',\n"
        "            '--no-progress'])\n"
        "assert rc == 0, rc\n"
        "assert 'ray' not in sys.modules, 'the local executor imported ray'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "FITBENCH_RUNNER_CMD": double, "DOUBLE_DIR": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "results" / "runs").glob("kinds--*.jsonl"))
