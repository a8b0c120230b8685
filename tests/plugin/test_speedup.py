"""The CPU-vs-GPU headline compares two devices at their best (issue 21, item 9): with --gpuperf-device=cpu,cuda the
CPU's records keep their one regression-stable thread, and the speedup table compares the CPU at all the cores of
its affinity, measured again for the table, naming each device with its configuration.

No GPU here: the inner conftest makes the plugin see one CUDA device and measure "on" it with the CPU backend
(as tests/plugin/test_xdist.py does), gives the process 4 cores of affinity, and times exactly: each call returns
its duration, which on the CPU is 4 ms of work spread over torch's threads."""

from __future__ import annotations

import re

import pytest

CONFTEST = """
import dataclasses
import os

import torch

import pytest_gpuperf.measuring as measuring
from pytest_gpuperf.measuring._backends import CpuBackend

SAVED = {}


def one_gpu():
    return dataclasses.replace(SAVED["probe"](), cuda_count=1, cuda_reason="")


def on_the_cpu(slot, torch_module=None):
    return CpuBackend(name=slot.id)


def exact_time_block(self, fn, iterations):
    return sum(float(fn()) for _ in range(iterations))


def pytest_configure(config):
    SAVED.update(
        probe=measuring.probe_inventory,
        backend_for=measuring.backend_for,
        block=CpuBackend.time_block,
        affinity=os.sched_getaffinity,
    )
    measuring.probe_inventory = one_gpu
    measuring.backend_for = on_the_cpu
    CpuBackend.time_block = exact_time_block
    os.sched_getaffinity = lambda pid: {0, 1, 2, 3}


def pytest_unconfigure(config):
    measuring.probe_inventory = SAVED["probe"]
    measuring.backend_for = SAVED["backend_for"]
    CpuBackend.time_block = SAVED["block"]
    os.sched_getaffinity = SAVED["affinity"]
"""

TESTS = """
import torch

from pytest_gpuperf import Step


def step_seconds(device):
    # 4 ms of work that every thread shares on the CPU; 0.1 ms on the "GPU".
    return 4e-3 / torch.get_num_threads() if device.type == "cpu" else 1e-4


def test_step(gpuperf):
    gpuperf.measure(lambda: step_seconds(gpuperf.device), samples=64)


def test_paired(gpuperf):
    step = Step(lambda: step_seconds(gpuperf.device), work={"samples": 64})
    gpuperf.paired({"a": step, "b": step}, record=["a"])
"""

FAST = ("--gpuperf-min-time=0.01", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.05", "--gpuperf-memory=off")


def test_the_cpu_is_compared_at_all_its_cores_and_each_device_named_with_its_configuration(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_steps=TESTS)
    args = ("--gpuperf-device=cpu,cuda", "--gpuperf-json=run.json", "--no-header", "-p", "no:randomly")
    result = pytester.runpytest(*args, *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*= gpuperf results =*",
            # The records keep the CPU's one thread: 4 ms a call.
            "test_step *cpu *4 ms*",
            "test_step *cuda:0 *100 us*",
            "*- gpuperf speedup of each device against the first -*",
            # Against the CPU at its 4 cores (1 ms a call): 10x, not the 40x of one core.
            "test_step *cuda:0 * vs cpu * (4 of 4 cores) *10x*samples/s*",
            "test_paired::a *cuda:0 * vs cpu * (4 of 4 cores) *10x*samples/s*",
            "speedup: each device's median step time (or throughput) on data already resident in its own memory*",
            "speedup: the CPU at 4 threads (all the cores of its affinity), measured again for this table "
            "(2 measurements, * s); its records, the results table and the gate keep 1 thread, the stable default",
        ]
    )
    # no speedup row reads 40x (a samples column may hold "4040x1": only the speedup cells are looked at)
    rows = [line for line in result.stdout.lines if " vs cpu " in line]
    assert rows and not any(re.search(r"\b40x", line) for line in rows)
    records = __import__("json").loads((pytester.path / "run.json").read_text())["records"]
    assert {r["measurement"]["threads"] for r in records if r["device"] == "cpu"} == {1}


def test_a_cpu_only_session_measures_nothing_again(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_steps=TESTS)
    result = pytester.runpytest("--gpuperf-device=cpu", *FAST, "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK
    assert "speedup" not in result.stdout.str()
