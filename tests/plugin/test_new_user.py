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
