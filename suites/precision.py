"""fp32 math pinned for the length of each step: an "ieee" row is IEEE fp32, a "tf32" row TF32, whatever was set.

torch may run float32 matmuls and convolutions on TF32 tensor cores (a 10-bit mantissa),
and its defaults differ by operation: cuDNN convolutions default to TF32, cuBLAS matmuls
do not. So a "fp32" convolution row measured TF32 unless someone turned it off, and a
comparison of fp32 with AMP compared TF32 with fp16. Every step of the suites therefore
runs under :func:`fp32_math`, which sets the flags torch reads when it picks a kernel,
around each call (the sampler calls the step long after ``build`` returned, interleaved
with other steps), and restores what was set before after each call, also when the call
raises. pytest, ``pytest-gpuperf ab`` and asv run the same steps, so all three measure the
same math; the mode is recorded as the step's ``fp32_precision`` parameter.

Two APIs, chosen by torch's release:

- torch 2.9 and later: per backend and operation, ``fp32_precision`` = ``"ieee"``,
  ``"tf32"`` or ``"none"`` (follow the parent: ``torch.backends.cudnn.fp32_precision``
  for cuDNN and cuBLAS, then ``torch.backends.fp32_precision``). The old ``allow_tf32``
  flags are deprecated there, and torch raises when the two disagree and the old one is
  read, so only the new API is used. On torch 2.13, cuDNN's TF32 default is a soft one
  (it follows the parent once the parent is set), and no flag can be unset once set, so
  the parent is pinned first and a leaf only where that is not enough (a value the user
  set on the leaf); restoring the parent, then those leaves, leaves everything as it was.
- older torch: ``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32``.

On torch 2.9+ oneDNN's flags (``torch.backends.mkldnn.*``, a CPU's matmuls and
convolutions) are pinned to IEEE in both modes: TF32 rows are CUDA's. Older torch has no
such per-backend flag for oneDNN.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Final

import torch

from pytest_gpuperf import Step

from .compat import torch_release

__all__ = ["MODES", "fp32_math", "pin_fn", "pin_step", "uses_fp32_precision_api"]

#: "ieee": float32 matmuls and convolutions in IEEE fp32; "tf32": on TF32 tensor cores (CUDA).
MODES: Final = ("ieee", "tf32")
#: The first torch release whose ``fp32_precision`` flags take "ieee" and deprecate ``allow_tf32``.
FP32_PRECISION_API: Final = (2, 9)
#: Resolved values that mean IEEE fp32 ("none": nothing set anywhere up the chain).
_IEEE_LIKE: Final = frozenset({"ieee", "none"})


def uses_fp32_precision_api(torch_module: Any = torch) -> bool:
    """Does this torch take ``fp32_precision`` ("ieee"/"tf32"/"none") and deprecate ``allow_tf32``?"""
    return torch_release(str(torch_module.__version__)) >= FP32_PRECISION_API


#: What a pin changed, to be put back in reverse order: (flag object, attribute, value before).
_Undo = list[tuple[Any, str, object]]


def _satisfied(value: str, mode: str) -> bool:
    return value == "tf32" if mode == "tf32" else value in _IEEE_LIKE


def _pin_group(parent: Any, leaves: tuple[Any, ...], mode: str, generic: str, undo: _Undo) -> None:
    """Pin every leaf flag to ``mode``, through ``parent`` (None: not settable) first, then leaf by leaf."""
    if all(_satisfied(leaf.fp32_precision, mode) for leaf in leaves):
        return
    if parent is not None:
        before = parent.fp32_precision
        # The getter resolves "none" through the generic flag: equal values mean "follow it", so restore "none".
        undo.append((parent, "fp32_precision", "none" if before == generic else before))
        parent.fp32_precision = mode
    for leaf in leaves:
        value = leaf.fp32_precision
        if not _satisfied(value, mode):
            undo.append((leaf, "fp32_precision", value))
            leaf.fp32_precision = mode


def _check(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"fp32 math mode {mode!r} is not one of {', '.join(MODES)}")


def _pinner(mode: str, torch_module: Any) -> Callable[[_Undo], None]:
    """A function that pins the flags for ``mode`` and notes in its argument what to restore.

    Which API, and the flag objects, are resolved here, once per step: a call of a step
    then costs only the reads and writes of the flags.
    """
    _check(mode)
    backends = torch_module.backends
    if uses_fp32_precision_api(torch_module):
        cuda = (backends.cudnn, (backends.cuda.matmul, backends.cudnn.conv, backends.cudnn.rnn), mode)
        # torch.backends.mkldnn.fp32_precision sets the generic flag, not oneDNN's: pin oneDNN's leaves only.
        onednn = (None, (backends.mkldnn.matmul, backends.mkldnn.conv, backends.mkldnn.rnn), "ieee")

        def pin_new(undo: _Undo) -> None:
            generic = backends.fp32_precision
            for parent, leaves, want in (cuda, onednn):
                _pin_group(parent, leaves, want, generic, undo)

        return pin_new
    legacy = (backends.cuda.matmul, backends.cudnn)
    want = mode == "tf32"

    def pin_legacy(undo: _Undo) -> None:
        for flag in legacy:
            before = flag.allow_tf32
            if before != want:
                undo.append((flag, "allow_tf32", before))
                flag.allow_tf32 = want

    return pin_legacy


def _restore(undo: _Undo) -> None:
    for flag, name, value in reversed(undo):
        setattr(flag, name, value)


@contextlib.contextmanager
def fp32_math(mode: str, torch_module: Any = torch) -> Iterator[None]:
    """Within the block, float32 matmuls and convolutions run in ``mode`` ("ieee" or "tf32"); restored after."""
    pin = _pinner(mode, torch_module)
    undo: _Undo = []
    try:
        pin(undo)
        yield
    finally:
        _restore(undo)


def pin_fn(fn: Callable[[], object], mode: str, torch_module: Any = torch) -> Callable[[], object]:
    """``fn`` that runs under ``fp32_math(mode)`` at every call (a bad mode fails here, at build)."""
    pin = _pinner(mode, torch_module)

    def run() -> object:
        undo: _Undo = []
        try:
            pin(undo)  # inside the try: what a failing pin changed is restored too
            return fn()
        finally:
            _restore(undo)

    return run


def pin_step(step: Step, mode: str) -> Step:
    """``step`` with its calls (not its check) run under ``fp32_math(mode)``, the mode recorded in its params."""
    return dataclasses.replace(step, fn=pin_fn(step.fn, mode), params={**step.params, "fp32_precision": mode})
