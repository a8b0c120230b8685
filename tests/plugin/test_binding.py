"""Every process of a run bound to its own GPU the same way: the ``benchmark`` fixture as ``gpuperf``, an explicit
``cuda:N`` honoured or refused (never moved), tests that use several GPUs kept out of xdist workers, and
confirmation runs measuring on the record's device.

No GPU here: the inner runs' conftest makes ``torch.cuda`` a stand-in with two devices that writes, per process
(xdist worker or torchrun rank), every device it synchronizes or makes current to a log file, and (for a rank) a
``torch.distributed`` stand-in that logs the current device when the process group starts.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.exact_timing import INSTALL

from .test_xdist import TWO_GPUS

pytest.importorskip("xdist")

#: ``torch.cuda`` with two devices, logging what each process touches to $GPUPERF_TEST_CUDA_LOG/<process>.log.
FAKE_CUDA = """
import os
from pathlib import Path
from types import SimpleNamespace

import torch

_LOG = Path(os.environ["GPUPERF_TEST_CUDA_LOG"])
_current = [0]


def _index(device):
    if device is None:
        return _current[0]
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return _current[0] if device.index is None else device.index


def _log(what, device):
    who = os.environ.get("PYTEST_XDIST_WORKER") or "rank" + os.environ.get("RANK", "-")
    with open(_LOG / (who + ".log"), "a") as f:
        f.write(f"{what} {_index(device)}\\n")


def _synchronize(device=None):
    _log("synchronize", device)


def _set_device(device):
    _current[0] = _index(device)
    _log("set_device", device)


torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 2
torch.cuda.synchronize = _synchronize
torch.cuda.set_device = _set_device
torch.cuda.current_device = lambda: _current[0]
torch.cuda.get_device_name = lambda device=None: "Stand-in GPU"
torch.cuda.get_device_properties = lambda device=None: SimpleNamespace(
    name="Stand-in GPU", major=9, minor=0, total_memory=80 << 30, multi_processor_count=132, uuid=None
)
"""

#: ``torch.distributed`` for one rank alone: every collective returns at once; the coordinator's tensors stay on the
#: CPU (a CPU build of torch has no cuda:1), and the device it was given is logged.
FAKE_DIST = """
import torch.distributed as dist

from pytest_gpuperf.measuring import TorchDistCoordinator

_started = []


def _init_process_group(backend, *args, **kwargs):
    _log(f"init_process_group {backend} with current device", None)
    _started.append(backend)


def _all_gather_object(out, obj, group=None):
    out[:] = [obj] * len(out)


dist.is_initialized = lambda: bool(_started)
dist.init_process_group = _init_process_group
dist.destroy_process_group = lambda *args, **kwargs: _started.clear()
dist.all_gather_object = _all_gather_object
dist.all_reduce = lambda tensor, op=None, group=None: None
dist.barrier = lambda group=None: None

_coordinator_init = TorchDistCoordinator.__init__


def _coordinator(self, device="cpu", group=None, dist=None):
    _log("coordinator on", device)
    _coordinator_init(self, "cpu", group, dist)


TorchDistCoordinator.__init__ = _coordinator
"""

#: pytest-benchmark tests: a fixed budget (six rounds of one call), so that no timing decides anything.
BENCHMARKS = """
import pytest


@pytest.mark.parametrize("k", range(4))
def test_bench(benchmark, k):
    benchmark.pedantic(lambda: sum(range(100)), rounds=6)
"""

#: No work profile: torch.profiler would start CUDA activity on the stand-in's faked CUDA and read the faked
#: process group (it crashes the process).
QUIET = (
    "-p",
    "no:benchmark",
    "-p",
    "no:randomly",
    "--gpuperf-quiet-wait=0",
    "--gpuperf-memory=off",
    "--gpuperf-profile=off",
)


def logs(path: Path) -> dict[str, list[str]]:
    """Each process's log: its lines, in order."""
    return {log.stem: log.read_text().split("\n")[:-1] for log in sorted(path.glob("*.log"))}


