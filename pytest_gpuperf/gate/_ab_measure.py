"""``ab``'s measuring: build each side's step, decide what can be compared, time both in paired rounds.

A side that lacks a workload, or cannot build it, makes the row *new* or *missing*; work
per step without an unchanged unit makes it *incomparable*. Otherwise base's and head's
steps are rebuilt before every round and timed in an order drawn at random, reversed in the
next round (``measuring.measure_paired``), and the ratio head/base of the rounds is judged by the
gate's rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..measuring import (
    Backend,
    DeviceSlot,
    Estimate,
    MeasureSettings,
    Paired,
    Step,
    WorkloadUnsupported,
    measure_paired,
    median,
    values,
)
from ._compare import PairedRounds, Row, with_work
from ._evidence import work_difference
from ._rule import detectable, reason_for, seconds_to_see, short_of_goal, tolerance_for, verdict_for
from ._verdicts import Verdict

__all__ = ["Bench", "compare_workload", "measure_again"]


@dataclass(frozen=True)
class Bench:
    """Where and how every workload is measured."""

    slot: DeviceSlot
    backend: Backend
    size: str
    settings: MeasureSettings
    tolerance: values.Tolerance
    #: ``ab --detect``: the change every row's rounds should see (rounds run until they can, or to the cap)
    detect: float | None = None

    @property
    def device(self) -> Any:
        import torch

        return torch.device(self.slot.id)


def _try_build(workload: Any, bench: Bench) -> Step | str:
    """A working step (built and called once), or why not (``unsupported: ...`` / ``failed: ...``)."""
    why = workload.why_unsupported(bench.device) if callable(getattr(workload, "why_unsupported", None)) else None
    if why:
        return f"unsupported on {bench.slot.id}: {why}"
    try:
        step = workload.build(bench.device, bench.size)
        if not isinstance(step, Step):
            return f"failed: build returned {type(step).__name__}, not a pytest_gpuperf.Step"
        step.fn()
    except WorkloadUnsupported as exc:
        return f"unsupported on {bench.slot.id}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a broken build is a verdict of that side, not a crash of the gate
        return f"failed: {type(exc).__name__}: {exc}"
    return step


def _row(name: str, bench: Bench, verdict: Verdict, reason: str, **more: Any) -> Row:
    tolerance = tolerance_for(bench.tolerance, more.get("estimate"))
    auto = isinstance(bench.tolerance, values.AutoTolerance)
    return Row(name, name, bench.slot.id, verdict, reason, tolerance=tolerance, auto_tolerance=auto, **more)


def _one_sided(name: str, bench: Bench, base: Step | str | None, head: Step | str | None) -> Row | str:
    """The row, or why the workload is skipped, when one side lacks the workload or cannot build it."""
    if isinstance(head, Step):
        return _row(name, bench, Verdict.NEW, "not in base" if base is None else f"base's build {base}")
    if isinstance(base, Step):
        return _row(name, bench, Verdict.MISSING, "not in head" if head is None else f"head's build {head}")
    return f"head's build {head}" if head is not None else f"base's build {base}"


def compare_workload(name: str, base: Any, head: Any, bench: Bench) -> Row | str:
    """One workload's row, or why it was skipped (unsupported on the device on both sides, ...)."""
    base_step = None if base is None else _try_build(base, bench)
    head_step = None if head is None else _try_build(head, bench)
    if not (isinstance(base_step, Step) and isinstance(head_step, Step)):
        return _one_sided(name, bench, base_step, head_step)
    base_work, head_work = dict(base_step.work), dict(head_step.work)
    comparable, difference = work_difference(base_work, head_work)
    if not comparable:
        reason = f"{difference}: another workload, not a slower one (give it a new name)"
        return _row(name, bench, Verdict.INCOMPARABLE, reason)
    del base_step, head_step  # every round builds afresh from here on
    return _measure(name, base, head, bench, (base_work, head_work), difference)


def _paired(base: Any, head: Any, bench: Bench) -> Paired | str:
    """Base's and head's steps, each rebuilt every round, timed in paired rounds; or why measuring failed."""
    device, size = bench.device, bench.size
    factories = {"base": lambda: base.build(device, size), "head": lambda: head.build(device, size)}
    try:
        return measure_paired(factories, bench.backend, bench.settings, device=bench.slot.id)
    except Exception as exc:  # noqa: BLE001 - reported as this workload's (or build's) verdict, the others still run
        return f"measuring failed: {type(exc).__name__}: {exc}"


def measure_again(name: str, base: Any, head: Any, bench: Bench) -> Paired | str:
    """One more set of paired rounds of the workload (``ab``'s confirmation, with freshly imported workloads), or
    why it could not be measured."""
    for side, workload in (("base", base), ("head", head)):
        if not isinstance(step := None if workload is None else _try_build(workload, bench), Step):
            return f"{side}'s build {step or 'is missing'}"
    return _paired(base, head, bench)


def _measure(
    name: str,
    base: Any,
    head: Any,
    bench: Bench,
    work: tuple[Mapping[str, float], Mapping[str, float]],
    difference: str,
) -> Row:
    paired = _paired(base, head, bench)
    if isinstance(paired, str):
        return _row(name, bench, Verdict.MISSING, paired)
    ratio = paired.time_ratio("head", "base")
    tolerance = tolerance_for(bench.tolerance, ratio)
    verdict = verdict_for(ratio, tolerance)
    noise = ratio.rounds
    auto = isinstance(bench.tolerance, values.AutoTolerance)
    reason = reason_for(verdict, ratio, tolerance, noise=noise, remedy="raise --max-time", auto=auto)
    rounds = _rounds(paired, work)
    if bench.detect is not None:
        reason += _short_of_goal(ratio, bench.detect, rounds.seconds)
    baseline, current = median(rounds.base), median(rounds.head)
    row = _row(
        name,
        bench,
        verdict,
        reason + (f"; {difference}" if difference else ""),
        baseline=baseline,
        current=current,
        estimate=ratio,
        base_runs=1,
        head_runs=1,
        base_total=1,
        head_total=1,
        base_rounds=ratio.count,
        head_rounds=ratio.count,
        paired=rounds,
    )
    # The head's time as the paired ratio has it (a median of the rounds' ratios, not the ratio of the sides'
    # medians, which the load can move apart): the slowdown explained is the one the verdict judged.
    sides = paired.measurements
    return with_work(row, [sides["base"]], [sides["head"]], baseline * ratio.value)


def _short_of_goal(ratio: Estimate, goal: float, seconds: float) -> str:
    """``ab --detect``: where the rounds stopped short of seeing ``goal``, what they saw and the time it would
    need ('' where they see it)."""
    seen = detectable(ratio)
    if seen is None:
        return short_of_goal(seen, goal, "raise --max-time")
    return short_of_goal(
        seen, goal, f"about {seconds_to_see(seen, goal, seconds):.3g} s of rounds would reach it (--max-time)"
    )


def _rounds(paired: Paired, work: tuple[Mapping[str, float], Mapping[str, float]]) -> PairedRounds:
    measured = paired.measurements["head"]
    return PairedRounds(
        tuple(paired.times["base"]),
        tuple(paired.times["head"]),
        dict(work[0]),
        dict(work[1]),
        measured.iterations,
        measured.sampling_seconds,
        measured.stop_reason,
        dict(paired.measurements),
    )
