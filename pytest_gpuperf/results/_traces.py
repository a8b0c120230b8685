"""Traces of the profiled calls on disk: where each goes, its file name, and the baseline's own.

A work profile taken in this process can write the trace of its profiled calls (Chrome's JSON trace format,
which https://ui.perfetto.dev and ``chrome://tracing`` open; ``WorkProfile.write_trace``). It is never part of
a results file, so what a later comparison needs is written beside the results:

    traces/<run id>/<name>.base.json, <name>.head.json   a run's (and ``ab``'s) traces, plain JSON
    baselines/<baseline>.traces/<name>.json.gz           the trace of each test of a saved baseline, gzipped

``<name>`` comes from the record's key (a test id) by ``trace_name``: letters, digits, ``.``, ``_`` and ``-``,
never a path, with a short hash of the key so that two keys never share a file. A baseline keeps one trace per
test, the newest save's (every run of a baseline is of the same code); a baseline replaced with
``--gpuperf-replace`` loses the old traces with its old runs. Every file is written atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from ..measuring import WorkProfile
from ._files import atomic_export

__all__ = [
    "TRACE_LEVELS",
    "baseline_trace",
    "baseline_traces_dir",
    "save_baseline_traces",
    "trace_name",
    "write_trace",
]

#: ``--gpuperf-trace`` and ``ab --trace``: the failing rows' traces, every row's, or none.
TRACE_LEVELS: Final = ("failing", "all", "off")
#: A baseline's traces are gzipped (Perfetto and chrome://tracing open ``.json.gz`` as they are).
BASELINE_TRACE_SUFFIX: Final = ".json.gz"
#: Runs of anything but letters, digits, ``.``, ``_`` and ``-``, and runs of dots (no ``..`` even inside a name).
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+|\.{2,}")
#: Characters of a name kept from the key; the hash after them tells keys apart.
_NAME_CHARS: Final = 80


def trace_name(key: str) -> str:
    """A file name for the traces of ``key`` (a test id, a workload's name): nothing a test names can make it a
    path (``/``, ``..``) or a hidden file, and two keys never give the same name."""
    readable = _UNSAFE.sub("_", key).strip("._-")[:_NAME_CHARS] or "trace"
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def write_trace(profile: WorkProfile | None, path: Path, *, compress: bool = False) -> bool:
    """Write ``profile``'s trace to ``path`` (atomically; gzipped when ``compress``); False where there is none to
    write (no profile, or one read from a file). A trace that cannot be written raises ResultsError."""
    writer = None if profile is None else profile.write_trace
    if writer is None:
        return False
    atomic_export(path, writer, compress=compress)
    return True


def baseline_traces_dir(baseline: Path) -> Path:
    """Where the traces of the baseline file ``baseline`` are kept: ``baselines/main.traces/`` for
    ``baselines/main.json``."""
    return baseline.with_name(f"{baseline.stem}.traces")


def baseline_trace(baseline: Path, key: str) -> Path | None:
    """The saved trace of ``key`` beside the baseline file ``baseline``, or None when it was saved without one."""
    path = baseline_traces_dir(baseline) / f"{trace_name(key)}{BASELINE_TRACE_SUFFIX}"
    return path if path.is_file() else None


def save_baseline_traces(
    baseline: Path, profiles: Iterable[tuple[str, WorkProfile | None]], *, fresh: bool = False
) -> int:
    """Keep each key's trace beside the baseline file ``baseline`` (replacing that key's older one); ``fresh``: the
    baseline was started afresh, so the traces of its old runs go first. Returns how many were written."""
    folder = baseline_traces_dir(baseline)
    if fresh and folder.is_dir():
        for old in folder.glob(f"*{BASELINE_TRACE_SUFFIX}"):
            with contextlib.suppress(OSError):
                old.unlink()
    written = 0
    for key, profile in profiles:
        written += write_trace(profile, folder / f"{trace_name(key)}{BASELINE_TRACE_SUFFIX}", compress=True)
    return written
