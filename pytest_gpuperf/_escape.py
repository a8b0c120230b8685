"""Text from a file, made safe to print: no terminal control codes, no line that a CI log takes as a command.

A results file is data anyone can write, and its strings (test names, parameters, machine names, notes) reach
the terminal and CI logs. A crafted one could send terminal control codes (``ESC[2J`` clears the screen, ``\\r``
overwrites a line, ``\\x9b`` is a one-byte CSI) or put a line starting ``::`` into a GitHub Actions log, which
the runner runs as a workflow command (``::error::``, ``::add-mask::``, ``::stop-commands::``). ``printable``
writes every control character as its escape (``\\x1b``, ``\\r``, ``\\n``, as ``repr`` does) and a leading
``::`` as ``\\x3a:``. Renderers apply it to each value from a file (table cells, lines); the ``pytest-gpuperf``
command line also prints everything through ``EscapedStream``, which keeps newlines; and the annotations we
print on purpose go past it (``print_command``) with their data escaped by GitHub's own rules.
"""

from __future__ import annotations

import io
import re
import sys
from typing import Final, TextIO

__all__ = ["EscapedStream", "print_command", "printable"]

#: C0 controls (but newline, in EscapedStream; and tab, which only moves the cursor right), DEL, C1 controls,
#: and the Unicode line and paragraph separators, which some terminals and log viewers break lines at.
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_NEWLINE_TOO: Final = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
#: A line a CI runner would read as a workflow command: ``::`` after any leading blanks.
_COMMAND: Final = re.compile(r"^(\s*):(?=:)", re.MULTILINE)


def _escaped(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def printable(text: object) -> str:
    """``text`` as one line that prints as written: control characters (newlines too) as escapes, a leading
    ``::`` neutralised."""
    return _COMMAND.sub(r"\1\\x3a", _NEWLINE_TOO.sub(_escaped, str(text)))


class EscapedStream(io.TextIOBase):
    """A text stream that writes what it is given to ``raw`` (the command line's stdout and stderr), its newlines
    kept, every other control character as an escape and no line starting ``::``, knowing across writes whether a
    line has begun."""

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw
        self._line_start = True

    def write(self, text: str) -> int:
        escaped = _CONTROL.sub(_escaped, text)
        if not self._line_start and "\n" in escaped:
            head, _, tail = escaped.partition("\n")
            escaped = head + "\n" + _COMMAND.sub(r"\1\\x3a", tail)
        elif self._line_start:
            escaped = _COMMAND.sub(r"\1\\x3a", escaped)
        if escaped:
            self._line_start = escaped.endswith("\n") or (self._line_start and not escaped.strip())
        self.raw.write(escaped)
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.raw.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.raw.encoding


def print_command(line: str) -> None:
    """Print a workflow command we write on purpose (a GitHub annotation, its data already escaped by GitHub's
    rules) past the command line's ``EscapedStream``."""
    stream = sys.stdout
    raw = stream.raw if isinstance(stream, EscapedStream) else stream
    raw.write(line + "\n")
    raw.flush()
