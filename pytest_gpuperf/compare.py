"""Verdicts: is each record slower, faster or unchanged against its baseline, and does the gate pass?

The rule (the README's "How the gate decides" says the same for users):

1. Comparable? Runs must share the fingerprint keys of ``fingerprint.MUST_MATCH`` and
   each pair of records the same device model, threads, parameters and work per call;
   otherwise the record is *incomparable* (``--gpuperf-allow-mismatch`` overrides).
   A record only in the current run is *new*, only in the baseline *missing*.
2. The unit of evidence is the run (a session), not the sample. Samples of one run
   share the machine's state (clock, placement, a neighbour's job, the host's other
   guests) and agree with each other far better than runs do, so an interval built
   from one run's samples is too narrow and would cry wolf. The same holds one level
   up for the rounds of one session (``--gpuperf-rounds``, confirmation rounds): they
   share the session's drift. So each run contributes one number: the low median of
   the log medians of its rounds (a transient only ever slows a round). The
   run-to-run spread ``sigma`` is estimated from the baseline's runs (and the current
   runs when there are several), shrunk towards the noise floor
   (``--gpuperf-noise-floor``, default 2%) as if the floor were ``PRIOR_DF`` runs of
   evidence: ``sigma^2 = (df s^2 + PRIOR_DF floor^2) / (df + PRIOR_DF)``. A run whose
   own value is less certain than that (a wide interval, rounds that disagree)
   counts with its own variance.
3. Significance first: the ratio current/baseline (geometric means of the runs'
   values) with a Student-t interval on ``df + PRIOR_DF`` degrees of freedom at 95%;
   it is significant when the interval excludes 1.
4. Then the tolerance (``--gpuperf-tolerance``, default 5%; per test
   ``@pytest.mark.gpuperf(tolerance=0.1)``), two-sided: *slower* when significant and
   the ratio is above ``1 + tolerance``, *faster* when significant and below
   ``1 / (1 + tolerance)``, *unchanged* when the ratio is within the tolerance and the
   interval rules out a change of twice the tolerance, else *inconclusive* (the noise
   is too large to tell).
5. Load can only slow a measurement down. A round measured while other processes
   left it fewer free cores than it needs (``contention.py``) is left out of its run
   when the run has undisturbed rounds; a current run disturbed in every round
   cannot show a slowdown (slower becomes *inconclusive*), a baseline disturbed in
   every run cannot show that nothing got slower (faster and unchanged become
   *inconclusive*), and disturbed runs are left out whenever undisturbed ones exist.
6. Not every disturbance is visible: on a shared virtual machine a run can be 20-40%
   slower with no other process in sight (the host's other guests). Such noise is
   one-sided too: within a run the low median of the rounds is used, and on each
   side a run more than ``OUTLIER_FLOORS`` noise floors slower than the side's low
   median run (the faster of two, the middle of three) is left out. A real slowdown
   moves every run of its side and survives this. In pytest, a record that looks
   slower is measured again (``--gpuperf-confirm`` rounds, spaced in time) before it
   is judged.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Final, Protocol

from . import contention, fingerprint
from .records import Record, Run
from .stats import median_ci, t_quantile

__all__ = [
    "DEFAULT_NOISE_FLOOR",
    "DEFAULT_TOLERANCE",
    "OUTLIER_FLOORS",
    "PRIOR_DF",
    "UNCHANGED_REACH",
    "Estimate",
    "GateResult",
    "Observation",
    "Policy",
    "RatioInterval",
    "Row",
    "Session",
    "Verdict",
    "compare_runs",
    "count_verdicts",
    "estimate",
    "parse_mismatch_keys",
    "parse_verdicts",
    "verdict_for",
    "work_difference",
]

DEFAULT_TOLERANCE: Final = 0.05
DEFAULT_NOISE_FLOOR: Final = 0.02
#: How many runs' worth of evidence the noise floor counts for (see the module docstring, point 2).
PRIOR_DF: Final = 4.0
#: "Unchanged" needs the interval to rule out a change of this many tolerances (point 4).
UNCHANGED_REACH: Final = 2.0
#: Runs slower than their side's fastest by more than this many noise floors are left out (point 6).
OUTLIER_FLOORS: Final = 4.0


class Verdict(str, enum.Enum):
    SLOWER = "slower"
    FASTER = "faster"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    INCOMPARABLE = "incomparable"
    NEW = "new"
    MISSING = "missing"


VERDICTS: Final = tuple(v.value for v in Verdict)


def parse_verdicts(raw: str) -> tuple[str, ...]:
    """``"slower,missing"`` -> ("slower", "missing"); ``none`` -> (). Raises ValueError naming a bad one."""
    text = raw.strip().lower()
    if text in ("", "none"):
        return ()
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part not in VERDICTS:
            raise ValueError(f"{part!r} is not a verdict; use a comma list of {', '.join(VERDICTS)}, or none")
        if part not in out:
            out.append(part)
    return tuple(out)


def parse_mismatch_keys(raw: str) -> tuple[str, ...]:
    """Fingerprint or record keys whose differences may be compared across, or ``all``."""
    known = [*fingerprint.MUST_MATCH, *fingerprint.RECORD_KEYS]
    out: list[str] = []
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        if part != "all" and part not in known:
            raise ValueError(f"{part!r} is not a fingerprint key; use all or a comma list of {', '.join(known)}")
        out.append(part)
    return tuple(out)


@dataclass(frozen=True)
class Policy:
    tolerance: float = DEFAULT_TOLERANCE
    noise_floor: float = DEFAULT_NOISE_FLOOR
    confidence: float = 0.95
    fail_on: frozenset[str] = frozenset({Verdict.SLOWER.value})
    allow_mismatch: frozenset[str] = frozenset()


# ---------------------------------------------------------------- the estimate


@dataclass(frozen=True)
class Estimate:
    """Ratio current/baseline of the typical time per call, with its interval."""

    ratio: float
    low: float
    high: float
    sigma: float  # run-to-run standard deviation used, in log units (~ relative)
    df: float
    confidence: float

    @property
    def significant(self) -> bool:
        return self.low > 1.0 or self.high < 1.0


def _within_variance(low: float, high: float, confidence: float) -> float:
    """Variance of log(median) from a run's own order-statistic interval (a lower bound: samples correlate)."""
    if low <= 0 or high <= 0 or not 0 < confidence < 1:
        return math.inf
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    return ((math.log(high) - math.log(low)) / (2.0 * z)) ** 2


