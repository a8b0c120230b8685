"""Results files on disk: written atomically, read with a clear error for every way a file can be wrong.

A results file is one Run (``--gpuperf-json``, ``runs/*.json``); a baseline file holds
several runs of the same code (see ``_record.py`` for the schema and its history). A
reader sees the old file or the new one, never half of one; a file that cannot be
read is reported and left as it is.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._record import BASELINE_SCHEMA, BASELINE_SCHEMA_VERSION, SCHEMA, SCHEMA_VERSION, Run

__all__ = ["ResultsError", "atomic_write_text", "load_run", "load_runs", "save_baseline_file", "save_run"]


class ResultsError(Exception):
    """A results file that cannot be read or written; the message names the file and the fix."""


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ResultsError(f"cannot write {path}: {exc.strerror or exc}; choose a writable location") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ResultsError(f"cannot write {path}: {exc.strerror or exc}; choose a writable location") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_run(path: Path, run: Run) -> None:
    atomic_write_text(path, json.dumps(run.to_dict(), indent=1, sort_keys=False) + "\n")


def save_baseline_file(path: Path, name: str, runs: Sequence[Run]) -> None:
    """Write a named baseline: several runs of the same code, oldest first."""
    data = {
        "schema": BASELINE_SCHEMA,
        "version": BASELINE_SCHEMA_VERSION,
        "name": name,
        "runs": [r.to_dict() for r in runs],
    }
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=False) + "\n")


def load_run(path: Path) -> Run:
    """Read a results file; a missing, corrupt or foreign file raises ResultsError naming it and the fix."""
    path = Path(path)
    data = _read_json(path)
    _check_schema(path, data, SCHEMA, SCHEMA_VERSION)
    return _parse_run(path, data)


def load_runs(path: Path) -> list[Run]:
    """Read a results file (one run) or a baseline file (several runs); errors name the file and the fix."""
    path = Path(path)
    data = _read_json(path)
    if isinstance(data, dict) and data.get("schema") == BASELINE_SCHEMA:
        _check_schema(path, data, BASELINE_SCHEMA, BASELINE_SCHEMA_VERSION)
        runs = data.get("runs")
        if not isinstance(runs, list) or not runs:
            raise ResultsError(f'{path} is damaged: its "runs" list is missing or empty; save the baseline again')
        for i, run in enumerate(runs):
            _check_schema(path, run, SCHEMA, SCHEMA_VERSION, where=f"run {i + 1} of ")
        return [_parse_run(path, run) for run in runs]
    _check_schema(path, data, SCHEMA, SCHEMA_VERSION)
    return [_parse_run(path, data)]


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such results file") from None
    except IsADirectoryError:
        raise ResultsError(f"{path} is a directory; give the path of a results or baseline .json file") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ResultsError(
            f"{path} is not a text file, so not a results file; point at one written by pytest-gpuperf"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); it was left as it is: "
            "delete or restore it, or save a new baseline under another name"
        ) from None


def _check_schema(path: Path, data: Any, schema: str, version: int, where: str = "") -> None:
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise ResultsError(
            f'{where}{path} is not a pytest-gpuperf results file (no "schema": "{schema}"); '
            "point at one written by --gpuperf-json, --gpuperf-save or the results directory"
        )
    found = data.get("version")
    if found != version:
        raise ResultsError(
            f"{where}{path} has {schema} schema version {found!r}, this pytest-gpuperf reads version {version}; "
            "re-record it with this version, or read it with the pytest-gpuperf that wrote it"
        )


def _parse_run(path: Path, data: Mapping[str, Any]) -> Run:
    try:
        return Run.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"{path} is damaged: a record lacks or mangles {exc}; re-record it") from None
