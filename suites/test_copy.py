"""Host-to-device copy bandwidth on CUDA: pinned against pageable host memory (GB/s).

A copy from pinned memory is a DMA the GPU runs on its own; from pageable memory the
driver first stages the data through a pinned buffer. Pinned must be at least as fast,
judged on the CI of the paired bandwidth ratio.
"""

from __future__ import annotations

import pytest

from pytest_gpuperf import Gpuperf

from .support import expect, paired
from .workloads import WORKLOADS


@pytest.mark.gpuperf_requires("cuda")
def test_h2d_copy_pinned_vs_pageable(gpuperf: Gpuperf) -> None:
    steps = {
        "pinned": WORKLOADS["h2d_copy_pinned"].build(gpuperf.device, gpuperf.size),
        "pageable": WORKLOADS["h2d_copy_pageable"].build(gpuperf.device, gpuperf.size),
    }
    rounds, checks = paired(gpuperf, steps)
    expect(gpuperf, rounds.throughput_ratio("pinned", "pageable", "B"), at_least=1.0, checks=checks["pinned"])
