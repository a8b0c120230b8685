"""The evidence model: what one record's runs and rounds contribute to a comparison, and what is left out.

The rule it implements (runs as the unit of evidence, the low median of a run's rounds,
disturbed and outlying runs left out, a side's median SM clock over the runs it keeps) is
stated once, in ``docs/how-the-gate-decides.md``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from ..measuring import ClockSummary, Load, median, median_ci
from ..results import RECORD_KEYS, Record, Round, disturbed_by
from ._rule import OUTLIER_FLOORS

__all__ = [
    "RunSamples",
    "RunValue",
    "Side",
    "SideClocks",
    "disturbed",
    "record_mismatches",
    "run_samples",
    "runs_of",
    "select",
    "unrecorded",
    "work_difference",
]


def _within_variance(low: float, high: float, confidence: float) -> float:
    """Variance of log(median) from a run's own order-statistic interval (a lower bound: samples correlate)."""
    if low <= 0 or high <= 0 or not 0 < confidence < 1:
        return math.inf
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    return ((math.log(high) - math.log(low)) / (2.0 * z)) ** 2


def work_difference(base: Mapping[str, float], head: Mapping[str, float]) -> tuple[bool, str]:
    """May two steps' times per call be compared, and how does their work differ ("" when it does not)?

    Equal work compares. So does work that keeps at least one unit unchanged: the same
    samples per step with more FLOP counted is the same task grown costlier, the very
    regression a gate is for, judged per unchanged unit. Work without an unchanged unit
    (a matmul of another size) is another workload: incomparable.
    """
    units = [*base, *(u for u in head if u not in base)]
    changed = [u for u in units if base.get(u) != head.get(u)]
    if not changed:
        return True, ""

    def amount(work: Mapping[str, float], unit: str) -> str:
        return f"{work[unit]:.4g}" if unit in work else "none"

    text = ", ".join(f"{u} {amount(base, u)} -> {amount(head, u)}" for u in changed)
    same = [u for u in units if u not in changed]
    if same:
        return True, f"work per call differs ({text}); compared per {', '.join(same)}"
    return False, f"work per call differs ({text})"


def _record_view(record: Record) -> dict[str, object]:
    m = record.measurement
    return {
        "device_name": m.device_name,
        "threads": m.threads,
        "mode": m.mode,
        "params": dict(record.params),
        "work": dict(m.work),
        "sample": m.sample_kind,
    }


#: RECORD_KEYS that a record read from pytest-benchmark's JSON does not have (``results/_pytest_benchmark.py``).
UNRECORDED: frozenset[str] = frozenset({"device_name", "threads", "work", "sample"})


def unrecorded(record: Record) -> frozenset[str]:
    """The RECORD_KEYS that ``record`` does not know: UNRECORDED for one read from pytest-benchmark, else none."""
    return UNRECORDED if record.metadata.get("source") == "pytest-benchmark" else frozenset()


def record_mismatches(base: Record, head: Record, allow: Collection[str]) -> list[str]:
    """Blocking differences between two records of one test, as 'what base -> head' texts."""
    a, b = _record_view(base), _record_view(head)
    out = []
    for key in RECORD_KEYS:
        if key == "work" and work_difference(base.measurement.work, head.measurement.work)[0]:
            continue
        if key in unrecorded(base):
            continue  # a fact the tool that wrote the baseline does not record is no difference
        if a[key] != b[key] and key not in allow and "all" not in allow:
            out.append(f"{key} {a[key]} -> {b[key]}")
    return out


def disturbed(record: Record) -> bool:
    """Was the record's (first) measurement made while other processes took the cores it needs?"""
    return disturbed_by(record, record.evidence.load)


@dataclass(frozen=True)
class Observation:
    """One round of one record: what the comparison uses of it."""

    log_median: float
    within: float
    disturbed: bool
    load: Load | None
    #: the round's median SM clock (None: no clock reading)
    sm_clock_mhz: float | None = None


def _observation(record: Record, round_: Round) -> Observation | None:
    """One round from its raw samples (seconds per call) and load; None without usable samples."""
    values = [x for x in round_.samples if x > 0]
    if not values:
        return None
    ci = median_ci(values, record.measurement.confidence)
    return Observation(
        math.log(median(values)),
        _within_variance(ci.low, ci.high, ci.confidence),
        disturbed_by(record, round_.load),
        round_.load,
        None if round_.clocks is None else round_.clocks.sm_clock_mhz_median,
    )


@dataclass(frozen=True)
class RunValue:
    """One run (session) of one record, from its rounds: the unit of evidence."""

    value: float  # log seconds per call
    within: float  # variance of ``value`` from the chosen round's own samples
    rounds: int
    disturbed: bool  # every round was measured while busy
    load: Load | None  # the worst disturbed round's load, for the message
    #: NVML's clocks over each of the run's rounds that has them (none without NVML)
    clocks: tuple[ClockSummary, ...] = ()
    #: the median SM clock of the round ``value`` comes from (None: it has no clock reading)
    sm_clock_mhz: float | None = None


