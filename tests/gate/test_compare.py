"""Verdicts: the estimate, significance then tolerance, load, left-out runs, comparability, new and missing."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

import pytest

from pytest_gpuperf.gate import (
    DEFAULT_FAIL_ON,
    PRIOR_DF,
    GateResult,
    Policy,
    Row,
    Verdict,
    baseline_noise,
    compare_runs,
    estimate,
    gate_lines,
    gate_table,
    parse_verdicts,
    percent,
    reason_for,
    verdict_for,
    work_difference,
)
from pytest_gpuperf.measuring import Estimate, t_quantile
from pytest_gpuperf.measuring._stats import estimate_median
from pytest_gpuperf.results import Run, parse_mismatch_keys
from tests.synthetic import BUSY, QUIET, make_record, make_run, with_fingerprint

#: A machine quieter than the default noise floor (2%): one run a side at 0.5% can see a change of 2.7%, under the 5%
#: tolerance, so a row within it can be called unchanged (at the default floor one run a side sees only 11.1%).
QUIET_FLOOR = Policy(noise_floor=0.005)


def only_row(
    base: list[float],
    head: list[float],
    policy: Policy | None = None,
    *,
    load: dict[str, Any] | None = QUIET,
    gate: dict[str, Any] | None = None,
) -> Row:
    """The one row of comparing runs with these medians (one run each)."""
    result = compare_runs(
        [make_run(make_record(m, load=load, gate=gate)) for m in base],
        [make_run(make_record(m, load=load, gate=gate)) for m in head],
        policy,
    )
    (row,) = result.rows
    return row


# ---------------------------------------------------------------- the estimate


def test_one_run_each_uses_the_noise_floor_as_run_to_run_spread() -> None:
    est = estimate([math.log(1.0)], [math.log(1.0)], noise_floor=0.02)
    half = t_quantile(0.975, PRIOR_DF) * 0.02 * math.sqrt(2)
    assert est.value == pytest.approx(1.0)
    assert est.low == pytest.approx(math.exp(-half)) and est.high == pytest.approx(math.exp(half))
    assert est.spread == pytest.approx(0.02) and est.df == PRIOR_DF


def test_rounds_that_disagree_widen_the_interval() -> None:
    quiet = estimate([0.0, 0.001, -0.001], [0.0], noise_floor=0.02)
    noisy = estimate([0.0, 0.15, -0.15], [0.0], noise_floor=0.02)
    assert noisy.spread is not None and quiet.spread is not None
    assert noisy.spread > 3 * quiet.spread
    assert noisy.high - noisy.low > 3 * (quiet.high - quiet.low)


def test_a_run_with_a_wide_own_interval_counts_with_its_own_variance() -> None:
    narrow = estimate([0.0], [0.1], noise_floor=0.02, head_within=[0.0])
    wide = estimate([0.0], [0.1], noise_floor=0.02, head_within=[0.05**2])
    assert wide.low < narrow.low


@pytest.mark.parametrize(
    ("ratio", "low", "high", "verdict"),
    [
        (1.20, 1.10, 1.30, Verdict.SLOWER),
        (0.80, 0.70, 0.90, Verdict.FASTER),
        (1.03, 1.01, 1.05, Verdict.UNCHANGED),  # significant, but within the tolerance
        (1.08, 0.99, 1.17, Verdict.INCONCLUSIVE),  # beyond the tolerance, not significant
        (0.90, 0.80, 1.01, Verdict.INCONCLUSIVE),
        (1.00, 0.98, 1.02, Verdict.UNCHANGED),
    ],
)
def test_significance_first_then_tolerance_both_ways(ratio: float, low: float, high: float, verdict: Verdict) -> None:
    assert verdict_for(Estimate("ratio", ratio, low, high, 0.95, 8, spread=0.02), 0.05) is verdict


@pytest.mark.parametrize("rounds", [[1.3, 1.4, 1.5], [1.0, 1.001, 0.999, 1.0005, 1.0]])
def test_too_few_paired_rounds_give_no_verdict(rounds: list[float]) -> None:
    """A range of 3 rounds all 30% slower (or 5 all unchanged) is no 95% evidence either way."""
    est = estimate_median("time ratio", rounds)
    assert verdict_for(est, 0.05) is Verdict.INCONCLUSIVE
    reason = reason_for(
        Verdict.INCONCLUSIVE, est, 0.05, noise=f"{len(rounds)} paired rounds", remedy="raise --max-time"
    )
    too_few = "are too few: a distribution-free 95% interval needs at least 6; raise --max-time"
    assert reason.endswith(f"but {len(rounds)} paired rounds {too_few}")


# ---------------------------------------------------------------- records


def test_same_code_is_unchanged_and_a_planted_slowdown_fails() -> None:
    # three runs a side: evidence that can see a change of the 5% tolerance (one run a side sees only 11.1%)
    assert only_row([10e-3] * 3, [10.05e-3] * 3).verdict is Verdict.UNCHANGED
    result = compare_runs([make_run(make_record(10e-3))], [make_run(make_record(12e-3))])
    (row,) = result.rows
    assert row.verdict is Verdict.SLOWER and result.failed
    assert row.estimate is not None and row.estimate.value == pytest.approx(1.2)
    assert "+20.0%: significant and over the 5% tolerance" in row.reason


def test_improvements_are_shown_and_pass() -> None:
    result = compare_runs([make_run(make_record(10e-3))], [make_run(make_record(8e-3))])
    assert result.rows[0].verdict is Verdict.FASTER and not result.failed


def test_beyond_tolerance_but_within_noise_is_inconclusive() -> None:
    row = only_row([10e-3], [10.6e-3])
    assert row.verdict is Verdict.INCONCLUSIVE
    # Issue 23 item 8: one run a side measures no run-to-run noise; the 2.0% is the floor, and says so
    assert (
        "not significant against run-to-run noise 2.0% assumed (the noise floor: 1 baseline run and 1 current run)"
        in row.reason
    )


def test_baseline_rounds_that_disagree_make_a_borderline_change_inconclusive() -> None:
    assert only_row([10e-3, 10e-3, 10e-3, 10e-3, 10e-3], [10.55e-3]).verdict is Verdict.SLOWER
    noisy = only_row([9.6e-3, 10e-3, 10.35e-3, 9.8e-3, 10.2e-3], [10.55e-3])
    assert noisy.verdict is Verdict.INCONCLUSIVE and noisy.base_runs == 5


def test_quiet_baseline_rounds_make_a_ten_percent_change_slower() -> None:
    assert only_row([10e-3, 10.02e-3, 9.98e-3], [11e-3]).verdict is Verdict.SLOWER


def test_per_record_tolerance_wins() -> None:
    row = only_row([10e-3], [12e-3], gate={"tolerance": 0.25})
    assert row.verdict is Verdict.UNCHANGED and row.tolerance == 0.25


def test_a_slowdown_measured_on_a_busy_machine_is_unattributed_and_fails_unless_left_out() -> None:
    base, head = [make_run(make_record(10e-3))], [make_run(make_record(30e-3, load=BUSY))]
    result = compare_runs(base, head)
    (row,) = result.rows
    assert row.verdict is Verdict.UNATTRIBUTED and result.failed  # seen by CI: never a plain pass
    assert row.reason.startswith("+200.0%: significant and over the 5% tolerance, but measured while busy (other")
    assert "processes used 1.0 of 2 CPUs), so the load may explain it; re-run on a quiet machine" in row.reason
    assert gate_lines(result)[-1] == (
        "gpuperf gate: FAILED: 1 unattributed; failing on slower,unattributed + more work "
        "unless measured unchanged or faster: test_step [cpu]"
    )
    lenient = compare_runs(base, head, Policy(fail_on=frozenset({"slower"})))
    assert not lenient.failed
    assert gate_lines(lenient)[-2:] == [
        "gpuperf gate: passed (1 unattributed; failing on slower)",
        "gpuperf gate: WARNING: 1 significant slowdown(s) measured while the machine was busy, passed only "
        "because unattributed is not among the verdicts that fail: test_step [cpu]",
    ]


def test_busy_cores_do_not_excuse_a_device_bound_gpu_slowdown() -> None:
    """CPU load from other processes does not change a GPU-bound step's device time; a launch-bound step's it may."""

    def on_gpu(median: float, host: float, load: Mapping[str, Any] | None) -> Run:
        record = make_record(median, load=load)
        measurement = dataclasses.replace(record.measurement, device="cuda:0", host_per_call=host)
        return make_run(dataclasses.replace(record, device="cuda:0", measurement=measurement))

    every_core = {**BUSY, "background_cores": 2.0}  # other processes on both CPUs
    device_bound = compare_runs([on_gpu(10e-3, 50e-6, QUIET)], [on_gpu(30e-3, 50e-6, every_core)])
    assert device_bound.rows[0].verdict is Verdict.SLOWER and device_bound.failed
    launch_bound = compare_runs([on_gpu(10e-3, 12e-3, QUIET)], [on_gpu(30e-3, 36e-3, every_core)])
    assert launch_bound.rows[0].verdict is Verdict.UNATTRIBUTED


def test_busy_current_run_that_is_still_fast_is_unchanged() -> None:
    assert only_row([10e-3], [10e-3], load=BUSY).verdict is not Verdict.SLOWER


def test_baseline_measured_only_while_busy_cannot_show_unchanged() -> None:
    """Three runs a side could see a change of the tolerance (3.8%): it is the busy baseline that keeps the row from
    being unchanged."""
    result = compare_runs([make_run(make_record(10e-3, load=BUSY))] * 3, [make_run(make_record(10e-3))] * 3)
    (row,) = result.rows
    assert row.verdict is Verdict.INCONCLUSIVE
    assert "the baseline was measured while busy" in row.reason


def test_busy_baseline_runs_are_left_out_when_quiet_ones_exist() -> None:
    base = [make_run(make_record(10e-3))] * 3 + [make_run(make_record(40e-3, load=BUSY))]
    (row,) = compare_runs(base, [make_run(make_record(10e-3))] * 3).rows
    assert row.verdict is Verdict.UNCHANGED and row.base_runs == 3 and row.base_total == 4


def test_invisible_slow_rounds_are_left_out_on_each_side() -> None:
    # A quiet-looking round 20% slow (another guest on the host): one-sided, so left out.
    # Three runs kept a side, enough to see a change of the tolerance.
    row = only_row([10e-3, 10e-3, 10e-3, 12e-3], [10.02e-3] * 3)
    assert row.verdict is Verdict.UNCHANGED and row.base_runs == 3
    assert "left out as far slower than the rest: 1 of 4 baseline runs" in row.reason


def test_confirmation_rounds_overrule_a_transient() -> None:
    """On a quiet machine's noise floor, where one run a side can see a change of the tolerance."""
    base = [make_run(make_record(10e-3))]
    transient = make_record(12e-3, rounds=[10.01e-3])
    (row,) = compare_runs(base, [make_run(transient)], QUIET_FLOOR).rows
    assert row.verdict is Verdict.UNCHANGED and row.head_runs == 1 and row.head_rounds == 2
    real = make_record(12e-3, rounds=[12.03e-3, 11.97e-3])
    assert compare_runs(base, [make_run(real)], QUIET_FLOOR).rows[0].verdict is Verdict.SLOWER


