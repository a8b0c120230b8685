"""Gradient checkpointing: memory saved and time paid, against the same stack without it.

The stack is made of expansion blocks (``x + W2 relu(W1 x)``, inner width 4x), each
checkpointed with ``use_reentrant=False``: the wide inner activation is what
checkpointing frees. (Checkpointing each Linear+ReLU alone frees nothing: its
boundaries are exactly what autograd keeps anyway.) Memory is the plugin's: on CUDA the
saving is judged on the step's high-water mark (``max_memory_allocated``: weights,
gradients, Adam's state and the batch included, the same in both steps, so the fraction
saved is smaller than the activations' alone); on a CPU, whose only absolute figure is the
whole process's RSS (torch's libraries, the C allocator's kept pages: no figure of the step),
on the transient part (torch's CPU allocator's growth above the call's start, which the
resident state is no part of); on MPS nothing is known and the saving is not checked.

Time: checkpointing recomputes each block's forward during backward, so its step
costs about one extra forward pass. The extra time, in units of a forward pass timed
in the same rounds, must stay under ``MAX_EXTRA_FORWARDS``.
"""

from __future__ import annotations

from typing import Final

from pytest_gpuperf import Gpuperf
from pytest_gpuperf.measuring import Measurement, format_bytes

from .workloads import WORKLOADS

#: Checkpointing must cut the step's memory by at least this fraction. The stack keeps
#: 5 activations of the block width per block without it and 1 with it, so the activation
#: part falls about 80%; weights, their gradients and Adam's state are the same in both (in
#: the high-water mark: 45% of the full step's at the small size on a CPU, about 30% at medium and large).
MIN_MEMORY_SAVING: Final = 0.2
#: One recomputed forward, with room for checkpointing's own bookkeeping.
MAX_EXTRA_FORWARDS: Final = 1.5
#: Three steps per round: a longer cap than the suite's default gives enough rounds for the CI.
SAMPLING: Final = {"max_time": "4 s"}


HIGH_WATER: Final = "peak memory (high-water mark)"
TRANSIENT: Final = "transient memory (growth above the call's start)"


def _judged_memory(m: Measurement) -> tuple[int | None, str]:
    """The figure the saving is judged on and its name: the high-water mark of the step's allocations where the
    device gives one, else (a CPU) the transient part; None and why where neither is known."""
    memory = m.memory
    if memory.peak is not None and not memory.process_peak:
        return memory.peak, HIGH_WATER
    if memory.transient is not None:
        return memory.transient, TRANSIENT
    return None, memory.transient_method if memory.transient_method.startswith("unknown") else memory.method


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
    figures = {m.name: _judged_memory(m) for m in (full, ckpt)}
    (before, what), (after, _) = figures[full.name], figures[ckpt.name]
    if before is None or after is None:
        # memory.method says why: "off" (--gpuperf-memory=off), or "unknown: ..." (MPS has no peak statistic).
        why = "; ".join(f"{name}: {reason}" for name, (n, reason) in figures.items() if n is None)
        gpuperf.note(f"the memory saving is not checked: no figure of the step's memory ({why})")
    elif before == 0:
        gpuperf.note(f"the memory saving is not checked: the full step's {what} is 0 B")
    else:
        saving = 1.0 - after / before
        gpuperf.note(
            f"{what} {format_bytes(before)} -> {format_bytes(after)} "
            f"({saving:.0%} saved, {ckpt.memory.method if what == HIGH_WATER else ckpt.memory.transient_method})"
        )
        # The allocator's figures are deterministic for a fixed step, so a plain comparison is sound here.
        assert saving >= MIN_MEMORY_SAVING, (
            f"checkpointing saved {saving:.0%} of the step's {what} "
            f"({format_bytes(before)} -> {format_bytes(after)}); expected at least {MIN_MEMORY_SAVING:.0%}"
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
