"""Training steps of the classifiers: the MLP, the wide MLP, the small CNN and the ResNet-style stack, in fp32 and
in mixed precision (``<model>_train``, ``<model>_train_amp``; test_mlp.py, test_cnn.py, test_amp.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pytest_gpuperf import Step, Workload

from ..models import ResNetStyle, SmallCNN, mlp
from ..training import training_step
from .common import seeded
from .sizes import MLP_BATCH, MLP_WIDTHS, RESNET, SMALL_CNN, WIDE_MLP

__all__ = ["image_workload", "mlp_widths", "mlp_workload", "wide_widths"]


def mlp_workload(widths_for: Callable[[str], tuple[int, tuple[int, ...]]], name: str, precision: str) -> Workload:
    """``<name>_train`` (fp32) or ``<name>_train_amp``: an MLP of ``widths_for(size)`` (batch, widths)."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        batch, widths = widths_for(size)
        seeded()
        model = mlp(widths).to(dev)
        x = torch.randn(batch, widths[0], device=dev)
        y = torch.randint(0, widths[-1], (batch,), device=dev)  # the last width is the number of classes
        params = {"model": name, "batch": batch, "widths": "-".join(map(str, widths))}
        return training_step(model, x, y, precision=precision, params=params)

    suffix = "" if precision == "fp32" else "_amp"
    what = (
        "fp32" if precision == "fp32" else "mixed precision (bf16 autocast on CPU; fp16 autocast + GradScaler on CUDA)"
    )
    return Workload(f"{name}_train{suffix}", build, f"{name} full training step, Adam + cross entropy, {what}")


def image_workload(name: str, precision: str) -> Workload:
    """``<name>_train`` (fp32) or ``<name>_train_amp``: ``cnn`` (the small CNN) or ``resnet``, on 3x32x32 images."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        seeded()
        model: torch.nn.Module
        if name == "cnn":
            batch, width = SMALL_CNN[size]
            model = SmallCNN(width)
            params: dict[str, object] = {"model": name, "batch": batch, "width": width}
        else:
            batch, width, stages, blocks = RESNET[size]
            model = ResNetStyle(width, stages, blocks)
            params = {"model": name, "batch": batch, "width": width, "stages": stages, "blocks": blocks}
        model = model.to(dev)
        x = torch.randn(batch, 3, 32, 32, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        step = training_step(model, x, y, precision=precision, params=params)
        # Images are the natural unit here; keep the samples count under that name.
        return Step(
            step.fn,
            work={"images": step.work["samples"], "FLOP": step.work["FLOP"]},
            params=step.params,
            check=step.check,
        )

    suffix = "" if precision == "fp32" else "_amp"
    return Workload(f"{name}_train{suffix}", build, f"{name} training step on 3x32x32 images, {precision}")


def mlp_widths(size: str) -> tuple[int, tuple[int, ...]]:
    """(batch, widths) of the tutorial classifier at ``size``."""
    return MLP_BATCH[size], MLP_WIDTHS


def wide_widths(size: str) -> tuple[int, tuple[int, ...]]:
    """(batch, widths) of the wider classifier at ``size``."""
    return WIDE_MLP[size]
