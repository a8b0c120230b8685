"""Make the fixtures of this folder from HolisticTraceAnalysis's test traces (README.md says what each holds).

    python tests/measuring/traces/trim.py PATH_TO_A_CLONE_OF_HolisticTraceAnalysis

reads each source trace at ``COMMIT`` (``git show``: a bare clone will do), keeps the window that the tests read,
drops what they do not read (flow arrows, kineto's own spans, args other than ``KEPT_ARGS``, the devices no event
ran on) and writes it beside this script as gzipped JSON, that Perfetto still opens. For each window it prints what
the trace itself shows there, counted here by ``cat`` and by ``correlation`` (a device activity belongs to the
window whose runtime call launched it), independently of the profile's reader: the tests' literal numbers.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

#: HolisticTraceAnalysis's commit the fixtures were made from (MIT licence, ``LICENSE`` beside this script).
COMMIT: Final = "f4d0062c382f42bd8a74838bcdad1916c7d5d2da"
#: The args the adapter reads (``kineto_trace.py``); kineto writes many more.
KEPT_ARGS: Final = ("External id", "correlation", "device", "stream", "Bytes", "Device Type", "Device Id")
#: The trace's top-level keys kept: what it ran on (``deviceProperties``, ``distributedInfo``, versions).
KEPT_KEYS: Final = (
    "schemaVersion",
    "deviceProperties",
    "distributedInfo",
    "cupti_version",
    "cuda_runtime_version",
    "cuda_driver_version",
    "displayTimeUnit",
    "baseTimeNanoseconds",
    "traceName",
)
#: kineto's activity types of work on the device (a trace's ``cat``).
DEVICE: Final = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "gpu_user_annotation"})
RUNTIME: Final = frozenset({"cuda_runtime", "cuda_driver"})
#: the device activities a runtime call launches (a ``gpu_user_annotation`` is a range's span, launched by none)
WORK: Final = DEVICE - {"gpu_user_annotation"}


@dataclass(frozen=True)
class Fixture:
    out: str
    #: the source trace, a path in HolisticTraceAnalysis at COMMIT
    source: str
    #: the window kept: the range of this name (the first of them, or the first inside the range of the second
    #: name); None keeps the whole trace
    window: tuple[str, str | None] | None = None
    #: keep only the ``cpu_op`` events that launched something (a runtime call or a device activity names them by
    #: its ``External id``): a step of 10,000 events is a fixture of 140 KB, of these 86 KB
    launching_ops_only: bool = False
    #: the ranges whose counts are printed (the tests' call ranges)
    counted: str | None = None


FIXTURES: Final = (
    Fixture("cuda_event_sync.json.gz", "tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz"),
    Fixture("triton_example.json.gz", "tests/data/triton_example/triton_example.json.gz", counted="Torch-Compiled"),
    Fixture(
        "alexnet.json.gz",
        "tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        counted="[param|pytorch.model.alex_net|0|0|0|",
    ),
    Fixture(
        "nccl_step5.json.gz",
        "tests/data/nccl_parser_config/nccl_data.json.gz",
        ("ProfilerStep#5", None),
        launching_ops_only=True,
    ),
    Fixture(
        "trace_diff_control_over_arch.json.gz",
        "tests/data/trace_diff/control/control.json.gz",
        ("## forward:over_arch ##", "ProfilerStep#1010"),
        counted="## forward:over_arch ##",
    ),
    Fixture(
        "trace_diff_test_over_arch.json.gz",
        "tests/data/trace_diff/test/test.json.gz",
        ("## forward:over_arch ##", "ProfilerStep#1010"),
        counted="## forward:over_arch ##",
    ),
)


def _range(events: Sequence[dict[str, Any]], name: str, inside: str | None) -> dict[str, Any]:
    outer = next(e for e in events if e.get("name") == inside) if inside else None
    for event in events:
        if (
            event.get("name") == name
            and event.get("ph") == "X"
            and (outer is None or outer["ts"] <= event["ts"] < outer["ts"] + outer["dur"])
        ):
            return event
    raise LookupError(f"no range {name!r}" + (f" inside {inside!r}" if inside else ""))


def _kept(events: Sequence[dict[str, Any]], fixture: Fixture) -> list[dict[str, Any]]:
    """The window's events: its host events (every thread's), the device activities its runtime calls launched,
    the GPU spans of its annotations."""
    events = [e for e in events if e.get("ph") in ("X", "i") and e.get("cat") not in (None, "Trace")]
    if fixture.window is None:
        kept = events
    else:
        window = _range(events, *fixture.window)
        lo, hi = window["ts"], window["ts"] + window["dur"]
        host = [e for e in events if e["cat"] not in DEVICE and lo <= e["ts"] < hi]
        in_host = {id(e) for e in host}
        launched = {e["args"].get("correlation") for e in host if e["cat"] in RUNTIME}
        frontend = {e["args"].get("External id") for e in host if e["cat"] in ("cpu_op", "user_annotation")}
        kept = []
        for event in events:
            args = event.get("args", {})
            if id(event) in in_host or (
                event["cat"] in DEVICE
                and (
                    args.get("correlation") in launched
                    or (event["cat"] == "gpu_user_annotation" and args.get("External id") in frontend)
                )
            ):
                kept.append(event)
    if fixture.launching_ops_only:
        named = {e["args"].get("External id") for e in kept if e["cat"] in DEVICE | RUNTIME}
        kept = [e for e in kept if e["cat"] != "cpu_op" or e["args"].get("External id") in named]
    return [_slim(e) for e in kept]


def _slim(event: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: event[k] for k in ("ph", "cat", "s", "name", "pid", "tid", "ts", "dur") if k in event}
    args = {k: event["args"][k] for k in KEPT_ARGS if k in event.get("args", {})}
    return {**out, "args": args} if args else out


def _devices(trace: dict[str, Any], events: Iterable[dict[str, Any]]) -> Any:
    """The trace's ``deviceProperties`` (a list, or the string of one in older traces) of the devices events ran on."""
    used = {e["args"].get("device") for e in events if e["cat"] in DEVICE and "args" in e}
    found = trace.get("deviceProperties")
    listed = found if isinstance(found, list) else ast.literal_eval(found) if isinstance(found, str) else []
    return [d for d in listed if d.get("id") in used]


