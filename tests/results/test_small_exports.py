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
from tests.synthetic import make_measurement, make_record, make_run

TEST = "test_x.py::test_step[cpu]"


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


def test_params_are_pytest_benchmarks_json_values_and_null_without_parameters(tmp_path: Path) -> None:
    """Issue 24: {"size": "64"} for an int parameter. Issue 35, item 9: a test without parameters had
    {"device": "cpu"}, where pytest-benchmark writes null; the device is a parameter only where the test has one of
    that name (ours is in ``extra_info["gpuperf"]``)."""
    run = make_run(
        make_record(2e-3, test="test_x.py::test_step[cpu]"),
        dataclasses.replace(make_record(1e-3, test="test_x.py::test_step[cuda]"), device="cuda:0"),
        make_record(3e-3, test="test_x.py::test_mm[cpu-64-True-bf16]", params={"n": "64", "t": "True", "dt": "bf16"}),
        make_record(3e-3, test="test_x.py::test_on[cpu]", params={"device": "cpu"}),
    )
    data = json.loads(export(run, "pytest-benchmark"))
    params = [b["params"] for b in data["benchmarks"]]
    assert params == [None, None, {"n": 64, "t": True, "dt": "bf16"}, {"device": "cpu"}]
    assert [b["param"] for b in data["benchmarks"]] == ["cpu", "cuda", "cpu-64-True-bf16", "cpu"]
    assert [b["extra_info"]["gpuperf"]["device"] for b in data["benchmarks"]] == ["cpu", "cuda:0", "cpu", "cpu"]
    path = tmp_path / "0001_ours.json"
    path.write_text(json.dumps(data))
    done = _compare(path, "--columns=median")
    assert done.returncode == 0, done.stderr
    assert "test_mm[cpu-64-True-bf16]" in done.stdout


PB_TESTS = """
import pytest


@pytest.mark.parametrize("kind", ["a"])
@pytest.mark.parametrize("n", [100])
def test_sum(benchmark, n, kind):
    benchmark(sum, range(n))


def test_plain(benchmark):
    benchmark(sum, range(10))


def test_extra(benchmark):
    benchmark.extra_info["batch"] = 16
    benchmark(sum, range(10))
"""


def test_our_params_and_extra_info_are_what_pytest_benchmark_writes_for_the_same_tests(
    pytester: pytest.Pytester,
) -> None:
    """pytest-benchmark's own ``params`` and ``extra_info`` beside ours of the same tests: a parametrized test, one
    without parameters (null) and one that set ``extra_info`` (only what it set, and ours under ``"gpuperf"``)."""
    pytester.makepyfile(test_pb=PB_TESTS)
    result = pytester.runpytest("-p", "no:randomly", "--benchmark-json=pb.json", "--benchmark-max-time=0.02")
    assert result.ret == pytest.ExitCode.OK
    theirs = json.loads((pytester.path / "pb.json").read_text())["benchmarks"]
    assert [b["params"] for b in theirs] == [{"n": 100, "kind": "a"}, None, None]
    records = [
        make_record(1e-3, test=b["fullname"], params={k: str(v) for k, v in (b["params"] or {}).items()})
        for b in theirs
    ]
    records[2] = dataclasses.replace(records[2], metadata={"extra_info": theirs[2]["extra_info"]})
    ours = json.loads(export(make_run(*records), "pytest-benchmark"))["benchmarks"]
    assert [b["params"] for b in ours] == [b["params"] for b in theirs]
    assert [b["param"] for b in ours] == [b["param"] for b in theirs]
    assert [{k: v for k, v in b["extra_info"].items() if k != "gpuperf"} for b in ours] == [
        b["extra_info"] for b in theirs
    ]
    assert [b["extra_info"] for b in theirs] == [{}, {}, {"batch": 16}]


# ---------------------------------------------------------------- f: float noise, and pytest-benchmark's machine info

