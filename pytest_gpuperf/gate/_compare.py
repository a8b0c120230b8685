"""The gate's one result type, and the stored-baseline comparison that fills it from saved runs.

``compare_runs`` judges every record of the current runs against the baseline's
(``pytest --gpuperf-compare`` and ``pytest-gpuperf compare``); ``pytest-gpuperf ab``
fills the same ``GateResult`` from paired rounds. The rule is in ``_rule.py`` and the
evidence model in ``_evidence.py``; ``docs/how-the-gate-decides.md`` states both. What
else than the code may explain a change (the machine's load, the GPU's clocks) is weighed
here, once, after the rule (``_other_cause``). Beside the time ratio each row carries the
clock-normalised ratio (time x SM clock, nvbench's robust compare) where both sides read the GPU's
clocks: a slowdown is put down to the clocks only where that ratio shows no slowdown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..measuring import (
    Change,
    Estimate,
    Measurement,
    MemoryChange,
    WorkComparison,
    WorkProfile,
    counted,
    profiles_of,
    readings,
    values,
)
from ..results import Record, Run, blocking_differences, differences, short_test
from ._evidence import (
    RunSamples,
    Side,
    record_mismatches,
    run_samples,
    runs_of,
    select,
    unrecorded,
    work_difference,
)
from ._rule import (
    DEFAULT_TOLERANCE,
    Policy,
    detectable,
    estimate,
    percent,
    reason_for,
    short_of_goal,
    tolerance_for,
    verdict_for,
)
from ._verdicts import NOT_COMPARED, Verdict, work_fail_on
from ._why import Attribution, why_for

__all__ = [
    "BaselineNoise",
    "GateResult",
    "PairedRounds",
    "Row",
    "baseline_noise",
    "compare_runs",
    "count_verdicts",
    "row_runs",
    "same_work",
    "with_work",
]


@dataclass(frozen=True)
class PairedRounds:
    """What ``ab`` keeps of a workload's paired rounds: per-call seconds of each round, index i the same round."""

    base: tuple[float, ...]
    head: tuple[float, ...]
    base_work: Mapping[str, float]
    head_work: Mapping[str, float]
    iterations: int
    seconds: float
    stop_reason: str
    #: each side's measurement of the rounds (its readings: the counts, the peak memory), which ``ab``'s
    #: confirmation compares again beside its fresh builds'
    measured: Mapping[str, Measurement] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    """One benchmark's verdict, for the table, the JSON and the exit status (every route)."""

    key: str
    test: str
    device: str
    verdict: Verdict
    reason: str
    baseline: float | None = None  # seconds per call
    current: float | None = None
    estimate: Estimate | None = None
    #: the row's tolerance: the one given, or under ``auto`` (``auto_tolerance``) what its evidence can see
    tolerance: float = DEFAULT_TOLERANCE
    auto_tolerance: bool = False
    base_runs: int = 0  # runs used on each side, of how many (some may be left out: disturbed, outliers)
    head_runs: int = 0
    base_total: int = 0
    head_total: int = 0
    base_rounds: int = 0  # rounds in the runs used (a run's extra and paired rounds count inside it)
    head_rounds: int = 0
    paired: PairedRounds | None = None
    #: what, instead of the code, may explain the change: "busy" (the machine's load) or "throttled" (the GPU's
    #: clocks), with an unattributed or inconclusive verdict from that rule; "" otherwise
    cause: str = ""
    #: the ratio of time x SM clock current/baseline (the clocks' part taken out), and each side's median SM
    #: clock over its kept runs; None without a clock reading for every kept run on both sides
    clock_estimate: Estimate | None = None
    base_clock_mhz: float | None = None
    head_clock_mhz: float | None = None
    #: each side's work profiles (``measuring.WorkProfile``: what the step did), one per record that has one
    #: (stored route: the baseline's records and the current ones; ``ab``: one per side, from the paired rounds)
    base_profiles: tuple[WorkProfile, ...] = ()
    head_profiles: tuple[WorkProfile, ...] = ()
    #: what each reading's comparison found, whatever the verdict (``with_work``), by its ``change_key``: ``work``
    #: (the profiles' counts, compared exactly), ``memory`` (each side's peak); none where a side has no figure
    changes: Mapping[str, Change] = field(default_factory=dict)
    #: why a slower or unattributed row got slower: the ops and kernels whose time per call grew most; an
    #: inconclusive row whose counts went up: its count lines (``_why.py``)
    why: Attribution | None = None

    @property
    def detectable(self) -> float | None:
        """The smallest change, either way, this row's evidence can see at the gate's power (``detectable``); None
        where it sees none (too few rounds) or was not compared."""
        return None if self.estimate is None else detectable(self.estimate)

    @property
    def tolerance_text(self) -> str:
        """``5%``; ``3.4% (auto)`` where the row's tolerance is what it can see."""
        return percent(self.tolerance) + (" (auto)" if self.auto_tolerance else "")

    @property
    def work(self) -> WorkComparison | None:
        """What the counts of the work profiles say (``measuring.compare_work``); None where a side has none."""
        work = self.changes.get("work")
        return work if isinstance(work, WorkComparison) else None

    @property
    def memory(self) -> MemoryChange | None:
        """Each side's peak memory compared (``measuring.compare_memory``); None where a side has no gated figure."""
        memory = self.changes.get("memory")
        return memory if isinstance(memory, MemoryChange) else None

    def work_fail_on(self, fail_on: frozenset[str]) -> frozenset[str]:
        """The names that fail this row where what they name went up: those of ``fail_on``, and under ``more-work``
        every work name where the timing did not clear the row (``_verdicts.work_fail_on``); each change's lines
        say which fail."""
        return work_fail_on(fail_on, self.verdict.value)

    def work_failing(self, fail_on: frozenset[str]) -> list[str]:
        """What of the step's work went up and fails (count categories, ``memory``: ``work_fail_on``)."""
        return [name for change in self.changes.values() for name in change.failing(self.work_fail_on(fail_on))]

    def failing_on(self, fail_on: frozenset[str]) -> list[str]:
        """What of ``fail_on`` fails this row: its verdict, then what of its work went up and fails; [] if it passes."""
        verdict = [self.verdict.value] if self.verdict.value in fail_on else []
        return verdict + self.work_failing(fail_on)

    def failing_by_work(self, fail_on: frozenset[str]) -> list[str]:
        """What of its work fails a row whose verdict does not (its badge is ``more work``); [] otherwise."""
        return [] if self.verdict.value in fail_on else self.work_failing(fail_on)


