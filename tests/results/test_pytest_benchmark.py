"""pytest-benchmark's JSON both ways, and the exporters: pure converters, pytest-benchmark's own reader, the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.stats import Stats

from pytest_gpuperf.cli import main
from pytest_gpuperf.results import save_run
from pytest_gpuperf.results._export import bencher, github_action_benchmark
from pytest_gpuperf.results._files import load_runs
from pytest_gpuperf.results._pytest_benchmark import pytest_benchmark_stats, to_pytest_benchmark
from tests.synthetic import make_measurement, make_record, make_run, samples_around

TEST = "test_x.py::test_step[cpu]"


def foreign(run_json: dict[str, Any]) -> dict[str, Any]:
    """Our pytest-benchmark JSON without the keys that only we write: what pytest-benchmark itself writes."""
    data: dict[str, Any] = json.loads(json.dumps(run_json))
    del data["machine_info"]["gpuperf"]
    for bench in data["benchmarks"]:
        del bench["gpuperf"]
    return data


# ---------------------------------------------------------------- writing


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 41])
def test_stats_are_pytest_benchmarks_own(n: int) -> None:
    samples = [1e-3 * (1 + ((i * 7) % 11) / 10) for i in range(n)]
    theirs: Any = Stats()  # type: ignore[no-untyped-call]
    for x in samples:
        theirs.update(x)
    ours = pytest_benchmark_stats(samples, iterations=4)
    for field in Stats.fields:
        assert ours[field] == pytest.approx(getattr(theirs, field)) if field != "outliers" else True, field
    assert ours["outliers"] == theirs.outliers
    assert ours["data"] == samples and ours["iterations"] == 4


def test_a_run_in_pytest_benchmark_schema() -> None:
    record = make_record(2e-3, test="test_x.py::TestA::test_step[cpu-64]")
    data = to_pytest_benchmark(make_run(record))
    assert set(data) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert data["machine_info"]["cpu"]["brand_raw"] == "AMD EPYC 9R14"
    assert data["commit_info"]["id"] == "a" * 40 and data["commit_info"]["dirty"] is False
    (bench,) = data["benchmarks"]
    assert bench["name"] == "test_step[cpu-64]" and bench["param"] == "cpu-64"
    assert bench["fullname"] == "test_x.py::TestA::test_step[cpu-64]"
    assert bench["stats"]["median"] == pytest.approx(2e-3) and bench["stats"]["rounds"] == 41
    ours = bench["extra_info"]["gpuperf"]  # under one key: extra_info is what the test set
    assert set(bench["extra_info"]) == {"gpuperf"}
    assert ours["device"] == "cpu" and ours["FLOP/s"] == pytest.approx(1e9 / 2e-3)


def test_our_file_reads_back_as_the_run_it_came_from(tmp_path: Path) -> None:
    run = make_run(make_record(2e-3), make_record(3e-3, test="test_x.py::test_other[cpu]"))
    path = tmp_path / "pb.json"
    path.write_text(json.dumps(to_pytest_benchmark(run)))
    (back,) = load_runs(path)
    assert back.fingerprint == run.fingerprint
    assert [r.to_dict() for r in back.records] == [r.to_dict() for r in run.records]


def test_a_file_of_the_exporter_before_issue_35_reads_back_as_its_run(tmp_path: Path) -> None:
    """Written before ``extra_info`` kept ours under one key and ``params`` was null without parameters: the
    same run (our record under ``"gpuperf"`` is what is read)."""
    run = make_run(make_record(2e-3), make_record(3e-3, test="test_x.py::test_n[cpu-64]", params={"n": "64"}))
    data = to_pytest_benchmark(run)
    for bench, record in zip(data["benchmarks"], run.records, strict=True):
        ours = bench["extra_info"].pop("gpuperf")
        bench["extra_info"] = {**bench["extra_info"], **ours}  # as it was: device, device_name, median_ci ...
        bench["params"] = {"device": record.device, **(bench["params"] or {})}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    (back,) = load_runs(path)
    assert [r.to_dict() for r in back.records] == [r.to_dict() for r in run.records]


def test_pytest_benchmark_compare_reads_our_file(tmp_path: Path) -> None:
    path = tmp_path / "0001_ours.json"
    path.write_text(json.dumps(to_pytest_benchmark(make_run(make_record(2e-3)))))
    done = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(path), "--columns=min,median,rounds"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "test_step[cpu]" in done.stdout and "Failed to load" not in done.stdout + done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("test_step[cpu]")]
    assert row.split()[-1] == "41"  # the rounds column: our samples


# ---------------------------------------------------------------- reading pytest-benchmark's own files


PB_SUITE = """
import pytest


