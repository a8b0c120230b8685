"""Memory of a call on a CPU: the process's RSS high-water mark, and the transient part from torch's CPU allocator.

The high-water mark: torch's CPU allocator keeps no statistics, so the only absolute
figure is the process's: its resident set's high-water mark (``VmHWM`` in
``/proc/self/status``), reset to the current RSS before the call by writing ``5`` to
``/proc/self/clear_refs`` (Linux 4.0 and later; a write costs about 6 us and a read of
the status 13 us, measured 2026-11-26). It counts the whole process and the pages the C
allocator keeps after a free, so it is an upper bound of what the step needs, never a
figure of the step alone. Where the reset cannot be made, none is given.

The transient part, from torch's CPU allocator events, read through the profiler, one window per call.

torch's CPU allocator keeps no statistics. With ``profile_memory=True`` the profiler
records each allocation and free it makes, with the block's address and size; the
running sum of those events in time order is the live-bytes curve. But torch learns a
block's size only when it is allocated under a profiler: the free of a block allocated
before the profiler started is not reported at all, or, where an earlier profiling
session left a stale entry at that address, reported with the old block's size. A step
that frees what the previous call left (``optimizer.zero_grad()`` dropping last step's
gradients) then read too high, by an amount that changed from run to run.

So the probe runs the step three times, each call in its own window: the first settles
(what it allocates and keeps is seen, so the next call's frees of it are known); the
other two are measured, each above the live level at its start, with every free sized
from the allocation seen at its address. A free of a block older than the probe has no
known size; the peak is exact only if no such free comes before it. The two measured
calls must agree, which also catches a step whose memory changes from call to call.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final, final

from ._units import format_bytes

__all__ = [
    "AGREEMENT",
    "CALLS",
    "RSS_METHOD",
    "TRANSIENT_METHOD",
    "AllocatorProbe",
    "CallPeak",
    "RssHighWater",
    "allocator_probe",
    "peaks_of_calls",
    "steady_peak",
]

#: One call that settles, then two that are measured under the profiler (one more follows for the RSS).
CALLS: Final = 3
#: How the absolute figure of a CPU call is read, and its transient part.
RSS_METHOD: Final = "process RSS high-water mark (VmHWM)"
TRANSIENT_METHOD: Final = "torch.profiler CPU allocator events"
_CLEAR_REFS: Final = "/proc/self/clear_refs"
_STATUS: Final = "/proc/self/status"
#: The measured calls' peaks may differ by this fraction of the larger (threads may interleave
#: their allocations differently); the larger is reported.
AGREEMENT: Final = 0.01
#: What torch's profiler writes to stderr on its own: kineto's start/stop trace points
#: (torch 2.13 on Linux), its stage lines (``STAGE:... Completed Stage: Warm Up``, torch 2.3)
#: and the CPU allocator's warning about frees of blocks older than the profiler, which the
#: probe accounts for.
_PROFILER_NOISE: Final = re.compile(
    rb"USDT:.*\bprofiler_(start|stop)\b|STAGE:.*\] Completed Stage: "
    rb"|Memory block of unknown size was allocated before the profiling started"
)


@dataclass(frozen=True)
class CallPeak:
    """One call's peak of live bytes above the level at its start, from its allocation events."""

    #: the peak before the call's first free of a block older than the probe: the true peak is at least this
    low: int
    #: the peak with such frees counted as freeing nothing: the true peak is at most this
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high


def peaks_of_calls(calls: Iterable[Iterable[tuple[int, int]]]) -> list[CallPeak]:
    """Each call's peak; ``calls`` has each consecutive call's (address, +allocated/-freed bytes) events in time order.

    A free is sized from the allocation seen at its address in this or an earlier call,
    never from the event (torch's figure for an older block may be stale). A free of a
    block allocated before the first call has no known size: the curve after it is an
    upper bound, so the call's peak is exact only if that free comes after it.
    """
    live: dict[int, int] = {}
    peaks = []
    for events in calls:
        level = low = high = 0
        foreign = False
        for address, nbytes in events:
            if nbytes > 0:
                live[address] = nbytes
                level += nbytes
            elif address in live:
                level -= live.pop(address)
            else:
                foreign = True
            high = max(high, level)
            if not foreign:
                low = high
        peaks.append(CallPeak(low, high))
    return peaks