def counts(events: Sequence[dict[str, Any]], lo: float, hi: float) -> dict[str, Counter[str]]:
    """What the trace shows between ``lo`` and ``hi`` (trace microseconds): its runtime calls by name and the
    device activities they launched, by ``cat`` and by name."""
    calls = [e for e in events if e["cat"] in RUNTIME and lo <= e["ts"] < hi]
    launched = {e["args"].get("correlation") for e in calls}
    work = [e for e in events if e["cat"] in WORK and e["args"].get("correlation") in launched]
    spans = [e for e in events if e["cat"] == "gpu_user_annotation" and lo <= e["ts"] < hi]
    return {
        "runtime": Counter(e["name"] for e in calls),
        "device": Counter(e["cat"] for e in work + spans),
        "copies and syncs": Counter(e["name"] for e in work if e["cat"] != "kernel"),
        "threads": Counter(str(e["tid"]) for e in calls),
    }


def _show(name: str, events: Sequence[dict[str, Any]], counted: str | None) -> None:
    ranges = [e for e in events if e["ph"] == "X" and e["cat"] in ("user_annotation", "cpu_op")]
    windows = [e for e in ranges if counted and e["name"].startswith(counted)] or [
        {"name": "(the whole trace)", "ts": min(e["ts"] for e in events), "dur": float("inf")}
    ]
    for window in windows:
        print(f"{name}: {window['name']} at {window['ts']}")
        for key, counter in counts(events, window["ts"], window["ts"] + window["dur"]).items():
            print(f"  {key}: {dict(sorted(counter.items()))}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("clone", type=Path, help="a clone of facebookresearch/HolisticTraceAnalysis")
    args = parser.parse_args(argv)
    here = Path(__file__).parent
    for fixture in FIXTURES:
        raw = subprocess.run(
            ["git", "-C", str(args.clone), "show", f"{COMMIT}:{fixture.source}"], capture_output=True, check=True
        ).stdout
        trace = json.loads(gzip.decompress(raw))
        events = _kept(trace["traceEvents"], fixture)
        top = {k: trace[k] for k in KEPT_KEYS if k in trace}
        top["deviceProperties"] = _devices(trace, events)
        text = json.dumps({**top, "traceEvents": events}, separators=(",", ":"))
        (here / fixture.out).write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
        print(f"{fixture.out}: {len(events)} events, {(here / fixture.out).stat().st_size // 1024} KB")
        _show(fixture.out, events, fixture.counted or (fixture.window[0] if fixture.window else None))


if __name__ == "__main__":
    main()
