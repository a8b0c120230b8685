"""Records, runs and the gate's evidence: immutable values, and their JSON form.

A Record is one measurement of one test on one device, with everything needed to
judge it later. A Run is one session: its fingerprint and its records. A Record's
``evidence`` is what the gate weighs besides the measurement (the test's own
tolerance, the machine's background load, more rounds, confirmation runs); it is
added by replacing the record (``with_evidence``), never by mutating it.

Schema history (bump the version and say why here; files are read and written in
``_files.py``):

* results 2 - the first released version (0.1.0): a run's ``"created"``, ``"interrupted"``, fingerprint (with
  torch's ``"precision"`` flags, the allocator and NCCL ``"env"``, and NVML's UUID and MIG keys), ``"devices"``,
  settings, ``"notes"`` and ``"failures"`` (the tests that failed, node id -> why: only where there are some;
  absent in files written before them) and records. A record's ``"gate"`` is its Evidence
  (``tolerance``, ``noise_floor``, ``load``, ``quiet_wait_s``, ``rounds``, ``runs``); a round's ``"clocks"`` are as
  a measurement's (absent without NVML). A measurement keeps its raw samples; its ``"peak_memory_bytes"`` is the
  high-water mark of a call (what was resident at its start included; on a CPU the process's RSS high-water mark),
  and its ``"memory"`` block names the resident, transient, reserved and per-device figures; ``"clocks"`` are
  NVML's clocks over its samples and which were throttled (``null`` without NVML, each field ``null`` where NVML
  read none); ``"energy"``; ``"profile"`` is its work profile (``measuring.WorkProfile``: ``level``, ``calls``,
  ``ops`` and ``kernels`` as ``{"name", "count", "seconds"}`` totals over the calls, ``runtime``, ``syncs``,
  ``flops``, ``bytes_allocated`` by device (``{"cpu", "cuda"}``; one number in files written before the split, read
  as ``{"all": N}``), ``bytes_copied``, ``compile``, ``seconds``, ``budget``, ``left_out`` and ``reduced`` (the
  categories it did not read to keep within its budget, and why; absent in files written before them); ``null``:
  no profile);
  ``"timing_checks"`` what the timing checks read (``measuring.TimingChecks``: ``drain``, ``first_call``,
  ``uncounted``, ``peaks``; absent in files written before them); ``"over_time"`` only where it could not keep to
  ``max_time``. A reference peak may say ``"source":
  "datasheet"``. Version 1 was written only by pytest-gpuperf before its first release, and is refused.
* baseline 1 - first version: ``{"schema", "version", "name", "runs": [results dicts]}``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..measuring import Check, ClockSummary, Load, Measurement, values
from ._fingerprint import Fingerprint, GitState

__all__ = [
    "BASELINE_SCHEMA",
    "BASELINE_SCHEMA_VERSION",
    "READABLE_VERSIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "UNRELEASED_VERSIONS",
    "DamagedRecord",
    "Evidence",
    "Record",
    "Rerun",
    "Round",
    "Run",
    "short_test",
    "with_repeats",
]

SCHEMA: Final = "pytest-gpuperf/results"
SCHEMA_VERSION: Final = 2
#: The results versions this pytest-gpuperf reads.
READABLE_VERSIONS: Final = (SCHEMA_VERSION,)
#: Results versions that only pytest-gpuperf before its first release wrote (refused with that said).
UNRELEASED_VERSIONS: Final = (1,)
BASELINE_SCHEMA: Final = "pytest-gpuperf/baseline"
BASELINE_SCHEMA_VERSION: Final = 1


@dataclass(frozen=True)
class Round:
    """One more measurement of a record: its raw samples (seconds per call), the machine's load and the GPU's
    clocks meanwhile (None without NVML)."""

    samples: tuple[float, ...]
    load: Load | None = None
    quiet_wait_s: float | None = None
    clocks: ClockSummary | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "samples": list(self.samples),
            "load": None if self.load is None else self.load.to_dict(),
        }
        if self.quiet_wait_s is not None:
            out["quiet_wait_s"] = self.quiet_wait_s
        if self.clocks is not None:
            out["clocks"] = self.clocks.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Round:
        stored = values.stored
        return cls(
            stored(data, "samples", values.stored_numbers, ()),
            stored(data, "load", Load.from_dict, None),
            stored(data, "quiet_wait_s", values.stored_number, None),
            stored(data, "clocks", ClockSummary.from_dict, None),
        )


@dataclass(frozen=True)
class Rerun:
    """A confirmation run: the record measured again in a fresh process; its first round is that measurement."""

    rounds: tuple[Round, ...]

    def to_dict(self) -> dict[str, Any]:
        first, *more = self.rounds
        return {**first.to_dict(), "rounds": [r.to_dict() for r in more]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rerun:
        return cls((Round.from_dict(data), *values.stored(data, "rounds", _ROUNDS, ())))


@dataclass(frozen=True)
class Evidence:
    """What the gate needs besides the measurement; every field is optional."""

    #: the test's own tolerance and noise floor (its marker); absent: the session's, in the run's settings
    tolerance: values.Tolerance | None = None
    noise_floor: float | None = None
    #: other processes' CPU use while the measurement sampled
    load: Load | None = None
    #: seconds waited for a quiet machine before measuring
    quiet_wait_s: float | None = None
    #: ``--gpuperf-rounds``: the test measured again later in the same session
    rounds: tuple[Round, ...] = ()
    #: ``--gpuperf-confirm``: the test measured again in fresh processes
    runs: tuple[Rerun, ...] = ()

    def first_round(self, measurement: Measurement) -> Round:
        """The record's own measurement as a Round."""
        return Round(measurement.samples, self.load, self.quiet_wait_s, measurement.clocks)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.tolerance is not None:
            out["tolerance"] = values.tolerance_json(self.tolerance)
        for name in ("noise_floor", "quiet_wait_s"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.load is not None:
            out["load"] = self.load.to_dict()
        if self.rounds:
            out["rounds"] = [r.to_dict() for r in self.rounds]
        if self.runs:
            out["runs"] = [r.to_dict() for r in self.runs]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        def number(name: str) -> float | None:
            value = data.get(name)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        return cls(
            tolerance=values.stored(data, "tolerance", values.stored_tolerance, None),
            noise_floor=number("noise_floor"),
            load=values.stored(data, "load", Load.from_dict, None),
            quiet_wait_s=number("quiet_wait_s"),
            rounds=values.stored(data, "rounds", _ROUNDS, ()),
            runs=values.stored(data, "runs", _RERUNS, ()),
        )


#: A record's rounds and its confirmation runs (each list at most the rounds a session takes).
_ROUNDS: Final = values.stored_list(Round.from_dict, values.MAX_ROUNDS)
_RERUNS: Final = values.stored_list(Rerun.from_dict, values.MAX_ROUNDS)


@dataclass(frozen=True)
class Record:
    test: str  # pytest node id
    device: str
    measurement: Measurement
    params: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Assertions made on the measurement, in the order made. A check made after the record was kept replaces
    #: the record (``with_check``).
    checks: Sequence[Check] = ()
    evidence: Evidence = field(default_factory=Evidence)

    @property
    def key(self) -> str:
        """What identifies a benchmark across runs: node id plus measurement name when a test measures twice."""
        return self.key_for(self.test, self.measurement.name)

    @staticmethod
    def key_for(test: str, name: str) -> str:
        """The key of a record of test ``test`` (a node id) whose measurement is named ``name``."""
        return test if name == test or not name else f"{test}::{name}"

    def with_evidence(self, evidence: Evidence) -> Record:
        return dataclasses.replace(self, evidence=evidence)

    def with_check(self, check: Check) -> Record:
        """This record with one more check made on its measurement."""
        return dataclasses.replace(self, checks=(*self.checks, check))

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "test": self.test,
            "device": self.device,
            "params": dict(self.params),
            "metadata": dict(self.metadata),
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "gate": self.evidence.to_dict(),
            "measurement": self.measurement.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        """From a file, or a process that sent it; FieldError (``measuring.values.stored``) names a field that no
        record of ours has."""
        stored, text = values.stored, values.stored_text
        stored(data, "key", text, "")  # derived from the test and the measurement's name, but a string
        return cls(
            test=stored(data, "test", text),
            device=stored(data, "device", text),
            measurement=stored(data, "measurement", Measurement.from_dict),
            params=stored(data, "params", lambda v: {str(k): str(p) for k, p in v.items()}, {}),
            metadata=stored(data, "metadata", dict, {}),
            checks=stored(data, "checks", lambda v: tuple(Check(**c) for c in v), ()),
            evidence=stored(data, "gate", Evidence.from_dict, Evidence()),
        )


def with_repeats(records: Sequence[Record], fresh: Iterable[Record], *, as_runs: bool) -> list[Record]:
    """``records`` with each fresh measurement of the same key added to its evidence: as one more round of the
    record's own run, or, ``as_runs``, as a confirmation run (the fresh measurement, then its own rounds); a count
    that differs in it is varying from then on (``Measurement.with_varying_counts``)."""
    by_key = {record.key: record for record in fresh}
    out: list[Record] = []
    for record in records:
        again = by_key.get(record.key)
        if again is not None:
            first, evidence = again.evidence.first_round(again.measurement), record.evidence
            if as_runs:
                evidence = dataclasses.replace(evidence, runs=(*evidence.runs, Rerun((first, *again.evidence.rounds))))
            else:
                evidence = dataclasses.replace(evidence, rounds=(*evidence.rounds, first))
            measurement = record.measurement.with_varying_counts(again.measurement)
            record = dataclasses.replace(record, measurement=measurement, evidence=evidence)
        out.append(record)
    return out


@dataclass(frozen=True)
class Run:
    """One pytest session's results."""

    created: str
    fingerprint: Fingerprint
    settings: Mapping[str, Any]
    records: Sequence[Record]
    devices: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The session was interrupted (Ctrl-C): ``records`` holds what was measured before.
    interrupted: bool = False
    #: ``gpuperf.note(text)``: (test node id, text), in the order made; the report shows them (written only when
    #: there are some, so that a file without notes is as before)
    notes: Sequence[tuple[str, str]] = ()
    #: The tests that failed in the session, node id -> why ("failed", "ran out of memory", "failed in round 2"):
    #: a session with some still saves its run, and ``--gpuperf-save`` its baseline (written only when there are some)
    failures: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "created": self.created,
            "interrupted": self.interrupted,
            "fingerprint": self.fingerprint.to_dict(),
            "devices": {k: dict(v) for k, v in self.devices.items()},
            "settings": dict(self.settings),
            "records": [r.to_dict() for r in self.records],
        }
        if self.notes:
            out["notes"] = [[test, text] for test, text in self.notes]
        if self.failures:
            out["failures"] = dict(self.failures)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Run:
        """From a file, or a process that sent it: FieldError (``measuring.values.stored``) names a field of the run
        that none of ours has, and DamagedRecord a record's."""
        stored = values.stored
        return cls(
            created=stored(data, "created", _created, ""),
            fingerprint=stored(
                data, "fingerprint", lambda v: Fingerprint.from_dict(dict(v)), Fingerprint.from_dict({})
            ),
            settings=stored(data, "settings", dict, {}),
            records=_records(data.get("records")),
            devices=stored(data, "devices", dict, {}),
            interrupted=stored(data, "interrupted", values.stored_flag, False),
            notes=_notes(data.get("notes")),
            failures=_failures(data.get("failures")),
        )

    @property
    def git(self) -> GitState:
        """The fingerprint's git state; empty outside git, and in files that did not record it."""
        return self.fingerprint.git if self.fingerprint.git is not None else GitState()


