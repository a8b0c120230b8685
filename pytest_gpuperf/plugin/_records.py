"""The record book: the one owner of a session's records and of what the run keeps with them.

Everything that adds to a session's results goes through it: a test keeping a record
(``gpuperf.measure``, ``gpuperf.paired``, ``gpuperf.record``, the ``benchmark`` fixture), a
check made later on a recorded Measurement (its observer is a call into the book), the
gate's extra rounds and confirmation runs, and an xdist worker's payload. Beside the
records it keeps the notes for the terminal summary, the devices' reference peaks and
descriptions, and the tests that failed (which explain a missing record to the gate).
The run's one ``Run`` is built from it. It keeps one record per key: a test run again in the
same session (pytest-rerunfailures' attempts) replaces its earlier attempt's record with the
last one's, and a note says how many attempts there were.

Records stay immutable: a check made after its record was kept replaces the record with
one that holds it (``Record.with_check``); a check made before (the ``benchmark`` fixture
keeps its record at teardown) waits in the book for its record.

It imports neither pytest nor, until first used, the results package: it is created at
every pytest start (``bench/startup.py``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..measuring import Check, Measurement
    from ..results import Ceiling, Fingerprint, Record, Run

__all__ = ["RecordBook", "Shelf"]


class Shelf:
    """Records in the order kept, each with the checks made on its measurement: the session's, or those of a round
    of a test measured again (``RecordBook.measuring_again``)."""

    def __init__(self) -> None:
        self._records: list[Record] = []
        #: record key -> its place in ``_records`` (one record per key): keeping a record looks at no other
        self._places: dict[str, int] = {}
        #: record key -> checks made on its measurement before the record was kept
        self._waiting: dict[str, list[Check]] = {}

    @property
    def records(self) -> tuple[Record, ...]:
        return tuple(self._records)

    def put(self, record: Record) -> bool:
        """Keep ``record``; True when it replaced one of the same key, which only a rerun of its test keeps (a test
        cannot keep a key twice: ``Gpuperf.record`` refuses), e.g. pytest-rerunfailures' next attempt: one record
        per key, the last attempt's, in the place of the first, so that no export names a benchmark twice."""
        key = record.key
        for check in self._waiting.pop(key, []):
            record = record.with_check(check)
        place = self._places.get(key)
        if place is not None:
            self._records[place] = record
            return True
        self._places[key] = len(self._records)
        self._records.append(record)
        return False

    def add_check(self, key: str, check: Check) -> None:
        """Add ``check`` to the latest record of ``key`` (replacing that record), or hold it until that record is
        kept."""
        place = self._places.get(key)
        if place is not None:
            self._records[place] = self._records[place].with_check(check)
            return
        self._waiting.setdefault(key, []).append(check)

    def latest(self, key: str) -> Record | None:
        place = self._places.get(key)
        return None if place is None else self._records[place]

    def replace(self, records: list[Record]) -> None:
        """The records, each of another key, in their order."""
        self._records = records
        self._places = {record.key: place for place, record in enumerate(records)}