@dataclass(frozen=True)
class GateResult:
    rows: list[Row]
    fail_on: frozenset[str]
    #: differences between the runs that did not block the comparison, shown under the table
    notes: list[str] = field(default_factory=list)
    #: benchmark -> why it was not compared at all (``ab``: unsupported on the device on both sides)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def failing(self) -> list[Row]:
        """Rows whose verdict fails, or whose work went up in a category that fails (``Row.failing_on``)."""
        return [r for r in self.rows if r.failing_on(self.fail_on)]

    @property
    def compared(self) -> bool:
        """Was any row compared: a verdict other than incomparable, new or missing?"""
        return any(row.verdict not in NOT_COMPARED for row in self.rows)

    @property
    def failed(self) -> bool:
        """A row fails, or nothing was compared: a gate never passes on nothing, unless nothing may fail (an empty
        ``fail_on``, ``--fail-on none``)."""
        return bool(self.failing) or (not self.compared and bool(self.fail_on))

    def counts(self) -> dict[str, int]:
        return count_verdicts(self.rows)


def count_verdicts(rows: Iterable[Row]) -> dict[str, int]:
    """How many rows got each verdict, in order of first appearance."""
    out: dict[str, int] = {}
    for row in rows:
        out[row.verdict.value] = out.get(row.verdict.value, 0) + 1
    return out


def _tolerance(records: Sequence[Record], default: values.Tolerance) -> values.Tolerance:
    """The newest record's own tolerance (its marker's), else the policy's."""
    own = records[-1].evidence.tolerance
    return default if own is None else own


def _noise_floor(records: Sequence[Record], default: float) -> float:
    """The newest record's own noise floor (its marker's), else the policy's."""
    own = records[-1].evidence.noise_floor
    return default if own is None else own