def _run_value(obs: Sequence[Observation], clocks: tuple[ClockSummary, ...]) -> RunValue:
    """The low median of the run's undisturbed rounds: a transient only ever slows a round."""
    calm = [o for o in obs if not o.disturbed]
    pool = sorted(calm or obs, key=lambda o: o.log_median)
    # The rounds' spread is transients, which the low median already ignores; the round it picks carries
    # its own uncertainty, and the spread between runs is estimated across runs.
    chosen = pool[(len(pool) - 1) // 2]
    loads = [o.load for o in obs if o.disturbed and o.load is not None]
    worst = max(loads, key=lambda load: load.background_cores) if loads else None
    return RunValue(chosen.log_median, chosen.within, len(obs), not calm, worst, clocks, chosen.sm_clock_mhz)


def _rounds_value(record: Record, rounds: Sequence[Round]) -> RunValue | None:
    obs = [o for o in (_observation(record, r) for r in rounds) if o is not None]
    if not obs:
        return None
    return _run_value(obs, tuple(r.clocks for r in rounds if r.clocks is not None))


def _rounds_of(record: Record) -> list[Sequence[Round]]:
    """The rounds of each of the record's runs: its own (its measurement, then its rounds), then its confirmation
    runs in fresh processes."""
    evidence = record.evidence
    return [[evidence.first_round(record.measurement), *evidence.rounds], *(rerun.rounds for rerun in evidence.runs)]


def runs_of(record: Record) -> list[RunValue]:
    """The record's own run (its measurement, then its rounds), then its confirmation runs in fresh processes."""
    values = [_rounds_value(record, rounds) for rounds in _rounds_of(record)]
    return [v for v in values if v is not None]


@dataclass(frozen=True)
class SideClocks:
    """A side's GPU clocks over its kept runs: the median of their median SM clocks, the samples flagged
    throttled, and the reasons seen."""

    sm_clock_mhz: float
    throttled: int
    readings: int
    #: the clocks-event reasons seen in any reading, but ``gpu_idle`` (read between blocks, it explains nothing)
    reasons: tuple[str, ...]

    def describe(self) -> str:
        """The median clock, and the flagged samples and reasons where there are any: for a verdict's reason."""
        text = f"{self.sm_clock_mhz:.0f} MHz"
        extra = [f"{self.throttled} of {self.readings} samples throttled"] if self.throttled else []
        extra += [f"seen: {', '.join(self.reasons)}"] if self.reasons else []
        return text + (f" ({'; '.join(extra)})" if extra else "")


def _clocks_of(runs: Sequence[RunValue]) -> SideClocks | None:
    """The clocks over ``runs``; None unless every one has an SM clock (a ratio from some runs would not be
    the estimate's)."""
    if not runs or any(r.sm_clock_mhz is None for r in runs):
        return None
    summaries = [c for r in runs for c in r.clocks]
    reasons: list[str] = []
    for summary in summaries:
        reasons += [r for r in summary.reasons if r != "gpu_idle" and r not in reasons]
    return SideClocks(
        median([r.sm_clock_mhz or 0.0 for r in runs]),
        sum(c.throttled for c in summaries),
        sum(c.readings for c in summaries),
        tuple(reasons),
    )


@dataclass(frozen=True)
class Side:
    """One side's runs after selection: those kept, how many there were, and whether all were busy."""

    kept: list[RunValue]
    total: int
    all_busy: bool
    busy_text: str
    #: runs left out as disturbed (while undisturbed ones exist), and as far slower than the side's low median run
    disturbed_out: int = 0
    outliers: int = 0

    @property
    def rounds(self) -> int:
        return sum(s.rounds for s in self.kept)

    @property
    def clocks(self) -> SideClocks | None:
        """The GPU's clocks over the kept runs (None: a kept run has no SM clock reading)."""
        return _clocks_of(self.kept)

    @property
    def clocked_values(self) -> list[float] | None:
        """log(seconds per call x median SM clock in MHz) of each kept run, the cycles per call but for a constant,
        as nvbench's robust compare normalises; None without an SM clock for every kept run."""
        if self.clocks is None:
            return None
        return [s.value + math.log(s.sm_clock_mhz or 1.0) for s in self.kept]


def select(runs: Sequence[RunValue], noise_floor: float) -> Side:
    """Undisturbed runs if any, then without runs far slower than the low median run."""
    calm = [s for s in runs if not s.disturbed]
    pool = calm or list(runs)
    anchor = sorted(s.value for s in pool)[(len(pool) - 1) // 2]
    limit = anchor + math.log1p(OUTLIER_FLOORS * noise_floor)
    kept = [s for s in pool if s.value <= limit]
    loads = [s.load for s in runs if s.load is not None]
    busy = ""
    if loads:
        worst = max(loads, key=lambda load: load.background_cores)
        busy = f"other processes used {worst.background_cores:.1f} of {worst.cpus} CPUs"
    return Side(kept, len(runs), not calm, busy, len(runs) - len(pool), len(pool) - len(kept))


@dataclass(frozen=True)
class RunSamples:
    """One run of one record as a picture of it shows it: every sample of its rounds, and whether ``select``
    kept it."""

    samples: tuple[float, ...]  # seconds per call, every round's
    #: "" kept; else why it was left out: "disturbed", "far slower than the rest"
    left_out: str
    confirmation: bool  # measured again in a fresh process (``--gpuperf-confirm``)


def run_samples(records: Sequence[Record], noise_floor: float) -> list[RunSamples]:
    """Every run of ``records`` (one side of a comparison), each with its samples and ``select``'s decision on it:
    the runs the gate kept, and those it left out, that a plot should draw apart."""
    runs: list[tuple[RunValue, tuple[float, ...], bool]] = []
    for record in records:
        for index, rounds in enumerate(_rounds_of(record)):
            value = _rounds_value(record, rounds)
            if value is not None:
                runs.append((value, tuple(x for r in rounds for x in r.samples), index > 0))
    if not runs:
        return []
    side = select([value for value, _, _ in runs], noise_floor)
    kept = {id(value) for value in side.kept}
    calm = any(not value.disturbed for value, _, _ in runs)

    def why(value: RunValue) -> str:
        if id(value) in kept:
            return ""
        return "disturbed" if calm and value.disturbed else "far slower than the rest"

    return [RunSamples(samples, why(value), confirmation) for value, samples, confirmation in runs]
