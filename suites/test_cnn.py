"""CNN training throughput on 3x32x32 images: a small conv net and a ResNet-style stack (images/s).

The workload's check asserts that the loss stayed finite and fell over the measured steps.
"""

from __future__ import annotations

import pytest

from pytest_gpuperf import Gpuperf

from .workloads import WORKLOADS


@pytest.mark.parametrize("name", ["cnn_train", "resnet_train"])
def test_cnn_train(gpuperf: Gpuperf, name: str) -> None:
    m = gpuperf.run(WORKLOADS[name])
    # Any working device trains these at well over 10 images/s; the real content is the table.
    m.assert_throughput(at_least="10 images/s")
