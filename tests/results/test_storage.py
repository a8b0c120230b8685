"""The results directory: run history, named baselines of several rounds, and every unreadable input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_gpuperf.measuring import ClockSummary
from pytest_gpuperf.measuring._clocks import CLOCKS
from pytest_gpuperf.results import (
    Evidence,
    Record,
    ReplaceRefused,
    ResultsDir,
    ResultsError,
    Run,
    StorageError,
    check_name,
    load_run,
    save_run,
)
from pytest_gpuperf.results._files import load_runs
from pytest_gpuperf.results._store import MAX_RUNS, same_code
from tests.synthetic import FINGERPRINT, make_record, make_run, with_fingerprint


def run_of(commit: str = "a" * 40, *, dirty: bool = False, diff: str = "", **fingerprint: object) -> Run:
    git = {"commit": commit, "branch": "main", "dirty": dirty, **({"diff_sha": diff} if diff else {})}
    return make_run(make_record(1e-3), fingerprint=with_fingerprint(git=git, **fingerprint))


# ---------------------------------------------------------------- files


def test_a_run_round_trips_with_samples_load_and_rounds(tmp_path: Path) -> None:
    record = make_record(2e-3, rounds=[2.1e-3])
    path = tmp_path / "run.json"
    save_run(path, make_run(record, interrupted=True))
    (back,) = load_runs(path)
    assert back.interrupted and back.fingerprint == FINGERPRINT
    (again,) = back.records
    assert again.measurement.samples == record.measurement.samples
    assert again.evidence == record.evidence and again.key == record.key
    assert len(again.evidence.rounds) == 1 and again.evidence.load is not None


def test_results_files_of_schema_1_without_the_newer_keys_still_read(tmp_path: Path) -> None:
    data = make_run(make_record(1e-3)).to_dict()
    del data["interrupted"]
    del data["records"][0]["gate"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    run = load_run(path)
    assert not run.interrupted and run.records[0].evidence == Evidence()


def test_a_records_gpu_clocks_round_trip_and_older_records_have_none(tmp_path: Path) -> None:
    clocks = ClockSummary(
        readings=41,
        sm_clock_mhz_min=1425,
        sm_clock_mhz_median=1755.0,
        sm_clock_mhz_max=1980,
        mem_clock_mhz_min=2619,
        mem_clock_mhz_max=2619,
        temperature_c_max=71,
        power_w_max=612.5,
        max_sm_clock_mhz=1980,
        reasons=("sw_power_cap", "hw_slowdown"),
        throttled_samples=(3, 17),
        source="nvml 5 (uuid)",
    )
    record = make_record(1e-3)
    record = dataclasses.replace(record, measurement=record.measurement.with_reading(CLOCKS, clocks))
    path = tmp_path / "run.json"
    save_run(path, make_run(record))
    (again,) = load_run(path).records
    assert again.measurement.clocks == clocks and again.measurement.clocks.throttled == 2
    data = make_run(make_record(1e-3)).to_dict()
    del data["records"][0]["measurement"]["clocks"]
    path.write_text(json.dumps(data))
    assert load_run(path).records[0].measurement.clocks is None


def test_every_run_gets_its_own_file(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path / ".gpuperf")
    paths = {store.save_run(run_of()) for _ in range(3)}
    assert len(paths) == 3 and all(p.parent == tmp_path / ".gpuperf" / "runs" for p in paths)
    assert all(p.name.endswith("-aaaaaaaa.json") for p in paths)
    assert not list((tmp_path / ".gpuperf" / "runs").glob("*.tmp"))


# ---------------------------------------------------------------- baselines


def test_saving_the_same_code_adds_rounds_and_other_code_is_replaced_only_when_asked(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    for i in range(3):
        outcome = store.save_baseline("main", run_of())
        assert outcome.runs == i + 1 and outcome.replaced == 0 and outcome.backup is None
    assert "now holds 3 runs" in outcome.describe("main")
    before = store.baseline_path("main").read_bytes()
    with pytest.raises(ReplaceRefused) as refused:
        store.save_baseline("main", run_of("b" * 40))
    message = str(refused.value)
    assert "holds 3 runs of commit aaaaaaaaaa, and this run is commit bbbbbbbbbb" in message
    assert "Add --gpuperf-replace" in message and "or save under another name" in message
    assert store.baseline_path("main").read_bytes() == before  # nothing changed

    outcome = store.save_baseline("main", run_of("b" * 40), replace=True)
    assert outcome.runs == 1 and outcome.replaced == 3
    assert outcome.backup is not None and outcome.backup.read_bytes() == before
    assert outcome.backup.name.startswith("main.json.") and outcome.backup.name.endswith(".bak")
    assert f"replaced 3 run(s) of other code or another machine (the old file is kept as {outcome.backup})" in (
        outcome.describe("main")
    )
    assert store.names() == ["main"]  # the backup is not a baseline
    assert len(store.load("main").runs) == 1


def test_the_check_at_the_start_refuses_other_code_and_other_machines(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    store.check_save("main", run_of("b" * 40).fingerprint, replace=False)  # no baseline yet: nothing to replace
    store.save_baseline("main", run_of())
    store.check_save("main", run_of().fingerprint, replace=False)
    store.check_save("main", run_of(hostname="box-9").fingerprint, replace=False)  # a twin machine adds a run
    with pytest.raises(ReplaceRefused, match="holds 1 run of commit aaaaaaaaaa, and this session runs commit bbbb"):
        store.check_save("main", run_of("b" * 40).fingerprint, replace=False)
    with pytest.raises(ReplaceRefused, match=r"on another machine \(CPU model AMD EPYC 9R14 -> Intel Xeon 8480\)"):
        store.check_save("main", run_of(cpu_model="Intel Xeon 8480").fingerprint, replace=False)
    store.check_save("main", run_of("b" * 40).fingerprint, replace=True)


def test_a_baseline_keeps_the_newest_rounds(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    for _ in range(MAX_RUNS + 2):
        outcome = store.save_baseline("main", run_of())
    assert outcome.runs == MAX_RUNS and outcome.dropped == 1
    assert len(store.load("main").runs) == MAX_RUNS


def test_same_code_means_same_commit_same_diff_same_machine() -> None:
    assert same_code(run_of(), run_of())
    assert not same_code(run_of(), run_of("b" * 40))
    assert same_code(run_of(dirty=True, diff="d1"), run_of(dirty=True, diff="d1"))
    assert not same_code(run_of(dirty=True, diff="d1"), run_of(dirty=True, diff="d2"))
    assert not same_code(run_of(), run_of(cpu_model="Intel Xeon 8480"))
    assert same_code(run_of(hostname="box-9"), run_of())  # identical machines in a fleet


def test_load_by_name_or_by_path(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path / ".gpuperf")
    store.save_baseline("main", run_of())
    assert store.load("main").name == "main"
    run_file = store.save_run(run_of())
    by_path = store.load(str(run_file))
    assert by_path.name is None and by_path.path == run_file and len(by_path.runs) == 1
    relative = store.load("main.json", cwd=tmp_path / ".gpuperf" / "baselines")
    assert relative.name is None and len(relative.runs) == 1
    assert "baseline 'main'" in store.load("main").describe()


# ---------------------------------------------------------------- bad input: each names the file and the fix


def test_unknown_baseline_name_lists_what_exists_and_how_to_record_one(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    store.save_baseline("main", run_of())
    with pytest.raises(StorageError) as info:
        store.load("mian")
    assert str(info.value) == (
        f"no baseline or run 'mian' in {tmp_path} (baselines there: main; no runs); did you mean main? Record a "
        f"baseline on the base commit with: pytest --gpuperf-save=mian, or give a run id (pytest-gpuperf runs "
        f"--results-dir {tmp_path} lists them) or the path of a results file"
    )


def test_corrupt_json_names_the_file_and_is_left_alone(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    path = store.baseline_path("main")
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": "pytest-gpuperf/baseline", "runs": [')
    with pytest.raises(ResultsError, match=r"main\.json is not valid JSON \(.* at line 1\); it was left as it is"):
        store.load("main")
    with pytest.raises(StorageError, match=r"--gpuperf-save=main would replace it, so nothing was measured: move"):
        store.existing("main")
    assert path.read_text() == '{"schema": "pytest-gpuperf/baseline", "runs": ['


def test_wrong_schema_version_says_which_version_reads_it(tmp_path: Path) -> None:
    data = run_of().to_dict()
    data["version"] = 7
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsError) as info:
        load_runs(path)
    assert str(info.value) == (
        f"{path} has pytest-gpuperf/results schema version 7, this pytest-gpuperf reads version 2; "
        "re-record it with this version, or read it with the pytest-gpuperf that wrote it"
    )


def test_a_version_1_file_is_refused_as_written_before_the_first_release(tmp_path: Path) -> None:
    """Results 2 is the first released version: a version 1 file came from a pytest-gpuperf that was never
    released, alone or as a baseline's run."""
    data = run_of().to_dict()
    data["version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsError) as info:
        load_runs(path)
    assert str(info.value) == (
        f"{path} has pytest-gpuperf/results schema version 1, written by an unreleased pytest-gpuperf (before "
        "0.1.0); this pytest-gpuperf reads version 2: re-record it with this version"
    )
    store = ResultsDir(tmp_path)
    store.save_baseline("main", run_of())
    baseline = json.loads(store.baseline_path("main").read_text())
    baseline["runs"][0]["version"] = 1
    store.baseline_path("main").write_text(json.dumps(baseline))
    with pytest.raises(ResultsError, match=r"^run 1 of .*main\.json has .* version 1, written by an unreleased "):
        store.load("main")


def test_a_baseline_whose_runs_have_a_wrong_version(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    store.save_baseline("main", run_of())
    path = store.baseline_path("main")
    data = json.loads(path.read_text())
    data["runs"][0]["version"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"run 1 of .*main\.json has pytest-gpuperf/results schema version 0"):
        store.load("main")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"hello": 1}', 'is not a pytest-gpuperf results file (no "schema": "pytest-gpuperf/results")'),
        ("[1, 2]", "is not a pytest-gpuperf results file"),
        ('{"schema": "pytest-gpuperf/baseline", "version": 1, "runs": []}', 'its "runs" list is missing or empty'),
    ],
)
def test_foreign_or_damaged_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ResultsError, match=str(path).replace(".", r"\.") + ".*"):
        load_runs(path)
    with pytest.raises(ResultsError) as info:
        load_runs(path)
    assert message in str(info.value)


