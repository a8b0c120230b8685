"""pytest-benchmark suites run unchanged under ``-p no:benchmark``, timed by pytest-gpuperf (``_benchmark.py``)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gpuperf.measuring import DeviceError, DeviceSlot, Inventory, MeasureSettings, SettingError
from pytest_gpuperf.plugin._benchmark import MarkerSettings, Stats, read_markers, target_slot

FAST = (
    "-p",
    "no:benchmark",
    "--gpuperf-min-time=0.005",
    "--gpuperf-max-time=0.3",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-memory=off",
    "--gpuperf-quiet-wait=0",
)

#: TorchBench's test_bench.py, cut down: a class marker, ``device`` parametrized by the suite itself at class scope,
#: ``benchmark(task.invoke)`` and then ``extra_info``.
TORCHBENCH_SUITE = """
import time

import pytest
import torch


def pytest_generate_tests(metafunc):
    if metafunc.cls and metafunc.cls.__name__ == "TestBenchNetwork":
        metafunc.parametrize("model_path", ["tiny_mlp", "tiny_conv"], scope="class")
        metafunc.parametrize("device", ["cpu"], scope="class")


class ModelTask:
    def __init__(self, model_path, device):
        torch.manual_seed(0)
        if model_path == "tiny_mlp":
            self.model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
            self.example = torch.randn(16, 32, device=device)
        else:
            self.model = torch.nn.Conv2d(3, 4, 3)
            self.example = torch.randn(2, 3, 16, 16, device=device)
        self.model.to(device)

    def invoke(self):
        return self.model(self.example)


@pytest.mark.benchmark(
    warmup=True,
    warmup_iterations=3,
    disable_gc=False,
    timer=time.perf_counter,
    group="hub",
)
class TestBenchNetwork:
    def test_train(self, model_path, device, benchmark):
        task = ModelTask(model_path, device)
        out = benchmark(task.invoke)
        benchmark.extra_info["machine_info"] = "cpu box"
        benchmark.extra_info["batch"] = 16
        assert out.shape[0] in (16, 2)
        assert benchmark.stats.stats.median > 0
        assert benchmark.stats["median"] == benchmark.stats.stats.median
        assert benchmark.stats.stats.rounds == len(benchmark.stats.stats.data) >= 1
        assert benchmark.group == "hub" and benchmark.name.startswith("test_train")

    def test_eval(self, model_path, device, benchmark):
        task = ModelTask(model_path, device)
        with torch.no_grad():
            benchmark(task.invoke)
"""

#: A pybench-style suite: fixed budgets through ``benchmark.pedantic``.
PYBENCH_SUITE = """
import torch

CALLS = []


def run_sync(a, b):
    CALLS.append(1)
    return (a @ b).sum().item()


def test_matmul_sync(benchmark):
    a = torch.ones(32, 32)
    result = benchmark.pedantic(run_sync, args=(a, a), rounds=5)
    assert result == 32 * 32 * 32
    assert len(CALLS) == 5
    assert benchmark.stats.stats.rounds == 5 and benchmark.stats.iterations == 1
    benchmark.measurement.assert_latency(at_most="10 s")  # 5 samples: inconclusive, whatever their range


def test_setup_gives_the_arguments(benchmark):
    seen = []

    def setup():
        seen.append("setup")
        return (torch.full((8,), float(seen.count("setup"))),), {}

    def total(x):
        seen.append("call")
        return float(x.sum())

    result = benchmark.pedantic(total, setup=setup, rounds=7, warmup_rounds=2)
    assert seen == ["setup", "call"] * 9  # setup before every round, warmup included
    assert result == 8 * 9.0  # the last (9th) round's call


def test_iterations(benchmark):
    assert benchmark.pedantic(lambda x: x + 1, args=(1,), rounds=8, iterations=10) == 2
