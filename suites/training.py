"""One full training step (zero_grad, forward, backward, optimizer step), in fp32 or mixed precision.

Mixed precision follows torch's recipes: on CUDA ``torch.autocast`` with float16 and a
``torch.amp.GradScaler`` (fp16 gradients underflow without loss scaling); on CPU
``torch.autocast`` with bfloat16, which has fp32's exponent range and needs no
scaler. fp16 is never used on a CPU: measured on this project's machine, fp16
autocast there is about 150x slower than fp32.

Both precisions use the same optimizer, Adam with ``fused=True`` where torch has a fused
kernel for the device: with a fused optimizer ``GradScaler.step`` hands the scale and the
inf check to the kernel, where a non-fused one reads the inf check on the host
(``.item()``, a host-device synchronization in every AMP step). And both run with fp32
math pinned to IEEE (``suites/precision.py``): the fp32 step is fp32, not TF32, and the
AMP step's fp32 parts are too, so the pair differs only in the autocast precision.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from pytest_gpuperf import Step

from .precision import pin_fn

__all__ = [
    "LARGE_GEMM",
    "PRECISIONS",
    "Gemm",
    "LossLog",
    "adam",
    "amp_dtype",
    "census",
    "count_flops",
    "large_gemm_share",
    "training_step",
]

PRECISIONS: Final = ("fp32", "amp")
#: A GEMM whose every dimension (M, N, K) is at least this is compute-bound in fp16 on every tensor-core
#: GPU: its arithmetic intensity, 1 / (1/M + 1/N + 1/K) FLOP per byte of fp16 operands, is at least
#: 1024/3 = 341, above the ridge point (peak FLOP/s / memory B/s) of V100, T4, A100 and H100 alike.
LARGE_GEMM: Final = 1024


def amp_dtype(device: torch.device) -> torch.dtype:
    """The autocast dtype for ``device``: bfloat16 on CPU, float16 elsewhere."""
    return torch.bfloat16 if device.type == "cpu" else torch.float16


@dataclass
class LossLog:
    """The first and the last few losses of a run, kept as tensors so logging never synchronizes a GPU."""

    keep: int = 5
    calls: int = 0
    first: list[torch.Tensor] = field(default_factory=list)
    last: deque[torch.Tensor] = field(default_factory=deque)

    def add(self, loss: torch.Tensor) -> None:
        self.calls += 1
        value = loss.detach()
        if len(self.first) < self.keep:
            self.first.append(value)
        self.last.append(value)
        while len(self.last) > self.keep:
            self.last.popleft()

    def reset(self) -> None:
        self.calls = 0
        self.first.clear()
        self.last.clear()

    def summary(self) -> tuple[float, float]:
        """Mean of the first and of the last losses logged."""
        if not self.first:
            raise AssertionError("no training step ran, so there is no loss to check")
        first = torch.stack(self.first).float().mean().item()
        last = torch.stack(list(self.last)).float().mean().item()
        return first, last

    def check_falls(self, what: str) -> None:
        """The loss stayed finite and fell from the first steps to the last ones."""
        first, last = self.summary()
        if not (math.isfinite(first) and math.isfinite(last)):
            raise AssertionError(f"{what}: the loss is not finite (first steps {first}, last steps {last})")
        if self.calls < 2 * self.keep:
            return  # too few steps to compare disjoint windows
        if not last < first:
            raise AssertionError(
                f"{what}: the training loss did not fall over {self.calls} steps "
                f"(mean of the first {self.keep}: {first:.4g}, of the last {self.keep}: {last:.4g})"
            )


def count_flops(fn: Callable[[], object]) -> float:
    """FLOPs of one call of ``fn`` (matmuls and convolutions, forward and backward) by torch's FLOP counter."""
    return census(fn)[0]