def steady_peak(peaks: Sequence[CallPeak]) -> tuple[int | None, str | None]:
    """The peak of a step from its calls' peaks, or None and why it is unknown.

    With several calls the first only settled the probe and the rest must agree (within
    ``AGREEMENT``); a single call (a block measured once) is taken as it is.
    """
    measured = peaks[1:] if len(peaks) > 1 else peaks
    if not measured:
        return None, "unknown: the step was not run under the probe"
    for peak in measured:
        if not peak.exact:
            return None, (
                "unknown: the step freed memory allocated before the probe started, ahead of its peak "
                f"(the peak is between {format_bytes(peak.low)} and {format_bytes(peak.high)})"
            )
    highs = [peak.high for peak in measured]
    if max(highs) - min(highs) > AGREEMENT * max(highs):
        return None, (
            f"unknown: consecutive calls peaked at {' and '.join(format_bytes(h) for h in highs)}; "
            "the step's memory use changes from call to call"
        )
    return max(highs), None


@final
class RssHighWater:
    """The process's resident set high-water mark over a stretch of code: ``start()``, the code, ``stop()``."""

    def __init__(self, clear_refs: str = _CLEAR_REFS, status: str = _STATUS) -> None:
        self._clear_refs = clear_refs
        self._status = status
        self.peak_bytes: int | None = None
        self.reason: str | None = None

    def start(self) -> None:
        """Reset the high-water mark to the current RSS (or note why it cannot be)."""
        try:
            with open(self._clear_refs, "w") as f:
                f.write("5")
        except OSError as exc:
            self.reason = f"unknown: the process's RSS high-water mark cannot be reset ({self._clear_refs}: {exc})"

    def stop(self) -> None:
        if self.reason is not None:
            return
        try:
            with open(self._status) as f:
                text = f.read()
        except OSError as exc:
            self.reason = f"unknown: the process's RSS high-water mark cannot be read ({self._status}: {exc})"
            return
        match = re.search(r"^VmHWM:\s+(\d+) kB", text, re.MULTILINE)
        if match is None:
            self.reason = f"unknown: {self._status} has no VmHWM line"
            return
        self.peak_bytes = int(match.group(1)) * 1024


