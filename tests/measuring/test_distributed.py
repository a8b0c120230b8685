"""Rank-aware timing: the coordinator's rules with a scripted other rank, then a real 2-process gloo world."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from pytest_gpuperf.measuring import (
    DistributedError,
    SamplingPlan,
    TorchDistCoordinator,
    World,
    backend_for_kind,
    scaling_sizes,
    spawn,
)
from pytest_gpuperf.measuring._sampling import sample


class FakeDist:
    """``torch.distributed`` for this rank and one scripted other rank: MAX combines with the other's values."""

    class ReduceOp:
        MAX = "max"

    def __init__(self, other: Callable[[list[float]], list[float]]) -> None:
        self.other = other
        self.calls: list[str] = []

    def barrier(self, group: Any = None) -> None:
        self.calls.append("barrier")

    def all_reduce(self, tensor: torch.Tensor, op: Any = None, group: Any = None) -> None:
        self.calls.append("all_reduce")
        theirs = torch.tensor(self.other(tensor.tolist()), dtype=tensor.dtype)
        tensor.copy_(torch.maximum(tensor, theirs))


def test_a_block_waits_at_a_barrier_and_the_slowest_rank_counts() -> None:
    fake = FakeDist(lambda mine: [mine[0] * 3, *mine[1:]] if len(mine) == 3 else mine)
    block = TorchDistCoordinator(dist=fake).wrap_block(lambda iterations: 0.5 * iterations)
    assert block(4) == pytest.approx(6.0)
    assert fake.calls == ["barrier", "all_reduce"]


def test_different_iteration_counts_on_two_ranks_are_refused() -> None:
    fake = FakeDist(lambda mine: [mine[0], mine[1] + 1, mine[2] - 1] if len(mine) == 3 else mine)
    block = TorchDistCoordinator(dist=fake).wrap_block(lambda iterations: 1.0)
    with pytest.raises(DistributedError, match=r"different iteration counts in one block \(4 to 5\)"):
        block(4)


def test_a_stop_on_any_rank_stops_every_rank() -> None:
    assert TorchDistCoordinator(dist=FakeDist(lambda mine: [1.0])).agree(False) is True
    assert TorchDistCoordinator(dist=FakeDist(lambda mine: [0.0])).agree(False) is False
    assert TorchDistCoordinator(dist=FakeDist(lambda mine: [0.0])).agree(True) is True


def test_the_sampler_under_a_coordinator_sees_the_slower_ranks_times() -> None:
    # The other rank is slower (and noisy) and wants to stop at its 12th decision.
    decisions = {"n": 0, "blocks": 0}

    def other(mine: list[float]) -> list[float]:
        if len(mine) == 3:
            decisions["blocks"] += 1
            return [mine[0] * (2 + 0.1 * (decisions["blocks"] % 3)), mine[1], mine[2]]
        decisions["n"] += 1
        return [1.0 if decisions["n"] >= 12 else 0.0]

    coordinator = TorchDistCoordinator(dist=FakeDist(other))
    plan = SamplingPlan(target=1e-9, min_samples=3, min_time=0.0, max_time=100.0, warmup_time=100.0)
    result = sample(
        coordinator.wrap_block(lambda k: 0.001 * k), plan, clock=iter(range(10_000)).__next__, agree=coordinator.agree
    )
    assert result.samples and all(0.002 <= s <= 0.0022 + 1e-12 for s in result.samples)
    assert result.stop_reason == "stopped with the other ranks" and not result.converged


def test_scaling_sizes_and_backends() -> None:
    assert scaling_sizes(1) == [1]
    assert scaling_sizes(2) == [1, 2]
    assert scaling_sizes(6) == [1, 2, 4, 6]
    assert scaling_sizes(8) == [1, 2, 4, 8]
    with pytest.raises(ValueError, match="at least 1"):
        scaling_sizes(0)
    assert backend_for_kind("cpu") == "gloo" and backend_for_kind("cuda") == "nccl"
    with pytest.raises(DistributedError, match="no distributed backend for device kind 'mps'"):
        backend_for_kind("mps")


def test_world_from_torchrun_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert World.from_env("gloo") is None
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert World.from_env("nccl") == World(3, 4, 1, "nccl")
    monkeypatch.setenv("RANK", "three")
    with pytest.raises(DistributedError, match="expected whole numbers"):
        World.from_env("gloo")


# ---------------------------------------------------------------- a real world of two processes


def _agreeing_world(world: World) -> dict[str, Any]:
    """Rank 1 is slower; both ranks must end with the same samples, counts and stop."""
    torch.set_num_threads(1)
    coordinator = TorchDistCoordinator()

    def local_block(iterations: int) -> float:
        start = time.perf_counter()
        time.sleep(0.002 * iterations * (2 if world.rank == 1 else 1))
        return time.perf_counter() - start

    plan = SamplingPlan(target=0.5, min_samples=5, min_time=0.01, max_time=1.0, warmup_time=0.2)
    result = sample(coordinator.wrap_block(local_block), plan, agree=coordinator.agree)
    return {"pid": os.getpid(), "rank": world.rank, "samples": result.samples, "iterations": result.iterations}


def _failing_world(world: World) -> None:
    if world.rank == 1:
        raise ValueError("rank 1 broke on purpose")


def test_two_real_processes_agree_on_every_block() -> None:
    lines: list[str] = []
    results = spawn(_agreeing_world, 2, backend="gloo", timeout=120, progress=lines.append)
    assert lines[0] == "starting a world of 2 gloo processes"
    assert re.fullmatch(r"the world of 2 finished \(\d+ s\)", lines[-1])
    # Between them: a line as a rank finishes, and one every PROGRESS_EVERY s of silence; on a slow machine that one
    # may come after both ranks left their results, while their processes still exit ("2 of 2").
    counts = [re.fullmatch(r"([0-2]) of 2 ranks finished \(\d+ s\)", line) for line in lines[1:-1]]
    assert all(counts), lines
    finished = [int(match.group(1)) for match in counts if match]
    assert finished == sorted(finished), "ranks only ever finish"
    zero, one = results
    assert (zero["rank"], one["rank"]) == (0, 1)
    assert len({zero["pid"], one["pid"], os.getpid()}) == 3, "two processes besides this one"
    assert zero["iterations"] == one["iterations"]
    assert zero["samples"] == one["samples"], "every rank records the slowest rank's time"
    assert min(zero["samples"]) >= 0.004, "the slower rank (2 ms x 2 per call) counts"


def test_a_failing_rank_fails_the_world_with_its_error() -> None:
    with pytest.raises(DistributedError, match=r"(?s)rank1:.*ValueError: rank 1 broke on purpose"):
        spawn(_failing_world, 2, backend="gloo", timeout=120)
