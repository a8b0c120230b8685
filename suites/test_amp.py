"""Automatic mixed precision against fp32, in the same session and in interleaved rounds.

CUDA: ``torch.autocast`` float16 with ``torch.amp.GradScaler``; on tensor-core GPUs
(compute capability 7.0 and later) AMP must be faster than fp32 by ``AMP_MARGIN``,
judged on the CI of the paired speedup. CPU: bfloat16 autocast (never fp16 on a CPU);
whether it pays depends on the CPU's bf16 support (AMX, avx512_bf16) and on the size,
so the speedup is reported and nothing is asserted. Everywhere: the loss stays finite
and falls, and the optimizer (through the scaler on CUDA) steps.
"""

from __future__ import annotations

from typing import Final

import pytest
import torch

from pytest_gpuperf import Gpuperf

from .support import expect, paired
from .workloads import WORKLOADS

#: AMP on tensor cores must beat fp32 by at least this factor (the CI's lower end must clear it).
AMP_MARGIN: Final = 1.1


def amp_gain_expected(device: torch.device) -> str | None:
    """None when AMP is expected to be faster on ``device``, else why it is not asserted there."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) >= (7, 0):
            return None
        return f"compute capability {major}.{minor} has no tensor cores (they came with 7.0)"
    if device.type == "cpu":
        return (
            "bf16 autocast on a CPU pays only with native bf16 matmul (AMX, or avx512_bf16 used by oneDNN) and "
            "large enough layers; on one machine of this project it is 2.3x faster, on another 1.6x slower"
        )
    return f"no AMP speed expectation is defined for {device.type}"


@pytest.mark.parametrize("model", ["mlp", "mlp_wide", "cnn", "resnet"])
def test_amp_speedup(gpuperf: Gpuperf, model: str) -> None:
    steps = {
        "fp32": WORKLOADS[f"{model}_train"].build(gpuperf.device, gpuperf.size),
        "amp": WORKLOADS[f"{model}_train_amp"].build(gpuperf.device, gpuperf.size),
    }
    rounds, checks = paired(gpuperf, steps)
    for step in steps.values():
        assert step.check is not None
        step.check()  # loss finite and falling, optimizer (and scaler) stepped
    speedup = rounds.speedup("amp", "fp32")
    why_not = amp_gain_expected(gpuperf.device)
    if why_not is None:
        expect(gpuperf, speedup, at_least=AMP_MARGIN, checks=checks["amp"])
    else:
        gpuperf.note(f"{model}: AMP ({steps['amp'].params['amp']}) {speedup}; not asserted: {why_not}")
