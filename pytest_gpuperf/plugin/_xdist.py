"""pytest-xdist: one GPU per worker, and every worker's records gathered by the controller.

Under ``pytest -n N`` the controller runs no test: N workers do. Each worker measures on
``cuda:<its index>`` (``gw1`` on ``cuda:1``) while the test ids keep the device that was
asked for, so that ids, and the baselines keyed by them, are the same with and without
``-n``. At the end each worker sends its record book (records, notes, reference peaks,
devices and failed tests: ``RecordBook.payload``) to the controller through xdist's
``workeroutput``, where it is merged into the controller's book; the controller writes the one run,
the one ``--gpuperf-json`` file and the one table, saves the baseline once and runs the
gate over every record.

Workers that would share a device (the CPU, MPS, one GPU named for all, or more workers
than GPUs) would disturb each other's timings, so that is refused with the fix: by the
controller when the session asks to measure (a ``--gpuperf-*`` device or results option
is given), else by each measuring test in a worker. An explicit ``cuda:N`` is never moved
to another worker's GPU: under ``-n 2`` or more it is refused, under ``-n 1`` measured on.
Where each worker measures is ``measuring.bind`` (``Binding``), as for a torchrun rank.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from ..measuring import DeviceSlot, Inventory
    from ._records import RecordBook

__all__ = [
    "XdistController",
    "send_to_controller",
    "sharing",
]

#: The key of this plugin's data in xdist's ``workeroutput``.
OUTPUT_KEY: Final = "gpuperf"


def sharing(slots: list[DeviceSlot], count: int, inventory: Inventory | None) -> str | None:
    """Why ``count`` workers measuring on ``slots`` would share a device, or None when each gets a GPU."""
    available = [slot for slot in slots if slot.available]
    others = [slot.id for slot in available if slot.kind != "cuda"]
    gpus = inventory.cuda_count if inventory is not None else 0
    fix = (
        "run the measuring tests without -n, or give each worker a GPU of its own: --gpuperf-device=cuda with "
        f"-n at most the number of GPUs (this machine has {gpus})"
    )
    if others and count > 1:
        on = ", ".join(others)
        return f"-n {count} would run {count} workers measuring on {on} at once, disturbing each other's timings; {fix}"
    cuda = [slot for slot in available if slot.kind == "cuda"]
    pinned = [slot for slot in cuda if slot.pinned]
    if pinned and len(cuda) == 1 and count > 1:
        from ..measuring import Binding

        return Binding(0, "xdist", count).pinned_refusal(pinned[0])
    if len(cuda) > 1:
        return (
            f"-n {count} with --gpuperf-device naming {len(cuda)} GPUs ({', '.join(s.id for s in cuda)}) would have "
            f"every worker measure on each of them; name the kind alone, --gpuperf-device=cuda: worker gwN then "
            f"measures on cuda:N"
        )
    if cuda and count > gpus:
        return f"-n {count} needs {count} GPUs, one per worker, and this machine has {gpus}; {fix}"
    return None


def send_to_controller(config: pytest.Config, book: RecordBook) -> None:
    """A worker's record book (records, notes, reference peaks, devices and failed tests), for the controller."""
    output = getattr(config, "workeroutput", None)
    if output is None:
        return
    output[OUTPUT_KEY] = json.dumps(book.payload())


class XdistController:
    """Registered on the controller: merges the book each worker sends when it goes down into the session's."""

    def __init__(self, book: RecordBook) -> None:
        self.book = book

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        raw = getattr(node, "workeroutput", {}).get(OUTPUT_KEY)
        if raw is None:
            return  # the worker crashed, or measured nothing
        self.book.merge(json.loads(raw))
