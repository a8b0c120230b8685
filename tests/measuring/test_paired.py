"""Paired (interleaved) measurement: rounds, ratios and their CIs, with a fake backend and clock."""

from __future__ import annotations

import gc
import math
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import cast

import pytest

from pytest_gpuperf.measuring import (
    MeasureSettings,
    ModeUnsupported,
    Paired,
    SamplingPlan,
    Step,
    StepFactory,
    measure_on,
    measure_paired,
)
from pytest_gpuperf.measuring._backends import CUDA_PEAK, CudaBackend, MemoryProbe
from pytest_gpuperf.measuring._paired import SPACER_BYTES, WARM_CALLS, PairedStopRule, RoundSteps
from pytest_gpuperf.measuring._stats import estimate_median

from .fake_cuda_memory import FakeCudaMemory
from .fake_gpu import FakeGpu


@dataclass
class _Probe:
    peak_bytes: int | None = None
    method: str = "fake"
    reason: str | None = None
    resident_bytes: int | None = None
    transient_bytes: int | None = None
    transient_method: str = ""
    reserved_bytes: int | None = None
    devices: dict[str, int] = field(default_factory=dict)

    def calls(self) -> Iterator[int]:
        yield 0


@dataclass
class FakeBackend:
    """Each step's per-call time is its base time times the machine's current load, which drifts."""

    per_call: dict[Callable[[], object], float]
    load: Callable[[int], float] = lambda block: 1.0
    name: str = "fake"
    timer: str = "fake clock"
    min_block_time: float = 1e-3
    blocks: list[tuple[Callable[[], object], int]] = field(default_factory=list)
    last_host: float | None = None
    last_device: float | None = None
    last_short: bool = False
    last_tail: float | None = None

    def synchronize(self) -> None:
        return None

    def time_cold(self, fn: Callable[[], object], iterations: int) -> float:
        raise ModeUnsupported("no cold mode on the fake")

    def time_latency(self, fn: Callable[[], object], iterations: int, *, flush: bool = False) -> float:
        return self.time_block(fn, iterations)

    def capture(self, fn: Callable[[], object], calls: int = 1) -> Callable[[], object]:
        raise ModeUnsupported("no graph mode on the fake")

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        self.blocks.append((fn, iterations))
        for _ in range(iterations):
            fn()
        return self.per_call[fn] * iterations * self.load(len(self.blocks))

    def same_step(self, key: object) -> AbstractContextManager[None]:
        return nullcontext()

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
    # The fake times are exact, so the ratio converges at min_samples; max_time is a real-time cap, never reached:
    # a cap of 0.05 s could stop a busy machine's run short of min_samples.
    settings = MeasureSettings(max_time=60.0, warmup_time=0.01, min_time=0.001, min_samples=10)
    paired = measure_paired(steps, backend, settings, device="cpu")
    sampled = backend.blocks[-2 * len(paired.times["slow"]) :]
    firsts = [fn for fn, _ in sampled[::2]]
    assert _noop in firsts and _other in firsts, "the order alternates between rounds"
    for a, b in zip(sampled[::2], sampled[1::2], strict=True):
        assert a[1] == b[1], "both steps of a round run the same number of calls"
    assert len(paired.times["slow"]) == len(paired.times["fast"]) >= 10
    speedup = paired.speedup("fast", "slow")
    assert speedup.value == pytest.approx(2.0)
    m = paired.measurements["slow"]
    assert m.median == pytest.approx(0.002)
    assert m.memory.peak == 123 and m.memory.method == "fake"
    assert m.device_name == "Fake Device" and m.stop_reason.startswith("paired rounds:")


def test_a_load_that_drifts_between_rounds_does_not_bias_the_paired_ratio() -> None:
    # Load triples half-way through: sequential medians would be off; paired ratios are not.
    backend = FakeBackend({_noop: 0.003, _other: 0.001}, load=lambda block: 1.0 if block < 40 else 3.0)
    steps = {"a": Step(_noop, work={"FLOP": 6.0}), "b": Step(_other, work={"FLOP": 1.0})}
    settings = MeasureSettings(max_time=0.2, warmup_time=0.01, min_time=0.001, min_samples=20)
    paired = measure_paired(steps, backend, settings, device="cpu")
    ratio = paired.throughput_ratio("a", "b", "FLOP")
    assert ratio.value == pytest.approx(2.0)  # (6 / 3 ms) / (1 / 1 ms)
    assert ratio.low <= 2.0 <= ratio.high
    with pytest.raises(ValueError, match="does no 'samples' work"):
        paired.throughput_ratio("a", "b", "samples")


