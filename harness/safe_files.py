"""Files that are never destroyed and never half-written: the one writer and reader of the harness and
calibration outputs (records, imports, coefficients, calibration reports).

Writers (``atomic_write``, ``atomic_write_text``):

* the target is resolved first: a symlink is written *through* (its resolved file is replaced; the link stays
  a link), so a ``runs/x.jsonl`` that links elsewhere updates the real file;
* a target that exists and is not a regular file (a device such as ``/dev/null`` or ``/dev/full``, a FIFO, a
  socket, a folder) is refused with ``FileRefused`` before anything is written; nothing is ever read from it;
* the content goes to a temporary file in the target's folder (``.<name>.<pid>.<random>.tmp``), which is
  flushed and fsynced, given the mode (and, for root, the owner) of the file it replaces (0644 for a new
  file), and renamed over the target; the folder is fsynced after the rename.  A failure at any step (a full
  disk, a signal, a crash) leaves the old file or no file, never a partial one, and removes the temporary.

Readers (``read_regular_bytes``) open with ``O_NONBLOCK`` and check the opened file: a FIFO or a device is
refused without blocking and without reading endless bytes.

Temporary files carry the writer's pid, so ``remove_stale_temps`` can remove those of a writer that was
killed (``kill -9``, a timed-out model build) without touching a live writer's.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from estimator.catalog.files import describe_kind  # noqa: F401 - re-exported (harness callers)
from estimator.catalog.files import fsync_dir as _fsync_dir

NEW_FILE_MODE = 0o644  # results are shared: readable by everyone, like the committed files
TEMP_SUFFIXES = (".tmp", ".part")
_TEMP_PID = re.compile(r"\.(\d+)\.[^.]*(?:\.tmp|\.part)$")


class FileRefused(ValueError):
    """The path is not a regular file (a device, FIFO, socket or folder): a writer or reader refuses it.
    The message is one line and names the path and what it is."""


def write_target(path: str | os.PathLike) -> Path:
    """The file a writer of ``path`` replaces: symlinks resolved; FileRefused when that exists and is not a
    regular file.  A missing target is fine (it will be created)."""
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    if not stat.S_ISREG(st.st_mode):
        shown = str(path) if str(path) == str(real) else f"{path} (-> {real})"
        raise FileRefused(
            f"{shown} is {describe_kind(st.st_mode)}, not a regular file; refusing to replace it"
        )
    return real


def fsync_file(path: str | os.PathLike) -> None:
    """Flush a file written by someone else's writer (gguf, llama.cpp's quantizer) to the disk before it is
    renamed into place."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path_prefix(target: Path) -> str:
    """Prefix of this process's temporary files for ``target``: ``.<name>.<pid>.``."""
    return f".{target.name}.{os.getpid()}."


def atomic_write(path: str | os.PathLike, content: bytes | Callable[[BinaryIO], None]) -> Path:
    """Replace ``path`` with ``content`` (bytes, or a function writing to a binary file) atomically.

    Returns the path written (symlinks resolved).  Raises FileRefused for a target that is not a regular
    file, OSError when the folder cannot be written or the disk is full (the old file is then untouched)."""
    real = write_target(path)
    real.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=temp_path_prefix(real), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(content):
                content(fh)
            else:
                fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        _copy_mode(real, tmp)
        write_target(path)  # checked again right before the rename: the target may have changed meanwhile
        os.replace(tmp, real)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None and exc.errno is not None:  # a failed write names no file: name the target
            raise OSError(exc.errno, exc.strerror, str(real)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(real.parent)
    return real


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """``atomic_write`` of ``text`` encoded with ``encoding``."""
    return atomic_write(path, text.encode(encoding))


def _copy_mode(target: Path, tmp: str) -> None:
    """The replaced file's mode (and owner, when running as root), or NEW_FILE_MODE for a new file."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        os.chmod(tmp, NEW_FILE_MODE)
        return
    os.chmod(tmp, stat.S_IMODE(st.st_mode))
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:
            pass


def read_regular_bytes(path: str | os.PathLike) -> bytes:
    """The whole content of a regular file (symlinks followed).  FileRefused for a FIFO, device, socket or
    folder (checked on the opened file, without blocking); OSError when it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except IsADirectoryError:
        raise FileRefused(f"{path} is a folder, not a regular file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(
                f"{path} is {describe_kind(st.st_mode)}, not a regular file; refusing to read it"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_or_raise(path: str | os.PathLike, error: type[Exception]) -> bytes:
    """``read_regular_bytes``, with every failure (not a regular file, missing, unreadable) raised as
    ``error`` with a one-line message naming the path."""
    try:
        return read_regular_bytes(path)
    except FileRefused as exc:
        raise error(str(exc)) from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None


def temp_owner_pid(name: str) -> int | None:
    """The pid in a temporary file name written by this module (``.<name>.<pid>.<random>.tmp|.part``)."""
    m = _TEMP_PID.search(name)
    return int(m.group(1)) if m else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_temps(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files in ``folder`` whose writing process is gone; returns what was removed.

    Only names with a pid (``temp_owner_pid``) and a TEMP_SUFFIXES ending are considered; a live writer's
    temporaries, and anything else, are left alone."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.endswith(TEMP_SUFFIXES) or not entry.is_file(follow_symlinks=False):
            continue
        pid = temp_owner_pid(entry.name)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed
