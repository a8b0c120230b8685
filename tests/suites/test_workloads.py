"""The suites' workloads, models and training step, with real torch on CPU."""

from __future__ import annotations

import itertools
import re

import pytest
import torch

from pytest_gpuperf.measuring import Step, WorkloadUnsupported
from suites.models import DeepStack, mlp
from suites.training import LossLog, amp_dtype, count_flops, training_step
from suites.workloads import MATMUL_SIZES, MATMUL_SWEEP, WORKLOADS, matmul_step, matmul_unsupported

CPU = torch.device("cpu")

UNSUPPORTED_ON_CPU = {
    "matmul_tf32": "CUDA only",
    "matmul_float16": "never run",
    "h2d_copy_pinned": "needs a CUDA device",
    "h2d_copy_pageable": "needs a CUDA device",
    "mlp_wide_train_dataparallel": "CUDA devices",
}


def _run(step: Step, calls: int) -> None:
    for _ in range(calls):
        step.fn()


@pytest.mark.parametrize("name", sorted(set(WORKLOADS) - set(UNSUPPORTED_ON_CPU)))
def test_every_cpu_workload_builds_runs_and_passes_its_check(name: str) -> None:
    step = WORKLOADS[name].build(CPU, "small")
    assert step.work and all(amount > 0 for amount in step.work.values())
    _run(step, 12)
    if step.check is not None:
        step.check()


@pytest.mark.parametrize(("name", "reason"), sorted(UNSUPPORTED_ON_CPU.items()))
def test_workloads_that_cannot_run_on_cpu_say_why_and_refuse_to_build(name: str, reason: str) -> None:
    why = WORKLOADS[name].why_unsupported(CPU)
    assert why is not None and reason in why
    # A NotImplementedError, so that asv skips the benchmark instead of failing it.
    with pytest.raises(WorkloadUnsupported, match=re.escape(f"{name} on cpu: {why}")):
        WORKLOADS[name].build(CPU, "small")
    assert issubclass(WorkloadUnsupported, NotImplementedError)


def test_fp16_is_never_run_on_cpu_but_bf16_and_fp32_are() -> None:
    assert matmul_unsupported(CPU, "float16") is not None
    assert matmul_unsupported(CPU, "bfloat16") is None
    assert matmul_unsupported(CPU, "float32") is None
    with pytest.raises(ValueError, match="not one of"):
        matmul_unsupported(CPU, "int8")


def test_matmul_step_counts_2n3_flop_and_writes_the_product() -> None:
    step = matmul_step(CPU, "float32", 64)
    assert step.work == {"FLOP": 2.0 * 64**3}
    assert step.params == {"n": 64, "dtype": "float32"}
    step.fn()
    assert step.check is not None
    step.check()


def test_the_matmul_workload_is_the_middle_of_the_sweep() -> None:
    for preset, sweep in MATMUL_SWEEP.items():
        assert sweep == (sweep[-1] // 4, sweep[-1] // 2, sweep[-1])
        assert MATMUL_SIZES[preset] == sweep[1]


def test_training_flops_are_forward_plus_backward_of_every_linear() -> None:
    widths = (1000, 512, 256, 2)
    batch = 64
    x, y = torch.randn(batch, widths[0]), torch.randint(0, 2, (batch,))
    step = training_step(mlp(widths), x, y, precision="fp32", params={"model": "mlp"})
    macs = [a * b for a, b in itertools.pairwise(widths)]
    forward = 2 * batch * sum(macs)
    # Backward: a weight gradient for every layer, an input gradient for all but the first.
    backward = 2 * batch * sum(macs) + 2 * batch * sum(macs[1:])
    assert step.work == {"samples": batch, "FLOP": forward + backward}
    assert count_flops(lambda: torch.mm(torch.ones(4, 8), torch.ones(8, 2))) == 2 * 4 * 8 * 2


def test_amp_uses_bf16_without_a_scaler_on_cpu() -> None:
    assert amp_dtype(CPU) == torch.bfloat16
    assert amp_dtype(torch.device("cuda", 0)) == torch.float16
    step = WORKLOADS["mlp_train_amp"].build(CPU, "small")
    assert step.params["amp"] == "autocast bfloat16"
    assert step.params["grad_scaler"] is False


def test_training_check_fails_when_the_optimizer_did_not_step() -> None:
    model = mlp((8, 4, 2))
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    step = training_step(model, x, y, precision="fp32", params={"model": "tiny"})
    _run(step, 12)
    optimizer_state_steps = [s for s in step.fn.__closure__ or () if isinstance(s.cell_contents, torch.optim.Adam)]
    assert optimizer_state_steps, "the step closes over its optimizer"
    optimizer = optimizer_state_steps[0].cell_contents
    optimizer.state.clear()  # as if every step had been skipped
    assert step.check is not None
    with pytest.raises(AssertionError, match="optimizer applied"):
        step.check()


def test_loss_log_keeps_first_and_last_and_judges_the_fall() -> None:
    log = LossLog(keep=2)
    for value in (5.0, 4.0, 3.0, 2.0, 1.0):
        log.add(torch.tensor(value))
    assert log.calls == 5
    assert log.summary() == (4.5, 1.5)
    log.check_falls("falling")
    rising = LossLog(keep=2)
    for value in (1.0, 2.0, 3.0, 4.0):
        rising.add(torch.tensor(value))
    with pytest.raises(AssertionError, match="did not fall over 4 steps"):
        rising.check_falls("rising")
    broken = LossLog(keep=2)
    for value in (1.0, float("nan"), 1.0, 1.0):
        broken.add(torch.tensor(value))
    with pytest.raises(AssertionError, match="not finite"):
        broken.check_falls("broken")
    with pytest.raises(AssertionError, match="no training step ran"):
        LossLog().check_falls("empty")


def _saved_bytes(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes autograd keeps for backward during a forward (checkpointed blocks keep only their inputs)."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x).sum()
    return total


def test_checkpointing_expansion_blocks_keeps_far_fewer_activations_and_the_same_gradients() -> None:
    torch.manual_seed(0)
    full = DeepStack(32, 4)
    ckpt = DeepStack(32, 4, checkpointed=True)
    ckpt.load_state_dict(full.state_dict())
    x = torch.randn(256, 32)
    # The wide inner activation (4x) is what the checkpoint frees; weights are saved by both.
    assert _saved_bytes(ckpt, x) < 0.5 * _saved_bytes(full, x)
    for model in (full, ckpt):
        model(x).square().mean().backward()
    for a, b in zip(full.parameters(), ckpt.parameters(), strict=True):
        assert a.grad is not None and b.grad is not None
        torch.testing.assert_close(a.grad, b.grad)
