"""fp32 math pinned around each call of a step and restored after: torch's own flags (torch 2.9+ API) and stand-ins."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_gpuperf.measuring import Step
from suites.models import mlp
from suites.precision import fp32_math, pin_fn, pin_step, uses_fp32_precision_api
from suites.training import training_step
from suites.workloads import WORKLOADS, matmul_step

#: torch.backends, whose flag objects torch's type stubs do not declare.
BACKENDS: Any = torch.backends

NEW_API = pytest.mark.skipif(
    not uses_fp32_precision_api(), reason=f"torch {torch.__version__} has no fp32_precision flags (2.9+)"
)


def _flag_objects() -> dict[str, Any]:
    b = BACKENDS
    return {
        "generic": b,
        "cuda": b.cudnn,
        "cuda.matmul": b.cuda.matmul,
        "cuda.conv": b.cudnn.conv,
        "cuda.rnn": b.cudnn.rnn,
        "mkldnn.matmul": b.mkldnn.matmul,
        "mkldnn.conv": b.mkldnn.conv,
        "mkldnn.rnn": b.mkldnn.rnn,
    }


def _state() -> dict[str, str]:
    return {name: str(flag.fp32_precision) for name, flag in _flag_objects().items()}


def _conv_follows_cudnn() -> bool:
    """Does cuDNN's conv flag follow a change of its parent (``torch.backends.cudnn.fp32_precision``)?"""
    cudnn = BACKENDS.cudnn
    before = cudnn.fp32_precision
    other = "ieee" if cudnn.conv.fp32_precision == "tf32" else "tf32"
    cudnn.fp32_precision = other
    follows = bool(cudnn.conv.fp32_precision == other)
    cudnn.fp32_precision = before
    return follows


@pytest.fixture
def torch_flags() -> Iterator[dict[str, str]]:
    """torch's fp32 flags as found; what a test sets is put back by value afterwards (before torch 2.9, the two
    allow_tf32 flags, and the dict is empty)."""
    if not uses_fp32_precision_api():
        legacy = (BACKENDS.cuda.matmul.allow_tf32, BACKENDS.cudnn.allow_tf32)
        yield {}
        BACKENDS.cuda.matmul.allow_tf32, BACKENDS.cudnn.allow_tf32 = legacy
        return
    found = _state()
    yield found
    flags = _flag_objects()
    for name in ("generic", "cuda", *(n for n in found if "." in n)):
        if str(flags[name].fp32_precision) != found[name]:
            flags[name].fp32_precision = found[name]
    assert _state() == found


@NEW_API
@pytest.mark.parametrize("mode", ["ieee", "tf32"])
def test_every_cuda_and_onednn_op_runs_in_the_mode_inside_and_as_before_after(
    torch_flags: dict[str, str], mode: str
) -> None:
    follows = _conv_follows_cudnn()
    with fp32_math(mode):
        inside = _state()
    cuda_wanted = {"tf32"} if mode == "tf32" else {"ieee", "none"}
    for name in ("cuda.matmul", "cuda.conv", "cuda.rnn"):
        assert inside[name] in cuda_wanted, (name, inside)
    for name in ("mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn"):
        assert inside[name] in {"ieee", "none"}, (name, inside)  # TF32 rows are CUDA's: a CPU stays IEEE
    assert _state() == torch_flags
    # Not only the values: a default that follows its parent (cuDNN's TF32 on torch 2.13) still does.
    assert _conv_follows_cudnn() == follows


@NEW_API
def test_what_the_user_set_is_overridden_inside_and_restored_after(torch_flags: dict[str, str]) -> None:
    BACKENDS.fp32_precision = "tf32"  # everything TF32 unless said otherwise
    BACKENDS.cudnn.conv.fp32_precision = "tf32"
    BACKENDS.mkldnn.matmul.fp32_precision = "bf16"
    before = _state()
    with fp32_math("ieee"):
        inside = _state()
    assert all(inside[name] in {"ieee", "none"} for name in inside if "." in name), inside
    assert _state() == before


@NEW_API
def test_flags_are_restored_when_the_step_raises(torch_flags: dict[str, str]) -> None:
    def broken() -> None:
        assert BACKENDS.cudnn.conv.fp32_precision == "tf32"
        raise RuntimeError("CUDA out of memory (stand-in)")

    run = pin_fn(broken, "tf32")
    with pytest.raises(RuntimeError, match="out of memory"):
        run()
    assert _state() == torch_flags


def test_a_training_step_runs_its_forward_with_pinned_math_but_builds_and_checks_outside(
    torch_flags: dict[str, str],
) -> None:
    seen: list[str] = []
    model = mlp((8, 4, 2))
    model.register_forward_hook(lambda *_: seen.append(_precision_now()))
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    step = training_step(model, x, y, precision="fp32", params={"model": "tiny"})
    assert step.params["fp32_precision"] == "ieee"
    seen.clear()
    step.fn()
    assert seen == ["ieee"]


def _precision_now() -> str:
    if not uses_fp32_precision_api():
        return "ieee" if not BACKENDS.cudnn.allow_tf32 else "tf32"
    conv = str(BACKENDS.cudnn.conv.fp32_precision)
    return "ieee" if conv in {"ieee", "none"} else conv