def test_rounds_of_one_run_do_not_count_as_independent_runs() -> None:
    # Five agreeing rounds in one session narrow nothing: the session's drift is shared by all of them.
    one_round = only_row([10e-3], [10.6e-3])
    base = [make_run(make_record(10e-3))]
    five_rounds = compare_runs(base, [make_run(make_record(10.6e-3, rounds=[10.6e-3] * 4))]).rows[0]
    assert five_rounds.estimate is not None and one_round.estimate is not None
    assert five_rounds.estimate.low == pytest.approx(one_round.estimate.low)
    assert five_rounds.verdict is Verdict.INCONCLUSIVE


# ---------------------------------------------------------------- comparability, new, missing


def test_records_with_other_threads_are_incomparable_unless_allowed() -> None:
    base = [make_run(make_record(10e-3, threads=2))] * 3
    head = [make_run(make_record(10e-3, threads=1))] * 3
    (row,) = compare_runs(base, head).rows
    assert row.verdict is Verdict.INCOMPARABLE
    assert row.reason == "threads 2 -> 1 (compare anyway: --gpuperf-allow-mismatch=threads)"
    (row,) = compare_runs(base, head, Policy(allow_mismatch=frozenset({"threads"}))).rows
    assert row.verdict is Verdict.UNCHANGED


