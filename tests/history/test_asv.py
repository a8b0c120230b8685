"""``--gpuperf-asv=DIR``: asv results written by the pytest run, read back by asv itself."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from pytest_gpuperf.history import FORMAT, AsvError, Commit, Point, read_results, write_results
from pytest_gpuperf.history._asv import benchmark_name
from pytest_gpuperf.measuring import Measurement
from pytest_gpuperf.results import Fingerprint, Record, Run
from tests.history.asv_fleet import EIGHT, write_many
from tests.synthetic import make_measurement

# torch is imported above, before any pytester run: an in-process run forgets the modules first
# imported inside it, and torch cannot be imported a second time in one process.
assert torch.__version__

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git: asv results belong to a commit")

_TESTS = """
import time

def test_sleep(gpuperf):
    gpuperf.measure(lambda: time.sleep(0.001), items=1)

def test_two(gpuperf):
    gpuperf.measure(lambda: None, name="noop")
    gpuperf.measure(lambda: sum(range(100)), name="sum")
"""
_FAST = ["--gpuperf-device=cpu", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.1", "--gpuperf-memory=off"]


def _measurement(name: str, samples: tuple[float, ...] = EIGHT) -> Measurement:
    return make_measurement(name, samples, device_name="a cpu", iterations=3, sampling_seconds=0.5)


def _record(test: str, device: str = "cpu", name: str | None = None, samples: tuple[float, ...] = EIGHT) -> Record:
    return Record(test=test, device=device, measurement=_measurement(name or test, samples))


def _run(*records: Record) -> Run:
    fingerprint = {"python": "3.11.7", "torch": "2.13.0+cpu", "platform": "Linux", "cpu_model": "x", "cpu_count": 2}
    return Run(
        created="2026-11-22T02:00:00+00:00",
        fingerprint=Fingerprint.from_dict(fingerprint),
        settings={},
        records=list(records),
    )


def _git_repo(path: Path) -> None:
    env = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    subprocess.run(["git", *env, "commit", "-q", "-m", "one", "--allow-empty"], cwd=path, check=True)


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("test", "device", "name", "expected"),
    [
        ("suites/test_mm.py::test_mm[cpu]", "cpu", None, "suites.test_mm.test_mm"),
        ("suites/test_mm.py::test_mm[cuda:0-bf16]", "cuda:0", None, "suites.test_mm.test_mm_bf16"),
        ("suites/test_mm.py::test_mm[bf16-cpu]", "cpu", None, "suites.test_mm.test_mm_bf16"),
        ("a/test_x.py::TestX::test_y[cpu]", "cpu", "fwd-bwd", "a.test_x.TestX.test_y.fwd_bwd"),
        ("test_x.py::test_y", "cpu", None, "test_x.test_y"),
    ],
)
def test_benchmark_name_drops_the_device_and_characters_asv_cannot_take(
    test: str, device: str, name: str | None, expected: str
) -> None:
    assert benchmark_name(_record(test, device, name)) == expected


def test_two_records_with_one_name_are_refused(tmp_path: Path) -> None:
    run = _run(_record("t.py::test_a_b[cpu]"), _record("t.py::test_a[b-cpu]"))
    with pytest.raises(AsvError, match=r"both become asv benchmark t\.test_a_b on cpu; give one of them another name"):
        write_results(tmp_path, run, machine="m", commit=Commit("a" * 40, 1000))


def test_bad_machine_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AsvError, match=r"asv machine name 'my box' .* for example --gpuperf-asv-machine=gpu-box-1"):
        write_results(tmp_path, _run(_record("t.py::test_a[cpu]")), machine="my box", commit=Commit("a" * 40, 1))


# ---------------------------------------------------------------- format, read back by asv


def test_results_are_read_by_asv_with_stats_and_samples(tmp_path: Path) -> None:
    from asv.results import Results

    write_results(tmp_path, _run(_record("t.py::test_a[cpu]")), machine="m", commit=Commit("ab" * 20, 1234000))
    (path,) = (tmp_path / "m").glob("abababab-*.json")
    results = Results.load(str(path), machine_name="m")
    params = results.get_result_params("t.test_a")
    assert params == [["'cpu'"]]
    assert results.get_result_value("t.test_a", params) == [pytest.approx(1.0)]
    (stats,) = results.get_result_stats("t.test_a", params)
    assert stats["ci_99_a"] == pytest.approx(0.9) and stats["ci_99_b"] == pytest.approx(1.1)
    assert stats["q_25"] == pytest.approx(0.9725) and stats["q_75"] == pytest.approx(1.0275)
    assert stats["number"] == 3 and stats["repeat"] == 8
    assert results.get_result_samples("t.test_a", params) == [list(EIGHT)]
    assert results.benchmark_version["t.test_a"] == FORMAT
    assert results.date == 1234000 and results.commit_hash == "ab" * 20
    benchmarks = json.loads((tmp_path / "benchmarks.json").read_text())
    assert benchmarks["version"] == 2
    entry = benchmarks["t.test_a"]
    assert entry["unit"] == "seconds" and entry["version"] == FORMAT
    assert "lower is better" in entry["pretty_name"] and "1e+09 FLOP" in entry["pretty_name"]
    assert json.loads((tmp_path / "m" / "machine.json").read_text())["machine"] == "m"


def test_too_few_samples_for_a_99_percent_interval_write_no_statistics(tmp_path: Path) -> None:
    """Five samples' range covers 93.75%, not 99%: no interval is written, and asv compares by its factor alone."""
    from asv.commands.compare import _is_result_better
    from asv.results import Results

    few = (1.0, 1.1, 0.9, 1.05, 0.95)
    run = _run(_record("t.py::test_a[cpu]", samples=few), _record("t.py::test_a[cuda:0]", "cuda:0"))
    write_results(tmp_path, run, machine="m", commit=Commit("ab" * 20, 1))
    (path,) = (tmp_path / "m").glob("abababab-*.json")
    row = read_results(path)["results"]["t.test_a"]
    assert row[5:10] == [
        [None, 0.9],
        [None, 1.1],
        [None, pytest.approx(0.9725)],
        [None, pytest.approx(1.0275)],
        [None, 3],
    ]
    results = Results.load(str(path), machine_name="m")
    params = results.get_result_params("t.test_a")
    short, full = results.get_result_stats("t.test_a", params)
    assert short == {} and full["ci_99_a"] == pytest.approx(0.9) and full["repeat"] == 8
    samples = results.get_result_samples("t.test_a", params)
    # asv's comparison takes an empty entry as "no statistics" (a partial one would fail on a missing key)
    assert _is_result_better(1.0, 2.0, (short, samples[0]), (short, samples[0]), 1.1)
    assert not _is_result_better(1.0, 1.05, (short, samples[0]), (short, samples[0]), 1.1)
    # Written again beside another run, the row keeps the device without statistics as it was.
    write_results(tmp_path, _run(_record("t.py::test_b[cpu]")), machine="m", commit=Commit("ab" * 20, 1))
    assert read_results(path)["results"]["t.test_a"][5:10] == row[5:10]


