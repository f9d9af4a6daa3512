"""Sweep isolation, failure records and resume, with a TEST DOUBLE child.

The double is this file run as a script (``python tests/test_sweep.py check|build-model|measure ...``),
registered through ``$FITBENCH_RUNNER_CMD``.  It measures nothing: its Measurement says "TEST DOUBLE" in
build_info.  Its behaviour comes from ``engine_options["double"]``: "ok", "abort" (os.abort -> SIGABRT),
"sleep" (never finishes) or "slow" (sleeps ``engine_options["sleep_s"]`` then succeeds).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOUBLE_CMD = f"{sys.executable} {Path(__file__).resolve()}"


def _double_main(argv: list[str]) -> int:  # runs in the child process
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("--engine")
    p.add_argument("--spec")
    p.add_argument("--out")
    p.add_argument("--model")
    p.add_argument("--quant")
    p.add_argument("--layers")
    p.add_argument("--seed")
    p.add_argument("--cache")
    a = p.parse_args(argv)
    if a.cmd == "check":
        return 0 if os.environ.get("DOUBLE_ENGINE_MISSING") != a.engine else 1
    if a.cmd == "build-model":
        path = Path(os.environ.get("DOUBLE_DIR", "/tmp")) / f"double-{a.model}-{a.quant}.gguf"
        path.write_text("not a model: test double\n")
        print(path)
        return 0
    spec = json.loads(Path(a.spec).read_text())
    opts = spec["engine_options"]
    if os.environ.get("DOUBLE_PID_FILE"):
        Path(os.environ["DOUBLE_PID_FILE"]).write_text(str(os.getpid()))
    behaviour = opts.get("double", "ok")
    print("double child starting", behaviour, file=sys.stderr, flush=True)
    if behaviour == "abort" or (behaviour == "flaky" and os.environ.get("DOUBLE_FAIL")):
        os.abort()
    if behaviour == "sleep":
        time.sleep(3600)
    if behaviour == "slow":
        time.sleep(float(opts.get("sleep_s", 1.0)))
    tests = [
        {"kind": "pp", "n_tokens": n, "n_depth": d, "batch": 1, "samples_tok_s": [100.0, 110.0, 90.0],
         "mean_tok_s": 100.0, "std_tok_s": 10.0}
        for d in spec["depths"] for n in spec["prompt_lengths"]
    ] + [
        {"kind": "tg", "n_tokens": n, "n_depth": d, "batch": 1, "samples_tok_s": [10.0, 10.0, 10.0],
         "mean_tok_s": 10.0, "std_tok_s": 0.0}
        for d in spec["depths"] for n in spec["gen_lengths"]
    ]  # fmt: skip
    m = {"engine": a.engine, "engine_version": "0.0-double", "build_info": "TEST DOUBLE, not a measurement",
         "backend": "CPU", "tests": tests, "weights_bytes": 1000, "kv_bytes": 200, "extra": {"double": True}}
    tmp = Path(a.out).with_suffix(".tmp")
    tmp.write_text(json.dumps(m))
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(_double_main(sys.argv[1:]))

# ---------------------------------------------------------------------------------------------------------
import pytest  # noqa: E402

from harness.hwdetect import CpuInfo, HostInfo  # noqa: E402
from harness.plan import parse_plan  # noqa: E402
from harness.records import read_records  # noqa: E402
from harness.store import iter_all_records, record_files  # noqa: E402
from harness.sweep import EngineState, Sweep, SweepRefused  # noqa: E402

HOST = HostInfo(
    host="test-host", backend="CPU", device_name="Test CPU", n_devices=1, driver="", hardware_id="",
    hardware_family="cpu-x86-avx2",
    cpu=CpuInfo("Test CPU", "x86_64", 2, 2, 2**34, ("avx2",), "cpu-x86-avx2"),
    detected={"cpu_model": "Test CPU"},
)  # fmt: skip


def _plan(tmp_path: Path, behaviours: list[str], timeout_s: float = 30, sleep_s: float = 0.0) -> str:
    groups = "\n".join(
        f'[[sweep]]\nengine_options = {{ double = "{b}", sleep_s = {sleep_s} }}\n'
        f"contexts = [{256 * (i + 1)}]\n"
        for i, b in enumerate(behaviours)
    )
    text = f"""
