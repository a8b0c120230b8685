"""Memory bandwidth: a device-to-device copy and axpy over large buffers, in B/s of the bytes moved
(``bandwidth_<op>``; test_bandwidth.py, whose faster op is the device's bandwidth reference)."""

from __future__ import annotations

from typing import Any, Final

import torch

from pytest_gpuperf import Step, Workload

from .common import seeded
from .sizes import BANDWIDTH_BYTES

__all__ = ["BANDWIDTH_OPS", "bandwidth_step", "bandwidth_workload"]

BANDWIDTH_OPS: Final = ("d2d_copy", "axpy")


def bandwidth_step(device: torch.device, op: str, nbytes: int) -> Step:
    """A memory-bound step on ``device`` over buffers of ``nbytes``; work ``B`` counts the bytes read and written.

    ``d2d_copy``: ``dst.copy_(src)``, reads and writes ``nbytes`` (2 x nbytes). ``axpy``:
    ``y = a*x + y`` in float32 (``torch.add(y, x, alpha=a, out=y)``), reads x and y and writes y
    (3 x nbytes). Bytes the hardware moves beyond these (a CPU's write-allocate reads of the
    destination's lines) are not counted: the figure is the bytes the operation must move.
    """
    if op not in BANDWIDTH_OPS:
        raise ValueError(f"bandwidth op {op!r} is not one of {', '.join(BANDWIDTH_OPS)}")
    seeded()
    if op == "d2d_copy":
        src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(0xA5)
        dst = torch.zeros(nbytes, dtype=torch.uint8, device=device)

        def copy() -> None:
            dst.copy_(src)

        def copy_check() -> None:
            if int(dst[-1]) != 0xA5 or int(dst[0]) != 0xA5:
                raise AssertionError(f"d2d_copy of {nbytes} bytes on {device} did not copy")

        return Step(copy, work={"B": 2.0 * nbytes}, params={"op": op, "bytes": nbytes}, check=copy_check)
    n = nbytes // 4
    x = torch.ones(n, device=device)
    y = torch.zeros(n, device=device)
    a = 1e-3  # y grows by a per call: stays finite and exact enough for any number of calls

    def axpy() -> None:
        torch.add(y, x, alpha=a, out=y)

    def axpy_check() -> None:
        if not float(y[-1]) > 0.0 or not bool(torch.isfinite(y[:4]).all()):
            raise AssertionError(f"axpy over {n} floats on {device} did not update y")

    return Step(axpy, work={"B": 3.0 * n * 4}, params={"op": op, "bytes": nbytes}, check=axpy_check)


def bandwidth_workload(op: str) -> Workload:
    """``bandwidth_<op>``: :func:`bandwidth_step` over buffers of the preset's ``BANDWIDTH_BYTES``."""

    def build(device: Any, size: str) -> Step:
        return bandwidth_step(torch.device(device), op, BANDWIDTH_BYTES[size])

    sizes = ", ".join(f"{k} {v >> 20} MiB" for k, v in BANDWIDTH_BYTES.items())
    return Workload(f"bandwidth_{op}", build, f"memory-bound {op} over buffers of {sizes}; B/s of bytes read + written")
