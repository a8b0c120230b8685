"""A work profile of a step: what one call does, read after timing, outside the timed samples.

The clock says how long a step took; the profile says what it did: which aten ops ran and how often, on CUDA
which kernels and runtime calls, how often the host waited for the device, the FLOPs, the bytes allocated and
the bytes copied between host and device, and for a compiled step its graph breaks, frames compiled and compile
time. Counts do not move with the machine's load, so a later comparison can tell a step that does different
work from a machine that got slower.

Two passes, each outside the timed samples:

* a counting pass: one call under ``torch.utils.flop_counter.FlopCounterMode`` and a dispatch mode that adds up
  the bytes each copy moves between host and device (``_CopyCounter``);
* a profiling pass: ``calls`` calls under ``torch.profiler`` (memory recorded), as many as the budget allows
  (``PROFILE_SHARE`` of the measurement's time, at most ``MAX_CALLS``, at least one).

The two cannot share a call: under the profiler, a dispatch mode's own re-dispatch records every op twice.

Counts are kept as totals over the profiled calls with ``calls`` beside them, so that a per-call count is the
exact fraction ``count / calls`` (``WorkProfile.per_call_counts``): two profiles taken with different call
counts still compare exactly. Times are kept as totals in seconds too, and are dropped at level ``counts``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Protocol

__all__ = [
    "MAX_CALLS",
    "PROFILE_LEVELS",
    "PROFILE_SHARE",
    "SYNC_KINDS",
    "CompileCounters",
    "OpStat",
    "WorkProfile",
    "compile_counters",
    "profile_step",
    "read_events",
]

#: ``full``: counts and times; ``counts``: one profiled call, counts only (no times kept); ``off``: no profile.
PROFILE_LEVELS: Final = ("full", "counts", "off")
#: The profile's budget: this share of the measurement's time (its warmup and samples).
PROFILE_SHARE: Final = 0.03
#: At most this many calls are profiled (the counts of one call are exact; more calls steady the times).
MAX_CALLS: Final = 5

#: CUDA runtime calls on which the host waits for the device, by the kind of synchronization they are.
_SYNC_CALLS: Final = {
    "cudaStreamSynchronize": "stream",
    "cudaDeviceSynchronize": "device",
    "cudaEventSynchronize": "event",
    "cudaStreamWaitEvent": "",  # a device-side wait: not the host's
}
#: What torch.profiler raises when it cannot start: another profiler already running (the user's own), or a
#: distributed setup it cannot read; then the record has no profile.
_PROFILER_REFUSED: Final = (RuntimeError, ValueError, AssertionError)
#: The kinds of host-device synchronization counted apart: ``dtoh_copy`` is a device-to-host copy (``.item()``,
#: ``.cpu()``, ``.tolist()``), which makes the host wait for the stream.
SYNC_KINDS: Final = ("stream", "device", "event", "dtoh_copy")


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
        seconds = data.get("seconds")
        return cls(str(data["name"]), int(data["count"]), None if seconds is None else float(seconds))


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

    ``ops``: aten ops; ``kernels``: CUDA kernels (empty on a CPU); ``runtime``: CUDA runtime API calls by name;
    ``syncs``: host-device synchronizations by kind (``SYNC_KINDS``); ``flops``: of one call, from
    ``FlopCounterMode`` (a separate call); ``bytes_allocated``: by the profiled calls (torch's allocators);
    ``bytes_copied``: of one call, between host and device by direction (``htod``, ``dtoh``); ``compile``:
    torch.compile's counters over the measurement, None where dynamo was never loaded; ``seconds``: what the
    profile cost; ``budget``: what it was allowed."""

    level: str
    calls: int
    ops: tuple[OpStat, ...] = ()
    kernels: tuple[OpStat, ...] = ()
    runtime: Mapping[str, int] = field(default_factory=dict)
    syncs: Mapping[str, int] = field(default_factory=dict)
    flops: int | None = None
    bytes_allocated: int | None = None
    bytes_copied: Mapping[str, int] = field(default_factory=dict)
    compile: CompileCounters | None = None
    seconds: float = 0.0
    budget: float = 0.0
    #: writes the profiled calls' trace (Chrome's JSON, which Perfetto and chrome://tracing open) to a path; kept
    #: in memory only (never in a results file), None for a profile read from a file
    write_trace: Callable[[str], object] | None = field(default=None, compare=False, repr=False)

    def per_call_counts(self) -> dict[str, Fraction]:
        """Every count per call, as an exact fraction, keyed ``op:NAME``, ``kernel:NAME``, ``runtime:NAME``,
        ``sync:KIND``; with ``flops``, ``bytes_allocated`` and ``bytes_copied:DIR`` (per call already or over the
        calls), and the compile counters. Two profiles did the same work where these are equal."""
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
        if self.bytes_allocated is not None:
            out["bytes_allocated"] = Fraction(self.bytes_allocated, calls)
        for direction, count in self.bytes_copied.items():
            out[f"bytes_copied:{direction}"] = Fraction(count)
        if self.compile is not None:
            out["graph_breaks"] = Fraction(self.compile.graph_breaks)
            out["compiles"] = Fraction(self.compile.compiles)
        return out

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
            "bytes_allocated": self.bytes_allocated,
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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> WorkProfile | None:
        if not isinstance(data, Mapping):
            return None
        compiled = data.get("compile")
        allocated = data.get("bytes_allocated")
        flops = data.get("flops")
        return cls(
            level=str(data.get("level", "full")),
            calls=int(data.get("calls", 0)),
            ops=tuple(OpStat.from_dict(s) for s in data.get("ops", ())),
            kernels=tuple(OpStat.from_dict(s) for s in data.get("kernels", ())),
            runtime={str(k): int(v) for k, v in (data.get("runtime") or {}).items()},
            syncs={str(k): int(v) for k, v in (data.get("syncs") or {}).items()},
            flops=None if flops is None else int(flops),
            bytes_allocated=None if allocated is None else int(allocated),
            bytes_copied={str(k): int(v) for k, v in (data.get("bytes_copied") or {}).items()},
            compile=None
            if not isinstance(compiled, Mapping)
            else CompileCounters(
                int(compiled.get("graph_breaks", 0)),
                int(compiled.get("compiles", 0)),
                None if compiled.get("compile_seconds") is None else float(compiled["compile_seconds"]),
            ),
            seconds=float(data.get("seconds", 0.0)),
            budget=float(data.get("budget", 0.0)),
        )


