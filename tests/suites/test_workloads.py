"""The suites' workloads, models and training step, with real torch on CPU."""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator
from typing import cast

import pytest
import torch

from pytest_gpuperf.measuring import Step, WorkloadUnsupported
from suites.compat import torch_release
from suites.models import DeepStack, ResNetStyle, SmallCNN, mlp
from suites.test_amp import amp_gain_expected
from suites.training import (
    Gemm,
    LossLog,
    _backoffs,
    adam,
    amp_dtype,
    census,
    count_flops,
    large_gemm_share,
    training_step,
)
from suites.workloads import (
    MATMUL_SIZES,
    MATMUL_SWEEP,
    MLP_BATCH,
    RESNET,
    SMALL_CNN,
    WIDE_MLP,
    WORKLOADS,
    host_buffer,
    matmul_step,
    matmul_unsupported,
)

CPU = torch.device("cpu")

UNSUPPORTED_ON_CPU = {
    "matmul_tf32": "CUDA only",
    "matmul_float16": "never run",
    "h2d_copy_pinned": "needs a CUDA device",
    "h2d_copy_pageable": "needs a CUDA device",
    "mlp_wide_train_dataparallel": "CUDA devices",
    "d2h_copy_pinned": "needs a CUDA device",
    "d2h_copy_pageable": "needs a CUDA device",
    "dataloader_w0_pinned": "for a CUDA device",
    "dataloader_w2_pinned": "for a CUDA device",
}


#: What ``ab`` and asv see, in this order: a workload renamed, dropped or added changes this list on purpose.
REGISTERED = (
    *("matmul_float32", "matmul_tf32", "matmul_float16", "matmul_bfloat16"),
    *("mlp_train", "mlp_wide_train", "cnn_train", "resnet_train"),
    *("mlp_train_amp", "mlp_wide_train_amp", "cnn_train_amp", "resnet_train_amp"),
    *("stack_train", "stack_train_checkpointed", "stack_forward"),
    *("h2d_copy_pinned", "h2d_copy_pageable", "mlp_wide_train_dataparallel"),
    *("bandwidth_d2d_copy", "bandwidth_axpy", "d2h_copy_pinned", "d2h_copy_pageable"),
    *("dataloader_w0_pageable", "dataloader_w0_pinned", "dataloader_w2_pageable", "dataloader_w2_pinned"),
    "transformer_train",
    *("mlp_wide_infer_b1", "mlp_wide_infer", "cnn_infer_b1", "cnn_infer", "transformer_infer_b1", "transformer_infer"),
    *("mlp_wide_infer_int8", "attention_math", "attention_fused", "attention_unfused"),
    *("mlp_train_compiled", "transformer_train_compiled"),
)


def test_the_registry_holds_every_workload_once_under_its_own_name_in_order() -> None:
    assert tuple(WORKLOADS) == REGISTERED
    assert all(workload.name == name for name, workload in WORKLOADS.items())


def _run(step: Step, calls: int) -> None:
    for _ in range(calls):
        step.fn()


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch at one thread, as the suites measure on a CPU (``--gpuperf-threads=auto``). On a busy 2-vCPU machine two
    intra-op threads wait on each other for a core: the training steps then took 3 to 8 times as long."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _cpu_workloads() -> list[object]:
    """Each workload a CPU runs; the compiled ones (a first inductor compile: 30 s and more with its cache cold) in the
    e2e group, which .ci/run runs after the quick set (``pytest -m e2e``)."""
    names = sorted(set(WORKLOADS) - set(UNSUPPORTED_ON_CPU))
    return [pytest.param(n, marks=pytest.mark.e2e) if n.endswith("_compiled") else n for n in names]


@pytest.mark.parametrize("name", _cpu_workloads())
# inductor, imported by the first compile (mlp_train_compiled), warns that torch.jit.script_method is deprecated.
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.usefixtures("one_thread")
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
    assert step.params == {"n": 64, "dtype": "float32", "fp32_precision": "ieee"}
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
    assert step.check is not None
    cells = [s for s in step.check.__closure__ or () if isinstance(s.cell_contents, torch.optim.Adam)]
    assert cells, "the check closes over the step's optimizer"
    optimizer = cells[0].cell_contents
    optimizer.state.clear()  # as if every step had been skipped
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


# ---------------------------------------------------------------- the GEMMs of a step, and where AMP is asserted


def test_census_sees_every_gemm_with_its_dimensions_and_the_same_flops_as_torchs_counter() -> None:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 4)
    )
    x = torch.randn(2, 3, 32, 32)

    def step() -> None:
        torch.autograd.backward(model(x).sum())

    flops, gemms = census(step)
    assert flops == sum(g.flops for g in gemms)
    # Forward; backward: the linear's input and weight gradients, the conv's weight gradient (x needs none).
    # A backward GEMM has its forward's dimensions in another order.
    conv, linear = (2 * 16 * 16, 8, 3 * 9), (2, 4, 8 * 16 * 16)  # conv: N x output pixels, C_out, C_in x kernel
    assert sorted(sorted((g.m, g.n, g.k)) for g in gemms) == sorted(sorted(d) for d in [conv] * 2 + [linear] * 3)
    big, small = Gemm(1024, 4096, 2048), Gemm(4096, 10, 1024)  # the second has a dimension below 1024
    assert large_gemm_share([big, small]) == pytest.approx(big.flops / (big.flops + small.flops))
    assert large_gemm_share([]) == 0.0