def work(n):
    return sum(range(n))


@pytest.mark.parametrize("n", [100, 2000])
def test_sum(benchmark, n):
    benchmark(work, n)


class TestPedantic:
    def test_rounds(self, benchmark):
        benchmark.extra_info["size"] = 500
        benchmark.pedantic(work, args=(500,), rounds=7, iterations=2)
"""


def test_a_file_pytest_benchmark_wrote_reads_as_one_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_pb=PB_SUITE)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test itself may run in an xdist worker
    result = pytester.runpytest("-p", "no:randomly", "--benchmark-json=pb.json", "--benchmark-max-time=0.02")
    assert result.ret == pytest.ExitCode.OK
    (run,) = load_runs(pytester.path / "pb.json")
    assert run.fingerprint["source"] == "pytest-benchmark" and run.fingerprint["implementation"] == "cpython"
    keys = [r.key for r in run.records]
    assert keys == ["test_pb.py::test_sum[100]", "test_pb.py::test_sum[2000]", "test_pb.py::TestPedantic::test_rounds"]
    pedantic = run.records[2]
    assert len(pedantic.measurement.samples) == 7 and pedantic.measurement.iterations == 2
    assert pedantic.device == "unknown" and pedantic.metadata["extra_info"] == {"size": 500}


#: Parameters of every kind pytest-benchmark writes: JSON values, and the repr of what JSON cannot hold.
PARAMS_SUITE = """
import pytest
import torch


def work(n):
    return sum(range(n))


@pytest.mark.parametrize("n", [100, 2000])
@pytest.mark.parametrize("scale", [0.5, None])
@pytest.mark.parametrize("dtype", [torch.float32, "bf16"])
@pytest.mark.parametrize("fused", [True])
def test_sum(benchmark, n, scale, dtype, fused):
    benchmark(work, n)


def test_plain(benchmark):
    benchmark(work, 10)
