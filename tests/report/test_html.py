"""The HTML report's renderer, from synthetic runs: what it says, in which order, escaped, and loading nothing."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pytest_gpuperf.gate import percent
from pytest_gpuperf.measuring import MEMORY, Check, duration_unit, values
from pytest_gpuperf.measuring._memory import MemoryReading
from pytest_gpuperf.report import compare, render
from pytest_gpuperf.report._html import policy_of
from pytest_gpuperf.report._svg import MAX_DOTS, ticks
from pytest_gpuperf.results import Baseline, Fingerprint, Record, Run, flags
from tests.synthetic import (
    BUSY,
    QUIET,
    make_measurement,
    make_record,
    make_run,
    samples_around,
    with_fingerprint,
)


def baseline_of(*medians_by_test: tuple[str, float], runs: int = 3) -> Baseline:
    run = make_run(*(make_record(m, test=t) for t, m in medians_by_test))
    return Baseline(Path("/results/baselines/main.json"), [run] * runs, "main")


def test_every_string_of_the_run_is_escaped() -> None:
    test = "t.py::test_<b>&'q'\"[cpu]"
    run = make_run(make_record(1e-3, test=test), fingerprint=with_fingerprint(cpu_model="<CPU & co>"))
    html = render(run, source='file "<x>.json"')
    assert "<b>" not in html and "<CPU" not in html and '"<x>' not in html
    assert "test_&lt;b&gt;&amp;&#x27;q&#x27;&quot;" in html
    assert "&lt;CPU &amp; co&gt;" in html


def test_the_page_loads_nothing() -> None:
    base = baseline_of(("t.py::test_a[cpu]", 1e-3))
    run = make_run(make_record(1.1e-3, test="t.py::test_a[cpu]"))
    html = render(run, compare(base, run))
    assert not re.search(r"https?:", html, re.IGNORECASE)
    for loader in ("<script", "<link", "<img", "<iframe", "@import", "url(", "src=", "@font-face"):
        assert loader not in html.lower()


def test_too_few_samples_claim_no_interval() -> None:
    record = make_record(1e-3)
    few = dataclasses.replace(record, measurement=make_measurement("few", (1e-3, 1.1e-3, 0.9e-3)))
    html = render(make_run(few))
    assert "- (3 samples)" in html
    assert "+-0.0%" not in html and "+-0%" not in html
    assert 'class="band"' not in html  # no band drawn for an interval that is not claimed
    assert ", band: its 95% interval" not in html


def test_an_interval_is_shown_with_its_ends_and_drawn_as_a_band() -> None:
    html = render(make_run(make_record(2e-3)))
    assert re.search(r"\+-0\.\d% \[1\.99\d ms, 2\.00\d ms\]", html)
    assert html.count('class="band"') == 1


def test_against_a_baseline_the_largest_slowdown_comes_first() -> None:
    tests = ("t.py::test_same[cpu]", "t.py::test_much[cpu]", "t.py::test_new[cpu]", "t.py::test_some[cpu]")
    base = baseline_of((tests[0], 10e-3), (tests[1], 10e-3), (tests[3], 10e-3), ("t.py::test_gone[cpu]", 1e-3))
    run = make_run(
        make_record(10e-3, test=tests[0]),
        make_record(13e-3, test=tests[1]),
        make_record(5e-3, test=tests[2]),
        make_record(11.5e-3, test=tests[3]),
    )
    html = render(run, compare(base, run))
    order = re.findall(r'<p class="nodeid">t\.py::(test_\w+)\[cpu\]</p>', html)
    assert order == ["test_much", "test_some", "test_same", "test_new"]  # no ratio (new) last
    assert "1.300 [" in html and "SLOWER" in html and "+30.0%: significant and over the 5% tolerance" in html
    assert "in the baseline, not in this run" in html and "test_gone [cpu]: not measured in this run" in html
    assert "baseline noise: run-to-run " in html
    assert "gpuperf gate: FAILED: " in html
    # what each row can see (issue 38 item 1): a column of the records table, and a fact of each compared card
    assert "<th>can see</th><th>verdict</th>" in html
    seen = compare(base, run).result.rows[0].detectable
    assert seen is not None and f'<span class="fig">&gt;= {percent(seen)}</span>' in html
    assert "<dt>tolerance</dt><dd>5%</dd>" in html


def test_without_a_baseline_the_run_order_is_kept() -> None:
    run = make_run(make_record(3e-3, test="t.py::test_b[cpu]"), make_record(1e-3, test="t.py::test_a[cpu]"))
    order = re.findall(r'<p class="nodeid">t\.py::(test_\w+)\[cpu\]</p>', render(run))
    assert order == ["test_b", "test_a"]


def test_one_dot_per_sample_beside_the_baselines() -> None:
    base = baseline_of(("t.py::test_a[cpu]", 1e-3), runs=2)
    run = make_run(make_record(1e-3, test="t.py::test_a[cpu]"))
    comparison = compare(base, run)
    html = render(run, comparison)
    assert html.count("<circle") == 41 + 2 * 41  # the run's samples, and the baseline's two runs of 41
    assert "baseline: 82 samples from 2 runs" in html


def test_a_long_run_draws_its_shape_not_every_sample() -> None:
    record = make_record(1e-3)
    many = dataclasses.replace(record, measurement=make_measurement("many", samples_around(1e-3, 1001)))
    html = render(make_run(many))
    assert html.count("<circle") == MAX_DOTS
    assert f"{MAX_DOTS} of 1001 samples drawn (evenly by rank) over a box of their middle half" in html
    assert html.count('class="box"') == 1 and html.count('class="whisker"') == 1


def test_the_header_names_the_date_commit_machine_and_torch() -> None:
    gpus = [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}, {"index": 1, "name": "NVIDIA H100 80GB HBM3"}]
    fingerprint = with_fingerprint(cuda_devices=gpus, torch_cuda="13.0", git={"commit": "b" * 40, "dirty": True})
    html = render(make_run(make_record(1e-3), fingerprint=fingerprint))
    for text in (
        "2026-11-22T03:00:00+00:00",
        "bbbbbbbbbbbb with uncommitted changes",
        "AMD EPYC 9R14 (2 CPUs); NVIDIA H100 80GB HBM3 x2; host box-1",
        "torch 2.13.0+cpu, CUDA 13.0; Python 3.11.9",
    ):
        assert text in html


def test_throughput_percent_of_peak_and_flags_are_the_tables() -> None:
    record = make_record(1e-3)
    record = Record(
        record.test,
        record.device,
        dataclasses.replace(record.measurement, converged=False),
        checks=[Check("throughput", ">=", "2 TFLOP/s", "fail", "measured 1 TFLOP/s")],
    )
    run = dataclasses.replace(make_run(record), devices={"cpu": {"reference_peak": {"FLOP/s": 4e12, "how": "mm"}}})
    html = render(run)
    assert "1 TFLOP/s" in html
    assert "<dt>% peak</dt><dd>25%</dd>" in html
    assert "% peak: of cpu&#x27;s reference peak, the best FLOP/s measured in this run: mm" in html
    assert flags(record).startswith("not converged") and f"<dd>{flags(record)}</dd>" in html


def test_the_policy_is_the_sessions() -> None:
    run = dataclasses.replace(make_run(), settings={"tolerance": 0.1, "noise_floor": 0.03, "fail_on": ["faster"]})
    policy = policy_of(run)
    assert (policy.tolerance, policy.noise_floor, policy.fail_on) == (0.1, 0.03, frozenset({"faster"}))
    assert policy_of(make_run()).tolerance == 0.05
    auto = dataclasses.replace(make_run(), settings={"tolerance": "auto:3%"})  # as a run file stores auto
    assert policy_of(auto).tolerance == values.AutoTolerance(0.03)


def test_an_interrupted_run_says_so() -> None:
    assert "This session was interrupted" in render(make_run(make_record(1e-3), interrupted=True))


def test_an_empty_run_is_a_page_too() -> None:
    html = render(Run("2026-11-22T03:00:00+00:00", Fingerprint.from_dict({}), {}, []))
    assert 'data-records="0"' in html and "not recorded" in html and "outside git" in html


@pytest.mark.parametrize(
    ("lo", "hi", "log", "expected"),
    [
        (0.9e-3, 1.21e-3, False, [0.9e-3, 1e-3, 1.1e-3, 1.2e-3]),
        (0.0, 7e-6, False, [0.0, 2e-6, 4e-6, 6e-6]),
        (0.8e-6, 30e-6, True, [1e-6, 2e-6, 5e-6, 10e-6, 20e-6]),
    ],
)
def test_ticks_fall_on_round_values(lo: float, hi: float, log: bool, expected: list[float]) -> None:
    assert ticks(lo, hi, log) == pytest.approx(expected)


def test_the_axis_unit_follows_the_range_and_a_wide_range_goes_log() -> None:
    assert duration_unit(2.5e-3) == ("ms", 1e-3) and duration_unit(3e-7) == ("ns", 1e-9)
    assert duration_unit(2.0) == ("s", 1.0)
    wide = dataclasses.replace(make_record(1e-3).measurement, samples=(1e-6, 1e-3, 2e-3, 1e-4, 5e-4, 2e-5))
    html = render(make_run(dataclasses.replace(make_record(1e-3), measurement=wide)))
    assert "time per call (log scale)" in html and ">1 us<" in html and ">1 ms<" in html
    assert "time per call (linear scale)" in render(make_run(make_record(1e-3)))


def test_a_card_names_every_memory_figure() -> None:
    record = make_record(1e-3)
    cuda = record.measurement.with_reading(
        MEMORY,
        MemoryReading(
            peak=51 << 20,
            method="torch.cuda.max_memory_allocated (the largest of 2 devices: cuda:0)",
            resident=25 << 20,
            transient=26 << 20,
            reserved=52 << 20,
            devices={"cuda:0": 51 << 20, "cuda:1": 20 << 20},
        ),
    )
    html = render(make_run(dataclasses.replace(record, measurement=cuda)))
    assert (
        "<dt>memory</dt><dd>peak 51 MiB (resident 25 MiB + transient 26 MiB), reserved 52 MiB; "
        "cuda:0 51 MiB, cuda:1 20 MiB (torch.cuda.max_memory_allocated (the largest of 2 devices: cuda:0))</dd>"
    ) in html
    cpu = record.measurement.with_reading(
        MEMORY,
        MemoryReading(
            peak=300 << 20,
            method="process RSS high-water mark (VmHWM)",
            transient=4 << 20,
            transient_method="torch.profiler CPU allocator events",
        ),
    )
    html = render(make_run(dataclasses.replace(record, measurement=cpu)))
    assert (
        "<dt>memory</dt><dd>transient 4 MiB (torch&#x27;s CPU allocator), process RSS high-water mark 300 MiB "
        "(torch.profiler CPU allocator events; process RSS high-water mark (VmHWM))</dd>"
    ) in html
    mps = record.measurement.with_reading(MEMORY, MemoryReading(method="unknown: torch.mps has no peak statistic"))
    html = render(make_run(dataclasses.replace(record, measurement=mps)))
    assert "<dt>memory</dt><dd>unknown: torch.mps has no peak statistic</dd>" in html


def test_a_count_change_and_a_peak_memory_change_are_shown_escaped_and_badge_a_row_they_fail() -> None:
    """Issue 22: the card of a row whose counts changed lists them; op names are user text. Issue 35 item 3: a
    row failed by its work is badged ``more work`` with its timing verdict (it read ``inconclusive``), one the
    timing cleared passes with its own verdict (its session ran with a 0.5% noise floor, so that one run against
    one baseline run can see the 5% tolerance: under the default 2% it sees only >= 11.1%, and is inconclusive)."""
    from pytest_gpuperf.measuring import PROFILE, OpStat, WorkProfile

    test = "t.py::test_mm[cpu]"

    def record(ops: int, peak: int, median: float = 10e-3) -> Record:
        profile = WorkProfile(level="counts", calls=1, ops=(OpStat("my::<op>&", ops),), flops=100)
        rec = make_record(median, test=test)
        memory = MemoryReading(method="none", transient=peak, transient_method="torch.profiler CPU allocator events")
        m = rec.measurement.with_reading(PROFILE, profile).with_reading(MEMORY, memory)
        return dataclasses.replace(rec, measurement=m)

    base = Baseline(Path("/results/baselines/main.json"), [make_run(record(1, 1 << 20))], "main")
    run = make_run(record(2, 2 << 20, 10.6e-3))  # +6% against one baseline run: inconclusive
    html = render(run, compare(base, run))
    assert "<op>" not in html
    assert '<div class="work"><p>counts more (ops more; failing on ops)</p>' in html
    assert "<li>my::&lt;op&gt;&amp; 1 -&gt; 2/call (+1)</li>" in html
    assert "peak memory more: 1 MiB -&gt; 2 MiB (+1 MiB, cpu allocator peak above the call&#x27;s start)" in html
    assert html.count('<span class="verdict v-more-work">MORE WORK (timing inconclusive)</span>') == 2  # table, card
    assert "gpuperf gate: FAILED: 1 more work (ops, memory); failing on slower,unattributed + more work" in html
    cleared = dataclasses.replace(make_run(record(2, 2 << 20)), settings={"noise_floor": 0.005})
    html = render(cleared, compare(base, cleared))
    assert '<div class="work"><p>counts more (ops more)</p>' in html and 'class="verdict v-more-work"' not in html
    assert '<span class="verdict v-unchanged">unchanged</span>' in html
    assert "gpuperf gate: passed (1 unchanged; failing on slower,unattributed + more work" in html


def _lanes(html: str) -> dict[str, list[list[float]]]:
    """Each lane's css class -> the x of its dots, lane by lane (a class may have two lanes: left out)."""
    out: dict[str, list[list[float]]] = {}
    for css, body in re.findall(r'<g class="lane ([\w-]+)">(.*?)</g>', html, re.S):
        out.setdefault(css, []).append([float(x) for x in re.findall(r'<circle[^>]* cx="([\d.]+)"', body)])
    return out


