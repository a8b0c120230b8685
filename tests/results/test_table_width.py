"""The results table fits the terminal's width (issue 35, item 5): short flags spelt out under it, the notes
wrapped, "p99" only for samples of single calls by request, "not converged" only where the row's interval does
not say it already."""

from __future__ import annotations

import dataclasses
import random
import threading
from typing import Any

import pytest

from pytest_gpuperf.measuring import ClockSummary, Warmup
from pytest_gpuperf.measuring._clocks import CLOCKS, ClockReading
from pytest_gpuperf.measuring._judge import Check
from pytest_gpuperf.measuring._timing_checks import TIMING_CHECKS, Counted, Drain, TimingChecks
from pytest_gpuperf.results import Ceiling, Evidence, Record, flags, results_table, row_flags, table_lines
from tests.synthetic import BUSY, make_measurement, samples_around

STARVED = {**BUSY, "background_cores": 1.75, "own_cores": 0.25, "waited_cores": 0.75}

LONG = "suites/test_a_module_of_models.py::TestTransformerTraining::test_training_step_throughput_of_a_model"


def record(test: str, samples: tuple[float, ...] | None = None, **fields: Any) -> Record:
    load = fields.pop("load", None)
    checks = fields.pop("checks", [])
    m = make_measurement(test, samples or samples_around(1e-3), **{"work": {"FLOP": 1e9, "samples": 256}, **fields})
    evidence = Evidence.from_dict({"load": load} if load else {})
    return Record(test=test, device="cpu", measurement=m, params={}, evidence=evidence, checks=checks)


def flagged() -> list[Record]:
    """Rows with every flag the table has, and long names with long parameter ids."""
    throttled = ClockSummary.of([ClockReading(1500, 2619, 80, 500.0, 0x8)] * 41, 1980)
    drain = TimingChecks(Drain(41, 2e-3, 2.0, 3e-3), Counted(3, 0))
    unsteady = Warmup(3, 3, 0.01, False, (1e-3,) * 3)
    rising = tuple(1e-3 * (1 + 0.2 * i / 40) for i in range(41))
    base = record(f"{LONG}[cpu-transformer_wide-bfloat16-batch=4096]", load=STARVED, threads=1)
    rows = [
        dataclasses.replace(
            base,
            measurement=base.measurement.with_reading(CLOCKS, throttled).with_reading(TIMING_CHECKS, drain),
        ),
        record(
            f"{LONG}_again[cpu-mlp_wide-float32-batch=16384]",
            rising,
            converged=False,
            stop_reason="time cap 0.3 s reached before the 3.00% target",
            target=0.5,
            over_time="one call (2 s) was longer than what was left of max_time",
            warmup=unsteady,
            mode="cold",
            host_per_call=2e-3,
            device_per_call=1e-3,
            short_leads=3,
            checks=[
                Check("throughput", ">=", "1 TFLOP/s", "fail", "measured 1 GFLOP/s"),
                Check("extra time of the checkpointed step, in forward passes", "<=", "1.5", "inconclusive", "-"),
            ],
        ),
        record("suites/test_b.py::test_no_work[cpu-graph]", mode="graph", host_per_call=1e-3, device_per_call=1e-9),
    ]
    return rows


@pytest.mark.parametrize("width", [80, 120])
def test_every_line_fits_the_width_and_every_flag_is_spelt_out_under_the_table(width: int) -> None:
    records = flagged()
    peaks = {"cpu": Ceiling(2e12, "matmul bfloat16 n=1024, 2 TFLOP/s median")}
    lines = table_lines(records, peaks, width=width)
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    under = " ".join(" ".join(lines[lines.index("flags in full:") :]).split())
    words = set(" ".join(lines[: lines.index("flags in full:")]).replace(",", " ").split())
    for r in records:
        for flag in row_flags(r):
            if flag.in_row and flag.spelt_out:  # spelt out under the table
                assert " ".join(flag.spelt_out.split()) in under, flag
            elif flag.in_row:  # whole in the row, perhaps wrapped
                assert set(flag.code.split()) <= words, flag
    assert "starved (0.25 of 1 core)" in under and "throttled 41/41" in under
    assert "not converged: time cap 0.3 s reached before the 3.00% target" in under


