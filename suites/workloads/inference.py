"""Inference: the wide MLP, the small CNN and the transformer under ``torch.inference_mode()`` at batch 1 and at the
preset's batch, and the wide MLP with dynamic INT8 quantization on the CPU (``<model>_infer``, ``<model>_infer_b1``,
``mlp_wide_infer_int8``; test_inference.py)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Final

import torch

from pytest_gpuperf import Step, Workload

from ..attention import pin_attention, sdpa_backend
from ..models import SmallCNN, mlp
from ..precision import pin_fn
from ..training import count_flops
from .common import require, seeded
from .sizes import SMALL_CNN, TRANSFORMER, WIDE_MLP
from .transformer import pick_sdpa, transformer_model

__all__ = [
    "INT8_TOLERANCE",
    "inference_step",
    "inference_workload",
    "int8_unsupported",
    "int8_workload",
    "quantization_error",
]


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


def inference_workload(model_name: str, batch_one: bool) -> Workload:
    """``<model>_infer`` at the preset's batch (throughput), ``<model>_infer_b1`` at batch 1 (latency)."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        model: torch.nn.Module
        if model_name == "mlp_wide":
            batch, widths = WIDE_MLP[size]
            seeded()
            model = mlp(widths).to(dev)
            batch = 1 if batch_one else batch
            x = torch.randn(batch, widths[0], device=dev)
            params: dict[str, object] = {"model": model_name, "batch": batch, "widths": "-".join(map(str, widths))}
            return inference_step(model, x, unit="samples", params=params)
        if model_name == "cnn":
            batch, width = SMALL_CNN[size]
            seeded()
            model = SmallCNN(width).to(dev)
            batch = 1 if batch_one else batch
            x = torch.randn(batch, 3, 32, 32, device=dev)
            return inference_step(model, x, unit="images", params={"model": "cnn", "batch": batch, "width": width})
        model, x, params = transformer_model(size, dev)
        if batch_one:
            x, params = x[:1].contiguous(), {**params, "batch": 1}
        _, seq, width, heads, _ = TRANSFORMER[size]
        shape = (x.shape[0], heads, seq, width // heads)
        backend = pick_sdpa(f"transformer_infer{suffix}", shape, x.dtype, dev, grad=False)
        return inference_step(model, x, unit="tokens", params=params, attention=backend)

    suffix = "_b1" if batch_one else ""
    what = "batch-1 latency" if batch_one else "throughput at the preset's batch"
    return Workload(f"{model_name}_infer{suffix}", build, f"{model_name} forward under torch.inference_mode(), {what}")


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


def int8_workload() -> Workload:
    """``mlp_wide_infer_int8``: the wide MLP's forward with dynamic INT8 Linear layers; its check compares with fp32."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        require(workload, dev)
        batch, widths = WIDE_MLP[size]
        seeded()
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