"""


def test_a_file_pytest_benchmark_wrote_has_our_records_params_and_is_compared(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 3: a parametrized test read from pytest-benchmark's file had no params, so against our record of
    the same test every row was ``incomparable: params {} -> {...}``, and the gate passed on nothing."""
    pytester.makepyfile(test_pb=PARAMS_SUITE)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test itself may run in an xdist worker
    theirs = pytester.runpytest("-p", "no:randomly", "--benchmark-json=pb.json", "--benchmark-max-time=0.01")
    assert theirs.ret == pytest.ExitCode.OK
    ours = pytester.runpytest(
        *("-p", "no:benchmark", "-p", "no:randomly", "--gpuperf-json=run.json", "--gpuperf-memory=off"),
        *("--gpuperf-min-time=0.002", "--gpuperf-max-time=0.02", "--gpuperf-warmup-time=0.002"),
    )
    assert ours.ret == pytest.ExitCode.OK
    (base,) = load_runs(pytester.path / "pb.json")
    (head,) = load_runs(pytester.path / "run.json")
    assert len(base.records) == len(head.records) == 9
    params = {r.key: dict(r.params) for r in head.records}
    assert {r.key: dict(r.params) for r in base.records} == params
    assert params["test_pb.py::test_sum[True-dtype0-0.5-100]"] == {
        "n": "100",
        "scale": "0.5",
        "dtype": "torch.float32",
        "fused": "True",
    }
    assert params["test_pb.py::test_sum[True-bf16-None-2000]"]["scale"] == "None"
    assert params["test_pb.py::test_plain"] == {}
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    # Compared, each row: only an incomparable one would fail here (the timing of the two tools may differ).
    allowed = "--allow-mismatch=gpus,torch_minor,cuda"  # what pytest-benchmark does not record
    assert main(["compare", "pb.json", "run.json", allowed, "--fail-on=incomparable"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("test_")]
    assert len(rows) == 9 and not any(" incomparable " in row for row in rows) and "params {" not in out


def test_a_file_without_the_rounds_is_refused_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = foreign(to_pytest_benchmark(make_run(make_record(2e-3))))
    del data["benchmarks"][0]["stats"]["data"]  # --benchmark-save without --benchmark-save-data
    (tmp_path / "pb.json").write_text(json.dumps(data))
    save_run(tmp_path / "head.json", make_run(make_record(2e-3)))
    assert main(["compare", str(tmp_path / "pb.json"), str(tmp_path / "head.json")]) == 2
    err = capsys.readouterr().err
    assert "pb.json is a pytest-benchmark file, but benchmark test_x.py::test_step[cpu] has summary statistics" in err
    assert "--benchmark-save-data" in err and "Traceback" not in err


def test_params_that_are_not_an_object_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = foreign(to_pytest_benchmark(make_run(make_record(2e-3))))
    data["benchmarks"][0]["params"] = ["n", 64]
    (tmp_path / "pb.json").write_text(json.dumps(data))
    save_run(tmp_path / "head.json", make_run(make_record(2e-3)))
    assert main(["compare", str(tmp_path / "pb.json"), str(tmp_path / "head.json")]) == 2
    err = capsys.readouterr().err
    assert 'benchmark test_x.py::test_step[cpu] has "params" that are not an object of names; write it again' in err
    assert "Traceback" not in err


def test_a_foreign_json_file_names_both_readable_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "other.json").write_text('{"benchmarks": 3}')
    save_run(tmp_path / "head.json", make_run(make_record(2e-3)))
    assert main(["compare", str(tmp_path / "other.json"), str(tmp_path / "head.json")]) == 2
    assert "or at pytest-benchmark's --benchmark-json file" in capsys.readouterr().err


@pytest.fixture
def pb_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pytest-benchmark file of test_step at 10 ms (as pytest-benchmark writes it: no GPU, no torch)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pb.json").write_text(json.dumps(foreign(to_pytest_benchmark(make_run(make_record(10e-3))))))
    return tmp_path


