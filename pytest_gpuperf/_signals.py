"""SIGTERM handled as Ctrl-C: CI timeouts and cancels send SIGTERM, and a run stopped so must save what it has.

Python's default for SIGTERM ends the process at once, skipping ``finally`` blocks,
pytest's session end (where runs and baselines are saved) and ``ab``'s clean-up of its
worktrees. Inside ``terminate_as_interrupt()`` SIGTERM raises KeyboardInterrupt in the
main thread instead, so it takes the same path as Ctrl-C. A handler someone else
installed is left alone, and the previous handler is restored on the way out.

``interrupts_deferred()`` is for the end-of-session save (a 135 MB baseline takes 18 s to
merge and write): a first SIGINT or SIGTERM inside it is held, with one line saying so,
until the block ends, so that the save completes and nothing is lost; a second one raises
at once, and the atomic writes then leave every file as it was. The caller reads which
signal was held and exits as interrupted.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Held", "TerminatedError", "install", "interrupts_deferred", "restore", "terminate_as_interrupt"]


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


class Held:
    """What ``interrupts_deferred`` held: the name of the first signal received inside it (None if none came). (A
    plain class: this module is loaded at every session's start, where a dataclass costs its creation.)"""

    def __init__(self) -> None:
        self.signal: str | None = None


@contextmanager
def interrupts_deferred(doing: str) -> Iterator[Held]:
    """Hold the first SIGINT or SIGTERM received in the block until it ends (``doing`` names the work in the line
    printed then); a second one raises KeyboardInterrupt (TerminatedError for SIGTERM) at once. Signals with a
    handler someone else installed, and every signal outside the main thread, are left alone."""
    held = Held()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if held.signal is not None:
            if signum == signal.SIGTERM:
                raise TerminatedError(f"terminated by signal {signum} (SIGTERM) a second time while {doing}")
            raise KeyboardInterrupt
        held.signal = name
        # os.write, not print: a signal handler must not re-enter a buffered stream that the save may be using.
        os.write(2, f"\ngpuperf: {name} while {doing}; finishing it first (send it again to abandon it)\n".encode())

    ours = (signal.default_int_handler, signal.SIG_DFL, _raise)
    previous = {
        signum: signal.signal(signum, hold)
        for signum in (signal.SIGINT, signal.SIGTERM)
        if signal.getsignal(signum) in ours
    }
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
