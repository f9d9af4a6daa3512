"""The estimator's output files (``report -o``, ``predict -o``, ``list -o``, ``fit -o``): never half-written,
never a device, a FIFO or a folder.

The harness and calibration write through ``harness.safe_files``; the estimator must not import the harness
(it imports nothing of ours, so it runs without it), so this is its own small writer under the same rules
(docs/reliability.md, "Writers"):

* **never replace what is not a regular file**: a target that exists and is a device (``/dev/null``,
  ``/dev/full``), a FIFO, a socket or a folder is refused before anything is written (``OutputRefused``, one
  line: ``cannot write: X is a FIFO, not a regular file; refusing to replace it``), and is left as it was —
  opening a FIFO for writing used to wait for a reader forever;
* **symlinks are written through**: the link is resolved and the file it points to is replaced; the link
  stays a link (a link to a device is refused like the device);
* **never half-written**: the content goes to ``.<name>.<pid>.<random>.tmp`` in the target's folder, is
  flushed and fsynced, gets the mode of the file it replaces (0644 for a new one) and is renamed over the
  target; the folder is fsynced after the rename.  A full disk, Ctrl-C or SIGTERM at any point leaves the old
  file or no file, never a partial one, and the temporary is removed.  A failed write is an ``OSError``
  naming the target (the CLI prints ``error: cannot write X: No space left on device`` and exits 2).
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from estimator.catalog.files import describe_kind
from estimator.catalog.files import fsync_dir as _fsync_dir
from estimator.specs import SpecError

NEW_FILE_MODE = 0o644


class OutputRefused(SpecError):
    """The output path is not a regular file (a device, FIFO, socket or folder); one line naming it."""


def output_target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` replaces (symlinks resolved); OutputRefused when that exists and is not a
    regular file.  A missing target is fine: it will be created."""
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    if not stat.S_ISREG(st.st_mode):
        shown = str(path) if str(path) == str(real) else f"{path} (-> {real})"
        kind = describe_kind(st.st_mode)
        raise OutputRefused(f"cannot write: {shown} is {kind}, not a regular file; refusing to replace it")
    return real


def write_output(path: str | os.PathLike, content: str | Callable[[io.TextIOBase], None]) -> Path:
    """Replace ``path`` atomically with ``content`` (text, or a function writing to a UTF-8 text file whose
    newlines are written as given).  Returns the file written (symlinks resolved)."""
    real = output_target(path)
    if not real.parent.is_dir():
        raise OSError(2, "No such file or directory", str(real.parent))
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            if callable(content):
                content(fh)
            else:
                fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = stat.S_IMODE(os.stat(real).st_mode)
        except FileNotFoundError:
            mode = NEW_FILE_MODE
        os.chmod(tmp, mode)
        output_target(path)  # again right before the rename: the target may have changed meanwhile
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


