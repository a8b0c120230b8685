"""Paired (interleaved) measurement: rounds, ratios and their CIs, with a fake backend and clock."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from pytest_gpuperf.devices import MemoryProbe
from pytest_gpuperf.sampling import SamplingPlan
from pytest_gpuperf.settings import Settings
from pytest_gpuperf.workload import Step
from suites.paired import Estimate, Paired, PairedStopRule, measure_paired


@dataclass
class _Probe:
    peak_bytes: int | None = None
    method: str = "fake"


@dataclass
class FakeBackend:
    """Each step's per-call time is its base time times the machine's current load, which drifts."""

    per_call: dict[Callable[[], object], float]
    load: Callable[[int], float] = lambda block: 1.0
    name: str = "fake"
    timer: str = "fake clock"
    min_block_time: float = 1e-3
    blocks: list[tuple[Callable[[], object], int]] = field(default_factory=list)

    def synchronize(self) -> None:
        return None

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        self.blocks.append((fn, iterations))
        for _ in range(iterations):
            fn()
        return self.per_call[fn] * iterations * self.load(len(self.blocks))

    @contextmanager
    def track_memory(self) -> Iterator[MemoryProbe]:
        probe = _Probe(peak_bytes=123)
        yield probe

    def describe(self) -> dict[str, object]:
        return {"name": "Fake Device"}


def _noop() -> None:
    return None


def _other() -> None:
    return None


def test_rounds_alternate_order_and_use_equal_call_counts() -> None:
    backend = FakeBackend({_noop: 0.002, _other: 0.001})
    steps = {"slow": Step(_noop, work={"samples": 10}), "fast": Step(_other, work={"samples": 10})}
    settings = Settings(max_time=0.05, warmup_time=0.01, min_time=0.001, min_samples=10)
    paired = measure_paired(steps, backend, settings, device="cpu")
    sampled = backend.blocks[-2 * len(paired.times["slow"]) :]
    firsts = [fn for fn, _ in sampled[::2]]
    assert _noop in firsts and _other in firsts, "the order alternates between rounds"
    for a, b in zip(sampled[::2], sampled[1::2], strict=True):
        assert a[1] == b[1], "both steps of a round run the same number of calls"
    assert len(paired.times["slow"]) == len(paired.times["fast"]) >= 10
    speedup = paired.speedup("fast", "slow")
    assert speedup.median == pytest.approx(2.0)
    m = paired.measurements["slow"]
    assert m.median == pytest.approx(0.002)
    assert m.peak_memory == 123 and m.memory_method == "fake"
    assert m.device_name == "Fake Device" and m.stop_reason.startswith("paired rounds:")


def test_a_load_that_drifts_between_rounds_does_not_bias_the_paired_ratio() -> None:
    # Load triples half-way through: sequential medians would be off; paired ratios are not.
    backend = FakeBackend({_noop: 0.003, _other: 0.001}, load=lambda block: 1.0 if block < 40 else 3.0)
    steps = {"a": Step(_noop, work={"FLOP": 6.0}), "b": Step(_other, work={"FLOP": 1.0})}
    settings = Settings(max_time=0.2, warmup_time=0.01, min_time=0.001, min_samples=20)
    paired = measure_paired(steps, backend, settings, device="cpu")
    ratio = paired.throughput_ratio("a", "b", "FLOP")
    assert ratio.median == pytest.approx(2.0)  # (6 / 3 ms) / (1 / 1 ms)
    assert ratio.low <= 2.0 <= ratio.high
    with pytest.raises(ValueError, match="does no 'samples' work"):
        paired.throughput_ratio("a", "b", "samples")


def test_observers_receive_each_steps_checks_and_names_rename_measurements() -> None:
    backend = FakeBackend({_noop: 0.001})
    seen: list[object] = []
    settings = Settings(max_time=0.02, warmup_time=0.01, min_time=0.001, memory=False)
    paired = measure_paired(
        {"x": Step(_noop, work={"samples": 1})},
        backend,
        settings,
        device="cpu",
        observers={"x": seen.append},
        names={"x": "n=512"},
    )
    m = paired.measurements["x"]
    assert m.name == "n=512" and m.peak_memory is None
    m.assert_latency(at_most=1.0)
    assert len(seen) == 1


def test_stop_rule_waits_for_every_ratio_to_reach_the_target() -> None:
    plan = SamplingPlan(target=0.01, min_samples=6, min_time=0.0, max_time=10.0)
    times = {"base": [1.0] * 10, "steady": [2.0] * 10, "noisy": [1.0, 3.0] * 5}
    rule = PairedStopRule(plan, times)
    assert rule([0.0] * 10, 1.0) == (False, False, "")
    times["noisy"] = [1.5] * 10
    stop, converged, reason = rule([0.0] * 10, 1.0)
    assert stop and converged and "every ratio" in reason
    stop, converged, reason = PairedStopRule(plan, {"a": [1.0, 2.0] * 5, "b": [1.0] * 10})([0.0] * 10, 11.0)
    assert stop and not converged and "time cap" in reason


def test_estimate_is_the_median_with_a_distribution_free_ci() -> None:
    values = [float(v) for v in range(1, 22)]
    est = Estimate.of("x", values, 0.95)
    assert est.median == 11.0 and est.rounds == 21
    assert est.low < 11.0 < est.high and est.confidence >= 0.95
    assert "x 11 (" in str(est) and "21 paired rounds" in str(est)
    assert Estimate.of("even", [1.0, 2.0, 3.0, 4.0], 0.5).median == 2.5
    with pytest.raises(ValueError, match="no finite"):
        Estimate.of("nan", [math.nan], 0.95)


def test_per_round_combines_the_steps_of_each_round() -> None:
    paired = Paired(
        times={"full": [1.0, 2.0, 1.0], "ckpt": [1.5, 2.5, 1.25], "fwd": [0.5, 0.5, 0.25]},
        work={"full": {}, "ckpt": {}, "fwd": {}},
    )
    extra = paired.per_round("extra forwards", lambda t: (t["ckpt"] - t["full"]) / t["fwd"])
    assert extra.median == 1.0 and extra.rounds == 3


def test_measure_paired_refuses_no_steps() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        measure_paired({}, FakeBackend({}), Settings(), device="cpu")