def _busy_verdict(
    verdict: Verdict, est: Estimate, clocked: Estimate | None, b: Side, h: Side, tolerance: float
) -> tuple[Verdict, str] | None:
    """Load only slows: a slowdown measured while busy cannot be told from the load (unattributed, which fails
    by default: seen, never a plain pass), and a busy baseline cannot show the absence of one."""
    if h.all_busy and verdict is Verdict.SLOWER:
        return Verdict.UNATTRIBUTED, (
            f"{est.value - 1:+.1%}: significant and over the {percent(tolerance)} tolerance, but measured while busy "
            f"({h.busy_text}), so the load may explain it; re-run on a quiet machine"
        )
    if b.all_busy and verdict in (Verdict.FASTER, Verdict.UNCHANGED):
        return Verdict.INCONCLUSIVE, (
            f"the baseline was measured while busy ({b.busy_text}); save a new baseline on a quiet machine"
        )
    return None


def _clock_estimate(b: Side, h: Side, floor: float, confidence: float) -> Estimate | None:
    """The ratio current/baseline of time x median SM clock, from the same runs as the time ratio; None without an
    SM clock for every kept run on both sides."""
    base, head = b.clocked_values, h.clocked_values
    if base is None or head is None:
        return None
    est = estimate(
        base,
        head,
        noise_floor=floor,
        base_within=[s.within for s in b.kept],
        head_within=[s.within for s in h.kept],
        confidence=confidence,
    )
    return dataclasses.replace(est, what="time x SM clock ratio current/baseline")


def _clocks_verdict(
    verdict: Verdict, est: Estimate, clocked: Estimate | None, b: Side, h: Side, tolerance: float
) -> tuple[Verdict, str] | None:
    """The GPU's clocks, judged by what they explain. A significant change is put down to the clocks only where the
    sides' median SM clocks differ the right way and the clock-normalised ratio (time x SM clock) is back within
    the tolerance: a slowdown that the clock ratio cannot explain stays the code's, whatever the throttle reasons,
    and a power cap or locked clocks on both sides give equal clocks and change nothing. Without clock data on
    both sides: nothing."""
    bc, hc = b.clocks, h.clocks
    if clocked is None or bc is None or hc is None:
        return None
    change, per_cycle = f"{est.value - 1:+.1%}", f"time x SM clock {_change(clocked.value)}"
    if verdict is Verdict.SLOWER and hc.sm_clock_mhz < bc.sm_clock_mhz and clocked.value <= 1.0 + tolerance:
        return Verdict.UNATTRIBUTED, (
            f"{change}: significant and over the {percent(tolerance)} tolerance, but the GPU's median SM clock was "
            f"{hc.describe()} against the baseline's {bc.describe()}, which explains it ({per_cycle}); "
            "let the GPU cool, check its power and cooling, and re-run"
        )
    explained = verdict is Verdict.FASTER and clocked.value >= 1.0 / (1.0 + tolerance)
    hidden = verdict is Verdict.UNCHANGED and clocked.value > 1.0 + tolerance
    if bc.sm_clock_mhz < hc.sm_clock_mhz and (explained or hidden):
        return Verdict.INCONCLUSIVE, (
            f"{change}, but the baseline's GPU ran at a median SM clock of {bc.describe()} against "
            f"{hc.describe()} now ({per_cycle}), so the baseline may be slow; save a new baseline with the GPU "
            "at its usual clocks"
        )
    return None


def _change(ratio: float) -> str:
    """A ratio as a signed change, ``+0.0%`` for one that rounds to none either way."""
    text = f"{ratio - 1:+.1%}"
    return "+0.0%" if text == "-0.0%" else text


#: What else than the code may explain a change, checked in this order; the name goes to ``Row.cause``.
_OTHER_CAUSES = (("busy", _busy_verdict), ("throttled", _clocks_verdict))


def _other_cause(
    verdict: Verdict, reason: str, est: Estimate, clocked: Estimate | None, b: Side, h: Side, tolerance: float
) -> tuple[Verdict, str, str]:
    """The verdict and reason after the load and the clocks are weighed, and what the change may be due to
    instead of the code ("" when nothing: the verdict stands)."""
    for cause, rule in _OTHER_CAUSES:
        changed = rule(verdict, est, clocked, b, h, tolerance)
        if changed is not None:
            return changed[0], changed[1], cause
    return verdict, reason, ""


