"""Throughput against batch size: the MLP and CNN fp32 training steps over a doubling ladder of batches.

The ladder (``suites/workloads/batch_scaling.py``: ``BATCH_LADDER``) doubles the batch from a small one. On
CUDA it climbs until the step runs out of memory, the next rung would need more than the
device has (twice the last rung's peak memory: its high-water mark, ``max_memory_allocated``
with the weights, gradients, optimizer state and batch resident at the call's start; every
part of it grows at most in proportion to the batch, so twice it bounds the next rung's), or
``BATCH_LADDER_CUDA_MAX``; on a CPU it
stops at the small preset's batch, for time. Out of memory stops the ladder cleanly: the
rung's references are dropped, garbage collected and CUDA's cached blocks returned before
anything else runs, so nothing leaks into the next rung or test.

Each rung is measured alone (one rung in memory at a time: on CUDA the ladder runs up to
the memory limit, so the rungs cannot be paired) and recorded as ``batch=N``: the results
table holds the batch's samples/s and memory (the "peak mem" cell: on CUDA the high-water
mark, on a CPU the transient part and the process's RSS), and a note lists the ladder.

Asserted (``judge``): on the way up to saturation, throughput does not fall by more than the
noise. Precisely, with each rung's throughput median and interval:

- the ladder saturates at the first rung whose median reaches ``SATURATED`` of the ladder's
  best median; rungs from there on are the plateau, and a fall there (a batch that leaves
  the CPU's caches, a memory-bound kernel) is reported, not asserted: it depends on the device;
- a rung before saturation falls when its whole interval lies more than ``MAX_FALL`` below the
  whole interval of the best rung before it (its high end < (1 - ``MAX_FALL``) x the best
  one's low end). The two were measured one after the other, and a change of load between
  them is invisible to their intervals (on a shared 2-vCPU runner it halved a rung), so a
  fall is judged again in interleaved rounds of the two rungs (``confirm_fall``), which a
  change of load reaches alike: the test fails when their throughput ratio is below
  1 - ``MAX_FALL`` beyond its interval, and warns when the rounds cannot tell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import pytest

from pytest_gpuperf import Gpuperf
from pytest_gpuperf.measuring import Step, format_bytes, format_rate

# The plugin's own out-of-memory test and release (what it does after a test that ran out of memory).
from pytest_gpuperf.plugin import is_out_of_memory, release_failed_test_memory

from .workloads import BATCH_LADDER, BATCH_LADDER_CUDA_MAX, batch_step

#: The ladder saturates at the first rung whose median throughput reaches this fraction of the best median.
SATURATED: Final = 0.9
#: Before saturation, a rung whose interval lies more than this fraction below the best earlier rung's fails.
MAX_FALL: Final = 0.1
#: Rungs are measured one after the other: a short cap each keeps the CPU ladder to a few seconds.
SAMPLING: Final = {"max_time": "0.4 s", "warmup_time": "0.15 s"}


@dataclass(frozen=True)
class Rung:
    """One batch size of the ladder: throughput median and interval (work/s), the step's high-water mark where the
    device's allocator gives one (CUDA; None on a CPU, whose absolute figure is the whole process's), and its
    memory as the results table shows it."""

    batch: int
    median: float
    low: float
    high: float
    peak_memory: int | None = None
    memory: str = "-"


@dataclass(frozen=True)
class Verdict:
    #: index of the first rung of the plateau (None: no rungs)
    saturation: int | None
    #: what failed, or None
    failure: str | None
    #: the failure's two rungs (indices): the best one before it and the one that fell
    fell: tuple[int, int] | None = None


def ladder(first: int, last: int) -> list[int]:
    """``first``, 2 ``first``, 4 ``first`` ... up to ``last`` inclusive."""
    if first < 1 or last < first:
        raise ValueError(f"batch ladder from {first} to {last}: give 1 <= first <= last")
    out = [first]
    while out[-1] * 2 <= last:
        out.append(out[-1] * 2)
    return out


def judge(rungs: Sequence[Rung], unit: str = "samples") -> Verdict:
    """Find where the ladder saturates and whether a rung before it fell beyond the noise (module docstring)."""
    if not rungs:
        return Verdict(None, None)
    best = max(r.median for r in rungs)
    saturation = next(i for i, r in enumerate(rungs) if r.median >= SATURATED * best)
    for k in range(1, saturation):
        before = max(rungs[:k], key=lambda r: r.median)
        rung = rungs[k]
        if rung.high < (1 - MAX_FALL) * before.low:
            return Verdict(
                saturation,
                f"throughput fell as the batch grew, before saturating: batch {rung.batch} "
                f"{format_rate(rung.median, unit)} "
                f"(CI [{format_rate(rung.low, unit)}, {format_rate(rung.high, unit)}]) "
                f"against batch {before.batch} {format_rate(before.median, unit)} "
                f"(CI [{format_rate(before.low, unit)}, {format_rate(before.high, unit)}]): more than "
                f"{MAX_FALL:.0%} below beyond both intervals; the ladder saturates at batch "
                f"{rungs[saturation].batch} ({SATURATED:.0%} of the best, {format_rate(best, unit)})",
                (rungs.index(before), k),
            )
    return Verdict(saturation, None)


def climb(
    batches: Sequence[int],
    run: Callable[[int], Rung],
    *,
    memory_limit: int | None = None,
    release: Callable[[], None] = release_failed_test_memory,
) -> tuple[list[Rung], str]:
    """Run ``run`` at each batch until one runs out of memory or the next would need more than ``memory_limit``
    (twice the last rung's peak); memory is released after every rung. Returns the rungs and why the ladder ended.
    """
    rungs: list[Rung] = []
    stop = f"the ladder's last batch, {batches[-1]}" if batches else "no batches"
    for batch in batches:
        if memory_limit is not None and rungs and rungs[-1].peak_memory is not None:
            need = 2 * rungs[-1].peak_memory
            if need > memory_limit:
                stop = (
                    f"batch {batch} would need up to {format_bytes(need)} (twice batch {rungs[-1].batch}'s peak "
                    f"memory, its high-water mark), more than the device's {format_bytes(memory_limit)}"
                )
                break
        oom: str | None = None
        try:
            rungs.append(run(batch))
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            oom = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            # ``exc`` (and with it the traceback holding the rung's tensors) is dropped when this block ends.
        release()
        if oom is not None:
            stop = f"batch {batch} ran out of memory ({oom})"
            break
    return rungs, stop


def _measure_rung(gpuperf: Gpuperf, unit: str, step: Step, batch: int) -> Rung:
    m = gpuperf.measure(step.fn, name=f"batch={batch}", work=step.work, params={"size": gpuperf.size, **step.params})
    assert step.check is not None
    step.check()  # loss finite and falling, the optimizer stepped
    low, high = m.throughput_ci(unit)
    peak = None if m.memory.process_peak else m.memory.peak
    return Rung(batch, m.throughput(unit).value, low.value, high.value, peak, m.memory.cell)


def confirm_fall(gpuperf: Gpuperf, unit: str, build: Callable[[int], Step], before: int, fallen: int) -> None:
    """A fall seen between two rungs measured apart, judged again in interleaved rounds of the two (a change of load
    then reaches both): fails when the fallen rung's throughput is below ``1 - MAX_FALL`` of the earlier one's
    beyond its interval, warns when the rounds cannot tell, passes otherwise. The two fit in memory together:
    the ladder went on past the fallen rung, so twice its peak fitted."""
    a, b = f"batch={before}", f"batch={fallen}"
    rounds = gpuperf.paired({a: build(before), b: build(fallen)}, record=[])
    gpuperf.expect(rounds.throughput_ratio(b, a, unit), at_least=1 - MAX_FALL)


def run_ladder(gpuperf: Gpuperf, model: str, unit: str, first: int, last: int, build: Callable[[int], Step]) -> None:
    """Climb the ladder of ``build(batch)`` steps, note each rung, and judge it; a fall is confirmed in paired rounds
    (``confirm_fall``) before it fails the test."""
    memory_limit: int | None = None
    if gpuperf.device.type == "cuda":
        last = BATCH_LADDER_CUDA_MAX
        memory = gpuperf.backend.describe().get("memory_bytes")
        memory_limit = memory if isinstance(memory, int) else None
    rungs, stop = climb(
        ladder(first, last), lambda batch: _measure_rung(gpuperf, unit, build(batch), batch), memory_limit=memory_limit
    )
    if not rungs:
        pytest.fail(f"{model}: no batch of the ladder ran: {stop}")
    for rung in rungs:
        gpuperf.note(
            f"{model} batch {rung.batch:>6}: {format_rate(rung.median, unit):>18} "
            f"(CI [{format_rate(rung.low, unit)}, {format_rate(rung.high, unit)}]), memory {rung.memory}"
        )
    verdict = judge(rungs, unit)
    assert verdict.saturation is not None
    gpuperf.note(
        f"{model}: the ladder ended at batch {rungs[-1].batch}: {stop}; saturates at batch "
        f"{rungs[verdict.saturation].batch}; later rungs reported, not asserted "
        "(cache and memory effects vary by device)"
    )
    if verdict.fell is not None:
        before, fallen = (rungs[i].batch for i in verdict.fell)
        gpuperf.note(f"{model}: {verdict.failure}; confirming in interleaved rounds of batch {before} and {fallen}")
        confirm_fall(gpuperf, unit, build, before, fallen)


@pytest.mark.parametrize("model", list(BATCH_LADDER))
def test_batch_scaling(gpuperf: Gpuperf, model: str) -> None:
    unit = "images" if model == "cnn" else "samples"
    first, last = BATCH_LADDER[model]
    run_ladder(gpuperf, model, unit, first, last, lambda batch: batch_step(model, gpuperf.device, batch))
