"""Records with NVML clock readings, as ``measuring.ClockSummary.of`` summarizes them after every sample."""

from __future__ import annotations

import dataclasses

from pytest_gpuperf.measuring import ClockReading, ClockSummary
from pytest_gpuperf.results import Record

MAX_SM_CLOCK = 1980  # an H100's maximum SM clock (MHz)
COOL = ClockReading(1980, 2619, 55, 400.0, 0x0)
#: a thermal slowdown (sw_thermal_slowdown) with the clock under 75% of its maximum
HOT = ClockReading(1300, 2619, 88, 690.0, 0x20)
#: a heavy bf16 matmul's normal state on an H100: power-capped at 1425 of 1980 MHz (72%), the cap's bit alone
CAPPED = ClockReading(1425, 2619, 70, 700.0, 0x4)


def with_clocks(record: Record, throttled: int, *, reading: ClockReading = HOT) -> Record:
    """``record`` with one reading after each sample: the first ``throttled`` are ``reading``, the rest COOL."""
    n = len(record.measurement.samples)
    readings = [reading] * throttled + [COOL] * (n - throttled)
    summary = ClockSummary.of(readings, MAX_SM_CLOCK, source="nvml 0 (uuid)")
    assert summary is not None and summary.throttled == throttled
    return dataclasses.replace(record, measurement=dataclasses.replace(record.measurement, clocks=summary))
