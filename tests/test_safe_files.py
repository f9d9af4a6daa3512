"""harness.safe_files and harness.locks: writers never destroy what is at the target, never leave half a file,
never read from a device; locks refuse planted FIFOs and symlinks (issue 17, items 1-3).

Device nodes are made with a temporary ``mknod`` only when the test runs as root (and the kernel allows it);
elsewhere the same cases run against a FIFO, a folder and a symlink.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.locks import HeldLock, LockHeld, exclusive, lock_path
from harness.safe_files import (
    FileRefused,
    atomic_write,
    atomic_write_text,
    read_regular_bytes,
    remove_stale_temps,
    write_target,
)

REPO = Path(__file__).resolve().parents[1]
NULL_DEV, FULL_DEV, ZERO_DEV = os.makedev(1, 3), os.makedev(1, 7), os.makedev(1, 5)


def make_device(path: Path, dev: int = NULL_DEV) -> Path:
    """A character device node at ``path`` (root only; skips the test elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, dev)
    except PermissionError:
        pytest.skip("mknod not permitted here")
    return path


def special(folder: Path, kind: str, name: str = "target", dev: int = FULL_DEV) -> Path:
    """A non-regular file of ``kind`` (fifo | folder | device, the device ``dev``) at folder/name."""
    path = folder / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        make_device(path, dev)
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".part")))


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_writer_refuses_a_target_that_is_not_a_regular_file(tmp_path, kind):
    path = special(tmp_path, kind)
    before = os.lstat(path)
    with pytest.raises(FileRefused, match="not a regular file; refusing to replace it"):
        atomic_write_text(path, "data\n")
    after = os.lstat(path)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino
    assert _leftovers(tmp_path) == []


def test_writer_writes_through_a_symlink_and_keeps_the_link(tmp_path):
    real = tmp_path / "data" / "real.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert atomic_write_text(link, "new\n") == real
    assert link.is_symlink() and real.read_text() == "new\n"


def test_symlink_to_a_device_is_refused(tmp_path):
    dev = make_device(tmp_path / "null", NULL_DEV)
    link = tmp_path / "out.json"
    link.symlink_to(dev)
    with pytest.raises(FileRefused, match=r"out.json \(-> .*null\) is a character device"):
        write_target(link)
    assert stat.S_ISCHR(os.stat(dev).st_mode)


def test_replacing_keeps_the_mode_and_new_files_are_0644(tmp_path):
    path = tmp_path / "x.json"
    atomic_write_text(path, "1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o600)
    atomic_write(path, lambda fh: fh.write(b"2"))
    assert path.read_text() == "2" and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "coefficients.json"
    path.write_text("old\n")

    def boom(fh):
        fh.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device: .*coefficients.json"):
        atomic_write(path, boom)
    assert path.read_text() == "old\n" and _leftovers(tmp_path) == []


_FSIZE_CHILD = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the write fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from harness.safe_files import atomic_write
try:
    atomic_write(sys.argv[1], b"x" * 100_000)
except OSError as exc:
    print("errno", exc.errno)
    sys.exit(3)
"""


def test_a_write_beyond_the_file_size_limit_leaves_the_old_file(tmp_path):
    """A real failing write (RLIMIT_FSIZE: the kernel refuses bytes past 4 KiB, as a full disk would)."""
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    res = subprocess.run([sys.executable, "-c", _FSIZE_CHILD, str(path)], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)  # fmt: skip
    assert res.returncode == 3 and "errno 27" in res.stdout, res.stderr  # EFBIG
    assert path.read_bytes() == b"old" and _leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_reader_refuses_fifo_and_device_without_blocking(tmp_path, kind):
    path = special(tmp_path, kind, "in.json", ZERO_DEV)  # endless zeros: reading it would never end
    t0 = time.monotonic()
    with pytest.raises(FileRefused, match="refusing to read it"):
        read_regular_bytes(path)
    assert time.monotonic() - t0 < 5


def test_stale_temporaries_of_dead_writers_are_removed_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stale = tmp_path / f".x.jsonl.{dead.pid}.abc123.tmp"
        part = tmp_path / f"m.gguf.{dead.pid}.q1w2e3.part"
        busy = tmp_path / f".x.jsonl.{live.pid}.def456.tmp"
        other = tmp_path / "notes.tmp"  # no pid: not ours, never touched
        for p in (stale, part, busy, other):
            p.write_text("x")
        assert sorted(remove_stale_temps(tmp_path)) == sorted([stale, part])
        assert busy.exists() and other.exists()
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_planted_lock_file_is_refused_not_waited_on(tmp_path, kind):
    target = tmp_path / "x.jsonl"
    lock = lock_path(target)
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(tmp_path / "elsewhere")
    t0 = time.monotonic()
    with pytest.raises(FileRefused, match="lock file"):
        with exclusive(target):
            pass
    assert time.monotonic() - t0 < 5 and not (tmp_path / "elsewhere").exists()


_HOLDER = """
import sys, time
from harness.locks import HeldLock
lock = HeldLock(sys.argv[1], "sweep-lock", "plan=p")
print("held", flush=True)
time.sleep(60)
"""


def test_held_lock_names_its_holder_and_is_freed_when_the_holder_dies(tmp_path):
    target = tmp_path / "runs" / "x.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(target)], stdout=subprocess.PIPE, text=True,
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockHeld) as info:
            HeldLock(target, "sweep-lock")
        assert info.value.pid == holder.pid and "plan=p" in str(info.value)
    finally:
        holder.send_signal(signal.SIGKILL)  # kill -9: the kernel drops the flock with the process
        holder.wait(10)
    with HeldLock(target, "sweep-lock", "plan=q") as lock:
        assert f"pid={os.getpid()}" in lock.path.read_text()
    assert lock.path.read_text() == ""  # released: nobody claimed


def test_a_loser_that_reads_before_the_holder_wrote_its_line_reads_again(tmp_path):
    """Two sweeps started together: the winner takes the flock, then writes its pid; a loser reading in
    between found an empty file and said "pid unknown".  It now reads again until the line is there."""
    import fcntl
    import threading

    target = tmp_path / "runs" / "x.jsonl"
    path = lock_path(target, "sweep-lock")
    path.parent.mkdir(parents=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held, nothing written yet
    late = threading.Timer(0.05, lambda: os.pwrite(fd, b"pid=4242 host=h since=t plan=p\n", 0))
    late.start()
    try:
        with pytest.raises(LockHeld) as info:
            HeldLock(target, "sweep-lock")
        assert info.value.pid == 4242
    finally:
        late.join()
        os.close(fd)