"""


@pytest.fixture
def torchbench(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bench=TORCHBENCH_SUITE)
    return pytester


@pytest.fixture
def pybench(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_pybench=PYBENCH_SUITE)
    return pytester


def records_of(pytester: pytest.Pytester, name: str = "run.json") -> dict[str, dict[str, Any]]:
    data = json.loads((pytester.path / name).read_text())
    return {record["test"]: record for record in data["records"]}


# ---------------------------------------------------------------- suites run unchanged


def test_a_torchbench_style_suite_runs_unchanged(torchbench: pytest.Pytester) -> None:
    result = torchbench.runpytest(*FAST, "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*- gpuperf: @pytest.mark.benchmark keywords ignored -*",
            "warmup_iterations=3 ignored: pytest-gpuperf warms up until block times stop falling*",
            "disable_gc=False ignored: pytest-gpuperf always pauses the garbage collector while it samples",
            "timer=perf_counter ignored: pytest-gpuperf times with device-synchronized clocks*",
            "*= gpuperf results =*",
            "test *device*median*95% CI*samples*",
            "TestBenchNetwork::test_train*cpu*+-*",
        ]
    )
    # Acknowledged once per session, not once per test.
    assert result.stdout.str().count("timer=perf_counter ignored") == 1
    assert "warmup=True" not in result.stdout.str()  # what we do anyway is not listed
    records = records_of(torchbench)
    assert len(records) == 4
    train = records["test_bench.py::TestBenchNetwork::test_train[tiny_mlp-cpu]"]
    assert train["device"] == "cpu"
    assert train["params"] == {"model_path": "tiny_mlp", "device": "cpu"}
    assert train["metadata"]["group"] == "hub"
    assert train["metadata"]["extra_info"] == {"machine_info": "cpu box", "batch": 16}
    assert len(train["measurement"]["samples"]) >= 6
    assert "extra_info" not in records["test_bench.py::TestBenchNetwork::test_eval[tiny_mlp-cpu]"]["metadata"]


def test_a_suite_that_parametrizes_its_own_device_is_not_doubled(torchbench: pytest.Pytester) -> None:
    torchbench.makepyfile(
        test_native="""
        def test_native(gpuperf, gpuperf_device):
            pass
        """
    )
    result = torchbench.runpytest("-p", "no:benchmark", "--collect-only", "-q", "--gpuperf-device=cpu")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "test_bench.py::TestBenchNetwork::test_train[tiny_mlp-cpu]",
            "test_bench.py::TestBenchNetwork::test_eval[tiny_mlp-cpu]",
            "test_bench.py::TestBenchNetwork::test_train[tiny_conv-cpu]",
            "test_bench.py::TestBenchNetwork::test_eval[tiny_conv-cpu]",
            "test_native.py::test_native[[]cpu[]]",
            "5 tests collected*",
        ]
    )


def test_a_pybench_style_suite_keeps_its_fixed_budget(pybench: pytest.Pytester) -> None:
    result = pybench.runpytest(*FAST, "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*= gpuperf results =*",
            # 5 rounds cannot give a 95% interval of the median (6 can): none is claimed, and "not converged"
            # would say no more.
            "test_matmul_sync *cpu* - (5 samples) *5x1 *warmup capped, latency inconclusive",
            "test_setup_gives_the_arguments *cpu* 7x1 *",
            "test_iterations *cpu* 8x10 *",
        ]
    )
    assert "keywords ignored" not in result.stdout.str()
    records = records_of(pybench)
    matmul = records["test_pybench.py::test_matmul_sync"]["measurement"]
    assert len(matmul["samples"]) == 5 and matmul["iterations"] == 1
    assert "fixed budget: 5 rounds x 1 iterations" in matmul["stop_reason"]
    assert "needs 6 rounds" in matmul["stop_reason"]
    assert [check["outcome"] for check in records["test_pybench.py::test_matmul_sync"]["checks"]] == ["inconclusive"]
    setup = records["test_pybench.py::test_setup_gives_the_arguments"]["measurement"]
    assert setup["warmup"]["blocks"] == 2 and len(setup["samples"]) == 7


EXACT_TIMING_CONFTEST = """
from pytest_gpuperf.measuring._backends import CpuBackend
from pytest_gpuperf.measuring import _load as load

SAVED = {}


def _time_block(self, fn, iterations):
    return sum(float(fn()) for _ in range(iterations))


def pytest_configure(config):
    SAVED.update(block=CpuBackend.time_block, snapshot=load.snapshot)
    CpuBackend.time_block = _time_block
    load.snapshot = lambda *args: None


def pytest_unconfigure(config):
    CpuBackend.time_block = SAVED["block"]
    load.snapshot = SAVED["snapshot"]
