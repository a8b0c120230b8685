"""Records and the versioned results file.

A Record is one measurement of one test on one device, with everything needed to
judge it later. A results file is one run: its fingerprint and its records.

Schema history (bump ``SCHEMA_VERSION`` and say why here):

* 1 - first version: run fingerprint, settings, records with raw samples.
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
    "SCHEMA",
    "SCHEMA_VERSION",
    "Record",
    "ResultsError",
    "Run",
    "atomic_write_text",
    "load_run",
]

SCHEMA: Final = "pytest-gpuperf/results"
SCHEMA_VERSION: Final = 1


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
        )


@dataclass(frozen=True)
class Run:
    """One pytest session's results."""

    created: str
    fingerprint: Mapping[str, Any]
    settings: Mapping[str, Any]
    records: Sequence[Record]
    devices: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "created": self.created,
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
        )


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


def load_run(path: Path) -> Run:
    """Read a results file; a missing, corrupt or foreign file raises ResultsError naming it and the fix."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such results file") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); it was left as it is: "
            "delete or restore it, or save a new baseline under another name"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsError(
            f'{path} is not a pytest-gpuperf results file (no "schema": "{SCHEMA}"); '
            "point at one written by --gpuperf-json or --gpuperf-save"
        )
    version = data.get("version")
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"{path} has results schema version {version!r}, this pytest-gpuperf reads version {SCHEMA_VERSION}; "
            "re-record it with this version, or read it with the pytest-gpuperf that wrote it"
        )
    try:
        return Run.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultsError(f"{path} is damaged: a record lacks or mangles {exc}; re-record it") from None
