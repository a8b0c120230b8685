"""Every output path replaces only a file this tool wrote, of the same kind (issue 23, item 1).

``pytest-gpuperf report -o`` and ``export -o`` (every format) are refused, exit 2 with one line and nothing
written, when the path holds a baseline, ``pytest.ini``, a test file or another kind of our outputs; a file of
the same kind that we wrote is replaced. Writing never removes another program's hidden temporary files, and
the lock file is never opened through a symbolic link.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.results import ResultsError, atomic_write_text, locked, save_run
from pytest_gpuperf.results._export import FORMATS
from tests.synthetic import make_record, make_run, save_main_baseline

NOT_OURS = {
    "pytest.ini": "[pytest]\naddopts = -q\n",
    "test_model.py": "def test_model():\n    assert True\n",
    "workloads.py": "WORKLOADS = {}\n",
}


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Baseline 'main' and a results file head.json; files that are not ours beside them; cwd is tmp_path."""
    monkeypatch.chdir(tmp_path)
    save_main_baseline(tmp_path)
    save_run(tmp_path / "head.json", make_run(make_record(12e-3)))
    for name, text in NOT_OURS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def victims(results: Path) -> list[Path]:
    return [results / ".gpuperf" / "baselines" / "main.json", *(results / name for name in NOT_OURS)]


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], target: Path) -> str:
    before = target.read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert target.read_bytes() == before
    return captured.err


def test_report_output_never_replaces_a_file_that_is_not_our_report(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in victims(results):
        err = refused(capsys, ["report", "head.json", "main", "-o", str(target)], target)
        assert err.startswith(f"error: -o {target}: that file exists and is ")
        assert "choose another path (an HTML report written by pytest-gpuperf is replaced)" in err
    assert main(["report", "head.json", "-o", "page.html"]) == 0
    assert main(["report", "head.json", "main", "-o", "page.html"]) == 0  # our own page: replaced
    assert "against baseline 'main'" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_export_output_never_replaces_a_file_that_is_not_that_export(
    results: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    for target in victims(results):
        err = refused(capsys, ["export", "head.json", "--format", fmt, "-o", str(target)], target)
        assert err.startswith(f"error: -o {target}: that file exists and is ")
    assert main(["export", "head.json", "--format", fmt, "-o", "out.json"]) == 0
    assert main(["export", "main", "--format", fmt, "-o", "out.json"]) == 0  # our own export: replaced
    other = next(f for f in FORMATS if f != fmt)
    err = refused(capsys, ["export", "head.json", "--format", other, "-o", "out.json"], results / "out.json")
    assert f"is not a {other} export written by pytest-gpuperf" in err


def test_an_export_edited_by_hand_is_no_longer_ours(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "head.json", "--format", "bencher", "-o", "bmf.json"]) == 0
    edited = results / "bmf.json"
    edited.write_text(edited.read_text().replace("  ", "    "))  # a person (or another tool) rewrote it
    refused(capsys, ["export", "head.json", "--format", "bencher", "-o", "bmf.json"], edited)


def test_a_fifo_or_a_results_file_is_not_an_html_report(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, ["report", "head.json", "-o", "head.json"], results / "head.json")
    assert "is a pytest-gpuperf results file" in err
    os.mkfifo(results / "pipe")
    assert main(["report", "head.json", "-o", "pipe"]) == 2
    assert "that is not a regular file" in capsys.readouterr().err


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_writing_leaves_other_programs_temporary_files_alone(tmp_path: Path) -> None:
    dead = dead_pid()
    foreign = [tmp_path / f".x.{dead}.y.tmp", tmp_path / f".notes.md.{dead}.abc.tmp", tmp_path / ".swap.tmp"]
    for path in foreign:
        path.write_text("another program's work in progress")
    ours_dead = tmp_path / f".run.json.gpuperf-{dead}-ab12cd34.tmp"
    ours_dead.write_text("{half")
    kinetos = tmp_path / f".trace.json.gpuperf-{dead}-ab12cd34.tmp.tmp"  # torch's own, beside one of ours (issue 36)
    kinetos.write_text("{half")
    ours_live = tmp_path / f".run.json.gpuperf-{os.getppid()}-ef56gh78.tmp"
    ours_live.write_text("{")
    atomic_write_text(tmp_path / "run.json", "{}\n")
    assert all(path.exists() for path in foreign)
    assert not ours_dead.exists() and not kinetos.exists() and ours_live.exists()


def test_the_temporary_file_name_is_unmistakably_ours(tmp_path: Path) -> None:
    seen: list[str] = []

    def spy(text: str) -> None:
        seen.extend(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))

    from pytest_gpuperf.results._files import atomic_export

    atomic_export(tmp_path / "trace.json", spy, whole=lambda path: "")
    assert len(seen) == 1 and seen[0].startswith(f".trace.json.gpuperf-{os.getpid()}-")


def test_every_temporary_of_an_export_and_torchs_beside_it_goes_with_a_dead_writer_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``atomic_export(..., compress=True)`` can leave when its process dies: its two temporaries (the trace,
    then the gzipped copy), and beside each torch's own: kineto's ``export_chrome_trace(path)`` writes ``<path>.tmp``
    and renames it (strace, torch 2.13), ``.<name>.gpuperf-<pid>-<8>.tmp.tmp`` (one was seen on a full tmpfs)."""
    from pytest_gpuperf.results import _files

    made: list[str] = []
    real = _files._temporary

    def recorded(path: Path) -> tuple[int, str]:
        fd, name = real(path)
        made.append(Path(name).name)
        return fd, name

    monkeypatch.setattr(_files, "_temporary", recorded)
    _files.atomic_export(tmp_path / "trace.json", lambda name: Path(name).write_text("{}"), whole=lambda path: "")
    _files.atomic_export(
        tmp_path / "trace.json.gz", lambda name: Path(name).write_text("{}"), whole=lambda path: "", compress=True
    )
    assert len(made) == 3 and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    dead, live = dead_pid(), os.getppid()
    left = {
        pid: [
            tmp_path / (name.replace(f"-{os.getpid()}-", f"-{pid}-", 1) + end) for name in made for end in ("", ".tmp")
        ]
        for pid in (dead, live)
    }
    for path in left[dead] + left[live]:
        path.write_text("{half")
    assert sorted(_files.remove_stale_temporaries(tmp_path)) == sorted(left[dead])
    assert all(path.exists() for path in left[live])


@pytest.mark.parametrize("dangling", [True, False])
def test_the_lock_file_is_never_opened_through_a_symbolic_link(tmp_path: Path, dangling: bool) -> None:
    results, outside = tmp_path / "results", tmp_path / "outside"
    results.mkdir()
    outside.mkdir()
    target = outside / "planted"
    if not dangling:
        target.write_text("someone's file\n")
    (results / "main.json.lock").symlink_to(target)
    with (
        pytest.raises(ResultsError, match=r"main\.json\.lock is a symbolic link") as error,
        locked(results / "main.json"),
    ):
        pass
    assert "\n" not in str(error.value)
    assert sorted(p.name for p in outside.iterdir()) == ([] if dangling else ["planted"])
    if not dangling:
        assert target.read_text() == "someone's file\n"
