"""Traces of the profiled calls on disk: where each goes, its file name, and the baseline's own.

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
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from .._jsonfile import JsonFileError, read_json, size_of
from ..measuring import WorkProfile
from ._files import atomic_export, real_folder, remove_ours

__all__ = [
    "TRACE_LEVELS",
    "baseline_trace",
    "baseline_traces_dir",
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
