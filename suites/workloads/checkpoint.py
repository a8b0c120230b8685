"""Gradient checkpointing: the deep stack of expansion blocks trained in full, checkpointed, and its forward alone
(``stack_train``, ``stack_train_checkpointed``, ``stack_forward``; test_checkpoint.py)."""

from __future__ import annotations

from typing import Any

import torch

from pytest_gpuperf import Step, Workload

from ..models import DeepStack
from ..precision import pin_fn
from ..training import count_flops, training_step
from .common import seeded
from .sizes import DEEP_STACK

__all__ = ["stack_workload"]


def stack_workload(mode: str) -> Workload:
    """``full``/``checkpointed``: a training step of the deep stack; ``forward``: one forward with autograd on."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        batch, width, depth = DEEP_STACK[size]
        seeded()
        model = DeepStack(width, depth, checkpointed=mode == "checkpointed").to(dev)
        x = torch.randn(batch, width, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        params: dict[str, object] = {
            "model": "stack",
            "batch": batch,
            "width": width,
            "depth": depth,
            "mode": mode,
        }
        if mode != "forward":
            step = training_step(model, x, y, precision="fp32", params=params)
            return Step(step.fn, work={"samples": float(batch)}, params=step.params, check=step.check)

        def forward() -> None:
            # Grad mode on, as in the recompute: the graph is built and then dropped.
            with torch.enable_grad():
                model(x)

        run = pin_fn(forward, "ieee")
        work = {"samples": float(batch), "FLOP": count_flops(run)}
        return Step(run, work=work, params={**params, "fp32_precision": "ieee"})

    names = {"full": "stack_train", "checkpointed": "stack_train_checkpointed", "forward": "stack_forward"}
    return Workload(names[mode], build, f"deep stack of expansion blocks: {mode}")