def test_changed_work_or_params_are_incomparable() -> None:
    assert only_row([1e-3] * 3, [1e-3] * 3).verdict is Verdict.UNCHANGED
    base = [make_run(make_record(1e-3, params={"n": "512"}))]
    head = [make_run(make_record(1e-3, params={"n": "1024"}))]
    assert compare_runs(base, head).rows[0].verdict is Verdict.INCOMPARABLE
    base = [make_run(make_record(1e-3, work={"FLOP": 1.0}))]
    head = [make_run(make_record(1e-3, work={"FLOP": 2.0}))]
    assert "work" in compare_runs(base, head).rows[0].reason


def test_the_same_samples_with_more_flop_counted_are_compared() -> None:
    base = [make_run(make_record(1e-3, work={"samples": 512.0, "FLOP": 1.0e9}))]
    head = [make_run(make_record(1.3e-3, work={"samples": 512.0, "FLOP": 1.5e9}))]
    (row,) = compare_runs(base, head).rows
    assert row.verdict is Verdict.SLOWER
    assert row.reason.endswith("; work per call differs (FLOP 1e+09 -> 1.5e+09); compared per samples")


@pytest.mark.parametrize(
    ("base", "head", "comparable", "text"),
    [
        ({"FLOP": 1.0}, {"FLOP": 1.0}, True, ""),
        (
            {"samples": 8.0, "FLOP": 1e9},
            {"samples": 8.0, "FLOP": 2e9},
            True,
            "(FLOP 1e+09 -> 2e+09); compared per samples",
        ),
        ({"FLOP": 1e9}, {"FLOP": 2e9}, False, "work per call differs (FLOP 1e+09 -> 2e+09)"),
        ({"items": 1.0}, {"items": 1.0, "bytes": 4.0}, True, "(bytes none -> 4); compared per items"),
        ({"items": 1.0}, {"bytes": 4.0}, False, "(items 1 -> none, bytes none -> 4)"),
    ],
)
def test_work_difference(base: dict[str, float], head: dict[str, float], comparable: bool, text: str) -> None:
    assert work_difference(base, head)[0] is comparable
    assert work_difference(base, head)[1].endswith(text)


