"""Background load: how much of the machine's CPU time other processes took while we measured.

On a shared machine a neighbour's job takes cores for seconds to minutes at a time,
and a measurement whose threads need those cores slows by a large factor while it
lasts (far less so on one thread, when a core is left free). Such a run is internally
consistent (its samples agree with each other), so no statistic of its own samples
can reveal it. The operating system can: ``/proc/stat`` counts every CPU's busy and
stolen time, ``getrusage`` counts ours, and the difference is everyone else's.

A measurement is *disturbed* when fewer cores were left free than it needs (its
threads on the CPU, one host core for a GPU), with a quarter of a core of slack.
Load can only slow a measurement down, never speed it up; the gate relies on
that. Linux only: elsewhere nothing is recorded and nothing is judged disturbed.
Child processes (DataLoader workers) count as background load.
"""

from __future__ import annotations

import bisect
import os
import resource
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ._values import optional

__all__ = [
    "SLACK_CORES",
    "CpuSnapshot",
    "Load",
    "Monitor",
    "affinity_cores",
    "between",
    "needed_cores",
    "run_queue_wait",
    "snapshot",
    "wait_for_quiet",
]

#: Background load below this many cores beyond what the measurement leaves free is ignored (timer ticks, daemons).
SLACK_CORES: Final = 0.25
_PROC_STAT: Final = "/proc/stat"
_OWN_TASKS: Final = "/proc/self/task"


@dataclass(frozen=True)
class CpuSnapshot:
    """Cumulative CPU counters at one instant, in seconds."""

    wall: float
    busy: float  # all CPUs: user + nice + system + irq + softirq
    steal: float  # time the hypervisor gave our virtual CPUs to someone else
    own: float  # this process, all threads: user + system
    cpus: int
    #: this process's threads' time runnable but not running (the run queue's wait; None where unreadable)
    own_wait: float | None = None


