"""``--gpuperf-html=PATH``: the session writes its HTML report at the end, with the gate's verdicts when comparing."""

from __future__ import annotations

import pytest

from pytest_gpuperf.cli import main

FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.005",
    "--gpuperf-max-time=0.2",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-memory=off",
    "--gpuperf-confirm=0",
    "--gpuperf-quiet-wait=0",  # auto: up to 10 s per saving or comparing run on a busy machine
    "-p",
    "no:cacheprovider",
)

TEST = """
def test_sum(gpuperf):
    data = list(range(200))
    gpuperf.measure(lambda: sum(data), flops=200)
"""


def test_the_session_writes_its_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it=TEST)
    result = pytester.runpytest(*FAST, "--gpuperf-html=out/report.html")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["gpuperf: wrote the HTML report of 1 record to out/report.html"])
    html = (pytester.path / "out/report.html").read_text(encoding="utf-8")
    assert "test_it.py::test_sum[cpu]" in html and "<svg" in html and "<circle" in html
    assert "ratio [95% CI]" not in html  # no baseline, no verdicts


def test_with_a_baseline_the_report_holds_the_verdicts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it=TEST)
    assert pytester.runpytest(*FAST, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    result = pytester.runpytest(*FAST, "--gpuperf-compare=main", "--gpuperf-html=report.html", "--gpuperf-fail-on=none")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["gpuperf: wrote the HTML report of 1 record to report.html"])
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert "ratio [95% CI]" in html and "against" in html and "baseline noise: run-to-run" in html
    assert 'class="lane baseline"' in html


def test_a_device_without_an_energy_counter_is_said_once_per_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35, item 9: the page said why the CPU has no energy figure under its results table, then again in every
    record's card; once per session, with the verdicts table and several cards on the page, and once in the
    terminal. A record whose device has a counter that read too little for it keeps its own line."""
    from pytest_gpuperf.measuring import _energy

    monkeypatch.setattr(_energy, "rapl_counter", lambda root=_energy.POWERCAP: (None, "no RAPL zone: a stand-in"))
    pytester.makepyfile(test_it=TEST + TEST.replace("test_sum", "test_other"))
    assert pytester.runpytest(*FAST, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    result = pytester.runpytest(*FAST, "--gpuperf-compare=main", "--gpuperf-html=report.html", "--gpuperf-fail-on=none")
    assert result.ret == pytest.ExitCode.OK
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert html.count('class="record"') == 2 and "ratio [95% CI]" in html
    assert html.count("no RAPL zone: a stand-in") == 1
    assert "energy: none on cpu: no RAPL zone: a stand-in" in html
    assert [line for line in result.stdout.lines if "no RAPL zone" in line] == [
        "energy: none on cpu: no RAPL zone: a stand-in"
    ]


def test_a_directory_is_refused_before_measuring(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it=TEST)
    pytester.mkdir("out")
    result = pytester.runpytest(*FAST, "--gpuperf-html=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-html=out: that is a directory; give a file path such as out/report.html"])


def test_the_notes_of_the_session_are_in_its_report_and_results_file(pytester: pytest.Pytester) -> None:
    """Issue 23 item 8: the notes (the suites' conclusions: AMP speedup, checkpoint saving) were printed in the
    terminal only; the page and the results file dropped them (on main: neither holds the note)."""
    pytester.makepyfile(
        test_it=TEST + '\n\ndef test_noted(gpuperf):\n    gpuperf.note("AMP (bf16) 1.8x faster <b>&")\n'
    )
    result = pytester.runpytest(*FAST, "--gpuperf-html=report.html", "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK
    html = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert "test_it.py::test_noted[cpu]</span>: AMP (bf16) 1.8x faster &lt;b&gt;&amp;</li>" in html
    assert main(["report", "run.json", "-o", "again.html"]) == 0
    assert "AMP (bf16) 1.8x faster &lt;b&gt;&amp;" in (pytester.path / "again.html").read_text(encoding="utf-8")
