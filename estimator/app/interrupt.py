"""Ctrl-C and SIGTERM for the command lines (``python -m estimator``, ``python -m harness``): both unwind like
Ctrl-C (``finally`` blocks remove temporary files, children are killed) and the command exits 130.

Both signals raise ``Interrupted``, a subclass of KeyboardInterrupt, not KeyboardInterrupt itself.  CPython
sets a process-wide flag (``_Py_UnhandledKeyboardInterrupt``) when a KeyboardInterrupt of exactly that type
leaves an evaluation it runs, and at exit ends a process whose flag is set by re-sending itself SIGINT.  Here
the flag was found set although our ``except`` had caught the interrupt (which evaluation set it is not
pinned down), so a caught SIGTERM exited -2 instead of 130, about one in seven during a synthetic model
build.  The flag is for that exact type only; every ``except KeyboardInterrupt`` still catches the
subclass.  SIGINT is taken over only while it has Python's default handler: a command started with Ctrl-C
ignored (a background job) keeps ignoring it.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_INTERRUPTED = 130  # 128 + SIGINT, for Ctrl-C and SIGTERM alike


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM (see the module docstring for why it is a subclass)."""


def _raise_interrupted(signum, frame) -> None:  # noqa: ARG001
    raise Interrupted


@contextmanager
def interrupts_unwind() -> Iterator[None]:
    """While inside, SIGTERM (and SIGINT when at Python's default) raise ``Interrupted``; the previous
    handlers come back on the way out."""
    old_term = signal.signal(signal.SIGTERM, _raise_interrupted)
    take_int = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    old_int = signal.signal(signal.SIGINT, _raise_interrupted) if take_int else None
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if take_int:
            signal.signal(signal.SIGINT, old_int)