def _left_out(b: Side, h: Side) -> str:
    text = ""
    for why, count in (("disturbed", "disturbed_out"), ("far slower than the rest", "outliers")):
        parts = [
            f"{getattr(side, count)} of {side.total} {name} runs"
            for name, side in (("baseline", b), ("current", h))
            if getattr(side, count)
        ]
        text += f"; left out as {why}: {', '.join(parts)}" if parts else ""
    return text


def _row_for(key: str, base: list[Record], head: list[Record], policy: Policy) -> Row:
    newest = head[-1]
    given = _tolerance(head, policy.tolerance)
    floor = _noise_floor(head, policy.noise_floor)
    auto = isinstance(given, values.AutoTolerance)
    mismatches = record_mismatches(base[-1], newest, policy.allow_mismatch)
    if mismatches:
        keys = ",".join(m.split(" ", 1)[0] for m in mismatches)
        reason = "; ".join(mismatches) + f" (compare anyway: --gpuperf-allow-mismatch={keys})"
        tolerance = tolerance_for(given, None)
        return Row(
            key, newest.test, newest.device, Verdict.INCOMPARABLE, reason, tolerance=tolerance, auto_tolerance=auto
        )
    b = select([s for r in base for s in runs_of(r)], floor)
    h = select([s for r in head for s in runs_of(r)], floor)
    est = estimate(
        [s.value for s in b.kept],
        [s.value for s in h.kept],
        noise_floor=floor,
        base_within=[s.within for s in b.kept],
        head_within=[s.within for s in h.kept],
        confidence=policy.confidence,
    )
    tolerance = tolerance_for(given, est)
    verdict = verdict_for(est, tolerance)
    runs = counted(len(b.kept), "baseline run")
    noise = f"run-to-run noise {est.spread or 0.0:.1%} ({runs})"
    if len(b.kept) + len(h.kept) <= 2:  # one run a side shows no run-to-run noise: the floor's alone, assumed
        noise = f"run-to-run noise {est.spread or 0.0:.1%} assumed (the noise floor: {runs} and 1 current run)"
    reason = reason_for(verdict, est, tolerance, noise=noise, remedy="save more baseline runs", auto=auto)
    clocked = _clock_estimate(b, h, floor, policy.confidence)
    verdict, reason, cause = _other_cause(verdict, reason, est, clocked, b, h, tolerance)
    reason += _left_out(b, h)
    work_note = work_difference(base[-1].measurement.work, newest.measurement.work)[1]
    reason += f"; {work_note}" if work_note and "work" not in unrecorded(base[-1]) else ""
    baseline = math.exp(sum(s.value for s in b.kept) / len(b.kept))
    current = math.exp(sum(s.value for s in h.kept) / len(h.kept))
    row = Row(
        key,
        newest.test,
        newest.device,
        verdict,
        reason,
        baseline=baseline,
        current=current,
        estimate=est,
        tolerance=tolerance,
        auto_tolerance=auto,
        base_runs=len(b.kept),
        head_runs=len(h.kept),
        base_total=b.total,
        head_total=h.total,
        base_rounds=b.rounds,
        head_rounds=h.rounds,
        cause=cause,
        clock_estimate=clocked,
        base_clock_mhz=None if b.clocks is None else b.clocks.sm_clock_mhz,
        head_clock_mhz=None if h.clocks is None else h.clocks.sm_clock_mhz,
    )
    return with_work(row, [r.measurement for r in base], [r.measurement for r in head], current)


def with_work(row: Row, base: Sequence[Measurement], head: Sequence[Measurement], current: float) -> Row:
    """``row`` with what both sides' readings say, for every route (one Measurement per run on each side of the
    stored route; ``ab``: each side's of the paired rounds): each reading's comparison (``Row.changes``: the
    counts, the peak memory), the verdict ``same-work`` where an unattributed slowdown did the same work
    (``same_work``), and for a slower row why (``_why.py``: ``current`` is the head's time per call the verdict
    judged; an inconclusive row whose work went up, its count lines)."""
    changes = {r.change_key: c for r in readings() if r.change_key and (c := r.compare(base, head)) is not None}
    base_profiles, head_profiles = profiles_of(base), profiles_of(head)
    row = dataclasses.replace(row, changes=changes, base_profiles=base_profiles, head_profiles=head_profiles)
    verdict, reason = same_work(row.verdict, row.reason, row.work)
    more_work = row.work is not None and row.work.verdict == "more"
    why = why_for(
        verdict.value,
        base_profiles,
        head_profiles,
        row.baseline,
        current,
        interval_seconds=_interval_seconds(row),
        more_work=more_work,
    )
    return dataclasses.replace(row, verdict=verdict, reason=reason, why=why)


