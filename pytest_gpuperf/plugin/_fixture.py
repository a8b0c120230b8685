"""The ``gpuperf`` fixture object: measure a callable on the test's device and record it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ..measuring import (
    Backend,
    Check,
    DeviceSlot,
    Measurement,
    ModeUnsupported,
    Workload,
    measure_on,
    resolve_size,
    work_from,
)
from ..results import Evidence, Record
from ._session import GpuperfSession, ReferencePeak
from ._settings import SettingError

__all__ = ["Gpuperf"]


class Gpuperf:
    """What a test gets as ``gpuperf``: ``gpuperf.measure(fn, flops=...)`` returns a Measurement."""

    def __init__(self, item: pytest.Item, session: GpuperfSession, slot: DeviceSlot) -> None:
        self._item = item
        self._session = session
        self.slot = slot
        self.settings = session.item_settings(item)
        self.records: list[Record] = []

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
        if name is None and any(r.measurement.name == self._item.nodeid for r in self.records):
            raise ValueError(
                f"{self._item.nodeid} measures more than once: give each measurement its own name=, "
                "so that each can be compared with its baseline"
            )
        try:
            settings = self.settings.with_marker(overrides) if overrides else self.settings
        except SettingError as exc:
            raise ValueError(f"gpuperf.measure(): {exc}") from None
        record_checks: list[Check] = []
        label = name or self._item.nodeid
        try:
            measurement = measure_on(
                fn,
                self._session.backend(self.slot),
                settings.measure,
                name=label,
                device=self.slot.id,
                work=work_from(flops, bytes, samples, items, work),
                observer=record_checks.append,
                # Under torchrun: barrier per block, the slowest rank counts, agreed stops (docs/multi-gpu.md).
                coordinator=self._session.coordinator(self.slot, f"{self._item.nodeid} {label}"),
            )
        except ModeUnsupported as exc:
            pytest.skip(str(exc))
        own = {name: settings.value(name) for name in ("tolerance", "noise_floor") if name in overrides}
        self.record(measurement, params=params, checks=record_checks, **own)
        return measurement

    def record(
        self,
        measurement: Measurement,
        *,
        params: Mapping[str, object] | None = None,
        checks: list[Check] | None = None,
        tolerance: float | None = None,
        noise_floor: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        evidence: Evidence | None = None,
    ) -> Record:
        """Record a Measurement made another way (paired rounds, other processes) as this test's.

        ``checks`` is the list the measurement's observer appends to, so that assertions
        made on it later land in the record, as with ``measure()``. ``tolerance`` and
        ``noise_floor`` are the gate's for this record (as fractions; default: the test's
        marker, else the session's).
        """
        if any(r.measurement.name == measurement.name for r in self.records):
            raise ValueError(
                f"{self._item.nodeid} already recorded a measurement named {measurement.name!r}: "
                "give each measurement its own name"
            )
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
            checks=checks if checks is not None else [],
            evidence=evidence,
        )
        self.records.append(record)
        self._session.keep(self._item, record)
        return record

    @property
    def backend(self) -> Backend:
        """The device backend of this test's device (timer, synchronize, peak memory), shared by the session."""
        return self._session.backend(self.slot)

    def note(self, text: str) -> None:
        """A line for the terminal summary under this test's name: a ratio, or why nothing was asserted."""
        self._session.add_note(self._item.nodeid, text)

    def reference_peak(self) -> ReferencePeak | None:
        """This device's reference peak (FLOP/s) if one was measured this session; the report shows % of it."""
        return self._session.reference_peaks.get(self.slot.id)

    def offer_reference_peak(self, flops_per_second: float, how: str) -> ReferencePeak:
        """Offer a measured FLOP/s as this device's reference peak; the session keeps the highest offered."""
        return self._session.offer_reference_peak(self.slot.id, flops_per_second, how)

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
