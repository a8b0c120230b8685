"""``python -m pytest_gpuperf compare BASE HEAD``: verdicts, table and exit status; every bad input exits 2."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.measuring._backends import CUDA_EVENT_TIMER
from pytest_gpuperf.results import Record, ResultsDir, Run, save_baseline_file, save_run
from tests.gate.clocked import SLOW, with_clocks
from tests.synthetic import BUSY, make_record, make_run, save_main_baseline, with_fingerprint


def write(path: Path, *medians: float, test: str = "test_x.py::test_step[cpu]", **fingerprint: object) -> Path:
    records = [make_record(m, test=test) for m in medians]
    run = make_run(*records, fingerprint=with_fingerprint(**fingerprint) if fingerprint else None)
    save_run(path, run)
    return path


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A results directory with baseline 'main' of three rounds at 10 ms; cwd is tmp_path."""
    monkeypatch.chdir(tmp_path)
    save_main_baseline(tmp_path)
    return tmp_path


def test_slower_exits_1_with_the_table(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(results / "head.json", 12e-3)
    assert main(["compare", "main", "head.json"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("base: baseline 'main' .gpuperf/baselines/main.json (3 runs of commit aaaaaaaaaa")
    assert out[1].startswith(f"head: results file {results / 'head.json'} (1 run of commit")
    assert out[2] == (
        "baseline noise: run-to-run 1.6% (3 runs): a session of one run can see a change of 6.5% or more; the 5% "
        "tolerance cannot be seen here, so a row within it is inconclusive, not unchanged: save more runs on a "
        "quieter machine, gate with `pytest-gpuperf ab`, or give --gpuperf-tolerance=auto"
    )
    assert "ratio [95% CI]" in out[3] and "can see" in out[3]
    assert "1.200 [" in out[5] and ">= 6.5%" in out[5] and "SLOWER" in out[5]
    assert (
        out[-1] == "gpuperf gate: FAILED: 1 slower; failing on slower,unattributed + more work "
        "unless measured unchanged or faster: test_step [cpu]"
    )


def test_a_noise_figure_that_is_the_floor_says_it_is_assumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23 item 8: with two of three baseline runs left out as disturbed, compare printed "run-to-run 2.0%
    (1 run)" as if measured (on main: no "assumed" in the line nor in the row's reason)."""
    base = tmp_path / "base.json"
    calm, busy = make_run(make_record(10e-3)), make_run(make_record(14e-3, load=BUSY))
    save_baseline_file(base, "main", [calm, busy, busy])
    write(tmp_path / "head.json", 10.6e-3)
    main(["compare", str(base), str(tmp_path / "head.json"), "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "baseline noise: run-to-run 2.0% assumed (the noise floor; 1 run; 2 of 3 left out)" in out
    assert "run-to-run noise 2.0% assumed (the noise floor: 1 baseline run and 1 current run)" in out


def test_same_code_exits_0(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three current runs against the three baseline runs: evidence that can see a change of the 5% tolerance."""
    store = ResultsDir(results / ".gpuperf")
    for _ in range(3):
        store.save_baseline("pr", make_run(make_record(10.02e-3)))
    assert main(["compare", "main", "pr"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "gpuperf gate: passed (1 unchanged; failing on slower,unattributed + more work unless measured " + (
        "unchanged or faster)"
    )


def test_a_baseline_with_nan_samples_is_bad_input_not_a_crash(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = write(results / "damaged.json", 10e-3)
    data = json.loads(damaged.read_text())
    data["records"][0]["measurement"]["samples"] = [float("nan")] * 3
    damaged.write_text(json.dumps(data))
    write(results / "head.json", 10e-3)
    assert main(["compare", "damaged.json", "head.json"]) == 2
    err = capsys.readouterr().err
    assert "damaged.json: record 1 (test_x.py::test_step[cpu]): field 'measurement.samples' must be positive" in err


def test_comparing_a_file_with_itself_warns(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "main", ".gpuperf/baselines/main.json"]) == 0
    err = capsys.readouterr().err
    assert "warning: BASE and HEAD are the same file (.gpuperf/baselines/main.json)" in err


def test_options_tolerance_fail_on_and_format(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(results / "head.json", 12e-3)
    assert main(["compare", "main", "head.json", "--tolerance=25%"]) == 0
    assert main(["compare", "main", "head.json", "--fail-on=none"]) == 0
    write(results / "faster.json", 8e-3)
    assert main(["compare", "main", "faster.json", "--fail-on=faster", "--format=github"]) == 1
    assert "| test_step |" in capsys.readouterr().out


def test_two_results_files_by_path_and_a_baseline_as_head(results: Path) -> None:
    base = write(results / "a.json", 10e-3)
    head = write(results / "b.json", 10e-3)
    assert main(["compare", str(base), str(head)]) == 0
    assert main(["compare", str(base), "main"]) == 0


def test_python_dash_m_entry_point(results: Path) -> None:
    write(results / "head.json", 12e-3)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf", "compare", "main", "head.json"],
        cwd=results,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "SLOWER" in done.stdout


# ---------------------------------------------------------------- bad input: exit 2, the file and the fix


def test_unknown_name(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "mian", "main"]) == 2
    assert capsys.readouterr().err == (
        "error: no baseline or run 'mian' in .gpuperf (baselines there: main; no runs); did you mean main? Record a "
        "baseline on the base commit with: pytest --gpuperf-save=mian, or give a run id (pytest-gpuperf runs "
        "--results-dir .gpuperf lists them) or the path of a results file\n"
    )


def test_corrupt_json_is_named_and_left_alone(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (results / "head.json").write_text('{"schema": ')
    assert main(["compare", "main", "head.json"]) == 2
    err = capsys.readouterr().err
    assert f"error: {results / 'head.json'} is not valid JSON (" in err and "it was left as it is" in err
    assert (results / "head.json").read_text() == '{"schema": '


def test_wrong_schema_version(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_run(make_record(1e-3)).to_dict()
    data["version"] = 3
    (results / "head.json").write_text(json.dumps(data))
    assert main(["compare", "main", "head.json"]) == 2
    err = capsys.readouterr().err
    assert "has pytest-gpuperf/results schema version 3, this pytest-gpuperf reads version 2" in err


def test_a_version_1_file_is_refused_in_one_line(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file of a pytest-gpuperf that was never released: exit 2, the file named, no traceback."""
    data = make_run(make_record(1e-3)).to_dict()
    data["version"] = 1
    (results / "old.json").write_text(json.dumps(data))
    assert main(["compare", "main", "old.json"]) == 2
    assert capsys.readouterr().err == (
        f"error: {results / 'old.json'} has pytest-gpuperf/results schema version 1, written by an unreleased "
        "pytest-gpuperf (before 0.1.0); this pytest-gpuperf reads version 2: re-record it with this version\n"
    )


def test_runs_from_other_hardware_are_refused_unless_allowed(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(results / "head.json", 10e-3, cpu_model="Intel Xeon 8480")
    assert main(["compare", "main", "head.json"]) == 2
    err = capsys.readouterr().err
    assert "were measured on different hardware or software (CPU model AMD EPYC 9R14 -> Intel Xeon 8480)" in err
    assert err.rstrip().endswith("or pass --allow-mismatch=cpu_model to compare anyway")
    assert main(["compare", "main", "head.json", "--allow-mismatch=cpu_model"]) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tolerance=abc"], "'abc': is not a number"),
        (["--fail-on=worse"], "'worse' is not a verdict"),
        (["--allow-mismatch=gpu"], "'gpu' is not a fingerprint key"),
    ],
)
def test_bad_options_exit_2(results: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["compare", "main", "main", *args])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_multi_round_head_is_judged_on_its_rounds(results: Path) -> None:
    store = ResultsDir(results / ".gpuperf")
    for median in (12e-3, 12.02e-3, 11.98e-3):
        run: Run = make_run(make_record(median))
        store.save_baseline("pr", run)
    assert main(["compare", "main", "pr"]) == 1


def test_a_slowdown_on_a_throttled_gpu_exits_1_as_unattributed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the saved files: the clocks survive saving and loading, and the gate weighs them."""
    store = ResultsDir(tmp_path / ".gpuperf")
    for _ in range(3):
        store.save_baseline("cool", make_run(with_clocks(make_record(10e-3), 0)))
    save_run(tmp_path / "hot.json", make_run(with_clocks(make_record(12e-3), 41, reading=SLOW)))
    assert main(["compare", str(store.baseline_path("cool")), str(tmp_path / "hot.json")]) == 1
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("test_step")]
    assert "1.200 [" in row and "1.000 [" in row and "UNATTRIBUTED" in row
    assert "but the GPU's median SM clock was 1650 MHz (41 of 41 samples throttled; seen: sw_thermal_slowdown)" in row
    assert "against the baseline's 1980 MHz, which explains it (time x SM clock +0.0%); let the GPU cool" in row
    assert out.splitlines()[-1] == (
        "gpuperf gate: FAILED: 1 unattributed; failing on slower,unattributed + more work "
        "unless measured unchanged or faster: test_step [cpu]"
    )


def _on_cuda(record: Record, *, latency: bool = False) -> Record:
    m = dataclasses.replace(record.measurement, device="cuda:0", timer=CUDA_EVENT_TIMER, latency=latency)
    return dataclasses.replace(record, test=record.test.replace("[cpu]", "[cuda]"), device="cuda:0", measurement=m)


def test_a_cuda_record_of_call_latency_is_not_compared_with_the_loops_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CUDA sample of one call from call to result (``--gpuperf-per-call``) is not the time a loop of the step
    pays: the record is incomparable, and the reason names the key."""
    save_run(tmp_path / "old.json", make_run(_on_cuda(make_record(4e-3), latency=True)))
    save_run(tmp_path / "new.json", make_run(_on_cuda(make_record(10e-3))))
    assert main(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    out = capsys.readouterr().out
    assert "incomparable  sample call to result -> the loop's time" in out
    assert "SLOWER" not in out
    assert out.splitlines()[-1].startswith("gpuperf gate: FAILED: nothing compared (1 incomparable): no row could be")
    # Compared across it on purpose, the override names the key.
    assert main(["compare", "--allow-mismatch=sample", str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 1
    assert "SLOWER" in capsys.readouterr().out
