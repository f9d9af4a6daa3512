"""The estimator's output files and standard output (issue 17: 3; issue 14: 3): ``report -o``, ``predict -o``,
``list -o`` and ``fit -o`` go through estimator/app/output.py — a device, FIFO or folder at the target is
refused (exit 2, one line, the node untouched), symlinks are written through, a failing write (a full disk,
here RLIMIT_FSIZE) leaves the old file and no temporary; a closed standard output is one line, a broken pipe a
quiet exit.

Device nodes are made with a temporary ``mknod`` only where the test runs as root; elsewhere FIFOs, folders
and symlinks cover the same paths."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.app.output import OutputRefused, write_output
from tests.test_safe_files import FULL_DEV, NULL_DEV, special

REPO = Path(__file__).resolve().parents[1]
REPORT = ["report", "--model", "qwen3-0.6b", "--hardware", "rtx-4090", "--quant", "Q8_0"]


def run(*args: str, preexec=None, stdin=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "estimator", *args], capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=preexec, **kw,
    )  # fmt: skip


def one_line_error(p: subprocess.CompletedProcess) -> str:
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def cases_csv(folder: Path, rows: int = 1) -> Path:
    path = folder / "cases.csv"
    path.write_text("model,hardware,quant,n_prompt,n_gen\n" + "qwen3-0.6b,rtx-4090,Q8_0,512,128\n" * rows)
    return path


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
@pytest.mark.parametrize("command", ["report", "predict", "list", "fit"])
def test_outputs_refuse_what_is_not_a_regular_file(tmp_path, kind, command):
    target = special(tmp_path, kind, dev=FULL_DEV if kind == "device" else NULL_DEV)
    before = os.lstat(target)
    argv = {
        "report": REPORT,
        "predict": ["predict", str(cases_csv(tmp_path))],
        "list": ["list", "models"],
        "fit": ["fit", "--hardware", "rtx-4090", "--format", "csv"],
    }[command]
    line = one_line_error(run(*argv, "-o", str(target)))
    assert f"cannot write: {target} is a" in line and "refusing to replace it" in line
    after = os.lstat(target)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino
    assert leftovers(tmp_path) == []


def test_dev_null_is_refused_too():
    assert "/dev/null is a character device" in one_line_error(run(*REPORT, "-o", "/dev/null"))


def test_symlinks_are_written_through(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    p = run(*REPORT, "--format", "json", "-o", str(link))
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and '"schema_version"' in real.read_text()
    dangling = tmp_path / "to-fifo"
    dangling.symlink_to(special(tmp_path, "fifo", "fifo"))
    assert "(->" in one_line_error(run(*REPORT, "-o", str(dangling)))


def _full_disk() -> None:  # runs in the child: writes past 4 KiB fail with EFBIG, as on a full disk
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


@pytest.mark.parametrize("command", ["report", "predict"])
def test_a_failing_write_leaves_the_old_file(tmp_path, command):
    out = tmp_path / "out.txt"
    out.write_text("old content\n")
    out.chmod(0o600)
    argv = REPORT + ["--format", "html"] if command == "report" else ["predict", str(cases_csv(tmp_path, 40))]
    line = one_line_error(run(*argv, "-o", str(out), preexec=_full_disk))
    assert f"cannot write {out}" in line and "File too large" in line
    assert out.read_text() == "old content\n" and leftovers(tmp_path) == []
    p = run(*argv, "-o", str(out))  # without the limit: replaced whole, mode kept
    assert (
        p.returncode == 0 and out.read_text() != "old content\n" and stat.S_IMODE(out.stat().st_mode) == 0o600
    )


def test_writer_unit(tmp_path):
    target = tmp_path / "a.txt"
    write_output(target, "one\r\ntwo\n")
    assert target.read_bytes() == b"one\r\ntwo\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
    write_output(target, lambda fh: fh.write("three\n"))
    assert target.read_text() == "three\n"
    with pytest.raises(OutputRefused):
        write_output(tmp_path, "x")
    with pytest.raises(OSError):
        write_output(tmp_path / "missing" / "a.txt", "x")

    def boom(fh):
        fh.write("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_output(target, boom)
    assert target.read_text() == "three\n" and leftovers(tmp_path) == []


def test_closed_stdout_is_one_line_and_o_still_works(tmp_path):
    close_stdout = lambda: os.close(1)  # noqa: E731 - the child starts with fd 1 closed (`cmd >&-`)
    p = subprocess.run([sys.executable, "-m", "estimator", *REPORT], stderr=subprocess.PIPE, text=True,
                       cwd=REPO, timeout=120, preexec_fn=close_stdout)  # fmt: skip
    assert p.returncode == 2 and p.stderr.startswith("error: standard output is closed"), p.stderr
    out = tmp_path / "r.txt"
    p = subprocess.run([sys.executable, "-m", "estimator", *REPORT, "-o", str(out)], stderr=subprocess.PIPE,
                       text=True, cwd=REPO, timeout=120, preexec_fn=close_stdout)  # fmt: skip
    assert p.returncode == 0 and "llama-server" in out.read_text(), p.stderr


@pytest.mark.parametrize("argv", [REPORT + ["--format", "html"], ["list", "models", "--format", "json"]])
def test_broken_pipe_exits_quietly(argv):
    cmd = (
        f"{sys.executable} -m estimator {' '.join(argv)} | head -c 10 >/dev/null; echo rc=${{PIPESTATUS[0]}}"
    )
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.stdout.strip() in ("rc=0", "rc=141") and p.stderr == "", p.stderr
