"""A new reading lands by adding one module and registering it (issue 33, item 1): ``cpu_time_reading.py``, the
process's CPU time per call, reaches the Measurement and its file, the results table, the HTML report and the gate,
with no edit to the runner, the Measurement, the table, the report or the gate."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_gpuperf
from pytest_gpuperf.gate import compare_runs, gate_lines
from pytest_gpuperf.measuring import Measurement, readings, register_reading
from pytest_gpuperf.report import render
from pytest_gpuperf.results import Record, results_table, table_notes
from tests.measuring.cpu_time_reading import CPU_TIME, CpuTime
from tests.synthetic import make_record, make_run

FAST: dict[str, Any] = {"max_time": 0.2, "min_time": 0.02, "warmup_time": 0.02, "memory": False, "profile": "off"}


def busy() -> int:
    return sum(range(20_000))


def with_cpu_time(record: Record, per_call: float) -> Record:
    measurement = record.measurement.with_reading(CPU_TIME, CpuTime(per_call, len(record.measurement.samples)))
    return dataclasses.replace(record, measurement=measurement)


def test_a_measurement_reads_it_keeps_it_in_its_file_and_reads_it_back() -> None:
    with register_reading(CPU_TIME):
        m = pytest_gpuperf.measure(busy, name="busy", **FAST)
        value = m.reading(CPU_TIME)
        assert value is not None and value.blocks == len(m.samples)
        # A pure-Python step runs on one thread: its CPU time per call is about its wall time per call.
        assert 0 < value.per_call < 10 * m.median
        stored = json.loads(json.dumps(m.to_dict()))
        assert stored["cpu_time"] == {"per_call": value.per_call, "blocks": value.blocks}
        assert Measurement.from_dict(stored).reading(CPU_TIME) == value
        assert "cpu_time" in [r.name for r in readings()]
    # Outside the block it is neither read nor decoded; the file's key is left alone.
    assert "cpu_time" not in [r.name for r in readings()]
    assert pytest_gpuperf.measure(busy, name="busy", **FAST).reading(CPU_TIME) is None
    assert Measurement.from_dict(stored).reading(CPU_TIME) is None


def test_a_name_taken_is_refused() -> None:
    taken = pytest.raises(ValueError, match="a reading named 'cpu_time' is registered")
    with register_reading(CPU_TIME), taken, register_reading(CPU_TIME):
        pass


def test_the_table_and_the_report_show_its_cell_flag_note_and_fact() -> None:
    fast, heavy = with_cpu_time(make_record(1e-3), 1e-3), with_cpu_time(make_record(1e-3, test="t.py::test_b"), 4e-3)
    with register_reading(CPU_TIME):
        header, _, first, second = results_table([fast, heavy]).splitlines()[:4]
        assert header.index("cpu/call") < header.index("samples") and " 1 ms " in first and " 4 ms " in second
        assert "cpu above wall" in second and "cpu above wall" not in first
        assert table_notes([fast, heavy], {}) == ["cpu/call: the process's CPU time per call, 2 of 2 records"]
        html = render(make_run(fast, heavy))
        assert "<th>cpu/call</th>" in html and "<dt>CPU time</dt><dd>4 ms/call, 41 blocks</dd>" in html
    assert "cpu/call" not in results_table([fast])


def test_the_gate_carries_its_comparison_and_says_what_changed() -> None:
    base = [make_run(with_cpu_time(make_record(1e-3), 1e-3)) for _ in range(3)]
    head = [make_run(with_cpu_time(make_record(1e-3), 3e-3))]
    with register_reading(CPU_TIME):
        result = compare_runs(base, head)
        (row,) = result.rows
        change = row.changes["cpu_time"]
        assert change.summary(result.fail_on) == "cpu time per call more: 1 ms -> 3 ms"
        assert "test_step [cpu]: cpu time per call more: 1 ms -> 3 ms" in gate_lines(result)
        assert row.work_failing(frozenset({"cpu_time"})) == ["cpu_time"]
    assert "cpu_time" not in compare_runs(base, head).rows[0].changes


def test_a_session_with_it_registered_prints_its_column(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_busy="""
        def test_busy(gpuperf):
            gpuperf.measure(lambda: sum(range(20_000)))
        """
    )
    with register_reading(CPU_TIME):
        result = pytester.runpytest_inprocess(
            "-p", "no:randomly", "--gpuperf-device=cpu", "--gpuperf-max-time=0.2", "--gpuperf-warmup-time=0.02"
        )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["test *device *median *cpu/call *samples *flags", "test_busy *cpu *"])


#: The modules that iterate over the readings: none names one (issue 33's measure of item 1).
ITERATING = ("measuring/_runner.py", "measuring/_paired.py", "results/_table.py", "report/_html.py")


def test_the_modules_that_iterate_over_readings_name_none() -> None:
    package = Path(pytest_gpuperf.__file__).parent
    paths = [package / name for name in ITERATING] + sorted((package / "gate").glob("*.py"))
    for path in paths:
        text = path.read_text()
        for name in ("cpu_time", "energy", "joule"):
            assert not re.search(name, text, re.IGNORECASE), f"{path.relative_to(package)} names {name}"
