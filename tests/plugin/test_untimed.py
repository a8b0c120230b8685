"""An untimed run, and running only (or none of) the tests that measure: ``--gpuperf-measuring`` for both fixtures,
and pytest-benchmark's ``--benchmark-disable``, ``--benchmark-skip`` and ``--benchmark-only`` mapped onto it where
pytest-gpuperf's ``benchmark`` fixture serves (``-p no:benchmark``). On main those three flags stopped such a run
with ``error: unrecognized arguments``, exit 4, and nothing ran a measuring test without timing it.
"""

from __future__ import annotations

import json

import pytest

from tests.plugin.test_benchmark_fixture import FAST

pytest.importorskip("xdist")

#: As pytest-benchmark suites are written, with a test that does not measure beside them; every call of a
#: benchmarked function is counted in calls.txt.
BENCHMARK_SUITE = """
from pathlib import Path


def count(what):
    with Path(__file__).with_name("calls.txt").open("a") as calls:
        calls.write(what + "\\n")
    return 42


def test_call(benchmark):
    assert benchmark(count, "call") == 42
    assert benchmark.enabled is not benchmark.disabled


def test_pedantic(benchmark):
    def setup():
        count("setup")
        return ("pedantic",), {}

    assert benchmark.pedantic(count, setup=setup, teardown=lambda what: count("teardown"), rounds=7) == 42


def test_plain():
    assert True
"""

GPUPERF_SUITE = """
from pathlib import Path

from pytest_gpuperf.measuring import Step


def count(what):
    with Path(__file__).with_name("calls.txt").open("a") as calls:
        calls.write(what + "\\n")


def test_measure(gpuperf):
    gpuperf.measure(lambda: count("measure")).assert_latency(at_most="1 ns")


def test_paired(gpuperf):
    rounds = gpuperf.paired({"a": Step(lambda: count("a"), {}), "b": lambda: Step(lambda: count("b"), {})})
    gpuperf.expect(rounds.ratio("a", "b"), at_least=100.0)


def test_plain():
    assert True
"""


def calls(pytester: pytest.Pytester) -> list[str]:
    path = pytester.path / "calls.txt"
    return sorted(path.read_text().split()) if path.exists() else []


def test_benchmark_disable_runs_each_benchmark_once_untimed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=BENCHMARK_SUITE)
    result = pytester.runpytest(*FAST, "--benchmark-disable", "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=3)
    assert calls(pytester) == ["call", "pedantic", "setup", "teardown"]  # once each: nothing timed
    result.stdout.fnmatch_lines(["gpuperf: untimed run (--gpuperf-measuring=untimed)*nothing was timed, recorded*"])
    assert "gpuperf results" not in result.stdout.str()
    written = pytester.path / "run.json"
    assert not written.exists() or json.loads(written.read_text())["records"] == []


def test_benchmark_enable_overrides_disable(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=BENCHMARK_SUITE)
    result = pytester.runpytest(*FAST, "--benchmark-disable", "--benchmark-enable", "-k", "call")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*= gpuperf results =*"])
    assert len(calls(pytester)) > 2


@pytest.mark.parametrize(
    ("flags", "outcomes"),
    [
        (("--benchmark-skip",), {"passed": 1, "skipped": 2}),
        (("--benchmark-only",), {"passed": 2, "skipped": 1}),
        (("--benchmark-only", "--benchmark-skip"), {"passed": 2, "skipped": 1}),  # only wins, as in pytest-benchmark
        (("--gpuperf-measuring=skip",), {"passed": 1, "skipped": 2}),
    ],
)
def test_skip_and_only_select_the_tests_that_measure(
    pytester: pytest.Pytester, flags: tuple[str, ...], outcomes: dict[str, int]
) -> None:
    pytester.makepyfile(test_suite=BENCHMARK_SUITE)
    result = pytester.runpytest(*FAST, *flags, "-rs")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(**outcomes)
    if "--benchmark-only" in flags:
        result.stdout.fnmatch_lines(["SKIPPED*gpuperf: a test that does not measure (--gpuperf-measuring=only)"])
    else:
        result.stdout.fnmatch_lines(["SKIPPED*gpuperf: a test that measures (--gpuperf-measuring=skip)"])
        assert calls(pytester) == []


def test_a_gpuperf_test_runs_its_step_once_and_is_skipped(pytester: pytest.Pytester) -> None:
    """Untimed, a ``gpuperf`` test's step runs once; what the test asserts next needs the Measurement, which is not
    made, so the test stops as skipped with the reason (here: bounds that no timing could meet)."""
    pytester.makepyfile(test_suite=GPUPERF_SUITE)
    result = pytester.runpytest(*FAST, "--gpuperf-measuring=untimed", "-rs")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1, skipped=2)
    assert calls(pytester) == ["a", "b", "measure"]
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*gpuperf: untimed run (--gpuperf-measuring=untimed): the step ran once, untimed; what this test "
            "judges on its measurement is not judged",
            "SKIPPED*each step ran once, untimed*",
        ]
    )


def test_a_step_that_raises_fails_the_untimed_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "def test_broken(gpuperf):\n    gpuperf.measure(lambda: 1 / 0)\n"
        "def test_broken_bench(benchmark):\n    benchmark(lambda: 1 / 0)\n"
    )
    result = pytester.runpytest(*FAST, "--benchmark-disable")
    result.assert_outcomes(failed=2)


def test_untimed_against_a_baseline_neither_saves_nor_fails_the_gate(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=BENCHMARK_SUITE)
    assert pytester.runpytest(*FAST, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    result = pytester.runpytest(*FAST, "--benchmark-disable", "--gpuperf-compare=main")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["gpuperf: untimed run*"])
    assert "gpuperf gate" not in result.stdout.str()  # no rows "missing": the gate does not run
    assert len(list((pytester.path / ".gpuperf" / "runs").iterdir())) == 1  # the saving run's alone
    result = pytester.runpytest(*FAST, "--benchmark-skip", "--gpuperf-compare=main", "--gpuperf-fail-on=missing")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_untimed_workers_may_share_the_cpu(pytester: pytest.Pytester) -> None:
    """Nothing is timed, so -n is free (as under pytest-benchmark, which disables itself under xdist)."""
    pytester.makepyfile(test_suite=BENCHMARK_SUITE)
    result = pytester.runpytest_subprocess("-n", "2", *FAST, "--benchmark-disable")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--benchmark-only", "--benchmark-disable"), "*--benchmark-only runs only the tests that measure*"),
        (("--benchmark-skip", "--gpuperf-measuring=on"), "*--gpuperf-measuring=on and pytest-benchmark's flags*"),
        (("--gpuperf-measuring=off",), "*--gpuperf-measuring=off*on, untimed, skip, only*"),
    ],
)
def test_contradictions_are_usage_errors(pytester: pytest.Pytester, flags: tuple[str, ...], message: str) -> None:
    pytester.makepyfile(test_suite=BENCHMARK_SUITE)
    result = pytester.runpytest(*FAST, *flags)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_with_pytest_benchmark_active_its_flags_are_its_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=BENCHMARK_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--benchmark-disable")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=3)
    assert "gpuperf: untimed" not in result.stdout.str()
