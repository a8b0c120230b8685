"""Data loading: a synthetic Dataset through DataLoader feeding a training step on the device (samples/s).

For ``num_workers`` 0 and 2 and ``pin_memory`` off and on (on: CUDA only), three steps
share one loader and one model and are timed in the same rounds (``suites/dataloading.py``):
the loader with the copy to the device, the training step alone, and both end to end.
Which of the first two takes longer says whether loading or compute bounds the step; that
depends on the host's cores against the device's speed, so it is reported, not asserted.
The training check (the loss falls) runs on the end-to-end step.

On CUDA, pinned memory with ``non_blocking=True`` copies must not be slower end to end
than pageable memory (paired rounds). Both sides are what a loop of the step pays: the
pinned step's host work (loading) overlaps its device work, and its time is the larger of
the two; the pageable step waits for its copy, and is timed in steady state after a call
still in flight (``docs/timing.md``). Neither is a device time set against a wall time.
Graph mode skips these tests with the reason (``suites/dataloading.py``). The workers are child processes, counted as
background load by the plugin: on a machine with few cores the ``num_workers=2`` rows
can be flagged disturbed.
"""

from __future__ import annotations

from typing import Final

import pytest

from pytest_gpuperf import Check, Estimate, Gpuperf, Paired, Quantity

from .dataloading import LOADER_WORKERS, dataloader_steps, dataloader_unsupported, loader_name

#: Pinned + non_blocking must keep at least this share of pageable's end-to-end samples/s. Not slower, within a
#: 5% margin: where loading or compute bounds the step, the copy is a small part of it and the two are equal;
#: an interval around 1 could then never pass a bound of exactly 1.
PINNED_AT_LEAST: Final = 0.95
#: The num_workers of the pinned-against-pageable comparison: the loader in the background, as in training.
PINNED_WORKERS: Final = 2


def bound_note(rounds: Paired, label: str) -> str:
    """Which part bounds the step, from the paired time ratio of the loader alone to the step alone."""
    ratio = rounds.time_ratio("loader", "step")
    rate = {name: Quantity(m.throughput("samples").value, "samples/s") for name, m in rounds.measurements.items()}
    bound = "loading" if ratio.value >= 1 else "compute"
    return (
        f"{label}: {bound} bounds the step: loader alone {rate['loader']}, step alone {rate['step']}, end to end "
        f"{rate['end_to_end']}; time of the loader / time of the step {ratio.value:.3g} (CI [{ratio.low:.3g}, "
        f"{ratio.high:.3g}] from {ratio.count} paired rounds); not asserted: it depends on the host's cores "
        "against the device's speed"
    )


def judge_pinned(gpuperf: Gpuperf, ratio: Estimate) -> Check:
    """Pinned's end-to-end samples/s against pageable's, its check in the record of the pinned step."""
    __tracebackhide__ = True
    return gpuperf.expect(ratio, at_least=PINNED_AT_LEAST, record="pinned")


@pytest.mark.parametrize("pinned", [False, True], ids=["pageable", "pinned"])
@pytest.mark.parametrize("workers", LOADER_WORKERS, ids=[f"workers{w}" for w in LOADER_WORKERS])
def test_dataloader(gpuperf: Gpuperf, workers: int, pinned: bool) -> None:
    why = dataloader_unsupported(gpuperf.device, pinned)
    if why:
        pytest.skip(f"{loader_name(workers, pinned)} on {gpuperf.slot.id}: {why}")
    steps = dataloader_steps(gpuperf.device, gpuperf.size, workers=workers, pinned=pinned)
    rounds = gpuperf.paired(steps)
    check = steps["end_to_end"].check
    assert check is not None
    check()
    gpuperf.note(bound_note(rounds, f"num_workers={workers}, pin_memory={pinned}"))


@pytest.mark.gpuperf_requires("cuda")
def test_dataloader_pinned_vs_pageable(gpuperf: Gpuperf) -> None:
    steps = {
        "pinned": dataloader_steps(gpuperf.device, gpuperf.size, workers=PINNED_WORKERS, pinned=True)["end_to_end"],
        "pageable": dataloader_steps(gpuperf.device, gpuperf.size, workers=PINNED_WORKERS, pinned=False)["end_to_end"],
    }
    rounds = gpuperf.paired(steps)
    judge_pinned(gpuperf, rounds.throughput_ratio("pinned", "pageable", "samples"))
