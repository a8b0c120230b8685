"""The background-load gauge: arithmetic on /proc/stat counters, the disturbed rule, waiting, the monitor."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_gpuperf.measuring import _load as load
from pytest_gpuperf.measuring._load import CpuSnapshot, Load, Monitor, between, needed_cores, wait_for_quiet


def snap(wall: float, busy: float, own: float, steal: float = 0.0, cpus: int = 2) -> CpuSnapshot:
    return CpuSnapshot(wall=wall, busy=busy, steal=steal, own=own, cpus=cpus)


def test_background_is_machine_busy_time_minus_ours_plus_stolen_time() -> None:
    load = between(snap(0, 100, 10), snap(2, 103, 11.5, steal=0.5))
    assert load == Load(seconds=2, cpus=2, background_cores=1.0, own_cores=0.75)
    rounded = between(snap(0, 0, 0), snap(1, 0.0, 0.003))
    assert rounded is not None and rounded.background_cores == 0.0  # tick rounding, not negative
    assert between(None, snap(1, 0, 0)) is None and between(snap(1, 0, 0), snap(1, 0, 0)) is None


@pytest.mark.parametrize(
    ("background", "needed", "cpus", "expected"),
    [
        (0.2, 2, 2, False),  # slack: timer ticks, daemons
        (0.3, 2, 2, True),  # a neighbour on one of the two cores: 2 threads wait on each other
        (1.0, 1, 2, False),  # one thread still has a core of its own
        (1.3, 1, 2, True),
        (10.0, 1, 32, False),  # a GPU run needs one host core
    ],
)
def test_disturbed_when_fewer_cores_are_left_than_needed(
    background: float, needed: float, cpus: int, expected: bool
) -> None:
    assert Load(1.0, cpus, background, 1.0).disturbs(needed) is expected


def test_needed_cores() -> None:
    assert needed_cores("cpu", 2) == 2 and needed_cores("cpu", 0) == 1
    assert needed_cores("cuda:1", 16) == 1 and needed_cores("mps", 8) == 1


def test_load_round_trips_and_bad_stored_values_read_as_unknown() -> None:
    load = Load(1.23456, 2, 0.5, 1.5)
    assert Load.from_dict(load.to_dict()) == Load(1.2346, 2, 0.5, 1.5)
    assert Load.from_dict(None) is None and Load.from_dict({"seconds": "x"}) is None


def test_snapshot_reads_this_machine_and_nothing_elsewhere(tmp_path: Path) -> None:
    now = load.snapshot()
    assert now is not None and now.cpus >= 1 and now.busy > 0
    assert load.snapshot(str(tmp_path / "no-proc-stat")) is None
    (tmp_path / "stat").write_text("intr 1 2 3\n")
    assert load.snapshot(str(tmp_path / "stat")) is None


class FakeMachine:
    """Counters that advance by ``background`` cores of other processes per second of fake time."""

    def __init__(self, backgrounds: list[float]) -> None:
        self.backgrounds = backgrounds
        self.wall = self.busy = 0.0
        self.slept: list[float] = []

    def take(self) -> CpuSnapshot:
        return snap(self.wall, self.busy, 0.0)

    def sleep(self, seconds: float) -> None:
        background = self.backgrounds.pop(0) if self.backgrounds else 0.0
        self.slept.append(seconds)
        self.wall += seconds
        self.busy += background * seconds


def test_wait_for_quiet_returns_once_a_probe_is_quiet() -> None:
    machine = FakeMachine([1.0, 1.0, 0.0])
    waited, last = wait_for_quiet(2, timeout=10, take=machine.take, sleep=machine.sleep)
    assert waited == pytest.approx(0.6) and last is not None and last.background_cores == 0.0


def test_wait_for_quiet_gives_up_at_the_timeout() -> None:
    machine = FakeMachine([1.0] * 100)
    waited, last = wait_for_quiet(2, timeout=1.0, take=machine.take, sleep=machine.sleep)
    assert waited == pytest.approx(1.0) and last is not None and last.background_cores == pytest.approx(1.0)


def test_wait_for_quiet_tells_once_that_it_waits_and_nothing_when_quiet() -> None:
    told: list[float] = []
    machine = FakeMachine([1.0, 1.0, 1.0, 0.0])
    wait_for_quiet(
        2, timeout=10, take=machine.take, sleep=machine.sleep, on_busy=lambda load: told.append(load.background_cores)
    )
    assert told == [pytest.approx(1.0)]
    quiet = FakeMachine([0.0])
    wait_for_quiet(2, timeout=10, take=quiet.take, sleep=quiet.sleep, on_busy=lambda load: told.append(0))
    assert len(told) == 1


def test_wait_for_quiet_without_a_gauge_does_not_wait() -> None:
    assert wait_for_quiet(2, timeout=10, take=lambda: None) == (0.0, None)


def test_monitor_reports_the_load_of_the_last_seconds_only() -> None:
    machine = FakeMachine([])
    monitor = Monitor(take=machine.take)
    # Five seconds with a neighbour on one core, then one quiet second: a measurement's sampling window.
    for seconds, background in ((5.0, 1.0), (1.0, 0.0)):
        for _ in range(int(seconds * 10)):
            machine.wall += 0.1
            machine.busy += background * 0.1
            monitor._record()
    recent = monitor.load_over(1.0)
    # From at most one interval before the span: 1.1 s, of which 0.1 s busy.
    assert recent is not None and recent.seconds <= 1.1 + 1e-9 and recent.background_cores <= 0.1
    whole = monitor.load_over(6.0)
    assert whole is not None and whole.background_cores == pytest.approx(5.0 / 6.0, abs=0.02)


def test_monitor_thread_starts_and_stops() -> None:
    monitor = Monitor(interval=0.01)
    monitor.start()
    try:
        load = monitor.load_over(0.0)
        assert load is None or load.cpus >= 1
    finally:
        monitor.stop()
    assert monitor.load_over(1.0) is None  # stopped: nothing kept


def test_a_monitor_whose_thread_was_refused_says_so_and_starts_clean_next(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: a thread kept before it started was joined by the next test's stop, which failed every later test."""
    real_start = threading.Thread.start

    def refused(thread: threading.Thread) -> None:
        monkeypatch.setattr(threading.Thread, "start", real_start)  # the machine refuses once
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refused)
    monitor = Monitor(interval=0.01)
    with pytest.raises(RuntimeError, match=r"^could not start the load monitor's thread: can't start new thread "):
        monitor.start()
    assert monitor._thread is None  # no thread kept that never started
    monitor.start()
    try:
        assert monitor._thread is not None and monitor._thread.is_alive()
    finally:
        monitor.stop()