def test_runs_from_other_hardware_are_never_silently_compared() -> None:
    base = [make_run(make_record(10e-3), fingerprint=with_fingerprint(cpu_model="Intel Xeon 8480"))]
    head = [make_run(make_record(20e-3))]
    result = compare_runs(base, head)
    assert [r.verdict for r in result.rows] == [Verdict.INCOMPARABLE]
    assert "CPU model Intel Xeon 8480 -> AMD EPYC 9R14" in result.rows[0].reason
    allowed = compare_runs(base, head, Policy(allow_mismatch=frozenset({"cpu_model"})))
    assert allowed.rows[0].verdict is Verdict.SLOWER
    assert "CPU model Intel Xeon 8480 -> AMD EPYC 9R14" in allowed.notes


def test_shown_differences_do_not_block() -> None:
    base = [make_run(make_record(10e-3), fingerprint=with_fingerprint(hostname="box-2", torch="2.13.1+cpu"))] * 3
    result = compare_runs(base, [make_run(make_record(10e-3))] * 3)
    assert result.rows[0].verdict is Verdict.UNCHANGED
    assert "host box-2 -> box-1" in result.notes and "torch 2.13.1+cpu -> 2.13.0+cpu" in result.notes


def test_another_torch_minor_version_blocks() -> None:
    base = [make_run(make_record(10e-3), fingerprint=with_fingerprint(torch="2.12.1+cpu"))]
    result = compare_runs(base, [make_run(make_record(10e-3))])
    assert result.rows[0].verdict is Verdict.INCOMPARABLE and "torch major.minor" in result.rows[0].reason


