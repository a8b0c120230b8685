"""Host-to-device and device-to-host copies from and into pinned or pageable memory
(``h2d_copy_<kind>``, ``d2h_copy_<kind>``; test_copy.py)."""

from __future__ import annotations

import contextlib
from typing import Any, Final

import torch

from pytest_gpuperf import Step, Workload

from .common import require
from .sizes import COPY_BYTES

__all__ = ["copy_workload", "host_buffer"]


#: direction -> what the copy is called in messages and descriptions.
_COPIES: Final = {"h2d": "host-to-device", "d2h": "device-to-host"}


def host_buffer(nbytes: int, device: torch.device, *, pinned: bool, torch_module: Any = torch) -> Any:
    """``nbytes`` of host memory, every page written, pinned for ``device`` when asked.

    Written, because a page never written is not backed by memory of its own: every such
    page reads the one shared zero page, which sits in the CPU's cache, and a copy from it
    measures more than the memory can give. Pinned inside ``device``'s context, because
    pinning (like any CUDA call) creates a context on the current device, GPU 0 unless
    set: a test of cuda:1 would otherwise hold memory on GPU 0 and pin for GPU 0.
    """
    context = torch_module.cuda.device(device) if pinned else contextlib.nullcontext()
    with context:
        buffer = torch_module.empty(nbytes, dtype=torch_module.uint8, pin_memory=pinned)
    # Any value: what counts is that every page is written (0.05 s for 256 MiB, where random bytes take 0.8 s).
    buffer.fill_(0xA5)
    return buffer


def copy_workload(direction: str, pinned: bool) -> Workload:
    """``h2d_copy_<kind>`` (from host memory to the device) or ``d2h_copy_<kind>`` (back), pinned or pageable."""
    what = _COPIES[direction]

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        require(workload, dev)
        nbytes = COPY_BYTES[size]
        if direction == "h2d":
            src = host_buffer(nbytes, dev, pinned=pinned)
            dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        else:
            src = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(0xA5)
            dst = host_buffer(nbytes, dev, pinned=pinned)

        def fn() -> None:
            # With pinned memory the copy is a DMA queued on the stream; with pageable memory the driver
            # stages it through a pinned buffer (and, into the host, copies on from there), synchronously.
            dst.copy_(src, non_blocking=pinned)

        return Step(fn, work={"B": float(nbytes)}, params={"bytes": nbytes, "pinned": pinned})

    def unsupported(device: Any) -> str | None:
        if torch.device(device).type != "cuda":
            return f"a {what} copy needs a CUDA device (pinned memory is a CUDA host allocation)"
        return None

    kind = "pinned" if pinned else "pageable"
    where = f"from {kind} memory" if direction == "h2d" else f"into {kind} memory"
    workload = Workload(f"{direction}_copy_{kind}", build, f"{what} copy {where}", unsupported)
    return workload