def touched(lines: list[str], what: str) -> set[int]:
    return {int(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(what)}


@pytest.fixture
def fake_cuda(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = pytester.path / "cuda-log"
    log.mkdir()
    monkeypatch.setenv("GPUPERF_TEST_CUDA_LOG", str(log))
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return log


# ---------------------------------------------------------------- the benchmark fixture, bound like gpuperf


@pytest.mark.e2e  # a session of two measuring workers, end to end
def test_each_xdist_worker_times_its_benchmark_tests_on_its_own_gpu_and_syncs_no_other(
    pytester: pytest.Pytester, fake_cuda: Path
) -> None:
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(test_bench=BENCHMARKS)
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess("-n", "2", f"--gpuperf-json={out}", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    records = json.loads(out.read_text())["records"]
    assert len(records) == 4
    seen = logs(fake_cuda)
    for worker in ("gw0", "gw1"):
        index = int(worker[2:])
        assert touched(seen[worker], "synchronize") == {index}, (worker, seen[worker])
        assert touched(seen[worker], "set_device") == {index}, "the step's own .cuda() lands on the worker's GPU"
    assert {r["device"] for r in records} <= {"cuda:0", "cuda:1"}
    assert len({r["device"] for r in records}) == 2, records


def test_a_plain_run_times_benchmark_tests_over_every_visible_gpu(pytester: pytest.Pytester, fake_cuda: Path) -> None:
    """One process has the machine: a step that names no device may use any GPU, so every one is synchronized."""
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(test_bench=BENCHMARKS)
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(f"--gpuperf-json={out}", "-k", "test_bench[0]", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert {r["device"] for r in json.loads(out.read_text())["records"]} == {"cuda"}
    assert touched(logs(fake_cuda)["rank-"], "synchronize") == {0, 1}


def as_rank(monkeypatch: pytest.MonkeyPatch, rank: int, local_rank: int, local_world: int, world: int = 2) -> None:
    """This test's inner pytest runs as one process of a torchrun world (its environment; no torchrun)."""
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))
    monkeypatch.setenv("WORLD_SIZE", str(world))


def test_a_torchrun_rank_times_benchmark_tests_on_its_gpu_and_sets_it_before_nccl(
    pytester: pytest.Pytester, fake_cuda: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(FAKE_CUDA + FAKE_DIST)
    pytester.makepyfile(test_bench="def test_bench(benchmark):\n    benchmark(lambda: sum(range(100)))\n")
    as_rank(monkeypatch, rank=1, local_rank=1, local_world=2)
    result = pytester.runpytest_subprocess("--gpuperf-max-time=0.2", "--gpuperf-warmup-time=0.05", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    lines = logs(fake_cuda)["rank1"]
    assert touched(lines, "synchronize") == {1}, lines
    assert "init_process_group nccl with current device 1" in lines, lines
    assert lines.index("set_device 1") < lines.index("init_process_group nccl with current device 1")
    assert touched(lines, "coordinator on") == {1}  # NCCL's tensors on the rank's GPU


# ---------------------------------------------------------------- an explicit cuda:N


STEPS = """
import os
from pathlib import Path

import pytest


def test_step(gpuperf):
    gpuperf.measure(lambda: 300e-6)
    name = os.environ.get("PYTEST_XDIST_WORKER", "main") + os.environ.get("GPUPERF_CONFIRMATION_RUN", "")
    with open(Path(os.environ["GPUPERF_TEST_CUDA_LOG"]) / "where.txt", "a") as f:
        f.write(f"{name} {gpuperf.slot.id}\\n")
"""

FAST = ("--gpuperf-min-time=0.05", "--gpuperf-max-time=0.5", "--gpuperf-warmup-time=0.05", "--gpuperf-quiet-wait=0")


@pytest.fixture
def two_gpus(pytester: pytest.Pytester, fake_cuda: Path) -> pytest.Pytester:
    pytester.makeconftest(FAKE_CUDA + TWO_GPUS + INSTALL)
    pytester.makepyfile(test_steps=STEPS)
    return pytester


def where(log: Path) -> list[str]:
    return (log / "where.txt").read_text().split("\n")[:-1]


def test_an_explicit_gpu_is_refused_under_xdist_with_the_reason(two_gpus: pytest.Pytester) -> None:
    result = two_gpus.runpytest_subprocess("-n", "2", "--gpuperf-device=cuda:1", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(
        [
            "ERROR: gpuperf: --gpuperf-device=cuda:1 names one GPU, and -n 2 runs 2 workers: they would all measure "
            "on cuda:1 at once (no worker is moved off the GPU named); name the kind alone, --gpuperf-device=cuda "
            "(worker gwN then measures on cuda:N), or run without -n*"
        ]
    )


def test_an_explicit_gpu_is_honoured_by_a_single_worker(two_gpus: pytest.Pytester, fake_cuda: Path) -> None:
    result = two_gpus.runpytest_subprocess("-n", "1", "--gpuperf-device=cuda:1", *FAST)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert where(fake_cuda) == ["gw0 cuda:1"]


def test_an_explicit_gpu_is_refused_by_torchrun_ranks_that_share_it(
    two_gpus: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_rank(monkeypatch, rank=1, local_rank=1, local_world=2)
    result = two_gpus.runpytest_subprocess("--gpuperf-device=cuda:0", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(
        [
            "ERROR: gpuperf: --gpuperf-device=cuda:0 names one GPU, and torchrun started 2 local ranks: they would "
            "all measure on cuda:0 at once (no rank is moved off the GPU named); name the kind alone, "
            "--gpuperf-device=cuda (the rank with LOCAL_RANK=N then measures on cuda:N)*"
        ]
    )


def test_several_gpus_named_are_refused_by_torchrun_ranks(
    two_gpus: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank would measure its own GPU once per device named (the ids saying cuda:0 and cuda:1)."""
    as_rank(monkeypatch, rank=0, local_rank=0, local_world=2)
    result = two_gpus.runpytest_subprocess("--gpuperf-device=all", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(
        ["ERROR: gpuperf: --gpuperf-device names 2 GPUs (cuda:0, cuda:1), and each of torchrun's 2 local ranks*"]
    )


def test_an_explicit_gpu_is_honoured_by_a_torchrun_rank_alone_on_its_node(
    two_gpus: pytest.Pytester, fake_cuda: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two nodes of one rank each: LOCAL_RANK=0 measures where it was told, not on cuda:0."""
    as_rank(monkeypatch, rank=1, local_rank=0, local_world=1)
    two_gpus.makepyfile(
        test_steps="""
import os
from pathlib import Path


def test_step(gpuperf):
    with open(Path(os.environ["GPUPERF_TEST_CUDA_LOG"]) / "where.txt", "a") as f:
        f.write(f"main {gpuperf.slot.id}\\n")
"""
    )
    result = two_gpus.runpytest_subprocess("--gpuperf-device=cuda:1", *FAST)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert where(fake_cuda) == ["main cuda:1"]


# ---------------------------------------------------------------- tests that use several GPUs


MULTI_GPU = """
import pytest


@pytest.mark.gpuperf_requires("cuda", count=2)
def test_dataparallel(gpuperf_device):
    pass


def test_one(gpuperf_device):
    pass
"""


def test_a_multi_gpu_test_is_skipped_in_an_xdist_worker_with_the_reason(two_gpus: pytest.Pytester) -> None:
    two_gpus.makepyfile(test_steps=MULTI_GPU)
    result = two_gpus.runpytest_subprocess("-n", "2", "--gpuperf-device=cuda", "-rs", *FAST)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*gpuperf: uses 2 GPUs at once, and xdist worker gw? measures on one (cuda:?) while the other workers "
            "measure on theirs; run it without -n*"
        ]
    )


def test_a_benchmark_test_that_uses_several_gpus_is_skipped_in_an_xdist_worker(
    pytester: pytest.Pytester, fake_cuda: Path
) -> None:
    pytester.makeconftest(FAKE_CUDA)
    marked = BENCHMARKS.replace("def test_bench", '@pytest.mark.gpuperf_requires("cuda", count=2)\ndef test_bench')
    pytester.makepyfile(test_bench=marked)
    result = pytester.runpytest_subprocess("-n", "2", "-rs", *QUIET)
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["*gpuperf: uses 2 GPUs at once, and xdist worker gw? measures on one (cuda:?)*"])


def test_a_multi_gpu_test_runs_in_a_single_worker(two_gpus: pytest.Pytester) -> None:
    two_gpus.makepyfile(test_steps=MULTI_GPU)
    result = two_gpus.runpytest_subprocess("-n", "1", "--gpuperf-device=cuda", *FAST)
    result.assert_outcomes(passed=2)


# ---------------------------------------------------------------- confirmation runs


CONFIRMED = """
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("k", range(2))
def test_step(gpuperf, k):
    gpuperf.measure(lambda: 300e-6 * float(os.environ.get("GPUPERF_TEST_SLOW", "1")))
    run = "confirmation" if os.environ.get("GPUPERF_CONFIRMATION_RUN") else os.environ["PYTEST_XDIST_WORKER"]
    with open(Path(os.environ["GPUPERF_TEST_CUDA_LOG"]) / "where.txt", "a") as f:
        f.write(f"{run} {k} {gpuperf.slot.id}\\n")
"""


@pytest.mark.e2e  # two sessions of two measuring workers and a confirmation process per GPU, end to end
def test_a_confirmation_run_measures_on_the_device_of_the_record(
    two_gpus: pytest.Pytester, fake_cuda: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests measured by workers gw0 and gw1 look slower: each one's confirmation run, a fresh pytest without -n,
    measures it on the GPU its record names (the test ids keep cuda:0)."""
    two_gpus.makepyfile(test_steps=CONFIRMED)
    base = two_gpus.runpytest_subprocess("-n", "2", "--gpuperf-device=cuda", "--gpuperf-save=base", *FAST)
    assert base.ret == pytest.ExitCode.OK, base.stdout.str()
    (fake_cuda / "where.txt").unlink()
    monkeypatch.setenv("GPUPERF_TEST_SLOW", "3")
    slow = two_gpus.runpytest_subprocess(
        "-n", "2", "--gpuperf-device=cuda", "--gpuperf-compare=base", "--gpuperf-confirm=1", *FAST
    )
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, slow.stdout.str()
    runs = [line.split() for line in where(fake_cuda)]
    measured = {k: device for run, k, device in runs if run != "confirmation"}
    confirmed = {k: device for run, k, device in runs if run == "confirmation"}
    assert sorted(measured.values()) == ["cuda:0", "cuda:1"], runs  # one test on each worker's GPU
    assert confirmed == measured, runs


def test_the_confirmation_command_names_the_device_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf.gate import _confirm

    calls: list[dict[str, str]] = []

    def fake_run(cmd: list[str], *, env: dict[str, str], **kwargs: object) -> object:
        calls.append({"nodeids": " ".join(a for a in cmd if a.startswith("t::")), "bind": env.get(BIND, "")})
        Path(next(a for a in cmd if a.startswith("--gpuperf-json=")).split("=", 1)[1]).write_text("{}")
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    from pytest_gpuperf.measuring import BIND_ENV as BIND

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(_confirm, "load_run", lambda path: type("Run", (), {"records": ()})())
    devices = {"t::a[cuda:0]": "cuda:1", "t::b[cuda:0]": "cuda:0", "t::c[cuda:0]": "cuda:1", "t::d[cpu]": "cpu"}
    _confirm.run(Path.cwd(), [], [], list(devices), 0.0, devices=devices)
    assert sorted(calls, key=lambda c: c["nodeids"]) == [
        {"nodeids": "t::a[cuda:0] t::c[cuda:0]", "bind": "cuda:1"},
        {"nodeids": "t::b[cuda:0]", "bind": "cuda:0"},
        {"nodeids": "t::d[cpu]", "bind": ""},
    ]
    assert os.environ.get(BIND) is None
