"""Records with NVML clock readings, as ``measuring.ClockSummary.of`` summarizes them after every sample."""

from __future__ import annotations

import dataclasses

from pytest_gpuperf.measuring import ClockSummary
from pytest_gpuperf.measuring._clocks import CLOCKS, ClockReading
from pytest_gpuperf.results import Record

MAX_SM_CLOCK = 1980  # an H100's maximum SM clock (MHz)
COOL = ClockReading(1980, 2619, 55, 400.0, 0x0)
#: a thermal slowdown (sw_thermal_slowdown) with the clock at 1300 MHz (0.66 of 1980)
HOT = ClockReading(1300, 2619, 88, 690.0, 0x20)
#: a thermal slowdown at 1650 MHz: 1980 / 1.2, so a step whose cycles did not change takes 20% longer
SLOW = ClockReading(1650, 2619, 85, 690.0, 0x20)
#: the thermal-slowdown bit set at 1940 MHz (0.98 of 1980): too little clock to explain a 20% slowdown
MILD = ClockReading(1940, 2619, 84, 690.0, 0x20)
#: a heavy bf16 matmul's normal state on an H100: power-capped at 1425 of 1980 MHz (72%), the cap's bit alone
CAPPED = ClockReading(1425, 2619, 70, 700.0, 0x4)
#: clocks locked on purpose at 1200 MHz (applications_clocks_setting)
LOCKED = ClockReading(1200, 2619, 50, 350.0, 0x2)


def with_clocks(record: Record, count: int, *, reading: ClockReading = HOT) -> Record:
    """``record`` with one reading after each sample: the first ``count`` are ``reading``, the rest COOL."""
    n = len(record.measurement.samples)
    readings = [reading] * count + [COOL] * (n - count)
    summary = ClockSummary.of(readings, MAX_SM_CLOCK, source="nvml 0 (uuid)")
    assert summary is not None
    return dataclasses.replace(record, measurement=record.measurement.with_reading(CLOCKS, summary))
