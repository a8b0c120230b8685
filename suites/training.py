"""One full training step (zero_grad, forward, backward, optimizer step), in fp32 or mixed precision.

Mixed precision follows torch's recipes: on CUDA ``torch.autocast`` with float16 and a
``torch.amp.GradScaler`` (fp16 gradients underflow without loss scaling); on CPU
``torch.autocast`` with bfloat16, which has fp32's exponent range and needs no
scaler. fp16 is never used on a CPU: measured on this project's machine, fp16
autocast there is about 150x slower than fp32.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from pytest_gpuperf import Step

__all__ = ["PRECISIONS", "LossLog", "amp_dtype", "count_flops", "training_step"]

PRECISIONS: Final = ("fp32", "amp")


def amp_dtype(device: torch.device) -> torch.dtype:
    """The autocast dtype for ``device``: bfloat16 on CPU, float16 elsewhere."""
    return torch.bfloat16 if device.type == "cpu" else torch.float16


@dataclass
class LossLog:
    """The first and the last few losses of a run, kept as tensors so logging never synchronizes a GPU."""

    keep: int = 5
    calls: int = 0
    first: list[torch.Tensor] = field(default_factory=list)
    last: deque[torch.Tensor] = field(default_factory=deque)

    def add(self, loss: torch.Tensor) -> None:
        self.calls += 1
        value = loss.detach()
        if len(self.first) < self.keep:
            self.first.append(value)
        self.last.append(value)
        while len(self.last) > self.keep:
            self.last.popleft()

    def reset(self) -> None:
        self.calls = 0
        self.first.clear()
        self.last.clear()

    def summary(self) -> tuple[float, float]:
        """Mean of the first and of the last losses logged."""
        if not self.first:
            raise AssertionError("no training step ran, so there is no loss to check")
        first = torch.stack(self.first).float().mean().item()
        last = torch.stack(list(self.last)).float().mean().item()
        return first, last

    def check_falls(self, what: str) -> None:
        """The loss stayed finite and fell from the first steps to the last ones."""
        first, last = self.summary()
        if not (math.isfinite(first) and math.isfinite(last)):
            raise AssertionError(f"{what}: the loss is not finite (first steps {first}, last steps {last})")
        if self.calls < 2 * self.keep:
            return  # too few steps to compare disjoint windows
        if not last < first:
            raise AssertionError(
                f"{what}: the training loss did not fall over {self.calls} steps "
                f"(mean of the first {self.keep}: {first:.4g}, of the last {self.keep}: {last:.4g})"
            )


def count_flops(fn: Callable[[], object]) -> float:
    """FLOPs of one call of ``fn`` (matmuls and convolutions, forward and backward) by torch's FLOP counter."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())


def _optimizer_steps(optimizer: torch.optim.Optimizer) -> int:
    """How many updates the optimizer applied (Adam keeps a per-parameter step count; skipped steps add none)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            if "step" in state:
                return int(torch.as_tensor(state["step"]).item())
    return 0


def training_step(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    precision: str,
    params: dict[str, object],
    lr: float = 1e-3,
) -> Step:
    """A Step for one full training step of ``model`` with Adam and cross entropy on a fixed random batch.

    The batch is fixed so the loss must fall as the model fits it: the check asserts
    that, that the loss stayed finite, and that the optimizer (through the scaler)
    really stepped. Work per step: ``samples`` (the batch) and ``FLOP`` (torch's
    FLOP counter over forward and backward).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    device = inputs.device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    use_amp = precision == "amp"
    dtype = amp_dtype(device)
    scaler = torch.amp.GradScaler(device.type) if use_amp and dtype == torch.float16 else None
    log = LossLog()

    def autocast() -> contextlib.AbstractContextManager[Any]:
        if not use_amp:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=dtype)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = nn.functional.cross_entropy(model(inputs), targets)
        if scaler is not None:
            torch.autograd.backward(scaler.scale(loss))
            scaler.step(optimizer)
            scaler.update()
        else:
            torch.autograd.backward(loss)
            optimizer.step()
        log.add(loss)

    flops = count_flops(step)
    log.reset()
    steps_before = _optimizer_steps(optimizer)
    label = f"{params.get('model', 'model')} {precision}"

    def check() -> None:
        log.check_falls(label)
        taken = _optimizer_steps(optimizer) - steps_before
        # A GradScaler skips the update of a step whose gradients overflowed, then lowers the
        # scale; a few skips while it finds its scale are normal, most steps must update.
        if taken < 0.9 * log.calls:
            raise AssertionError(
                f"{label}: the optimizer applied {taken} of {log.calls} steps"
                + (f" (GradScaler scale now {scaler.get_scale():g})" if scaler is not None else "")
            )

    amp_name = "off" if not use_amp else f"autocast {str(dtype).removeprefix('torch.')}"
    details: dict[str, object] = {
        **params,
        "precision": precision,
        "amp": amp_name,
        "grad_scaler": scaler is not None,
    }
    return Step(step, work={"samples": float(inputs.shape[0]), "FLOP": flops}, params=details, check=check)
