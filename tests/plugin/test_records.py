"""The record book, without pytest: the one owner of a session's records, their checks, rounds and repeats, an xdist
worker's payload, and the Run built from it."""

from __future__ import annotations

import json

import pytest

from pytest_gpuperf.measuring import Check, GpuperfAssertionError
from pytest_gpuperf.plugin._records import RecordBook
from pytest_gpuperf.results import Ceiling, Fingerprint, Record, Run
from tests.synthetic import FINGERPRINT, make_measurement, make_record, samples_around

TEST = "test_x.py::test_step[cpu]"


def _observed(book: RecordBook, median: float, *, name: str = TEST) -> Record:
    """A record whose measurement's observer is the book's, as ``gpuperf.measure`` makes it."""
    key = Record.key_for(TEST, name)
    measurement = make_measurement(name, samples_around(median), observer=book.observer(key))
    return Record(test=TEST, device="cpu", measurement=measurement)


def _run(book: RecordBook, *, interrupted: bool = False) -> Run:
    return book.run(
        created="2026-11-22T03:00:00+00:00",
        fingerprint=Fingerprint.from_dict(FINGERPRINT),
        settings={},
        interrupted=interrupted,
    )


def test_a_check_made_after_the_record_was_kept_replaces_the_record() -> None:
    book = RecordBook()
    record = _observed(book, 10e-3)
    assert book.keep(record)
    record.measurement.assert_latency(at_most="20 ms")
    with pytest.raises(GpuperfAssertionError):
        record.measurement.assert_latency(at_most="5 ms")
    (kept,) = book.records
    assert [(c.what, c.outcome) for c in kept.checks] == [("latency", "pass"), ("latency", "fail")]
    assert record.checks == () and isinstance(kept.checks, tuple), "records are replaced, never changed"
    assert book.latest(record.key) == kept
    book.observer(record.key)(Check("throughput", ">=", "1 FLOP/s", "pass", "met"))
    assert [c.what for c in book.records[0].checks] == ["latency", "latency", "throughput"]


def test_a_check_made_before_its_record_is_kept_waits_for_it() -> None:
    """The benchmark fixture keeps its record at teardown, after the test body made its assertions."""
    book = RecordBook()
    record = _observed(book, 10e-3, name="late")
    record.measurement.assert_latency(at_most="20 ms")
    assert not book.records
    book.keep(record)
    (kept,) = book.records
    assert [c.outcome for c in kept.checks] == ["pass"] and kept.key == f"{TEST}::late"


def test_a_round_measured_again_adds_evidence_and_its_checks_decide_nothing() -> None:
    book = RecordBook()
    book.keep(make_record(10e-3))
    with book.measuring_again() as again:
        assert book.repeating
        fresh = _observed(book, 11e-3)
        assert not book.keep(fresh), "a round is no record of the session"
        fresh.measurement.assert_latency(at_most="20 ms")
        again_record = book.latest(fresh.key)
        assert again_record is not None and [c.outcome for c in again_record.checks] == ["pass"], (
            "the test measured again sees its round's records, with their checks"
        )
    assert not book.repeating
    book.add_repeats(again.records, as_runs=False)
    (kept,) = book.records
    assert kept.checks == ()
    assert [r.samples for r in kept.evidence.rounds] == [samples_around(11e-3)]


def test_a_confirmation_run_becomes_a_rerun_of_its_record() -> None:
    book = RecordBook()
    book.keep(make_record(10e-3))
    book.add_repeats([make_record(12e-3, rounds=[12.5e-3])], as_runs=True)
    (kept,) = book.records
    (rerun,) = kept.evidence.runs
    assert [r.samples for r in rerun.rounds] == [samples_around(12e-3), samples_around(12.5e-3)]


