"""Every workload of the suites, defined once; pytest (``test_*.py``), asv (``benchmarks/``) and ``ab`` run these.

``build(device, size)`` sets a workload up on ``device`` at a size preset (``small``,
``medium``, ``large``; ``auto`` is resolved before: small on cpu and mps, large on
cuda) and returns a Step: one call, the work it does, and a check. Workloads that
cannot run on a device say why in ``unsupported`` and raise WorkloadUnsupported
from ``build`` (asv then skips them, pytest skips with the reason).

One module per family, each with its factories and the steps its test file measures:
``matmul``, ``classifiers`` (MLP and CNN training, fp32 and AMP), ``checkpoint``,
``copies``, ``data_parallel``, ``bandwidth``, ``dataloader``, ``transformer`` (and
attention alone), ``inference`` (and INT8), ``compiled``, ``batch_scaling``; the size
presets of all of them in ``sizes``. This module holds the one registry,
``WORKLOADS``: ``ab`` and asv see its names in its order.
"""

from __future__ import annotations

from typing import Final

from pytest_gpuperf import Workload

from .bandwidth import BANDWIDTH_OPS, bandwidth_step, bandwidth_workload
from .batch_scaling import BATCH_LADDER, BATCH_LADDER_CUDA_MAX, batch_step
from .checkpoint import stack_workload
from .classifiers import image_workload, mlp_widths, mlp_workload, wide_widths
from .compiled import COMPILE_MODE, compile_unsupported, compiled_mlp_workload, compiled_transformer_workload
from .copies import copy_workload, host_buffer
from .data_parallel import dataparallel_workload
from .dataloader import dataloader_workload
from .inference import (
    INT8_TOLERANCE,
    inference_step,
    inference_workload,
    int8_unsupported,
    int8_workload,
    quantization_error,
)
from .matmul import MATMUL_DTYPES, matmul_step, matmul_unsupported, matmul_workload
from .sizes import (
    ATTENTION,
    BANDWIDTH_BYTES,
    COPY_BYTES,
    DEEP_STACK,
    MATMUL_SIZES,
    MATMUL_SWEEP,
    MLP_BATCH,
    RESNET,
    SMALL_CNN,
    TRANSFORMER,
    WIDE_MLP,
)
from .transformer import attention_workload, transformer_train_step, transformer_workload

__all__ = [
    "ATTENTION",
    "BANDWIDTH_BYTES",
    "BANDWIDTH_OPS",
    "BATCH_LADDER",
    "BATCH_LADDER_CUDA_MAX",
    "COMPILE_MODE",
    "COPY_BYTES",
    "DEEP_STACK",
    "INT8_TOLERANCE",
    "MATMUL_DTYPES",
    "MATMUL_SIZES",
    "MATMUL_SWEEP",
    "MLP_BATCH",
    "RESNET",
    "SMALL_CNN",
    "TRANSFORMER",
    "WIDE_MLP",
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


def _all() -> tuple[Workload, ...]:
    out: list[Workload] = [matmul_workload(dtype) for dtype in MATMUL_DTYPES]
    for precision in ("fp32", "amp"):
        out.append(mlp_workload(mlp_widths, "mlp", precision))
        out.append(mlp_workload(wide_widths, "mlp_wide", precision))
        out.append(image_workload("cnn", precision))
        out.append(image_workload("resnet", precision))
    out += [stack_workload(mode) for mode in ("full", "checkpointed", "forward")]
    out += [copy_workload("h2d", True), copy_workload("h2d", False), dataparallel_workload()]
    out += [bandwidth_workload(op) for op in BANDWIDTH_OPS]
    out += [copy_workload("d2h", True), copy_workload("d2h", False)]
    out += [dataloader_workload(workers, pinned) for workers in (0, 2) for pinned in (False, True)]
    out.append(transformer_workload())
    models = ("mlp_wide", "cnn", "transformer")
    out += [inference_workload(model, batch_one) for model in models for batch_one in (True, False)]
    out += [int8_workload(), attention_workload("math"), attention_workload("fused"), attention_workload("unfused")]
    out += [compiled_mlp_workload(), compiled_transformer_workload()]
    return tuple(out)


#: name -> workload; asv generates one benchmark per entry, ``ab`` measures each, in this order.
WORKLOADS: Final[dict[str, Workload]] = {w.name: w for w in _all()}
