"""The ``gpuperf`` fixture object: measure on the test's device, record, judge paired claims.

Every record it makes is kept by the session's record book (``_records.py``), and every
check made later on a recorded Measurement reaches its record through the book: the
Measurement's observer is a call into it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pytest

from ..measuring import (
    Backend,
    Check,
    DeviceSlot,
    Estimate,
    JudgeContext,
    Measurement,
    MeasureSettings,
    ModeUnsupported,
    Paired,
    Step,
    StepFactory,
    Workload,
    counted,
    expect_estimate,
    measure_on,
    measure_paired,
    resolve_size,
    values,
    work_from,
)
from ..results import Ceiling, Evidence, Record
from ._session import GpuperfSession
from ._settings import SettingError
from ._untimed import call_step_once, skip_untimed

__all__ = ["Gpuperf"]


class Gpuperf:
    """What a test gets as ``gpuperf``: ``gpuperf.measure(fn, flops=...)`` returns a Measurement."""

    def __init__(self, item: pytest.Item, session: GpuperfSession, slot: DeviceSlot) -> None:
        self._item = item
        self._session = session
        self._book = session.book
        self.slot = slot
        self.settings = session.item_settings(item)
        self._keys: list[str] = []  # the keys of this test's records, in the order recorded

    @property
    def records(self) -> tuple[Record, ...]:
        """The records this test has made so far, each with the checks made on it."""
        found = (self._book.latest(key) for key in self._keys)
        return tuple(record for record in found if record is not None)

    @property
    def device(self) -> Any:
        import torch

        return torch.device(self.slot.id)

    def progress(self, text: str) -> None:
        """A progress line for long work inside this test (a spawned world, a long build), on a line of its own:
        ``gpuperf: test_x[cpu]: text``. Silent under ``-q``, in xdist workers and on ranks other than 0."""
        self._session.progress(prefix=f"gpuperf: {self._item.name}").say(text)

    def measure(
        self,
        fn: Callable[[], object],
        *,
        name: str | None = None,
        flops: float | None = None,
        bytes: float | None = None,  # noqa: A002 - reads naturally at the call site
        samples: float | None = None,
        items: float | None = None,
        work: Mapping[str, float] | None = None,
        params: Mapping[str, object] | None = None,
        **overrides: Any,
    ) -> Measurement:
        """Time ``fn`` (one call = one step) on this test's device until its median is known to the target.

        ``flops``/``bytes``/``samples``/``items``/``work`` give the work one call does, for
        throughput. ``params`` are stored with the record (sizes, dtype ...). Keyword
        ``overrides`` are settings for this measurement only (``target=0.02``, ``max_time=10``).
        """
        __tracebackhide__ = True
        if name is None and self._key(self._item.nodeid) in self._keys:
            raise ValueError(
                f"{self._item.nodeid} measures more than once: give each measurement its own name=, "
                "so that each can be compared with its baseline"
            )
        try:
            settings = self.settings.with_marker(overrides) if overrides else self.settings
        except SettingError as exc:
            raise ValueError(f"gpuperf.measure(): {exc}") from None
        if self._session.untimed:  # --gpuperf-measuring=untimed: the step once, then the test stops (_untimed.py)
            fn()
            skip_untimed("the step")
        label = name or self._item.nodeid
        try:
            measurement = measure_on(
                fn,
                self._session.backend(self.slot),
                settings.measure,
                name=label,
                device=self.slot.id,
                work=work_from(flops, bytes, samples, items, work),
                observer=self._book.observer(self._key(label)),
                # Under torchrun: barrier per block, the slowest rank counts, agreed stops (docs/multi-gpu.md).
                coordinator=self._session.coordinator(self.slot, f"{self._item.nodeid} {label}"),
            )
        except ModeUnsupported as exc:
            pytest.skip(str(exc))
        own = {name: settings.value(name) for name in ("tolerance", "noise_floor") if name in overrides}
        self.record(measurement, params=params, **own)

        def again(headline: MeasureSettings) -> dict[str, Measurement]:
            work = measurement.work
            return {label: measure_on(fn, self.backend, headline, name=label, device=self.slot.id, work=work)}

        self._measure_headline(settings.measure, again)
        return measurement

    def paired(
        self,
        steps: Mapping[str, Step | StepFactory],
        *,
        record: Collection[str] | None = None,
        params: Mapping[str, object] | None = None,
        names: Mapping[str, str] | None = None,
        metadata: Mapping[str, Mapping[str, object]] | None = None,
    ) -> Paired:
        """Time ``steps`` in interleaved rounds on this test's device (``measure_paired``) and record those named in
        ``record`` (default: every step) as this test's, in that order.

        Each record's params are the size preset, the step's own params (a Step's; a factory's are
        not known before it is built) and ``params``. ``names`` renames steps in the records
        (``{"this": "n=512"}``); ``metadata``, per step, is kept in its record's metadata (not
        compared by the gate: a compile time). Assertions made later on a recorded step's
        Measurement land in its record. A step that the timing mode cannot run skips the test.
        """
        __tracebackhide__ = True
        wanted = list(steps) if record is None else list(record)
        unknown = [name for name in wanted if name not in steps]
        if unknown:
            raise ValueError(f"gpuperf.paired(): record names {unknown!r}, which are not steps ({', '.join(steps)})")
        labels = {name: (names or {}).get(name, name) for name in steps}
        for name in wanted:
            self._check_unrecorded(labels[name])
        what = " ".join(labels[name] for name in steps)
        if self._session.untimed:
            for step in steps.values():
                call_step_once(step)
            skip_untimed("each step")
        try:
            rounds = measure_paired(
                steps,
                self.backend,
                self.settings.measure,
                device=self.slot.id,
                coordinator=self._session.coordinator(self.slot, f"{self._item.nodeid} paired {what}"),
                observers={name: self._book.observer(self._key(labels[name])) for name in wanted},
                names=names,
            )
        except ModeUnsupported as exc:
            pytest.skip(str(exc))
        for name in wanted:
            step = steps[name]
            own = step.params if isinstance(step, Step) else {}
            self.record(
                rounds.measurements[name],
                params={"size": self.size, **own, **(params or {})},
                metadata=(metadata or {}).get(name),
            )

        def again(headline: MeasureSettings) -> dict[str, Measurement]:
            if not wanted:
                return {}
            found = measure_paired(steps, self.backend, headline, device=self.slot.id, names=names).measurements
            return {labels[name]: found[name] for name in wanted}

        self._measure_headline(self.settings.measure, again)
        return rounds

    def _measure_headline(
        self, settings: MeasureSettings, measure: Callable[[MeasureSettings], Mapping[str, Measurement]]
    ) -> None:
        """In a session that measures the CPU beside a GPU, the CPU side measured again at all its cores, for the
        speedup table only (``GpuperfSession.headline_threads``): the records keep their threads, the stable
        default the gate compares. Neither peak memory nor the work profile is measured again (a profile would keep
        its profiler, and every event of its calls, until the session's end)."""
        threads = self._session.headline_threads(self.slot, settings)
        if threads is None:
            return
        start = time.perf_counter()
        try:
            found = measure(dataclasses.replace(settings, threads=threads, memory=False, profile="off"))
        except ModeUnsupported:
            return
        if not found:
            return
        self._book.keep_headline(
            {self._key(name): measurement for name, measurement in found.items()}, time.perf_counter() - start
        )

    def expect(
        self,
        estimate: Estimate,
        *,
        at_least: float | None = None,
        at_most: float | None = None,
        record: str | None = None,
    ) -> Check:
        """Judge ``estimate`` (a paired ratio with its interval) against exactly one bound: pass, fail (raises) or
        inconclusive (warns, or fails with ``--gpuperf-inconclusive=fail``), by its interval; note the verdict in
        the terminal summary. With ``record``, the name of a measurement this test recorded, the check also lands
        in that record (the results table's flags, the results file)."""
        __tracebackhide__ = True
        judged = dataclasses.replace(
            estimate, evidence=f"from {counted(estimate.count, 'paired round')} on {self.slot.id}"
        )
        context = JudgeContext(
            inconclusive=self.settings.measure.inconclusive,
            observer=None if record is None else self._observer_of(record),
        )
        check = expect_estimate(judged, at_least=at_least, at_most=at_most, context=context, stacklevel=2)
        self.note(f"{check.outcome}: {check.message}")
        return check

    def _observer_of(self, name: str) -> Callable[[Check], None]:
        """Where a check of this test's record of the measurement ``name`` goes; ValueError if there is none."""
        key = self._key(name)
        if key not in self._keys:
            recorded = ", ".join(repr(self._name(k)) for k in self._keys) or "none"
            raise ValueError(
                f"gpuperf.expect(record={name!r}): {self._item.nodeid} recorded no measurement of that name "
                f"(it recorded: {recorded})"
            )
        return self._book.observer(key)

    def record(
        self,
        measurement: Measurement,
        *,
        params: Mapping[str, object] | None = None,
        tolerance: values.Tolerance | None = None,
        noise_floor: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        evidence: Evidence | None = None,
    ) -> Record:
        """Record a Measurement made another way (paired rounds, other processes) as this test's.

        Assertions made later on the record's measurement (``record.measurement``) land in the
        record. ``tolerance`` and ``noise_floor`` are the gate's
        for this record (as fractions, or ``values.AutoTolerance()`` for ``auto``; default: the test's marker, else
        the session's).
        """
        self._check_unrecorded(measurement.name)
        key = self._key(measurement.name)
        # without its profiler (a record keeps only its figures), its trace first copied where the session needs it
        measurement = self._session.gate.kept(key, dataclasses.replace(measurement, observer=self._book.observer(key)))
        hook = self._item.config.hook
        if evidence is None:
            evidence = self._session.evidence(self._item, measurement, tolerance=tolerance, noise_floor=noise_floor)
        kept: dict[str, Any] = dict(metadata or {})
        for extra in hook.pytest_gpuperf_record_metadata(item=self._item, measurement=measurement):
            if extra:
                kept.update(extra)
        record = Record(
            test=self._item.nodeid,
            device=self.slot.id,
            measurement=measurement,
            params={str(k): str(v) for k, v in (params or {}).items()},
            metadata=kept,
            evidence=evidence,
        )
        self._keys.append(key)
        self._session.keep(self._item, record)
        return self._book.latest(key) or record

    def _key(self, name: str) -> str:
        return Record.key_for(self._item.nodeid, name)

    def _name(self, key: str) -> str:
        return key.removeprefix(f"{self._item.nodeid}::")

    def _check_unrecorded(self, name: str) -> None:
        if self._key(name) in self._keys:
            raise ValueError(
                f"{self._item.nodeid} already recorded a measurement named {name!r}: give each measurement its own name"
            )

    @property
    def backend(self) -> Backend:
        """The device backend of this test's device (timer, synchronize, peak memory), shared by the session."""
        return self._session.backend(self.slot)

    def note(self, text: str) -> None:
        """A line for the terminal summary under this test's name: a ratio, or why nothing was asserted."""
        self._book.note(self._item.nodeid, text)

    def reference_peak(self) -> Ceiling | None:
        """This device's reference peak (FLOP/s) if one was measured this session; the report shows % of it."""
        return self._book.reference_peaks.get(self.slot.id)

    def offer_reference_peak(self, flops_per_second: float, how: str, *, source: str = "measured") -> Ceiling:
        """Offer a FLOP/s as this device's reference peak: measured (the session keeps the highest offered, and the
        "% peak" column the best of it and every record's), or ``source="datasheet"``, the vendor's figure, which
        is then the 100% whatever was measured."""
        if source not in ("measured", "datasheet"):
            raise ValueError(f"offer_reference_peak(source={source!r}): give 'measured' or 'datasheet'")
        return self._book.offer_reference_peak(self.slot.id, flops_per_second, how, source)

    @property
    def size(self) -> str:
        """The size preset for this test's device (``--gpuperf-size``, ``auto`` resolved)."""
        return resolve_size(self.settings.size, self.slot.kind, self.backend)

    def run(self, workload: Workload, *, name: str | None = None, **overrides: Any) -> Measurement:
        """Build ``workload`` on this test's device at its size preset, measure one step, run its check.

        A workload that cannot run on this device skips the test with its reason.
        """
        why = workload.why_unsupported(self.device)
        if why:
            pytest.skip(f"{workload.name} on {self.slot.id}: {why}")
        step = workload.build(self.device, self.size)
        measurement = self.measure(
            step.fn, name=name, work=step.work, params={"size": self.size, **step.params}, **overrides
        )
        if step.check is not None:
            step.check()
        return measurement