def test_new_and_missing_records_and_configurable_failing_verdicts() -> None:
    base = [make_run(make_record(1e-3, test="t.py::test_old"), make_record(1e-3, test="t.py::test_oom"))]
    head = [make_run(make_record(1e-3, test="t.py::test_new"))]
    result = compare_runs(base, head, failures={"t.py::test_oom": "ran out of memory"})
    verdicts = {r.test: (r.verdict, r.reason) for r in result.rows}
    assert verdicts == {
        "t.py::test_new": (Verdict.NEW, "not in the baseline"),
        "t.py::test_old": (Verdict.MISSING, "not measured in this run"),
        "t.py::test_oom": (Verdict.MISSING, "the test ran out of memory"),
    }
    # Nothing compared: the gate does not pass (issue 36 item 3), and the rows themselves fail only where named.
    assert result.failed and not result.failing
    assert gate_lines(result)[-1] == (
        "gpuperf gate: FAILED: nothing compared (1 new, 2 missing): nothing was measured on both sides"
    )
    strict = compare_runs(base, head, Policy(fail_on=frozenset({"missing"})))
    assert strict.failed and {r.test for r in strict.failing} == {"t.py::test_old", "t.py::test_oom"}


# ---------------------------------------------------------------- a gate never passes on nothing (issue 36 item 3)


def test_a_gate_whose_every_row_is_incomparable_fails_saying_nothing_was_compared() -> None:
    """On main: ``gpuperf gate: passed (2 incomparable; ...)``, exit 0, on a comparison that judged nothing."""
    other = "t.py::test_b"
    base = [make_run(make_record(1e-3, params={"n": "512"}), make_record(1e-3, test=other, params={"n": "1"}))]
    head = [make_run(make_record(1e-3, params={"n": "1024"}), make_record(1e-3, test=other, params={"n": "2"}))]
    result = compare_runs(base, head)
    assert [r.verdict for r in result.rows] == [Verdict.INCOMPARABLE] * 2
    assert result.failed and not result.failing
    assert gate_lines(result)[-1] == (
        "gpuperf gate: FAILED: nothing compared (2 incomparable): no row could be compared; the first: "
        "test_step [cpu]: params {'n': '512'} -> {'n': '1024'} (compare anyway: "
        "--gpuperf-allow-mismatch=params)"
    )
    assert gate_lines(result, label="gpuperf ab")[-1].startswith("gpuperf ab: FAILED: nothing compared (2 incomp")


def test_one_row_compared_is_a_gate_of_its_verdicts() -> None:
    base = [make_run(make_record(1e-3), make_record(1e-3, test="t.py::test_b", params={"n": "1"}))] * 3
    head = [make_run(make_record(1e-3), make_record(1e-3, test="t.py::test_b", params={"n": "2"}))] * 3
    result = compare_runs(base, head)
    assert [r.verdict for r in result.rows] == [Verdict.UNCHANGED, Verdict.INCOMPARABLE]
    assert not result.failed
    assert gate_lines(result)[-1].startswith("gpuperf gate: passed (1 unchanged, 1 incomparable; failing on ")


