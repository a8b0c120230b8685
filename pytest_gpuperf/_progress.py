"""Progress lines for long work: what is happening now, and how far along it is.

Extra rounds, confirmation runs, ``pytest-gpuperf ab`` and ``history record`` can work for
minutes without a word. Each says what it does through one ``Progress``, one full line at a
time: ``gpuperf: confirming 3 tests that looked slower (run 2 of 4, 14 s)``. Where the lines go
is the caller's: inside pytest its terminal writer on a line of their own (``plugin/_gate.py``,
after ``ensure_newline``, so that pytest's own progress line is never cut), in the command line
standard output; ``-q`` gives ``Progress(None)``, which says nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import final

__all__ = ["Progress", "format_elapsed"]


def format_elapsed(seconds: float) -> str:
    """``3.5 s``, ``14 s``, ``2 min 5 s``, ``1 h 2 min``: a wall time for a person watching."""
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f} s"
    whole = round(seconds)
    if whole < 100:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@final
class Progress:
    """Writes ``<prefix>: <text>`` lines through ``write``; with ``write=None`` it is silent (``-q``).

    ``elapsed`` counts from when the Progress was made: make one per piece of long work.
    """

    def __init__(
        self,
        write: Callable[[str], None] | None,
        *,
        prefix: str = "gpuperf",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._prefix = prefix
        self._clock = clock
        self._start = clock()
        self._steps = 0

    def elapsed(self) -> float:
        return self._clock() - self._start

    def say(self, text: str) -> None:
        """One line, ``<prefix>: <text>``."""
        self.line(f"{self._prefix}: {text}" if self._prefix else text)

    def line(self, text: str) -> None:
        """One line as it is (a continuation of the line before, say)."""
        if self._write is not None:
            self._write(text)

    def step(self, what: str, number: int, total: int | str, noun: str) -> None:
        """Step ``number`` of ``total`` starts: ``<prefix>: <what> (<noun> 2 of 4, 14 s)``.

        The time is since the Progress was made, left out on its first step (it would read 0 s).
        ``total`` may be words (``"at most 4"``) where the work may end early.
        """
        total_text = str(total) if isinstance(total, int) else total
        took = f", {format_elapsed(self.elapsed())}" if self._steps else ""
        self._steps += 1
        self.say(f"{what} ({noun} {number} of {total_text}{took})")
