"""Sweeps: one sweep per records file, interrupts and a full disk at any moment end cleanly, killed model
builds leave no ``*.part`` files, short timeouts are reported as they were (issue 17: items 2, 9).

The children are the TEST DOUBLE of tests/test_sweep.py, run through this file as a script so two extra
behaviours can be switched on by environment: ``DOUBLE_CHECK_SLEEP`` (the engine check takes that long, to
interrupt a sweep in its first seconds) and ``DOUBLE_BUILD_HANG`` (the model build writes a ``.part`` file
into the cache and never finishes).  Everything else is the tests/test_sweep.py double.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WRAPPER_CMD = f"{sys.executable} {Path(__file__).resolve()}"


def _wrapper_main(argv: list[str]) -> int:  # runs in the child process
    sys.path.insert(0, str(REPO))
    from tests.test_sweep import _double_main

    if argv[0] == "check" and os.environ.get("DOUBLE_CHECK_SLEEP"):
        Path(os.environ["DOUBLE_CHECK_PID_FILE"]).write_text(str(os.getpid()))
        time.sleep(float(os.environ["DOUBLE_CHECK_SLEEP"]))
    if argv[0] == "build-model" and os.environ.get("DOUBLE_BUILD_HANG"):
        cache = Path(argv[argv.index("--cache") + 1])
        cache.mkdir(parents=True, exist_ok=True)
        (cache / f"double.gguf.{os.getpid()}.abc123.part").write_text("half a model\n")
        time.sleep(3600)
    return _double_main(argv)


if __name__ == "__main__":
    sys.exit(_wrapper_main(sys.argv[1:]))

# ---------------------------------------------------------------------------------------------------------
import pytest  # noqa: E402

from harness.isolate import ChildResult  # noqa: E402
from harness.records import read_records  # noqa: E402
from harness.store import iter_all_records, record_files  # noqa: E402
from tests.test_sweep import _is_zombie, _plan, _sweep, _wait_for  # noqa: E402


@pytest.fixture()
def env(tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("FITBENCH_RUNNER_CMD", WRAPPER_CMD)
    monkeypatch.setenv("DOUBLE_DIR", str(tmp_path))
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _measure(plan: str, results: Path, env: dict, preexec=None) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-X",
        "faulthandler",  # SIGABRT dumps every thread's stack: where a sweep hangs (_communicate)
        "-m",
        "harness",
        "measure",
        "--plan",
        plan,
        "--results",
        str(results),
        "--no-progress",
    ]
    pipe = subprocess.PIPE

    def child_setup() -> None:
        # a foreground sweep, as a user starts it: Ctrl-C reaches it even when this test runs where SIGINT is
        # ignored (a shell's background job, `cmd &`, starts with SIGINT ignored and Python then keeps it so)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if preexec is not None:
            preexec()

    return subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=pipe, stderr=pipe, text=True, preexec_fn=child_setup
    )


def _communicate(proc: subprocess.Popen, timeout_s: float, what: str) -> tuple[str, str]:
    """proc.communicate; when the sweep has not ended within ``timeout_s``, fail with the stacks of its
    threads
    (faulthandler on SIGABRT) instead of a bare timeout, so a hang says where it hangs."""
    try:
        return proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"the sweep did not end within {timeout_s} s {what}; its stacks:\n{err[-6000:]}")


def test_two_sweeps_started_together_measure_each_point_once(tmp_path, env):
    """The audit's case: the same plan and results started twice at once gave every record twice."""
    results = tmp_path / "results"
    plan = _plan(tmp_path, ["slow"] * 3, sleep_s=0.5)
    procs = [_measure(plan, results, env), _measure(plan, results, env)]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    winner, loser = (0, 1) if procs[0].returncode == 0 else (1, 0)
    err = outs[loser][1]
    assert f"another sweep (pid {procs[winner].pid}) is writing" in err and "Traceback" not in err, err
    recs = list(iter_all_records(results))
    assert len(recs) == len({r.record_id for r in recs}) == 6  # 3 points x (pp + tg), none twice
    for path in record_files(results):
        assert len(read_records(path)) == 6


def test_a_second_sweep_is_refused_while_the_first_runs_and_allowed_after(tmp_path, env):
    results = tmp_path / "results"
    plan = _plan(tmp_path, ["slow"] * 2, sleep_s=1.0)
    first = _measure(plan, results, {**env, "DOUBLE_PID_FILE": str(tmp_path / "pid")})
    _wait_for(lambda: (tmp_path / "pid").exists())  # the first sweep is measuring, lock held
    second = _measure(plan, results, env)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 2 and f"(pid {first.pid})" in err and "plan=double" in err, err
    assert first.wait(120) == 0
    again = _measure(plan, results, env)
    again.communicate(timeout=60)
    assert again.returncode == 2  # refused now only because the points are recorded (no --resume)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_in_the_first_seconds_exits_130_without_traceback(tmp_path, env, sig):
    """While the engine check runs (before the first point), SIGTERM exited 143 and Ctrl-C printed a
    KeyboardInterrupt traceback; both are now the documented 130, and the check child is killed."""
    pid_file = tmp_path / "check.pid"
    env = {**env, "DOUBLE_CHECK_SLEEP": "60", "DOUBLE_CHECK_PID_FILE": str(pid_file)}
    proc = _measure(_plan(tmp_path, ["ok"]), tmp_path / "results", env)
    _wait_for(pid_file.exists)
    child = int(pid_file.read_text())
    proc.send_signal(sig)
    out, err = _communicate(proc, 30, f"after {sig.name}")
    assert proc.returncode == 130 and "Traceback" not in err and "--resume" in err, err
    _wait_for(lambda: _is_zombie(child) or not Path(f"/proc/{child}").exists(), 20)
    assert not record_files(tmp_path / "results")