def estimate(
    base: Sequence[float],
    head: Sequence[float],
    *,
    noise_floor: float,
    base_within: Sequence[float] = (),
    head_within: Sequence[float] = (),
    confidence: float = 0.95,
    prior_df: float = PRIOR_DF,
) -> Estimate:
    """The ratio and interval from per-run log medians; see the module docstring, points 2 and 3."""
    if not base or not head:
        raise ValueError("need at least one run on each side")
    mb, mh = sum(base) / len(base), sum(head) / len(head)
    ss = sum((x - mb) ** 2 for x in base) + sum((y - mh) ** 2 for y in head)
    df = float(len(base) - 1 + len(head) - 1)
    sigma2 = (ss + prior_df * noise_floor**2) / (df + prior_df)

    def mean_variance(n: int, within: Sequence[float]) -> float:
        per_run = [max(sigma2, w) for w in within] if within else [sigma2] * n
        return sum(per_run) / len(per_run) ** 2

    se = math.sqrt(mean_variance(len(base), base_within) + mean_variance(len(head), head_within))
    total_df = df + prior_df
    q = t_quantile((1.0 + confidence) / 2.0, total_df) if se > 0 else 0.0
    d = mh - mb
    return Estimate(math.exp(d), math.exp(d - q * se), math.exp(d + q * se), math.sqrt(sigma2), total_df, confidence)


class RatioInterval(Protocol):
    """A ratio current/baseline with its confidence interval: this module's Estimate, or ``ab.py``'s."""

    @property
    def ratio(self) -> float: ...

    @property
    def low(self) -> float: ...

    @property
    def high(self) -> float: ...

    @property
    def significant(self) -> bool: ...


