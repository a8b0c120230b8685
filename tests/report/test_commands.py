"""``pytest-gpuperf report RUN [BASELINE]``: the page written from saved files; bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.report._svg import MAX_DOTS
from pytest_gpuperf.results import save_run
from tests.synthetic import make_record, make_run, save_main_baseline


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Baseline 'main' of three runs at 10 ms and a results file head.json at 12 ms; cwd is tmp_path."""
    monkeypatch.chdir(tmp_path)
    save_main_baseline(tmp_path)
    save_run(tmp_path / "head.json", make_run(make_record(12e-3)))
    return tmp_path


def test_a_run_against_a_baseline(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "head.json", "main", "-o", "out/report.html"]) == 0  # a slowdown is shown, not judged
    out = capsys.readouterr().out
    assert out.startswith("report: wrote 1 record against baseline 'main' ")
    assert out.rstrip().endswith("to out/report.html")
    html = (results / "out/report.html").read_text(encoding="utf-8")
    assert "SLOWER" in html and "1.200 [" in html and "baseline noise: run-to-run" in html
    # the current samples, and the baseline's three runs of 41 thinned to MAX_DOTS over their quantile box
    assert html.count("<circle") == 41 + MAX_DOTS and html.count('class="box"') == 1
    assert f"baseline: {MAX_DOTS} of 123 samples drawn (evenly by rank)" in html
    assert not list((results / "out").glob(".*.tmp"))  # written atomically: no temporary left


def test_a_run_alone_goes_to_the_default_path(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "main"]) == 0
    captured = capsys.readouterr()
    assert "reported the newest run" in captured.err
    assert captured.out == "report: wrote 1 record to gpuperf-report.html\n"
    html = (results / "gpuperf-report.html").read_text(encoding="utf-8")
    assert "ratio [95% CI]" not in html and html.count("<circle") == 41


def test_an_unknown_baseline_is_bad_input(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "head.json", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no baseline or run 'nope'") and "baselines there: main" in err
    assert not (results / "gpuperf-report.html").exists()


def test_an_unwritable_output_is_bad_input(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (results / "taken").write_text("a file, not a directory")
    assert main(["report", "head.json", "-o", "taken/report.html"]) == 2
    assert capsys.readouterr().err.startswith("error: -o taken/report.html: ")
