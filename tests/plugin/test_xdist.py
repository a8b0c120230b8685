"""pytest-xdist: one GPU per worker, every record gathered by the controller, and no shared device.

The GPUs are a stand-in: the inner conftest makes the plugin see two CUDA devices and
measure "on" them with the CPU backend, so that the controller's gathering, the baseline
and the gate are exercised for real in separate worker processes. The timing is exact (each
call returns its duration, ``tests/exact_timing.py``): two workers spinning on a busy machine's
two cores measured a planted 3x slowdown with a 95% CI of +-400%, inconclusive.
"""

from __future__ import annotations

import json

import pytest

from tests.exact_timing import INSTALL

pytest.importorskip("xdist")

TWO_GPUS = """
import dataclasses

import pytest_gpuperf.measuring as measuring
from pytest_gpuperf.measuring._backends import CpuBackend

_probe = measuring.probe_inventory


def two_gpus():
    return dataclasses.replace(_probe(), cuda_count=2, cuda_reason="")


def on_the_cpu(slot, torch_module=None):
    return CpuBackend(name=slot.id)


measuring.probe_inventory = two_gpus
measuring.backend_for = on_the_cpu
"""

STEPS = """
import os

import pytest

SLOW = float(os.environ.get("GPUPERF_TEST_SLOW", "1"))


@pytest.mark.parametrize("k", range(4))
def test_step(gpuperf, k):
    gpuperf.measure(lambda: 300e-6 * SLOW)  # its duration, for the exact timer of the gpus fixture
"""

FAST = ("--gpuperf-min-time=0.05", "--gpuperf-max-time=0.5", "--gpuperf-warmup-time=0.05", "--gpuperf-quiet-wait=0")


@pytest.fixture
def gpus(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(TWO_GPUS + INSTALL)
    pytester.makepyfile(test_steps=STEPS)
    return pytester


@pytest.mark.e2e  # a session of two measuring workers, end to end
def test_records_of_every_worker_reach_one_table_one_json_and_one_baseline(gpus: pytest.Pytester) -> None:
    out = gpus.path / "out.json"
    args = ("-n", "2", "--gpuperf-device=cuda", f"--gpuperf-json={out}", "--gpuperf-save=base", *FAST)
    result = gpus.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*gpuperf results*", "test_step[[]0[]]*cuda:*", "*wrote 4 records to*", "*gpuperf: saved 4 records to*"]
    )
    records = json.loads(out.read_text())["records"]
    assert len(records) == 4
    # Test ids keep the device asked for; each worker measured on its own GPU.
    assert {r["test"].split("[")[1][:6] for r in records} == {"cuda:0"}
    assert {r["device"] for r in records} == {"cuda:0", "cuda:1"}
    assert all(r["gate"].get("load") is None for r in records)  # the other worker is no background load
    runs = list((gpus.path / ".gpuperf" / "runs").glob("*.json"))
    assert len(runs) == 1, "one run for the session, not one per worker"
    baseline = json.loads(next((gpus.path / ".gpuperf" / "baselines").glob("base*")).read_text())
    assert sum(len(run["records"]) for run in baseline["runs"]) == 4


@pytest.mark.e2e  # two sessions of two measuring workers, end to end
def test_a_planted_slowdown_fails_the_gate_under_xdist(gpus: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    saved = gpus.runpytest_subprocess("-n", "2", "--gpuperf-device=cuda", "--gpuperf-save=base", *FAST)
    assert saved.ret == pytest.ExitCode.OK, saved.stdout.str()
    monkeypatch.setenv("GPUPERF_TEST_SLOW", "3")
    slow = gpus.runpytest_subprocess(
        "-n", "2", "--gpuperf-device=cuda", "--gpuperf-compare=base", "--gpuperf-confirm=0", *FAST
    )
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, slow.stdout.str()
    slow.stdout.fnmatch_lines(["*slower*"])
    slow.stdout.no_fnmatch_line("*missing*")


def test_workers_sharing_the_cpu_are_refused_with_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_steps=STEPS)
    result = pytester.runpytest_subprocess("-n", "2", "--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: gpuperf: -n 2 would run 2 workers measuring on cpu at once, disturbing each other's timings; "
            "run the measuring tests without -n, or give each worker a GPU of its own*"
        ]
    )


def test_a_measuring_test_in_a_worker_refuses_a_shared_device_when_the_session_did_not_ask(
    pytester: pytest.Pytester,
) -> None:
    """No --gpuperf-* option: -n stays free for tests that do not measure; those that do fail with the fix."""
    pytester.makepyfile(test_steps=STEPS, test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-n", "2", *FAST)
    result.assert_outcomes(passed=1, errors=4)  # at the fixture, before anything is measured
    result.stdout.fnmatch_lines(["*gpuperf: -n 2 would run 2 workers measuring on cpu at once*"])


def test_more_workers_than_gpus_are_refused(gpus: pytest.Pytester) -> None:
    result = gpus.runpytest_subprocess("-n", "3", "--gpuperf-device=cuda", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gpuperf: -n 3 needs 3 GPUs, one per worker, and this machine has 2*"])


BENCHMARK_STEPS = """
import pytest


@pytest.mark.parametrize("k", range(4))
def test_bench(benchmark, k):
    benchmark(sum, range(100))
"""


def test_benchmark_tests_in_workers_sharing_the_cpu_are_refused_as_gpuperf_tests_are(
    pytester: pytest.Pytester,
) -> None:
    """The `benchmark` fixture (``-p no:benchmark``) follows the `gpuperf` fixture's rule: two workers timing on one
    CPU at once fail at the fixture with the fix; on main each worker timed its tests and the run kept them."""
    pytester.makepyfile(test_bench=BENCHMARK_STEPS, test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:benchmark", *FAST)
    result.assert_outcomes(passed=1, errors=4)  # at the fixture, before anything is measured
    result.stdout.fnmatch_lines(["*gpuperf: -n 2 would run 2 workers measuring on cpu at once*"])
    assert "gpuperf results" not in result.stdout.str()
