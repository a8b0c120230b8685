"""Where each process of a run measures (``measuring.bind``), and what a host-timed CUDA step of a process bound to one
GPU touches: a ``torch.cuda`` stand-in with four devices records the device of every call."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gpuperf.measuring import AllCudaBackend, Binding, DeviceError, Inventory, bind, resolve_devices

FOUR_GPUS = Inventory(4, "", False, "MPS needs Apple silicon")


def slot(text: str) -> Any:
    (only,) = resolve_devices((text,), FOUR_GPUS)
    return only


def test_cuda_is_the_process_s_own_gpu_and_an_explicit_one_is_never_moved() -> None:
    worker = Binding(2, "xdist", 4)
    assert bind(slot("cuda"), worker, FOUR_GPUS).id == "cuda:2"
    assert bind(slot("auto"), worker, FOUR_GPUS).id == "cuda:2"
    with pytest.raises(DeviceError, match=r"--gpuperf-device=cuda:0 names one GPU, and -n 4 runs 4 workers"):
        bind(slot("cuda:0"), worker, FOUR_GPUS)
    alone = Binding(0, "xdist", 1)
    assert bind(slot("cuda:3"), alone, FOUR_GPUS).id == "cuda:3"  # -n 1: as named
    assert bind(slot("cuda:3"), None, FOUR_GPUS).id == "cuda:3"
    assert bind(slot("cpu"), worker, FOUR_GPUS).id == "cpu"  # sharing the CPU is refused elsewhere (_xdist.sharing)
    rank = Binding(5, "torchrun", 6)
    with pytest.raises(DeviceError, match=r"torchrun's LOCAL_RANK=5 measures on cuda:5, and this machine has 4 GPUs"):
        bind(slot("cuda"), rank, FOUR_GPUS)
    confirmation = Binding(3, "confirmation", 1)
    assert bind(slot("cuda"), confirmation, FOUR_GPUS).id == "cuda:3"  # the record's GPU; the id keeps cuda:0


def test_only_an_index_named_is_pinned() -> None:
    assert [s.pinned for s in resolve_devices(("cuda", "cuda:1", "auto"), FOUR_GPUS)] == [False, True]
    assert not any(s.pinned for s in resolve_devices(("all",), FOUR_GPUS))


def test_a_multi_gpu_test_is_refused_only_beside_other_processes() -> None:
    assert Binding(1, "xdist", 1).multi_gpu_refusal(2) == ""
    assert Binding(1, "xdist", 2).multi_gpu_refusal(2) == (
        "uses 2 GPUs at once, and xdist worker gw1 measures on one (cuda:1) while the other workers measure on "
        "theirs; run it without -n"
    )
    assert "run it without torchrun" in Binding(0, "torchrun", 8).multi_gpu_refusal(8)


class Touches:
    """``torch.cuda`` with ``count`` devices: every call, whatever its name, is logged with the device it names."""

    def __init__(self, count: int = 4) -> None:
        self.count = count
        self.log: list[tuple[str, int | None]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            device = args[0] if args else kwargs.get("device")
            self.log.append((name, device if isinstance(device, int) else getattr(device, "index", None)))
            if name == "device":
                return contextlib.nullcontext()
            if name == "get_device_properties":
                return SimpleNamespace(name="Stand-in GPU", major=9, minor=0, total_memory=1 << 30)
            return 0

        return call

    def devices(self) -> set[int | None]:
        return {index for _, index in self.log}


def test_a_bound_process_syncs_probes_and_describes_only_its_gpu() -> None:
    cuda = Touches()
    ticks = iter(range(0, 10**9, 10**6))
    backend = AllCudaBackend((2,), SimpleNamespace(cuda=cuda), name="cuda:2", clock_ns=lambda: next(ticks))
    backend.time_block(lambda: None, 3)
    with backend.track_memory() as probe:
        for _ in probe.calls():
            pass
    assert backend.describe()["device"] == "cuda:2"
    # Every call names cuda:2 but the memory probe's empty_cache, which frees this process's own cached segments
    assert cuda.devices() == {2, None} and [call for call in cuda.log if call[1] is None] == [("empty_cache", None)]
    assert backend.timer == "perf_counter_ns between torch.cuda.synchronize() of 2"


def test_a_process_with_the_machine_syncs_every_visible_gpu() -> None:
    cuda = Touches()
    ticks = iter(range(0, 10**9, 10**6))
    backend = AllCudaBackend((0, 1, 2, 3), SimpleNamespace(cuda=cuda), clock_ns=lambda: next(ticks))
    backend.time_block(lambda: None, 1)
    assert [call for call in cuda.log if call[0] == "synchronize"] == [("synchronize", i) for i in range(4)] * 2
    assert backend.name == "cuda" and backend.timer.endswith("of every visible device")


def test_a_process_with_the_machine_syncs_only_the_gpus_its_work_is_on() -> None:
    """F11: synchronizing a GPU opens a CUDA context there (hundreds of MiB of its memory) and waits for it. A GPU
    where the process has no context holds none of its work: of four visible GPUs, a step on cuda:0 gets cuda:0
    synchronized alone, and one that spreads to cuda:1 (DataParallel) gets cuda:1 too, from the first block's end
    on; cuda:2 and cuda:3 are never touched."""
    cuda = Touches()
    contexts = {0}  # the step's tensors, made before the measurement
    torch = SimpleNamespace(cuda=cuda, _C=SimpleNamespace(_cuda_hasPrimaryContext=lambda index: index in contexts))
    ticks = iter(range(0, 10**9, 10**6))
    backend = AllCudaBackend((0, 1, 2, 3), torch, clock_ns=lambda: next(ticks))
    backend.time_block(lambda: None, 2)
    with backend.track_memory() as probe:
        for _ in probe.calls():
            pass
    assert {index for name, index in cuda.log if name == "synchronize"} == {0}
    cuda.log.clear()
    backend.time_block(lambda: contexts.add(1), 1)  # the replica's first kernels open cuda:1's context
    assert [call for call in cuda.log if call[0] == "synchronize"] == [("synchronize", 0)] * 2 + [("synchronize", 1)]
    assert backend.name == "cuda"