def test_a_record_missing_its_measurement_is_damaged(tmp_path: Path) -> None:
    data = run_of().to_dict()
    del data["records"][0]["measurement"]
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"damaged\.json: record 1 \(.*\): field 'measurement' is missing; the file"):
        load_runs(path)


@pytest.mark.parametrize(
    ("samples", "problem"),
    [
        ([], "must be a list of 1 sample or more, not an empty one"),
        ([0.001, float("nan")], "must be positive finite times"),
        ([0.001, -0.002], "must be positive finite times"),
    ],
)
def test_a_record_with_no_or_impossible_samples_is_damaged(tmp_path: Path, samples: list[float], problem: str) -> None:
    data = run_of().to_dict()
    data["records"][0]["measurement"]["samples"] = samples
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))  # NaN as Python's json writes it
    before = path.read_text()
    with pytest.raises(ResultsError, match=rf"bad\.json: record 1 \(.*\): field 'measurement\.samples' {problem}"):
        load_runs(path)
    assert path.read_text() == before


def test_a_python_file_given_as_results_gets_no_advice_to_delete_it(tmp_path: Path) -> None:
    source = tmp_path / "test_model.py"
    source.write_text("def test_x():\n    pass\n")
    with pytest.raises(ResultsError) as info:
        load_runs(source)
    assert "is not a results file (not JSON)" in str(info.value) and "delete" not in str(info.value)


