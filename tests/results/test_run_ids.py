"""Every command that takes a run takes the ids ``pytest-gpuperf runs`` prints: one resolver, ``ResultsDir.find``.

Issue 23 item 10: ``report`` and ``compare`` refused the run ids the listing prints, while ``runs show`` took even a
unique start of one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.results import ResultsDir, save_run
from tests.synthetic import make_record, make_run

FIRST, SECOND = "20261120T010000.000000Z-aaaaaaaa", "20261121T010000.000000Z-aaaaaaaa"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ResultsDir:
    """.gpuperf under the cwd: two run files, and baseline 'main'."""
    monkeypatch.chdir(tmp_path)
    store = ResultsDir(Path(".gpuperf"))
    store.make(store.runs_dir)
    for stem in (FIRST, SECOND):
        save_run(store.runs_dir / f"{stem}.json", make_run(make_record(10e-3)))
    store.save_baseline("main", make_run(make_record(10e-3)))
    return store


def listed_ids(capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    return [line.split()[0] for line in lines if line.startswith("2026")]


@pytest.mark.parametrize("how", ["id", "start"])
def test_compare_report_and_export_take_the_ids_runs_prints(
    store: ResultsDir, capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str
) -> None:
    first, second = listed_ids(capsys)
    assert (first, second) == (FIRST, SECOND)
    if how == "start":  # what runs show takes: a unique start of an id
        first, second = first[:10], second[:10]
    assert main(["compare", first, second]) == 0, capsys.readouterr().err
    assert f"base: results file .gpuperf/runs/{FIRST}.json" in capsys.readouterr().out
    assert main(["compare", "main", second]) == 0
    capsys.readouterr()
    assert main(["report", second, "main", "-o", str(tmp_path / "r.html")]) == 0, capsys.readouterr().err
    assert "report: wrote 1 record against baseline 'main'" in capsys.readouterr().out
    assert main(["export", first, "--format", "bencher"]) == 0, capsys.readouterr().err
    assert main(["runs", "show", first]) == 0


def test_an_ambiguous_start_lists_the_candidates(store: ResultsDir, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["compare", "2026112", "main"], ["report", "main", "2026112"], ["runs", "show", "2026112"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err == (
            f"error: '2026112' starts 2 run ids in .gpuperf/runs ({FIRST}, {SECOND}); give more of one, "
            "or the whole id (pytest-gpuperf runs lists them)\n"
        ), command


def test_an_unknown_name_says_what_there_is_and_how_to_make_one(
    store: ResultsDir, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", "mian", "main"]) == 2
    assert capsys.readouterr().err == (
        f"error: no baseline or run 'mian' in .gpuperf (baselines there: main; 2 runs, the newest {SECOND}); "
        "did you mean main? "
        "Record a baseline on the base commit with: pytest --gpuperf-save=mian, "
        "or give a run id (pytest-gpuperf runs --results-dir .gpuperf lists them) or the path of a results file\n"
    )


def test_the_gate_takes_a_run_id_too(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(gpuperf):\n    gpuperf.measure(lambda: sum(range(100)))\n")
    fast = ("--gpuperf-device=cpu", "--gpuperf-max-time=0.1", "--gpuperf-memory=off", "-p", "no:cacheprovider")
    assert pytester.runpytest(*fast).ret == 0
    (run,) = (pytester.path / ".gpuperf" / "runs").glob("*.json")
    # Neither the quiet wait nor confirmation runs of a row that looks slower on a busy machine: each costs seconds.
    quick = ("--gpuperf-quiet-wait=0", "--gpuperf-confirm=0")
    result = pytester.runpytest(*fast, *quick, f"--gpuperf-compare={run.stem[:12]}", "--gpuperf-fail-on=none")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"against results file */{run.name} (1 run of *"])
