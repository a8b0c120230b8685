"""Which scaled-dot-product-attention kernel a step runs: chosen once at build, pinned around every call.

``torch.nn.functional.scaled_dot_product_attention`` picks a kernel at each call: flash
attention, memory-efficient attention, or the math path (matmul, softmax, matmul, with the
whole attention matrix in memory). Which one it picks depends on the device, the dtype,
the head size and the flags the user set (``torch.backends.cuda.flash_sdp_enabled()`` and
its siblings, which govern the CPU's flash kernel too). A record that said "transformer"
without saying which would compare different kernels as one workload. So the suites
choose: the first backend of ``PRIORITY`` (torch's own order) that the user's flags allow
and that runs on the step's own attention inputs, forward and, for a training step,
backward; then every call runs under ``torch.nn.attention.sdpa_kernel`` of that one
backend, and the step's ``sdpa_backend`` parameter records it. pytest, ``pytest-gpuperf
ab`` and asv measure the same kernel.

Everything that touches torch's attention API goes through ``torch_module`` (default:
torch), so the CUDA choice is tested here with a stand-in; no GPU was at hand.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Final

import torch
import torch.nn.attention

__all__ = ["BACKENDS", "FUSED", "PRIORITY", "attention_probe", "choose_backend", "pin_attention", "sdpa_backend"]

#: Our names for torch's SDPA backends, and torch's enum member for each.
BACKENDS: Final = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}
#: torch's default priority among them: the fused kernels first, the math path last.
PRIORITY: Final = ("flash", "efficient", "math")
#: The fused kernels: attention without the whole attention matrix in memory.
FUSED: Final = ("flash", "efficient")
#: The flag getters of ``torch.backends.cuda`` that say whether the user allows each backend.
_ENABLED: Final = {"flash": "flash_sdp_enabled", "efficient": "mem_efficient_sdp_enabled", "math": "math_sdp_enabled"}


def _check(name: str) -> None:
    if name not in BACKENDS:
        raise ValueError(f"SDPA backend {name!r} is not one of {', '.join(BACKENDS)}")


def sdpa_backend(name: str, torch_module: Any = torch) -> contextlib.AbstractContextManager[Any]:
    """``torch.nn.attention.sdpa_kernel`` of the one backend ``name`` ("flash", "efficient", "math")."""
    _check(name)
    attention = torch_module.nn.attention
    return attention.sdpa_kernel([getattr(attention.SDPBackend, BACKENDS[name])])  # type: ignore[no-any-return]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def attention_probe(
    shape: tuple[int, int, int, int], dtype: torch.dtype, device: torch.device, *, grad: bool, torch_module: Any = torch
) -> Callable[[str], str | None]:
    """A probe for :func:`choose_backend`: runs one attention of ``shape`` (batch, heads, seq, head_dim) under each
    backend asked, with backward when ``grad``; None if it ran, else torch's reason (its first line)."""

    def probe(name: str) -> str | None:
        q = torch_module.randn(*shape, dtype=dtype, device=device, requires_grad=grad)
        try:
            # torch warns for each kernel it cannot use before it raises: the refusal's message is the reason.
            with warnings.catch_warnings(), sdpa_backend(name, torch_module):
                warnings.simplefilter("ignore")
                out = torch_module.nn.functional.scaled_dot_product_attention(q, q, q)
                if grad:
                    out.sum().backward()
        except RuntimeError as exc:
            return _first_line(exc)
        return None

    return probe


def choose_backend(
    probe: Callable[[str], str | None], candidates: Sequence[str] = PRIORITY, torch_module: Any = torch
) -> tuple[str | None, dict[str, str]]:
    """The first of ``candidates`` the user's flags allow and ``probe`` runs; and why each one before it was not."""
    refused: dict[str, str] = {}
    for name in candidates:
        _check(name)
        if not getattr(torch_module.backends.cuda, _ENABLED[name])():
            refused[name] = f"turned off (torch.backends.cuda.{_ENABLED[name]}() is False)"
            continue
        why = probe(name)
        if why is None:
            return name, refused
        refused[name] = why
    return None, refused


def pin_attention(fn: Callable[[], object], name: str, torch_module: Any = torch) -> Callable[[], object]:
    """``fn`` with every call run under the one SDPA backend ``name``."""
    _check(name)

    def run() -> object:
        with sdpa_backend(name, torch_module):
            return fn()

    return run
