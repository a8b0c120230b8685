"""Gradient checkpointing: memory saved and time paid, against the same stack without it.

The stack is made of expansion blocks (``x + W2 relu(W1 x)``, inner width 4x), each
checkpointed with ``use_reentrant=False``: the wide inner activation is what
checkpointing frees. (Checkpointing each Linear+ReLU alone frees nothing: its
boundaries are exactly what autograd keeps anyway.) Peak memory is the plugin's:
``max_memory_allocated`` on CUDA, the CPU allocator's events on CPU; on MPS it is unknown and
the saving is not checked.

Time: checkpointing recomputes each block's forward during backward, so its step
costs about one extra forward pass. The extra time, in units of a forward pass timed
in the same rounds, must stay under ``MAX_EXTRA_FORWARDS``.
"""

from __future__ import annotations

from typing import Final

from pytest_gpuperf import Gpuperf
from pytest_gpuperf.measuring import format_bytes

from .workloads import WORKLOADS

#: Checkpointing must cut the step's peak memory by at least this fraction. The stack keeps
#: 5 activations of the block width per block without it and 1 with it, so the activation
#: part falls about 80%; weights' gradients are the same in both.
MIN_MEMORY_SAVING: Final = 0.2
#: One recomputed forward, with room for checkpointing's own bookkeeping.
MAX_EXTRA_FORWARDS: Final = 1.5
#: Three steps per round: a longer cap than the suite's default gives enough rounds for the CI.
SAMPLING: Final = {"max_time": "4 s"}


def test_checkpoint_memory_and_overhead(gpuperf: Gpuperf) -> None:
    steps = {
        name: WORKLOADS[workload].build(gpuperf.device, gpuperf.size)
        for name, workload in (
            ("full", "stack_train"),
            ("checkpointed", "stack_train_checkpointed"),
            ("forward", "stack_forward"),
        )
    }
    rounds = gpuperf.paired(steps, record=["full", "checkpointed"])
    for name in ("full", "checkpointed"):
        check = steps[name].check
        assert check is not None
        check()
    full, ckpt = rounds.measurements["full"], rounds.measurements["checkpointed"]
    if full.peak_memory is None or ckpt.peak_memory is None:
        # memory_method says why: "off" (--gpuperf-memory=off), or "unknown: ..." (MPS has no peak statistic).
        why = "; ".join(f"{m.name}: {m.memory_method}" for m in (full, ckpt) if m.peak_memory is None)
        gpuperf.note(f"the memory saving is not checked: no peak memory ({why})")
    elif full.peak_memory == 0:
        gpuperf.note("the memory saving is not checked: the full step's peak memory is 0 B")
    else:
        saving = 1.0 - ckpt.peak_memory / full.peak_memory
        gpuperf.note(
            f"peak memory {format_bytes(full.peak_memory)} -> {format_bytes(ckpt.peak_memory)} "
            f"({saving:.0%} saved, {ckpt.memory_method})"
        )
        # The allocator's peak is deterministic for a fixed step, so a plain comparison is sound here.
        assert saving >= MIN_MEMORY_SAVING, (
            f"checkpointing saved {saving:.0%} of the step's peak memory "
            f"({format_bytes(full.peak_memory)} -> {format_bytes(ckpt.peak_memory)}); "
            f"expected at least {MIN_MEMORY_SAVING:.0%}"
        )
    overhead = rounds.per_round(
        "time of the checkpointed step / the full step", lambda t: t["checkpointed"] / t["full"]
    )
    gpuperf.note(str(overhead))
    extra = rounds.per_round(
        "extra time of the checkpointed step, in forward passes",
        lambda t: (t["checkpointed"] - t["full"]) / t["forward"],
    )
    gpuperf.expect(extra, at_most=MAX_EXTRA_FORWARDS, record="checkpointed")
