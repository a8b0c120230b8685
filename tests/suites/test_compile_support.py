"""When the compile suite skips: no C++ compiler, no triton, a torch.compile that fails its smoke test."""

from __future__ import annotations

import functools
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
    def ones(n: int, device: object = None) -> list[float]:
        return [1.0] * n


def test_a_failing_smoke_compile_gives_the_reason() -> None:
    seconds, why = smoke_compile(_Failing())
    assert seconds >= 0
    assert why == "torch.compile failed a smoke test: OSError: c++: fatal error: no input files"


def test_the_first_call_is_timed_between_synchronizations() -> None:
    events: list[str] = []
    seconds = first_call_seconds(lambda: events.append("call"), lambda: events.append("sync"))
    assert events == ["sync", "call", "sync"] and seconds >= 0


def test_the_compiled_step_is_first_called_at_the_samplers_threads_so_nothing_recompiles_while_sampling() -> None:
    """Issue 21, item 6: dynamo guards on torch's thread count. The compile test timed the compiled step's first
    call at torch's own count, and the sampler then set its own (1 on a CPU): the step compiled again inside the
    sampler. Counted with a compile counter backend (no inductor, so it is quick)."""
    import torch._dynamo.testing

    from pytest_gpuperf.measuring import MeasureSettings, measure

    settings = MeasureSettings(max_time=0.2, min_time=0.01, warmup_time=0.02, memory=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # torch's own count, other than the sampler's 1
    try:
        for threads, frames in ((None, 2), (settings.threads_for("cpu"), 1)):
            torch._dynamo.reset()
            counter = torch._dynamo.testing.CompileCounter()
            compiled = torch.compile(lambda x: x * 2 + 1, backend=counter)
            call = functools.partial(compiled, torch.ones(8))
            first_call_seconds(call, lambda: None, threads=threads)
            measure(call, device="cpu", settings=settings)
            assert counter.frame_count == frames, f"first call at {threads or 'torch default'} threads"
    finally:
        torch.set_num_threads(before)
        torch._dynamo.reset()


def test_the_smoke_compile_runs_on_the_tested_device() -> None:
    devices: list[object] = []

    class _Recording:
        @staticmethod
        def compile(fn: Any) -> Any:
            return fn

        @staticmethod
        def ones(n: int, device: object = None) -> Any:
            devices.append(device)
            return torch.ones(n)

    _, why = smoke_compile(_Recording(), device=torch.device("cuda", 1))
    assert why is None and devices == [torch.device("cuda", 1)]