class RecordBook:
    """A session's records, and the notes, reference peaks, device descriptions and failures that go with them."""

    def __init__(self) -> None:
        self._shelf = Shelf()
        self._again: Shelf | None = None  # while a test is measured again: its round's records
        self._notes: list[tuple[str, str]] = []
        self._peaks: dict[str, Ceiling] = {}
        self._devices: dict[str, dict[str, Any]] = {}
        self._failures: dict[str, str] = {}
        self._headline: dict[str, Measurement] = {}  # record key -> its CPU measured at all cores
        self._headline_seconds = 0.0
        self._attempts: dict[str, int] = {}  # record key -> attempts that kept it, where more than one (reruns)

    # ------------------------------------------------------------ records

    @property
    def records(self) -> tuple[Record, ...]:
        """The session's records, in the order kept, each with the checks made on it so far."""
        return self._shelf.records

    def keep(self, record: Record) -> bool:
        """Keep ``record``: True when it is one more record of the session, False when it is a round of a test
        being measured again (``measuring_again``), which becomes evidence of the session's record instead."""
        if self._again is not None:
            self._again.put(record)
            return False
        if self._shelf.put(record):
            self._attempts[record.key] = self._attempts.get(record.key, 1) + 1
        return True

    def observer(self, key: str) -> Callable[[Check], None]:
        """What a Measurement recorded under ``key`` calls with each check made on it: the check goes to its record
        (``Shelf.add_check``), or, for a measurement made while a test is measured again, to the round's record."""
        return functools.partial((self._again or self._shelf).add_check, key)

    def latest(self, key: str) -> Record | None:
        """The record of ``key`` as it is now, with its checks: the round's while a test is measured again."""
        return (self._again or self._shelf).latest(key)

    @property
    def repeating(self) -> bool:
        """Is a test being measured again (``measuring_again``)?"""
        return self._again is not None

    @contextlib.contextmanager
    def measuring_again(self) -> Iterator[Shelf]:
        """While inside, the records kept (and their checks) are a new round of a test, put on the Shelf given; pass
        its records to ``add_repeats`` to add them to the evidence of the session's records."""
        again = Shelf()
        self._again = again
        try:
            yield again
        finally:
            self._again = None

    def add_repeats(self, fresh: Iterable[Record], *, as_runs: bool) -> None:
        """Each fresh measurement added to the evidence of the session's record of the same key: as one more round
        (``--gpuperf-rounds``) or, ``as_runs``, as a confirmation run in a fresh process (``--gpuperf-confirm``)."""
        from ..results import with_repeats

        self._shelf.replace(with_repeats(self._shelf.records, fresh, as_runs=as_runs))

    # ------------------------------------------------------------ what the run keeps with its records

    @property
    def notes(self) -> tuple[tuple[str, str], ...]:
        """(test node id, text) lines for the terminal summary: ratios, why something was not asserted, and which
        attempt's record a rerun test kept."""
        kept = "the last attempt's record is kept"
        reruns = [
            (record.test, f"measured in {self._attempts[record.key]} attempts (rerun): {kept}")
            for record in self._shelf.records
            if record.key in self._attempts
        ]
        return (*self._notes, *(note for note in reruns if note not in self._notes))

    def note(self, nodeid: str, text: str) -> None:
        """Keep a note once: a round of a test measured again (``--gpuperf-rounds``) says again what its first
        round said, so its notes are not kept, and a line a test already noted is not kept twice."""
        if self._again is None and (nodeid, text) not in self._notes:
            self._notes.append((nodeid, text))

    @property
    def reference_peaks(self) -> Mapping[str, Ceiling]:
        """Device id -> its reference peak, measured once per session by the suites (see suites/test_matmul.py)."""
        return dict(self._peaks)

    def offer_reference_peak(self, device: str, flops_per_second: float, how: str, source: str = "measured") -> Ceiling:
        """Keep the highest FLOP/s offered for ``device``, a datasheet peak before any measured one; return the
        device's peak after the offer."""
        from ..results import Ceiling

        offered = Ceiling(flops_per_second, how, source)
        current = self._peaks.get(device)
        if current is None or _rank(offered) > _rank(current):
            self._peaks[device] = offered
        return self._peaks[device]

    def describe_device(self, device: str, description: Mapping[str, Any]) -> None:
        """What the run file says of a device measured on (its backend's ``describe()``)."""
        self._devices[device] = dict(description)

    @property
    def devices(self) -> Mapping[str, Mapping[str, Any]]:
        """Device id -> its description (``describe_device``)."""
        return {device: dict(description) for device, description in self._devices.items()}

    @property
    def headline(self) -> Mapping[str, Measurement]:
        """Record key -> the same step on the CPU measured again at all its cores, for the speedup table only (the
        record keeps its own threads, the stable default the gate compares)."""
        return dict(self._headline)

    @property
    def headline_seconds(self) -> float:
        """The wall time those extra measurements took: what the speedup table's headline cost."""
        return self._headline_seconds

    def keep_headline(self, measurements: Mapping[str, Measurement], seconds: float) -> None:
        self._headline.update(measurements)
        self._headline_seconds += seconds

    @property
    def failures(self) -> Mapping[str, str]:
        """Test node id -> why it has no record ("failed", "ran out of memory", "failed in round 2")."""
        return dict(self._failures)

    def fail(self, nodeid: str, why: str) -> None:
        self._failures[nodeid] = why

    def passed(self, nodeid: str) -> None:
        """A test run again that passed (pytest-rerunfailures' next attempt): its earlier failure is not the run's."""
        self._failures.pop(nodeid, None)

    # ------------------------------------------------------------ an xdist worker's book, and the run

    def payload(self) -> dict[str, Any]:
        """What an xdist worker sends its controller (JSON-ready): records, notes, peaks, devices, failures."""
        return {
            "records": [record.to_dict() for record in self._shelf.records],
            "notes": [list(note) for note in self.notes],
            "peaks": {device: [p.flops_per_second, p.how, p.source] for device, p in self._peaks.items()},
            "devices": {device: dict(description) for device, description in self._devices.items()},
            "failures": dict(self._failures),
            "headline": {key: m.to_dict() for key, m in self._headline.items()},
            "headline_seconds": self._headline_seconds,
        }

    def merge(self, payload: Mapping[str, Any]) -> None:
        """A worker's ``payload()`` added to this book (the controller's)."""
        from ..results import Record

        for record in payload["records"]:
            self._shelf.put(Record.from_dict(record))
        for nodeid, text in payload["notes"]:
            self.note(str(nodeid), str(text))
        for device, (flops, how, *source) in payload["peaks"].items():
            self.offer_reference_peak(device, float(flops), str(how), *map(str, source))
        for device, description in payload["devices"].items():
            self.describe_device(device, description)
        self._failures.update(payload["failures"])
        from ..measuring import Measurement

        headline = {str(key): Measurement.from_dict(m) for key, m in payload.get("headline", {}).items()}
        self.keep_headline(headline, float(payload.get("headline_seconds", 0.0)))

    def run(
        self, *, created: str, fingerprint: Fingerprint, settings: Mapping[str, Any], interrupted: bool = False
    ) -> Run:
        """The session's Run: its records, devices with their reference peaks, notes and failed tests."""
        from ..results import Run

        return Run(
            created=created,
            fingerprint=fingerprint,
            settings=settings,
            records=list(self._shelf.records),
            devices={
                device: {**description, **_peak_description(self._peaks.get(device))}
                for device, description in self._devices.items()
            },
            interrupted=interrupted,
            notes=self.notes,
            failures=self.failures,
        )


def _rank(peak: Ceiling) -> tuple[bool, float]:
    """A datasheet peak is the ceiling whatever was measured; among peaks of one source, the highest."""
    return (peak.source == "datasheet", peak.flops_per_second)


def _peak_description(peak: Ceiling | None) -> dict[str, Any]:
    if peak is None:
        return {}
    described: dict[str, Any] = {"FLOP/s": peak.flops_per_second, "how": peak.how}
    if peak.source != "measured":  # a measured peak's entry reads as before the source was recorded
        described["source"] = peak.source
    return {"reference_peak": described}
