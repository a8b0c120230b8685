"""Every workload of the suites, defined once; pytest (``test_*.py``) and asv (``benchmarks/``) run these.

``build(device, size)`` sets a workload up on ``device`` at a size preset (``small``,
``medium``, ``large``; ``auto`` is resolved before: small on cpu and mps, large on
cuda) and returns a Step: one call, the work it does, and a check. Workloads that
cannot run on a device say why in ``unsupported`` and raise WorkloadUnsupported
from ``build`` (asv then skips them, pytest skips with the reason).

Sizes: ``small`` keeps a CPU run of the whole suite to a few minutes on two cores;
``large`` fills a data-centre GPU.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from typing import Any, Final, cast

import torch

from pytest_gpuperf import Step, Workload, WorkloadUnsupported

from .models import DeepStack, ResNetStyle, SmallCNN, mlp
from .precision import pin_fn, pin_step
from .training import count_flops, training_step

__all__ = [
    "BATCH_LADDER",
    "BATCH_LADDER_CUDA_MAX",
    "COMPILE_MODE",
    "MATMUL_DTYPES",
    "MATMUL_SIZES",
    "MATMUL_SWEEP",
    "WORKLOADS",
    "batch_step",
    "compile_unsupported",
    "host_buffer",
    "matmul_step",
    "matmul_unsupported",
]

# ---------------------------------------------------------------- sizes, per preset

#: The n of the ``matmul_*`` workloads (the middle of the sweep).
MATMUL_SIZES: Final = {"small": 512, "medium": 2048, "large": 8192}
#: The n the matmul suite sweeps; the largest, in the best dtype, is the device's reference peak.
MATMUL_SWEEP: Final = {"small": (256, 512, 1024), "medium": (1024, 2048, 4096), "large": (4096, 8192, 16384)}
MATMUL_DTYPES: Final = ("float32", "tf32", "float16", "bfloat16")
#: batch of the tutorial classifier 1000-512-256-2
MLP_BATCH: Final = {"small": 512, "medium": 4096, "large": 16384}
#: (batch, widths) of the wider classifier
WIDE_MLP: Final = {
    "small": (128, (1024, 2048, 2048, 10)),
    "medium": (1024, (1024, 4096, 4096, 10)),
    "large": (4096, (4096, 8192, 8192, 10)),
}
#: (batch, width) of the small CNN on 3x32x32 images
SMALL_CNN: Final = {"small": (64, 16), "medium": (256, 32), "large": (1024, 64)}
#: (batch, width, stages, blocks per stage) of the ResNet-style stack on 3x32x32 images
RESNET: Final = {"small": (32, 16, 3, 1), "medium": (64, 32, 3, 2), "large": (256, 64, 4, 2)}
#: (batch, width, depth) of the expansion-block stack used for gradient checkpointing
DEEP_STACK: Final = {"small": (1024, 128, 8), "medium": (4096, 512, 12), "large": (8192, 1024, 16)}
#: bytes per host-to-device copy
COPY_BYTES: Final = {"small": 16 << 20, "medium": 64 << 20, "large": 256 << 20}

TORCH_DTYPES: Final = {
    "float32": torch.float32,
    "tf32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def _capability(device: torch.device) -> tuple[int, int]:
    major, minor = torch.cuda.get_device_capability(device)
    return int(major), int(minor)


def _require(workload: Workload, device: torch.device) -> None:
    why = workload.why_unsupported(device)
    if why:
        raise WorkloadUnsupported(f"{workload.name} on {device}: {why}")


def _seeded() -> None:
    # The same weights and data in every build, so runs and devices compare like with like.
    torch.manual_seed(0)


# ---------------------------------------------------------------- matmul


def matmul_unsupported(device: torch.device, dtype: str) -> str | None:
    """Why ``dtype`` matmul is not measured on ``device``, or None."""
    if dtype == "float32":
        return None
    if dtype == "tf32":
        if device.type != "cuda":
            return "TF32 is an NVIDIA tensor-core mode (CUDA only)"
        if _capability(device) < (8, 0):
            return "TF32 needs compute capability 8.0 (Ampere) or later"
        return None
    if dtype == "float16":
        if device.type == "cpu":
            return "fp16 on a CPU is emulated and far slower than fp32 (150x measured for autocast): never run"
        return None
    if dtype == "bfloat16":
        if device.type == "cuda" and _capability(device) < (8, 0):
            return "bfloat16 is emulated below compute capability 8.0 (Ampere)"
        if device.type == "mps":
            return "bfloat16 matmul on MPS depends on the macOS version; not measured"
        return None
    raise ValueError(f"matmul dtype {dtype!r} is not one of {', '.join(MATMUL_DTYPES)}")


def matmul_step(device: torch.device, dtype: str, n: int) -> Step:
    """``C = A @ B`` for n x n matrices into a preallocated C: 2 n^3 FLOP, no allocation per call."""
    why = matmul_unsupported(device, dtype)
    if why:
        raise WorkloadUnsupported(f"matmul {dtype} on {device}: {why}")
    _seeded()
    torch_dtype = TORCH_DTYPES[dtype]
    a = torch.randn(n, n, device=device, dtype=torch_dtype)
    b = torch.randn(n, n, device=device, dtype=torch_dtype)
    c = torch.empty(n, n, device=device, dtype=torch_dtype)

    def fn() -> None:
        torch.mm(a, b, out=c)

    def check() -> None:
        if not bool(torch.isfinite(c[:4, :4].float()).all()):
            raise AssertionError(f"matmul {dtype} n={n} on {device} produced non-finite values")

    # The TF32 flag is read when the kernel is chosen, so pinning it around each call suffices.
    step = Step(fn, work={"FLOP": 2.0 * n**3}, params={"n": n, "dtype": dtype}, check=check)
    return pin_step(step, "tf32" if dtype == "tf32" else "ieee")


def matmul(dtype: str) -> Workload:
    def build(device: Any, size: str) -> Step:
        _require(workload, torch.device(device))
        return matmul_step(torch.device(device), dtype, MATMUL_SIZES[size])

    workload = Workload(
        f"matmul_{dtype}",
        build,
        f"square {dtype} matmul (n = {', '.join(f'{k} {v}' for k, v in MATMUL_SIZES.items())}), 2n^3 FLOP per call",
        unsupported=lambda device: matmul_unsupported(torch.device(device), dtype),
    )
    return workload


# ---------------------------------------------------------------- training


def _classes(widths: tuple[int, ...]) -> int:
    return widths[-1]


def _mlp_build(widths_for: Callable[[str], tuple[int, tuple[int, ...]]], name: str, precision: str) -> Workload:
    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        batch, widths = widths_for(size)
        _seeded()
        model = mlp(widths).to(dev)
        x = torch.randn(batch, widths[0], device=dev)
        y = torch.randint(0, _classes(widths), (batch,), device=dev)
        params = {"model": name, "batch": batch, "widths": "-".join(map(str, widths))}
        return training_step(model, x, y, precision=precision, params=params)

    suffix = "" if precision == "fp32" else "_amp"
    what = (
        "fp32" if precision == "fp32" else "mixed precision (bf16 autocast on CPU; fp16 autocast + GradScaler on CUDA)"
    )
    return Workload(f"{name}_train{suffix}", build, f"{name} full training step, Adam + cross entropy, {what}")


def _image_build(name: str, precision: str) -> Workload:
    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        _seeded()
        model: torch.nn.Module
        if name == "cnn":
            batch, width = SMALL_CNN[size]
            model = SmallCNN(width)
            params: dict[str, object] = {"model": name, "batch": batch, "width": width}
        else:
            batch, width, stages, blocks = RESNET[size]
            model = ResNetStyle(width, stages, blocks)
            params = {"model": name, "batch": batch, "width": width, "stages": stages, "blocks": blocks}
        model = model.to(dev)
        x = torch.randn(batch, 3, 32, 32, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        step = training_step(model, x, y, precision=precision, params=params)
        # Images are the natural unit here; keep the samples count under that name.
        return Step(
            step.fn,
            work={"images": step.work["samples"], "FLOP": step.work["FLOP"]},
            params=step.params,
            check=step.check,
        )

    suffix = "" if precision == "fp32" else "_amp"
    return Workload(f"{name}_train{suffix}", build, f"{name} training step on 3x32x32 images, {precision}")


def _mlp_widths(size: str) -> tuple[int, tuple[int, ...]]:
    return MLP_BATCH[size], (1000, 512, 256, 2)


def _wide_widths(size: str) -> tuple[int, tuple[int, ...]]:
    return WIDE_MLP[size]


# ---------------------------------------------------------------- gradient checkpointing


def _stack(mode: str) -> Workload:
    """``full``/``checkpointed``: a training step of the deep stack; ``forward``: one forward with autograd on."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        batch, width, depth = DEEP_STACK[size]
        _seeded()
        model = DeepStack(width, depth, checkpointed=mode == "checkpointed").to(dev)
        x = torch.randn(batch, width, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        params: dict[str, object] = {"model": "stack", "batch": batch, "width": width, "depth": depth, "mode": mode}
        if mode != "forward":
            step = training_step(model, x, y, precision="fp32", params=params)
            return Step(step.fn, work={"samples": float(batch)}, params=step.params, check=step.check)

        def forward() -> None:
            # Grad mode on, as in the recompute: the graph is built and then dropped.
            with torch.enable_grad():
                model(x)

        run = pin_fn(forward, "ieee")
        work = {"samples": float(batch), "FLOP": count_flops(run)}
        return Step(run, work=work, params={**params, "fp32_precision": "ieee"})

    names = {"full": "stack_train", "checkpointed": "stack_train_checkpointed", "forward": "stack_forward"}
    return Workload(names[mode], build, f"deep stack of expansion blocks: {mode}")


# ---------------------------------------------------------------- host-to-device copy


def _copy_unsupported(device: Any) -> str | None:
    if torch.device(device).type != "cuda":
        return "a host-to-device copy needs a CUDA device (pinned memory is a CUDA host allocation)"
    return None


def host_buffer(nbytes: int, device: torch.device, *, pinned: bool, torch_module: Any = torch) -> Any:
    """``nbytes`` of host memory, every page written, pinned for ``device`` when asked.

    Written, because a page never written is not backed by memory of its own: every such
    page reads the one shared zero page, which sits in the CPU's cache, and a copy from it
    measures more than the memory can give. Pinned inside ``device``'s context, because
    pinning (like any CUDA call) creates a context on the current device, GPU 0 unless
    set: a test of cuda:1 would otherwise hold memory on GPU 0 and pin for GPU 0.
    """
    context = torch_module.cuda.device(device) if pinned else contextlib.nullcontext()
    with context:
        buffer = torch_module.empty(nbytes, dtype=torch_module.uint8, pin_memory=pinned)
    # Any value: what counts is that every page is written (0.05 s for 256 MiB, where random bytes take 0.8 s).
    buffer.fill_(0xA5)
    return buffer


def _copy(pinned: bool) -> Workload:
    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        _require(workload, dev)
        nbytes = COPY_BYTES[size]
        src = host_buffer(nbytes, dev, pinned=pinned)
        dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)

        def fn() -> None:
            # From pinned memory the copy is a DMA queued on the stream; from pageable memory
            # the driver stages it through a pinned buffer, synchronously.
            dst.copy_(src, non_blocking=pinned)

        return Step(fn, work={"B": float(nbytes)}, params={"bytes": nbytes, "pinned": pinned})

    kind = "pinned" if pinned else "pageable"
    workload = Workload(f"h2d_copy_{kind}", build, f"host-to-device copy from {kind} memory", _copy_unsupported)
    return workload


