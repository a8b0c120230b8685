"""Every workload of the suites, defined once; pytest (``test_*.py``) and asv (``benchmarks/``) run these."""

from __future__ import annotations

from typing import Any, Final

import torch

from pytest_gpuperf.workload import Step, Workload

MATMUL_SIZES: Final = {"small": 512, "medium": 2048, "large": 8192}


def matmul(dtype: torch.dtype) -> Workload:
    def build(device: Any, size: str) -> Step:
        n = MATMUL_SIZES[size]
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        return Step(
            lambda: a @ b, work={"FLOP": 2.0 * n**3}, params={"n": n, "dtype": str(dtype).removeprefix("torch.")}
        )

    return Workload(f"matmul_{str(dtype).removeprefix('torch.')}", build, "square matmul, 2n^3 FLOP per call")


#: name -> workload; asv generates one benchmark per entry.
WORKLOADS: Final[dict[str, Workload]] = {w.name: w for w in (matmul(torch.float32),)}