@dataclass(frozen=True)
class Gemm:
    """One matrix product of a step, as the GEMM it is (a convolution as its implicit GEMM): M x K times K x N."""

    m: int
    n: int
    k: int
    #: independent products of this shape (a bmm's batch, a grouped convolution's groups)
    count: int = 1
    #: the dtype of its operands ("torch.float32"), which is what it computes in
    dtype: str = ""

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.count

    @property
    def smallest(self) -> int:
        return min(self.m, self.n, self.k)


def _prod(values: Any) -> int:
    return math.prod(int(v) for v in values)


def _gemms(op: Any, args: tuple[Any, ...]) -> list[Gemm]:
    """The GEMMs of one aten call: matmuls by their operands, convolutions (forward, backward) as implicit GEMMs
    (N x output pixels, C_out / groups, C_in / groups x kernel); the suites use no transposed convolution."""
    aten = torch.ops.aten
    if op in (aten.mm, aten.addmm):
        a, b = args[-2].shape, args[-1].shape
        return [Gemm(int(a[0]), int(b[1]), int(a[1]))]
    if op in (aten.bmm, aten.baddbmm):
        a, b = args[-2].shape, args[-1].shape
        return [Gemm(int(a[1]), int(b[2]), int(a[2]), int(a[0]))]
    if op is aten.convolution:
        x, w, groups = args[0].shape, args[1].shape, int(args[8])
        out_pixels = _conv_out_pixels(x, w, args[3], args[4], args[5])
        return [Gemm(int(x[0]) * out_pixels, int(w[0]) // groups, _prod(w[1:]), groups)]
    if op is aten.convolution_backward:
        # The input and the weight gradient are GEMMs of the forward's dimensions, permuted (dY W, dY^T X).
        grad, w, groups, mask = args[0].shape, args[2].shape, int(args[9]), args[10]
        gemm = Gemm(int(grad[0]) * _prod(grad[2:]), int(w[0]) // groups, _prod(w[1:]), groups)
        return [gemm] * (int(bool(mask[0])) + int(bool(mask[1])))
    return []


def _conv_out_pixels(x: Any, w: Any, stride: Any, padding: Any, dilation: Any) -> int:
    pixels = 1
    for i, size in enumerate(x[2:]):
        span = dilation[i] * (int(w[2 + i]) - 1) + 1
        pixels *= (int(size) + 2 * padding[i] - span) // stride[i] + 1
    return pixels


class _GemmRecorder(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch leaves the mode untyped
    """Records the GEMMs of every matmul and convolution dispatched while active."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.gemms: list[Gemm] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        dtype = next((str(arg.dtype) for arg in args if isinstance(arg, torch.Tensor)), "")
        self.gemms += [dataclasses.replace(gemm, dtype=dtype) for gemm in _gemms(func.overloadpacket, args)]
        return func(*args, **(kwargs or {}))


def census(fn: Callable[[], object]) -> tuple[float, list[Gemm]]:
    """One call of ``fn``: its FLOPs (torch's FLOP counter) and the GEMMs it ran, forward and backward."""
    recorder = _GemmRecorder()
    with FlopCounterMode(display=False) as counter, recorder:
        fn()
    return float(counter.get_total_flops()), recorder.gemms


def large_gemm_share(gemms: list[Gemm]) -> float:
    """The fraction of the GEMMs' FLOPs in GEMMs whose every dimension is at least ``LARGE_GEMM``."""
    total = sum(g.flops for g in gemms)
    return sum(g.flops for g in gemms if g.smallest >= LARGE_GEMM) / total if total else 0.0


def adam(parameters: Any, lr: float) -> tuple[torch.optim.Optimizer, str]:
    """Adam, fused where torch has a fused kernel for the parameters' device; and how it was built, for the params."""
    params = list(parameters)
    try:
        return torch.optim.Adam(params, lr=lr, fused=True), "Adam fused"
    except (RuntimeError, ValueError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return torch.optim.Adam(params, lr=lr), f"Adam (not fused: {reason})"


def _optimizer_steps(optimizer: torch.optim.Optimizer) -> int:
    """How many updates the optimizer applied (Adam keeps a per-parameter step count; skipped steps add none)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            if "step" in state:
                return int(torch.as_tensor(state["step"]).item())
    return 0


def _backoffs(scaler: torch.amp.GradScaler, scale_before: float, taken: int) -> int:
    """How many steps ``scaler`` may have skipped since its scale was ``scale_before``.

    A GradScaler skips the update of a step whose fp16 gradients overflowed and multiplies
    its scale by the backoff factor; it grows the scale after ``growth_interval`` updates in
    a row. So every legitimate skip shows in the scale: a run whose first steps still find
    the scale (65536 -> 16384: two skips) passes however few steps it measured, and a skip
    that the scale does not explain means the optimizer did not step.
    """
    halvings = math.log(scale_before / scaler.get_scale()) / math.log(1 / scaler.get_backoff_factor())
    return round(halvings) + taken // scaler.get_growth_interval()


def training_step(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    precision: str,
    params: dict[str, object],
    lr: float = 1e-3,
    measured: nn.Module | None = None,
) -> Step:
    """A Step for one full training step of ``model`` with Adam and cross entropy on a fixed random batch.

    The batch is fixed so the loss must fall as the model fits it: the check asserts
    that, that the loss stayed finite, and that the optimizer (through the scaler)
    really stepped. Work per step: ``samples`` (the batch) and ``FLOP`` (torch's
    FLOP counter over forward and backward).

    ``measured``: the module the measured calls run instead of ``model`` (``torch.compile(model)``,
    which shares its parameters). FLOPs and GEMMs are counted on ``model``, eagerly: a compiled
    module's first call under torch's FLOP counter would leave dynamo running it eagerly for good.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    device = inputs.device
    optimizer, optimizer_name = adam(model.parameters(), lr)
    use_amp = precision == "amp"
    dtype = amp_dtype(device)
    scaler = torch.amp.GradScaler(device.type) if use_amp and dtype == torch.float16 else None
    log = LossLog()
    net = [model]  # the module step() calls: ``model`` while counting, then ``measured``

    def autocast() -> contextlib.AbstractContextManager[Any]:
        if not use_amp:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=dtype)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = nn.functional.cross_entropy(net[0](inputs), targets)
        if scaler is not None:
            torch.autograd.backward(scaler.scale(loss))
            scaler.step(optimizer)
            scaler.update()
        else:
            torch.autograd.backward(loss)
            optimizer.step()
        log.add(loss)

    run = pin_fn(step, "ieee")
    flops, gemms = census(run)
    if measured is not None:
        net[0] = measured
    log.reset()
    steps_before = _optimizer_steps(optimizer)
    scale_before = scaler.get_scale() if scaler is not None else 1.0
    label = f"{params.get('model', 'model')} {precision}"

    def check() -> None:
        log.check_falls(label)
        taken = _optimizer_steps(optimizer) - steps_before
        skipped = log.calls - taken
        explained = _backoffs(scaler, scale_before, taken) if scaler is not None else 0
        if skipped > explained or taken < skipped:
            scale = f"; GradScaler scale {scale_before:g} -> {scaler.get_scale():g}" if scaler is not None else ""
            raise AssertionError(f"{label}: the optimizer applied {taken} of {log.calls} steps{scale}")

    amp_name = "off" if not use_amp else f"autocast {str(dtype).removeprefix('torch.')}"
    details: dict[str, object] = {
        **params,
        "precision": precision,
        "amp": amp_name,
        "grad_scaler": scaler is not None,
        "optimizer": optimizer_name,
        "fp32_precision": "ieee",
        "large_gemm_share": round(large_gemm_share(gemms), 3),
    }
    return Step(run, work={"samples": float(inputs.shape[0]), "FLOP": flops}, params=details, check=check)
