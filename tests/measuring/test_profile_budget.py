"""The work profile keeps to its budget at any load and any ``max_time`` (issue 37 item 2), on fake clocks.

On main two profiled calls and a counting call ran whatever the budget: on a busy machine the profile took 18% of
the suites' measuring time, 40-50% at ``--gpuperf-max-time=0.02`` (``test_ddp_spawned``: 5.0 s against a 225 ms
budget). Now the profile estimates its floor before it pays for it and reduces itself where it would not fit, and
the profile says what it left out and why (``WorkProfile.left_out``, ``reduced``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pytest_gpuperf.measuring import PROFILE, WorkProfile
from pytest_gpuperf.measuring._profiler import (
    CALLS_GIVE,
    COUNTING_GIVES,
    READ_COST,
    READ_SECONDS,
    READ_SECONDS_PER_EVENT,
    ProbeCalls,
    ReadCost,
    profile_of_probe,
    profile_step,
)
from tests.synthetic import make_measurement

from .profile_events import Event, call, op

MS = 1e-3


@pytest.fixture(autouse=True)
def read_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each event costs 10 us to read, whatever earlier reads in this process taught ``READ_COST``."""
    monkeypatch.setattr(READ_COST, "per_event", 10e-6)


class Clock:
    """A fake clock that only the step moves: ``step_seconds`` a call."""

    def __init__(self, step_seconds: float, ops: int = 0) -> None:
        self.now = 0.0
        self.calls = 0
        self._step, self._x, self._ops = step_seconds, torch.ones(4), ops

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        self.calls += 1
        self.now += self._step
        for _ in range(self._ops):  # real ops: their events are what reading costs
            self._x + 1


def own(clock: Clock, budget: float, **kwargs: Any) -> WorkProfile:
    profile = profile_step(
        clock.step, level="full", step_seconds=clock._step, budget=budget, on_cuda=False, clock=clock, **kwargs
    )
    assert profile is not None
    return profile


def test_a_floor_within_the_budget_changes_nothing() -> None:
    """A counting call and profiled calls of 10 ms each in a 35 ms budget: the counting call and two profiled calls,
    nothing left out."""
    clock = Clock(10 * MS)
    profile = own(clock, 35 * MS)
    assert profile.calls == 2 and clock.calls == 3
    assert profile.left_out == () and profile.reduced == ""
    assert profile.flops == 0


def test_a_step_whose_one_profiled_call_passes_the_budget_is_not_profiled_and_says_so() -> None:
    """On main: a counting call and a profiled call of 1 s each against a 10 ms budget (2 s, 200 times it)."""
    clock = Clock(1.0)
    profile = own(clock, 10 * MS)
    assert clock.calls == 0 and profile.calls == 0 and profile.seconds == 0.0
    assert set(profile.left_out) == {*COUNTING_GIVES, *CALLS_GIVE}
    assert profile.reduced == (
        "not profiled: one profiled call (1 s, and the profiler's start and stop) would pass the 10 ms budget"
    )
    assert profile.per_call_counts() == {}


def test_a_floor_of_a_counting_and_a_profiled_call_over_the_budget_leaves_the_counting_call_out() -> None:
    """10 ms calls in a 15 ms budget: one profiled call fits (with the profiler's start and stop), two calls do not."""
    clock = Clock(10 * MS)
    profile = own(clock, 15 * MS)
    assert clock.calls == 1 and profile.calls == 1 and profile.seconds <= profile.budget
    assert profile.flops is None and profile.left_out == COUNTING_GIVES
    assert profile.reduced.startswith("no counting call: with it, the floor (a counting call and a profiled call")
    assert "would pass the 15 ms budget" in profile.reduced
    assert "flops" not in profile.per_call_counts() and profile.per_call_counts()["bytes_allocated:cpu"] == 0


def test_a_profiled_call_whose_events_would_take_too_long_to_read_keeps_the_counting_calls_figures_only() -> None:
    """Calls of 10 ms of 400 ops in a 25 ms budget: the floor fits (21 ms), but reading the call's 1,200 events (about
    12 ms at 10 us each) does not fit the 5 ms left."""
    clock = Clock(10 * MS, ops=400)
    profile = own(clock, 25 * MS)
    assert clock.calls == 2 and profile.calls == 0
    assert profile.flops == 0 and profile.left_out == CALLS_GIVE and profile.ops == ()
    assert profile.reduced.startswith("the counting call's figures only: reading 1 call's ")
    assert "events would take about" in profile.reduced and "over the 5 ms left of the 25 ms budget" in profile.reduced
    assert set(profile.per_call_counts()) == {"flops"}