class DamagedRecord(ValueError):
    """A record of a run that none of ours can be: the ``number``-th (from 1), of test ``test`` ("" where that is
    unreadable too), and what is wrong (``problem``: its field and what it must be)."""

    def __init__(self, number: int, test: str, problem: values.FieldError) -> None:
        super().__init__(f"record {number}{f' ({test})' if test else ''}: {problem}")
        self.number, self.test, self.problem = number, test, problem


def _records(items: object) -> list[Record]:
    """A run's records from its file; DamagedRecord names the first that no record of ours can be."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise values.FieldError("records", f"must be a list, not {values.shown(items)}")
    out = []
    for number, item in enumerate(items, 1):
        try:
            out.append(Record.from_dict(item))
        except values.FieldError as exc:
            test = item.get("test") if isinstance(item, Mapping) else None
            raise DamagedRecord(number, test if isinstance(test, str) else "", exc) from None
    return out


def _created(value: object) -> str:
    """When the run was saved: an ISO 8601 time (``2026-11-22T03:00:00+00:00``), or "" where it was not said."""
    if isinstance(value, str):
        try:
            if value:  # Python before 3.11 reads no "Z"
                dt.datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
            return value
        except ValueError:
            pass
    raise values.FieldError(
        "",
        "must be the time the run was saved, as an ISO 8601 string such as '2026-11-22T03:00:00+00:00', "
        f"not {values.shown(value)}",
    )


def _notes(data: Any) -> tuple[tuple[str, str], ...]:
    """A run's notes from its file: pairs of strings; anything else in the list is skipped (a crafted file)."""
    if not isinstance(data, list):
        return ()
    return tuple(
        (item[0], item[1])
        for item in data
        if isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)
    )


