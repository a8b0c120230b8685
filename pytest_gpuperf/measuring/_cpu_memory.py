"""Peak memory on a CPU: torch's CPU allocator events, read through the profiler, one window per call.

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

__all__ = ["AGREEMENT", "CALLS", "AllocatorProbe", "CallPeak", "allocator_probe", "peaks_of_calls", "steady_peak"]

#: One call that settles, then two that are measured.
CALLS: Final = 3
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
class AllocatorProbe:
    """The CPU's MemoryProbe: run the step once per item of ``calls()``; each call gets its own profiler window."""

    def __init__(self) -> None:
        self.method = "torch.profiler CPU allocator events"
        self.peak_bytes: int | None = None
        self.reason: str | None = None
        self._windows: list[list[tuple[int, int]]] = []
        self._profile: Any = None

    def calls(self) -> Iterator[int]:
        """Run the measured code once per item: the first call settles, the next two are measured."""
        for index in range(CALLS):
            if index:
                self._stop()
                self._start()
            yield index

    def _start(self) -> None:
        from torch.autograd.profiler import profile

        with warnings.catch_warnings():
            # The profiler's own warnings are no business of the test (and fail it under
            # filterwarnings=error); the test's code runs outside this block.
            warnings.simplefilter("ignore")
            self._profile = profile(use_kineto=True, use_cpu=True, profile_memory=True)
            self._profile.__enter__()

    def _stop(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._profile.__exit__(None, None, None)
            self._windows.append(_cpu_allocations(self._profile.kineto_results))
        self._profile = None

    def _conclude(self) -> None:
        self.peak_bytes, self.reason = steady_peak(peaks_of_calls(self._windows))


def _cpu_allocations(results: Any) -> list[tuple[int, int]]:
    """(address, +allocated/-freed bytes) of the CPU allocator's events, in time order."""
    from torch._C._profiler import _ExtraFields_Allocation

    allocations = []
    stack = list(results.experimental_event_tree())
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        fields = event.extra_fields
        if isinstance(fields, _ExtraFields_Allocation) and fields.device.type == "cpu":
            allocations.append((event.start_time_ns, int(fields.ptr), int(fields.alloc_size)))
    allocations.sort(key=lambda a: a[0])
    return [(address, nbytes) for _, address, nbytes in allocations]


@contextmanager
def allocator_probe() -> Iterator[AllocatorProbe]:
    """The CPU backend's ``track_memory``: a block measured once, or each call of ``probe.calls()``."""
    probe = AllocatorProbe()
    with profiler_noise_filtered():
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
    try:
        _flush_stderr()
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to redirect (a closed stderr)
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
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