def _file_size_limit():
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, like ENOSPC
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


def test_a_full_disk_while_storing_a_point_is_one_line_exit_2(tmp_path, env):
    """RLIMIT_FSIZE makes the kernel refuse the records file past 1 KiB, as a full disk would."""
    results = tmp_path / "results"
    proc = _measure(_plan(tmp_path, ["ok"]), results, env, preexec=_file_size_limit)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert (
        line.startswith("error: cannot store records in ") and "File too large" in line and "--resume" in line
    )
    runs = results / "runs"
    assert not [p.name for p in runs.iterdir() if not p.name.endswith(("lock", "sweep-lock"))], list(
        runs.iterdir()
    )


def test_a_model_build_killed_by_its_timeout_leaves_no_part_file(tmp_path, env, monkeypatch):
    monkeypatch.setenv("DOUBLE_BUILD_HANG", "1")
    cache = tmp_path / "cache"
    plan = Path(_plan(tmp_path, ["ok"]))
    plan.write_text("build_timeout_s = 1.5\n" + plan.read_text())
    results = tmp_path / "results"
    _sweep(str(plan), results, cache_dir=cache).run()
    recs = list(iter_all_records(results))
    assert recs and all(
        r.status == "failed" and "model build failed: timed out after" in r.error for r in recs
    )
    assert not list(cache.glob("*.part"))


def test_a_sub_second_timeout_is_reported_as_it_was(tmp_path, env):
    results = tmp_path / "results"
    _sweep(_plan(tmp_path, ["sleep"], timeout_s=0.4), results).run()
    recs = list(iter_all_records(results))
    assert recs and all("limit 0.4 s" in r.error and "after 0 s" not in r.error for r in recs), recs[0].error


def test_timeout_text_keeps_its_tenths():
    res = ChildResult(("x",), -9, True, 0.43, "", "", timeout_s=0.4)
    assert res.describe() == "timed out after 0.4 s, limit 0.4 s (child process group killed)"


_BUILD = [
    "-m",
    "harness",
    "build-model",
    "--model",
    "smollm2-135m",
    "--quant",
    "F16",
    "--engine",
    "llama.cpp",
]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_model_build_leaves_no_part_file(tmp_path, sig):
    """A real synthetic GGUF build (smollm2-135m, 270 MB), killed while its .part file is being written:
    SIGTERM unwinds and removes it at once (exit 130); after SIGKILL the next build removes it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for attempt in range(3):
        cache = tmp_path / f"cache{attempt}"
        proc = subprocess.Popen([sys.executable, *_BUILD, "--cache", str(cache)], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        _wait_for(lambda c=cache, p=proc: list(c.glob("*.part")) or p.poll() is not None, 60)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        # on a loaded machine the build may finish its ~1 s write before the signal lands: that run tested
        # nothing, so build again (the signal has to arrive while the .part file is written)
        if proc.returncode != 0:
            break
    if sig == signal.SIGTERM:
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert not list(cache.glob("*.part"))
        return
    assert list(cache.glob("*.part"))  # kill -9: nothing in the process can clean up
    again = subprocess.run([sys.executable, *_BUILD, "--cache", str(cache)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert not list(cache.glob("*.part")) and Path(again.stdout.strip().splitlines()[-1]).is_file()


def test_a_records_path_that_is_a_fifo_is_refused_before_measuring(tmp_path, env, monkeypatch):
    from harness.store import measured_path
    from harness.sweep import SweepRefused
    from tests.test_sweep import HOST

    results = tmp_path / "results"
    target = measured_path(results, "double", HOST.hardware_family, HOST.host)
    target.parent.mkdir(parents=True)
    os.mkfifo(target)
    monkeypatch.setenv("DOUBLE_PID_FILE", str(tmp_path / "pid"))
    with pytest.raises(SweepRefused, match=r"cannot write records: .* is a FIFO, not a regular file"):
        _sweep(_plan(tmp_path, ["ok"]), results).run()
    assert not (tmp_path / "pid").exists() and stat.S_ISFIFO(os.lstat(target).st_mode)


def test_interrupts_raise_a_keyboard_interrupt_subclass_and_restore_the_handlers():
    """Ctrl-C and SIGTERM raise estimator.app.interrupt.Interrupted (a KeyboardInterrupt subclass: CPython's
    exit-by-SIGINT flag is for the exact type only, which made a caught SIGTERM exit -2 about once in seven
    builds); a SIGINT that is ignored (a background job) stays ignored; the old handlers come back."""
    from estimator.app.interrupt import Interrupted, interrupts_unwind

    assert issubclass(Interrupted, KeyboardInterrupt) and Interrupted is not KeyboardInterrupt
    before_term, before_int = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(Interrupted), interrupts_unwind():
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == before_term and signal.getsignal(signal.SIGINT) == before_int
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_unwind():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
