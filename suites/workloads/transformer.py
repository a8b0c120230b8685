"""The transformer encoder's training step, and scaled_dot_product_attention alone on the math path against a
fused kernel (``transformer_train``, ``attention_math``, ``attention_fused``; test_transformer.py), with the
math path's algorithm at the inputs' precision beside them (``attention_unfused``): SDPA's math path computes
half-precision inputs in float32, so a fused kernel's gain over it is partly precision, not fusion.

Every step runs on an SDPA backend chosen for the device (``suites/attention.py``), pinned
and recorded as ``sdpa_backend``.
"""

from __future__ import annotations

from typing import Final, cast

import torch

from pytest_gpuperf import Step, Workload, WorkloadUnsupported

from ..attention import FUSED, attention_probe, choose_backend, pin_attention, sdpa_backend
from ..models import TokenClassifier
from ..precision import pin_fn
from ..training import census, count_flops, training_step
from .common import seeded
from .sizes import ATTENTION, TRANSFORMER

__all__ = [
    "ATTENTION_KINDS",
    "attention_dtype",
    "attention_step",
    "attention_workload",
    "math_compute_dtype",
    "pick_sdpa",
    "transformer_model",
    "transformer_train_step",
    "transformer_workload",
]


def transformer_model(size: str, device: torch.device) -> tuple[TokenClassifier, torch.Tensor, dict[str, object]]:
    """The encoder, a batch of inputs and the params of the preset ``size``, seeded."""
    batch, seq, width, heads, layers = TRANSFORMER[size]
    seeded()
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


def pick_sdpa(
    what: str, shape: tuple[int, int, int, int], dtype: torch.dtype, device: torch.device, *, grad: bool
) -> str:
    """The SDPA backend a step runs (``suites/attention.py``); WorkloadUnsupported with each backend's reason."""
    backend, refused = choose_backend(attention_probe(shape, dtype, device, grad=grad))
    if backend is None:
        reasons = "; ".join(f"{name}: {why}" for name, why in refused.items())
        raise WorkloadUnsupported(f"{what} on {device}: no scaled_dot_product_attention backend runs ({reasons})")
    return backend


