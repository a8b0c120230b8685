"""Traces to open for the gate's rows: each side's profiled calls as a Chrome JSON trace, and where it is.

For a failing row (``GateResult.failing``), or every row with ``all``, the head's trace is written from its
work profile (taken in this process, ``WorkProfile.write_trace``) under the run's folder of traces
(``results/_traces.py``). The base's is written the same way where base was profiled in this process too
(``ab``: both sides in the same paired rounds); on the stored route it is the one kept beside the baseline
when it was saved, or the row says why there is none. Writing a trace never changes a verdict: one that
cannot be written (a full disk: ``results.write_trace`` publishes no trace its writer cut short) says why in its
place, and a folder of traces left empty is removed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..measuring import WorkProfile, optional
from ..results import Record, ResultsError, baseline_trace, short_test, trace_file, write_trace
from ._compare import GateResult, Row

__all__ = [
    "RowTraces",
    "baseline_side",
    "rows_to_trace",
    "trace_records",
    "trace_rows",
]

#: Why a stored baseline's row has no base trace.
NO_BASELINE_TRACE: Final = "the baseline was saved without traces (before this version, or --gpuperf-trace=off)"
#: A side's profiles exist, but none was taken in this process (their writers are not kept in a file).
_ELSEWHERE: Final = "measured in another process (a pytest-xdist worker), whose profiler is not kept"
#: A side's profiles were reduced to keep within their budget: no profiled call was read, so there is no trace.
_REDUCED: Final = "its profiled calls were not read, to keep within the profile's budget ("
#: How a side's why starts when its trace was written and failed.
_NOT_WRITTEN: Final = "could not be written: "


@dataclass(frozen=True)
class RowTraces:
    """Where one row's traces are: each side's file, or why that side has none."""

    key: str
    label: str  # the row as the table names it: ``test_step [cpu]``
    base: Path | None
    head: Path | None
    base_why: str = ""
    head_why: str = ""

    def line(self) -> str:
        """``trace of test_step [cpu]: base PATH, head PATH``; a side without a file says why instead."""

        def side(name: str, path: Path | None, why: str) -> str:
            return f"{name} {path}" if path is not None else f"no {name} trace: {why}"

        sides = f"{side('base', self.base, self.base_why)}, {side('head', self.head, self.head_why)}"
        return f"trace of {self.label}: {sides}"

    def failure(self) -> str:
        """Why a side's trace could not be written (``cannot write PATH: ...``), or "" when none failed."""
        return next((why.removeprefix(_NOT_WRITTEN) for why in (self.base_why, self.head_why) if _failed(why)), "")

    def to_dict(self) -> dict[str, Any]:
        """The JSON row's ``traces``: each side's path, or null."""
        return {"base": optional(self.base, str), "head": optional(self.head, str)}


def rows_to_trace(result: GateResult, level: str) -> list[Row]:
    """The rows whose traces ``level`` asks for: the failing ones (``failing``), every one (``all``), none."""
    if level == "all":
        return list(result.rows)
    return list(result.failing) if level == "failing" else []


def _written(profiles: Sequence[WorkProfile], path: Path) -> tuple[Path | None, str]:
    """The newest profile of this process written to ``path``, or why not."""
    if not profiles:
        return None, "no work profile on this side (not measured, or --gpuperf-profile=off)"
    mine = [profile for profile in profiles if profile.write_trace is not None]
    if not mine:
        reduced = next((profile.reduced for profile in reversed(profiles) if profile.reduced), "")
        return None, f"{_REDUCED}{reduced})" if reduced else _ELSEWHERE
    try:
        write_trace(mine[-1], path)
    except ResultsError as exc:  # a full disk, an unwritable folder: the message names the file and the fix
        return None, f"{_NOT_WRITTEN}{exc}"
    except Exception as exc:  # noqa: BLE001 - a trace that cannot be written never changes the verdicts
        return None, f"{_NOT_WRITTEN}{type(exc).__name__}: {exc}"
    return path, ""


def _failed(why: str) -> bool:
    return why.startswith(_NOT_WRITTEN)


def _drop_if_empty(folder: Path) -> None:
    """A folder of traces that none was written into goes (``rmdir`` removes only an empty folder)."""
    with contextlib.suppress(OSError):
        folder.rmdir()


#: Where a row's base trace is: written to the given path, or found elsewhere (the stored baseline's).
BaseSide = Callable[[Row, Path], tuple[Path | None, str]]


def profiled_base(row: Row, path: Path) -> tuple[Path | None, str]:
    """``ab``: base was profiled in this process, in the same paired rounds as head."""
    return _written(row.base_profiles, path)


def baseline_side(baseline: Path) -> BaseSide:
    """The stored route: the trace kept beside the baseline file ``baseline`` when it was saved."""

    def side(row: Row, path: Path) -> tuple[Path | None, str]:
        found = baseline_trace(baseline, row.key)
        return (found, "") if found is not None else (None, NO_BASELINE_TRACE)

    return side


def trace_rows(rows: Sequence[Row], folder: Path, base: BaseSide = profiled_base) -> list[RowTraces]:
    """Write the traces of ``rows`` into ``folder``: ``<name>.head.json`` and, where base is written here,
    ``<name>.base.json`` (``results.trace_file``: nothing a test names leaves the folder)."""
    out = []
    for row in rows:
        base_path, base_why = base(row, folder / trace_file(row.key, "base"))
        head_path, head_why = _written(row.head_profiles, folder / trace_file(row.key, "head"))
        label = f"{short_test(row)} [{row.device}]"
        out.append(RowTraces(row.key, label, base_path, head_path, base_why, head_why))
    _drop_if_empty(folder)
    return out


def trace_records(records: Iterable[Record], folder: Path) -> tuple[int, list[str]]:
    """``--gpuperf-trace=all`` without a gate: every record's trace as ``<name>.head.json`` in ``folder`` (this run
    is the head of any later comparison); returns how many were written, and why each that failed did."""
    written, failures = 0, []
    for record in records:
        profile = record.measurement.profile
        path, why = _written(() if profile is None else (profile,), folder / trace_file(record.key, "head"))
        written += path is not None
        if _failed(why):
            failures.append(why.removeprefix(_NOT_WRITTEN))
    _drop_if_empty(folder)
    return written, failures