@final
class AllocatorProbe:
    """The CPU's MemoryProbe: run the step once per item of ``calls()``; each of the first ``CALLS`` calls gets its
    own profiler window (the transient part), the last none (the RSS high-water mark)."""

    def __init__(self, rss: RssHighWater | None = None) -> None:
        self.method = RSS_METHOD
        self.peak_bytes: int | None = None
        self.reason: str | None = None
        self.resident_bytes: int | None = None
        self.transient_bytes: int | None = None
        self.transient_method = TRANSIENT_METHOD
        self.reserved_bytes: int | None = None
        self.devices: dict[str, int] = {}
        self._rss = RssHighWater() if rss is None else rss
        self._windows: list[list[tuple[int, int]]] = []
        self._profile: Any = None
        #: whether the windows started from now on run Python's tracer too (the work profile's, at level ``full``:
        #: it names the built-ins called from Python, ``.item()`` or a sleep, that hold time outside any op)
        self.trace_python = False
        #: the profiler of each window, in order: the work profile reads the measured calls' (``windows``)
        self._profilers: list[Any] = []
        #: the events of each window, counted as its allocations are read (the work profile's reading costs by them)
        self._events: list[int] = []

    #: calls of ``calls()`` that only settle the step (the work profile counts FLOPs and copies on them)
    settle_calls: Final = 1

    @property
    def windows(self) -> list[Any]:
        """The profilers of the measured calls, one call each (``torch.autograd.profiler.profile``)."""
        return self._profilers[self.settle_calls :]

    @property
    def window_events(self) -> list[int]:
        """The events each of ``windows`` recorded."""
        return self._events[self.settle_calls :]

    def calls(self) -> Iterator[int]:
        """Run the measured code once per item: the first call settles, the next two are measured under the
        profiler, the last is measured for the RSS with the profiler stopped (its buffers are no part of it)."""
        for index in range(CALLS):
            if index:
                self._stop()
                self._start()
            yield index
        self._stop()
        self._rss.start()
        yield CALLS

    def _start(self) -> None:
        from torch.autograd.profiler import profile

        with warnings.catch_warnings():
            # The profiler's own warnings are no business of the test (and fail it under
            # filterwarnings=error); the test's code runs outside this block.
            warnings.simplefilter("ignore")
            window: Any = profile(use_kineto=True, use_cpu=True, profile_memory=True, with_stack=self.trace_python)
            window.__enter__()
        self._profile = window  # kept once started: a window that never started is never stopped (another's would)

    def _stop(self) -> None:
        if self._profile is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._profile.__exit__(None, None, None)
            allocations, events = _cpu_allocations(self._profile.kineto_results)
            self._windows.append(allocations)
            self._events.append(events)
            self._profilers.append(self._profile)
        self._profile = None

    def _conclude(self) -> None:
        self._rss.stop()
        self.peak_bytes, self.reason = self._rss.peak_bytes, self._rss.reason
        self.transient_bytes, why = steady_peak(peaks_of_calls(self._windows))
        if why is not None:
            self.transient_method = why


def _cpu_allocations(results: Any) -> tuple[list[tuple[int, int]], int]:
    """(address, +allocated/-freed bytes) of the CPU allocator's events, in time order; and how many events there
    were of every kind."""
    from torch._C._profiler import _ExtraFields_Allocation

    allocations = []
    stack = list(results.experimental_event_tree())
    events = 0
    while stack:
        event = stack.pop()
        events += 1
        stack.extend(event.children)
        fields = event.extra_fields
        if isinstance(fields, _ExtraFields_Allocation) and fields.device.type == "cpu":
            allocations.append((event.start_time_ns, int(fields.ptr), int(fields.alloc_size)))
    allocations.sort(key=lambda a: a[0])
    return [(address, nbytes) for _, address, nbytes in allocations], events


@contextmanager
def allocator_probe() -> Iterator[AllocatorProbe]:
    """The CPU backend's ``track_memory``: a block measured once, or each call of ``probe.calls()``."""
    probe = AllocatorProbe()
    with profiler_noise_filtered():
        probe._rss.start()
        probe._start()
        try:
            yield probe
        finally:
            probe._stop()
    probe._conclude()


@contextmanager
def profiler_noise_filtered() -> Iterator[None]:
    """Inside the block, what is written to file descriptor 2 is held back; at its end all but the profiler's
    own lines are written there.

    torch's profiler writes from C++, under Python's ``sys.stderr``, so only redirecting
    the descriptor keeps its lines out of a terminal or a captured test's output.
    """
    held = None
    try:
        _flush_stderr()
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to redirect (a closed stderr)
        pass
    else:
        try:
            held = tempfile.TemporaryFile()  # noqa: SIM115 - entered below, once it is made
        except OSError:  # nowhere to hold the lines (a full or missing temporary directory): they pass as they come
            os.close(saved)
    if held is None:
        yield
        return
    with held:
        try:
            os.dup2(held.fileno(), 2)
            yield
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = memoryview(b"".join(line for line in held if not _PROFILER_NOISE.search(line)))
            while kept:
                kept = kept[os.write(2, kept) :]


def _flush_stderr() -> None:
    # What Python buffered for stderr belongs on the side of the redirection it was written on.
    with suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