def _interval_seconds(row: Row) -> tuple[float, float] | None:
    """The row's interval of its change in seconds per call: the baseline's time times the ratio interval's ends,
    less one (the slowdown the why explains is the baseline's time times the ratio, less one)."""
    if row.estimate is None or row.baseline is None:
        return None
    return row.baseline * (row.estimate.low - 1), row.baseline * (row.estimate.high - 1)


def same_work(verdict: Verdict, reason: str, work: WorkComparison | None) -> tuple[Verdict, str]:
    """An unattributed slowdown whose every count is identical on both sides did the same work: the machine
    changed (its load, its clocks: the reason says which), not what the step does."""
    if verdict is not Verdict.UNATTRIBUTED or work is None or work.verdict != "same":
        return verdict, reason
    counted = f"every count identical, {work.compared} counts compared"
    return Verdict.SAME_WORK, f"the step did the same work ({counted}), the machine changed: {reason}"


def row_runs(
    base: Sequence[Record], head: Sequence[Record], policy: Policy | None = None
) -> tuple[list[RunSamples], list[RunSamples]]:
    """One benchmark's runs on each side (its records in the baseline's runs and the current ones), each with its
    samples and whether the comparison kept it: what ``compare_runs`` judged, for a picture of it."""
    floor = _noise_floor(head, (policy or Policy()).noise_floor)
    return run_samples(base, floor), run_samples(head, floor)


