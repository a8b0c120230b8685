"""Square matmul into a preallocated output, per dtype (``matmul_<dtype>``; test_matmul.py sweeps the sizes)."""

from __future__ import annotations

from typing import Any, Final

import torch

from pytest_gpuperf import Step, Workload, WorkloadUnsupported

from ..precision import pin_step
from .common import require, seeded
from .sizes import MATMUL_SIZES

__all__ = ["MATMUL_DTYPES", "matmul_step", "matmul_unsupported", "matmul_workload"]

MATMUL_DTYPES: Final = ("float32", "tf32", "float16", "bfloat16")

TORCH_DTYPES: Final = {
    "float32": torch.float32,
    "tf32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def _capability(device: torch.device) -> tuple[int, int]:
    major, minor = torch.cuda.get_device_capability(device)
    return int(major), int(minor)


def matmul_unsupported(device: torch.device, dtype: str) -> str | None:
    """Why ``dtype`` matmul is not measured on ``device``, or None."""
    if dtype == "float32":
        return None
    if dtype == "tf32":
        if device.type != "cuda":
            return "TF32 is an NVIDIA tensor-core mode (CUDA only)"
        if _capability(device) < (8, 0):
            return "TF32 needs compute capability 8.0 (Ampere) or later"
        return None
    if dtype == "float16":
        if device.type == "cpu":
            return "fp16 on a CPU is emulated and far slower than fp32 (150x measured for autocast): never run"
        return None
    if dtype == "bfloat16":
        if device.type == "cuda" and _capability(device) < (8, 0):
            return "bfloat16 is emulated below compute capability 8.0 (Ampere)"
        if device.type == "mps":
            return "bfloat16 matmul on MPS depends on the macOS version; not measured"
        return None
    raise ValueError(f"matmul dtype {dtype!r} is not one of {', '.join(MATMUL_DTYPES)}")


def matmul_step(device: torch.device, dtype: str, n: int) -> Step:
    """``C = A @ B`` for n x n matrices into a preallocated C: 2 n^3 FLOP, no allocation per call."""
    why = matmul_unsupported(device, dtype)
    if why:
        raise WorkloadUnsupported(f"matmul {dtype} on {device}: {why}")
    seeded()
    torch_dtype = TORCH_DTYPES[dtype]
    a = torch.randn(n, n, device=device, dtype=torch_dtype)
    b = torch.randn(n, n, device=device, dtype=torch_dtype)
    c = torch.empty(n, n, device=device, dtype=torch_dtype)

    def fn() -> None:
        torch.mm(a, b, out=c)

    def check() -> None:
        if not bool(torch.isfinite(c[:4, :4].float()).all()):
            raise AssertionError(f"matmul {dtype} n={n} on {device} produced non-finite values")

    # The TF32 flag is read when the kernel is chosen, so pinning it around each call suffices.
    step = Step(fn, work={"FLOP": 2.0 * n**3}, params={"n": n, "dtype": dtype}, check=check)
    return pin_step(step, "tf32" if dtype == "tf32" else "ieee")


def matmul_workload(dtype: str) -> Workload:
    """``matmul_<dtype>``: :func:`matmul_step` at the preset's n (the middle of the sweep)."""

    def build(device: Any, size: str) -> Step:
        require(workload, torch.device(device))
        return matmul_step(torch.device(device), dtype, MATMUL_SIZES[size])

    workload = Workload(
        f"matmul_{dtype}",
        build,
        f"square {dtype} matmul (n = {', '.join(f'{k} {v}' for k, v in MATMUL_SIZES.items())}), 2n^3 FLOP per call",
        unsupported=lambda device: matmul_unsupported(torch.device(device), dtype),
    )
    return workload
