"""torch.compile against eager: the classifier's training step with the model compiled (inductor,
``COMPILE_MODE``), and the same step eager, in paired rounds.

Compile time is recorded apart: the compiled step's first call (which traces and compiles the
forward and the backward) is timed here, before the sampler sees the step, and kept in the
record's metadata (``compile_seconds``) and a note; so the sampler never takes it for warmup.
A smoke compile of a tiny function on the tested device comes first: it pays the compiler's
one-time start-up in this process (on a CPU, most of a cold compile: the C++ toolchain's first
build; on CUDA, triton's), it is noted apart, and if it fails the test skips with the reason.
The first calls run at the thread count the sampler sets (1 on a CPU by default): dynamo guards
on torch's thread count, so a first call at another count would leave the compile to the
sampler.

Reported, not asserted: the speedup. Whether compiling pays depends on the device, the step's
size and torch's version: on a CPU the small classifier's step is a few GEMMs that eager
already runs in oneDNN, and fusing its element-wise tail saves little.

Where the compiler is unavailable (no C++ compiler on a CPU, no triton on CUDA, a platform
torch.compile does not support), the test skips with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import pytest
import torch

from pytest_gpuperf import Gpuperf
from pytest_gpuperf.measuring import torch_threads

from .workloads import COMPILE_MODE, WORKLOADS, compile_unsupported

# torch's inductor, imported by the first compile, warns that torch.jit.script_method is deprecated: torch's own
# business, not this suite's.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")

#: model -> (eager workload, compiled workload).
COMPILED: Final = {
    "mlp": ("mlp_train", "mlp_train_compiled"),
    "transformer": ("transformer_train", "transformer_train_compiled"),
}


def smoke_compile(torch_module: Any = torch, *, device: Any = "cpu") -> tuple[float, str | None]:
    """Compile and run a tiny function on ``device`` (the tested one: inductor's C++ on a CPU, triton on CUDA):
    (seconds it took, why torch.compile cannot run there, or None)."""
    start = time.perf_counter()
    try:
        fn: Callable[[Any], Any] = torch_module.compile(lambda x: x * 2 + 1)
        fn(torch_module.ones(8, device=device))
    except Exception as exc:  # noqa: BLE001 - the compiler's failures share no type (BackendCompilerFailed, OSError)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return time.perf_counter() - start, f"torch.compile failed a smoke test: {type(exc).__name__}: {first}"
    return time.perf_counter() - start, None


def first_call_seconds(
    fn: Callable[[], object], synchronize: Callable[[], None], *, threads: int | None = None
) -> float:
    """Wall time of one call of ``fn`` up to the device's completion: the compile of a compiled step; at torch's
    intra-op ``threads`` (the sampler's count; None: torch's own), which dynamo's guards include."""
    with torch_threads(threads):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        return time.perf_counter() - start


@pytest.mark.parametrize("model", list(COMPILED))
def test_compile_speedup(gpuperf: Gpuperf, model: str) -> None:
    eager_name, compiled_name = COMPILED[model]
    why = compile_unsupported(gpuperf.device)
    if why:
        pytest.skip(f"{compiled_name} on {gpuperf.slot.id}: {why}")
    smoke, why = smoke_compile(device=gpuperf.device)
    if why:
        pytest.skip(f"{compiled_name} on {gpuperf.slot.id}: {why}")
    steps = {
        "eager": WORKLOADS[eager_name].build(gpuperf.device, gpuperf.size),
        "compiled": WORKLOADS[compiled_name].build(gpuperf.device, gpuperf.size),
    }
    synchronize = gpuperf.backend.synchronize
    threads = gpuperf.settings.measure.threads_for(gpuperf.slot.id)  # the sampler's: no recompile inside it
    compile_seconds = first_call_seconds(steps["compiled"].fn, synchronize, threads=threads)
    second = first_call_seconds(steps["compiled"].fn, synchronize, threads=threads)
    kept = {"compile_seconds": round(compile_seconds, 3), "compile_smoke_seconds": round(smoke, 3)}
    rounds = gpuperf.paired(steps, metadata={"compiled": kept})
    for step in steps.values():
        assert step.check is not None
        step.check()  # loss finite and falling, the optimizer stepped
    gpuperf.note(
        f"{model}: torch.compile(mode={COMPILE_MODE!r}) first call (trace and compile, forward and backward) "
        f"{compile_seconds:.2f} s, second call {second * 1e3:.1f} ms, after a smoke compile of {smoke:.2f} s "
        "(the compiler's start-up in this process); none of it reached the sampler"
    )
    speedup = rounds.speedup("compiled", "eager")
    gpuperf.note(
        f"{model}: {speedup}; not asserted: whether compiling pays depends on the device, the step's size and torch"
    )
