"""Per-call percentiles as a user gets them: ``--gpuperf-per-call``, the marker, the table, the JSON and
``assert_latency(percentile=99)`` passing, failing, inconclusive and refused."""

from __future__ import annotations

import json

import pytest

from pytest_gpuperf.plugin._settings import Settings

FAST = ("--gpuperf-device=cpu", "--gpuperf-min-time=0.05", "--gpuperf-warmup-time=0.02", "--gpuperf-memory=off")

TESTS = """
import pytest

@pytest.mark.gpuperf(per_call=True, min_samples=400, max_time="2 s")
def test_tail_met(gpuperf):
    gpuperf.measure(lambda: sum(range(50))).assert_latency(at_most="1 s", percentile=99)

@pytest.mark.gpuperf(per_call=True, min_samples=400, max_time="2 s")
def test_tail_missed(gpuperf):
    gpuperf.measure(lambda: sum(range(50))).assert_latency(at_most="1 ns", percentile=99)

def test_tail_of_blocks(gpuperf):
    gpuperf.measure(lambda: sum(range(50))).assert_latency(at_most="1 s", percentile=99)
"""


def test_percentile_assertions_pass_fail_and_are_refused_for_blocks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tail=TESTS)
    result = pytester.runpytest(*FAST, "--gpuperf-max-time=0.3", "--gpuperf-json=run.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*GpuperfAssertionError: test_tail.py::test_tail_missed[[]cpu[]]: p99 latency at most 1 ns expected, "
            "but p99 *, 95% CI [[]*[]] from * samples x 1 calls on cpu (*); the whole interval is on the wrong side",
            "E * ValueError: test_tail.py::test_tail_of_blocks[[]cpu[]]: assert_latency(percentile=99) needs per-call "
            "times, but each sample here is the mean of a block of * calls, and percentiles of such means are not "
            "percentiles of calls; time calls one per sample with --gpuperf-per-call*",
            "test*device*median*95% CI*p99*throughput*",
        ]
    )
    records = {
        r["test"].split("::")[-1]: r["measurement"]
        for r in json.loads((pytester.path / "run.json").read_text())["records"]
    }
    met = records["test_tail_met[cpu]"]
    assert met["single_calls"] is True and met["iterations"] == 1 and len(met["samples"]) >= 400
    assert met["stats"]["p50"] <= met["stats"]["p90"] <= met["stats"]["p99"]


SLOW = """
import time

def test_slow_tail(gpuperf):
    gpuperf.measure(lambda: time.sleep(0.005)).assert_latency(at_most="10 s", percentile=99)
"""


@pytest.mark.parametrize("inconclusive", ["warn", "fail"])
def test_too_few_calls_for_a_p99_are_inconclusive_and_say_how_many(
    pytester: pytest.Pytester, inconclusive: str
) -> None:
    pytester.makepyfile(test_slow=SLOW)
    # At most 20 calls of 5 ms fit in 0.1 s: far from the 368 a p99's 95% interval needs.
    result = pytester.runpytest(
        *FAST, "--gpuperf-per-call", "--gpuperf-max-time=0.1", f"--gpuperf-inconclusive={inconclusive}"
    )
    message = (
        "*p99 latency at most 10 s is inconclusive: only * samples, and a distribution-free 95% interval of the "
        "99th percentile needs at least 368;*--gpuperf-min-samples=368*"
    )
    if inconclusive == "warn":
        assert result.ret == pytest.ExitCode.OK
        result.stdout.fnmatch_lines(["*InconclusiveWarning: " + message, "*test_slow_tail*cpu*- (* samples)*"])
    else:
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(["E   *GpuperfAssertionError: " + message])


def test_per_call_travels_to_confirmation_runs_as_a_bare_flag() -> None:
    on = Settings.resolve({"per_call": True}, {})
    assert on.measure.per_call and "--gpuperf-per-call" in on.flags()
    off = Settings.resolve({}, {"per_call": "false"})
    assert not off.measure.per_call and not any("per-call" in flag for flag in off.flags())