def test_no_rows_at_all_is_nothing_compared_and_fail_on_none_reports_it_without_failing() -> None:
    empty = GateResult([], frozenset(DEFAULT_FAIL_ON))
    assert empty.failed
    assert gate_lines(empty)[-1] == "gpuperf gate: FAILED: nothing compared: neither side has a record"
    skipped = GateResult([], frozenset(DEFAULT_FAIL_ON), skipped={"fp16": "unsupported on cpu on both sides"})
    assert gate_lines(skipped, label="gpuperf ab")[-1] == (
        "gpuperf ab: FAILED: nothing compared (1 skipped): neither side has a record"
    )
    base = [make_run(make_record(1e-3, params={"n": "512"}))]
    head = [make_run(make_record(1e-3, params={"n": "1024"}))]
    reported = compare_runs(base, head, Policy(fail_on=frozenset()))
    assert not reported.failed
    assert gate_lines(reported)[-1].startswith(
        "gpuperf gate: not failed (failing on none), but nothing compared (1 incomparable): no row could be "
    )


def test_parse_verdicts_and_mismatch_keys() -> None:
    assert parse_verdicts("slower, missing,slower") == ("slower", "missing")
    assert parse_verdicts("none") == ()
    assert parse_verdicts("slower,ops,memory") == ("slower", "ops", "memory")
    assert parse_verdicts("slower,more-work,missing") == ("slower", "more-work", "missing")
    with pytest.raises(
        ValueError,
        match=r"'worse' is not a verdict or a work category; use a comma list of "
        r"verdicts \(slower, unattributed, same-work, faster",
    ):
        parse_verdicts("slower,worse")
    assert parse_mismatch_keys("threads,cpu_model") == ("threads", "cpu_model")
    with pytest.raises(ValueError, match="'gpu' is not a fingerprint key; use all or a comma list of machine"):
        parse_mismatch_keys("gpu")


def test_table_shows_baseline_current_ratio_interval_and_verdict() -> None:
    base = [make_run(make_record(10e-3)) for _ in range(3)]
    result = compare_runs(base, [make_run(make_record(12e-3))])
    table = gate_table(result)
    header, _, row = table.splitlines()[:3]
    columns = ("test", "device", "baseline", "current", "ratio [95% CI]", "can see", "runs", "verdict", "why")
    assert [header.index(column) for column in columns] == sorted(header.index(column) for column in columns)
    assert row.split()[:5] == ["test_step", "cpu", "10", "ms", "12"]
    assert "1.200 [" in row and ">= 6.5%" in row and "3/1" in row and "SLOWER" in row
    assert (
        gate_lines(result)[-1] == "gpuperf gate: FAILED: 1 slower; failing on slower,unattributed + more work "
        "unless measured unchanged or faster: test_step [cpu]"
    )


@pytest.mark.parametrize("df", [1, 2, 3, 4, 6, 10, 30, math.inf])
@pytest.mark.parametrize("p", [0.9, 0.975, 0.995])
def test_t_quantile_matches_scipy(df: float, p: float) -> None:
    from scipy import stats  # type: ignore[import-untyped]

    expected = stats.norm.ppf(p) if math.isinf(df) else stats.t.ppf(p, df)
    assert t_quantile(p, df) == pytest.approx(expected, rel=1e-2 if df <= 4 else 1e-3)