def test_missing_file_and_directory_paths(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"nope\.json: no such results file"):
        load_runs(tmp_path / "nope.json")
    with pytest.raises(ResultsError, match=r"is a directory; give the path of a results or baseline \.json file"):
        load_runs(tmp_path)


def test_results_directory_that_cannot_be_written_names_it_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    store = ResultsDir(tmp_path / "afile" / ".gpuperf")
    with pytest.raises(StorageError) as info:
        store.check_writable()
    assert str(info.value).startswith(f"results directory {tmp_path / 'afile' / '.gpuperf'} is not writable (")
    assert str(info.value).endswith(
        "choose a writable one with --gpuperf-results-dir=DIR or the ini key gpuperf_results_dir"
    )
    with pytest.raises(StorageError, match="is not writable"):
        store.save_run(run_of())
    assert (tmp_path / "afile").read_text() == "not a directory"


@pytest.mark.parametrize("bad", ["", "../main", "a/b", "main.json", "-x"])
def test_baseline_names_are_names_not_paths(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a baseline name: use letters, digits"):
        check_name(bad)
    with pytest.raises(ValueError, match="is 101 characters, over the 100 a baseline name may have; give a shorter"):
        check_name("x" * 101)
    assert check_name(" pr-123.v2 ") == "pr-123.v2" and check_name("x" * 100) == "x" * 100


def test_records_keep_the_gate_evidence_separate_from_user_metadata() -> None:
    record = Record.from_dict(make_record(1e-3, gate={"tolerance": 0.1}).to_dict())
    assert record.metadata == {} and record.evidence.tolerance == 0.1