@dataclass(frozen=True)
class Load:
    """What happened on the machine between two snapshots."""

    seconds: float
    cpus: int
    background_cores: float  # other processes' CPU use plus stolen time, in cores
    own_cores: float
    #: cores' worth of time this process's threads waited to run (None: not read)
    waited_cores: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seconds": round(self.seconds, 4),
            "cpus": self.cpus,
            "background_cores": round(self.background_cores, 3),
            "own_cores": round(self.own_cores, 3),
        }
        if self.waited_cores is not None:
            out["waited_cores"] = round(self.waited_cores, 3)
        return out

    def disturbs(self, needed: float) -> bool:
        """Did other processes leave fewer free cores than a measurement that ``needed`` this many?"""
        return self.background_cores > max(0.0, self.cpus - needed) + SLACK_CORES

    @classmethod
    def from_dict(cls, data: Any) -> Load | None:
        """The load stored with a record, or None when absent or not understood."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                float(data["seconds"]),
                int(data["cpus"]),
                float(data["background_cores"]),
                float(data["own_cores"]),
                optional(data.get("waited_cores"), float),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _ticks_per_second() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100.0


def run_queue_wait(tasks: str = _OWN_TASKS) -> float | None:
    """Seconds this process's threads have spent runnable but not running, summed over its live threads
    (``/proc/self/task/*/schedstat``, second field, nanoseconds); None where it cannot be read.

    This is what starving a process of cores means: its CPU time alone cannot tell a thread that could not run
    from one that did not ask to (a test whose work runs in child processes, such as a DDP world)."""
    total = 0
    try:
        tids = os.listdir(tasks)
    except OSError:
        return None
    for tid in tids:
        try:
            with open(os.path.join(tasks, tid, "schedstat"), encoding="ascii") as f:
                fields = f.read().split()
        except OSError:
            continue  # a thread that ended since the listing
        if len(fields) < 2 or not fields[1].isdigit():
            return None
        total += int(fields[1])
    return total * 1e-9


def snapshot(stat_path: str = _PROC_STAT) -> CpuSnapshot | None:
    """The counters now, or None where ``/proc/stat`` cannot be read (not Linux)."""
    try:
        with open(stat_path, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    ticks = [int(x) for x in fields[1:]]
    hz = _ticks_per_second()
    user, nice, system, _idle, _iowait, irq, softirq = ticks[:7]
    steal = ticks[7] if len(ticks) > 7 else 0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return CpuSnapshot(
        wall=time.perf_counter(),
        busy=(user + nice + system + irq + softirq) / hz,
        steal=steal / hz,
        own=usage.ru_utime + usage.ru_stime,
        cpus=os.cpu_count() or 1,
        own_wait=run_queue_wait(),
    )


def _snapshot_now() -> CpuSnapshot | None:
    return snapshot()  # looked up at each call, so that tests can replace the gauge


def between(start: CpuSnapshot | None, end: CpuSnapshot | None) -> Load | None:
    """The load between two snapshots; None if either is missing or no time passed."""
    if start is None or end is None:
        return None
    seconds = end.wall - start.wall
    if seconds <= 0:
        return None
    own = max(0.0, end.own - start.own)
    # /proc/stat counts in clock ticks, our own time in microseconds: clamp the rounding, not the signal.
    background = max(0.0, (end.busy - start.busy) - own + (end.steal - start.steal))
    waited = None
    if start.own_wait is not None and end.own_wait is not None:
        # A thread that ended in between takes its wait with it: never below zero.
        waited = max(0.0, end.own_wait - start.own_wait) / seconds
    return Load(seconds, end.cpus, min(float(end.cpus), background / seconds), own / seconds, waited)


def affinity_cores() -> int:
    """The logical CPUs this process may run on (its affinity: a container's or taskset's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def needed_cores(device: str, threads: int) -> float:
    """Cores a measurement needs to itself: its threads on the CPU, one host thread for a GPU."""
    if device.split(":", 1)[0] == "cpu":
        return float(max(1, threads))
    return 1.0


def wait_for_quiet(
    needed: float,
    timeout: float,
    *,
    probe: float = 0.2,
    take: Callable[[], CpuSnapshot | None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_busy: Callable[[Load], None] | None = None,
) -> tuple[float, Load | None]:
    """Sleep in ``probe``-second steps until a step shows the machine quiet enough, at most ``timeout`` seconds.

    Returns the seconds waited and the load of the last step (None where load cannot be read). ``on_busy`` is
    called with the first step's load when that step found the machine busy and the wait goes on, so that the
    caller can say what it waits for.
    """
    take = take or _snapshot_now
    waited = 0.0
    last: Load | None = None
    while True:
        start = take()
        if start is None:
            return waited, None
        sleep(probe)
        last = between(start, take())
        waited += probe
        if last is None or not last.disturbs(needed) or waited >= timeout:
            return waited, last
        if on_busy is not None and waited == probe:
            on_busy(last)


class Monitor:
    """Takes a snapshot every ``interval`` seconds on a daemon thread, so that the load of any recent span,
    such as the sampling part of a measurement that just ended, can be read afterwards.

    The thread wakes ten times a second for about 20 microseconds: far below what it could disturb. A session keeps
    one thread for all its tests (a thread started and joined per test cost more than its snapshots): each test's
    ``start`` takes a snapshot at its start, so that the load of a span inside the test never reaches before it.
    """

    def __init__(
        self, interval: float = 0.1, keep: int = 6000, take: Callable[[], CpuSnapshot | None] | None = None
    ) -> None:
        self.interval = interval
        self._take = take or _snapshot_now
        self._snapshots: deque[CpuSnapshot] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self) -> None:
        snap = self._take()
        if snap is not None:
            with self._lock:
                self._snapshots.append(snap)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._record()

    def start(self) -> None:
        """A snapshot now, and the thread started unless it runs. RuntimeError where the thread does not start (the
        machine refused a new thread): the monitor then keeps no thread, and the next start tries again."""
        self._record()
        if self._thread is not None:
            return
        self._stop.clear()
        thread = threading.Thread(target=self._loop, name="gpuperf-load-monitor", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:
            why = f"could not start the load monitor's thread: {exc} (the machine refused a new thread)"
        else:
            self._thread = thread  # kept once started: a thread that never started is never joined
            return
        raise RuntimeError(why)

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        with self._lock:
            self._snapshots.clear()

    def load_over(self, seconds: float) -> Load | None:
        """The load from (at most one interval before) ``seconds`` ago until now; None without snapshots."""
        now = self._take()
        if now is None:
            return None
        with self._lock:
            snapshots = list(self._snapshots)
        if not snapshots:
            return None
        walls = [snap.wall for snap in snapshots]
        i = bisect.bisect_right(walls, now.wall - seconds) - 1
        return between(snapshots[max(0, i)], now)
