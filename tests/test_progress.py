"""The one progress helper: lines with a prefix, step counts and the time since the work began; silent for -q."""

from __future__ import annotations

import pytest

from pytest_gpuperf._progress import Progress, format_elapsed


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "0.0 s"), (3.46, "3.5 s"), (9.94, "9.9 s"), (14.4, "14 s"), (99.4, "99 s"), (125, "2 min 5 s"),
     (3725, "1 h 2 min"), (-0.1, "0.0 s")],
)  # fmt: skip
def test_format_elapsed(seconds: float, text: str) -> None:
    assert format_elapsed(seconds) == text


def test_steps_count_and_time_from_the_start() -> None:
    lines: list[str] = []
    clock = Clock()
    progress = Progress(lines.append, clock=clock)
    clock.now += 5  # time before the first step counts too: the work began when the Progress was made
    progress.step("confirming 3 tests that looked slower", 1, "at most 4", "run")
    clock.now += 9
    progress.step("confirming 3 tests that looked slower", 2, 4, "run")
    progress.say("done")
    progress.line("  as it is")
    assert lines == [
        "gpuperf: confirming 3 tests that looked slower (run 1 of at most 4)",
        "gpuperf: confirming 3 tests that looked slower (run 2 of 4, 14 s)",
        "gpuperf: done",
        "  as it is",
    ]
    assert progress.elapsed() == 14


def test_the_first_step_has_no_time_whatever_its_number() -> None:
    lines: list[str] = []
    progress = Progress(lines.append, prefix="history", clock=Clock())
    progress.step("measuring 1a2b3c4d fix", 3, 5, "commit")
    assert lines == ["history: measuring 1a2b3c4d fix (commit 3 of 5)"]


def test_without_a_writer_it_says_nothing() -> None:
    progress = Progress(None)
    progress.say("x")
    progress.step("x", 1, 2, "round")
    progress.line("x")  # nothing to assert but that nothing was written anywhere and nothing raised