def test_compare_against_a_pytest_benchmark_baseline(pb_baseline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pytest-benchmark file is one run: against one current run, only a noise floor below the default 2% (here
    0.5%, the synthetic records' spread being 0.4%) lets the gate see the 5% tolerance and call the row unchanged;
    under the default it sees only >= 11.1%, and the row is inconclusive."""
    save_run(pb_baseline / "same.json", make_run(make_record(10.01e-3)))
    assert main(["compare", "pb.json", "same.json"]) == 2
    err = capsys.readouterr().err
    assert "torch major.minor version (none) -> 2.13" in err and "--allow-mismatch=torch_minor" in err
    assert "was written by pytest-benchmark, which records neither the GPU nor the torch and CUDA versions" in err

    assert main(["compare", "pb.json", "same.json", "--allow-mismatch=torch_minor"]) == 0
    assert "inconclusive at 5%, this test can see >= 11.1%" in capsys.readouterr().out

    assert main(["compare", "pb.json", "same.json", "--allow-mismatch=torch_minor", "--noise-floor=0.5%"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"base: pytest-benchmark file {pb_baseline / 'pb.json'} (1 run of commit aaaaaaaaaa")
    assert out[2].startswith("baseline noise: ")
    assert "unchanged" in out[5] and "work per call" not in out[5]
    assert (
        out[-1] == "gpuperf gate: passed (1 unchanged; failing on slower,unattributed + more work unless measured "
        "unchanged or faster)"
    )

    save_run(pb_baseline / "slower.json", make_run(make_record(12e-3)))
    assert main(["compare", "pb.json", "slower.json", "--allow-mismatch=torch_minor"]) == 1
    assert "SLOWER" in capsys.readouterr().out


# ---------------------------------------------------------------- exporters


def test_github_action_benchmark_entries() -> None:
    few = make_record(1e-3, test="test_x.py::test_few[cpu]")
    few = few.__class__(test=few.test, device="cpu", measurement=make_measurement(few.test, samples_around(1e-3, n=3)))
    entries = github_action_benchmark(make_run(make_record(2e-3), few))
    assert entries[0]["name"] == TEST and entries[0]["unit"] == "ns"
    assert entries[0]["value"] == pytest.approx(2e6)
    assert re.fullmatch(r">=95% CI \[199\d{4}(\.\d+)?, 200\d{4}(\.\d+)?\]", entries[0]["range"])
    assert "41 samples x 1 calls" in entries[0]["extra"]
    assert "range" not in entries[1] and "too few samples for a 95% interval" in entries[1]["extra"]


def test_the_range_has_no_exponent_and_one_label_whatever_each_interval_achieved() -> None:
    """Issue 35, item 9: ``[73159.9, 1.38549e+06]`` and, row to row, ``96% CI`` and ``98% CI``: the coverage an
    interval of order statistics achieves, which depends on its sample count. The label is the level every interval
    reaches at least (the run's confidence); the ends are in fixed notation, to the digits of ``value``."""
    records = [
        make_record(1.2e-3, test="test_x.py::test_a[cpu]"),
        make_record(7e-5, test="test_x.py::test_b[cpu]"),
    ]
    records[1] = dataclasses.replace(
        records[1], measurement=make_measurement(records[1].test, [7e-5 * (1 + i / 20) for i in range(30)])
    )
    achieved = {round(r.measurement.ci.confidence, 2) for r in records}
    assert len(achieved) == 2  # the intervals achieve different coverages
    ranges = [entry["range"] for entry in github_action_benchmark(make_run(*records))]
    assert all(r.startswith(">=95% CI [") for r in ranges), ranges
    assert all("e+" not in r and "e-" not in r for r in ranges), ranges
    low, high = (float(x) for x in ranges[0].removeprefix(">=95% CI [").removesuffix("]").split(", "))
    m = records[0].measurement
    assert low == pytest.approx(m.ci.low * 1e9, rel=1e-6) and high == pytest.approx(m.ci.high * 1e9, rel=1e-6)
    asked = dataclasses.replace(records[0], measurement=dataclasses.replace(m, confidence=0.995))
    assert github_action_benchmark(make_run(asked))[0]["range"].startswith(">=99.5% CI [")


def test_bencher_metric_format() -> None:
    run = make_run(make_record(2e-3))
    latency = bencher(run)[TEST]["latency"]
    m = run.records[0].measurement
    assert latency == {
        "value": pytest.approx(2e6),
        "lower_value": pytest.approx(m.ci.low * 1e9, rel=1e-6),
        "upper_value": pytest.approx(m.ci.high * 1e9, rel=1e-6),
    }
    assert latency["lower_value"] < latency["value"] < latency["upper_value"]


@pytest.mark.parametrize("fmt", ["pytest-benchmark", "github-action-benchmark", "bencher"])
def test_export_command_writes_each_format(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    save_run(tmp_path / "run.json", make_run(make_record(2e-3)))
    assert main(["export", "--format", fmt, "run.json", "-o", "out/x.json"]) == 0
    assert capsys.readouterr().out == f"export: wrote 1 record as {fmt} to out/x.json\n"
    assert json.loads((tmp_path / "out" / "x.json").read_text())
    assert main(["export", "--format", fmt, "run.json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_export_bad_input_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--format", "bencher", "nope"]) == 2
    assert "no baseline or run 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["export", "--format", "csv", "run.json"])
    assert info.value.code == 2 and "invalid choice: 'csv'" in capsys.readouterr().err
