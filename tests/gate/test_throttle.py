"""The GPU's clocks weighed like the machine's load: a slowdown measured while the GPU was throttled (and the
baseline was not, or far less) is not attributed to the code; equal throttling and missing clock data change
nothing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from pytest_gpuperf.gate import THROTTLE_MARGIN, Policy, Row, Verdict, compare_runs, gate_lines
from pytest_gpuperf.measuring import ClockReading
from pytest_gpuperf.results import Record, Round, with_repeats
from tests.gate.clocked import CAPPED, HOT, with_clocks
from tests.synthetic import BUSY, QUIET, make_record, make_run

N = 41  # samples per synthetic record


def clocked(
    median: float, throttled: int | None, *, reading: ClockReading = HOT, load: Mapping[str, Any] | None = QUIET
) -> Record:
    """A record of ``median`` with ``throttled`` of its 41 samples throttled; None: no clock data (no NVML)."""
    record = make_record(median, load=load)
    return record if throttled is None else with_clocks(record, throttled, reading=reading)


def judge(base: list[Record], head: Record, policy: Policy | None = None) -> Row:
    (row,) = compare_runs([make_run(r) for r in base], [make_run(head)], policy).rows
    return row


def three(median: float, throttled: int | None, *, reading: ClockReading = HOT) -> list[Record]:
    return [clocked(median, throttled, reading=reading) for _ in range(3)]


def test_a_slowdown_measured_while_throttled_is_unattributed_and_fails() -> None:
    base = three(10e-3, 0)
    result = compare_runs([make_run(r) for r in base], [make_run(clocked(12e-3, N))])
    (row,) = result.rows
    assert row.verdict is Verdict.UNATTRIBUTED and row.cause == "throttled" and result.failed
    assert row.reason == (
        "+20.0%: significant and over the 5% tolerance, but the GPU was throttled in 41 of 41 samples "
        "(baseline: 0 of 123 samples): SM clock below 75% of its maximum or a slowdown reason "
        "(seen: sw_thermal_slowdown), so the throttling may explain it; "
        "let the GPU cool, check its power and cooling, and re-run"
    )
    # Left out of the failing verdicts, it passes, but never unsaid.
    lenient = compare_runs(
        [make_run(r) for r in base], [make_run(clocked(12e-3, N))], Policy(fail_on=frozenset({"slower"}))
    )
    assert not lenient.failed
    assert gate_lines(lenient)[-1] == (
        "gpuperf gate: WARNING: 1 significant slowdown(s) measured while the GPU was throttled, passed only "
        "because unattributed is not among the verdicts that fail: test_step [cpu]"
    )


@pytest.mark.parametrize(
    ("head", "verdict"), [(12e-3, Verdict.SLOWER), (10.02e-3, Verdict.UNCHANGED), (8e-3, Verdict.FASTER)]
)
def test_equal_throttling_is_the_kernels_normal_state_and_changes_nothing(head: float, verdict: Verdict) -> None:
    """A heavy matmul keeps an H100 power-capped below 75% of its clock in every run: no verdict changes."""
    without = judge(three(10e-3, None), clocked(head, None))
    capped = judge(three(10e-3, N, reading=CAPPED), clocked(head, N, reading=CAPPED))
    assert without.verdict is capped.verdict is verdict
    assert capped.reason == without.reason and capped.cause == ""
    # Nearly equal (within the margin) is equal too.
    assert judge(three(10e-3, 20), clocked(head, 20 + 9)).verdict is verdict  # +22% of the samples


def test_the_margin_is_a_quarter_of_the_samples() -> None:
    assert THROTTLE_MARGIN == 0.25
    assert judge(three(10e-3, 0), clocked(12e-3, 10)).verdict is Verdict.SLOWER  # 10 of 41: 24%
    assert judge(three(10e-3, 0), clocked(12e-3, 11)).verdict is Verdict.UNATTRIBUTED  # 11 of 41: 27%


@pytest.mark.parametrize(("base_throttled", "head_throttled"), [(None, N), (0, None), (None, None)])
def test_without_clock_data_on_either_side_the_verdict_stands(
    base_throttled: int | None, head_throttled: int | None
) -> None:
    """No NVML, a CPU, an older file: no throttle evidence, so today's verdicts unchanged."""
    row = judge(three(10e-3, base_throttled), clocked(12e-3, head_throttled))
    assert row.verdict is Verdict.SLOWER and row.cause == ""
    assert row.reason == "+20.0%: significant and over the 5% tolerance"


@pytest.mark.parametrize(("head", "verdict"), [(8e-3, Verdict.FASTER), (10.02e-3, Verdict.UNCHANGED)])
def test_a_throttled_baseline_cannot_show_faster_or_unchanged(head: float, verdict: Verdict) -> None:
    assert judge(three(10e-3, 0), clocked(head, 0)).verdict is verdict  # the same runs, cool
    row = judge(three(10e-3, N), clocked(head, 0))
    assert row.verdict is Verdict.INCONCLUSIVE and row.cause == "throttled"
    assert row.reason.endswith(
        "but the baseline's GPU was throttled in 123 of 123 samples (current: 0 of 41 samples): SM clock below "
        "75% of its maximum or a slowdown reason (seen: sw_thermal_slowdown), so the baseline may be slow; "
        "save a new baseline with the GPU cool"
    )


def test_a_throttled_baseline_does_not_excuse_a_slowdown() -> None:
    """Throttling only slows: a slowdown against a throttled baseline is slower still."""
    row = judge(three(10e-3, N), clocked(12e-3, 0))
    assert row.verdict is Verdict.SLOWER


def test_only_the_runs_the_estimate_keeps_count() -> None:
    """A throttled baseline run far slower than the rest is left out, and its throttling with it."""
    base = [clocked(10e-3, 0), clocked(10e-3, 0), clocked(14e-3, N)]
    row = judge(base, clocked(8e-3, 0))
    assert row.verdict is Verdict.FASTER and row.base_runs == 2 and row.base_total == 3


def test_busy_is_weighed_first() -> None:
    row = judge(three(10e-3, 0), clocked(12e-3, N, load=BUSY))
    assert row.verdict is Verdict.UNATTRIBUTED and row.cause == "busy" and "measured while busy" in row.reason


def test_a_cool_confirmation_run_that_is_still_slow_attributes_the_slowdown() -> None:
    """As with load: throttling explains a slowdown only when every current run was throttled. A confirmation
    run measured with the GPU at its clocks (kept with its round since rounds keep their clocks) that is
    still slow shows the slowdown is the code's."""
    first = clocked(12e-3, N)
    both_hot = with_repeats([first], [clocked(12e-3, N)], as_runs=True)[0]
    assert judge(three(10e-3, 0), both_hot).verdict is Verdict.UNATTRIBUTED
    one_cool = with_repeats([first], [clocked(12e-3, 0)], as_runs=True)[0]
    row = judge(three(10e-3, 0), one_cool)
    assert row.head_runs == 2 and row.verdict is Verdict.SLOWER and row.cause == ""


def test_rounds_keep_their_clocks_through_a_file() -> None:
    record = with_repeats([clocked(12e-3, N)], [clocked(12e-3, 3)], as_runs=False)[0]
    (own, extra) = (record.evidence.first_round(record.measurement), *record.evidence.rounds)
    assert own.clocks is not None and own.clocks.throttled == N
    assert extra.clocks is not None and extra.clocks.throttled == 3
    again = Round.from_dict(json.loads(json.dumps(extra.to_dict())))
    assert again == extra
    assert Round.from_dict({"samples": [1e-3], "load": None}).clocks is None  # a file from before
