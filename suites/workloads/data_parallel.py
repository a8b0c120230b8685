"""The wide MLP's training step under ``torch.nn.DataParallel`` over every visible GPU
(``mlp_wide_train_dataparallel``; test_data_parallel.py)."""

from __future__ import annotations

from typing import Any

import torch

from pytest_gpuperf import Step, Workload

from ..models import mlp
from ..training import training_step
from .common import require, seeded
from .sizes import WIDE_MLP

__all__ = ["dataparallel_unsupported", "dataparallel_workload"]


def dataparallel_unsupported(device: Any) -> str | None:
    """Why DataParallel is not measured on ``device``: it needs two or more CUDA devices."""
    if torch.device(device).type != "cuda":
        return "torch.nn.DataParallel splits a batch across CUDA devices"
    if torch.cuda.device_count() < 2:
        return f"DataParallel needs 2 or more CUDA devices; this machine has {torch.cuda.device_count()}"
    return None


def dataparallel_workload() -> Workload:
    """The wide MLP at the preset's batch per GPU, split by DataParallel over every visible GPU."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        require(workload, dev)
        batch, widths = WIDE_MLP[size]
        count = torch.cuda.device_count()
        batch *= count
        # The test's device first: DataParallel keeps the module and gathers the output on device_ids[0].
        first = dev.index if dev.index is not None else torch.cuda.current_device()
        device_ids = [first, *(i for i in range(count) if i != first)]
        seeded()
        module = mlp(widths).to(torch.device("cuda", first))
        x = torch.randn(batch, widths[0], device=torch.device("cuda", first))
        y = torch.randint(0, widths[-1], (batch,), device=torch.device("cuda", first))
        params = {"model": "mlp_wide", "batch": batch, "devices": count, "device_ids": device_ids}
        # torch's FLOP counter does not see the replicas' threads: count the same step without DataParallel,
        # which does the same FLOPs over the whole batch.
        flops = training_step(module, x, y, precision="fp32", params=params).work["FLOP"]
        model = torch.nn.DataParallel(module, device_ids=device_ids, output_device=first)
        step = training_step(model, x, y, precision="fp32", params=params)
        return Step(step.fn, work={**step.work, "FLOP": flops}, params=step.params, check=step.check)

    workload = Workload(
        "mlp_wide_train_dataparallel",
        build,
        "the wide MLP training step with torch.nn.DataParallel over every visible GPU",
        dataparallel_unsupported,
    )
    return workload