def verdict_for(est: RatioInterval, tolerance: float) -> Verdict:
    """Significance first, then the tolerance, both ways (module docstring, point 4)."""
    above, below = est.ratio > 1.0 + tolerance, est.ratio < 1.0 / (1.0 + tolerance)
    if est.significant and above:
        return Verdict.SLOWER
    if est.significant and below:
        return Verdict.FASTER
    if above or below or not _rules_out(est, UNCHANGED_REACH * tolerance):
        return Verdict.INCONCLUSIVE
    return Verdict.UNCHANGED


def _rules_out(est: RatioInterval, change: float) -> bool:
    """Does the interval exclude a change of ``change`` either way?"""
    return est.high < 1.0 + change and est.low > 1.0 / (1.0 + change)


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Row:
    """One record's comparison, for the table and the exit status."""

    key: str
    test: str
    device: str
    verdict: Verdict
    reason: str
    baseline: float | None = None  # seconds per call (geometric mean of run medians)
    current: float | None = None
    estimate: Estimate | None = None
    tolerance: float = DEFAULT_TOLERANCE
    base_runs: int = 0
    head_runs: int = 0
    base_total: int = 0
    head_total: int = 0
    base_rounds: int = 0  # rounds in the runs used (a run's confirmation rounds count inside it)
    head_rounds: int = 0


@dataclass(frozen=True)
class GateResult:
    rows: list[Row]
    fail_on: frozenset[str]
    #: fingerprint differences that did not block the comparison, shown under the table
    notes: list[str] = field(default_factory=list)

    @property
    def failing(self) -> list[Row]:
        return [r for r in self.rows if r.verdict.value in self.fail_on]

    @property
    def failed(self) -> bool:
        return bool(self.failing)

    def counts(self) -> dict[str, int]:
        return count_verdicts(self.rows)


def count_verdicts(rows: Iterable[Any]) -> dict[str, int]:
    """How many rows got each verdict, in order of first appearance (rows with a ``verdict``)."""
    out: dict[str, int] = {}
    for row in rows:
        out[row.verdict.value] = out.get(row.verdict.value, 0) + 1
    return out


def _record_view(record: Record) -> dict[str, Any]:
    m = record.measurement
    return {
        "device_name": m.device_name,
        "threads": m.threads,
        "params": dict(record.params),
        "work": dict(m.work),
    }


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


def record_mismatches(base: Record, head: Record, allow: Collection[str]) -> list[str]:
    """Blocking differences between two records of one test, as 'what base -> head' texts."""
    a, b = _record_view(base), _record_view(head)
    out = []
    for key in fingerprint.RECORD_KEYS:
        if key == "work" and work_difference(a[key], b[key])[0]:
            continue
        if a[key] != b[key] and key not in allow and "all" not in allow:
            out.append(f"{key} {a[key]} -> {b[key]}")
    return out


def load_of(record: Record) -> contention.Load | None:
    return contention.Load.from_dict(record.gate.get("load"))


def disturbed(record: Record) -> bool:
    """Was the record's (first) measurement made while other processes took the cores it needs?"""
    return _is_disturbed(record, load_of(record))


def _is_disturbed(record: Record, load: contention.Load | None) -> bool:
    if load is None:
        return False
    return contention.is_disturbed(load, contention.needed_cores(record.device, record.measurement.threads))


@dataclass(frozen=True)
class Observation:
    """One run (or one confirmation round) of one record: what the comparison uses of it."""

    log_median: float
    within: float
    disturbed: bool
    load: contention.Load | None


def _observation(record: Record, samples: Any, load_data: Any) -> Observation | None:
    """One round from its raw samples (seconds per call) and stored load; None without usable samples."""
    values = sorted(float(x) for x in samples or () if float(x) > 0)
    if not values:
        return None
    ci = median_ci(values, record.measurement.confidence)
    load = contention.Load.from_dict(load_data)
    return Observation(
        math.log(statistics.median(values)),
        _within_variance(ci.low, ci.high, ci.confidence),
        _is_disturbed(record, load),
        load,
    )


