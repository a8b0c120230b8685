"""Matmul throughput on each requested device (first workload; the suites issue extends it)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pytest_gpuperf import Gpuperf

SIZES = {"small": 512, "medium": 2048, "large": 8192}


@pytest.mark.parametrize("dtype", [torch.float32])
def test_matmul(gpuperf: Gpuperf, gpuperf_device: Any, dtype: torch.dtype) -> None:
    n = SIZES[gpuperf.size]
    a = torch.randn(n, n, device=gpuperf_device, dtype=dtype)
    b = torch.randn(n, n, device=gpuperf_device, dtype=dtype)
    m = gpuperf.measure(lambda: a @ b, flops=2 * n**3, params={"n": n, "dtype": str(dtype)})
    # Any working device multiplies a 512x512 fp32 matrix at well over 1 GFLOP/s.
    m.assert_throughput(at_least="1 GFLOP/s")
