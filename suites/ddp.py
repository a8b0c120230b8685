"""DistributedDataParallel scaling, run by every rank of a world (spawned by the test, or under torchrun).

One world measures every scaling size at once: for world size W the sizes are 1, 2,
4, ... W, each a process group of the first ranks, each with its own DDP replica of
the tutorial classifier and its share of a fixed global batch (strong scaling).
Rounds alternate between the sizes, so each size is timed under the same load as the
others (see ``pytest_gpuperf.measure_paired``); ranks outside a size's group idle in the next collective
(gloo and NCCL wait without spinning: an idle rank used no CPU time in a measurement
here). The coordinator makes the ranks one measurement: barrier before each block,
slowest rank counts, agreed stops.

A control step runs in the same rounds at every size above 1: the same per-rank
training step without DDP (no all-reduce). Its speedup is the parallel capacity the
machine gives right now (less than W when other jobs hold cores); DDP's time against
it is what DDP itself costs, whatever the neighbours do.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Final

import torch
import torch.distributed as dist

from pytest_gpuperf import MeasureSettings, Paired, Step, measure_paired
from pytest_gpuperf.measuring import DeviceSlot, TorchDistCoordinator, World, backend_for, scaling_sizes

from .models import mlp
from .training import training_step

__all__ = ["DDP_BATCH", "RankInfo", "ScalingResult", "ddp_scaling", "ddp_worker"]

#: global batch of the classifier 1000-512-256-2, split across the ranks of each size
DDP_BATCH: Final = {"small": 8192, "medium": 65536, "large": 262144}
WIDTHS: Final = (1000, 512, 256, 2)


@dataclass(frozen=True)
class RankInfo:
    rank: int
    pid: int
    host: str
    device: str
    threads: int


def ddp_name(size: int) -> str:
    return f"world_size={size}"


def control_name(size: int) -> str:
    return f"no all-reduce, world_size={size}"


@dataclass(frozen=True)
class ScalingResult:
    """What rank 0 hands back: the paired rounds per world size (DDP and control) and who took part."""

    world_sizes: tuple[int, ...]
    global_batch: int
    per_rank_batch: dict[int, int]
    paired: Paired
    ranks: tuple[RankInfo, ...]
    backend: str


def _device(world: World, kind: str) -> torch.device:
    if kind == "cuda":
        torch.cuda.set_device(world.local_rank)
        return torch.device("cuda", world.local_rank)
    return torch.device("cpu")


def _idle() -> None:
    return None


def _replica(world: World, device: torch.device, size: int, group: Any, global_batch: int, *, ddp: bool) -> Step:
    """This rank's step for world size ``size``: a replica on the group's ranks (DDP or plain), nothing elsewhere."""
    per_rank = global_batch // size
    work = {"samples": float(per_rank * size)}
    if world.rank >= size:
        return Step(_idle, work=work)
    torch.manual_seed(0)  # identical replicas, as DDP expects (it also broadcasts rank 0's weights)
    model: torch.nn.Module = mlp(WIDTHS).to(device)
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, process_group=group
        )
    torch.manual_seed(1 + world.rank)  # each rank its own shard of data
    x = torch.randn(per_rank, WIDTHS[0], device=device)
    y = torch.randint(0, WIDTHS[-1], (per_rank,), device=device)
    step = training_step(model, x, y, precision="fp32", params={"model": "mlp", "world_size": size})
    return Step(step.fn, work=work, params=step.params, check=step.check)


def ddp_scaling(world: World, kind: str, size_preset: str, settings: MeasureSettings) -> ScalingResult | None:
    """Measure DDP training at every scaling size of this world; rank 0 returns the result, others None.

    Must be called by every rank of an initialized default process group, in the same order.
    """
    device = _device(world, kind)
    sizes = scaling_sizes(world.size)
    global_batch = DDP_BATCH[size_preset]
    # Every rank creates every group, in the same order, as torch.distributed requires.
    groups = {s: (dist.new_group(list(range(s))) if s < world.size else None) for s in sizes}
    steps = {ddp_name(s): _replica(world, device, s, groups[s], global_batch, ddp=True) for s in sizes}
    for s in sizes[1:]:
        steps[control_name(s)] = _replica(world, device, s, groups[s], global_batch, ddp=False)
    coordinator = TorchDistCoordinator(device=device if kind == "cuda" else "cpu")
    slot = DeviceSlot(str(device), device.type, device.index, True)
    paired = measure_paired(steps, backend_for(slot), settings, device=str(device), coordinator=coordinator)
    for step in steps.values():
        if step.check is not None:
            step.check()
    info = RankInfo(world.rank, os.getpid(), socket.gethostname(), str(device), torch.get_num_threads())
    gathered: list[Any] = [None] * world.size
    dist.all_gather_object(gathered, info)
    for s in sizes:
        if groups[s] is not None:
            dist.destroy_process_group(groups[s])
    if not world.is_zero:
        return None
    return ScalingResult(
        world_sizes=tuple(sizes),
        global_batch=global_batch,
        per_rank_batch={s: global_batch // s for s in sizes},
        paired=paired,
        ranks=tuple(gathered),
        backend=world.backend,
    )


def ddp_worker(
    world: World, kind: str, size_preset: str, settings: MeasureSettings, threads: int
) -> ScalingResult | None:
    """Entry point of a spawned rank: pin its CPU threads, then measure."""
    torch.set_num_threads(threads)
    return ddp_scaling(world, kind, size_preset, settings)