def test_a_refused_point_is_no_value_for_asv_and_its_reason_stays_beside_the_rows(tmp_path: Path) -> None:
    """``history record --anchor``'s refused ratio: asv reads no value and no statistics for that device (its graph
    draws no point), the ratios stay as samples, and the reason is kept under REFUSED through later merges until the
    device is measured again."""
    import dataclasses

    from asv.results import Results

    from pytest_gpuperf.history._asv import write_points
    from pytest_gpuperf.history._asv_files import REFUSED, points_of

    fingerprint = _run().fingerprint
    commit = Commit("d" * 40, 1)

    def write(points: dict[str, Point]) -> Path:
        code, pretty = {"r.spin": "code"}, {"r.spin": "spin"}
        return write_points(
            tmp_path, {"r.spin": points}, code=code, pretty=pretty, unit="x", fingerprint=fingerprint, machine="m",
            commit=commit,
        )  # fmt: skip

    good = Point.of(EIGHT, 1, 0, 1.0)
    wide = dataclasses.replace(Point.of((0.05, 15.0) * 4, 1, 0, 1.0), refused="the rounds disagree")
    path = write({"cpu": wide, "cuda:0": good})
    data = read_results(path)
    assert data[REFUSED] == {"r.spin": {"cpu": "the rounds disagree"}}
    results = Results.load(str(path), machine_name="m")
    params = results.get_result_params("r.spin")
    assert results.get_result_value("r.spin", params) == [None, pytest.approx(1.0)]
    refused_stats, stats = results.get_result_stats("r.spin", params)
    assert refused_stats == {} and stats["ci_99_a"] == pytest.approx(0.9)
    assert results.get_result_samples("r.spin", params)[0] == [0.05, 15.0] * 4
    (read_back, kept) = (points_of(data, "r.spin")[d] for d in ("cpu", "cuda:0"))
    assert read_back.refused == "the rounds disagree" and read_back.median == pytest.approx(7.525) and not kept.refused
    # Another device written later: the refused point and its reason stay.
    write({"mps": good})
    assert read_results(path)[REFUSED] == {"r.spin": {"cpu": "the rounds disagree"}}
    assert read_results(path)["results"]["r.spin"][0] == [None, pytest.approx(1.0), pytest.approx(1.0)]
    # Measured again and kept: the value is back, and so is no reason.
    write({"cpu": good})
    assert REFUSED not in read_results(path) and read_results(path)["results"]["r.spin"][0] == [pytest.approx(1.0)] * 3


