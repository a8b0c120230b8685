"""Matmul throughput on each requested device (first workload; the suites issue extends it)."""

from __future__ import annotations

from pytest_gpuperf import Gpuperf

from .workloads import WORKLOADS


def test_matmul_float32(gpuperf: Gpuperf) -> None:
    m = gpuperf.run(WORKLOADS["matmul_float32"])
    # Any working device multiplies a 512x512 fp32 matrix at well over 1 GFLOP/s.
    m.assert_throughput(at_least="1 GFLOP/s")