def test_every_rank_of_a_distributed_run_reduces_where_one_does() -> None:
    """The calls' collectives must meet: the other rank's floor did not fit, so this one, whose did, profiles
    nothing either; both ask the same two questions whatever they answer."""
    asked: list[bool] = []

    def other_rank_over(flag: bool) -> bool:
        asked.append(flag)
        return True  # the other rank's "does not fit"

    clock = Clock(1 * MS)
    profile = own(clock, 10.0, max_calls=1, agree=other_rank_over)
    assert asked == [False, False] and clock.calls == 0 and profile.reduced.startswith("not profiled")
    asked.clear()

    def alone_rank(flag: bool) -> bool:
        asked.append(flag)
        return flag

    alone = Clock(1 * MS)
    profile = own(alone, 10.0, max_calls=1, agree=alone_rank)
    assert asked == [False, False] and alone.calls == 2 and profile.calls == 1 and profile.reduced == ""


class Window:
    """A memory probe's profiler window of one call: its raw events."""

    def __init__(self, start: int) -> None:
        self.kineto_results = self
        self._events: list[Event] = [call(start, 100_000), op("aten::mm", start + 10_000, 20_000)]

    def events(self) -> list[Event]:
        return self._events

    def export_chrome_trace(self, path: str) -> None:
        pass


def probe_calls(events: int, *, flops: int | None = 7) -> ProbeCalls:
    """The probe's calls as ``peak_memory`` leaves them: a settle call that counted ``flops``, and two windows the
    probe counted ``events`` in each."""
    probe = ProbeCalls(clock=lambda: 0.0)
    probe.counted, probe.flops, probe.copied = True, flops, {"htod": 64} if flops is not None else {}
    probe.windows = [Window(1_000_000), Window(2_000_000)]
    probe.events = [events, events]
    return probe


def ridden(probe: ProbeCalls, budget: float) -> WorkProfile:
    profile = profile_of_probe(probe, level="full", step_seconds=1 * MS, budget=budget, clock=lambda: 0.0)
    assert profile is not None
    return profile


@pytest.mark.parametrize(
    ("budget", "calls", "reduced"),
    [
        (25 * MS, 2, ""),  # both windows: 20.3 ms
        (
            15 * MS,
            1,
            "1 profiled call of the memory probe's 2: reading 2 calls' 2,000 events would take about 20.3 ms, ",
        ),
        (5 * MS, 0, "the counting call's figures only: reading 1 call's 1,000 events would take about 10.3 ms, "),
    ],
    ids=["both", "one", "none"],
)
def test_on_the_probes_calls_the_windows_read_are_those_whose_events_fit_the_budget(
    budget: float, calls: int, reduced: str
) -> None:
    """The probe counted 1,000 events in each window: at 10 us an event, reading one takes 10.3 ms."""
    profile = ridden(probe_calls(1000), budget)
    assert profile.calls == calls and profile.reduced.startswith(reduced) and (reduced == "") == (calls == 2)
    assert profile.flops == 7 and profile.bytes_copied == {"htod": 64}
    if calls:
        assert profile.left_out == () and profile.per_call_counts()["op:aten::mm"] == 1
        assert profile.reduced.endswith("" if calls == 2 else "over the 15 ms budget")
    else:
        assert profile.left_out == CALLS_GIVE and profile.ops == () and set(profile.per_call_counts()) >= {"flops"}
        assert not any(key.startswith("op:") for key in profile.per_call_counts())


def test_on_the_probes_calls_nothing_fits_and_nothing_was_counted_is_no_profile_that_says_so() -> None:
    profile = ridden(probe_calls(1000, flops=None), 1 * MS)
    assert profile.calls == 0 and set(profile.left_out) == {*COUNTING_GIVES, *CALLS_GIVE}
    assert profile.reduced.startswith("not profiled: reading 1 call's 1,000 events would take about 10.3 ms, over the")
    assert profile.per_call_counts() == {}


def test_the_counting_calls_cost_on_the_settle_call_comes_out_of_what_the_windows_may_take() -> None:
    """The settle call took 10 ms more than a step: of a 25 ms budget, 15 ms are left, one window's reading."""
    probe = probe_calls(1000)
    probe.settle_seconds = 11 * MS
    profile = ridden(probe, 25 * MS)
    assert profile.calls == 1 and "over the 15 ms left of the 25 ms budget" in profile.reduced


def test_a_counting_call_that_took_the_whole_budget_still_leaves_the_floors_reading_to_its_first_window() -> None:
    """The counting mode's cost on the settle call is known only once paid: 20 ms of a 25 ms budget here. The floor,
    one window's reading (10.3 ms), was the plan's, and is kept; the second window is not read."""
    probe = probe_calls(1000)
    probe.settle_seconds = 21 * MS
    profile = ridden(probe, 25 * MS)
    assert profile.calls == 1 and "over the 5 ms left of the 25 ms budget" in profile.reduced