@dataclass
class PeriodicLoad(FakeBackend):
    """Every call of every build takes 2 ms, three times that in the busy blocks of a load that repeats every 8 blocks
    (four rounds of two steps), as another process's periodic work or a timer tick can on a loaded machine."""

    busy: frozenset[int] = frozenset()

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        self.blocks.append((fn, iterations))
        return 0.002 * iterations * (3.0 if (len(self.blocks) - 1) % 8 in self.busy else 1.0)


def test_a_load_with_the_period_of_a_fixed_order_does_not_fall_on_one_side() -> None:
    """Issue 23 item 11: ``ab`` read an unchanged 2 ms sleeper as 2.750 [2.714, 2.764], slower, at load 4 to 6.

    A fixed schedule (build order flipped every round, timing order every second round) repeats every four rounds,
    so a load of that period lands on the same side every round: here the blocks 1, 3, 4 and 6 of every 8, head's
    under the old schedule, which read A/A as 3.000 [3.000, 3.000]. With each pair of rounds timed in a random order
    and then its reverse, any load that depends on the position in the sequence falls on either side equally often.
    """
    backend = PeriodicLoad({}, busy=frozenset({1, 3, 4, 6}))

    def sleeper() -> Step:
        return Step(lambda: None, work={"items": 1.0})

    settings = MeasureSettings(
        max_time=0.3, warmup_time=0.01, min_time=0.001, min_samples=10, memory=False, profile="off"
    )
    paired = measure_paired({"base": sleeper, "head": sleeper}, backend, settings, device="cpu")
    ratios = [h / b for b, h in zip(paired.times["base"], paired.times["head"], strict=True)]
    head_slow, base_slow = sum(r > 2.0 for r in ratios), sum(r < 0.5 for r in ratios)
    assert head_slow + base_slow == len(ratios) >= 10, "one side of every round is in a busy block"
    ratio = paired.time_ratio("head", "base")
    # Every pair of rounds puts the load on each side once; a window may cut a pair at either end.
    assert abs(head_slow - base_slow) <= 2, (
        f"the load fell on head {head_slow} times, on base {base_slow}: A/A read {ratio.value:.3f} "
        f"[{ratio.low:.3f}, {ratio.high:.3f}]"
    )
    assert ratio.low <= 1.0 <= ratio.high


def test_observers_receive_each_steps_checks_and_names_rename_measurements() -> None:
    backend = FakeBackend({_noop: 0.001})
    seen: list[object] = []
    settings = MeasureSettings(max_time=0.02, warmup_time=0.01, min_time=0.001, memory=False)
    paired = measure_paired(
        {"x": Step(_noop, work={"samples": 1})},
        backend,
        settings,
        device="cpu",
        observers={"x": seen.append},
        names={"x": "n=512"},
    )
    m = paired.measurements["x"]
    assert m.name == "n=512" and m.memory.peak is None
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


def test_a_single_step_waits_for_its_own_median_to_reach_the_target() -> None:
    plan = SamplingPlan(target=0.01, min_samples=6, min_time=0.0, max_time=10.0)
    assert PairedStopRule(plan, {"only": [1.0, 1.5] * 5})([0.0] * 10, 1.0) == (False, False, "")
    stop, converged, reason = PairedStopRule(plan, {"only": [1.0] * 10})([0.0] * 10, 1.0)
    assert stop and converged and "the median's CI half-width" in reason
    stop, converged, reason = PairedStopRule(plan, {"only": [1.0, 1.5] * 5})([0.0] * 10, 11.0)
    assert stop and not converged