def transformer_train_step(device: torch.device, size: str, *, compile_mode: str | None = None) -> Step:
    """One fp32 training step (Adam, cross entropy per token) of the transformer encoder at ``size``.

    Work: ``tokens`` (batch x seq) and ``FLOP``, counted by torch's counter on the math path
    (the counter does not see the fused kernels: 0 FLOP for the CPU's flash attention on
    torch 2.13); the fused kernels do the same useful arithmetic. The step runs on the SDPA
    backend ``suites/attention.py`` chooses, recorded as ``sdpa_backend``. ``compile_mode``: the
    measured calls run the model under ``torch.compile(mode=compile_mode)`` (compiled lazily: the first
    call compiles).
    """
    model, x, params = transformer_model(size, device)
    batch, seq, width, heads, _ = TRANSFORMER[size]
    backend = pick_sdpa("transformer_train", (batch, heads, seq, width // heads), x.dtype, device, grad=True)
    y = torch.randint(0, 10, (batch * seq,), device=device)
    measured = None
    if compile_mode is not None:
        measured = cast(torch.nn.Module, torch.compile(model, mode=compile_mode))  # an OptimizedModule
        params = {**params, "compile": compile_mode}
    with sdpa_backend("math"):  # the FLOP census at build runs the math path, which the counter sees
        step = training_step(model, x, y, precision="fp32", params=params, measured=measured)
    return Step(
        pin_attention(step.fn, backend),
        work={"tokens": float(batch * seq), "FLOP": step.work["FLOP"]},
        params={**step.params, "sdpa_backend": backend},
        check=step.check,
    )


def transformer_workload() -> Workload:
    """``transformer_train``: :func:`transformer_train_step` at the preset's size."""
    return Workload(
        "transformer_train",
        lambda device, size: transformer_train_step(torch.device(device), size),
        "transformer encoder (pre-norm, SDPA attention, GELU MLP) full training step, Adam + per-token cross entropy",
    )


def attention_dtype(device: torch.device) -> torch.dtype:
    """fp16 on CUDA (the dtype flash attention takes, on every CUDA GPU torch supports); fp32 elsewhere."""
    return torch.float16 if device.type == "cuda" else torch.float32


#: What each attention workload runs (``attention_workload``).
ATTENTION_KINDS: Final = {
    "math": "scaled_dot_product_attention alone on the math path (which computes half-precision inputs in float32)",
    "fused": "scaled_dot_product_attention alone on the first fused kernel torch offers (flash, memory-efficient)",
    "unfused": "attention written as matmul, softmax, matmul in the inputs' dtype: the math path without its upcast",
}


def math_compute_dtype(shape: tuple[int, int, int, int], dtype: torch.dtype, device: torch.device) -> str:
    """The dtype SDPA's math path computes its matmuls in for inputs of ``dtype``, as it ran here: torch upcasts
    float16 and bfloat16 to float32 there (torch 2.13), which the fused kernels do not."""
    q = torch.zeros(1, 1, min(shape[2], 8), shape[3], dtype=dtype, device=device)
    with sdpa_backend("math"):
        _, gemms = census(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    found = {gemm.dtype for gemm in gemms}
    return found.pop().removeprefix("torch.") if len(found) == 1 else str(dtype).removeprefix("torch.")


def unfused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v in the inputs' dtype: the math path's algorithm at the fused kernels' precision."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def attention_step(kind: str, device: torch.device, size: str, dtype: torch.dtype | None = None) -> Step:
    """One attention of the preset ``size`` in ``dtype`` (default ``attention_dtype``) of ``kind``
    (``ATTENTION_KINDS``); WorkloadUnsupported where torch offers no fused kernel."""
    shape = ATTENTION[size]
    dtype = dtype or attention_dtype(device)
    backend = "math"
    if kind == "fused":
        found, refused = choose_backend(attention_probe(shape, dtype, device, grad=False), FUSED)
        if found is None:
            reasons = "; ".join(f"{name}: {why}" for name, why in refused.items())
            raise WorkloadUnsupported(f"attention_fused on {device}: torch offers no fused kernel here ({reasons})")
        backend = found
    seeded()
    q, k, v = (torch.randn(*shape, dtype=dtype, device=device) for _ in range(3))
    outputs: list[torch.Tensor] = []
    attend = unfused_attention if kind == "unfused" else torch.nn.functional.scaled_dot_product_attention

    def fn() -> None:
        outputs[:] = [attend(q, k, v)]

    with sdpa_backend("math"):
        flops = count_flops(fn)
    run = pin_fn(fn, "ieee") if kind == "unfused" else pin_attention(pin_fn(fn, "ieee"), backend)

    def check() -> None:
        if not outputs or not bool(torch.isfinite(outputs[0]).all()):
            raise AssertionError(f"attention ({kind}) on {device}: the output is not finite (or no call ran)")

    batch, heads, seq, head_dim = shape
    params: dict[str, object] = {
        "batch": batch,
        "heads": heads,
        "seq": seq,
        "head_dim": head_dim,
        "dtype": str(dtype).removeprefix("torch."),
        "sdpa_backend": "none (unfused)" if kind == "unfused" else backend,
        "fp32_precision": "ieee",
    }
    if kind != "fused":  # what its matmuls compute in: the math path upcasts half precision
        compute = str(dtype) if kind == "unfused" else math_compute_dtype(shape, dtype, device)
        params["compute_dtype"] = compute.removeprefix("torch.")
    return Step(run, work={"tokens": float(batch * seq), "FLOP": flops}, params=params, check=check)


def attention_workload(kind: str) -> Workload:
    """``attention_math``, ``attention_fused``, ``attention_unfused`` (``ATTENTION_KINDS``) at the preset's size."""
    return Workload(
        f"attention_{kind}",
        lambda device, size: attention_step(kind, torch.device(device), size),
        ATTENTION_KINDS[kind],
    )