def test_baseline_noise_says_what_the_baseline_can_call_before_the_verdicts() -> None:
    """The line says the smallest change a session of one run can see against the baseline (``detectable``); six
    quiet runs see under the 5% tolerance, four noisy ones (one left out) cannot, and the line says what follows."""
    quiet = [make_run(make_record(10e-3 * (1 + d))) for d in (0.0, 0.005, -0.004) * 2]
    noise = baseline_noise(quiet)
    assert noise is not None and noise.runs == 6 and noise.records == 1
    assert noise.seen < 0.05  # six quiet runs can see a change of the tolerance
    assert noise.describe(0.05) == (
        "baseline noise: run-to-run 1.4% (6 runs): a session of one run can see a change of 4.8% or more"
    )
    noisy = [make_run(make_record(10e-3 * (1 + d))) for d in (0.0, 0.09, -0.08, 0.05)]
    loud = baseline_noise(noisy)
    assert loud is not None and loud.seen > 0.1 and loud.spread > 0.03
    text = loud.describe(0.05)
    assert text.endswith(
        f"a session of one run can see a change of {percent(loud.seen)} or more; the 5% tolerance cannot be seen "
        "here, so a row within it is inconclusive, not unchanged: save more runs on a quieter machine, gate with "
        "`pytest-gpuperf ab`, or give --gpuperf-tolerance=auto"
    )
    # The figure is the one the gate computes: a session of one run gets that detectable change, and a row within
    # the tolerance is inconclusive, not unchanged.
    one_run = compare_runs(noisy, [make_run(make_record(10e-3))])
    (row,) = one_run.rows
    assert row.detectable == pytest.approx(loud.seen)
    assert row.verdict is Verdict.INCONCLUSIVE and f"this test can see >= {percent(loud.seen)}" in row.reason
    assert gate_lines(one_run)[-2] == (
        "gpuperf gate: warning: 1 row cannot see the 5% tolerance, so none of them can be called unchanged: "
        f"test_step [cpu] (can see >= {percent(loud.seen)}); gather more evidence, or give the tolerance auto "
        "(each row's own smallest detectable change)"
    )
    (seen,) = compare_runs(quiet, [make_run(make_record(10e-3))]).rows
    assert seen.detectable == pytest.approx(noise.seen) and seen.verdict is Verdict.UNCHANGED
    assert baseline_noise([]) is None


def test_baseline_noise_says_when_its_spread_is_the_assumed_floor() -> None:
    """Issue 23 item 8: with two of three baseline runs left out as disturbed, the line claimed "run-to-run 2.0%"
    measured; it is the noise floor, assumed (on main: "baseline noise: run-to-run 2.0% (1 run): ...")."""
    calm, busy = make_run(make_record(10e-3)), make_run(make_record(14e-3, load=BUSY))
    noise = baseline_noise([calm, busy, busy])
    assert noise is not None and noise.assumed and (noise.kept, noise.total) == (1, 3)
    assert noise.describe(0.05).startswith(
        "baseline noise: run-to-run 2.0% assumed (the noise floor; 1 run; 2 of 3 left out): "
    )
    measured = baseline_noise([calm] * 3)
    assert measured is not None and not measured.assumed and "assumed" not in measured.describe(0.05)


def test_baseline_noise_states_the_figures_the_verdicts_use() -> None:
    """Issue 35 item 6: the line gave the median record's run-to-run noise (2.8%) above rows whose reasons read 24.0%,
    15.5%, 11.5% and 6.8%: each verdict uses its own row's, over its baseline and current runs. With the rows, the
    line states theirs: every figure a reason gives lies in the range it states, whose ends are rows' figures."""
    spreads = (0.002, 0.01, 0.03, 0.06, 0.12)  # each test's own noise, run to run

    def run(offset: float, change: float = 1.0) -> Run:
        tests = enumerate(spreads)
        return make_run(
            *(make_record(10e-3 * (1 + s * offset) * change, test=f"t.py::test_{i}[cpu]") for i, s in tests)
        )

    base = [run(-1.0), run(0.0), run(1.0)]
    noise = baseline_noise(base)
    assert noise is not None and noise.records == 5
    for head in ([run(0.0, 1.04)], [run(0.0, 1.04), run(0.5, 1.1)]):  # one current run; with a confirmation run
        result = compare_runs(base, head)
        line = noise.describe(0.05, result.rows)
        stated = re.search(
            r"the verdicts use each row's own run-to-run noise, over its baseline and current runs: "
            r"([\d.]+)% to ([\d.]+)%$",
            line,
        )
        assert stated is not None, line
        low, high = (float(figure) for figure in stated.groups())
        figures = [float(f) for row in result.rows for f in re.findall(r"run-to-run noise ([\d.]+)%", row.reason)]
        assert len(figures) >= 2 and all(low <= figure <= high for figure in figures), (line, figures)
        spreads_used = [f"{row.estimate.spread:.1%}" for row in result.rows if row.estimate and row.estimate.spread]
        assert f"{low:.1f}%" in spreads_used and f"{high:.1f}%" in spreads_used
        assert line.startswith(noise.describe(0.05))  # what the baseline can call, as before


