"""Was a record measured while other processes took the cores it needs? The one rule, for the gate (which leaves
such runs out), the results table's ``starved`` flag and the plugin's report of a failed test.

The load itself is measured by ``measuring/_load.py`` (the record's ``evidence.load``); this module only reads it.
"""

from __future__ import annotations

from ..measuring import SLACK_CORES, Load, needed_cores
from ._record import Record

__all__ = ["disturbed_by", "starved", "starved_flag", "starved_message"]


def disturbed_by(record: Record, load: Load | None) -> bool:
    """Did ``load`` (of the record's measurement or one of its rounds) leave fewer free cores than it needs?"""
    if load is None:
        return False
    m = record.measurement
    if m.host_per_call is not None and not m.host_bound and not m.no_device_work:
        # Device-bound on an asynchronous device (its host launches faster than the device runs): other
        # processes' CPU use does not change its device time, so busy cores do not explain a slowdown.
        return False
    return load.disturbs(needed_cores(record.device, m.threads))


def starved(record: Record) -> Load | None:
    """The load of the record's own measurement when it starved it of cores, else None: disturbed (other processes
    left fewer free cores than it needs), and the test's process was kept from running: its threads waited in the
    run queue for more than a quarter of a core (``Load.waited_cores``). A test that got its core on a busy machine
    was not starved of it (though the gate still leaves such a run out), nor was one whose work ran in child
    processes (a DDP world: its own process asks for next to no CPU). Where the wait was not read (not Linux), the
    test's process got less CPU than it needs."""
    load = record.evidence.load
    if not disturbed_by(record, load) or load is None:
        return None
    if load.waited_cores is not None:
        return load if load.waited_cores > SLACK_CORES else None
    needed = needed_cores(record.device, record.measurement.threads)
    return load if load.own_cores + SLACK_CORES < needed else None


def _cores(value: float) -> str:
    return f"{value:.3g} core" if value == 1 else f"{value:.3g} cores"


def starved_flag(record: Record) -> str:
    """``starved (0.25 of 1 core)``: the cores the test's process got, of those it needs; '' when not starved."""
    load = starved(record)
    if load is None:
        return ""
    needed = needed_cores(record.device, record.measurement.threads)
    return f"starved ({load.own_cores:.3g} of {_cores(needed)})"


def starved_message(record: Record) -> str:
    """Why a failed bound of this record may be the machine's, not the code's; '' when it was not starved."""
    load = starved(record)
    if load is None:
        return ""
    needed = needed_cores(record.device, record.measurement.threads)
    return (
        f"{record.key}: starved of CPU while it sampled: it got {_cores(load.own_cores)} of the "
        f"{_cores(needed)} it needs while other processes kept {_cores(load.background_cores)} of the machine's "
        f"{load.cpus} busy (load monitor, over {load.seconds:.3g} s); a slower figure may be the machine's load, "
        "not the code: measure again on a quiet machine (--gpuperf-quiet-wait)"
    )
