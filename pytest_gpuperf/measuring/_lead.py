"""The CUDA backend's launch lead (``docs/timing.md``): a spin kernel (``torch.cuda._sleep``) queued ahead of a
block's start event so that the host queues the whole block behind it, sized from the step's host time; the spin
rate, timed once, then re-learnt after every block from an event before the spin (a GPU ramps its clock from idle);
and which steps synchronize (a block outlasted a lead that ran as planned twice in a row), which get no lead.
``_backends.CudaBackend`` times the blocks with what is here.

A step that is clearly host-bound (its host needs more than ``HOST_BOUND`` times its device time) gets a lead sized
from its device time instead: a lead is pure waiting for a host that paces the block anyway, and sized from the
host's time it made the host wait for the spin after launching (1.5 times the figure in wall time per call). Behind
that lead the device idles inside the block, so its time is not the device's work; the device time with its queue
kept full is the one read behind the last lead that covered the host's launch, and every ``DEVICE_LEADS`` blocks a
lead covers it again to read it afresh.

Each step has a lead of its own (paired rounds alternate steps of different host cost), kept beside a weak reference
to its key: its callable, or an object that stands for a step rebuilt every round (``CudaBackend.same_step``).
Nothing of the step stays alive here after its measurement.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "CALIBRATION_CYCLES",
    "DEVICE_LEADS",
    "HOST_BOUND",
    "LEAD_AS_PLANNED",
    "LEAD_BASE",
    "LEAD_CAP",
    "LEAD_MARGIN",
    "Leads",
    "StepLead",
]

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
#: A block is clearly host-bound where its host time is more than this many times its device time (queue kept full).
HOST_BOUND: Final = 1.2
#: A host-bound step's leads are sized from its device time for at most this many blocks in a row; the next lead
#: covers the host's launch, so that the device time is read again with the queue kept full.
DEVICE_LEADS: Final = 8


@dataclass
class StepLead:
    """What the CUDA backend knows of one step's launch: its host time per call, and whether it synchronizes."""

    host_per_call: float = 20e-6
    #: the last block outlasted a lead that ran as planned
    short: bool = False
    #: a block has been timed, so the next lead is sized from a measured host time (not the first guess)
    measured: bool = False
    syncs: bool = False
    #: device seconds per call of the last block whose lead covered the host's launch (the queue kept full)
    device_per_call: float | None = None
    #: the last block was clearly host-bound (``HOST_BOUND``): the next lead is sized from the device time
    host_bound: bool = False
    #: leads sized from the device time in a row, the one queued last included (``DEVICE_LEADS``)
    device_leads: int = 0


@dataclass
class Leads:
    """One device's spin rate and each step's lead (the module's docstring)."""

    _spin_rate: float | None = field(default=None, repr=False)
    _steps: dict[int, tuple[Callable[[], object | None], StepLead]] = field(default_factory=dict, repr=False)

    def of(self, step: object) -> StepLead:
        """The lead state of the step ``step`` stands for (its callable, or the key of a step rebuilt every round),
        kept beside a weak reference to it (none for an object that takes none: a fresh state each block), so that
        an id is never reused under it and nothing keeps ``step`` alive."""
        entry = self._steps.get(id(step))
        if entry is not None and entry[0]() is step:
            return entry[1]
        self._steps = {key: kept for key, kept in self._steps.items() if kept[0]() is not None}
        state = StepLead()
        with suppress(TypeError):
            self._steps[id(step)] = (weakref.ref(step), state)
        return state

    def applies(self, cuda: Any, state: StepLead) -> bool:
        """Does a block of the step get a lead? Not where it synchronizes, nor where torch has no ``_sleep``."""
        return not state.syncs and bool(self.rate(cuda))

    def queue(self, cuda: Any, state: StepLead, iterations: int) -> tuple[float, int]:
        """Queue a spin kernel long enough to cover the host's launch of ``iterations`` calls: its planned seconds
        and its cycles."""
        rate = self.rate(cuda) or 0.0
        for_device = state.host_bound and state.device_per_call is not None and state.device_leads < DEVICE_LEADS
        state.device_leads = state.device_leads + 1 if for_device else 0
        per_call = state.device_per_call if for_device and state.device_per_call is not None else state.host_per_call
        seconds = min(LEAD_CAP, LEAD_BASE + LEAD_MARGIN * per_call * iterations)
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

    def launched(
        self, state: StepLead, host: float, device: float, iterations: int, planned: float, ran: float, span: float
    ) -> tuple[bool, float]:
        """Note the block's host and device time; whether its lead (``ran`` seconds from the event before the spin)
        was short: it ended before the host, ``span`` seconds after that event, had launched the block; and the
        block's device seconds with the queue kept full (the module's docstring)."""
        short = ran < span
        for_device = state.device_leads > 0
        # A lead that ran as planned and was outlasted, sized from a block that was outlasted too: the host waited
        # for the spin, so the step synchronizes with the device. (A capped lead proves nothing, nor does one sized
        # for the device time, which the host outlasts by design.)
        waited = short and ran >= LEAD_AS_PLANNED * planned and not for_device
        if waited and state.short and state.measured and planned < LEAD_CAP:
            state.syncs = True
        state.short = waited
        state.measured = True
        state.host_per_call = host / iterations
        if not short:  # the device ran the block back to back: its time is the device's work
            state.device_per_call = device / iterations
            state.host_bound = host > HOST_BOUND * device
        elif for_device:
            # The device idled inside the block, waiting for the host: a host-bound step, unless the device's time
            # (its work and that wait) reached the host's, when the device may pace the block after all.
            state.host_bound = device < host
            if state.host_bound and state.device_per_call is not None:
                return short, state.device_per_call * iterations
        return short, device

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
