"""Exclusive locks on results files: a short one per append, a long one per sweep.

Both are ``flock`` locks on hidden files beside the results file (symlinks resolved first, so every path to
one file shares its locks):

* ``.<name>.lock``: taken (waiting) by every append to ``<name>`` for the read-copy-rename, so two writers of
  one file never lose each other's lines;
* ``.<name>.sweep-lock``: taken (not waiting) by a sweep for its whole run, so a second sweep writing the same
  file refuses to start (``LockHeld``, naming the holder's pid, read again for up to a second while the
  holder has not written it yet) instead of measuring every point twice.  The holder writes
  ``pid=<pid> host=<host> since=<UTC time> <what>`` into the file; the lock itself is the ``flock``, which
  the kernel releases when the holder exits, however it exits (``kill -9`` included), so a stale file never
  blocks anyone.

Lock files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and must be regular files: a FIFO, device or symlink
planted at a lock path is refused, never opened for writing or waited on.
"""

from __future__ import annotations

import fcntl
import os
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from harness.safe_files import FileRefused, describe_kind


class LockHeld(RuntimeError):
    """Another process holds the lock; ``holder`` is what it wrote into the lock file (pid, host, since)."""

    def __init__(self, path: Path, holder: str) -> None:
        self.path, self.holder = path, holder
        super().__init__(f"{path} is locked by {holder or 'another process (pid not written yet)'}")

    @property
    def pid(self) -> int | None:
        for part in self.holder.split():
            if part.startswith("pid=") and part[4:].isdigit():
                return int(part[4:])
        return None


def lock_path(target: str | os.PathLike, kind: str = "lock") -> Path:
    """Hidden lock file of ``target`` (resolved): ``.<name>.<kind>`` in the same folder."""
    real = Path(os.path.realpath(target))
    return real.parent / f".{real.name}.{kind}"


def _open_lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise FileRefused(f"lock file {path} is a symlink; refusing to use it") from None
        raise exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileRefused(f"lock file {path} is {describe_kind(st.st_mode)}, not a regular file")
    return fd


@contextmanager
def exclusive(target: str | os.PathLike, kind: str = "lock") -> Iterator[None]:
    """Hold the exclusive ``kind`` lock of ``target``, waiting for it (short critical sections)."""
    fd = _open_lock(lock_path(target, kind))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


class HeldLock:
    """A lock taken without waiting and held until ``release`` (or process exit)."""

    def __init__(self, target: str | os.PathLike, kind: str, what: str = "") -> None:
        self.path = lock_path(target, kind)
        fd = _open_lock(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _wait_for_holder(fd)
            os.close(fd)
            raise LockHeld(self.path, holder) from None
        since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        info = f"pid={os.getpid()} host={socket.gethostname()} since={since} {what}".strip() + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode("utf-8", "replace"), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)  # nobody holds it: say so
            except OSError:
                pass
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> HeldLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# The holder writes its line just after taking the flock: a loser that reads in between finds the file empty
# (or truncated), so it reads again for up to HOLDER_WAIT_S before saying "pid not written yet".
HOLDER_WAIT_S = 1.0
HOLDER_POLL_S = 0.01


def _wait_for_holder(fd: int) -> str:
    deadline = time.monotonic() + HOLDER_WAIT_S
    while not (holder := _read_holder(fd)) and time.monotonic() < deadline:
        time.sleep(HOLDER_POLL_S)
    return holder


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
