"""Issue 24 item 6, the small things users hit in the exports: a benchmark named twice, pytest-benchmark's
``params``, float noise, and pytest-benchmark's machine info, checked with the real pytest-benchmark."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.results import ResultsError
from pytest_gpuperf.results._export import export
from tests.synthetic import make_record, make_run


@pytest.mark.parametrize("fmt", ["pytest-benchmark", "github-action-benchmark", "bencher"])
def test_a_run_naming_a_benchmark_twice_is_refused_by_every_exporter(fmt: str) -> None:
    """On main, github-action-benchmark's list named it twice and Bencher's kept the second silently."""
    run = make_run(make_record(2e-3), make_record(3e-3))
    with pytest.raises(ResultsError, match=r"holds test_x.py::test_step\[cpu\] more than once"):
        export(run, fmt)


# ---------------------------------------------------------------- d: params as pytest-benchmark writes them


def _compare(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``pytest-benchmark compare`` on ``path``."""
    command = [sys.executable, "-m", "pytest_benchmark", "compare", str(path), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=path.parent)


def test_params_are_pytest_benchmarks_json_values_and_group_by_device(tmp_path: Path) -> None:
    """On main, ``params`` was null for a device-parametrized test (pytest-benchmark compare --group-by=param:device
    failed with a TypeError, exit 1) and {"size": "64"} for an int parameter."""
    run = make_run(
        make_record(2e-3, test="test_x.py::test_step[cpu]"),
        dataclasses.replace(make_record(1e-3, test="test_x.py::test_step[cuda]"), device="cuda:0"),
        make_record(3e-3, test="test_x.py::test_mm[cpu-64-True-bf16]", params={"n": "64", "t": "True", "dt": "bf16"}),
    )
    data = json.loads(export(run, "pytest-benchmark"))
    assert [b["params"] for b in data["benchmarks"]] == [
        {"device": "cpu"},
        {"device": "cuda:0"},
        {"device": "cpu", "n": 64, "t": True, "dt": "bf16"},
    ]
    assert [b["param"] for b in data["benchmarks"]] == ["cpu", "cuda", "cpu-64-True-bf16"]
    path = tmp_path / "0001_ours.json"
    path.write_text(json.dumps(data))
    done = _compare(path, "--group-by=param:device", "--columns=median")
    assert done.returncode == 0, done.stderr
    assert "benchmark 'device=cpu': 2 tests" in done.stdout and "benchmark 'device=cuda:0': 1 tests" in done.stdout


def test_our_params_are_what_pytest_benchmark_writes_for_the_same_test(pytester: pytest.Pytester) -> None:
    """A test parametrized by an int and a string: pytest-benchmark's own ``params`` beside ours of the same test."""
    pytester.makepyfile(
        test_pb="""
        import pytest

        @pytest.mark.parametrize("kind", ["a"])
        @pytest.mark.parametrize("n", [100])
        def test_sum(benchmark, n, kind):
            benchmark(sum, range(n))
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "--benchmark-json=pb.json", "--benchmark-max-time=0.02")
    assert result.ret == pytest.ExitCode.OK
    (theirs,) = json.loads((pytester.path / "pb.json").read_text())["benchmarks"]
    record = make_record(1e-3, test=theirs["fullname"], params={k: str(v) for k, v in theirs["params"].items()})
    (ours,) = json.loads(export(make_run(record), "pytest-benchmark"))["benchmarks"]
    assert ours["params"] == {"device": "cpu", **theirs["params"]} and ours["param"] == theirs["param"]