def _by_key(runs: Iterable[Run]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for run in runs:
        for record in run.records:
            out.setdefault(record.key, []).append(record)
    return out


def compare_runs(
    base_runs: Sequence[Run],
    head_runs: Sequence[Run],
    policy: Policy | None = None,
    *,
    failures: Mapping[str, str] | None = None,
) -> GateResult:
    """Every record of ``head_runs`` against ``base_runs``; ``failures`` (test id -> why) explains missing ones."""
    policy = policy or Policy()
    failures = failures or {}
    head_fp = [head_runs[-1].fingerprint]
    blocking = [
        str(d) for d in blocking_differences((r.fingerprint for r in base_runs), head_fp, policy.allow_mismatch)
    ]
    notes: list[str] = []
    for base_run in base_runs:
        for diff in differences(base_run.fingerprint, head_fp[0], policy.allow_mismatch):
            if not diff.blocking and str(diff) not in notes:
                notes.append(str(diff))
    base, head = _by_key(base_runs), _by_key(head_runs)
    rows: list[Row] = []
    for key, records in head.items():
        test, device = records[-1].test, records[-1].device
        if key not in base:
            rows.append(Row(key, test, device, Verdict.NEW, "not in the baseline", head_runs=len(records)))
        elif blocking:
            rows.append(Row(key, test, device, Verdict.INCOMPARABLE, "; ".join(blocking)))
        else:
            rows.append(_short_of_goal(_row_for(key, base[key], records, policy), policy.detect))
    for key, records in base.items():
        if key not in head:
            test = records[-1].test
            why = f"the test {failures[test]}" if test in failures else "not measured in this run"
            rows.append(Row(key, test, records[-1].device, Verdict.MISSING, why))
    return GateResult(rows, policy.fail_on, notes)


def _short_of_goal(row: Row, goal: float | None) -> Row:
    """``--gpuperf-detect``: a compared row whose runs cannot see ``goal`` says what they can see."""
    if goal is None or row.estimate is None:
        return row
    remedy = "raise --gpuperf-confirm or save more baseline runs"
    after = f" after {counted(row.head_runs, 'current run')}"
    note = short_of_goal(row.detectable, goal, remedy, counted="runs", after=after)
    return dataclasses.replace(row, reason=row.reason + note) if note else row


@dataclass(frozen=True)
class BaselineNoise:
    """What a baseline's run-to-run noise lets the gate see, told before its verdicts.

    ``seen`` is, per record, the smallest change that a session of one run (no confirmation) could see against the
    baseline as it is (``detectable``, at the gate's power): the median record's, and the worst one's.
    """

    records: int
    runs: int  # the fewest baseline runs of any record
    spread: float  # the median record's run-to-run standard deviation (of log time)
    seen: float  # the median record's smallest change a session of one run can see
    worst_test: str
    worst_seen: float
    #: the median record's runs kept (``select``) and saved: one kept run shows no run-to-run noise, and its
    #: ``spread`` is the noise floor, assumed, not measured
    kept: int = 0
    total: int = 0

    @property
    def assumed(self) -> bool:
        """The spread is the noise floor alone: the median record has one baseline run kept."""
        return self.kept == 1

    def describe(self, tolerance: values.Tolerance, rows: Sequence[Row] = ()) -> str:
        """The line; with the gate's ``rows``, it states the run-to-run noise their verdicts used (each row's own,
        over its baseline and current runs) wherever that is not the figure the line gives (issue 35)."""
        runs = counted(self.runs, "run")
        over = f"{runs}" if self.records == 1 else f"median of {self.records} records, at least {runs} each"
        spread = f"{self.spread:.1%}"
        if self.assumed:  # one run kept measures no run-to-run noise: the figure is the floor's
            left = f"; {self.total - self.kept} of {self.total} left out" if self.total > self.kept else ""
            spread += " assumed"
            over = f"the noise floor; {over}{left}"
        text = (
            f"baseline noise: run-to-run {spread} ({over}): "
            f"a session of one run can see a change of {percent(self.seen)} or more"
        )
        if self.worst_seen > self.seen:
            text += f" ({percent(self.worst_seen)} for {self.worst_test})"
        if isinstance(tolerance, values.AutoTolerance):
            text += f"; each row's tolerance is what it can see, at least {percent(tolerance.floor)}"
        elif self.seen > tolerance:
            text += (
                f"; the {percent(tolerance)} tolerance cannot be seen here, so a row within it is inconclusive, "
                "not unchanged: save more runs on a quieter machine, gate with `pytest-gpuperf ab`, or give "
                "--gpuperf-tolerance=auto"
            )
        return text + _verdicts_noise(f"{self.spread:.1%}", rows)


def _verdicts_noise(stated: str, rows: Sequence[Row]) -> str:
    """``; the verdicts use each row's own run-to-run noise, over its baseline and current runs: 1.9% to 24.0%``,
    the figures their reasons give, where some row's is not ``stated``; "" otherwise."""
    judged = [row.estimate.spread for row in rows if row.estimate is not None and row.estimate.spread is not None]
    shown = {f"{figure:.1%}" for figure in judged}
    if not shown or shown == {stated}:
        return ""
    if len(shown) == 1:
        uses = "the verdicts use" if len(judged) > 1 else "the verdict uses"
        return f"; {uses} {shown.pop()}, over the baseline and current runs"
    return (
        "; the verdicts use each row's own run-to-run noise, over its baseline and current runs: "
        f"{min(judged):.1%} to {max(judged):.1%}"
    )


def baseline_noise(base_runs: Sequence[Run], policy: Policy | None = None) -> BaselineNoise | None:
    """How finely ``base_runs`` can judge one current run of each of their records (None when they hold none)."""
    policy = policy or Policy()
    rows: list[tuple[float, float, int, Record, int]] = []
    for records in _by_key(base_runs).values():
        floor = _noise_floor(records, policy.noise_floor)
        side = select([s for r in records for s in runs_of(r)], floor)
        logs = [s.value for s in side.kept]
        if not logs:
            continue
        middle = sum(logs) / len(logs)
        est = estimate(logs, [middle], noise_floor=floor, base_within=[s.within for s in side.kept])
        seen = detectable(est)
        rows.append((math.inf if seen is None else seen, est.spread or 0.0, len(logs), records[-1], side.total))
    if not rows:
        return None
    rows.sort(key=lambda row: row[0])
    middle = (len(rows) - 1) // 2
    spreads = sorted(row[1] for row in rows)
    worst = rows[-1]
    return BaselineNoise(
        len(rows),
        min(row[2] for row in rows),
        spreads[middle],
        rows[middle][0],
        f"{short_test(worst[3])} [{worst[3].device}]",
        worst[0],
        rows[middle][2],
        rows[middle][4],
    )
