"""Reading a JSON file someone gave us, bounded: every results, baseline, asv and expectations file is read here;
and the text our large JSON files hold (``lined``).

A path on a command line can name anything: ``/dev/zero`` (read until the kernel kills the process), a named
pipe (``open`` waits for a writer for ever), a file of a million records, or one nested a hundred thousand
deep (the parser's RecursionError). Each is refused here with a ``JsonFileError`` before it costs more than a
``stat``: only a regular file is read (the check is made on the opened descriptor, which is opened without
blocking), at most ``MAX_BYTES`` of it, and a nesting deeper than Python's parser follows is an error, not a
traceback. Callers turn the error into their own kind, adding the fix that fits their file.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

__all__ = ["MAX_BYTES", "JsonFileError", "Problem", "lined", "read_json", "size_of"]

#: The largest file read: 1 GiB. The largest baseline seen in use is 135 MB (10 runs of a large suite, 18 s to
#: save), so this is about seven times that; reading a file this size already takes several GB of memory.
MAX_BYTES: Final = 1 << 30
_MB: Final = 1 << 20

Problem = Literal["missing", "directory", "special", "unreadable", "too large", "not text", "not json", "too deep"]


class JsonFileError(Exception):
    """A file that cannot be read as JSON; ``problem`` says why, the message (``{path} ...``) what was found."""

    def __init__(self, path: Path, problem: Problem, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if problem == "unreadable" else f"{path} {detail}")
        self.path = path
        self.problem = problem
        self.detail = detail


def lined(value: Any, depth: int) -> str:
    """``value`` as JSON text, indented one space a level down to ``depth`` levels of objects (with string keys) and
    arrays, each value below them on one line, compact: a results file is one line a record (a diff shows which
    records changed), written by the C encoder. ``json.dumps(indent=...)`` runs Python's own encoder instead, about
    ten times slower: 5,000 records took 2.5 s to write twice at a session's end (2026-12-02, the 2-vCPU
    development machine)."""
    if isinstance(value, list) and value and depth > 0:
        parts, ends = [lined(item, depth - 1) for item in value], "[]"
    elif isinstance(value, dict) and value and depth > 0 and all(isinstance(key, str) for key in value):
        parts, ends = [f"{json.dumps(key)}: {lined(item, depth - 1)}" for key, item in value.items()], "{}"
    else:
        return json.dumps(value, separators=(",", ":"))
    # compact JSON holds no newline (one in a string is escaped), so each newline here is one of the layout's
    body = ",\n".join(parts).replace("\n", "\n ")
    return f"{ends[0]}\n {body}\n{ends[1]}"


def size_of(path: Path) -> int | None:
    """The size of ``path`` when it is a regular file (following links), else None; never opens it."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def read_json(path: Path, *, limit: int = MAX_BYTES, precheck: Callable[[str], None] | None = None) -> Any:
    """The JSON value in file ``path``; JsonFileError when it is missing, not a regular file, over ``limit``
    bytes, not UTF-8, not JSON, or nested deeper than the parser follows. ``precheck`` sees the text before it is
    parsed (parsing a large file is what takes the time and memory), and may raise to refuse it."""
    path = Path(path)
    text = _read_text(path, limit)
    if precheck is not None:
        precheck(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(path, "not json", f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise JsonFileError(
            path, "too deep", "nests lists or objects deeper than a JSON reader follows (results nest a few levels)"
        ) from None


def _read_text(path: Path, limit: int) -> str:
    # O_NONBLOCK: opening a named pipe waits for a writer otherwise; the file's kind is then checked on the
    # descriptor itself, so a file swapped in between a check and the open cannot slip through.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise JsonFileError(path, "missing", "does not exist") from None
    except IsADirectoryError:
        raise JsonFileError(path, "directory", "is a directory") from None
    except OSError as exc:
        raise JsonFileError(path, "unreadable", f"cannot read it: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise JsonFileError(path, "directory", "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise JsonFileError(path, "special", f"is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise JsonFileError(path, "too large", _too_large(info.st_size, limit))
        with os.fdopen(fd, "rb") as f:
            fd = -1  # the file object closes it now
            data = f.read(limit + 1)  # a file that grew since fstat is still read no further than the limit
    except OSError as exc:
        raise JsonFileError(path, "unreadable", f"cannot read it: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise JsonFileError(path, "too large", _too_large(len(data), limit))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise JsonFileError(path, "not text", "is not a UTF-8 text file") from None


def _too_large(size: int, limit: int) -> str:
    return f"is {size / _MB:,.0f} MB, over the {limit / _MB:,.0f} MB that pytest-gpuperf reads"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"