MACHINE_FIELDS = (
    "node",
    "processor",
    "machine",
    "python_compiler",
    "python_implementation",
    "python_version",
    "release",
    "system",
)
SAME_TEST = """
def test_sum(benchmark):
    benchmark(sum, range(100))
"""


def test_our_export_carries_pytest_benchmarks_machine_info_of_this_machine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real pytest-benchmark file and our export, both from this machine: the machine info pytest-benchmark writes
    is the same in both, and ``pytest-gpuperf compare`` of the two shows no OS difference. On main the export's
    release and python_compiler were empty, and the compare showed ``OS Linux-<release> -> Linux-<release>-x86_64-
    with-glibc<version>``."""
    from pytest_gpuperf.cli import main

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makepyfile(test_pb=SAME_TEST)
    theirs_run = pytester.runpytest("-p", "no:randomly", "--benchmark-json=pb.json", "--benchmark-max-time=0.02")
    assert theirs_run.ret == pytest.ExitCode.OK
    fast = ("--gpuperf-min-time=0.01", "--gpuperf-max-time=0.05")
    ours_run = pytester.runpytest("-p", "no:randomly", "-p", "no:benchmark", "--gpuperf-json=ours.json", *fast)
    assert ours_run.ret == pytest.ExitCode.OK
    capsys.readouterr()
    monkeypatch.chdir(pytester.path)
    assert main(["export", "--format", "pytest-benchmark", "ours.json", "-o", "ours-pb.json"]) == 0
    theirs = json.loads((pytester.path / "pb.json").read_text())["machine_info"]
    ours = json.loads((pytester.path / "ours-pb.json").read_text())["machine_info"]
    assert {k: ours[k] for k in MACHINE_FIELDS} == {k: theirs[k] for k in MACHINE_FIELDS}
    assert ours["cpu"]["count"] == theirs["cpu"]["count"]
    assert ours["cpu"]["arch_string_raw"] == theirs["cpu"]["arch_string_raw"]
    capsys.readouterr()
    for base, head in [("pb.json", "ours.json"), ("pb.json", "ours-pb.json"), ("ours-pb.json", "pb.json")]:
        main(["compare", base, head, "--allow-mismatch=torch_minor,cuda,gpus"])
        out = capsys.readouterr()
        assert " OS " not in out.out + out.err and "OS:" not in out.out + out.err, (base, head, out)


def _numbers(value: object, skip: frozenset[str] = frozenset({"data", "gpuperf"})) -> list[float]:
    """Every float in an export's JSON value, but the samples and our own record."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [x for k, v in value.items() if k not in skip for x in _numbers(v, skip)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v, skip)]
    return []


@pytest.mark.parametrize("fmt", ["pytest-benchmark", "github-action-benchmark", "bencher"])
def test_exported_figures_keep_six_significant_digits_not_float_noise(fmt: str) -> None:
    """A median of 344074 ns over 13 calls: main exported 26467.230769230766 ns, float noise in its last digits."""
    per_call = 344074e-9 / 13
    samples = [per_call * (1 + (i % 5 - 2) * 1e-3) for i in range(41)]
    record = dataclasses.replace(make_record(1e-3), measurement=make_measurement(TEST, samples, iterations=13))
    data = json.loads(export(make_run(record), fmt))
    numbers = _numbers(data)
    assert numbers and all(float(f"{x:.6g}") == x for x in numbers), [x for x in numbers if float(f"{x:.6g}") != x]
    median_ns = {
        "pytest-benchmark": lambda: data["benchmarks"][0]["stats"]["median"] * 1e9,
        "github-action-benchmark": lambda: data[0]["value"],
        "bencher": lambda: data[TEST]["latency"]["value"],
    }[fmt]()
    assert median_ns == pytest.approx(26467.2, abs=1e-6)
    if fmt == "pytest-benchmark":  # the samples as measured: the gate reads them back
        assert data["benchmarks"][0]["stats"]["data"] == samples
