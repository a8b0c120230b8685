"""Host-device copy bandwidth on CUDA: pinned against pageable host memory (GB/s), both directions.

A copy from (or into) pinned memory is a DMA the GPU runs on its own; with pageable
memory the driver stages the data through a pinned buffer. Pinned must be at least as
fast, judged on the CI of the paired bandwidth ratio. Device memory bandwidth is in
``test_bandwidth.py``.
"""

from __future__ import annotations

import pytest

from pytest_gpuperf import Gpuperf

from .workloads import WORKLOADS


def _pinned_vs_pageable(gpuperf: Gpuperf, direction: str) -> None:
    steps = {
        "pinned": WORKLOADS[f"{direction}_copy_pinned"].build(gpuperf.device, gpuperf.size),
        "pageable": WORKLOADS[f"{direction}_copy_pageable"].build(gpuperf.device, gpuperf.size),
    }
    rounds = gpuperf.paired(steps)
    gpuperf.expect(rounds.throughput_ratio("pinned", "pageable", "B"), at_least=1.0, record="pinned")


@pytest.mark.gpuperf_requires("cuda")
def test_h2d_copy_pinned_vs_pageable(gpuperf: Gpuperf) -> None:
    _pinned_vs_pageable(gpuperf, "h2d")


@pytest.mark.gpuperf_requires("cuda")
def test_d2h_copy_pinned_vs_pageable(gpuperf: Gpuperf) -> None:
    _pinned_vs_pageable(gpuperf, "d2h")
