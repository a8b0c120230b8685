"""The HTML report shows the clock-normalised ratio beside the time ratio, each record's GPU clocks and its energy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_gpuperf.gate import CLOCK_HEADER
from pytest_gpuperf.measuring._energy import ENERGY, EnergySummary
from pytest_gpuperf.report import compare, render
from pytest_gpuperf.results import Baseline
from tests.gate.clocked import COOL, SLOW, with_clocks
from tests.synthetic import make_record, make_run

TEST = "t.py::test_a[cpu]"


def test_the_time_x_clock_ratio_stands_beside_the_time_ratio() -> None:
    base = Baseline(Path("/b/main.json"), [make_run(with_clocks(make_record(10e-3, test=TEST), 41, reading=COOL))] * 3)
    run = make_run(with_clocks(make_record(12e-3, test=TEST), 41, reading=SLOW))
    html = render(run, compare(base, run))
    assert f"<th>{CLOCK_HEADER}</th>" in html
    assert html.index("<th>ratio [95% CI]</th>") < html.index(f"<th>{CLOCK_HEADER}</th>")
    assert "1.000 [" in html and "1980 / 1650 MHz" in html
    assert "median 1650 MHz (1650-1650) of 1980 max, 41 of 41 samples throttled" in html


def test_energy_per_call_and_per_joule_where_read_and_why_not_where_not() -> None:
    record = make_record(1e-3, test=TEST, work={"samples": 256.0})
    energy = EnergySummary("nvml 0 total energy", joules=70.0, seconds=0.1, calls=1000, timed_seconds=0.09, error=0.02)
    measured = dataclasses.replace(record, measurement=record.measurement.with_reading(ENERGY, energy))
    html = render(make_run(measured))
    assert "<th>per joule</th>" in html and "3.657k samples/J" in html
    assert "0.07 J/call, mean 700 W over 0.1 s (+-2%; nvml 0 total energy)" in html
    none = EnergySummary("", note="no RAPL package zone under /sys/class/powercap")
    unread = dataclasses.replace(record, measurement=record.measurement.with_reading(ENERGY, none))
    html = render(make_run(unread))
    assert "<th>per joule</th>" not in html
    # no counter at all: said once, under the table, not again in the record's card
    assert html.count("no RAPL package zone") == 1 and "energy: none on cpu: no RAPL package zone under" in html
    short = EnergySummary("nvml 0 total energy", note="the counter stepped 1 time(s) in the 0.05 s ...")
    html = render(make_run(dataclasses.replace(record, measurement=record.measurement.with_reading(ENERGY, short))))
    assert "none: the counter stepped 1 time(s) in the 0.05 s ..." in html  # a counter that read too little: its card
    assert CLOCK_HEADER not in render(make_run(record))
