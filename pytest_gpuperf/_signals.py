"""SIGTERM handled as Ctrl-C: CI timeouts and cancels send SIGTERM, and a run stopped so must save what it has.

Python's default for SIGTERM ends the process at once, skipping ``finally`` blocks,
pytest's session end (where runs and baselines are saved) and ``ab``'s clean-up of its
worktrees. Inside ``terminate_as_interrupt()`` SIGTERM raises KeyboardInterrupt in the
main thread instead, so it takes the same path as Ctrl-C. A handler someone else
installed is left alone, and the previous handler is restored on the way out.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["TerminatedError", "install", "restore", "terminate_as_interrupt"]


class TerminatedError(KeyboardInterrupt):
    """The KeyboardInterrupt that SIGTERM raises."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise TerminatedError(f"terminated by signal {signum} (SIGTERM), handled as Ctrl-C")


def install() -> object | None:
    """Handle SIGTERM as Ctrl-C from now on, if it has Python's default handler and this is the main thread;
    returns what ``restore`` needs (None when nothing was installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, _raise)


def restore(previous: object | None) -> None:
    if previous is not None and signal.getsignal(signal.SIGTERM) is _raise:
        signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    previous = install()
    try:
        yield
    finally:
        restore(previous)