# ---------------------------------------------------------------- DataParallel


def _dataparallel_unsupported(device: Any) -> str | None:
    if torch.device(device).type != "cuda":
        return "torch.nn.DataParallel splits a batch across CUDA devices"
    if torch.cuda.device_count() < 2:
        return f"DataParallel needs 2 or more CUDA devices; this machine has {torch.cuda.device_count()}"
    return None


def _dataparallel() -> Workload:
    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        _require(workload, dev)
        batch, widths = WIDE_MLP[size]
        count = torch.cuda.device_count()
        batch *= count
        # The test's device first: DataParallel keeps the module and gathers the output on device_ids[0].
        first = dev.index if dev.index is not None else torch.cuda.current_device()
        device_ids = [first, *(i for i in range(count) if i != first)]
        _seeded()
        module = mlp(widths).to(torch.device("cuda", first))
        x = torch.randn(batch, widths[0], device=torch.device("cuda", first))
        y = torch.randint(0, widths[-1], (batch,), device=torch.device("cuda", first))
        params = {"model": "mlp_wide", "batch": batch, "devices": count, "device_ids": device_ids}
        # torch's FLOP counter does not see the replicas' threads: count the same step without DataParallel,
        # which does the same FLOPs over the whole batch.
        flops = training_step(module, x, y, precision="fp32", params=params).work["FLOP"]
        model = torch.nn.DataParallel(module, device_ids=device_ids, output_device=first)
        step = training_step(model, x, y, precision="fp32", params=params)
        return Step(step.fn, work={**step.work, "FLOP": flops}, params=step.params, check=step.check)

    workload = Workload(
        "mlp_wide_train_dataparallel",
        build,
        "the wide MLP training step with torch.nn.DataParallel over every visible GPU",
        _dataparallel_unsupported,
    )
    return workload


