"""When the compile suite skips: no C++ compiler, no triton, a torch.compile that fails its smoke test."""

from __future__ import annotations

import importlib.util
import shutil
from typing import Any

import pytest
import torch

from suites.test_compile import first_call_seconds, smoke_compile
from suites.workloads import WORKLOADS, compile_unsupported


def test_no_cpp_compiler_on_a_cpu_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    why = compile_unsupported(torch.device("cpu"))
    assert why is not None and "no C++ compiler was found" in why
    assert WORKLOADS["mlp_train_compiled"].why_unsupported("cpu") == why


def test_no_triton_on_cuda_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    why = compile_unsupported(torch.device("cuda"))
    assert why is not None and "triton package is not installed" in why


def test_other_devices_are_not_measured() -> None:
    assert compile_unsupported(torch.device("mps")) == "torch.compile's inductor backend is not measured on mps"


class _Failing:
    """A torch stand-in whose compile fails as inductor does without a working toolchain."""

    @staticmethod
    def compile(fn: Any) -> Any:
        def run(x: Any) -> Any:
            raise OSError("c++: fatal error: no input files\nmore")

        return run

    @staticmethod
    def ones(n: int) -> list[float]:
        return [1.0] * n


def test_a_failing_smoke_compile_gives_the_reason() -> None:
    seconds, why = smoke_compile(_Failing())
    assert seconds >= 0
    assert why == "torch.compile failed a smoke test: OSError: c++: fatal error: no input files"


def test_the_first_call_is_timed_between_synchronizations() -> None:
    events: list[str] = []
    seconds = first_call_seconds(lambda: events.append("call"), lambda: events.append("sync"))
    assert events == ["sync", "call", "sync"] and seconds >= 0
