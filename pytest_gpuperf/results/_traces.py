"""Traces of the profiled calls on disk: where each goes, its file name, the baseline's own, and a session's copies.

A work profile taken in this process can write the trace of its profiled calls (Chrome's JSON trace format,
which https://ui.perfetto.dev and ``chrome://tracing`` open; ``WorkProfile.write_trace``). It is never part of
a results file, so what a later comparison needs is written beside the results:

    traces/<run id>/<name>.base.json, <name>.head.json   a run's (and ``ab``'s) traces, plain JSON
    baselines/<baseline>.traces/<name>.json.gz           the trace of each test of a saved baseline, gzipped

``<name>`` comes from the record's key (a test id) by ``trace_name``: letters, digits, ``.``, ``_`` and ``-``,
never a path, with a short hash of the key so that two keys never share a file; ``trace_file`` adds the ending.
A baseline keeps one trace per test, the newest save's (every run of a baseline is of the same code); a baseline
replaced with ``--gpuperf-replace`` loses the old traces with its old runs. Every file is written atomically, and
published only when whole: torch's writer does not report a full disk (``atomic_export``). Only a file named as
``trace_file`` names them is ever deleted (``remove_traces``), and never through a symbolic link.

A profile's writer holds the profiler that took it, and with it every event of the profiled calls (about 1 MiB for
a small training step, ``bench/evidence/cost.md``), so a session's record keeps none (``released``): where the
session's end writes traces (saving a baseline, comparing, ``--gpuperf-trace=all``), the trace is written once as
the record is made, gzipped, into the session's spool (``TraceSpool``:
``traces/.spool.gpuperf-<pid>-<8 characters>.tmp/``, removed at the session's end, a killed session's by the next
that spools), and the record's writer copies it from there, as often as asked (the baseline's, then the run's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .._jsonfile import JsonFileError, read_json, size_of
from ..measuring import PROFILE, Measurement, WorkProfile
from ._files import ResultsError, atomic_export, real_folder, remove_ours, stale_temporary

if TYPE_CHECKING:
    from ._store import ResultsDir

__all__ = [
    "TRACE_LEVELS",
    "TraceSpool",
    "baseline_trace",
    "baseline_traces_dir",
    "released",
    "remove_traces",
    "save_baseline_traces",
    "trace_file",
    "trace_name",
    "write_trace",
]

#: ``--gpuperf-trace`` and ``ab --trace``: the failing rows' traces, every row's, or none.
TRACE_LEVELS: Final = ("failing", "all", "off")
#: Each trace file's ending after its name: a run's two sides (``traces/<run id>/``, plain JSON) and a baseline's
#: (gzipped: Perfetto and chrome://tracing open ``.json.gz`` as they are).
TRACE_SUFFIXES: Final = {"base": ".base.json", "head": ".head.json", "baseline": ".json.gz"}
#: Runs of anything but letters, digits, ``.``, ``_`` and ``-``, and runs of dots (no ``..`` even inside a name).
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+|\.{2,}")
#: How the name of a session's spool folder starts: named as our temporaries are (``_files._TEMPORARY``), with its
#: session's pid, so that a killed session's is told from a live one's.
_SPOOL: Final = ".spool.gpuperf-"
#: The spool's gzip level: its copies are written as the tests run, and most are never read (a comparison writes only
#: its failing rows' traces; a baseline keeps its copies as they are). gzip's fastest level takes a seventh of the
#: time of its smallest (9), for files a third larger (a 1.2 MB trace of five MLP training steps with Python's tracer:
#: 0.03 s and 132 kB against 0.20 s and 98 kB; 2026-12-02, the 2-vCPU development machine).
SPOOL_LEVEL: Final = 1
#: Characters of a name kept from the key; the hash after them tells keys apart.
_NAME_CHARS: Final = 80
#: Every name ``trace_file`` gives, and nothing else: ``trace_name``'s kept characters (a letter or digit first, no
#: ``..``), its hash, an ending.
_TRACE_FILE: Final = re.compile(
    rf"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{{0,{_NAME_CHARS - 1}}}-[0-9a-f]{{8}}"
    rf"(?:{'|'.join(re.escape(suffix) for suffix in TRACE_SUFFIXES.values())})"
)


def trace_name(key: str) -> str:
    """A file name for the traces of ``key`` (a test id, a workload's name): nothing a test names can make it a
    path (``/``, ``..``) or a hidden file, and two keys never give the same name."""
    readable = _UNSAFE.sub("_", key).strip("._-")[:_NAME_CHARS] or "trace"
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def trace_file(key: str, side: str) -> str:
    """The file name of ``key``'s trace: ``side`` is ``base`` or ``head`` (a run's), or ``baseline``."""
    return f"{trace_name(key)}{TRACE_SUFFIXES[side]}"


def remove_traces(top: Path, below: str, *, rmdir: bool = False) -> list[str]:
    """Delete the traces in the folder ``top/below`` (and, ``rmdir``, the folder once empty), only files named as
    ``trace_file`` names them and never through a symbolic link (``results._files.remove_ours``); returns the names
    of what else is in it."""
    return remove_ours(top, below, lambda name: _TRACE_FILE.fullmatch(name) is not None, rmdir=rmdir)


def write_trace(profile: WorkProfile | None, path: Path, *, compress: bool = False) -> bool:
    """Write ``profile``'s trace to ``path`` (atomically; gzipped when ``compress``); False where there is none to
    write (no profile, or one read from a file). A trace that cannot be written, or that its writer left cut
    short, raises ResultsError."""
    writer = None if profile is None else profile.write_trace
    if writer is None:
        return False
    if compress and isinstance(writer, _Spooled):  # gzipped already, and checked whole when it was spooled
        writer.copy(path)
    else:
        atomic_export(path, writer, whole=_whole_trace, compress=compress)
    return True


def _whole_trace(path: Path) -> str:
    """What is wrong with the Chrome JSON trace its writer left at ``path`` ("" when nothing): none, an empty file,
    or one that is not one whole JSON value (cut short). Parsing it is sure, and a step's trace is small."""
    size = size_of(path)
    if not size:
        return "left no file" if size is None else "left the file empty"
    try:
        read_json(path)
    except JsonFileError as exc:
        return (
            f"left {size:,} bytes that are not whole JSON"
            if exc.problem == "not json"
            else f"left a file that {exc.detail}"
        )
    return ""


