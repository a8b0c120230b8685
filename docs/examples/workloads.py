"""Workloads for ``pytest-gpuperf ab``: a complete module to copy (docs/writing-tests.md).

``pytest-gpuperf ab --base main --workloads perf/workloads.py`` imports this module
from the base revision and from the head, builds each workload on the device at a
size preset, and times base and head side by side in paired rounds.
"""

from __future__ import annotations

from typing import Final

import torch

from pytest_gpuperf import Step, Workload, WorkloadUnsupported

#: (batch, width) of the layer for each size preset; ``auto`` is resolved before ``build``
#: is called (small on cpu and mps; medium or large on cuda, by its memory).
SIZES: Final = {"small": (512, 512), "medium": (2048, 2048), "large": (8192, 8192)}


def linear(device: torch.device, size: str, dtype: torch.dtype) -> Step:
    """One linear layer without bias, ``y = x @ w``, into a preallocated output."""
    batch, width = SIZES[size]
    torch.manual_seed(0)  # the same data in every build, on both sides
    x = torch.randn(batch, width, device=device, dtype=dtype)
    w = torch.randn(width, width, device=device, dtype=dtype)
    y = torch.empty(batch, width, device=device, dtype=dtype)

    def step() -> None:
        torch.mm(x, w, out=y)

    def check() -> None:
        if not bool(torch.isfinite(y).all()):
            raise AssertionError(f"linear {dtype} on {device} produced non-finite values")

    return Step(
        step,
        work={"FLOP": 2.0 * batch * width * width, "samples": float(batch)},
        params={"batch": batch, "width": width, "dtype": str(dtype)},
        check=check,
    )


def build_fp32(device: torch.device, size: str) -> Step:
    return linear(device, size, torch.float32)


def fp16_unsupported(device: torch.device) -> str | None:
    """Why the fp16 workload does not run on ``device``, or None where it does."""
    if device.type != "cuda":
        return "fp16 matmul on a CPU is emulated and far slower than fp32; measured on CUDA only"
    return None


def build_fp16(device: torch.device, size: str) -> Step:
    why = fp16_unsupported(device)
    if why:
        raise WorkloadUnsupported(why)
    return linear(device, size, torch.float16)


WORKLOADS: Final[dict[str, Workload]] = {
    "linear_fp32": Workload("linear_fp32", build_fp32, "x @ w, fp32, 2*batch*width^2 FLOP per step"),
    "linear_fp16": Workload(
        "linear_fp16", build_fp16, "x @ w, fp16, 2*batch*width^2 FLOP per step", unsupported=fp16_unsupported
    ),
}
