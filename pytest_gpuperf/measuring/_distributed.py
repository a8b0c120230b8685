"""Rank-aware timing for distributed runs (torchrun or processes spawned by a test).

Every rank runs the same measurement; ``TorchDistCoordinator`` (the ``Coordinator`` of
``_runner.py``) makes them one measurement:

* a barrier before every timed block, so the ranks start it together;
* each block's time is the slowest rank's (``all_reduce`` MAX): a data-parallel step is
  as fast as its slowest rank;
* the iteration count of every block is checked to be the same on every rank (it is
  derived from the reduced times, so it is; a mismatch would deadlock a collective
  inside the step, so it is refused loudly instead);
* every stop decision of the sampler (end of warmup, end of sampling) is agreed: when
  any rank decides to stop, all stop, in the same block.

Only rank 0 reports and writes (``GpuperfSession.rank``). ``spawn`` starts a world of
real processes for a test (gloo on CPU, NCCL on CUDA) and returns what each rank's
function returned.
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["DistributedError", "TorchDistCoordinator", "World", "free_port", "scaling_sizes", "spawn"]


class DistributedError(RuntimeError):
    """Ranks that disagree, a world that did not start, or a rank that failed; the message says which."""


@dataclass(frozen=True)
class World:
    """This process's place in a distributed run."""

    rank: int
    size: int
    local_rank: int
    backend: str  # "gloo" or "nccl"

    @classmethod
    def from_env(cls, backend: str) -> World | None:
        """The world torchrun describes in the environment (RANK, WORLD_SIZE, LOCAL_RANK), or None outside one."""
        if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
            return None
        try:
            return cls(
                rank=int(os.environ["RANK"]),
                size=int(os.environ["WORLD_SIZE"]),
                local_rank=int(os.environ.get("LOCAL_RANK", os.environ["RANK"])),
                backend=backend,
            )
        except ValueError:
            raise DistributedError(
                f"RANK={os.environ.get('RANK')!r}, WORLD_SIZE={os.environ.get('WORLD_SIZE')!r}, "
                f"LOCAL_RANK={os.environ.get('LOCAL_RANK')!r}: expected whole numbers, as torchrun sets them"
            ) from None

    @property
    def is_zero(self) -> bool:
        return self.rank == 0


def backend_for_kind(kind: str) -> str:
    """The collective backend for a device kind: NCCL between CUDA devices, gloo between CPU processes."""
    if kind == "cuda":
        return "nccl"
    if kind == "cpu":
        return "gloo"
    raise DistributedError(f"no distributed backend for device kind {kind!r}; use cpu (gloo) or cuda (nccl)")


def scaling_sizes(world_size: int) -> list[int]:
    """World sizes to measure scaling at: 1, 2, 4, ... below ``world_size``, then ``world_size`` itself."""
    if world_size < 1:
        raise ValueError(f"world size {world_size} must be at least 1")
    sizes = []
    size = 1
    while size < world_size:
        sizes.append(size)
        size *= 2
    sizes.append(world_size)
    return sizes


class TorchDistCoordinator:
    """The ``Coordinator`` for ``torch.distributed``: barrier, slowest rank counts, equal counts, agreed stops.

    ``device`` is where collective tensors live: ``cpu`` for gloo, the rank's CUDA
    device for NCCL. ``dist`` is ``torch.distributed`` (replaceable in tests).
    """

    def __init__(self, device: Any = "cpu", group: Any = None, dist: Any = None) -> None:
        import torch

        self._torch = torch
        self._dist: Any = dist if dist is not None else torch.distributed
        self.device = torch.device(device)
        self.group = group

    def barrier(self) -> None:
        if self.device.type == "cuda":
            # NCCL collectives are asynchronous to the host; synchronize to make it a host-side barrier.
            flag = self._torch.zeros(1, device=self.device)
            self._dist.all_reduce(flag, group=self.group)
            self._torch.cuda.synchronize(self.device)
        else:
            self._dist.barrier(group=self.group)

    def wrap_block(self, run_block: Callable[[int], float]) -> Callable[[int], float]:
        def block(iterations: int) -> float:
            self.barrier()
            elapsed = run_block(iterations)
            # One collective carries the slowest time and the largest and smallest iteration counts.
            stats = self._torch.tensor(
                [elapsed, float(iterations), -float(iterations)], dtype=self._torch.float64, device=self.device
            )
            self._dist.all_reduce(stats, op=self._dist.ReduceOp.MAX, group=self.group)
            slowest, most, neg_fewest = (float(v) for v in stats.tolist())
            if most != -neg_fewest:
                raise DistributedError(
                    f"ranks ran different iteration counts in one block ({-neg_fewest:g} to {most:g}); every rank "
                    "must measure the same steps: run the same test with the same settings on every rank"
                )
            return slowest

        return block

    def agree(self, flag: bool) -> bool:
        """True on every rank when it is True on any rank."""
        value = self._torch.tensor([1.0 if flag else 0.0], dtype=self._torch.float64, device=self.device)
        self._dist.all_reduce(value, op=self._dist.ReduceOp.MAX, group=self.group)
        return bool(value.item() > 0.5)


