"""Reading the files a user points the estimator at (config.json, GGUF headers, measured runs, predict CSVs,
coefficients): regular files only, never blocking, never more than a stated size.

The harness has its own reader (``harness.safe_files.read_regular_bytes``) under the same rules; the estimator
cannot import the harness (it imports nothing of ours), so these few lines exist twice on purpose.

* A path is opened with ``O_NONBLOCK`` and the *opened* file is checked with ``fstat``: a FIFO, a device, a
  socket or a folder is refused at once (``FILE is a FIFO, not a regular file``), never waited on and never
  read — a FIFO named ``runs/x.jsonl`` or ``config.json`` cannot hang a report, ``/dev/zero`` cannot fill
  memory.
* A file larger than the reader's limit is refused before it is read (the limit is in the message).
* Every failure is a one-line ``SpecError`` naming the file.

``cache_root`` names the one folder fitbench writes outside the repository (synthetic models, the compiled
clock probe); the harness takes it from here.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from estimator.specs import SpecError

MIB = 2**20


def cache_root() -> Path:
    """fitbench's cache folder: ``$FITBENCH_CACHE`` when set, else ~/.cache/fitbench (synthetic models under
    ``models/``, the compiled clock probe, ...)."""
    root = os.environ.get("FITBENCH_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "fitbench"


def describe_kind(mode: int) -> str:
    """'a FIFO', 'a folder', 'a character device', ... for a ``st_mode`` (for one-line refusals)."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def fsync_dir(folder: str | os.PathLike) -> None:
    """Flush a folder's entries (a rename into it) to the disk; nothing where the file system cannot."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the rename itself is still atomic
    finally:
        os.close(fd)


def open_regular(path: str | os.PathLike, max_bytes: int | None = None) -> tuple[int, int]:
    """(file descriptor, size in bytes) of a regular file opened for reading without blocking.

    SpecError when it is missing, unreadable, not a regular file, or larger than ``max_bytes``.  The caller
    closes the descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except IsADirectoryError:
        raise SpecError(f"{path} is a folder, not a regular file") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SpecError(f"{path} is {describe_kind(st.st_mode)}, not a regular file; refusing to read it")
        if max_bytes is not None and st.st_size > max_bytes:
            raise SpecError(
                f"{path}: {st.st_size:,} bytes is more than the {max_bytes:,} this input may have"
            )
        os.set_blocking(fd, True)  # a regular file: plain reads from here on
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_bytes(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The content of a regular file of at most ``max_bytes`` bytes (``open_regular``'s refusals)."""
    fd, _ = open_regular(path, max_bytes)
    try:
        chunks, total = [], 0
        while chunk := os.read(fd, MIB):
            total += len(chunk)
            if total > max_bytes:  # grew while being read
                raise SpecError(f"{path}: more than the {max_bytes:,} bytes this input may have")
            chunks.append(chunk)
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path: str | os.PathLike, max_bytes: int, encoding: str = "utf-8") -> str:
    """``read_bytes`` decoded; a byte that is not ``encoding`` is a SpecError naming its line and column."""
    data = read_bytes(path, max_bytes)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        name = "UTF-8" if encoding.lower().startswith("utf-8") else encoding
        byte = data[exc.start]
        raise SpecError(f"{path}:{line}: byte 0x{byte:02x} at column {col} is not {name} text") from None


def iter_lines(path: str | os.PathLike, max_line_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, the line's bytes without its newline) of a regular file, read line by line; ``None`` for
    a line longer than ``max_line_bytes`` (skipped, not kept in memory).  SpecError when the file cannot be
    opened or is not a regular file."""
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        lineno = 0
        while True:
            try:
                line = fh.readline(max_line_bytes + 1)
            except OSError as exc:
                raise SpecError(f"{path}: cannot read ({exc.strerror or exc})") from None
            if not line:
                return
            lineno += 1
            if len(line) > max_line_bytes and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # skip the rest of the overlong line
                    line = fh.readline(max_line_bytes)
                yield lineno, None
                continue
            yield lineno, line.rstrip(b"\r\n")