def baseline_traces_dir(baseline: Path) -> Path:
    """Where the traces of the baseline file ``baseline`` are kept: ``baselines/main.traces/`` for
    ``baselines/main.json``."""
    return baseline.with_name(f"{baseline.stem}.traces")


def baseline_trace(baseline: Path, key: str) -> Path | None:
    """The saved trace of ``key`` beside the baseline file ``baseline``, or None when it was saved without one."""
    path = baseline_traces_dir(baseline) / trace_file(key, "baseline")
    return path if path.is_file() else None


def save_baseline_traces(
    baseline: Path, profiles: Iterable[tuple[str, WorkProfile | None]], *, fresh: bool = False
) -> int:
    """Keep each key's trace beside the baseline file ``baseline`` (replacing that key's older one); ``fresh``: the
    baseline was started afresh, so the traces of its old runs go first (only the files named as ours). Returns how
    many were written; ResultsError where the folder is a symbolic link (nothing is written or deleted through it)."""
    folder = real_folder(baseline.parent, baseline_traces_dir(baseline).name)
    if fresh:
        remove_traces(baseline.parent, folder.name)
    written = 0
    for key, profile in profiles:
        written += write_trace(profile, folder / trace_file(key, "baseline"), compress=True)
    return written


class TraceSpool:
    """A session's copies of its records' traces in the results directory ``store``: each record's written once,
    gzipped, as the record is made (``keep``), so that no record keeps its profiler until the session's end, and its
    trace can be written from the copy as often as asked (the baseline's, and the run's). Its folder is made with the
    first copy, after the spools of killed sessions are removed; ``close`` removes it with every copy in it, and
    ``traces/`` too where the spool made it and nothing else is in it."""

    def __init__(self, store: ResultsDir) -> None:
        self._store = store
        self.name = f"{_SPOOL}{os.getpid()}-{secrets.token_hex(4)}.tmp"
        self._folder: Path | None = None
        self._problem = ""  # why the folder could not be made
        self._made_top = False

    def keep(self, key: str, measurement: Measurement) -> Measurement:
        """``measurement`` (to be recorded under ``key``) with its profile's trace copied here and the profile's
        writer writing from the copy, the profiler released; where the copy cannot be written (a full disk), the
        writer raises ResultsError with why."""
        profile = measurement.profile
        if profile is None or profile.write_trace is None:
            return measurement
        writer: Callable[[str], object]
        try:
            path = self._open() / trace_file(key, "baseline")
            atomic_export(path, profile.write_trace, whole=_whole_trace, compress=True, compresslevel=SPOOL_LEVEL)
            writer = _Spooled(path)
        except ResultsError as exc:
            writer = _Unwritten(str(exc))
        except Exception as exc:  # noqa: BLE001 - a trace that cannot be written never fails the test
            writer = _Unwritten(f"{type(exc).__name__}: {exc}")
        return _with_writer(measurement, writer)

    def _open(self) -> Path:
        if self._folder is None and not self._problem:
            top = self._store.traces_dir
            self._made_top = not top.is_dir()
            _remove_dead_spools(top)
            try:
                self._folder = self._store.traces_of(self.name)
            except ResultsError as exc:
                self._problem = str(exc)
        if self._folder is None:
            raise ResultsError(self._problem)
        return self._folder

    def close(self) -> None:
        """Remove the copies and their folder (only files named as ours, never through a symbolic link)."""
        if self._folder is None:
            return
        top = self._store.traces_dir
        with contextlib.suppress(ResultsError):
            remove_traces(top, self.name, rmdir=True)
        if self._made_top:
            with contextlib.suppress(OSError):  # only an empty folder goes
                top.rmdir()
        self._folder = None