"""

STEPS_SUITE = """
import os
import random

import pytest

rng = random.Random(0)


def seconds():
    return float(os.environ["STEP_MS"]) / 1e3 * (1 + rng.uniform(-0.002, 0.002))


@pytest.mark.benchmark(group="steps")
def test_call(benchmark):
    benchmark(seconds)


def test_pedantic(benchmark):
    benchmark.pedantic(seconds, rounds=20)
"""


def test_save_and_compare_gate_benchmark_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call of a step says how long it took (the block timer adds them up), so verdicts are exact. Its times
    vary by 0.2%, so a noise floor of 0.5% is what one run a side needs to see the 5% tolerance (under the default
    2% floor, one run against one can see only >= 11.1%, and the A/A rerun would be inconclusive)."""
    pytester.makeconftest(EXACT_TIMING_CONFTEST)
    pytester.makepyfile(test_steps=STEPS_SUITE)
    monkeypatch.setenv("STEP_MS", "2")
    gate = (*FAST, "--gpuperf-confirm=0", "--gpuperf-noise-floor=0.5%", "-p", "no:cacheprovider")
    saved = pytester.runpytest(*gate, "--gpuperf-save=main")
    assert saved.ret == pytest.ExitCode.OK
    saved.stdout.fnmatch_lines(["gpuperf: baseline 'main' (*/.gpuperf/baselines/main.json) now holds 1 run*"])

    same = pytester.runpytest(*gate, "--gpuperf-compare=main")
    assert same.ret == pytest.ExitCode.OK
    same.stdout.fnmatch_lines(
        [
            "*= gpuperf gate =*",
            "gpuperf gate: passed (2 unchanged; failing on slower,unattributed + more work unless measured unchanged "
            "or faster)",
        ]
    )

    monkeypatch.setenv("STEP_MS", "3")
    slower = pytester.runpytest(*gate, "--gpuperf-compare=main")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    # the step times vary by 0.2%: a median may print as 2.001 ms, the ratio as 1.499
    slower.stdout.fnmatch_lines(
        ["test_call *cpu* 2* ms* 3* ms*1.[45]*SLOWER*", "test_pedantic *cpu* ms* ms*1.[45]*SLOWER*"]
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git: asv results are per commit")
def test_asv_results_are_written_for_benchmark_tests(torchbench: pytest.Pytester) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "suite"]):
        subprocess.run(["git", *command], cwd=torchbench.path, env=env, check=True)
    result = torchbench.runpytest(*FAST, "--gpuperf-asv=asv-results", "--gpuperf-asv-machine=box")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["gpuperf: wrote asv results of * benchmark(s) for commit *"])
    (path,) = (torchbench.path / "asv-results" / "box").glob("*-gpuperf-py*.json")
    assert "test_bench.TestBenchNetwork.test_train_tiny_mlp" in json.loads(path.read_text())["results"]


# ---------------------------------------------------------------- the marker, and misuse


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            "@pytest.mark.benchmark(rounds=3)",
            "*test_x: @pytest.mark.benchmark got an unknown keyword 'rounds'; pytest-benchmark's marker *accepts: "
            "max_time, min_rounds, precision, group, *",
        ),
        ("@pytest.mark.benchmark('hub')", "*test_x: @pytest.mark.benchmark takes keywords only, got positional*"),
        (
            "@pytest.mark.benchmark(max_time='fast')",
            "*test_x: @pytest.mark.benchmark(max_time='fast'): cannot parse 'fast' *(it sets pytest-gpuperf's max_time)"
            "",
        ),
    ],
)
def test_a_bad_marker_is_a_collection_error(pytester: pytest.Pytester, marker: str, message: str) -> None:
    pytester.makepyfile(
        f"""
        import pytest

        {marker}
        def test_x(benchmark):
            benchmark(lambda: 1)
        """
    )
    result = pytester.runpytest("-p", "no:benchmark")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting*", message])


