"""Automatic mixed precision against fp32, in the same session and in interleaved rounds.

CUDA: ``torch.autocast`` float16 with ``torch.amp.GradScaler``, against IEEE fp32 (TF32
off: ``suites/precision.py``), both with the same fused Adam. AMP must be faster than
fp32 by ``AMP_MARGIN`` (judged on the CI of the paired speedup) where that is a fact of
the step and not of the device: on tensor-core GPUs (compute capability 7.0 and later),
for a step whose matmul work is large GEMMs (``GEMM_BOUND_SHARE`` of its GEMM FLOPs in
GEMMs with every dimension at least ``LARGE_GEMM``, known from the step's shapes before
anything is timed). A step of small layers is launch- or memory-bound, and whether fp16
pays there depends on the device, the driver and the kernels picked: its speedup is
reported with the reason. CPU: bfloat16 autocast (never fp16 on a CPU); whether it pays
depends on the CPU's bf16 support (AMX, avx512_bf16) and on the size, so the speedup is
reported. Everywhere: the loss stays finite and falls, and the optimizer (through the
scaler on CUDA) steps.
"""

from __future__ import annotations

from typing import Final

import pytest
import torch

from pytest_gpuperf import Gpuperf

from .training import LARGE_GEMM
from .workloads import WORKLOADS

#: AMP on tensor cores must beat fp32 by at least this factor (the CI's lower end must clear it).
AMP_MARGIN: Final = 1.1
#: The share of a step's GEMM FLOPs that must be in large GEMMs (every dimension >= LARGE_GEMM) for the
#: step to be GEMM-bound, and AMP's gain on tensor cores a fact of the step rather than of the device.
GEMM_BOUND_SHARE: Final = 0.9


def amp_gain_expected(device: torch.device, large_gemm_share: float) -> str | None:
    """None when AMP must be faster for a step on ``device``, else why it is not asserted there.

    ``large_gemm_share``: the fraction of the step's GEMM FLOPs in GEMMs with every dimension
    at least ``LARGE_GEMM`` (the step's ``large_gemm_share`` parameter, from its shapes).
    """
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (7, 0):
            return f"compute capability {major}.{minor} has no tensor cores (they came with 7.0)"
        if large_gemm_share < GEMM_BOUND_SHARE:
            return (
                f"{large_gemm_share:.0%} of the step's GEMM FLOPs are in GEMMs with every dimension >= {LARGE_GEMM} "
                f"(asserted from {GEMM_BOUND_SHARE:.0%}): a step of smaller layers can be launch- or memory-bound, "
                "and whether fp16 pays there, and how much, depends on the device"
            )
        return None
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
    rounds = gpuperf.paired(steps)
    for step in steps.values():
        assert step.check is not None
        step.check()  # loss finite and falling, optimizer (and scaler) stepped
    speedup = rounds.speedup("amp", "fp32")
    share = steps["fp32"].params["large_gemm_share"]
    assert isinstance(share, float)
    why_not = amp_gain_expected(gpuperf.device, share)
    if why_not is None:
        gpuperf.expect(speedup, at_least=AMP_MARGIN, record="amp")
    else:
        gpuperf.note(f"{model}: AMP ({steps['amp'].params['amp']}) {speedup}; not asserted: {why_not}")