def free_port() -> int:
    """A TCP port free on the loopback interface now, for a world's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(
    index: int,
    fn: Callable[..., Any],
    world_size: int,
    port: int,
    backend: str,
    outdir: str,
    timeout: float,
    args: tuple[Any, ...],
) -> None:
    """Runs in each spawned process: join the world, run ``fn(world, *args)``, leave its result for the parent."""
    import torch.distributed as dist

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(index),
        LOCAL_RANK=str(index),
        WORLD_SIZE=str(world_size),
    )
    world = World(index, world_size, index, backend)
    dist.init_process_group(backend, rank=index, world_size=world_size, timeout=dt.timedelta(seconds=timeout))
    try:
        try:
            result = fn(world, *args)
        except BaseException:
            # The first failure is the one to report; the other ranks then fail in a collective.
            (Path(outdir) / f"rank{index}.err").write_text(traceback.format_exc(), encoding="utf-8")
            raise
        dist.barrier()
    finally:
        dist.destroy_process_group()
    with open(Path(outdir) / f"rank{index}.pkl", "wb") as f:
        pickle.dump(result, f)


#: Seconds between progress lines of a spawned world that is still running.
PROGRESS_EVERY: Final = 15.0


def _joined(context: Any, outdir: str) -> bool:
    """Wait a second for the world; on a failure raise the error of the rank whose function raised first."""
    try:
        return bool(context.join(timeout=1.0))
    except Exception as exc:
        failures = sorted(Path(outdir).glob("rank*.err"))
        if not failures:
            raise
        details = "\n".join(f"{path.stem}:\n{path.read_text(encoding='utf-8')}" for path in failures)
        raise DistributedError(f"a rank of the world failed; its traceback:\n{details}") from exc


def spawn(
    fn: Callable[..., Any],
    world_size: int,
    *,
    backend: str,
    args: Sequence[Any] = (),
    timeout: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> list[Any]:
    """Run ``fn(world, *args)`` in ``world_size`` fresh processes joined in one process group; their results by rank.

    ``fn`` must be importable by name (a module-level function), as the processes are
    started with the ``spawn`` method. A rank that raises fails the whole world with
    its traceback; a world still running after ``timeout`` seconds is killed.
    ``progress`` gets a line when the world starts, as ranks finish, and every
    ``PROGRESS_EVERY`` seconds of silence in between.
    """
    import torch.multiprocessing

    mp: Any = torch.multiprocessing  # its start_processes is untyped
    say = progress or (lambda line: None)
    started = time.monotonic()
    say(f"starting a world of {world_size} {backend} processes")
    with tempfile.TemporaryDirectory(prefix="gpuperf-world-") as outdir:
        context = mp.start_processes(
            _entry,
            args=(fn, world_size, free_port(), backend, outdir, timeout, tuple(args)),
            nprocs=world_size,
            join=False,
            start_method="spawn",
        )
        deadline = time.monotonic() + timeout
        finished, quiet_until = 0, started + PROGRESS_EVERY
        while not _joined(context, outdir):
            now = time.monotonic()
            done = len(list(Path(outdir).glob("rank*.pkl")))
            if (finished < done < world_size) or now >= quiet_until:
                finished, quiet_until = done, now + PROGRESS_EVERY
                say(f"{done} of {world_size} ranks finished ({now - started:.0f} s)")
            if now > deadline:
                for process in context.processes:
                    if process.is_alive():
                        process.kill()
                raise DistributedError(
                    f"a world of {world_size} {backend} processes ran over {timeout:g} s and was killed; "
                    "a rank is probably waiting in a collective the others never reached"
                )
        results = []
        for rank in range(world_size):
            path = Path(outdir) / f"rank{rank}.pkl"
            if not path.exists():
                raise DistributedError(f"rank {rank} of {world_size} exited without a result")
            with open(path, "rb") as f:
                results.append(pickle.load(f))
        say(f"the world of {world_size} finished ({time.monotonic() - started:.0f} s)")
        return results
