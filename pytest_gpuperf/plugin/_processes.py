"""Which process of a run this one is: an xdist worker or the controller, a torchrun rank on this machine, and the GPU
it is bound to.

Read from the environment and pytest's config, never stored: the session, the gate and
the xdist controller each ask here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..measuring import Binding

__all__ = ["binding", "is_controller", "local_rank", "local_world_size", "worker_index", "workers"]


def worker_index(config: pytest.Config) -> int | None:
    """This worker's index (``gw3`` is 3), or None outside an xdist worker."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    return int(str(workerinput["workerid"]).lstrip("gw"))


def workers(config: pytest.Config) -> int:
    """Workers of this run (0 without ``-n``): a worker is told the count; the controller has ``-n`` resolved."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get("workercount", 1))
    count = getattr(config.option, "numprocesses", None)
    return count if isinstance(count, int) else 0


def is_controller(config: pytest.Config) -> bool:
    return worker_index(config) is None and workers(config) > 0 and config.pluginmanager.hasplugin("xdist")


def local_world_size() -> int:
    """Processes of this run on this machine (torchrun's LOCAL_WORLD_SIZE), 1 outside a distributed run."""
    try:
        return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def local_rank() -> int | None:
    """This process's LOCAL_RANK under torchrun (the world it describes), or None outside one."""
    from ..measuring import World

    world = World.from_env("gloo")  # the backend is not used here
    return None if world is None else world.local_rank


def binding(config: pytest.Config) -> Binding | None:
    """The one GPU this process measures on, or None when it has the machine to itself.

    An xdist worker of two or more is bound to ``cuda:<its index>``, a torchrun rank beside
    other local ranks to ``cuda:LOCAL_RANK``, and a confirmation run to the GPU its records were
    measured on (``BIND_ENV``, set by the gate that starts it). One worker (``-n 1``) or one
    rank per node is not bound: nothing else of the run measures on this machine.
    """
    from ..measuring import BIND_ENV, Binding, DeviceError

    worker = worker_index(config)
    if worker is not None:
        count = workers(config)
        return Binding(worker, "xdist", count) if count > 1 else None
    rank = local_rank()
    if rank is not None:
        count = local_world_size()
        return Binding(rank, "torchrun", count) if count > 1 else None
    bound = os.environ.get(BIND_ENV, "")
    kind, _, index = bound.partition(":")
    if not bound:
        return None
    if kind != "cuda" or not index.isdigit():
        raise DeviceError(f"{BIND_ENV}={bound!r}: a confirmation run is bound to one GPU, cuda:N")
    return Binding(int(index), "confirmation", 1)