def test_every_workload_step_records_its_pinned_math() -> None:
    cpu = torch.device("cpu")
    assert matmul_step(cpu, "float32", 16).params["fp32_precision"] == "ieee"
    assert matmul_step(cpu, "bfloat16", 16).params["fp32_precision"] == "ieee"
    for name in ("mlp_train", "cnn_train_amp", "stack_forward"):
        assert WORKLOADS[name].build(cpu, "small").params["fp32_precision"] == "ieee", name


def test_pin_step_wraps_the_calls_keeps_the_check_and_refuses_a_bad_mode() -> None:
    calls: list[str] = []
    step = Step(lambda: calls.append("ran"), work={"FLOP": 1.0}, params={"n": 1}, check=lambda: None)
    pinned = pin_step(step, "ieee")
    pinned.fn()
    assert calls == ["ran"]
    assert pinned.params == {"n": 1, "fp32_precision": "ieee"}
    assert pinned.check is step.check and pinned.work == step.work
    with pytest.raises(ValueError, match="'fp16' is not one of ieee, tf32"):
        pin_step(step, "fp16")


# ---------------------------------------------------------------- stand-ins


@dataclass
class _Legacy:
    """A torch < 2.9 flag object: ``allow_tf32`` only (reading fp32_precision fails, as it does there)."""

    allow_tf32: bool
    writes: list[bool] = field(default_factory=list)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "allow_tf32" and "writes" in self.__dict__:
            self.writes.append(value)
        object.__setattr__(self, name, value)


def _legacy_torch(matmul: bool, cudnn: bool) -> Any:
    return SimpleNamespace(
        __version__="2.3.1+cu121",
        backends=SimpleNamespace(cuda=SimpleNamespace(matmul=_Legacy(matmul)), cudnn=_Legacy(cudnn)),
    )


@pytest.mark.parametrize(("mode", "want"), [("ieee", False), ("tf32", True)])
def test_before_torch_2_9_the_allow_tf32_flags_are_pinned_and_restored(mode: str, want: bool) -> None:
    fake = _legacy_torch(matmul=False, cudnn=True)  # torch's defaults
    matmul, cudnn = fake.backends.cuda.matmul, fake.backends.cudnn
    seen: list[tuple[bool, bool]] = []

    def failing() -> None:
        seen.append((matmul.allow_tf32, cudnn.allow_tf32))
        raise KeyError("the step failed")

    with pytest.raises(KeyError):
        pin_fn(failing, mode, fake)()
    assert seen == [(want, want)]
    assert (matmul.allow_tf32, cudnn.allow_tf32) == (False, True)
    # Only what differed was written, and written back.
    assert matmul.writes == ([] if not want else [True, False])
    assert cudnn.writes == ([] if want else [False, True])


class _NewFlag:
    """A torch 2.9+ flag: a raw value, resolved through its parent when "none"; ``allow_tf32`` must not be touched."""

    def __init__(self, raw: str, parent: _NewFlag | None = None) -> None:
        self.__dict__.update(raw=raw, parent=parent)

    @property
    def fp32_precision(self) -> str:
        raw: str = self.__dict__["raw"]
        parent = self.__dict__["parent"]
        return parent.fp32_precision if raw == "none" and parent is not None else raw

    @fp32_precision.setter
    def fp32_precision(self, value: str) -> None:
        self.__dict__["raw"] = value

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the legacy flag {name} was read on torch 2.9+")

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "fp32_precision":
            raise AssertionError(f"the legacy flag {name} was set on torch 2.9+")
        object.__setattr__(self, name, value)


def test_from_torch_2_9_only_fp32_precision_is_used_and_raw_values_come_back() -> None:
    generic = _NewFlag("none")
    cuda = _NewFlag("tf32", generic)  # the user: TF32 for cuBLAS and cuDNN
    leaves = {"matmul": _NewFlag("none", cuda), "conv": _NewFlag("ieee", cuda), "rnn": _NewFlag("none", cuda)}
    onednn = {"matmul": _NewFlag("bf16", generic), "conv": _NewFlag("none", generic), "rnn": _NewFlag("none", generic)}
    fake = SimpleNamespace(
        __version__="2.9.1",
        backends=SimpleNamespace(
            cuda=SimpleNamespace(matmul=leaves["matmul"]),
            cudnn=SimpleNamespace(conv=leaves["conv"], rnn=leaves["rnn"]),
            mkldnn=SimpleNamespace(**onednn),
        ),
    )
    # cudnn is both the parent flag and the namespace of conv and rnn, as in torch.
    fake.backends.cudnn = cuda
    cuda.__dict__.update(conv=leaves["conv"], rnn=leaves["rnn"])
    fake.backends.__dict__["fp32_precision"] = "none"

    def raw() -> list[str]:
        return [f.__dict__["raw"] for f in (cuda, *leaves.values(), *onednn.values())]

    before = raw()
    with fp32_math("ieee", fake):
        assert [f.fp32_precision for f in (*leaves.values(), *onednn.values())] == ["ieee"] * 3 + [
            "ieee",
            "none",
            "none",
        ]
    assert raw() == before
    with fp32_math("tf32", fake):
        assert [f.fp32_precision for f in leaves.values()] == ["tf32"] * 3
    assert raw() == before
