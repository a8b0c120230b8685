"""What every family's ``build`` does first: refuse a device it cannot run on, and seed its data."""

from __future__ import annotations

import torch

from pytest_gpuperf import Workload, WorkloadUnsupported

__all__ = ["require", "seeded"]


def require(workload: Workload, device: torch.device) -> None:
    """Raise WorkloadUnsupported with ``workload``'s reason when it cannot run on ``device`` (asv skips it then)."""
    why = workload.why_unsupported(device)
    if why:
        raise WorkloadUnsupported(f"{workload.name} on {device}: {why}")


def seeded() -> None:
    # The same weights and data in every build, so runs and devices compare like with like.
    torch.manual_seed(0)
