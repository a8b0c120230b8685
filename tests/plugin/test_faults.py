"""A fault stays with its test (issue 37, item 3): when the machine briefly refused new threads, one test failed with
``can't start new thread`` and every later test with ``cannot join thread before it is started``, because the load
monitor kept its thread before starting it. A thread, file or profiler that fails to start fails that test's
measurement with one clear line, and the next test starts clean."""

from __future__ import annotations

import pytest

FAST = ("--gpuperf-device=cpu", "--gpuperf-min-time=0.01", "--gpuperf-max-time=0.05", "--gpuperf-warmup-time=0.01")

#: The machine refuses the load monitor's thread once, on the first test's start.
REFUSE_ONE_THREAD = """
import threading

SAVED = {}


def _start(self):
    if self.name == "gpuperf-load-monitor" and not SAVED.get("refused"):
        SAVED["refused"] = True
        raise RuntimeError("can't start new thread")
    return SAVED["start"](self)


def pytest_configure(config):
    SAVED["start"] = threading.Thread.start
    threading.Thread.start = _start


def pytest_unconfigure(config):
    threading.Thread.start = SAVED["start"]
"""

TESTS = """
def test_a(gpuperf):
    gpuperf.measure(lambda: None)


def test_b(gpuperf):
    gpuperf.measure(lambda: None)


def test_c(gpuperf):
    gpuperf.measure(lambda: None)
"""


def test_a_refused_monitor_thread_fails_that_test_alone_with_one_line(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(REFUSE_ONE_THREAD)
    pytester.makepyfile(test_three=TESTS)
    result = pytester.runpytest(*FAST, "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_a[[]cpu[]] _*",
            "gpuperf: could not start the load monitor's thread: can't start new thread (the machine refused a new "
            "thread); this test's measurement failed, the next starts clean",
            "*= gpuperf results =*",
            "FAILED test_three.py::test_a[[]cpu[]] - Failed: gpuperf: could not start the load*",
        ]
    )
    out = result.stdout.str()
    assert "cannot join thread" not in out
    assert "Traceback" not in out and "_load.py" not in out, "one line, not a traceback"