class ProfilerEvent(Protocol):
    """What is read of one of ``torch.profiler``'s events (``torch.autograd.profiler_util.FunctionEvent``)."""

    @property
    def name(self) -> str: ...

    @property
    def device_type(self) -> Any: ...

    @property
    def self_cpu_time_total(self) -> float: ...

    @property
    def device_time_total(self) -> float: ...

    @property
    def self_cpu_memory_usage(self) -> int: ...

    @property
    def self_device_memory_usage(self) -> int: ...


def read_events(
    events: Iterable[ProfilerEvent], *, level: str, calls: int
) -> tuple[tuple[OpStat, ...], tuple[OpStat, ...], dict[str, int], dict[str, int], int]:
    """The ops, kernels, runtime calls, synchronizations and bytes allocated in the profiler's event list.

    A CUDA kernel is an event on the device (its ``device_type`` is CUDA) that is no memory copy or set; a
    runtime call is a host event named ``cuda*``; a device-to-host copy is a device event ``Memcpy DtoH ...``.
    Times are the profiler's microseconds, kept in seconds (dropped at level ``counts``)."""
    ops: dict[str, list[float]] = {}
    kernels: dict[str, list[float]] = {}
    runtime: dict[str, int] = {}
    syncs = dict.fromkeys(SYNC_KINDS, 0)
    allocated = 0
    for event in events:
        name = event.name
        # An op's own allocations are its self memory (a free outside any op is a ``[memory]`` event of its own).
        allocated += max(int(event.self_cpu_memory_usage), 0) + max(int(event.self_device_memory_usage), 0)
        if name == "[memory]":
            continue
        on_device = "CUDA" in str(event.device_type)
        if on_device:
            if name.startswith("Memcpy DtoH"):
                syncs["dtoh_copy"] += 1
            if not name.startswith(("Memcpy", "Memset")):
                _add(kernels, name, float(event.device_time_total))
        elif name.startswith("aten::"):
            _add(ops, name, float(event.self_cpu_time_total))
        elif name.startswith("cuda"):
            runtime[name] = runtime.get(name, 0) + 1
            kind = _SYNC_CALLS.get(name)
            if kind:
                syncs[kind] += 1
    del calls  # totals over the calls are kept; the caller keeps ``calls`` beside them
    timed = level == "full"
    return (
        _stats(ops, timed),
        _stats(kernels, timed),
        dict(sorted(runtime.items())),
        syncs,
        allocated,
    )


def _add(table: dict[str, list[float]], name: str, microseconds: float) -> None:
    entry = table.setdefault(name, [0.0, 0.0])
    entry[0] += 1
    entry[1] += microseconds


def _stats(table: Mapping[str, list[float]], timed: bool) -> tuple[OpStat, ...]:
    """Sorted by name, so that two profiles of the same work have the same order."""
    return tuple(OpStat(name, int(count), us * 1e-6 if timed else None) for name, (count, us) in sorted(table.items()))