def test_estimate_is_the_median_with_a_distribution_free_ci() -> None:
    # in an order without runs above or below the median (a trend would cluster: test_stats.py)
    values = [float(v) for pair in zip(range(1, 11), range(21, 11, -1), strict=True) for v in pair] + [11.0]
    est = estimate_median("x", values, 0.95)
    assert est.value == 11.0 and est.count == 21 and est.worth == 21
    assert est.low < 11.0 < est.high and est.confidence >= 0.95
    assert "x 11 (" in str(est) and "from 21 paired rounds)" in str(est)
    assert estimate_median("even", [1.0, 2.0, 3.0, 4.0], 0.5).value == 2.5
    with pytest.raises(ValueError, match="no finite"):
        estimate_median("nan", [math.nan], 0.95)


def test_per_round_combines_the_steps_of_each_round() -> None:
    paired = Paired(
        times={"full": [1.0, 2.0, 1.0], "ckpt": [1.5, 2.5, 1.25], "fwd": [0.5, 0.5, 0.25]},
        work={"full": {}, "ckpt": {}, "fwd": {}},
    )
    extra = paired.per_round("extra forwards", lambda t: (t["ckpt"] - t["full"]) / t["fwd"])
    assert extra.value == 1.0 and extra.count == 3


def test_measure_paired_refuses_no_steps() -> None:
    with pytest.raises(ValueError, match="at least one step"):
        measure_paired({}, FakeBackend({}), MeasureSettings(), device="cpu")


# ---------------------------------------------------------------- steps rebuilt every round


@dataclass
class Build:
    """One build of a step: its name, its index, and whether gc was on while building."""

    name: str
    index: int
    gc_on: bool
    calls: int = 0


class Buffers:
    """Stands for a build's tensors: alive as long as the build's step function is."""


Alive = dict[str, list["weakref.ref[Buffers]"]]


@dataclass
class RecordingBackend(FakeBackend):
    """Every block takes 1 ms per call; records which build ran and whether gc was paused."""

    builds: weakref.WeakKeyDictionary[Callable[[], object], Build] = field(default_factory=weakref.WeakKeyDictionary)
    timed: list[tuple[Build, int, bool]] = field(default_factory=list)

    def time_block(self, fn: Callable[[], object], iterations: int) -> float:
        self.timed.append((self.builds[fn], iterations, gc.isenabled()))
        for _ in range(iterations):
            fn()
        return 0.001 * iterations


def recording_factories(backend: RecordingBackend, built: list[Build], alive: Alive) -> dict[str, StepFactory]:
    def factory(name: str) -> StepFactory:
        def build() -> Step:
            assert not alive[name] or alive[name][-1]() is not None, "the previous build lives while the next is built"
            assert sum(ref() is not None for ref in alive[name]) <= 1, "and the ones before it are released"
            info = Build(name, len(alive[name]), gc.isenabled())
            buffers = Buffers()
            built.append(info)
            alive[name].append(weakref.ref(buffers))

            def fn() -> None:
                assert buffers is not None
                info.calls += 1

            backend.builds[fn] = info
            return Step(fn, work={"items": 1.0})

        return build

    return {"base": factory("base"), "head": factory("head")}


def test_factories_are_rebuilt_every_round_in_random_build_order_and_paired_timing_order() -> None:
    backend = RecordingBackend({})
    built: list[Build] = []
    alive: Alive = {"base": [], "head": []}
    # Exact fake times: the ratio converges at min_samples; the real-time cap is never reached, even on a busy machine.
    settings = MeasureSettings(
        max_time=60.0, warmup_time=0.01, min_time=0.001, min_samples=12, memory=False, profile="off"
    )
    paired = measure_paired(recording_factories(backend, built, alive), backend, settings, device="cpu")
    rounds = len(built) // 2
    assert rounds >= 12 and len(backend.timed) == 2 * rounds
    assert len(paired.times["base"]) == len(paired.times["head"]) <= rounds
    firsts_timed = [backend.timed[2 * i][0].name for i in range(rounds)]
    pairs = list(zip(firsts_timed[::2], firsts_timed[1::2], strict=False))
    assert all(a != b for a, b in pairs), "the second round of a pair is timed in the reverse order of the first"
    for i in range(rounds):
        (a, _, _), (b, _, _) = backend.timed[2 * i : 2 * i + 2]
        assert {a.name, b.name} == {"base", "head"} and a.index == b.index == i, "each round times its own builds"
    assert all(b.gc_on for b in built), "gc runs while building"
    assert not any(on for _, _, on in backend.timed), "and is paused while timing"
    assert all(b.calls == WARM_CALLS + k for b, k, _ in backend.timed), "each build is called once before timing"
    assert not any(ref() is not None for refs in alive.values() for ref in refs), "nothing is kept after measuring"
    assert paired.time_ratio("head", "base").value == pytest.approx(1.0)