def test_a_plain_tests_benchmark_marker_is_not_read(pytester: pytest.Pytester) -> None:
    """As pytest-benchmark, the marker is read only for a test that asks for ``benchmark``: a plain test with a marker
    our fixture would refuse runs as a plain test (and a plain test's collection pays nothing for the fixture)."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.benchmark(rounds=3)
        def test_plain():
            assert 1 + 1 == 2
        """
    )
    result = pytester.runpytest("-p", "no:benchmark")
    result.assert_outcomes(passed=1)
    assert "ERROR collecting" not in result.stdout.str()


def test_the_fixture_can_be_used_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_twice(benchmark):
            benchmark(lambda: 1)
            benchmark(lambda: 2)
        """
    )
    result = pytester.runpytest(*FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*FixtureAlreadyUsed: Fixture can only be used once. Previously it was used in*"])


def test_the_marker_maps_onto_our_settings() -> None:
    marks = MarkerSettings(changes={"max_time": 2, "min_rounds": 7, "precision": 0.05})
    measure = marks.apply(MeasureSettings())
    assert (measure.max_time, measure.min_samples, measure.target) == (2.0, 7, 0.05)
    # A setting the test's @pytest.mark.gpuperf sets wins over the benchmark marker's.
    assert marks.apply(MeasureSettings(), keep=frozenset({"min_samples"})).min_samples == 10
    with pytest.raises(SettingError, match=r"min_rounds=0.*it sets pytest-gpuperf's min_samples"):
        MarkerSettings(changes={"min_rounds": 0}).apply(MeasureSettings())


def test_honoured_values_are_not_listed_as_ignored() -> None:
    node = SimpleNamespace(
        iter_markers=lambda name: [pytest.mark.benchmark(disable_gc=True, warmup=True, confidence=0.99).mark]
    )
    marks = read_markers(node)  # type: ignore[arg-type]
    assert [keyword for keyword, _, _ in marks.ignored] == ["confidence"]


# ---------------------------------------------------------------- with pytest-benchmark active


def test_pytest_benchmark_keeps_its_own_fixture(torchbench: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # pytest-benchmark turns itself off in an xdist worker
    result = torchbench.runpytest_subprocess("--benchmark-max-time=0.05", "--benchmark-min-rounds=6")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*benchmark 'hub': 4 tests*"])
    out = result.stdout.str()
    assert "gpuperf" not in out.replace("plugins: ", "").split("collected")[1]  # nothing of ours after collection


# ---------------------------------------------------------------- devices and statistics


def test_the_device_recorded_follows_the_suite_and_the_machine() -> None:
    def item(**params: Any) -> Any:
        return SimpleNamespace(callspec=SimpleNamespace(params=params))

    gpus = Inventory(cuda_count=2, cuda_reason="", mps_available=False, mps_reason="no")
    none = Inventory(cuda_count=0, cuda_reason="no CUDA", mps_available=False, mps_reason="no")
    assert target_slot(item(), gpus).id == "cuda"  # every visible CUDA device
    assert target_slot(item(device="cuda:1"), gpus).id == "cuda"
    assert target_slot(item(device="cpu"), gpus).id == "cpu"  # the suite's own device says cpu
    assert target_slot(item(), none).id == "cpu"
    assert target_slot(SimpleNamespace(), none).id == "cpu"  # type: ignore[arg-type]
    # In a process bound to one GPU (an xdist worker, a torchrun rank): that GPU, and never another one.
    gw1 = DeviceSlot("cuda:1", "cuda", 1, True)
    assert target_slot(item(), gpus, gw1) == gw1
    assert target_slot(item(device="cuda"), gpus, gw1) == gw1
    assert target_slot(item(device="cpu"), gpus, gw1).id == "cpu"
    with pytest.raises(DeviceError, match=r"device parameter is cuda:0, and this process measures on cuda:1"):
        target_slot(item(device="cuda:0"), gpus, gw1)


def test_stats_read_as_pytest_benchmark_computes_them() -> None:
    pytest_benchmark_stats = pytest.importorskip("pytest_benchmark.stats")
    data = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.5, 6.0]
    theirs = pytest_benchmark_stats.Stats()
    for value in data:
        theirs.update(value)
    ours = Stats(data)
    for name in ("min", "max", "mean", "stddev", "rounds", "median", "ops", "total"):
        assert getattr(ours, name) == pytest.approx(getattr(theirs, name)), name
    assert ours.median == statistics.median(data)
    assert set(ours.as_dict()) == set(theirs.as_dict())
