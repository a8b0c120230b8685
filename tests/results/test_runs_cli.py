"""``pytest-gpuperf runs``: the listing, ``show`` and ``prune``; damaged files listed, never changed; exit statuses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.results import ResultsDir, save_run
from pytest_gpuperf.results._files import load_runs
from pytest_gpuperf.results._store import GITIGNORE
from tests.synthetic import make_record, make_run, with_fingerprint

DIRTY = with_fingerprint(git={"commit": "b" * 40, "branch": "pr", "dirty": True, "diff_sha": "1234"})


def run_file(store: ResultsDir, stem: str, *medians: float, **options: object) -> Path:
    path = store.runs_dir / f"{stem}.json"
    records = [make_record(m, test=f"test_x.py::test_{i}[cpu]") for i, m in enumerate(medians)]
    save_run(path, make_run(*records, **options))  # type: ignore[arg-type]
    return path


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ResultsDir:
    """.gpuperf under the cwd: three run files (one interrupted, one of a dirty tree) and baseline 'main' of two."""
    monkeypatch.chdir(tmp_path)
    store = ResultsDir(Path(".gpuperf"))
    store.make(store.runs_dir)
    run_file(store, "20261120T010000.000000Z-aaaaaaaa", 10e-3, 20e-3)
    run_file(store, "20261121T010000.000000Z-aaaaaaaa", 10e-3, interrupted=True)
    run_file(store, "20261122T010000.000000Z-bbbbbbbb-dirty", 11e-3, fingerprint=DIRTY)
    for _ in range(2):
        store.save_baseline("main", make_run(make_record(10e-3), make_record(5e-3, test="test_x.py::test_y[cpu]")))
    return store


def test_the_listing_shows_runs_oldest_first_and_baselines(
    store: ResultsDir, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "runs in .gpuperf/runs (3, oldest first):"
    assert out[1].split() == ["id", "date", "(saved)", "commit", "devices", "records", "note"]
    assert out[3].split() == [
        "20261120T010000.000000Z-aaaaaaaa",
        "2026-11-22",
        "03:00:00",
        "UTC",
        "aaaaaaaa",
        "cpu",
        "2",
    ]
    assert out[4].split()[-1] == "interrupted"
    assert out[5].split()[4:6] == ["bbbbbbbb+dirty", "cpu"]
    assert out[7] == "baselines in .gpuperf/baselines (1):"
    assert out[8].split() == ["name", "runs", "newest", "run", "commit", "devices", "records", "note"]
    assert out[10].split() == ["main", "2", "2026-11-22", "03:00:00", "UTC", "aaaaaaaa", "cpu", "2"]


def test_a_run_whose_tests_failed_says_so_and_which_baselines_hold_it(
    store: ResultsDir, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35, item 9: the listing did not mark a session whose tests failed, nor say whether it went into a
    baseline (``--gpuperf-save`` keeps such a run: the records it measured)."""
    failed = {"test_x.py::test_0[cpu]": "failed", "test_x.py::test_z[cpu]": "ran out of memory"}
    kept = make_run(make_record(12e-3, test="test_x.py::test_0[cpu]"), failures=failed)
    save_run(store.runs_dir / "20261123T010000.000000Z-aaaaaaaa.json", kept)
    store.save_baseline("main", kept)
    store.save_baseline("other", kept)
    alone = make_run(make_record(13e-3, test="test_x.py::test_0[cpu]"), failures={"test_x.py::test_0[cpu]": "failed"})
    save_run(store.runs_dir / "20261124T010000.000000Z-aaaaaaaa.json", alone)
    assert main(["runs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert next(line for line in out if line.startswith("20261123T")).endswith(
        "2 tests failed; in baselines 'main', 'other'"
    )
    assert next(line for line in out if line.startswith("20261124T")).endswith("1 test failed; in no baseline")
    assert next(line for line in out if line.startswith("20261120T")).split()[-1] == "2"  # none failed: no note
    assert next(line for line in out if line.startswith("main ")).endswith("1 run of a session whose tests failed")
    assert main(["runs", "show", "20261124T"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "saved 2026-11-22 03:00:00 UTC, commit aaaaaaaa, 1 record; 1 test failed: test_x.py::test_0[cpu]"
    )


def test_show_names_five_failed_tests_then_says_how_many_more(
    store: ResultsDir, capsys: pytest.CaptureFixture[str]
) -> None:
    failures = {f"test_x.py::test_{i}[cpu]": "failed" for i in range(7)}
    save_run(store.runs_dir / "20261123T010000.000000Z-aaaaaaaa.json", make_run(make_record(1e-3), failures=failures))
    assert main(["runs", "show", "20261123T"]) == 0
    about = capsys.readouterr().out.splitlines()[1]
    assert about.endswith("7 tests failed: " + ", ".join(list(failures)[:5]) + " and 2 more")


def test_the_failures_of_a_file_are_read_as_a_mapping_of_strings(store: ResultsDir) -> None:
    """A file written before the failures were kept has none; a crafted one's entries that are not strings go."""
    path = run_file(store, "20261125T010000.000000Z-aaaaaaaa", 10e-3)
    data = json.loads(path.read_text())
    assert "failures" not in data and load_runs(path)[0].failures == {}
    data["failures"] = {"test_x.py::test_0[cpu]": "failed", "test_x.py::test_1[cpu]": 3}
    path.write_text(json.dumps(data))
    assert load_runs(path)[0].failures == {"test_x.py::test_0[cpu]": "failed"}
    data["failures"] = ["test_x.py::test_0[cpu]"]
    path.write_text(json.dumps(data))
    assert load_runs(path)[0].failures == {}


def test_backups_and_lock_files_are_not_baselines(store: ResultsDir, capsys: pytest.CaptureFixture[str]) -> None:
    store.save_baseline("main", make_run(make_record(10e-3), fingerprint=DIRTY), replace=True)  # keeps a .bak
    (store.baselines_dir / "main.json.lock").touch()
    assert any(p.name.endswith(".bak") for p in store.baselines_dir.iterdir())
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "baselines in .gpuperf/baselines (1):" in out and ".bak" not in out and ".lock" not in out


def test_damaged_files_are_listed_with_the_reason_and_left_as_they_are(
    store: ResultsDir, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_run = store.runs_dir / "20261123T010000.000000Z-cccccccc.json"
    bad_run.write_text('{"schema": "pytest-gpuperf/results", "version": 2, "records": [')
    bad_baseline = store.baseline_path("nightly")
    bad_baseline.write_text(json.dumps({"schema": "pytest-gpuperf/baseline", "version": 1, "name": "x", "runs": []}))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (bad_run, bad_baseline)}
    assert main(["runs"]) == 0
    out = capsys.readouterr().out.splitlines()
    run_row = next(line for line in out if line.startswith("20261123T010000"))
    assert "damaged: .gpuperf/runs/20261123T010000.000000Z-cccccccc.json is not valid JSON" in run_row
    baseline_row = next(line for line in out if line.startswith("nightly"))
    assert 'damaged: .gpuperf/baselines/nightly.json is damaged: its "runs" list is missing or empty' in baseline_row
    assert any(line.startswith("main ") for line in out)  # the others are still listed
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before
    assert main(["runs", "show", "nightly"]) == 2
    assert "error: .gpuperf/baselines/nightly.json is damaged" in capsys.readouterr().err


def test_show_prints_the_sessions_results_table(store: ResultsDir, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "show", "20261120T010000.000000Z-aaaaaaaa"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "run 20261120T010000.000000Z-aaaaaaaa (.gpuperf/runs/20261120T010000.000000Z-aaaaaaaa.json):"
    assert out[1] == "saved 2026-11-22 03:00:00 UTC, commit aaaaaaaa, 2 records"
    assert out[2].split()[:4] == ["test", "device", "median", "95%"]
    assert out[4].split()[:4] == ["test_0", "cpu", "10", "ms"]
    assert out[5].split()[:4] == ["test_1", "cpu", "20", "ms"]
    # a unique start of an id is enough; an interrupted run says so
    assert main(["runs", "show", "20261121"]) == 0
    assert "1 record, interrupted: the records measured before" in capsys.readouterr().out


def test_show_a_baseline_shows_its_newest_run_and_how_many_it_holds(
    store: ResultsDir, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "show", "main", "--format", "github"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "baseline 'main' (.gpuperf/baselines/main.json) holds 2 runs; the newest:"
    assert out[2].startswith("| test ") and any(line.startswith("| test_y ") for line in out)


def test_show_the_percent_of_peak_a_run_recorded(store: ResultsDir, capsys: pytest.CaptureFixture[str]) -> None:
    path = run_file(store, "20261124T010000.000000Z-aaaaaaaa", 10e-3)
    data = json.loads(path.read_text())
    data["devices"] = {"cpu": {"name": "AMD EPYC", "reference_peak": {"FLOP/s": 2e11, "how": "matmul float32"}}}
    path.write_text(json.dumps(data))
    assert main(["runs", "show", "20261124T010000.000000Z-aaaaaaaa"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "% peak" in out[2] and "50%" in out[4]  # 1e9 FLOP in 10 ms of a 200 GFLOP/s peak
    # The run's best FLOP/s, its record, is below the recorded reference peak: the reference peak is the ceiling.
    assert out[-1] == "% peak: of cpu's reference peak, the best FLOP/s measured in this run: matmul float32"


@pytest.mark.parametrize(
    ("ident", "hint"),
    [
        ("mian", "did you mean main?"),
        ("zzz", "(baselines there: main; 3 runs, the newest 20261122T010000.000000Z-bbbbbbbb-dirty); record a"),
        ("2026112", "'2026112' starts 3 run ids"),
    ],
)
def test_an_unknown_id_exits_2_with_the_ids_there(
    store: ResultsDir, capsys: pytest.CaptureFixture[str], ident: str, hint: str
) -> None:
    assert main(["runs", "show", ident]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and hint in captured.err and "Traceback" not in captured.err


def test_a_missing_results_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--results-dir", str(tmp_path / "nope")]) == 2
    assert f"error: no results directory {tmp_path / 'nope'}" in capsys.readouterr().err
    assert main(["runs", "show", "main", "--results-dir", str(tmp_path / "nope")]) == 2


def test_an_empty_results_directory_lists_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--results-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"runs in {tmp_path / 'runs'} (0, oldest first):",
        "",
        f"baselines in {tmp_path / 'baselines'} (0):",
    ]


def test_prune_deletes_the_oldest_runs_and_never_a_baseline(
    store: ResultsDir, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = store.runs_dir / "copied-by-hand.json"
    foreign.write_text("{}")
    baseline = store.baseline_path("main").read_bytes()
    assert main(["runs", "prune", "--keep", "1", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "runs prune: would delete .gpuperf/runs/20261120T010000.000000Z-aaaaaaaa.json",
        "runs prune: would delete .gpuperf/runs/20261121T010000.000000Z-aaaaaaaa.json",
        "runs prune: would delete 2 run files, kept 2 run files; baselines in .gpuperf/baselines were not touched",
    ]
    assert len(list(store.runs_dir.glob("*.json"))) == 4
    assert main(["runs", "prune", "--keep", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("runs prune: deleted 2 run files, kept 2 run files")
    assert sorted(p.name for p in store.runs_dir.glob("*.json")) == [
        "20261122T010000.000000Z-bbbbbbbb-dirty.json",
        "copied-by-hand.json",  # not named as a session names its runs: never pruned
    ]
    assert store.baseline_path("main").read_bytes() == baseline
    assert len(load_runs(store.baseline_path("main"))) == 2  # a baseline holds copies of its runs
    assert main(["runs", "prune", "--keep", "0"]) == 0
    assert [p.name for p in store.runs_dir.glob("*.json")] == ["copied-by-hand.json"]


def test_prune_deletes_a_runs_traces_with_it(store: ResultsDir) -> None:
    oldest = store.traces_dir / "20261120T010000.000000Z-aaaaaaaa"
    newest = store.traces_dir / "20261122T010000.000000Z-bbbbbbbb-dirty"
    for folder in (oldest, newest):
        folder.mkdir(parents=True)
        (folder / "test_x-01234567.head.json").write_text("{}")
    assert main(["runs", "prune", "--keep", "1"]) == 0
    assert not oldest.exists() and (newest / "test_x-01234567.head.json").is_file()


@pytest.mark.parametrize(
    ("keep", "why"), [("-1", "'-1' is not a whole number"), ("all", "'all' is not a whole number")]
)
def test_prune_refuses_a_bad_count(store: ResultsDir, capsys: pytest.CaptureFixture[str], keep: str, why: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["runs", "prune", "--keep", keep])
    assert info.value.code == 2
    assert f"argument --keep: {why}" in capsys.readouterr().err
    assert len(list(store.runs_dir.glob("*.json"))) == 3


def test_the_results_dir_may_come_before_or_after_the_subcommand(
    store: ResultsDir, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.chdir(tmp_path / ".gpuperf")
    assert main(["runs", "--results-dir", "..", "show", "main"]) == 2  # .. holds no runs/ or baselines/
    assert main(["runs", "--results-dir", ".", "show", "main"]) == 0
    assert main(["runs", "show", "main", "--results-dir", "."]) == 0


# ---------------------------------------------------------------- .gitignore


def test_a_results_directory_created_gets_a_gitignore_of_everything(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path / "deep" / ".gpuperf")
    store.save_run(make_run(make_record(1e-3)))
    assert (store.root / ".gitignore").read_text() == GITIGNORE
    assert GITIGNORE.splitlines()[-1] == "*"
    assert [p.name for p in store.root.iterdir() if p.name.startswith(".")] == [".gitignore"]  # no temporary left


def test_an_existing_results_directory_or_gitignore_is_left_alone(tmp_path: Path) -> None:
    mine = tmp_path / "kept"
    mine.mkdir()  # a directory the user made (to commit baselines, say): no .gitignore added
    ResultsDir(mine).check_writable()
    ResultsDir(mine).save_baseline("main", make_run(make_record(1e-3)))
    assert not (mine / ".gitignore").exists()
    store = ResultsDir(tmp_path / "new")
    store.check_writable()
    (store.root / ".gitignore").write_text("!baselines/\n")
    store.save_run(make_run(make_record(1e-3)))
    assert (store.root / ".gitignore").read_text() == "!baselines/\n"


def test_git_ignores_the_results_directory_of_a_real_session(pytester: pytest.Pytester) -> None:
    import subprocess

    pytester.makepyfile(test_m="def test_m(gpuperf):\n    gpuperf.measure(lambda: None)\n")
    subprocess.run(["git", "init", "-q", str(pytester.path)], check=True)
    result = pytester.runpytest(
        "--gpuperf-device=cpu", "--gpuperf-min-time=0.005", "--gpuperf-max-time=0.05", "--gpuperf-warmup-time=0.01"
    )
    result.assert_outcomes(passed=1)
    assert (pytester.path / ".gpuperf" / ".gitignore").read_text() == GITIGNORE
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".gpuperf" not in status and "test_m.py" in status


def test_a_prune_killed_while_deleting_traces_leaves_none_without_their_run(
    store: ResultsDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23, item 12 (bench/fault_injection.py): a prune killed inside a run's traces left that folder with its
    run file gone, so no later prune ever removed it. The traces go first, the run file last."""
    oldest = store.traces_dir / "20261120T010000.000000Z-aaaaaaaa"
    oldest.mkdir(parents=True)
    for name in ("a-0123abcd.head.json", "b-0123abcd.base.json"):
        (oldest / name).write_text("{}")
    unlink = os.unlink

    def killed_inside(path: str) -> None:
        unlink(path)  # one trace file gone, then the kill
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "unlink", killed_inside)
    assert main(["runs", "prune", "--keep", "1"]) == 130  # interrupted
    stems = {p.stem for p in store.runs_dir.glob("*.json")}
    assert [d.name for d in store.traces_dir.iterdir() if d.name not in stems] == []  # no orphaned folder
    assert len(list(oldest.iterdir())) == 1
    monkeypatch.setattr(os, "unlink", unlink)
    assert main(["runs", "prune", "--keep", "1"]) == 0  # the next prune removes the rest
    assert not oldest.exists() and len(list(store.runs_dir.glob("*.json"))) == 1


# ---------------------------------------------------------------- issue 36: no file we do not own is removed

OLDEST = "20261120T010000.000000Z-aaaaaaaa"
OURS = "test_x.py_test_0_cpu-0123abcd.head.json"  # a name our trace writer gives


def test_prune_deletes_only_the_traces_our_writer_names(store: ResultsDir, capsys: pytest.CaptureFixture[str]) -> None:
    folder = store.traces_dir / OLDEST
    folder.mkdir(parents=True)
    (folder / OURS).write_text("{}")
    (folder / "notes.txt").write_text("mine, not pytest-gpuperf's")
    assert main(["runs", "prune", "--keep", "1"]) == 0
    out = capsys.readouterr().out
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "mine, not pytest-gpuperf's"
    assert f"runs prune: kept {folder}: it holds files pytest-gpuperf did not write (notes.txt)" in out
    assert not (store.runs_dir / f"{OLDEST}.json").exists()


@pytest.mark.parametrize("link", ["traces", f"traces/{OLDEST}"])
def test_prune_never_deletes_through_a_symbolic_link(
    store: ResultsDir, tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    """Issue 36: with ``.gpuperf/traces`` a link to another program's folder, prune deleted a file there, in a
    folder named like a pruned run. Nothing is deleted through a link, even a file named as ours."""
    foreign = tmp_path / "elsewhere"
    inside = foreign / OLDEST if link == "traces" else foreign
    inside.mkdir(parents=True)
    for name in ("foreign.txt", OURS):
        (inside / name).write_text("another program's")
    (store.root / link).parent.mkdir(parents=True, exist_ok=True)
    (store.root / link).symlink_to(foreign)
    assert main(["runs", "prune", "--keep", "1"]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in inside.iterdir()) == sorted(["foreign.txt", OURS])
    assert all(p.read_text() == "another program's" for p in inside.iterdir())
    assert f"{store.root / link} is a symbolic link" in out and "Traceback" not in out
    assert (store.root / link).is_symlink()