def compile_counters() -> CompileCounters | None:
    """torch.compile's counters now, or None where dynamo was never imported (importing it costs seconds, and a
    step that was never compiled has nothing to count)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return None
    counters = getattr(utils, "counters", {})
    breaks = sum(int(v) for v in counters.get("graph_break", {}).values())
    compiles = int(counters.get("frames", {}).get("total", 0))
    metrics = getattr(utils, "compilation_time_metrics", None)
    seconds = None
    if isinstance(metrics, Mapping):
        seconds = sum(float(t) for key, times in metrics.items() if "compile_inner" in str(key) for t in times)
    return CompileCounters(breaks, compiles, seconds)


def _counting_pass(fn: Callable[[], object]) -> tuple[int | None, dict[str, int]]:
    """FLOPs and host-device bytes of one call (None, {} where the counters fail on the step: an op that
    Python's dispatch cannot run must not fail a test whose timing went through)."""
    from torch.utils.flop_counter import FlopCounterMode

    copies = _CopyCounter()
    try:
        with FlopCounterMode(display=False) as flop_counter, copies:
            fn()
    except Exception:  # noqa: BLE001 - any failure of the counters leaves the figures unknown
        return None, {}
    return int(flop_counter.get_total_flops()), copies.moved


class _CopyCounter:
    """A dispatch mode that adds up the bytes each copy moves between the host and a device (by direction)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                counter.note(str(func.overloadpacket.__name__), args, out)
                return out

        self.mode = Mode()  # type: ignore[no-untyped-call]
        self.moved: dict[str, int] = {}

    def __enter__(self) -> _CopyCounter:
        self.mode.__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: object) -> None:
        self.mode.__exit__(*exc)  # type: ignore[no-untyped-call]

    def note(self, op: str, args: Any, out: Any) -> None:
        import torch

        if op not in ("copy_", "_to_copy", "_local_scalar_dense"):
            return
        source = args[1] if op == "copy_" else args[0]
        if not isinstance(source, torch.Tensor):
            return
        target = out.device if isinstance(out, torch.Tensor) else torch.device("cpu")
        direction = _direction(source.device, target)
        if direction:
            size = source.numel() * source.element_size()
            self.moved[direction] = self.moved.get(direction, 0) + size


def _direction(source: Any, target: Any) -> str:
    """``htod``, ``dtoh``, or empty for a copy that stays on one side (a device-to-device copy is no host's)."""
    src_host, dst_host = source.type == "cpu", target.type == "cpu"
    if src_host and not dst_host:
        return "htod"
    if dst_host and not src_host:
        return "dtoh"
    return ""


def profile_step(
    fn: Callable[[], object],
    *,
    level: str,
    step_seconds: float,
    budget: float,
    on_cuda: bool,
    compiled: CompileCounters | None = None,
    max_calls: int = MAX_CALLS,
    clock: Callable[[], float] = time.perf_counter,
) -> WorkProfile | None:
    """Profile ``fn`` (see the module's docstring); None at level ``off``.

    ``step_seconds`` is the measured time of one call; ``budget`` the seconds the profile may cost. Calls are
    added while the next one, at the cost the first profiled call showed, still fits the budget (level ``counts``:
    one call; ``max_calls`` caps them, 1 where every rank of a distributed run must make the same calls, whose
    collectives would otherwise wait for each other). The counting pass and one profiled call run whatever the
    budget: a profile needs one call, and ``seconds`` says what it cost."""
    if level == "off":
        return None
    import torch
    from torch.profiler import ProfilerActivity, profile

    if torch.autograd._profiler_enabled():  # type: ignore[attr-defined]
        return None  # the user's own profiler is running: a second would end its session
    on_cuda = on_cuda and torch.cuda.is_available()  # a stand-in for CUDA has no kernels to record
    start = clock()
    flops, copied = _counting_pass(fn)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    calls = 0
    try:
        with profile(activities=activities, profile_memory=True) as prof:
            first = clock()
            fn()
            calls = 1
            each = max(clock() - first, step_seconds)
            while level == "full" and calls < max_calls and clock() - start + each <= budget:
                fn()
                calls += 1
    except _PROFILER_REFUSED:
        if calls:  # the step itself failed under the profiler: that is the step's error, not the profiler's
            raise
        return None
    ops, kernels, runtime, syncs, allocated = read_events(prof.events(), level=level, calls=calls)
    return WorkProfile(
        level=level,
        calls=calls,
        ops=ops,
        kernels=kernels,
        runtime=runtime,
        syncs=syncs if on_cuda else {},
        flops=flops,
        bytes_allocated=allocated,
        bytes_copied=copied,
        compile=compiled,
        seconds=clock() - start,
        budget=budget,
        write_trace=prof.export_chrome_trace,
    )