def test_a_profiled_call_held_up_by_a_busy_machine_still_has_its_events_read() -> None:
    """The plan let the counting call and the profiled call take 21 ms of 25: the profiled call was preempted and
    took 30 ms, and its few events (well under the 4 ms the plan left) are read all the same."""
    clock = Clock(10 * MS)
    calls = {"n": 0}

    def preempted() -> None:
        calls["n"] += 1
        clock.step()
        clock.now += 20 * MS if calls["n"] == 2 else 0.0

    profile = profile_step(preempted, level="full", step_seconds=10 * MS, budget=25 * MS, on_cuda=False, clock=clock)
    assert profile is not None and profile.calls == 1 and profile.reduced == "" and profile.left_out == ()
    assert profile.seconds == pytest.approx(0.040) and profile.seconds > profile.budget  # said, not hidden


def test_pythons_tracer_runs_on_the_probes_calls_only_where_it_fits_what_the_counting_call_left() -> None:
    """A step of 400 Python calls: traced over the probe's two calls, 8 ms of a 15 ms budget. The settle call took
    10 ms more than a step under the counting mode, so only 5 ms are left: untraced. On main it was traced."""
    now = [0.0]

    def step() -> None:
        now[0] += 20 * MS
        for _ in range(399):
            len(())

    probe = ProbeCalls(lambda: now[0], python=True, budget=15 * MS, step_seconds=10 * MS)
    probe.settle(step)
    assert probe.python_calls is not None and 400 <= probe.python_calls < 410 and not probe.python
    roomy = ProbeCalls(lambda: now[0], python=True, budget=15 * MS, step_seconds=20 * MS)
    roomy.settle(step)
    assert roomy.python


def test_the_cost_of_reading_follows_the_reads_measured() -> None:
    cost = ReadCost()
    assert cost.estimate(1000) == pytest.approx(READ_SECONDS + 1000 * READ_SECONDS_PER_EVENT)
    cost.observe(1000, READ_SECONDS + 1000 * 20e-6)  # a busy machine: 20 us an event
    assert cost.per_event == pytest.approx(15e-6)
    cost.observe(50, 1.0)  # too few events to tell: the fixed part is most of their cost
    cost.observe(1000, 0.0)  # a fake clock
    assert cost.per_event == pytest.approx(15e-6)
    cost.observe(1000, 100.0)  # one read held up for long: at most 4 times the cost per event it started from
    assert cost.per_event == pytest.approx((15e-6 + 4 * READ_SECONDS_PER_EVENT) / 2)


def test_a_reduced_profile_round_trips_through_the_results_json_and_older_files_read_as_they_were_meant() -> None:
    """The results file keeps what was left out and why; a file written before says nothing of it, and its FLOPs
    left unknown (the counters failed) leave its copies unknown too."""
    reduced = WorkProfile(level="full", calls=0, flops=7, left_out=CALLS_GIVE, reduced="the counting call's only")
    assert WorkProfile.from_dict(reduced.to_dict()) == reduced
    older = {key: value for key, value in reduced.to_dict().items() if key not in ("left_out", "reduced")}
    older.update(calls=2)
    assert WorkProfile.from_dict(older) == WorkProfile(level="full", calls=2, flops=7)
    older.update(flops=None)
    assert WorkProfile.from_dict(older) == WorkProfile(level="full", calls=2, left_out=COUNTING_GIVES)


def test_the_processs_start_up_of_the_profile_is_not_held_against_its_first_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first profile in a process pays the start-up (13 ms measured): a step measured for 0.2 s, whose budget is
    6 ms, lost its ops to it. It is counted in the profile's ``seconds``, and the calls are decided without it."""
    from pytest_gpuperf.measuring import _profiler

    clock = Clock(10 * MS)
    opened = _profiler._first_call_range

    def slow_first_call_range() -> None:
        clock.now += 50 * MS if not _profiler._STARTED else 0.0
        opened()

    monkeypatch.setattr(_profiler, "_STARTED", [])
    monkeypatch.setattr(_profiler, "_first_call_range", slow_first_call_range)
    profile = own(clock, 35 * MS)
    assert profile.calls == 2 and profile.reduced == "" and profile.seconds == pytest.approx(0.080)
    assert len(_profiler._STARTED) == 1 and _profiler._STARTED[0] == pytest.approx(0.050)
    assert own(Clock(10 * MS), 35 * MS).seconds == pytest.approx(0.030)  # once a process


def test_a_reduced_profile_is_said_under_the_table_and_on_the_records_card() -> None:
    why = "the counting call's figures only: reading 1 call's 1,000 events would take about 10.3 ms, over the ..."
    reduced = make_measurement("a", [1e-3] * 5, profile=WorkProfile(level="full", calls=0, reduced=why))
    full = make_measurement("b", [1e-3] * 5, profile=WorkProfile(level="full", calls=2))
    assert PROFILE.notes([reduced, full]) == [
        "work profile reduced in 1 row(s) to keep within its budget (3% of the measuring time): each record's "
        "profile.reduced says what it left out"
    ]
    assert PROFILE.facts(reduced) == [("work profile", why)] and PROFILE.facts(full) == []
