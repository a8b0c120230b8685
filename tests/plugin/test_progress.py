"""Progress lines inside pytest: extra rounds and confirmation runs say what they do, on lines of their own; -q
silences them."""

from __future__ import annotations

import re

import pytest

from tests.plugin.test_gate import EXACT_TIMING_CONFTEST, FAST, STEP_TEST


@pytest.fixture
def steps(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(EXACT_TIMING_CONFTEST)
    pytester.makepyfile(test_steps=STEP_TEST)
    monkeypatch.setenv("GATE_TEST_STEP_MS", "2")
    return pytester


def test_extra_rounds_say_which_round_runs(steps: pytest.Pytester) -> None:
    result = steps.runpytest(*FAST, "--gpuperf-rounds=3")
    assert result.ret == pytest.ExitCode.OK
    lines = result.stdout.lines
    first = lines.index("gpuperf: measuring 2 tests again (round 2 of 3)")
    assert re.fullmatch(r"test_steps.py \.\. +\[100%\]", lines[first - 1])  # pytest's progress line whole
    assert re.fullmatch(r"gpuperf: measuring 2 tests again \(round 3 of 3, [0-9.]+ s\)", lines[first + 1])
    quiet = steps.runpytest(*FAST, "--gpuperf-rounds=3", "-q")
    assert quiet.ret == pytest.ExitCode.OK
    assert not [line for line in quiet.stdout.lines if "again (round" in line]


def test_confirmation_runs_say_what_they_confirm(steps: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in range(3):
        assert steps.runpytest(*FAST, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    monkeypatch.setenv("GATE_TEST_STEP_MS", "2.5")
    slower = steps.runpytest(*FAST, "--gpuperf-compare=main", "--gpuperf-confirm=2", "-k", "test_step")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(
        [
            "test_steps.py .*[[]100%[]]",
            "gpuperf: confirming 1 test that looked slower in a fresh process (run 1 of at most 2)",
            "gpuperf: confirming 1 test that looked slower in a fresh process (run 2 of 2, *s)",
            "*= gpuperf gate =*",
        ]
    )
    # One confirmation run is enough to show that -q prints no progress line for it (each is a fresh process).
    quiet = steps.runpytest(*FAST, "--gpuperf-compare=main", "--gpuperf-confirm=1", "-k", "test_step", "-q")
    assert quiet.ret == pytest.ExitCode.TESTS_FAILED
    assert not [line for line in quiet.stdout.lines if "confirming" in line]


def test_a_test_says_what_its_long_work_does_on_a_line_of_its_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_long="""
        def test_world(gpuperf):
            gpuperf.progress("starting a world of 2 gloo processes")
            print("captured, not shown")
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu")
    assert result.ret == pytest.ExitCode.OK
    lines = result.stdout.lines
    at = lines.index("gpuperf: test_world[cpu]: starting a world of 2 gloo processes")
    assert lines[at - 1].startswith("test_long.py") and re.fullmatch(r"\. +\[100%\]", lines[at + 1])
    assert "captured, not shown" not in result.stdout.str()  # the test's own output stays captured
    quiet = pytester.runpytest("--gpuperf-device=cpu", "-q")
    assert quiet.ret == pytest.ExitCode.OK
    assert "starting a world" not in quiet.stdout.str()