class SameRanks:
    """A Coordinator of one rank: blocks run as they are, every flag agreed as it is."""

    def wrap_block(self, run_block: Callable[[int], float]) -> Callable[[int], float]:
        return run_block

    def agree(self, flag: bool) -> bool:
        return flag


def test_ranks_of_a_distributed_run_draw_the_same_orders() -> None:
    """Every rank must time the same step in the same block (its collectives meet the other ranks'): the orders of a
    run with a coordinator come from a seed all ranks share."""
    orders = []
    for _ in range(2):
        backend = RecordingBackend({})
        built: list[Build] = []
        settings = MeasureSettings(max_time=60.0, warmup_time=0.01, min_time=0.001, memory=False, profile="off")
        factories = recording_factories(backend, built, {"base": [], "head": []})
        measure_paired(factories, backend, settings, device="cpu", coordinator=SameRanks())
        orders.append(([b.name for b in built], [build.name for build, _, _ in backend.timed]))
    (built_a, timed_a), (built_b, timed_b) = orders
    # The runs may stop after different numbers of rounds (warmup on the real clock); ranks agree on that.
    n, m = min(len(built_a), len(built_b)), min(len(timed_a), len(timed_b))
    assert built_a[:n] == built_b[:n] and timed_a[:m] == timed_b[:m] and m >= 20


def test_fixed_steps_and_factories_mix_and_a_factory_must_return_a_step() -> None:
    backend = RecordingBackend({})
    built: list[Build] = []
    alive: Alive = {"base": [], "head": []}
    factories = recording_factories(backend, built, alive)
    fixed = factories["base"]()
    # No reads after the rounds: those build each factory once more, alone (the factory's checks are of the rounds).
    settings = MeasureSettings(max_time=0.02, warmup_time=0.01, min_time=0.001, memory=False, profile="off")
    paired = measure_paired({"base": fixed, "head": factories["head"]}, backend, settings, device="cpu")
    assert {b.name for b in built[1:]} == {"head"} and paired.measurements["base"].work == {"items": 1.0}
    with pytest.raises(TypeError, match="the factory of step 'x' returned NoneType, not a Step"):
        measure_paired({"x": cast(StepFactory, lambda: None)}, backend, settings, device="cpu")


def test_every_build_gets_a_fresh_spacer_of_random_size_kept_for_its_round() -> None:
    """Spacers shift each build to other memory; they live exactly as long as the round's builds."""
    events: list[str] = []
    spacers: list[tuple[int, weakref.ref[Buffers]]] = []

    def spacer(nbytes: int) -> Buffers:
        events.append("spacer")
        buffer = Buffers()
        spacers.append((nbytes, weakref.ref(buffer)))
        return buffer

    def factory(name: str) -> StepFactory:
        def build() -> Step:
            events.append(name)
            return Step(lambda: None, work={"items": 1.0})

        return build

    rounds = RoundSteps({"base": factory("base"), "head": factory("head")}, spacer=spacer)
    orders: set[str] = set()
    for index in range(20):
        rounds.for_round(index)
        assert events[-4:] in (["spacer", "base", "spacer", "head"], ["spacer", "head", "spacer", "base"])
        orders.add(events[-3])
        assert [ref() is not None for _, ref in spacers] == [False] * (2 * index) + [True, True], "this round's only"
    assert orders == {"base", "head"}, "either is built first"
    sizes = [nbytes for nbytes, _ in spacers]
    assert all(0 <= n < SPACER_BYTES for n in sizes) and len(set(sizes)) == len(sizes), "random sizes"
    assert max(sizes) - min(sizes) > SPACER_BYTES // 2, "spread over the whole range"


def test_spacers_are_untouched_tensors_on_the_device() -> None:
    import torch

    from pytest_gpuperf.measuring._paired import _spacer

    buffer = _spacer("cpu")(1000)
    assert isinstance(buffer, torch.Tensor) and buffer.device.type == "cpu" and buffer.numel() == 1000


