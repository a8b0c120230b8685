"""Synthetic runs and records for the gate's tests: exact medians, chosen load, chosen fingerprints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf.measuring import Measurement, Warmup, readings
from pytest_gpuperf.results import Evidence, Fingerprint, Record, ResultsDir, Run

FINGERPRINT: dict[str, Any] = {
    "python": "3.11.9",
    "implementation": "cpython",
    "platform": "Linux-6.1-x86_64",
    "machine": "x86_64",
    "hostname": "box-1",
    "cpu_model": "AMD EPYC 9R14",
    "cpu_count": 2,
    "torch": "2.13.0+cpu",
    "torch_cuda": None,
    "cudnn": None,
    "threads": 2,
    "git": {"commit": "a" * 40, "branch": "main", "dirty": False},
}

QUIET: dict[str, Any] = {"seconds": 1.0, "cpus": 2, "background_cores": 0.0, "own_cores": 2.0}
BUSY: dict[str, Any] = {"seconds": 1.0, "cpus": 2, "background_cores": 1.0, "own_cores": 1.0}


def samples_around(median: float, n: int = 41, spread: float = 0.004) -> tuple[float, ...]:
    """``n`` samples whose median is exactly ``median``, spread evenly over +-``spread``."""
    return tuple(median * (1.0 + spread * (2.0 * i / (n - 1) - 1.0)) for i in range(n))


def make_measurement(name: str, samples: Sequence[float], **fields: Any) -> Measurement:
    """A Measurement of exactly these samples (seconds per call); ``fields`` override the defaults, and those named
    as a reading (``clocks=``, ``energy=``, ``memory=``, ``profile=``) are what it read."""
    named = {r.name: fields.pop(r.name) for r in readings() if r.name in fields}
    read = {name: value for name, value in named.items() if value is not None}
    values: dict[str, Any] = {
        "name": name,
        "device": "cpu",
        "device_name": "AMD EPYC 9R14",
        "samples": tuple(samples),
        "iterations": 1,
        "warmup": Warmup(3, 3, 0.01, True, (samples[0],) * 3),
        "converged": True,
        "stop_reason": "CI half-width within target",
        "sampling_seconds": 1.0,
        "target": 0.01,
        "confidence": 0.95,
        "work": {"FLOP": 1e9},
        "timer": "perf_counter_ns",
    }
    return Measurement(**{**values, **fields, "readings": read})


def make_record(
    median: float,
    *,
    test: str = "test_x.py::test_step[cpu]",
    threads: int = 2,
    load: Mapping[str, Any] | None = QUIET,
    params: Mapping[str, str] | None = None,
    work: Mapping[str, float] | None = None,
    gate: Mapping[str, Any] | None = None,
    rounds: Sequence[float] = (),
) -> Record:
    measurement = make_measurement(test, samples_around(median), work=dict(work or {"FLOP": 1e9}), threads=threads)
    extra: dict[str, Any] = {}
    if load is not None:
        extra["load"] = dict(load)
    if rounds:
        extra["rounds"] = [{"samples": list(samples_around(r)), "load": dict(QUIET)} for r in rounds]
    extra.update(gate or {})
    return Record(
        test=test, device="cpu", measurement=measurement, params=dict(params or {}), evidence=Evidence.from_dict(extra)
    )


def make_run(
    *records: Record,
    fingerprint: Mapping[str, Any] | None = None,
    interrupted: bool = False,
    failures: Mapping[str, str] | None = None,
) -> Run:
    return Run(
        created="2026-11-22T03:00:00+00:00",
        fingerprint=Fingerprint.from_dict(fingerprint or FINGERPRINT),
        settings={},
        records=list(records),
        interrupted=interrupted,
        failures=dict(failures or {}),
    )


def with_fingerprint(**changes: Any) -> dict[str, Any]:
    return {**FINGERPRINT, **changes}


def save_main_baseline(root: Path, median: float = 10e-3, runs: int = 3) -> None:
    """Baseline ``main`` in ``root/.gpuperf``: ``runs`` runs of one synthetic record at ``median``."""
    store = ResultsDir(root / ".gpuperf")
    for _ in range(runs):
        store.save_baseline("main", make_run(make_record(median)))
