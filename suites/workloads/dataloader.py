"""Data loading end to end: a synthetic Dataset through a DataLoader, copied to the device, into the MLP's
training step (``dataloader_w<workers>_<pinned|pageable>``; test_dataloader.py measures the stages too)."""

from __future__ import annotations

from typing import Any

import torch

from pytest_gpuperf import Step, Workload

from ..dataloading import dataloader_steps, dataloader_unsupported, loader_name
from .common import require

__all__ = ["dataloader_workload"]


def dataloader_workload(workers: int, pinned: bool) -> Workload:
    """The loader's end-to-end step (``suites/dataloading.py``) with ``workers`` processes, pinned or not."""

    def build(device: Any, size: str) -> Step:
        require(workload, torch.device(device))
        return dataloader_steps(torch.device(device), size, workers=workers, pinned=pinned)["end_to_end"]

    workload = Workload(
        loader_name(workers, pinned),
        build,
        f"synthetic Dataset -> DataLoader(num_workers={workers}, pin_memory={pinned}) -> copy -> MLP training step",
        lambda device: dataloader_unsupported(torch.device(device), pinned),
    )
    return workload