def test_left_out_runs_are_drawn_apart_and_confirmation_runs_with_the_current() -> None:
    """Issue 23 item 8: a SLOWER (1.215) verdict whose baseline's two disturbed runs, left out by the gate, were
    drawn in the baseline's lane to the right of the current samples: the picture said faster. (On main: the
    baseline lane's rightmost dot at x 699.0, the current's leftmost at 430.8, and no confirmation samples.)"""
    test = "t.py::test_step[cpu]"
    base = Baseline(
        Path("/results/baselines/main.json"),
        [make_run(make_record(10e-3, test=test))] + [make_run(make_record(14e-3, test=test, load=BUSY))] * 2,
        "main",
    )
    confirmation = {"runs": [{"samples": list(samples_around(12.15e-3)), "load": dict(QUIET)}]}
    run = make_run(make_record(12.15e-3, test=test, gate=confirmation))
    comparison = compare(base, run)
    row = comparison.result.rows[0]
    assert row.verdict.value == "slower" and f"{row.estimate.value:.3f}" == "1.215"  # type: ignore[union-attr]
    html = render(run, comparison)
    lanes = _lanes(html)
    (baseline,), (current,) = lanes["baseline"], lanes["current"]
    assert max(baseline) < min(current), (max(baseline), min(current))  # the picture says slower, as the verdict
    assert len(current) == 41 + 41  # the confirmation run's samples drawn with the current side
    (left_out,) = lanes["left-out"]
    assert len(left_out) == 2 * 41 and min(left_out) > max(current)
    assert ">left out</text>" in html
    assert "left out (hollow, the lane under the baseline&#x27;s): 2 of 3 baseline runs, disturbed" in html
    assert "current: 82 samples from 2 runs (1 confirmation run in fresh processes among them)" in html
    # and the noise line says its 2.0% is the floor, assumed: two of the three baseline runs were left out
    assert "baseline noise: run-to-run 2.0% assumed (the noise floor; 1 run; 2 of 3 left out)" in html


