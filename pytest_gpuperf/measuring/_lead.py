"""The CUDA backend's launch lead (``docs/timing.md``): a spin kernel (``torch.cuda._sleep``) queued ahead of a
block's start event so that the host queues the whole block behind it, sized from the step's host time; the spin
rate, timed once, then re-learnt after every block from an event before the spin (a GPU ramps its clock from idle);
and which steps synchronize (a block outlasted a lead that ran as planned twice in a row), which get no lead.
``_backends.CudaBackend`` times the blocks with what is here.

Each step has a lead of its own (paired rounds alternate steps of different host cost), kept beside a weak reference
to its callable: nothing of the step stays alive here after its measurement.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["CALIBRATION_CYCLES", "LEAD_AS_PLANNED", "LEAD_BASE", "LEAD_CAP", "LEAD_MARGIN", "Leads", "StepLead"]

#: Host launch time is covered by a spin kernel this much longer than the last block's launch time took.
LEAD_MARGIN: Final = 1.5
#: ... plus this much, for the start event's own record and the first call's Python.
LEAD_BASE: Final = 50e-6
#: A lead never spins longer than this (a block whose host time is longer leaves gaps, and says so).
LEAD_CAP: Final = 0.1
#: Cycles of ``torch.cuda._sleep`` timed once to learn the spin rate before the first lead (each lead re-times it).
CALIBRATION_CYCLES: Final = 2_000_000
#: A lead that ran at least this share of its planned seconds ran at the rate it was sized for: if the host still
#: outlasted it, the host waited for it (a lead cut short by a faster clock proves nothing).
LEAD_AS_PLANNED: Final = 0.9


@dataclass
class StepLead:
    """What the CUDA backend knows of one step's launch: its host time per call, and whether it synchronizes."""

    host_per_call: float = 20e-6
    #: the last block outlasted a lead that ran as planned
    short: bool = False
    #: a block has been timed, so the next lead is sized from a measured host time (not the first guess)
    measured: bool = False
    syncs: bool = False


@dataclass
class Leads:
    """One device's spin rate and each step's lead (the module's docstring)."""

    _spin_rate: float | None = field(default=None, repr=False)
    _steps: dict[int, tuple[Callable[[], object | None], StepLead]] = field(default_factory=dict, repr=False)

    def of(self, fn: Callable[[], object]) -> StepLead:
        """The lead state of the step ``fn``, kept beside a weak reference to it (none for a callable that takes
        none: a fresh state each block), so that an id is never reused under it and nothing keeps ``fn`` alive."""
        entry = self._steps.get(id(fn))
        if entry is not None and entry[0]() is fn:
            return entry[1]
        self._steps = {key: kept for key, kept in self._steps.items() if kept[0]() is not None}
        state = StepLead()
        with suppress(TypeError):
            self._steps[id(fn)] = (weakref.ref(fn), state)
        return state

    def applies(self, cuda: Any, state: StepLead) -> bool:
        """Does a block of the step get a lead? Not where it synchronizes, nor where torch has no ``_sleep``."""
        return not state.syncs and bool(self.rate(cuda))

    def queue(self, cuda: Any, state: StepLead, iterations: int) -> tuple[float, int]:
        """Queue a spin kernel long enough to cover the host's launch of ``iterations`` calls: its planned seconds
        and its cycles."""
        rate = self.rate(cuda) or 0.0
        seconds = min(LEAD_CAP, LEAD_BASE + LEAD_MARGIN * state.host_per_call * iterations)
        cycles = int(seconds * rate)
        cuda._sleep(cycles)
        return seconds, cycles

    def relearn(self, cycles: int, ran: float, host: float) -> None:
        """The spin rate at the clock the lead ran at: its cycles over the seconds it held the start event back.

        Where the host recorded the start event only after the spin had ended (``ran`` no longer
        than the host's ``host`` seconds to get there), the spin took at most that long: the rate
        is at least ``cycles / host``.
        """
        if cycles <= 0 or ran <= 0:
            return
        if ran > host:
            self._spin_rate = cycles / ran
        elif host > 0:
            self._spin_rate = max(self._spin_rate or 0.0, cycles / host)

    def launched(self, state: StepLead, host: float, iterations: int, planned: float, ran: float, span: float) -> bool:
        """Note the block's host time; whether its lead (``ran`` seconds from the event before the spin) was short:
        it ended before the host, ``span`` seconds after that event, had launched the block."""
        short = ran < span
        # A lead that ran as planned and was outlasted, sized from a block that was outlasted too: the host waited
        # for the spin, so the step synchronizes with the device. (A capped lead proves nothing.)
        waited = short and ran >= LEAD_AS_PLANNED * planned
        if waited and state.short and state.measured and planned < LEAD_CAP:
            state.syncs = True
        state.short = waited
        state.measured = True
        state.host_per_call = host / iterations
        return short

    def rate(self, cuda: Any) -> float | None:
        """Cycles per second of ``torch.cuda._sleep`` on this device (None: torch has no _sleep): timed once
        here, then re-learnt from every lead that runs (``relearn``)."""
        if self._spin_rate is None:
            if not hasattr(cuda, "_sleep"):
                self._spin_rate = 0.0
                return None
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            cuda._sleep(CALIBRATION_CYCLES // 10)  # the first launch loads the kernel
            start.record()
            cuda._sleep(CALIBRATION_CYCLES)
            end.record()
            end.synchronize()
            seconds = float(start.elapsed_time(end)) * 1e-3
            self._spin_rate = CALIBRATION_CYCLES / seconds if seconds > 0 else 0.0
        return self._spin_rate or None
