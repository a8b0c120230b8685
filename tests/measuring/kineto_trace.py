"""Kineto's JSON traces (``torch.profiler``'s ``export_chrome_trace``, what Perfetto opens) presented as the profiler's
raw events: each trace event as a ``TraceEvent``, with the accessors of torch's ``_KinetoEvent`` that the profile's
reader (``read_events``) calls. So the reader can be fed what real GPUs recorded (``traces/``).

How a trace event maps to the accessors (a trace's ``cat`` is kineto's activity type):

* a frontend event (``cpu_op``: a torch op; ``user_annotation``: a ``record_function`` range) has its own id,
  ``args["External id"]``, as ``correlation_id()``, and ``linked_correlation_id()`` 0;
* a runtime or driver call (``cuda_runtime``, ``cuda_driver``) and a device activity (``kernel``, ``gpu_memcpy``,
  ...) has ``args["correlation"]`` (the call's id, shared by the activity it launched) as ``correlation_id()``, and
  the frontend event it ran under, ``args["External id"]``, as ``linked_correlation_id()``. Kineto writes a call
  it linked to no frontend event without ``External id`` (from 2024) or with its own ``correlation`` there (before):
  both read 0, as torch's raw event does (``linkedActivity()`` is null);
* device activities (``DEVICE_ACTIVITIES``) are on CUDA, their device and stream ``args["device"]`` and
  ``args["stream"]``; every other event is on the CPU, its device the process and its resource the thread;
* ``start_ns()`` is ``baseTimeNanoseconds`` (where the trace has it) plus ``ts`` in nanoseconds, exact (the trace
  writes microseconds to three decimals); ``duration_ns()`` is ``dur`` in nanoseconds; ``start_thread_id()`` is the
  trace's ``tid`` (torch's raw event numbers threads from 1 instead: the same partition of events);
* ``nbytes()`` is a ``[memory]`` event's ``args["Bytes"]`` (negative: a free), 0 for every other event; its device
  is its ``Device Type`` (0 the CPU, 1 CUDA) and ``Device Id``;
* ``is_user_annotation()`` for ``user_annotation`` and ``gpu_user_annotation``, ``is_python_function()`` for
  ``python_function``.

Flow arrows, metadata and kineto's own spans (``cat`` ``Trace``) are no events of torch's, and are left out.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from pytest_gpuperf.measuring._profiler import CALL_RANGE

__all__ = ["DEVICE_ACTIVITIES", "STEPS", "TRACES", "TraceEvent", "events_of", "load"]

#: kineto's activity types of work on the device (torch's ``deviceTypeFromActivity`` puts them on CUDA).
DEVICE_ACTIVITIES: Final = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync", "cuda_profiler_range"}
)
#: The ranges ``torch.profiler.profile.step()`` opens, one per step: in a test, a step stands for a call.
STEPS: Final = r"ProfilerStep#\d+"
#: The folder of the real traces (``traces/README.md``).
TRACES: Final = Path(__file__).parent / "traces"

_FRONTEND: Final = frozenset({"cpu_op", "user_annotation"})
#: A ``[memory]`` event's ``Device Type`` (c10's ``DeviceType``): where the bytes were allocated.
_MEMORY_DEVICES: Final = {0: "DeviceType.CPU", 1: "DeviceType.CUDA"}
_HOST_KINDS: Final = frozenset({"X", "i"})


@dataclass(frozen=True)
class TraceEvent:
    """One event of a kineto trace, with the accessors of torch's raw ``_KinetoEvent`` (the module's docstring
    says how each is read). Times in nanoseconds."""

    label: str
    start: int = 0
    span: int = 0
    device: str = "DeviceType.CPU"
    size: int = 0
    thread: int = 1
    activity: str = "cpu_op"
    correlation: int = 0
    linked: int = 0
    index: int = 0
    resource: int = 0
    #: ``is_user_annotation`` and ``is_python_function`` where they are not read from the activity type (None: they
    #: are): an older torch's events name no activity type, and still say these
    annotation: bool | None = None
    python: bool | None = None

    def name(self) -> str:
        return self.label

    def activity_type(self) -> str:
        return self.activity

    def device_type(self) -> str:
        return self.device

    def start_ns(self) -> int:
        return self.start

    def duration_ns(self) -> int:
        return self.span

    def start_thread_id(self) -> int:
        return self.thread

    def nbytes(self) -> int:
        return self.size

    def is_user_annotation(self) -> bool:
        if self.annotation is not None:
            return self.annotation
        return self.activity in ("user_annotation", "gpu_user_annotation")

    def is_python_function(self) -> bool:
        return self.python if self.python is not None else self.activity == "python_function"

    def correlation_id(self) -> int:
        return self.correlation

    def linked_correlation_id(self) -> int:
        return self.linked

    def device_index(self) -> int:
        return self.index

    def device_resource_id(self) -> int:
        return self.resource


def load(path: str | Path) -> dict[str, Any]:
    """A trace file (gzipped or not), its numbers kept exact (``Decimal``: a ``ts`` of 16 digits and three
    decimals is more than a float holds)."""
    raw = Path(path).read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    trace: dict[str, Any] = json.loads(text, parse_float=Decimal)
    return trace


def events_of(trace: Mapping[str, Any], *, calls: str | None) -> list[TraceEvent]:
    """The trace's events as torch's raw events. Host ranges whose name matches ``calls`` (a regular expression,
    the whole name: ``STEPS``) are presented as call ranges (``CALL_RANGE``, a ``user_annotation``), and the GPU
    spans of those ranges (kineto's ``gpu_user_annotation`` of the same ``External id``) take that name too, as
    ``record_function(CALL_RANGE)``'s would. Where matching ranges nest on a thread, the innermost stand for calls
    (a harness's range around the call, ``warmup|forward`` around ``warmup|forward``, is no call)."""
    base = int(trace.get("baseTimeNanoseconds") or 0)
    raw = [e for e in trace["traceEvents"] if e.get("ph") in _HOST_KINDS and e.get("cat") not in (None, "Trace")]
    ranges = _call_ranges(raw, calls) if calls else set()
    spans = {_args(raw[i]).get("External id") for i in ranges}
    out = []
    for at, event in enumerate(raw):
        presented = _event(event, base)
        if at in ranges or (presented.activity == "gpu_user_annotation" and presented.linked in spans):
            presented = _as_call(presented)
        out.append(presented)
    return out


def _args(event: Mapping[str, Any]) -> Mapping[str, Any]:
    args = event.get("args")
    return args if isinstance(args, Mapping) else {}


def _ns(microseconds: Any) -> int:
    return int(Decimal(microseconds or 0) * 1000)


def _event(event: Mapping[str, Any], base: int) -> TraceEvent:
    cat, args = str(event["cat"]), _args(event)
    common: dict[str, Any] = {
        "label": str(event.get("name", "")),
        "activity": cat,
        "start": base + _ns(event.get("ts")),
        "span": _ns(event.get("dur")),
        "thread": int(event.get("tid") or 0),
    }
    if cat in _FRONTEND:
        pid = _int(event.get("pid"))
        return TraceEvent(**common, index=pid, resource=common["thread"], correlation=_external(args))
    if cat in DEVICE_ACTIVITIES or cat in ("cuda_runtime", "cuda_driver"):
        correlation = int(args.get("correlation") or 0)
        linked = _external(args)
        if linked == correlation:  # kineto wrote its own id: linked to no frontend event
            linked = 0
        if cat in DEVICE_ACTIVITIES:
            stream = int(args.get("stream", common["thread"]))
            return TraceEvent(
                **common,
                device="DeviceType.CUDA",
                index=int(args.get("device", _int(event.get("pid")))),
                resource=stream,
                correlation=correlation,
                linked=linked,
            )
        return TraceEvent(
            **common, index=_int(event.get("pid")), resource=common["thread"], correlation=correlation, linked=linked
        )
    if common["label"] == "[memory]":
        return TraceEvent(
            **common,
            device=_MEMORY_DEVICES.get(int(args.get("Device Type", 0)), "DeviceType.CPU"),
            index=int(args.get("Device Id", -1)),
            resource=common["thread"],
            size=int(args.get("Bytes", 0)),
        )
    return TraceEvent(**common, index=_int(event.get("pid")), resource=common["thread"])


def _external(args: Mapping[str, Any]) -> int:
    return int(args.get("External id") or 0)


def _int(value: Any) -> int:
    """A ``pid`` or ``tid``: a number, or a name (kineto's own rows: ``"Spans"``), which reads 0."""
    return value if isinstance(value, int) else 0


def _as_call(event: TraceEvent) -> TraceEvent:
    activity = "gpu_user_annotation" if event.activity == "gpu_user_annotation" else "user_annotation"
    return replace(event, label=CALL_RANGE, activity=activity)


def _call_ranges(raw: Sequence[Mapping[str, Any]], calls: str) -> set[int]:
    """The indexes of the host ranges that stand for calls: those whose name matches, less those that hold another."""
    pattern = re.compile(calls)
    found = [
        (i, int(e.get("tid") or 0), Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e.get("dur") or 0))
        for i, e in enumerate(raw)
        if e.get("ph") == "X" and e.get("cat") not in DEVICE_ACTIVITIES and pattern.fullmatch(str(e.get("name", "")))
    ]
    return {
        i
        for i, tid, start, end in found
        if not any(t == tid and start <= s and e <= end and (s, e) != (start, end) for _, t, s, e in found)
    }
