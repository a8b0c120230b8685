"""Records and the versioned results file.

A Record is one measurement of one test on one device, with everything needed to
judge it later. A results file is one run: its fingerprint and its records.

A named baseline keeps several runs of the same code (rounds measured in separate
processes), so that a comparison can learn how much results vary from run to run;
its file holds a list of run dicts, each exactly as in a results file.

Schema history (bump the version and say why here):

* results 1 - first version: run fingerprint, settings, records with raw samples.
  Optional keys added while 1 was unreleased, absent in older files: a record's
  ``"gate"`` (tolerance, noise floor and the machine's background load while
  measuring) and a run's ``"interrupted"``.
* baseline 1 - first version: ``{"schema", "version", "name", "runs": [results dicts]}``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .measurement import Check, Measurement

__all__ = [
    "BASELINE_SCHEMA",
    "BASELINE_SCHEMA_VERSION",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Record",
    "ResultsError",
    "Run",
    "atomic_write_text",
    "load_run",
    "load_runs",
    "save_baseline_file",
    "save_run",
]

SCHEMA: Final = "pytest-gpuperf/results"
SCHEMA_VERSION: Final = 1
BASELINE_SCHEMA: Final = "pytest-gpuperf/baseline"
BASELINE_SCHEMA_VERSION: Final = 1


class ResultsError(Exception):
    """A results file that cannot be read or written; the message names the file and the fix."""


@dataclass(frozen=True)
class Record:
    test: str  # pytest node id
    device: str
    measurement: Measurement
    params: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    #: What the gate needs besides the measurement: ``tolerance``, ``noise_floor`` and ``load`` (the
    #: machine's background CPU load while measuring). Like ``checks``, filled in just after the record is made.
    gate: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """What identifies a benchmark across runs: node id plus measurement name when a test measures twice."""
        base = self.test
        name = self.measurement.name
        return base if name == base or not name else f"{base}::{name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "test": self.test,
            "device": self.device,
            "params": dict(self.params),
            "metadata": dict(self.metadata),
            "checks": [
                {"what": c.what, "relation": c.relation, "bound": c.bound, "outcome": c.outcome, "message": c.message}
                for c in self.checks
            ],
            "gate": dict(self.gate),
            "measurement": self.measurement.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        return cls(
            test=str(data["test"]),
            device=str(data["device"]),
            measurement=Measurement.from_dict(data["measurement"]),
            params={str(k): str(v) for k, v in data.get("params", {}).items()},
            metadata=dict(data.get("metadata", {})),
            checks=[Check(**c) for c in data.get("checks", [])],
            gate=dict(data.get("gate", {})),
        )


@dataclass(frozen=True)
class Run:
    """One pytest session's results."""

    created: str
    fingerprint: Mapping[str, Any]
    settings: Mapping[str, Any]
    records: Sequence[Record]
    devices: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The session was interrupted (Ctrl-C): ``records`` holds what was measured before.
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "created": self.created,
            "interrupted": self.interrupted,
            "fingerprint": dict(self.fingerprint),
            "devices": {k: dict(v) for k, v in self.devices.items()},
            "settings": dict(self.settings),
            "records": [r.to_dict() for r in self.records],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Run:
        return cls(
            created=str(data.get("created", "")),
            fingerprint=dict(data.get("fingerprint", {})),
            settings=dict(data.get("settings", {})),
            records=[Record.from_dict(r) for r in data.get("records", [])],
            devices=dict(data.get("devices", {})),
            interrupted=bool(data.get("interrupted", False)),
        )

    @property
    def git(self) -> Mapping[str, Any]:
        git = self.fingerprint.get("git")
        return git if isinstance(git, Mapping) else {}


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