def observations(record: Record) -> list[Observation]:
    """The record's measurement, then the rounds measured in the same session (``gate["rounds"]``)."""
    m = record.measurement
    load = load_of(record)
    first = Observation(
        math.log(m.median), _within_variance(m.ci.low, m.ci.high, m.ci.confidence), _is_disturbed(record, load), load
    )
    rounds = [_observation(record, r.get("samples"), r.get("load")) for r in record.gate.get("rounds", [])]
    return [first, *(o for o in rounds if o is not None)]


@dataclass(frozen=True)
class Session:
    """One run (session) of one record, from its rounds: the unit of evidence (module docstring, point 2)."""

    value: float  # log seconds per call
    within: float  # variance of ``value`` from the chosen round's own samples
    rounds: int
    disturbed: bool  # every round was measured while busy
    load: contention.Load | None  # the worst disturbed round's load, for the message


def _session(obs: Sequence[Observation]) -> Session:
    """The low median of the session's undisturbed rounds: a transient only ever slows a round (point 6)."""
    calm = [o for o in obs if not o.disturbed]
    pool = sorted(calm or obs, key=lambda o: o.log_median)
    # The rounds' spread is transients, which the low median already ignores; the round it picks carries
    # its own uncertainty, and the spread between sessions is estimated across sessions.
    chosen = pool[(len(pool) - 1) // 2]
    loads = [o.load for o in obs if o.disturbed and o.load is not None]
    worst = max(loads, key=lambda load: load.background_cores) if loads else None
    return Session(chosen.log_median, chosen.within, len(obs), not calm, worst)


def sessions_of(record: Record) -> list[Session]:
    """The record's own session, then its confirmation runs in fresh processes (``gate["runs"]``)."""
    out = [_session(observations(record))]
    for run in record.gate.get("runs", []):
        entries = [run, *run.get("rounds", [])]
        obs = [o for o in (_observation(record, e.get("samples"), e.get("load")) for e in entries) if o is not None]
        if obs:
            out.append(_session(obs))
    return out


@dataclass(frozen=True)
class _Side:
    kept: list[Session]
    total: int
    all_busy: bool
    busy_text: str

    @property
    def rounds(self) -> int:
        return sum(s.rounds for s in self.kept)


def _select(sessions: Sequence[Session], noise_floor: float) -> _Side:
    """Undisturbed sessions if any (point 5), then without sessions far slower than the low median (point 6)."""
    calm = [s for s in sessions if not s.disturbed]
    pool = calm or list(sessions)
    anchor = sorted(s.value for s in pool)[(len(pool) - 1) // 2]
    limit = anchor + math.log1p(OUTLIER_FLOORS * noise_floor)
    kept = [s for s in pool if s.value <= limit]
    loads = [s.load for s in sessions if s.load is not None]
    busy = ""
    if loads:
        worst = max(loads, key=lambda load: load.background_cores)
        busy = f"other processes used {worst.background_cores:.1f} of {worst.cpus} CPUs"
    return _Side(kept, len(sessions), not calm, busy)


def _setting(records: Sequence[Record], name: str, default: float) -> float:
    value = records[-1].gate.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _judge(key: str, base: list[Record], head: list[Record], policy: Policy) -> Row:
    newest = head[-1]
    tolerance = _setting(head, "tolerance", policy.tolerance)
    floor = _setting(head, "noise_floor", policy.noise_floor)
    mismatches = record_mismatches(base[-1], newest, policy.allow_mismatch)
    if mismatches:
        keys = ",".join(m.split(" ", 1)[0] for m in mismatches)
        return Row(
            key,
            newest.test,
            newest.device,
            verdict=Verdict.INCOMPARABLE,
            reason="; ".join(mismatches) + f" (compare anyway: --gpuperf-allow-mismatch={keys})",
            tolerance=tolerance,
        )
    b = _select([s for r in base for s in sessions_of(r)], floor)
    h = _select([s for r in head for s in sessions_of(r)], floor)
    est = estimate(
        [s.value for s in b.kept],
        [s.value for s in h.kept],
        noise_floor=floor,
        base_within=[s.within for s in b.kept],
        head_within=[s.within for s in h.kept],
        confidence=policy.confidence,
    )
    verdict = verdict_for(est, tolerance)
    reason = _reason(verdict, est, tolerance, len(b.kept))
    if h.all_busy and verdict is Verdict.SLOWER:
        verdict = Verdict.INCONCLUSIVE
        reason = f"looks {est.ratio - 1:+.1%}, but measured while busy: {h.busy_text}; re-run on a quiet machine"
    elif b.all_busy and verdict in (Verdict.FASTER, Verdict.UNCHANGED):
        verdict = Verdict.INCONCLUSIVE
        reason = f"the baseline was measured while busy ({b.busy_text}); save a new baseline on a quiet machine"
    left_out = [
        f"{side.total - len(side.kept)} of {side.total} {name} runs"
        for name, side in (("baseline", b), ("current", h))
        if len(side.kept) < side.total
    ]
    if left_out:
        reason += f"; left out as disturbed: {', '.join(left_out)}"
    work_note = work_difference(base[-1].measurement.work, newest.measurement.work)[1]
    if work_note:
        reason += f"; {work_note}"
    return Row(
        key,
        newest.test,
        newest.device,
        verdict=verdict,
        reason=reason,
        baseline=math.exp(sum(s.value for s in b.kept) / len(b.kept)),
        current=math.exp(sum(s.value for s in h.kept) / len(h.kept)),
        estimate=est,
        tolerance=tolerance,
        base_runs=len(b.kept),
        head_runs=len(h.kept),
        base_total=b.total,
        head_total=h.total,
        base_rounds=b.rounds,
        head_rounds=h.rounds,
    )


def _reason(verdict: Verdict, est: Estimate, tolerance: float, base_runs: int) -> str:
    change = f"{est.ratio - 1:+.1%}"
    noise = f"run-to-run noise {est.sigma:.1%} ({base_runs} baseline run{'s' if base_runs != 1 else ''})"
    within = est.ratio <= 1.0 + tolerance and est.ratio >= 1.0 / (1.0 + tolerance)
    if verdict is Verdict.INCONCLUSIVE and within:
        return f"{change}, but {noise} cannot rule out {UNCHANGED_REACH * tolerance:.0%}; save more baseline rounds"
    if verdict is Verdict.SLOWER:
        return f"{change}: significant and over the {tolerance:.0%} tolerance"
    if verdict is Verdict.FASTER:
        return f"{change}: significant and over the {tolerance:.0%} tolerance"
    if verdict is Verdict.INCONCLUSIVE:
        return f"{change} but not significant against {noise}; measure more rounds"
    return f"within the {tolerance:.0%} tolerance" + ("" if not est.significant else f" ({change}, significant)")


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
    blocking: list[str] = []
    notes: list[str] = []
    for base_run in base_runs:
        for diff in fingerprint.differences(base_run.fingerprint, head_runs[-1].fingerprint, policy.allow_mismatch):
            text = str(diff)
            target = blocking if diff.blocking else notes
            if text not in target:
                target.append(text)
    base, head = _by_key(base_runs), _by_key(head_runs)
    rows: list[Row] = []
    for key, records in head.items():
        test, device = records[-1].test, records[-1].device
        if key not in base:
            rows.append(Row(key, test, device, Verdict.NEW, "not in the baseline", head_runs=len(records)))
        elif blocking:
            rows.append(Row(key, test, device, Verdict.INCOMPARABLE, "; ".join(blocking)))
        else:
            rows.append(_judge(key, base[key], records, policy))
    for key, records in base.items():
        if key not in head:
            test = records[-1].test
            why = f"the test {failures[test]}" if test in failures else "not measured in this run"
            rows.append(Row(key, test, records[-1].device, Verdict.MISSING, why))
    return GateResult(rows, policy.fail_on, notes)