def _failures(data: Any) -> dict[str, str]:
    """A run's failed tests from its file: strings to strings; anything else is skipped (a crafted file)."""
    if not isinstance(data, dict):
        return {}
    return {test: why for test, why in data.items() if isinstance(test, str) and isinstance(why, str)}


class MeasuredTest(Protocol):
    """What names a measured test: a Record, or a gate Row."""

    @property
    def test(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def key(self) -> str: ...


def short_test(item: MeasuredTest) -> str:
    """The test id without its file part and device parameter, which have their own column.

    A test class stays (``TestX::test_y``): two classes of a module may hold tests of one name.

    Under pytest-xdist a test id keeps the GPU asked for (``cuda:0``) while the record names the
    worker's (``cuda:1``): a ``cuda:N`` parameter goes too when the record is on a CUDA device.
    """
    # The parameters may hold "::" or brackets of their own: split the node path before the first "[" only.
    path, bracket, params = item.test.partition("[")
    base = path.split("::", 1)[-1]
    on_cuda = item.device.startswith("cuda")
    if bracket:
        kept = [
            p
            for p in params.removesuffix("]").split("-")
            if p != item.device and not (on_cuda and p.startswith("cuda:") and p[5:].isdigit())
        ]
        base = f"{base}[{'-'.join(kept)}]" if kept else base
    suffix = item.key[len(item.test) :]  # "::name" when a test measures more than once
    return base + suffix