def test_baseline_noise_adds_nothing_where_the_rows_use_its_figure() -> None:
    quiet = [make_run(make_record(10e-3 * (1 + d))) for d in (0.0, 0.005, -0.004)]
    noise = baseline_noise(quiet)
    assert noise is not None
    result = compare_runs(quiet, [make_run(make_record(10.02e-3))])
    assert noise.describe(0.05, result.rows) == noise.describe(0.05)
    # a confirmation run pooled in: the one row's figure is not the line's, and the line says the row's
    confirmed = compare_runs(quiet, [make_run(make_record(10.02e-3)), make_run(make_record(10.6e-3))])
    (row,) = confirmed.rows
    assert row.estimate is not None and row.estimate.spread is not None
    assert noise.describe(0.05, confirmed.rows).endswith(
        f"; the verdict uses {row.estimate.spread:.1%}, over the baseline and current runs"
    )


def test_baseline_noise_names_the_noisiest_record() -> None:
    def run(quiet: float, loud: float) -> Run:
        return make_run(make_record(quiet), make_record(loud, test="t.py::test_loud[cpu]"))

    runs = [run(10e-3, 10e-3 * f) for f in (1.0, 1.2, 0.85)]
    noise = baseline_noise(runs)
    assert noise is not None and noise.records == 2
    assert noise.worst_test == "test_loud [cpu]" and noise.worst_seen > noise.seen
    assert f"({percent(noise.worst_seen)} for test_loud [cpu])" in noise.describe(0.05)


def test_the_gates_lines_and_the_report_judge_each_row_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37: two notes under the table asked ``GateResult.failing`` (which judges every row) once per row, so
    ``compare`` and ``report`` of 5,000 records took 45.6 and 47.8 s; the verdict's line looked each row up in the
    failing ones (630,000 row comparisons for 128 failing of 5,000). The rows judged grow as the rows do."""
    from pytest_gpuperf.report._html import Comparison, render

    judged = [0]
    real, real_eq = Row.failing_on, Row.__eq__

    def counted(row: Row, fail_on: frozenset[str]) -> list[str]:
        judged[0] += 1
        return real(row, fail_on)

    def compared(row: Row, other: object) -> bool:  # ``row in rows``: one whole comparison a row it passes
        judged[0] += 1
        return real_eq(row, other)

    monkeypatch.setattr(Row, "failing_on", counted)
    monkeypatch.setattr(Row, "__eq__", compared)

    def judgements(n: int) -> int:
        tests = [f"t.py::test_{i}" for i in range(n)]
        base = make_run(*[make_record(10e-3, test=t) for t in tests])
        head = make_run(*[make_record(10e-3 * (1.3 if i % 3 == 0 else 1.0), test=t) for i, t in enumerate(tests)])
        judged[0] = 0
        result = compare_runs([base], [head])
        gate_lines(result)
        gate_table(result)
        render(head, Comparison([base], result, against="baseline 'main'"))
        return judged[0]

    small, large = judgements(40), judgements(160)
    assert small > 0 and large <= 4.4 * small, (small, large)
