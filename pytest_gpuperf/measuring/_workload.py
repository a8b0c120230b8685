"""Workloads: one definition of "set up on a device, run one step, work per step" for pytest and asv.

A suite defines ``Workload("mlp_train", build)`` where ``build(device, size)`` sets up
models and data on ``device`` for a size preset and returns a ``Step``. The pytest
suites run it with ``gpuperf.run(workload)``; the asv benchmarks (``benchmarks/``) with
``measure_on``; both time it with the same sampler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._settings import SIZES

if TYPE_CHECKING:
    from ._backends import Backend

__all__ = ["LARGE_MIN_MEMORY", "Step", "Workload", "WorkloadUnsupported", "resolve_size"]

#: ``auto`` picks the large preset only on a CUDA device with at least this much memory (a 10-16 GB GPU or a MIG
#: slice gets medium: the large preset's biggest tests hold several GiB each, plus the allocator's cache).
LARGE_MIN_MEMORY: Final = 24 << 30


@dataclass(frozen=True)
class Step:
    """What one measurement runs: ``fn`` is one step; ``work`` is what one step does, by unit."""

    fn: Callable[[], object]
    work: Mapping[str, float]
    params: Mapping[str, object] = field(default_factory=dict)
    #: Called after measuring to check the step did real work (loss finite, result correct ...).
    check: Callable[[], None] | None = None


class WorkloadUnsupported(NotImplementedError):
    """``build`` was asked for a device the workload cannot run on; the message says why.

    A NotImplementedError so that asv, which skips a benchmark whose setup raises one,
    skips it too; ``gpuperf.run`` skips the test with the message.
    """


@dataclass(frozen=True)
class Workload:
    name: str
    build: Callable[[Any, str], Step]  # (torch.device, size preset) -> Step
    description: str = ""
    #: (torch.device) -> why this workload cannot run there, or None; build raises WorkloadUnsupported then.
    unsupported: Callable[[Any], str | None] | None = None

    def why_unsupported(self, device: Any) -> str | None:
        return None if self.unsupported is None else self.unsupported(device)


def resolve_size(size: str, device_kind: str, backend: Backend | None = None) -> str:
    """``auto`` becomes ``large`` on a CUDA device with ``LARGE_MIN_MEMORY`` or more (fill the chip), ``medium`` on a
    smaller one (or one whose memory is not known: no ``backend`` to ask), and ``small`` elsewhere (a short CPU
    run). Only ``auto`` on CUDA asks the backend for its memory."""
    if size not in SIZES:
        raise ValueError(f"size preset {size!r} is not one of {', '.join(SIZES)}")
    if size != "auto":
        return size
    if device_kind != "cuda":
        return "small"
    memory = backend.describe().get("memory_bytes") if backend is not None else None
    return "large" if isinstance(memory, int) and memory >= LARGE_MIN_MEMORY else "medium"
