"""What a new user trips on (issue 23 item 10), in the session's terminal output: notes printed once per round,
the quiet wait's silence, and the gate's line in pytest's short summary."""

from __future__ import annotations

import pytest

FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-max-time=0.1",
    "--gpuperf-min-time=0.005",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-memory=off",
    "--gpuperf-confirm=0",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
)

NOTED = """
def test_x(gpuperf):
    gpuperf.measure(lambda: sum(range(100)))
    gpuperf.note("speedup 2.00x")
    gpuperf.note("speedup 2.00x")  # the same line twice from one test is one line too
"""


def test_with_rounds_each_note_is_printed_once(pytester: pytest.Pytester) -> None:
    """With --gpuperf-rounds=2 every note was printed twice (once per round)."""
    pytester.makepyfile(test_noted=NOTED)
    result = pytester.runpytest(*FAST, "--gpuperf-rounds=2", "--gpuperf-save=main", "--gpuperf-quiet-wait=0")
    assert result.ret == pytest.ExitCode.OK
    notes = [line for line in result.stdout.lines if line.endswith(": speedup 2.00x")]
    assert notes == ["test_noted.py::test_x[cpu]: speedup 2.00x"]


def git(pytester: pytest.Pytester, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=pytester.path, check=True)


def test_the_short_summary_shows_the_gates_verdict_and_a_phrase_for_uncommitted_changes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short summary read "FAILED gpuperf-gate - differs (shown, not blocking): uncommitted changes Fals...":
    the first line of the gate's report, a note, cut at the terminal's width, and a Python boolean."""
    monkeypatch.delenv("CI", raising=False)  # on CI pytest does not cut the line
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    pytester.makepyfile(test_a="def test_a(gpuperf):\n    gpuperf.measure(lambda: sum(range(100)))\n")
    git(pytester, "init", "-q", "-b", "main")
    git(pytester, "add", "test_a.py")
    git(pytester, "commit", "-q", "-m", "one")
    assert pytester.runpytest(*FAST, "--gpuperf-save=main", "--gpuperf-quiet-wait=0").ret == pytest.ExitCode.OK
    (pytester.path / "test_a.py").write_text("def test_b(gpuperf):\n    gpuperf.measure(lambda: sum(range(100)))\n")
    result = pytester.runpytest(*FAST, "--gpuperf-compare=main", "--gpuperf-fail-on=missing", "--gpuperf-quiet-wait=0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["differs (shown, not blocking): uncommitted changes: none -> some"])
    (summary,) = [line for line in result.stdout.lines if line.startswith("FAILED gpuperf-gate")]
    assert summary.startswith("FAILED gpuperf-gate - gpuperf gate: FAILED: 1 missing; 1 new; failing on")
    assert not [line for line in result.stdout.lines if "differs" in line and ("False" in line or "True" in line)]


TWO_TESTS = """
def test_one(gpuperf):
    gpuperf.measure(lambda: 0.002)


def test_two(gpuperf):
    gpuperf.measure(lambda: 0.002)
"""


def test_the_quiet_wait_says_once_what_it_waits_for_and_how_to_turn_it_off(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait for a quiet machine (up to 10 s a test when saving or comparing) was silent."""
    from tests.plugin.test_gate import EXACT_TIMING_CONFTEST

    pytester.makeconftest(EXACT_TIMING_CONFTEST)  # the load gauge sees one of two CPUs busy all along
    monkeypatch.setenv("GATE_TEST_BUSY", "1")
    pytester.makepyfile(test_two=TWO_TESTS)
    args = ("--gpuperf-save=main", "--gpuperf-quiet-wait=0.4", "--gpuperf-threads=2")
    result = pytester.runpytest(*FAST, *args)
    assert result.ret == pytest.ExitCode.OK
    said = [line for line in result.stdout.lines if "waiting up to" in line]
    assert said == [
        "gpuperf: the machine is busy (1.0 of 2 CPUs used by other processes): before each test that measures, "
        "waiting up to 0.4 s for the 2 cores it needs to be free; --gpuperf-quiet-wait=0 turns the wait off"
    ]
    # A quiet machine: no wait, nothing said.
    monkeypatch.setenv("GATE_TEST_BUSY", "0")
    quiet = pytester.runpytest(*FAST, *args)
    assert quiet.ret == pytest.ExitCode.OK
    assert not [line for line in quiet.stdout.lines if "waiting up to" in line]
