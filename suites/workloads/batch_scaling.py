"""The batch-size ladder: the MLP's and the small CNN's fp32 training step at a given batch (test_batch_scaling.py
climbs the ladder; no workload of the registry)."""

from __future__ import annotations

from typing import Final

import torch

from pytest_gpuperf import Step

from ..models import SmallCNN, mlp
from ..training import training_step
from .common import seeded
from .sizes import MLP_WIDTHS, SMALL_CNN

__all__ = ["BATCH_LADDER", "BATCH_LADDER_CUDA_MAX", "batch_step"]

#: model -> (first batch, largest batch on a CPU): the ladder doubles from the first. On CUDA it climbs until
#: out of memory or ``BATCH_LADDER_CUDA_MAX``; on a CPU it stops at the small preset's batch (time, not memory).
BATCH_LADDER: Final = {"mlp": (64, 512), "cnn": (8, 32)}
BATCH_LADDER_CUDA_MAX: Final = 1 << 20


def batch_step(model: str, device: torch.device, batch: int) -> Step:
    """The fp32 training step of ``model`` (``mlp``: the classifier 1000-512-256-2; ``cnn``: the small CNN of the
    small preset) at ``batch``; work in samples (images for the CNN) and FLOPs."""
    seeded()
    if model == "mlp":
        widths = MLP_WIDTHS
        net: torch.nn.Module = mlp(widths).to(device)
        x = torch.randn(batch, widths[0], device=device)
        y = torch.randint(0, widths[-1], (batch,), device=device)
        return training_step(net, x, y, precision="fp32", params={"model": model, "batch": batch})
    if model == "cnn":
        width = SMALL_CNN["small"][1]
        net = SmallCNN(width).to(device)
        x = torch.randn(batch, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        step = training_step(net, x, y, precision="fp32", params={"model": model, "batch": batch, "width": width})
        return Step(step.fn, {"images": step.work["samples"], "FLOP": step.work["FLOP"]}, step.params, step.check)
    raise ValueError(f"batch ladder model {model!r} is not one of {', '.join(BATCH_LADDER)}")