def test_a_running_monitor_keeps_its_thread_and_a_span_starts_no_earlier_than_the_last_start() -> None:
    """A session's tests share one thread; each test's start is a snapshot, so that a busy stretch before it (the
    previous test's neighbour) is no part of the load of a span inside it."""
    machine = FakeMachine([])
    monitor = Monitor(interval=3600.0, take=machine.take)  # the thread itself never takes one here
    monitor.start()
    try:
        thread = monitor._thread
        machine.wall, machine.busy = 5.0, 5.0  # five seconds with a neighbour on one core
        monitor.start()
        assert monitor._thread is thread and thread is not None and thread.is_alive()
        machine.wall += 1.0  # one quiet second in this test
        load = monitor.load_over(0.5)
        assert load is not None and load.seconds == pytest.approx(1.0) and load.background_cores == 0.0
    finally:
        monitor.stop()
    assert monitor._thread is None


def test_the_run_queue_wait_is_per_second_of_the_span_and_kept_in_the_json() -> None:
    start = CpuSnapshot(wall=0, busy=0, steal=0, own=0, cpus=2, own_wait=1.0)
    end = CpuSnapshot(wall=2, busy=4, steal=0, own=0.5, cpus=2, own_wait=2.5)
    waited = between(start, end)
    assert waited is not None and waited.waited_cores == 0.75
    assert Load.from_dict(waited.to_dict()) == waited
    # A side without the wait (not Linux, a fake gauge) gives none, and an older file reads as none.
    unread = between(start, CpuSnapshot(wall=2, busy=4, steal=0, own=0.5, cpus=2))
    assert unread is not None and unread.waited_cores is None and "waited_cores" not in unread.to_dict()


def test_the_run_queue_wait_sums_the_threads_and_skips_one_that_ended(tmp_path: Path) -> None:
    for tid, fields in (("11", "5000 2000000000 7"), ("12", "9 500000000 1")):
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(fields + "\n")
    (tmp_path / "13").mkdir()  # a thread that ended between the listing and the read
    assert load.run_queue_wait(str(tmp_path)) == 2.5
    assert load.run_queue_wait(str(tmp_path / "missing")) is None


def test_this_process_run_queue_wait_is_read_on_linux() -> None:
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc/self/task: not Linux")
    first = load.run_queue_wait()
    assert first is not None and first >= 0.0
    snapshot = load.snapshot()
    assert snapshot is not None and snapshot.own_wait is not None and snapshot.own_wait >= first