# ---------------------------------------------------------------- batch-size ladder (test_batch_scaling.py)

#: model -> (first batch, largest batch on a CPU): the ladder doubles from the first. On CUDA it climbs until
#: out of memory or ``BATCH_LADDER_CUDA_MAX``; on a CPU it stops at the small preset's batch (time, not memory).
BATCH_LADDER: Final = {"mlp": (64, 512), "cnn": (8, 32)}
BATCH_LADDER_CUDA_MAX: Final = 1 << 20


def batch_step(model: str, device: torch.device, batch: int) -> Step:
    """The fp32 training step of ``model`` (``mlp``: the classifier 1000-512-256-2; ``cnn``: the small CNN of the
    small preset) at ``batch``; work in samples (images for the CNN) and FLOPs."""
    _seeded()
    if model == "mlp":
        widths = (1000, 512, 256, 2)
        net: torch.nn.Module = mlp(widths).to(device)
        x = torch.randn(batch, widths[0], device=device)
        y = torch.randint(0, _classes(widths), (batch,), device=device)
        return training_step(net, x, y, precision="fp32", params={"model": model, "batch": batch})
    if model == "cnn":
        width = SMALL_CNN["small"][1]
        net = SmallCNN(width).to(device)
        x = torch.randn(batch, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        step = training_step(net, x, y, precision="fp32", params={"model": model, "batch": batch, "width": width})
        return Step(step.fn, {"images": step.work["samples"], "FLOP": step.work["FLOP"]}, step.params, step.check)
    raise ValueError(f"batch ladder model {model!r} is not one of {', '.join(BATCH_LADDER)}")


# ---------------------------------------------------------------- torch.compile (test_compile.py)

#: mode passed to torch.compile: "default" (inductor, no CUDA graphs). Compiling costs seconds on a CPU
#: (docs/suites.md), so the suites compile the small classifier only.
COMPILE_MODE: Final = "default"


def compile_unsupported(device: Any) -> str | None:
    """Why torch.compile (inductor) cannot run on ``device`` here, or None; cheap checks only (no compile)."""
    kind = torch.device(device).type
    if kind == "cpu":
        cxx = os.environ.get("CXX")
        if not (cxx and shutil.which(cxx)) and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
            return "inductor compiles C++ kernels on a CPU and no C++ compiler was found (c++, g++, clang++ or $CXX)"
        return None
    if kind == "cuda":
        if importlib.util.find_spec("triton") is None:
            return "inductor generates Triton kernels on CUDA and the triton package is not installed"
        return None
    return f"torch.compile's inductor backend is not measured on {kind}"


def _compiled_mlp() -> Workload:
    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        _require(workload, dev)
        batch, widths = _mlp_widths(size)
        _seeded()
        model = mlp(widths).to(dev)
        x = torch.randn(batch, widths[0], device=dev)
        y = torch.randint(0, _classes(widths), (batch,), device=dev)
        params = {"model": "mlp", "batch": batch, "widths": "-".join(map(str, widths)), "compile": COMPILE_MODE}
        # Compiled lazily: the first call of the step compiles (test_compile.py times it apart from the sampler).
        compiled = cast(torch.nn.Module, torch.compile(model, mode=COMPILE_MODE))  # an OptimizedModule
        return training_step(model, x, y, precision="fp32", params=params, measured=compiled)

    workload = Workload(
        "mlp_train_compiled",
        build,
        f"mlp full training step with the model under torch.compile(mode={COMPILE_MODE!r}); Adam eager",
        compile_unsupported,
    )
    return workload


def _all() -> tuple[Workload, ...]:
    out: list[Workload] = [matmul(dtype) for dtype in MATMUL_DTYPES]
    for precision in ("fp32", "amp"):
        out.append(_mlp_build(_mlp_widths, "mlp", precision))
        out.append(_mlp_build(_wide_widths, "mlp_wide", precision))
        out.append(_image_build("cnn", precision))
        out.append(_image_build("resnet", precision))
    out += [_stack("full"), _stack("checkpointed"), _stack("forward"), _copy(True), _copy(False), _dataparallel()]
    out.append(_compiled_mlp())
    return tuple(out)


#: name -> workload; asv generates one benchmark per entry.
WORKLOADS: Final[dict[str, Workload]] = {w.name: w for w in _all()}
