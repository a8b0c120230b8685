"""A work profile of a step, the value: what one call does (ops, kernels, syncs, FLOPs, bytes), and the gate's exact
comparison of two sides' counts.

The clock says how long a step took; the profile says what it did: which aten ops ran and how often, on CUDA
which kernels and runtime calls, how often the host waited for the device, the FLOPs, the bytes allocated and
the bytes copied between host and device, and for a compiled step its graph breaks, frames compiled and compile
time. ``_profiler.py`` reads it, after timing and outside the samples.

Counts are kept as totals over the profiled calls with ``calls`` beside them, so that a per-call count is the
exact fraction ``count / calls`` (``WorkProfile.per_call_counts``): two profiles taken with different call
counts still compare exactly. Times are kept as totals in seconds too, and are dropped at level ``counts``.

Counts do not move with the machine's load, so they are compared as exact fractions (``compare_work``): any
difference is a change of what the step does, whatever the clock says. A count that differs where nothing
changed (autotuning, caches, data-dependent shapes) is *varying*: it differed between the base's own profiles
(several baseline records), between the head's own, or between the profiled calls of one profile (its
``varying`` field), and is never reported as a change. A category a profile left out (``left_out``: the counting call
not run, or the profiled calls not read, to keep within its budget) is not compared with it: it is unknown there,
never zero. ``docs/how-the-gate-decides.md`` states the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Final

from ._settings import CATEGORIES
from ._units import format_bytes
from ._values import (
    MAX_AMOUNT,
    FieldError,
    shown,
    stored,
    stored_count,
    stored_list,
    stored_map,
    stored_number,
    stored_text,
)

__all__ = [
    "ALL_DEVICES",
    "NO_DATA_OPS",
    "SHOWN_CHANGES",
    "SYNC_KINDS",
    "CompileCounters",
    "CountChange",
    "OpStat",
    "WorkComparison",
    "WorkProfile",
    "category_of",
    "change_text",
    "compare_work",
    "shown_changes",
    "varying_between",
]

#: The kinds of the host's waits for the device, each wait counted once as one of them: ``stream``, ``device`` and
#: ``event`` for ``cudaStreamSynchronize``, ``cudaDeviceSynchronize`` and ``cudaEventSynchronize``; ``dtoh_copy`` for
#: a wait for a device-to-host copy (``.item()``, ``.cpu()``, ``.tolist()``: a copy, then its stream's wait, or a
#: synchronous ``cudaMemcpy``). A copy the host does not wait for (``non_blocking`` into pinned memory) is none.
SYNC_KINDS: Final = ("stream", "device", "event", "dtoh_copy")
#: The device of a ``bytes_allocated`` total read from a file written before they were split by device.
ALL_DEVICES: Final = "all"
#: The most names a profile read from a file holds in one list (its ops, kernels, runtime calls, Python calls):
#: aten has a few thousand ops and a step's distinct kernels number in the hundreds, while comparing a profile costs
#: about 0.1 ms a name (a million took 315 s and 1.7 GB).
MAX_NAMES: Final = 10_000


@dataclass(frozen=True)
class OpStat:
    """One op or kernel over the profiled calls: how often it ran and its time in seconds (an aten op's self time
    on the host; a kernel's time on the device; None at level ``counts``)."""

    name: str
    count: int
    seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpStat:
        """From a file: FieldError (``_values.stored``) names a field that no profile holds."""
        return cls(
            stored(data, "name", stored_text),
            stored(data, "count", stored_count()),
            stored(data, "seconds", stored_number, None),
        )


@dataclass(frozen=True)
class CompileCounters:
    """What torch.compile did over the whole measurement (warmup included): graph breaks, the frames dynamo
    compiled (``counters["frames"]["total"]``: a step that recompiles compiles more of them; dynamo keeps no count
    of recompiles as such), and its compile time in seconds (None where dynamo does not say)."""

    graph_breaks: int = 0
    compiles: int = 0
    compile_seconds: float | None = None

    def since(self, before: CompileCounters) -> CompileCounters:
        seconds = None
        if self.compile_seconds is not None and before.compile_seconds is not None:
            seconds = self.compile_seconds - before.compile_seconds
        return CompileCounters(self.graph_breaks - before.graph_breaks, self.compiles - before.compiles, seconds)


@dataclass(frozen=True)
class WorkProfile:
    """What the step did, over ``calls`` profiled calls (totals: a per-call figure is a total / ``calls``).

    ``ops``: aten ops; ``kernels``: CUDA kernels (empty on a CPU); ``runtime``: CUDA runtime and driver API calls
    by name; ``syncs``: the host's waits for the device by kind (``SYNC_KINDS``); ``flops``: of one call, from
    ``FlopCounterMode`` (a separate call); ``bytes_allocated``: by the profiled calls, by device (``cpu``: torch's
    CPU allocator; ``cuda``: the CUDA caching allocator's blocks; ``ALL_DEVICES`` for a total read from an older
    file);
    ``bytes_copied``: of one call, between host and device by direction (``htod``, ``dtoh``); ``compile``:
    torch.compile's counters over the measurement, None where dynamo was never loaded; ``seconds``: what the
    profile cost; ``budget``: what it was allowed; ``left_out`` and ``reduced``: what it did not read to keep within
    its budget, and why."""

    level: str
    calls: int
    ops: tuple[OpStat, ...] = ()
    kernels: tuple[OpStat, ...] = ()
    runtime: Mapping[str, int] = field(default_factory=dict)
    syncs: Mapping[str, int] = field(default_factory=dict)
    flops: int | None = None
    bytes_allocated: Mapping[str, int] | None = None
    bytes_copied: Mapping[str, int] = field(default_factory=dict)
    compile: CompileCounters | None = None
    seconds: float = 0.0
    budget: float = 0.0
    #: writes the profiled calls' trace (Chrome's JSON, which Perfetto and chrome://tracing open) to a path; kept
    #: in memory only (never in a results file), None for a profile read from a file. As taken it is the profiler's
    #: own export, which holds the profiler and every event of the profiled calls (and saves them once): a session's
    #: record keeps none, or one that copies the trace written as the record was made (``results.TraceSpool``)
    write_trace: Callable[[str], object] | None = field(default=None, compare=False, repr=False)
    #: the profiled calls' wall time, and their time outside any op (Python, the host), in seconds, totals over
    #: the calls; None at level ``counts``
    call_seconds: float | None = None
    outside_seconds: float | None = None
    #: count keys (``op:NAME``, ``runtime:NAME``) whose count differed between the profiled calls, or between the
    #: record's runs (``varying_between``): work that varies from call to call or run to run (caching, autotuning,
    #: data-dependent shapes, a DataLoader's workers), never a change between two runs
    varying: tuple[str, ...] = ()
    #: the Python calls of built-in functions made from the step's own code (``Tensor.item``, ``sleep``): count,
    #: and their own time outside any op (the Python-to-C++ call, the argument parsing, a sleep), in seconds: a
    #: part of ``outside_seconds`` (``read_events``); empty at level ``counts``. Never a count
    #: that is compared (the Python tracer's view differs between Python versions)
    python: tuple[OpStat, ...] = ()
    #: the categories (``CATEGORIES``) this profile did not read, to keep within its budget (or where its counters
    #: failed on the step: ``flops`` and ``copied``): unknown here, so never compared (``compare_work``)
    left_out: tuple[str, ...] = ()
    #: what the profile cut to keep within its budget, and why, in words ("" where it cut nothing): one profiled
    #: call of two, no counting call, or no profiled call
    reduced: str = ""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its trace writer: that holds the profiler's results, which cannot leave the process (a
        spawned rank's measurement is pickled back to its parent)."""
        return {**self.__dict__, "write_trace": None}

    def per_call_counts(self) -> dict[str, Fraction]:
        """Every count per call, as an exact fraction, keyed ``op:NAME``, ``kernel:NAME``, ``runtime:NAME``,
        ``sync:KIND``; with ``flops``, ``bytes_allocated:DEVICE`` and ``bytes_copied:DIR`` (per call already or over
        the calls), and the compile counters; none of a category left out (``left_out``). Two profiles did the same
        work where these are equal."""
        calls = max(self.calls, 1)
        out: dict[str, Fraction] = {}
        for prefix, stats in (("op", self.ops), ("kernel", self.kernels)):
            for stat in stats:
                out[f"{prefix}:{stat.name}"] = Fraction(stat.count, calls)
        for prefix, counts in (("runtime", self.runtime), ("sync", self.syncs)):
            for name, count in counts.items():
                out[f"{prefix}:{name}"] = Fraction(count, calls)
        if self.flops is not None:
            out["flops"] = Fraction(self.flops)
        for device, count in (self.bytes_allocated or {}).items():
            out[f"bytes_allocated:{device}"] = Fraction(count, calls)
        for direction, count in self.bytes_copied.items():
            out[f"bytes_copied:{direction}"] = Fraction(count)
        if self.compile is not None:
            out["graph_breaks"] = Fraction(self.compile.graph_breaks)
            out["compiles"] = Fraction(self.compile.compiles)
        return {key: count for key, count in out.items() if self.reads(category_of(key))}

    def reads(self, category: str) -> bool:
        """Whether this profile read ``category`` (``CATEGORIES``): not left out, and for ``flops``, counted."""
        return category not in self.left_out and (category != "flops" or self.flops is not None)

    def to_dict(self) -> dict[str, Any]:
        compiled = self.compile
        return {
            "level": self.level,
            "calls": self.calls,
            "ops": [s.to_dict() for s in self.ops],
            "kernels": [s.to_dict() for s in self.kernels],
            "runtime": dict(self.runtime),
            "syncs": dict(self.syncs),
            "flops": self.flops,
            "bytes_allocated": None if self.bytes_allocated is None else dict(self.bytes_allocated),
            "bytes_copied": dict(self.bytes_copied),
            "compile": None
            if compiled is None
            else {
                "graph_breaks": compiled.graph_breaks,
                "compiles": compiled.compiles,
                "compile_seconds": compiled.compile_seconds,
            },
            "seconds": self.seconds,
            "budget": self.budget,
            "call_seconds": self.call_seconds,
            "outside_seconds": self.outside_seconds,
            "varying": list(self.varying),
            "python": [s.to_dict() for s in self.python],
            "left_out": list(self.left_out),
            "reduced": self.reduced,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> WorkProfile | None:
        """From a file (None where it holds none): every count a whole number of at most 2**53 (FLOPs and bytes
        2**64), ``calls`` at least 1 (0 where its profiled calls were left out), each list of names at most
        ``MAX_NAMES``; FieldError (``_values.stored``) names a field past its bound. A file written before
        ``left_out`` leaves out the counting call's figures where it holds no FLOPs (its counters failed)."""
        if not isinstance(data, Mapping):
            return None
        flops = stored(data, "flops", _AMOUNT, None)
        left_out = stored(data, "left_out", _LEFT_OUT, ("flops", "copied") if flops is None else ())
        return cls(
            level=stored(data, "level", stored_text, "full"),
            calls=stored(data, "calls", stored_count(0 if "ops" in left_out else 1)),
            ops=stored(data, "ops", _STATS, ()),
            kernels=stored(data, "kernels", _STATS, ()),
            runtime=stored(data, "runtime", _COUNTS, {}),
            syncs=stored(data, "syncs", _COUNTS, {}),
            flops=flops,
            bytes_allocated=stored(data, "bytes_allocated", _allocated, None),
            bytes_copied=stored(data, "bytes_copied", _AMOUNTS, {}),
            compile=stored(data, "compile", _compiled, None),
            seconds=stored(data, "seconds", stored_number, 0.0),
            budget=stored(data, "budget", stored_number, 0.0),
            call_seconds=stored(data, "call_seconds", stored_number, None),
            outside_seconds=stored(data, "outside_seconds", stored_number, None),
            varying=stored(data, "varying", _VARYING, ()),
            python=stored(data, "python", _STATS, ()),
            left_out=left_out,
            reduced=stored(data, "reduced", stored_text, ""),
        )


_NAMES_WHY: Final = " names a profile holds (a step runs some hundreds); a profile of more was not measured"
_AMOUNT: Final = stored_count(0, MAX_AMOUNT)
_STATS: Final = stored_list(OpStat.from_dict, MAX_NAMES, _NAMES_WHY)
_COUNTS: Final = stored_map(stored_count(), MAX_NAMES, _NAMES_WHY)
_AMOUNTS: Final = stored_map(_AMOUNT, MAX_NAMES, _NAMES_WHY)
#: A profile's ``varying``: keys of its counts, so at most as many as its lists hold.
_VARYING: Final = stored_list(stored_text, len(CATEGORIES) * MAX_NAMES, _NAMES_WHY)


def _category(value: object) -> str:
    if value not in CATEGORIES:
        raise FieldError("", f"must be one of {', '.join(CATEGORIES)}, not {shown(value)}")
    return str(value)


#: A profile's ``left_out``: categories, each at most once.
_LEFT_OUT: Final = stored_list(_category, len(CATEGORIES), " categories (CATEGORIES)")


def _allocated(value: object) -> dict[str, int] | None:
    """``bytes_allocated`` by device; a file written before the split holds one total (``ALL_DEVICES``)."""
    if value is None:
        return None
    return _AMOUNTS(value) if isinstance(value, Mapping) else {ALL_DEVICES: _AMOUNT(value)}


def _compiled(value: object) -> CompileCounters | None:
    """torch.compile's counters (None: dynamo was never loaded)."""
    if not isinstance(value, Mapping):
        return None
    return CompileCounters(
        stored(value, "graph_breaks", stored_count(), 0),
        stored(value, "compiles", stored_count(), 0),
        stored(value, "compile_seconds", stored_number, None),
    )


#: A key's prefix (before ``:``) or the whole key -> its category.
_CATEGORY_OF: Final = {
    "op": "ops",
    "kernel": "kernels",
    "runtime": "runtime",
    "sync": "syncs",
    "flops": "flops",
    "bytes_allocated": "allocated",
    "bytes_copied": "copied",
    "graph_breaks": "compiles",
    "compiles": "compiles",
}
#: Keys that one side may lack (an older file kept one total of the bytes allocated where a newer keeps them by
#: device, each watched device said, zero too): compared only where both sides have them. Every other key absent
#: from a profile that read its category counts zero (an op that did not run).
_BY_DEVICE: Final = "bytes_allocated:"


def category_of(key: str) -> str:
    """``op:aten::mm`` -> ``ops``; ``bytes_copied:htod`` -> ``copied``."""
    return _CATEGORY_OF.get(key.split(":", 1)[0], "ops")


@dataclass(frozen=True)
class CountChange:
    """One count per call that differs: the base's and the head's, exact; ``seconds``: what the change costs per
    call (the change of the op's or kernel's time per call, head minus base, each side's the mean of its profiles
    that kept times), None where a side's kept none (level ``counts``) and for the other categories. It ranks the
    lines only."""

    key: str
    category: str
    base: Fraction
    head: Fraction
    seconds: float | None = None

    @property
    def name(self) -> str:
        """The key without its prefix (``aten::mm`` for ``op:aten::mm``)."""
        return self.key.split(":", 1)[1] if ":" in self.key and category_of(self.key) != "compiles" else self.key


@dataclass(frozen=True)
class WorkComparison:
    """What the counts of two sides say: ``verdict`` ``same``, ``more`` (some category's total per call went up),
    ``less``, ``different`` (same totals, other keys; or more of some and less of others) or ``unknown`` (no
    count could be compared); ``categories``: each category's own verdict; ``changes``: every differing key,
    in the order of their lines (``rank``); ``varying``: keys left out as varying; ``compared``: keys compared."""

    verdict: str
    categories: Mapping[str, str]
    changes: tuple[CountChange, ...]
    varying: tuple[str, ...]
    compared: int

    def failing(self, fail_on: Collection[str]) -> list[str]:
        """The categories whose work went up and that are among ``fail_on``."""
        return [c for c, v in self.categories.items() if v == "more" and c in fail_on]

    def summary(self, fail_on: Collection[str]) -> str | None:
        """``counts more (ops more, flops more; failing on ops,flops)`` where the counts changed, else None."""
        if self.verdict in ("same", "unknown"):
            return None
        changed = ", ".join(f"{c} {v}" for c, v in self.categories.items() if v != "same")
        failing = self.failing(fail_on)
        return f"counts {self.verdict} ({changed}{'; failing on ' + ','.join(failing) if failing else ''})"

    def details(self, limit: int | None = None) -> list[str]:
        """Each changed count per call in words (``line_text``: the ops that move no data on one line): every
        line, or the ``limit`` that ``shown_changes`` picks."""
        lines = change_lines(self.changes)
        return [line_text(line, limit is None) for line in (lines if limit is None else shown_changes(lines, limit))]

    def to_dict(self, fail_on: Collection[str]) -> dict[str, Any]:
        """The JSON block (``ab --json``): per-call counts as floats, ``failing`` under ``fail_on``."""
        return {
            "verdict": self.verdict,
            "failing": self.failing(fail_on),
            "changes": [
                {"key": c.key, "category": c.category, "base": float(c.base), "head": float(c.head)}
                for c in self.changes
            ],
            "varying": list(self.varying),
        }


def _holding(
    profiles: Sequence[WorkProfile], counts: Sequence[Mapping[str, Fraction]], category: str
) -> list[Mapping[str, Fraction]]:
    """The counts of those ``profiles`` that read ``category`` (``WorkProfile.reads``)."""
    return [c for p, c in zip(profiles, counts, strict=True) if p.reads(category)]


def _category_verdict(changes: Sequence[CountChange]) -> str:
    if not changes:
        return "same"
    base, head = sum(c.base for c in changes), sum(c.head for c in changes)
    return "more" if head > base else "less" if head < base else "different"


def _overall(categories: Mapping[str, str], compared: int) -> str:
    if compared == 0:
        return "unknown"
    changed = {v for v in categories.values() if v != "same"}
    if not changed:
        return "same"
    if "more" in changed:
        return "more"
    return "less" if changed == {"less"} else "different"


def compare_work(base: Sequence[WorkProfile], head: Sequence[WorkProfile]) -> WorkComparison | None:
    """The counts of ``head`` against ``base`` (each side: one profile per record or run), None where a side has
    no profile. A key is compared between the profiles of each side that read its category (``left_out``), where
    both sides have one; a key varying among a side's, or listed in any profile's ``varying``, is left out."""
    if not base or not head:
        return None
    base_counts = [p.per_call_counts() for p in base]
    head_counts = [p.per_call_counts() for p in head]
    listed = {k for p in (*base, *head) for k in p.varying}
    base_seconds, head_seconds = _call_seconds(base), _call_seconds(head)
    keys = {k for counts in (*base_counts, *head_counts) for k in counts}
    compared = 0
    varying: set[str] = set()
    changes: list[CountChange] = []
    for key in keys:
        category = category_of(key)
        sides = _holding(base, base_counts, category), _holding(head, head_counts, category)
        if not all(sides) or (key.startswith(_BY_DEVICE) and not all(key in side[0] for side in sides)):
            continue  # unknown on a side: not compared
        if key in listed or any(len({c.get(key, Fraction(0)) for c in side}) > 1 for side in sides):
            varying.add(key)
            continue
        compared += 1
        b, h = (side[0].get(key, Fraction(0)) for side in sides)
        if b != h:
            seconds = None
            if base_seconds is not None and head_seconds is not None and category in ("ops", "kernels"):
                seconds = head_seconds.get(key, 0.0) - base_seconds.get(key, 0.0)
            changes.append(CountChange(key, category, b, h, seconds))
    changes = rank(changes)
    categories = {c: _category_verdict([x for x in changes if x.category == c]) for c in CATEGORIES}
    return WorkComparison(_overall(categories, compared), categories, tuple(changes), tuple(sorted(varying)), compared)


def varying_between(profile: WorkProfile, again: WorkProfile) -> WorkProfile:
    """``profile`` with every count that differs in ``again`` (the same step measured again: a round, a
    confirmation run in a fresh process) listed as varying, and those ``again`` lists: a count that moves between
    runs of unchanged code (a DataLoader's workers allocate a varying amount from process to process) is never a
    change (``compare_work``)."""
    comparison = compare_work([profile], [again])
    if comparison is None:
        return profile
    keys = {*profile.varying, *again.varying, *(change.key for change in comparison.changes)}
    return profile if keys == set(profile.varying) else replace(profile, varying=tuple(sorted(keys)))


def _call_seconds(profiles: Sequence[WorkProfile]) -> dict[str, float] | None:
    """``op:NAME`` and ``kernel:NAME`` -> its time per call (an op's self time on the host, a kernel's on the
    device), the mean over those of ``profiles`` that kept times (an op that did not run there: absent); None where
    none did (level ``counts``)."""
    timed = [
        p
        for p in profiles
        if p.level != "counts" and p.calls > 0 and all(s.seconds is not None for s in (*p.ops, *p.kernels))
    ]
    if not timed:
        return None
    seconds: dict[str, float] = {}
    for profile in timed:
        for prefix, stats in (("op", profile.ops), ("kernel", profile.kernels)):
            for stat in stats:
                key = f"{prefix}:{stat.name}"
                seconds[key] = seconds.get(key, 0.0) + (stat.seconds or 0.0) / profile.calls / len(timed)
    return seconds


#: The aten ops that move no data themselves: views and aliases of a tensor, changes of its metadata, allocations
#: left uninitialized, and the wrappers whose copy (if any) is an op of its own (``aten::to``: ``aten::_to_copy``
#: and ``aten::copy_``; ``aten::reshape`` and ``aten::contiguous``: ``aten::clone``). A slice or a transpose adds
#: several of them, so that they would lead the lines by count while the op the user added costs the time: their
#: changes share one line, after the other ops' (``change_lines``). Their counts are compared as every other's.
NO_DATA_OPS: Final = frozenset(
    f"aten::{name}"
    for name in (
        "_conj",
        "_neg_view",
        "_reshape_alias",
        "_unsafe_view",
        "alias",
        "as_strided",
        "chunk",
        "conj",
        "contiguous",
        "detach",
        "diagonal",
        "empty",
        "empty_like",
        "empty_strided",
        "expand",
        "expand_as",
        "flatten",
        "lift_fresh",
        "movedim",
        "narrow",
        "new_empty",
        "new_empty_strided",
        "permute",
        "reshape",
        "resolve_conj",
        "resolve_neg",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "squeeze",
        "swapaxes",
        "t",
        "to",
        "transpose",
        "unbind",
        "unflatten",
        "unfold",
        "unsqueeze",
        "view",
        "view_as",
        "view_as_complex",
        "view_as_real",
    )
)


def _moves_no_data(change: CountChange) -> bool:
    return change.category == "ops" and change.name in NO_DATA_OPS


def _relative(change: CountChange) -> Fraction | float:
    delta = abs(change.head - change.base)
    return delta / change.base if change.base else float("inf")


def rank(changes: Sequence[CountChange]) -> list[CountChange]:
    """``changes`` in the order of their lines: by category (``CATEGORIES``); in one, the counts that grew (the
    ops a change added) before those that fell, each by what the change costs (``CountChange.seconds``, where
    every change of the category has one: the most time added first, then the most saved), then by its relative
    size, then by its size; the ops that move no data last, by size (their times are noise)."""
    order = {c: i for i, c in enumerate(CATEGORIES)}
    timed = {
        cat: all(c.seconds is not None for c in changes if c.category == cat and not _moves_no_data(c))
        for cat in CATEGORIES
    }

    def key(c: CountChange) -> tuple[Any, ...]:
        delta = abs(c.head - c.base)
        if _moves_no_data(c):
            return (order[c.category], 1, 0.0, 0, -delta, c.key)
        fell = c.head < c.base
        cost = 0.0
        if timed[c.category] and c.seconds is not None:
            cost = c.seconds if fell else -c.seconds
        return (order[c.category], 0, fell, cost, -_relative(c), -delta, c.key)

    return sorted(changes, key=key)


# ------------------------------------------------------------------ the changes in words

#: At most this many changed counts are listed under a row; the rest are counted.
SHOWN_CHANGES: Final = 5


def _per_call(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.3g}"


def _bytes_or_count(change: CountChange, value: Fraction) -> str:
    if change.category in ("allocated", "copied"):
        return format_bytes(round(value))
    return f"{float(value):.3g}" if change.category == "flops" else _per_call(value)


def change_text(change: CountChange) -> str:
    """``aten::mm 1 -> 2/call (+1)``; ``flops 1.05e+06 -> 1.57e+06/call (+50.0%)``; ``copied htod: 4 MiB -> 8
    MiB/call (+100.0%)``; ``allocated cuda: ...``."""
    base, head = change.base, change.head
    delta = head - base
    if change.category in ("flops", "allocated", "copied") and base:
        relative = f"{float(delta / base):+.1%}"
    else:
        relative = ("+" if delta > 0 else "-") + _bytes_or_count(change, abs(delta))
    return (
        f"{change.category} {change.name}: "
        if change.category in ("syncs", "allocated", "copied", "runtime", "kernels")
        else f"{change.name} "
    ) + f"{_bytes_or_count(change, base)} -> {_bytes_or_count(change, head)}/call ({relative})"


#: A line of the ops that move no data names this many of them where the lines are few.
FOLDED_NAMES: Final = 3


def line_text(line: Sequence[CountChange], every: bool = True) -> str:
    """A line of ``change_lines`` in words: one change's ``change_text``, or the ops that move no data with their
    sums and each one's counts (``view/metadata ops 3 -> 12/call (+9): aten::as_strided 0 -> 3, ...``), all of
    them, or where not ``every`` the first ``FOLDED_NAMES`` and how many more."""
    if not _moves_no_data(line[0]):
        return change_text(line[0])
    base, head = sum((c.base for c in line), Fraction(0)), sum((c.head for c in line), Fraction(0))
    named = line if every else line[:FOLDED_NAMES]
    names = ", ".join(f"{c.name} {_per_call(c.base)} -> {_per_call(c.head)}" for c in named)
    more = f" and {len(line) - len(named)} more" if len(line) > len(named) else ""
    delta = ("+" if head > base else "-") + _per_call(abs(head - base))
    return f"view/metadata ops {_per_call(base)} -> {_per_call(head)}/call ({delta}): {names}{more}"


def change_lines(changes: Sequence[CountChange]) -> list[tuple[CountChange, ...]]:
    """The lines of ``changes`` (in the order of ``rank``): one per change, the ops that move no data
    (``NO_DATA_OPS``) on one line together, where their first one stood."""
    lines: list[tuple[CountChange, ...]] = []
    folded = tuple(c for c in changes if _moves_no_data(c))
    for change in changes:
        if not _moves_no_data(change):
            lines.append((change,))
        elif change is folded[0]:
            lines.append(folded)
    return lines


def shown_changes(
    lines: Sequence[tuple[CountChange, ...]], limit: int = SHOWN_CHANGES
) -> list[tuple[CountChange, ...]]:
    """At most ``limit`` of ``lines`` (``change_lines``), the first of each category first, so that a change of
    syncs, FLOPs or bytes is not hidden behind many ops; in their order."""
    categories = dict.fromkeys(line[0].category for line in lines)
    firsts = [next(line for line in lines if line[0].category == cat) for cat in categories]
    rest = [line for line in lines if line not in firsts]
    chosen = {*firsts[:limit], *rest[: max(0, limit - len(firsts))]}
    return [line for line in lines if line in chosen]