def test_keeping_a_record_looks_at_no_other_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records are kept by key: keeping the 300th reads as few keys as keeping the first, not those of the 299 before
    it (a scan per record made a session of many tests quadratic), and a rerun's record still takes its place."""
    book = RecordBook()
    records = [make_record(10e-3, test=f"test_x.py::test_{i}[cpu]") for i in range(300)]
    read = 0
    key = Record.key

    def counted(record: Record) -> str:
        nonlocal read
        read += 1
        return str(key.fget(record))  # type: ignore[attr-defined]

    monkeypatch.setattr(Record, "key", property(counted))
    for record in records:
        assert book.keep(record)
    assert read <= 2 * len(records)
    rerun = make_record(12e-3, test="test_x.py::test_7[cpu]")
    book.keep(rerun)
    assert len(book.records) == 300 and book.records[7] is rerun and book.latest(rerun.key) is rerun


def test_a_workers_payload_merges_into_the_controllers_book() -> None:
    worker = RecordBook()
    record = _observed(worker, 10e-3)
    worker.keep(record)
    record.measurement.assert_latency(at_most="20 ms")
    worker.note(TEST, "a ratio")
    worker.offer_reference_peak("cuda:1", 2e12, "matmul bfloat16")
    worker.describe_device("cuda:1", {"name": "NVIDIA H100"})
    worker.fail("test_x.py::test_oom[cpu]", "ran out of memory")
    controller = RecordBook()
    controller.offer_reference_peak("cuda:1", 3e12, "matmul float16 on another worker")
    controller.merge(json.loads(json.dumps(worker.payload())))  # as xdist carries it
    (merged,) = controller.records
    assert merged.key == record.key and [c.outcome for c in merged.checks] == ["pass"]
    assert controller.notes == ((TEST, "a ratio"),)
    assert controller.reference_peaks["cuda:1"] == Ceiling(3e12, "matmul float16 on another worker")
    assert controller.failures == {"test_x.py::test_oom[cpu]": "ran out of memory"}
    assert _run(controller).devices["cuda:1"]["name"] == "NVIDIA H100"


def test_the_run_holds_the_records_devices_and_peaks() -> None:
    book = RecordBook()
    first = _observed(book, 10e-3)
    book.keep(first)
    first.measurement.assert_latency(at_most="20 ms")
    book.describe_device("cpu", {"name": "AMD EPYC 9R14"})
    assert book.offer_reference_peak("cpu", 1e11, "mm") == Ceiling(1e11, "mm")
    assert book.offer_reference_peak("cpu", 1e10, "lower") == Ceiling(1e11, "mm"), "the highest stays"
    run = _run(book, interrupted=True)
    (record,) = run.records
    assert [check.outcome for check in record.checks] == ["pass"], "the check made after the record was kept"
    assert run.interrupted and run.fingerprint == FINGERPRINT
    assert run.devices == {"cpu": {"name": "AMD EPYC 9R14", "reference_peak": {"FLOP/s": 1e11, "how": "mm"}}}


def test_a_datasheet_peak_is_the_ceiling_whatever_was_measured_and_crosses_to_the_controller() -> None:
    worker = RecordBook()
    worker.offer_reference_peak("cuda:0", 989e12, "H100 SXM datasheet: matmul_bfloat16 989 TFLOP/s", "datasheet")
    assert worker.offer_reference_peak("cuda:0", 2e15, "a faster measurement").source == "datasheet"
    controller = RecordBook()
    controller.offer_reference_peak("cuda:0", 700e12, "matmul bfloat16 n=16384")
    controller.merge(json.loads(json.dumps(worker.payload())))
    peak = controller.reference_peaks["cuda:0"]
    assert peak == Ceiling(989e12, "H100 SXM datasheet: matmul_bfloat16 989 TFLOP/s", "datasheet")
    controller.describe_device("cuda:0", {"name": "NVIDIA H100 80GB HBM3"})
    assert _run(controller).devices["cuda:0"]["reference_peak"]["source"] == "datasheet"


def test_what_the_book_hands_out_cannot_change_it() -> None:
    book = RecordBook()
    book.note(TEST, "one")
    book.fail(TEST, "failed")
    book.offer_reference_peak("cpu", 1.0, "mm")
    assert isinstance(book.records, tuple) and isinstance(book.notes, tuple)
    failures, peaks = book.failures, book.reference_peaks
    assert isinstance(failures, dict) and isinstance(peaks, dict)
    failures.clear()
    peaks.clear()
    assert book.failures == {TEST: "failed"} and book.reference_peaks.get("cpu") is not None