def released(measurement: Measurement) -> Measurement:
    """``measurement`` without its profile's trace writer, which holds the profiler that took it and every event of
    the profiled calls: a record that no trace will be written from keeps only its figures."""
    return _with_writer(measurement, None)


def _with_writer(measurement: Measurement, writer: Callable[[str], object] | None) -> Measurement:
    profile = measurement.profile
    if profile is None or profile.write_trace is None:
        return measurement
    return measurement.with_reading(PROFILE, dataclasses.replace(profile, write_trace=writer))


@dataclasses.dataclass(frozen=True)
class _Spooled:
    """A trace writer from a session's gzipped copy at ``path``: it writes the trace, plain JSON, where it is told."""

    path: Path

    def __call__(self, target: str) -> None:
        with open(target, "wb") as out:  # a write's error (a full disk) is the target's: ``atomic_export`` says so
            for chunk in self._chunks():
                out.write(chunk)

    def copy(self, target: Path) -> None:
        """Publish the gzipped copy itself at ``target`` (atomically): a baseline's trace, kept as the spool's gzip
        level wrote it, rather than unpacked, parsed again and packed at another (5.7 ms a trace)."""
        expected = size_of(self.path)
        if expected is None:
            raise self._unreadable("it is gone")
        atomic_export(target, lambda name: shutil.copyfile(self.path, name), whole=lambda p: _copied(p, expected))

    def _chunks(self) -> Iterator[bytes]:
        """The trace, read from the copy a MiB at a time; ResultsError where the copy cannot be read."""
        try:
            with gzip.open(self.path, "rb") as copy:
                while chunk := copy.read(2**20):
                    yield chunk
        except (OSError, EOFError) as exc:  # EOFError: a gzip file cut short
            raise self._unreadable(getattr(exc, "strerror", None) or str(exc)) from None

    def _unreadable(self, why: str) -> ResultsError:
        return ResultsError(
            f"cannot read {self.path}, where this session kept the trace: {why}; "
            "leave the results directory alone while a session runs, and run again"
        )


def _copied(path: Path, expected: int | None) -> str:
    """What is wrong with a copy at ``path`` of a file of ``expected`` bytes ("" when nothing)."""
    size = size_of(path)
    return "" if size == expected else f"left {size or 0:,} of {expected or 0:,} bytes"


@dataclasses.dataclass(frozen=True)
class _Unwritten:
    """The writer of a trace whose copy could not be written as its record was kept: it says why."""

    why: str

    def __call__(self, target: str) -> None:
        raise ResultsError(self.why)


def _remove_dead_spools(traces_dir: Path) -> None:
    """The spools of killed sessions in ``traces_dir`` (their pid gone), each with the copies in it."""
    if not traces_dir.is_dir():
        return
    for folder in traces_dir.glob(f"{_SPOOL}*"):
        if stale_temporary(folder.name) and folder.is_dir() and not folder.is_symlink():
            with contextlib.suppress(ResultsError):
                remove_traces(traces_dir, folder.name, rmdir=True)