# ---------------------------------------------------------------- each step's memory is its own (issue 34)

MiB = 1 << 20


class Resident:
    """A build's tensors on the stand-in allocator: allocated when made, freed when released."""

    def __init__(self, memory: FakeCudaMemory, nbytes: int) -> None:
        memory.alloc(nbytes)
        weakref.finalize(self, memory.free, nbytes)


@dataclass
class OnFakeCuda:
    """The stand-in GPU with the stand-in allocator's statistics, and steps that hold memory on it."""

    gpu: FakeGpu = field(default_factory=FakeGpu)
    memory: FakeCudaMemory = field(default_factory=FakeCudaMemory)

    def backend(self) -> CudaBackend:
        return CudaBackend(0, torch_module=self.memory.install(self.gpu.torch()), clock=self.gpu.clock)

    def holding(self, resident: int, transient: int = 0) -> StepFactory:
        """A step that keeps ``resident`` bytes from its build on and allocates ``transient`` more in each call."""

        def build() -> Step:
            held = Resident(self.memory, resident)

            def fn() -> None:
                assert held is not None
                self.memory.alloc(transient)
                self.gpu.kernel("k", 100e-6)
                self.memory.free(transient)

            return Step(fn, {})

        return build


MEMORY_ROUNDS = MeasureSettings(max_time=60.0, warmup_time=0.01, min_time=0.001, min_samples=10, profile="off")


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> OnFakeCuda:
    """Spacers allocated on the stand-in allocator (up to 8 MiB each), as they are on the GPU."""
    on = OnFakeCuda()
    monkeypatch.setattr(
        "pytest_gpuperf.measuring._paired._spacer", lambda device: lambda nbytes: Resident(on.memory, nbytes)
    )
    return on


def test_a_factorys_peak_in_paired_rounds_is_its_peak_measured_alone(fake_cuda: OnFakeCuda) -> None:
    """a holds 128 MiB and allocates 96 MiB more per call, b holds 512 MiB: each read its peak while the other's build
    and the spacers were alive (a read 736 MiB and more, b 608 MiB and more)."""
    factories = {"a": fake_cuda.holding(128 * MiB, 96 * MiB), "b": fake_cuda.holding(512 * MiB)}
    paired = measure_paired(factories, fake_cuda.backend(), MEMORY_ROUNDS, device="cpu")
    assert fake_cuda.memory.devices[0].allocated == 0, "nothing is kept after measuring"
    for name, factory in factories.items():
        alone = measure_on(factory().fn, fake_cuda.backend(), MEMORY_ROUNDS, name=name, device="cpu", work={})
        memory = paired.measurements[name].memory
        assert memory.peak == alone.memory.peak and memory.resident == alone.memory.resident, name
        assert memory.method == alone.memory.method == CUDA_PEAK
    assert paired.measurements["a"].memory.peak == 224 * MiB
    assert paired.measurements["b"].memory.peak == 512 * MiB


def test_a_step_object_is_read_with_what_the_caller_keeps_alive_and_says_so(fake_cuda: OnFakeCuda) -> None:
    """A Step given as an object stays alive while the others are read (its caller holds it): its memory is in their
    figures, as in any measurement made while the caller holds it, and their method says whose it is."""
    kept = fake_cuda.holding(512 * MiB)()
    paired = measure_paired(
        {"a": fake_cuda.holding(128 * MiB, 96 * MiB), "b": kept}, fake_cuda.backend(), MEMORY_ROUNDS, device="cpu"
    )
    a, b = paired.measurements["a"].memory, paired.measurements["b"].memory
    assert (a.peak, a.resident, a.transient) == ((128 + 512 + 96) * MiB, (128 + 512) * MiB, 96 * MiB)
    assert a.method == f"{CUDA_PEAK}, with the Step object of b resident (kept alive by the caller)"
    assert a.gated == (a.peak, "cuda allocator peak")
    assert (b.peak, b.method) == (512 * MiB, CUDA_PEAK), "a factory's builds are released before b is read"
    alone = measure_on(kept.fn, fake_cuda.backend(), MEMORY_ROUNDS, name="b", device="cpu", work={})
    assert alone.memory.peak == b.peak