def test_runs_of_other_devices_and_tests_merge(tmp_path: Path) -> None:
    commit = Commit("c" * 40, 1)
    write_results(
        tmp_path, _run(_record("t.py::test_a[cpu]"), _record("t.py::test_b[cpu]")), machine="m", commit=commit
    )
    write_results(tmp_path, _run(_record("t.py::test_a[cuda:0]", "cuda:0")), machine="m", commit=commit)
    (path,) = (tmp_path / "m").glob("cccccccc-*.json")
    rows: dict[str, Any] = read_results(path)["results"]
    assert rows["t.test_a"][1] == [["'cpu'", "'cuda:0'"]]
    assert rows["t.test_b"][1] == [["'cpu'"]]
    benchmarks = json.loads((tmp_path / "benchmarks.json").read_text())
    assert benchmarks["t.test_a"]["params"] == [["'cpu'", "'cuda:0'"]]


def test_a_corrupt_results_file_is_named_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "benchmarks.json").write_text("{not json")
    with pytest.raises(AsvError, match=r"benchmarks\.json is not valid JSON .* left as it is"):
        write_results(tmp_path, _run(_record("t.py::test_a[cpu]")), machine="m", commit=Commit("d" * 40, 1))
    assert (tmp_path / "benchmarks.json").read_text() == "{not json"


# ---------------------------------------------------------------- the pytest option


@needs_git
def test_gpuperf_asv_writes_results_for_the_commit(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=_TESTS)
    _git_repo(pytester.path)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=pytester.path, capture_output=True, text=True).stdout
    result = pytester.runpytest("--gpuperf-asv=asv-results", "--gpuperf-asv-machine=box", *_FAST)
    assert result.ret == 0
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [f"gpuperf: wrote asv results of 3 benchmark(s) for commit {commit[:8]}*lower is better)"]
    )
    (path,) = (pytester.path / "asv-results" / "box").glob(f"{commit[:8]}-gpuperf-py*-torch*.json")
    rows = read_results(path)["results"]
    assert sorted(rows) == ["test_perf.test_sleep", "test_perf.test_two.noop", "test_perf.test_two.sum"]
    # Seconds per call of a 1 ms sleep: at least 1 ms, and far below the 1 or more it would read in ms (a busy machine
    # wakes a sleeper late: a 2 ms sleep read 12 ms there).
    assert 0.0009 < rows["test_perf.test_sleep"][0][0] < 0.5


def test_gpuperf_asv_outside_git_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=_TESTS)
    pytester.makeini("[pytest]\n")  # rootdir here, not in the enclosing checkout
    result = pytester.runpytest("--gpuperf-asv=out", *_FAST, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-asv=out: asv results belong to a commit, but git cannot tell*"])


@needs_git
def test_gpuperf_asv_on_a_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=_TESTS)
    pytester.path.joinpath("taken").write_text("")
    _git_repo(pytester.path)
    result = pytester.runpytest("--gpuperf-asv=taken", *_FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-asv=taken: taken is a file; give the asv results directory*"])


def test_concurrent_writers_lose_no_benchmark_and_no_row(tmp_path: Path) -> None:
    """A fleet writing into one results directory at once: every shared file is merged under its lock."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    # A barrier, not a moment 3 s ahead, which passes before a busy machine's interpreters have started (this test
    # took 12 s there, when the writers' module imported torch): then each writer wrote as it came, alone.
    start = context.Barrier(4)
    workers = [context.Process(target=write_many, args=(str(tmp_path), w, start)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
        assert p.exitcode == 0
    names = {f"t.test_w{w}_{i}" for w in range(4) for i in range(15)}
    benchmarks = json.loads((tmp_path / "benchmarks.json").read_text())
    assert names <= set(benchmarks)
    for machine in ("m0", "m1"):
        (path,) = (tmp_path / machine).glob("dddddddd-*.json")
        rows = read_results(path)["results"]
        assert set(rows) == {n for n in names if int(n.split("_w")[1].split("_")[0]) % 2 == int(machine[1])}
    assert not list(tmp_path.rglob("*.lock")) and not list(tmp_path.rglob(".*.tmp"))
