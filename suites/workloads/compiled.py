"""torch.compile: the MLP's and the transformer's training step with the model compiled (inductor), against the
same steps eager in test_compile.py (``mlp_train_compiled``, ``transformer_train_compiled``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Any, Final, cast

import torch

from pytest_gpuperf import Step, Workload

from ..models import mlp
from ..training import training_step
from .classifiers import mlp_widths
from .common import require, seeded
from .transformer import transformer_train_step

__all__ = ["COMPILE_MODE", "compile_unsupported", "compiled_mlp_workload", "compiled_transformer_workload"]

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


def compiled_mlp_workload() -> Workload:
    """``mlp_train_compiled``: the MLP's training step with the model under ``torch.compile``."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        require(workload, dev)
        batch, widths = mlp_widths(size)
        seeded()
        model = mlp(widths).to(dev)
        x = torch.randn(batch, widths[0], device=dev)
        y = torch.randint(0, widths[-1], (batch,), device=dev)
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


def compiled_transformer_workload() -> Workload:
    """``transformer_train_compiled``: the transformer's training step with the model under ``torch.compile``."""

    def build(device: Any, size: str) -> Step:
        dev = torch.device(device)
        require(workload, dev)
        return transformer_train_step(dev, size, compile_mode=COMPILE_MODE)

    workload = Workload(
        "transformer_train_compiled",
        build,
        f"transformer_train with the model under torch.compile(mode={COMPILE_MODE!r}); Adam eager",
        compile_unsupported,
    )
    return workload