name = "double"
engines = ["llama.cpp"]
models = ["smollm2-135m"]
quants = ["F16"]
layers = 1
prompt_lengths = [16]
gen_lengths = [4]
depths = [0]
timeout_s = {timeout_s}
{groups}
"""
    path = tmp_path / "double.toml"
    path.write_text(text)
    return str(path)


@pytest.fixture()
def double_env(tmp_path, monkeypatch):
    monkeypatch.setenv("FITBENCH_RUNNER_CMD", DOUBLE_CMD)
    monkeypatch.setenv("DOUBLE_DIR", str(tmp_path))
    return tmp_path


def _sweep(plan_path: str, results: Path, **kw) -> Sweep:
    plan = parse_plan(Path(plan_path).read_text(), plan_path)
    engines = kw.pop("engines", {"llama.cpp": EngineState(True, "0.0-double")})
    return Sweep(plan, results, host=kw.pop("host", HOST), engines=engines, show_progress=False, **kw)


def test_unwritable_results_refused_before_measuring(double_env):
    blocker = double_env / "results"
    blocker.write_text("a file where the results folder should be\n")
    pid_file = double_env / "child.pid"
    os.environ["DOUBLE_PID_FILE"] = str(pid_file)
    try:
        with pytest.raises(SweepRefused, match="cannot write records to"):
            _sweep(_plan(double_env, ["ok"]), blocker).run()
    finally:
        del os.environ["DOUBLE_PID_FILE"]
    assert not pid_file.exists()  # no point was measured


def test_crashing_point_is_recorded_failed_and_sweep_continues(double_env):
    results = double_env / "results"
    s = _sweep(_plan(double_env, ["abort", "ok"]), results).run()
    recs = list(iter_all_records(results))
    assert s.points_run == 2
    failed = [r for r in recs if r.status == "failed"]
    ok = [r for r in recs if r.status == "ok"]
    assert len(failed) == 2 and len(ok) == 2  # one pp + one tg test per point
    assert all("SIGABRT" in r.error and "double child starting" in r.error for r in failed)
    assert {r.n_ctx for r in failed} == {256} and {r.n_ctx for r in ok} == {512}
    assert all(r.extra["point_key"] for r in recs)
    assert ok[0].build_info.startswith("TEST DOUBLE")


def test_timeout_becomes_failed_record(double_env):
    results = double_env / "results"
    t0 = time.monotonic()
    _sweep(_plan(double_env, ["sleep"], timeout_s=2), results).run()
    assert time.monotonic() - t0 < 30
    recs = list(iter_all_records(results))
    assert recs and all(r.status == "failed" and "timed out after" in r.error for r in recs)


def test_missing_engine_is_skipped_with_hint(double_env, monkeypatch):
    monkeypatch.setenv("DOUBLE_ENGINE_MISSING", "llama.cpp")
    from harness.sweep import check_engine

    state = check_engine("llama.cpp")
    assert not state.available
    results = double_env / "results"
    _sweep(_plan(double_env, ["ok"]), results, engines={"llama.cpp": state}).run()
    recs = list(iter_all_records(results))
    assert recs and all(r.status == "skipped" and "not available" in r.error for r in recs)


def test_rerun_without_resume_is_refused_and_resume_skips(double_env):
    results = double_env / "results"
    plan = _plan(double_env, ["ok", "ok"])
    _sweep(plan, results).run()
    n = len(list(iter_all_records(results)))
    with pytest.raises(SweepRefused, match="--resume"):
        _sweep(plan, results).run()
    s = _sweep(plan, results, resume=True).run()
    assert s.points_run == 0 and s.points_resumed == 2
    assert len(list(iter_all_records(results))) == n
    s = _sweep(plan, results, repeat=True).run()  # explicit repeat: new records with new ids
    recs = list(iter_all_records(results))
    assert len(recs) == 2 * n and len({r.record_id for r in recs}) == 2 * n


def test_another_machine_of_the_same_host_name_measures_afresh(double_env):
    """A store filled on one VM called "test-host" does not make another VM of that name skip its points:
    a resumed or plain sweep counts only the records of its own hardware family and device name."""
    results = double_env / "results"
    plan = _plan(double_env, ["ok"])
    _sweep(plan, results).run()
    other = replace(HOST, hardware_family="cpu-x86-avx512",
                    cpu=replace(HOST.cpu, isa=("avx2", "avx512"), family="cpu-x86-avx512"))  # fmt: skip
    s = _sweep(plan, results, host=other).run()  # no refusal: nothing of this machine is stored
    assert s.points_run == 1
    assert {r.hardware_family for r in iter_all_records(results)} == {"cpu-x86-avx2", "cpu-x86-avx512"}
    with pytest.raises(SweepRefused, match="--resume"):
        _sweep(plan, results, host=other).run()


def test_retry_failed_measures_failed_points_again_and_keeps_history(double_env, monkeypatch):
    results = double_env / "results"
    plan = _plan(double_env, ["flaky", "ok"])
    monkeypatch.setenv("DOUBLE_FAIL", "1")
    _sweep(plan, results).run()
    assert sorted(r.status for r in iter_all_records(results)) == ["failed", "failed", "ok", "ok"]
    monkeypatch.delenv("DOUBLE_FAIL")
    s = _sweep(plan, results, resume=True).run()  # plain resume: failed points count as done
    assert s.points_run == 0
    s = _sweep(plan, results, resume=True, retry_failed=True).run()
    assert s.points_run == 1 and s.points_resumed == 1
    statuses = sorted(r.status for r in iter_all_records(results))
    assert statuses == ["failed", "failed", "ok", "ok", "ok", "ok"]  # the failure stays as history
    s = _sweep(plan, results, resume=True, retry_failed=True).run()
    assert s.points_run == 0


def _run_cli_sweep(plan: str, results: Path, env: dict, resume: bool = False) -> subprocess.Popen:
    argv = [sys.executable, "-m", "harness", "measure", "--plan", plan, "--results", str(results)]
    argv.append("--no-progress")
    return subprocess.Popen(argv + (["--resume"] if resume else []), cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _wait_for(pred, timeout_s: float = 60) -> None:
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _n_points(results: Path) -> int:
    return len({r.extra["point_key"] for r in iter_all_records(results)}) if record_files(results) else 0


def test_sigkill_parent_mid_point_then_resume_loses_nothing_duplicates_nothing(double_env):
    results = double_env / "results"
    plan = _plan(double_env, ["slow"] * 4, sleep_s=1.5)
    env = {**os.environ, "PYTHONPATH": str(REPO), "DOUBLE_PID_FILE": str(double_env / "pid")}
    proc = _run_cli_sweep(plan, results, env)
    _wait_for(lambda: _n_points(results) >= 1)  # first point stored, second one in flight
    child_pid = int((double_env / "pid").read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    # the child dies with its parent (PR_SET_PDEATHSIG)
    _wait_for(lambda: not Path(f"/proc/{child_pid}").exists() or _is_zombie(child_pid), 20)
    stored = _n_points(results)
    assert 1 <= stored < 4
    before = {r.record_id for r in iter_all_records(results)}
    proc = _run_cli_sweep(plan, results, env, resume=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    recs = list(iter_all_records(results))
    assert before <= {r.record_id for r in recs}  # nothing lost
    assert len(recs) == len({r.record_id for r in recs}) == 8  # 4 points x (pp + tg), no duplicates
    assert _n_points(results) == 4 and all(r.status == "ok" for r in recs)
    for path in record_files(results):  # every line whole
        read_records(path)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_sigkill_child_is_recorded_failed_and_sweep_continues(double_env):
    results = double_env / "results"
    plan = _plan(double_env, ["sleep", "ok"], timeout_s=60)
    env = {**os.environ, "PYTHONPATH": str(REPO), "DOUBLE_PID_FILE": str(double_env / "pid")}
    proc = _run_cli_sweep(plan, results, env)
    _wait_for(lambda: (double_env / "pid").exists())
    os.kill(int((double_env / "pid").read_text()), signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    recs = list(iter_all_records(results))
    failed = [r for r in recs if r.status == "failed"]
    assert failed and all("SIGKILL" in r.error for r in failed)
    assert any(r.status == "ok" for r in recs)


def test_sigterm_interrupts_cleanly(double_env):
    results = double_env / "results"
    plan = _plan(double_env, ["sleep"], timeout_s=60)
    env = {**os.environ, "PYTHONPATH": str(REPO), "DOUBLE_PID_FILE": str(double_env / "pid")}
    proc = _run_cli_sweep(plan, results, env)
    _wait_for(lambda: (double_env / "pid").exists())
    child = int((double_env / "pid").read_text())
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "--resume" in err
    _wait_for(lambda: _is_zombie(child) or not Path(f"/proc/{child}").exists(), 20)
    assert _n_points(results) == 0  # the interrupted point is not recorded


# --- the line printed after each point (harness.announce) ------------------------------------------------
PROBED_HOST = HostInfo(
    host="test-host", backend="CPU", device_name="Test CPU", n_devices=1, driver="", hardware_id="",
    hardware_family="cpu-x86-avx2",
    cpu=CpuInfo("Test CPU", "x86_64", 2, 2, 2**34, ("avx2",), "cpu-x86-avx2"),
    detected={"cpu_model": "Test CPU", "host_bandwidth_probe_gbs": 40.0, "ram_bytes": 2**34},
)  # fmt: skip


def _point_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("smollm2-135m")]


def test_each_point_prints_measured_mean_sd_against_the_estimate(double_env):
    """One line per test: the double's pp16 (100 ± 10 tok/s) and tg4 (10 ± 0) against what
    estimator.app.predict says for the same point, written here as a predict row by hand; the failed point
    prints one line with its status and reason."""
    import io

    from rich.console import Console

    from estimator.app.predict import predict_rows
    from estimator.physics.coefficients import load_coefficients
    from harness.describe import number, signed_pct

    buf = io.StringIO()
    plan = parse_plan(Path(p := _plan(double_env, ["ok", "abort"])).read_text(), p)
    console = Console(file=buf, width=60)  # narrower than a line: each point line must stay one line
    Sweep(plan, double_env / "results", host=PROBED_HOST, engines={"llama.cpp": EngineState(True, "0.0")},
          show_progress=True, console=console).run()  # fmt: skip
    lines = _point_lines(buf.getvalue())
    base = {"model": "smollm2-135m", "n_layers": "1", "hardware": "custom", "kind": "cpu",
            "family": "cpu-x86-avx2", "memory_gib": "16", "bandwidth_gbs": "40", "host_bandwidth_gbs": "40",
            "engine": "llama.cpp", "backend": "CPU", "quant": "F16", "n_ctx": "256",
            "flash_attn": "0"}  # fmt: skip
    rows = [{**base, "n_prompt": "16", "n_gen": "0"}, {**base, "n_prompt": "0", "n_gen": "4"}]
    pp, tg = predict_rows(rows, load_coefficients())
    est_pp, est_tg = float(pp["prefill_tok_s"]), float(tg["decode_tok_s"])
    head = "smollm2-135m (1/30 L) F16 | llama.cpp CPU"
    pct_pp, pct_tg = signed_pct((100 - est_pp) / est_pp), signed_pct((10 - est_tg) / est_tg)
    assert lines == [
        f"{head} | pp16 | 100.00 ± 10.00 tok/s | est. {number(est_pp)} ({pct_pp})",
        f"{head} | tg4 | 10.00 ± 0.00 tok/s | est. {number(est_tg)} ({pct_tg})",
        f"{head} | pp16, tg4 | FAILED: crashed: killed by SIGABRT (exit status -6)",
    ]
    assert "est. = estimator.app.predict with " in buf.getvalue()


def test_an_estimate_that_cannot_be_made_prints_a_dash_and_the_sweep_goes_on(double_env, monkeypatch):
    import io

    from rich.console import Console

    import estimator.app.predict as predict

    buf = io.StringIO()
    results = double_env / "results"
    # the default test host has no bandwidth probe: no device to estimate on
    _sweep(_plan(double_env, ["ok"]), results, console=Console(file=buf, width=200)).run()
    lines = _point_lines(buf.getvalue())
    assert len(lines) == 2 and all("est. — (host not in the hardware catalog" in ln for ln in lines)
    assert "100.00 ± 10.00 tok/s" in lines[0]

    def broken(rows, table=None):
        raise RuntimeError("estimator exploded")

    monkeypatch.setattr(predict, "predict_rows", broken)
    buf = io.StringIO()
    plan = _plan(double_env, ["ok"])
    s = _sweep(plan, results, host=PROBED_HOST, repeat=True, console=Console(file=buf, width=200)).run()
    assert s.points_run == 1 and s.record_status["ok"] == 2  # stored all the same
    lines = _point_lines(buf.getvalue())
    assert len(lines) == 2 and all(ln.endswith("est. — (estimator exploded)") for ln in lines)
    assert "Traceback" not in buf.getvalue()


def test_measure_command_prints_a_line_per_test_above_the_progress_bar(double_env):
    """The user's command, `python -m harness measure --plan P --results R`, with its progress bar."""
    results = double_env / "results"
    plan = _plan(double_env, ["ok", "abort"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "harness", "measure", "--plan", plan, "--results", str(results)]
    r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = _point_lines(r.stderr)
    number = r"[\d,]+(\.\d+)?"
    est = rf"est\. ({number} \([+−]\d+\.\d %\)|— \(.+\))"
    head = r"smollm2-135m \(1/30 L\) F16 \| llama\.cpp CPU.*"
    assert re.fullmatch(rf"{head} \| pp16 \| 100\.00 ± 10\.00 tok/s \| {est}", lines[0]), lines
    assert re.fullmatch(rf".* \| tg4 \| 10\.00 ± 0\.00 tok/s \| {est}", lines[1]), lines
    assert re.fullmatch(r".* \| pp16, tg4 \| FAILED: crashed: killed by SIGABRT.*", lines[2]), lines
    assert len(lines) == 3 and "2 points run" in r.stderr and "Traceback" not in r.stderr
