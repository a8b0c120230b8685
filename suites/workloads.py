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
import warnings
from collections.abc import Callable
from typing import Any, Final, cast

import torch

from pytest_gpuperf import Step, Workload, WorkloadUnsupported

from .attention import FUSED, attention_probe, choose_backend, pin_attention, sdpa_backend
from .dataloading import dataloader_steps, dataloader_unsupported, loader_name
from .models import DeepStack, ResNetStyle, SmallCNN, TokenClassifier, mlp
from .precision import pin_fn, pin_step
from .training import count_flops, training_step

__all__ = [
    "BANDWIDTH_BYTES",
    "BANDWIDTH_OPS",
    "BATCH_LADDER",
    "BATCH_LADDER_CUDA_MAX",
    "COMPILE_MODE",
    "MATMUL_DTYPES",
    "MATMUL_SIZES",
    "MATMUL_SWEEP",
    "WORKLOADS",
    "bandwidth_step",
    "batch_step",
    "compile_unsupported",
    "host_buffer",
    "inference_step",
    "int8_unsupported",
    "matmul_step",
    "matmul_unsupported",
    "quantization_error",
    "transformer_train_step",
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
#: (batch, seq, width, heads, layers) of the transformer encoder (TokenClassifier); a batch holds batch x seq tokens
TRANSFORMER: Final = {
    "small": (8, 64, 128, 4, 2),
    "medium": (16, 256, 512, 8, 4),
    "large": (16, 1024, 1024, 16, 8),
}
#: (batch, heads, seq, head_dim) of the attention-only workloads (math path against the fused kernel)
ATTENTION: Final = {"small": (4, 4, 256, 32), "medium": (8, 8, 1024, 64), "large": (16, 16, 2048, 64)}

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


#: direction -> what the copy is called in messages and descriptions.
_COPIES: Final = {"h2d": "host-to-device", "d2h": "device-to-host"}


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


def _copy(direction: str, pinned: bool) -> Workload:
    """``h2d_copy_<kind>`` (from host memory to the device) or ``d2h_copy_<kind>`` (back), pinned or pageable."""
    what = _COPIES[direction]

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        _require(workload, dev)
        nbytes = COPY_BYTES[size]
        if direction == "h2d":
            src = host_buffer(nbytes, dev, pinned=pinned)
            dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        else:
            src = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(0xA5)
            dst = host_buffer(nbytes, dev, pinned=pinned)

        def fn() -> None:
            # With pinned memory the copy is a DMA queued on the stream; with pageable memory the driver
            # stages it through a pinned buffer (and, into the host, copies on from there), synchronously.
            dst.copy_(src, non_blocking=pinned)

        return Step(fn, work={"B": float(nbytes)}, params={"bytes": nbytes, "pinned": pinned})

    def unsupported(device: Any) -> str | None:
        if torch.device(device).type != "cuda":
            return f"a {what} copy needs a CUDA device (pinned memory is a CUDA host allocation)"
        return None

    kind = "pinned" if pinned else "pageable"
    where = f"from {kind} memory" if direction == "h2d" else f"into {kind} memory"
    workload = Workload(f"{direction}_copy_{kind}", build, f"{what} copy {where}", unsupported)
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


# ---------------------------------------------------------------- memory bandwidth and data loading (issue 15)

#: bytes of one buffer of the bandwidth workloads (the reference size; the suite also runs half of it)
BANDWIDTH_BYTES: Final = {"small": 32 << 20, "medium": 256 << 20, "large": 1 << 30}
BANDWIDTH_OPS: Final = ("d2d_copy", "axpy")


def bandwidth_step(device: torch.device, op: str, nbytes: int) -> Step:
    """A memory-bound step on ``device`` over buffers of ``nbytes``; work ``B`` counts the bytes read and written.

    ``d2d_copy``: ``dst.copy_(src)``, reads and writes ``nbytes`` (2 x nbytes). ``axpy``:
    ``y = a*x + y`` in float32 (``torch.add(y, x, alpha=a, out=y)``), reads x and y and writes y
    (3 x nbytes). Bytes the hardware moves beyond these (a CPU's write-allocate reads of the
    destination's lines) are not counted: the figure is the bytes the operation must move.
    """
    if op not in BANDWIDTH_OPS:
        raise ValueError(f"bandwidth op {op!r} is not one of {', '.join(BANDWIDTH_OPS)}")
    _seeded()
    if op == "d2d_copy":
        src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(0xA5)
        dst = torch.zeros(nbytes, dtype=torch.uint8, device=device)

        def copy() -> None:
            dst.copy_(src)

        def copy_check() -> None:
            if int(dst[-1]) != 0xA5 or int(dst[0]) != 0xA5:
                raise AssertionError(f"d2d_copy of {nbytes} bytes on {device} did not copy")

        return Step(copy, work={"B": 2.0 * nbytes}, params={"op": op, "bytes": nbytes}, check=copy_check)
    n = nbytes // 4
    x = torch.ones(n, device=device)
    y = torch.zeros(n, device=device)
    a = 1e-3  # y grows by a per call: stays finite and exact enough for any number of calls

    def axpy() -> None:
        torch.add(y, x, alpha=a, out=y)

    def axpy_check() -> None:
        if not float(y[-1]) > 0.0 or not bool(torch.isfinite(y[:4]).all()):
            raise AssertionError(f"axpy over {n} floats on {device} did not update y")

    return Step(axpy, work={"B": 3.0 * n * 4}, params={"op": op, "bytes": nbytes}, check=axpy_check)


def _bandwidth(op: str) -> Workload:
    def build(device: Any, size: str) -> Step:
        return bandwidth_step(torch.device(device), op, BANDWIDTH_BYTES[size])

    sizes = ", ".join(f"{k} {v >> 20} MiB" for k, v in BANDWIDTH_BYTES.items())
    return Workload(f"bandwidth_{op}", build, f"memory-bound {op} over buffers of {sizes}; B/s of bytes read + written")


def _dataloader(workers: int, pinned: bool) -> Workload:
    def build(device: Any, size: str) -> Step:
        _require(workload, torch.device(device))
        return dataloader_steps(torch.device(device), size, workers=workers, pinned=pinned)["end_to_end"]

    workload = Workload(
        loader_name(workers, pinned),
        build,
        f"synthetic Dataset -> DataLoader(num_workers={workers}, pin_memory={pinned}) -> copy -> MLP training step",
        lambda device: dataloader_unsupported(torch.device(device), pinned),
    )
    return workload


# ---------------------------------------------------------------- transformer, attention and inference


def _transformer(size: str, device: torch.device) -> tuple[TokenClassifier, torch.Tensor, dict[str, object]]:
    batch, seq, width, heads, layers = TRANSFORMER[size]
    _seeded()
    model = TokenClassifier(width, heads, layers).to(device)
    x = torch.randn(batch, seq, width, device=device)
    params: dict[str, object] = {
        "model": "transformer",
        "batch": batch,
        "seq": seq,
        "width": width,
        "heads": heads,
        "layers": layers,
    }
    return model, x, params


def _pick_sdpa(
    what: str, shape: tuple[int, int, int, int], dtype: torch.dtype, device: torch.device, *, grad: bool
) -> str:
    """The SDPA backend a step runs (``suites/attention.py``); WorkloadUnsupported with each backend's reason."""
    backend, refused = choose_backend(attention_probe(shape, dtype, device, grad=grad))
    if backend is None:
        reasons = "; ".join(f"{name}: {why}" for name, why in refused.items())
        raise WorkloadUnsupported(f"{what} on {device}: no scaled_dot_product_attention backend runs ({reasons})")
    return backend


def transformer_train_step(device: torch.device, size: str, *, compiled: bool = False) -> Step:
    """One fp32 training step (Adam, cross entropy per token) of the transformer encoder at ``size``.

    Work: ``tokens`` (batch x seq) and ``FLOP``, counted by torch's counter on the math path
    (the counter does not see the fused kernels: 0 FLOP for the CPU's flash attention on
    torch 2.13); the fused kernels do the same useful arithmetic. The step runs on the SDPA
    backend ``suites/attention.py`` chooses, recorded as ``sdpa_backend``. ``compiled``: the
    measured calls run the model under ``torch.compile`` (compiled lazily: the first call compiles).
    """
    model, x, params = _transformer(size, device)
    batch, seq, width, heads, _ = TRANSFORMER[size]
    backend = _pick_sdpa("transformer_train", (batch, heads, seq, width // heads), x.dtype, device, grad=True)
    y = torch.randint(0, 10, (batch * seq,), device=device)
    measured = None
    if compiled:
        measured = cast(torch.nn.Module, torch.compile(model, mode=COMPILE_MODE))  # an OptimizedModule
        params = {**params, "compile": COMPILE_MODE}
    with sdpa_backend("math"):  # the FLOP census at build runs the math path, which the counter sees
        step = training_step(model, x, y, precision="fp32", params=params, measured=measured)
    return Step(
        pin_attention(step.fn, backend),
        work={"tokens": float(batch * seq), "FLOP": step.work["FLOP"]},
        params={**step.params, "sdpa_backend": backend},
        check=step.check,
    )


def inference_step(
    model: torch.nn.Module, x: torch.Tensor, *, unit: str, params: dict[str, object], attention: str | None = None
) -> Step:
    """One forward of ``model`` in eval mode under ``torch.inference_mode()``, fp32 math pinned to IEEE.

    ``unit``: what a row of the batch is (``samples``, ``images``; ``tokens`` counts batch x seq).
    ``attention``: the SDPA backend to pin (FLOPs are then counted on the math path). The check:
    the last output is finite.
    """
    model.eval()
    outputs: list[torch.Tensor] = []

    def forward() -> None:
        with torch.inference_mode():
            out = model(x)
        outputs[:] = [out]

    run = pin_fn(forward, "ieee")
    with sdpa_backend("math") if attention is not None else contextlib.nullcontext():
        flops = count_flops(run)
    if attention is not None:
        run = pin_attention(run, attention)
    amount = float(x.shape[0] * x.shape[1]) if unit == "tokens" else float(x.shape[0])
    label = f"{params.get('model', 'model')} inference"

    def check() -> None:
        if not outputs or not bool(torch.isfinite(outputs[0]).all()):
            raise AssertionError(f"{label}: the output is not finite (or no call ran)")

    details: dict[str, object] = {**params, "mode": "inference_mode", "fp32_precision": "ieee"}
    if attention is not None:
        details["sdpa_backend"] = attention
    work = {unit: amount, "FLOP": flops} if flops else {unit: amount}
    return Step(run, work=work, params=details, check=check)


def _inference(model_name: str, batch_one: bool) -> Workload:
    """``<model>_infer`` at the preset's batch (throughput), ``<model>_infer_b1`` at batch 1 (latency)."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        model: torch.nn.Module
        if model_name == "mlp_wide":
            batch, widths = WIDE_MLP[size]
            _seeded()
            model = mlp(widths).to(dev)
            batch = 1 if batch_one else batch
            x = torch.randn(batch, widths[0], device=dev)
            params: dict[str, object] = {"model": model_name, "batch": batch, "widths": "-".join(map(str, widths))}
            return inference_step(model, x, unit="samples", params=params)
        if model_name == "cnn":
            batch, width = SMALL_CNN[size]
            _seeded()
            model = SmallCNN(width).to(dev)
            batch = 1 if batch_one else batch
            x = torch.randn(batch, 3, 32, 32, device=dev)
            return inference_step(model, x, unit="images", params={"model": "cnn", "batch": batch, "width": width})
        model, x, params = _transformer(size, dev)
        if batch_one:
            x, params = x[:1].contiguous(), {**params, "batch": 1}
        _, seq, width, heads, _ = TRANSFORMER[size]
        shape = (x.shape[0], heads, seq, width // heads)
        backend = _pick_sdpa(f"transformer_infer{suffix}", shape, x.dtype, dev, grad=False)
        return inference_step(model, x, unit="tokens", params=params, attention=backend)

    suffix = "_b1" if batch_one else ""
    what = "batch-1 latency" if batch_one else "throughput at the preset's batch"
    return Workload(f"{model_name}_infer{suffix}", build, f"{model_name} forward under torch.inference_mode(), {what}")


# ---------------------------------------------------------------- INT8 dynamic quantization (CPU)

#: The INT8 model's output must be within this relative error of fp32's (Frobenius norm of the difference over
#: that of fp32's output, on the same batch). Measured 2.7% for the small wide MLP (x86 engine, torch 2.13);
#: a wrong scale or a broken kernel is off by 100% or more.
INT8_TOLERANCE: Final = 0.1


def int8_unsupported(device: Any, torch_module: Any = torch) -> str | None:
    """Why dynamic INT8 quantization is not measured on ``device``, or None."""
    if torch.device(device).type != "cpu":
        return "torch's dynamic INT8 kernels (fbgemm, x86, qnnpack, onednn) run on the CPU only"
    engines = [e for e in torch_module.backends.quantized.supported_engines if e != "none"]
    if not engines:
        return "this torch build has no quantized engine (torch.backends.quantized.supported_engines lists none)"
    quantization = getattr(getattr(torch_module, "ao", None), "quantization", None)
    if getattr(quantization, "quantize_dynamic", None) is None:
        return "this torch has no torch.ao.quantization.quantize_dynamic (deprecated for torchao, then removed)"
    return None


def quantization_error(reference: torch.Tensor, output: torch.Tensor) -> float:
    """``|output - reference| / |reference|`` in the Frobenius norm."""
    return float((output.float() - reference.float()).norm() / reference.float().norm())


def _int8() -> Workload:
    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        _require(workload, dev)
        batch, widths = WIDE_MLP[size]
        _seeded()
        reference_model = mlp(widths).to(dev).eval()
        x = torch.randn(batch, widths[0], device=dev)
        with warnings.catch_warnings():
            # torch 2.9+ deprecates torch.ao.quantization for torchao, and quantized tensors (a UserWarning at the
            # weights' quantization); the kernels measured are the same. Each call warns no more.
            warnings.filterwarnings("ignore", message=r"(?s).*deprecated")
            model = torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]  # untyped in torch
                reference_model, {torch.nn.Linear}, dtype=torch.qint8
            )
        with torch.inference_mode():
            reference = reference_model(x)
        params: dict[str, object] = {
            "model": "mlp_wide",
            "batch": batch,
            "widths": "-".join(map(str, widths)),
            "quantized": "dynamic int8 (Linear)",
            "engine": str(torch.backends.quantized.engine),
        }
        step = inference_step(model, x, unit="samples", params=params)
        outputs = step.check

        def check() -> None:
            assert outputs is not None
            outputs()  # finite
            with torch.inference_mode():
                error = quantization_error(reference, model(x))
            if not error <= INT8_TOLERANCE:
                raise AssertionError(
                    f"mlp_wide int8: the output is {error:.1%} off fp32's (relative, Frobenius norm); "
                    f"at most {INT8_TOLERANCE:.0%} expected"
                )

        return Step(step.fn, work={"samples": float(batch)}, params=step.params, check=check)

    workload = Workload(
        "mlp_wide_infer_int8",
        build,
        "the wide MLP's forward with its Linear layers quantized to INT8 (torch.ao.quantization.quantize_dynamic)",
        int8_unsupported,
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


def _compiled_transformer() -> Workload:
    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        _require(workload, dev)
        return transformer_train_step(dev, size, compiled=True)

    workload = Workload(
        "transformer_train_compiled",
        build,
        f"transformer_train with the model under torch.compile(mode={COMPILE_MODE!r}); Adam eager",
        compile_unsupported,
    )
    return workload


def _bandwidth_and_loading() -> list[Workload]:
    out = [_bandwidth(op) for op in BANDWIDTH_OPS] + [_copy("d2h", True), _copy("d2h", False)]
    return out + [_dataloader(workers, pinned) for workers in (0, 2) for pinned in (False, True)]


# ---------------------------------------------------------------- attention alone: the math path against a fused kernel


def attention_dtype(device: torch.device) -> torch.dtype:
    """fp16 on CUDA (the dtype flash attention takes, on every CUDA GPU torch supports); fp32 elsewhere."""
    return torch.float16 if device.type == "cuda" else torch.float32


def _attention(kind: str) -> Workload:
    """``attention_math``: the math path; ``attention_fused``: the first fused kernel (flash, efficient) that runs."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        shape = ATTENTION[size]
        dtype = attention_dtype(dev)
        if kind == "math":
            backend = "math"
        else:
            found, refused = choose_backend(attention_probe(shape, dtype, dev, grad=False), FUSED)
            if found is None:
                reasons = "; ".join(f"{name}: {why}" for name, why in refused.items())
                raise WorkloadUnsupported(f"attention_fused on {dev}: torch offers no fused kernel here ({reasons})")
            backend = found
        _seeded()
        q, k, v = (torch.randn(*shape, dtype=dtype, device=dev) for _ in range(3))
        outputs: list[torch.Tensor] = []

        def fn() -> None:
            outputs[:] = [torch.nn.functional.scaled_dot_product_attention(q, k, v)]

        with sdpa_backend("math"):
            flops = count_flops(fn)
        run = pin_attention(pin_fn(fn, "ieee"), backend)

        def check() -> None:
            if not outputs or not bool(torch.isfinite(outputs[0]).all()):
                raise AssertionError(f"attention ({backend}) on {dev}: the output is not finite (or no call ran)")

        batch, heads, seq, head_dim = shape
        params: dict[str, object] = {
            "batch": batch,
            "heads": heads,
            "seq": seq,
            "head_dim": head_dim,
            "dtype": str(dtype).removeprefix("torch."),
            "sdpa_backend": backend,
            "fp32_precision": "ieee",
        }
        return Step(run, work={"tokens": float(batch * seq), "FLOP": flops}, params=params, check=check)

    what = "the math path" if kind == "math" else "the first fused kernel torch offers (flash, memory-efficient)"
    return Workload(f"attention_{kind}", build, f"scaled_dot_product_attention alone on {what}")


def _transformer_train() -> Workload:
    return Workload(
        "transformer_train",
        lambda device, size: transformer_train_step(torch.device(device), size),
        "transformer encoder (pre-norm, SDPA attention, GELU MLP) full training step, Adam + per-token cross entropy",
    )


def _all() -> tuple[Workload, ...]:
    out: list[Workload] = [matmul(dtype) for dtype in MATMUL_DTYPES]
    for precision in ("fp32", "amp"):
        out.append(_mlp_build(_mlp_widths, "mlp", precision))
        out.append(_mlp_build(_wide_widths, "mlp_wide", precision))
        out.append(_image_build("cnn", precision))
        out.append(_image_build("resnet", precision))
    out += [
        _stack("full"),
        _stack("checkpointed"),
        _stack("forward"),
        _copy("h2d", True),
        _copy("h2d", False),
        _dataparallel(),
    ]
    out += _bandwidth_and_loading()
    # transformer, attention and inference (suites/test_transformer.py, suites/test_inference.py)
    out.append(_transformer_train())
    out += [_inference(model, batch_one) for model in ("mlp_wide", "cnn", "transformer") for batch_one in (True, False)]
    out += [_int8(), _attention("math"), _attention("fused")]
    out += [_compiled_mlp(), _compiled_transformer()]
    return tuple(out)


#: name -> workload; asv generates one benchmark per entry.
WORKLOADS: Final[dict[str, Workload]] = {w.name: w for w in _all()}