def test_without_a_width_the_table_is_one_line_a_row_with_short_flags() -> None:
    records = flagged()
    lines = results_table(records).splitlines()
    assert len(lines) == 2 + len(records)
    assert lines[2].endswith("starved, device work after end event, throttled")
    assert "(0.25 of 1 core)" not in lines[2]


def test_a_table_that_cannot_be_as_narrow_as_asked_stops_at_its_narrowest() -> None:
    # "starved," with its comma is a letter wider than the flags' longest word: the narrowing went round for ever.
    records = [record("t.py::test_a[cpu]", load=STARVED, threads=1, mode="cold")]
    tables: list[str] = []
    thread = threading.Thread(target=lambda: tables.append(results_table(records, width=40)), daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert tables, "results_table(width=40) did not return"
    header, _, first, second, _ = tables[0].splitlines()
    assert header.split()[-1] == "flags" and first.endswith("  starved,") and second.endswith("  cold")


def test_p99_is_a_column_only_where_samples_are_single_calls_by_request() -> None:
    by_chance = record("t.py::test_slow[cpu]", single_calls=True)  # one call filled a block: not asked for
    assert "p99" not in results_table([by_chance]).splitlines()[0]
    asked = record("t.py::test_latency[cpu]", samples_around(1e-3, n=400), single_calls=True, latency=True)
    header, _, first, second = results_table([asked, by_chance]).splitlines()
    assert header.split()[:6] == ["test", "device", "median", "95%", "CI", "p99"]
    assert first.split()[5:7] == ["1.004", "ms"]
    assert second.split()[5] == "-" and "samples)" not in second  # no "- (41 samples)" on a row not asked for


def test_not_converged_is_flagged_only_where_the_rows_interval_does_not_say_it() -> None:
    stopped: dict[str, Any] = {"converged": False, "stop_reason": "time cap 0.3 s reached before the 1.00% target"}
    spread = samples_around(1e-3, spread=0.2)
    wide = record("t.py::test_wide[cpu]", tuple(random.Random(0).sample(spread, len(spread))), **stopped)  # +-7%
    few = record("t.py::test_few[cpu]", samples_around(1e-3, n=4), **stopped)  # "- (4 samples)"
    narrow = record("t.py::test_narrow[cpu]", **stopped, target=0.05)  # within its target, yet stopped
    lines = results_table([wide, few, narrow]).splitlines()
    assert "not conv." not in lines[2] and "not conv." not in lines[3]
    assert lines[4].endswith("not conv.")
    legend = table_lines([wide, few, narrow], {}, width=120)
    assert "  test_narrow: not converged: time cap 0.3 s reached before the 1.00% target" in legend
    assert not any("test_wide" in line or "test_few" in line for line in legend[5:])
    # The HTML report's flags keep every one (``flags``).
    assert all("not converged" in flags(r) for r in (wide, few, narrow))


LONG_TESTS = """
import pytest

@pytest.mark.parametrize("shape", ["a_rather_long_parameter_id-with-parts"])
def test_a_measurement_with_a_long_name_and_two_kinds_of_work(gpuperf, shape):
    gpuperf.measure(lambda: sum(range(100)), flops=1e3, samples=8, name="the_forward_pass")
    gpuperf.note("a note longer than the terminal is wide, " * 4)
"""


def test_the_session_fits_its_results_to_columns(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_long=LONG_TESTS)
    args = ("-p", "no:randomly", "--gpuperf-device=cpu", "--gpuperf-max-time=0.1", "--gpuperf-warmup-time=0.01")
    monkeypatch.setenv("COLUMNS", "70")
    lines = pytester.runpytest(*args).stdout.lines
    start = next(i for i, line in enumerate(lines) if "gpuperf results" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("gpuperf: saved"))  # a path, left whole
    results = lines[start:end]
    assert max(len(line) for line in results) <= 70, "\n".join(results)
    assert any(line.startswith("test_a_") for line in results)  # its name wrapped
    monkeypatch.delenv("COLUMNS")  # and to a pipe or a file (pytester's), one line a row, as wide as it is
    lines = pytester.runpytest(*args).stdout.lines
    assert any(line.startswith("test_a_measurement_with_a_long_name_and_two_kinds_of_work[") for line in lines), lines
