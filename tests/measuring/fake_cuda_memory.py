"""A stand-in for the CUDA caching allocator's statistics, added to a ``torch`` stand-in (``fake_gpu.py``'s or any).

Per device: the bytes allocated now, their high-water mark since the last
``reset_peak_memory_stats`` and the same two for reserved memory (the allocator's
segments, which only grow here: the cache is never emptied by a step; ``empty_cache``
releases every segment no live block needs, and keeps the high-water mark, as torch's).
A simulated step allocates and frees through ``alloc`` and ``free``, as its tensors would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MiB = 1 << 20
#: The caching allocator rounds a segment up to this (2 MiB for large blocks).
SEGMENT = 2 * MiB


@dataclass
class Device:
    allocated: int = 0
    peak: int = 0
    reserved: int = 0
    peak_reserved: int = 0


@dataclass
class FakeCudaMemory:
    count: int = 1
    devices: dict[int, Device] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    #: ``empty_cache`` calls
    empties: int = 0

    def __post_init__(self) -> None:
        self.devices = {index: Device() for index in range(self.count)}

    def alloc(self, nbytes: int, device: int = 0) -> None:
        d = self.devices[device]
        d.allocated += nbytes
        d.peak = max(d.peak, d.allocated)
        if d.allocated > d.reserved:
            d.reserved = -(-d.allocated // SEGMENT) * SEGMENT
        d.peak_reserved = max(d.peak_reserved, d.reserved)

    def free(self, nbytes: int, device: int = 0) -> None:
        self.devices[device].allocated -= nbytes

    def install(self, torch: Any) -> Any:
        """``torch`` with these statistics on ``torch.cuda`` (and ``device_count``); returns ``torch``."""
        memory = self

        def reset_peak_memory_stats(index: int) -> None:
            memory.log.append(f"reset {index}")
            d = memory.devices[index]
            d.peak, d.peak_reserved = d.allocated, d.reserved

        def empty_cache() -> None:  # every device's cache, as torch.cuda.empty_cache() empties
            memory.empties += 1
            for d in memory.devices.values():
                d.reserved = -(-d.allocated // SEGMENT) * SEGMENT

        cuda = torch.cuda
        cuda.device_count = lambda: memory.count
        cuda.memory_allocated = lambda index: memory.devices[index].allocated
        cuda.max_memory_allocated = lambda index: memory.devices[index].peak
        cuda.memory_reserved = lambda index: memory.devices[index].reserved
        cuda.max_memory_reserved = lambda index: memory.devices[index].peak_reserved
        cuda.reset_peak_memory_stats = reset_peak_memory_stats
        cuda.empty_cache = empty_cache
        return torch


@dataclass
class SmallCnnStep:
    """The issue's small CNN in miniature: a training step's allocations, with ``zero_grad`` first or last.

    Built: weights, SGD momentum and a batch of inputs, 16.9 MiB that stay resident. Each
    call allocates 26.0 MiB of activations in the forward pass and 8.1 MiB of gradients in
    the backward pass while the activations are still alive (51.0 MiB in all), then frees the
    activations. ``zero_grad(set_to_none=True)`` frees the gradients: at the call's start when
    it comes first, so the last call's gradients are resident when the call begins; at the
    call's end when it comes last. The growth above the start is then 26.0 or 34.1 MiB; the
    high-water mark is 51.0 MiB both ways.
    """

    memory: FakeCudaMemory
    zero_grad_first: bool
    device: int = 0
    model_state: int = int(16.9 * MiB)
    activations: int = int(26.0 * MiB)
    gradients: int = int(8.1 * MiB)
    _has_gradients: bool = False

    def __post_init__(self) -> None:
        self.memory.alloc(self.model_state, self.device)

    def zero_grad(self) -> None:
        if self._has_gradients:
            self.memory.free(self.gradients, self.device)
            self._has_gradients = False

    def __call__(self) -> None:
        if self.zero_grad_first:
            self.zero_grad()
        self.memory.alloc(self.activations, self.device)
        if not self._has_gradients:
            self.memory.alloc(self.gradients, self.device)
            self._has_gradients = True
        self.memory.free(self.activations, self.device)
        if not self.zero_grad_first:
            self.zero_grad()