def test_the_p99_and_every_note_are_shown_escaped() -> None:
    """Issue 23 item 8: the page dropped the p99 column and the notes (the suites' conclusions) the terminal shows.
    (On main: no p99 column, and a Run kept no notes: ``Run(..., notes=...)`` is a TypeError.)"""
    record = make_record(1e-3, test="t.py::test_amp[cpu]")
    timed_singly = dataclasses.replace(
        record.measurement, samples=samples_around(1e-3, 401), single_calls=True, over_time="a 5 s step <b>"
    )
    notes = (("t.py::test_amp[cpu]", "AMP (bf16) 1.83x faster <script>alert(1)</script>"),)
    run = dataclasses.replace(make_run(dataclasses.replace(record, measurement=timed_singly)), notes=notes)
    assert Run.from_dict(run.to_dict()).notes == notes  # kept in the results file
    html = render(run)
    assert "<th>p99</th>" in html and "<dt>p50 / p90 / p99</dt>" in html
    assert "AMP (bf16) 1.83x faster &lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html
    assert "t.py::test_amp[cpu]: over max_time: a 5 s step &lt;b&gt;" in html  # the terminal's lines under its table


class _Counted(list[Record]):
    """A run's records that count how often they are gone through."""

    passes = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        _Counted.passes += 1
        return super().__iter__()