def _share(model: torch.nn.Module, x: torch.Tensor) -> float:
    model = model.to("meta")  # shapes only: the large presets' GEMMs without their arithmetic

    def step() -> None:
        torch.autograd.backward(model(x.to("meta")).sum())

    return large_gemm_share(census(step)[1])


@pytest.mark.parametrize("size", ["small", "medium", "large"])
def test_amp_speed_is_asserted_on_tensor_cores_only_for_steps_of_large_gemms(
    size: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    batch, widths = WIDE_MLP[size]
    shares = {
        "mlp": _share(mlp((1000, 512, 256, 2)), torch.empty(MLP_BATCH[size], 1000)),
        "mlp_wide": _share(mlp(widths), torch.empty(batch, widths[0])),
        "cnn": _share(SmallCNN(SMALL_CNN[size][1]), torch.empty(SMALL_CNN[size][0], 3, 32, 32)),
        "resnet": _share(ResNetStyle(*RESNET[size][1:]), torch.empty(RESNET[size][0], 3, 32, 32)),
    }
    asserted = {name for name, share in shares.items() if amp_gain_expected(torch.device("cuda"), share) is None}
    # Only the wide MLP's layers are all >= 1024 wide (and its batch too, from the medium preset).
    assert asserted == (set() if size == "small" else {"mlp_wide"}), shares
    why = amp_gain_expected(torch.device("cuda"), shares["mlp"])
    assert why is not None and "0% of the step's GEMM FLOPs are in GEMMs with every dimension >= 1024" in why
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (6, 1))
    assert "no tensor cores" in str(amp_gain_expected(torch.device("cuda"), 1.0))
    assert "bf16 autocast on a CPU" in str(amp_gain_expected(CPU, 1.0))


def test_training_steps_use_fused_adam_or_say_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    step = WORKLOADS["mlp_train"].build(CPU, "small")
    if torch_release(str(torch.__version__)) >= (2, 4):  # torch 2.4+ has a fused CPU Adam
        assert step.params["optimizer"] == "Adam fused"
    else:  # torch 2.3.1 (checked 2026-11-23): fused Adam is CUDA-only, and the step says so
        assert str(step.params["optimizer"]).startswith("Adam (not fused: `fused=True` requires")
    real = torch.optim.Adam

    def no_fused(params: object, lr: float, fused: bool = False) -> torch.optim.Optimizer:
        if fused:
            raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")
        return real(params, lr=lr)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.optim, "Adam", no_fused)
    optimizer, name = adam(mlp((4, 2)).parameters(), 1e-3)
    assert isinstance(optimizer, real)
    assert (
        name
        == "Adam (not fused: `fused=True` requires all the params to be floating point Tensors of supported devices)"
    )


# ---------------------------------------------------------------- host buffers of the copy workloads


class _CudaStandIn:
    """Records whether host memory is allocated inside ``torch.cuda.device(...)`` and whether it is written."""

    uint8 = torch.uint8

    def __init__(self) -> None:
        self.current: object = None
        self.calls: list[tuple[str, object]] = []
        self.cuda = self

    @contextlib.contextmanager
    def device(self, device: object) -> Iterator[None]:
        self.current = device
        try:
            yield
        finally:
            self.current = None

    def empty(self, nbytes: int, *, dtype: torch.dtype, pin_memory: bool) -> torch.Tensor:
        self.calls.append(("empty pinned" if pin_memory else "empty", self.current))
        return torch.empty(nbytes, dtype=dtype)  # plain memory: no CUDA here


@pytest.mark.parametrize("pinned", [True, False])
def test_host_buffers_are_pinned_in_the_devices_context_and_every_byte_written(pinned: bool) -> None:
    stand_in = _CudaStandIn()
    device = torch.device("cuda", 1)
    buffer = host_buffer(4096 * 3, device, pinned=pinned, torch_module=stand_in)
    # Pinned inside cuda:1's context (no context on GPU 0); pageable memory needs no device.
    assert stand_in.calls == ([("empty pinned", device)] if pinned else [("empty", None)])
    assert bool((buffer == 0xA5).all())  # every page written: none left to the shared zero page


class _ScalerAfterTwoSkips:
    """A GradScaler's public state after two skipped steps: 65536 -> 16384."""

    def get_scale(self) -> float:
        return 16384.0

    def get_backoff_factor(self) -> float:
        return 0.5

    def get_growth_interval(self) -> int:
        return 2000


def test_the_scalers_calibration_skips_are_allowed_however_few_steps_ran_and_no_others() -> None:
    scaler = cast(torch.amp.GradScaler, _ScalerAfterTwoSkips())
    assert _backoffs(scaler, 65536.0, taken=13) == 2  # the H100's 13 of 15 steps: explained
    assert _backoffs(scaler, 16384.0, taken=4000) == 2  # two growths could hide two more back-offs
    model = mlp((8, 4, 2))
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    step = training_step(model, x, y, precision="fp32", params={"model": "tiny"})
    assert step.check is not None
    log = next(c.cell_contents for c in step.check.__closure__ or () if isinstance(c.cell_contents, LossLog))
    _run(step, 3)
    log.calls += 1  # a step the optimizer did not apply, and no scaler to explain it
    with pytest.raises(AssertionError, match="applied 3 of 4 steps"):
        step.check()
