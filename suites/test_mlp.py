"""MLP training throughput: the tutorial classifier 1000-512-256-2 and a wider one (samples/s).

Each step is a full training step (zero_grad, forward, backward, Adam step) on a
fixed random batch; the workload's check asserts that the loss stayed finite, fell
over the measured steps, and that the optimizer stepped every time.
"""

from __future__ import annotations

import pytest

from pytest_gpuperf import Gpuperf

from .workloads import WORKLOADS


@pytest.mark.parametrize("name", ["mlp_train", "mlp_wide_train"])
def test_mlp_train(gpuperf: Gpuperf, name: str) -> None:
    m = gpuperf.run(WORKLOADS[name])
    # Any working device trains these at well over 100 samples/s; the real content is the table.
    m.assert_throughput(at_least="100 samples/s")