def test_many_records_against_ten_runs_cost_in_proportion() -> None:
    """Issue 23 item 9: each record's card counted its baseline runs by going through every record of every run
    (time quadratic in the records: 3,000 records against 10 runs took 19 s), and drew every baseline sample, 410
    dots a card (a 750 MB page). On main: 8,010 passes over the baseline runs' records for 800 records (10 per
    record), 24,982 bytes a card."""
    tests = [f"t.py::test_{i}[cpu]" for i in range(800)]
    runs = [make_run(*(make_record(1e-3, test=t) for t in tests)) for _ in range(10)]
    base = Baseline(Path("/b.json"), [dataclasses.replace(r, records=_Counted(r.records)) for r in runs], "main")
    run = make_run(*(make_record(1.01e-3, test=t) for t in tests))
    comparison = compare(base, run)
    _Counted.passes = 0
    html = render(run, comparison)
    assert _Counted.passes <= 2 * len(base.runs), _Counted.passes  # a pass or two over each run, whatever the count
    assert len(html) / len(tests) < 12_000, len(html) / len(tests)  # bytes a card: at most MAX_DOTS dots a lane
    assert html.count("<circle") == len(tests) * (41 + MAX_DOTS)
    assert f"baseline: {MAX_DOTS} of 410 samples drawn (evenly by rank)" in html
