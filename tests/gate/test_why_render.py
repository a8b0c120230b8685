"""The "why" on the stored route (``compare_runs``), as the terminal, GitHub's job summary and the HTML report
show it: records with hand-made work profiles, a planted extra op on the slower side."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.gate import GateResult, Verdict, compare_runs, why_lines
from pytest_gpuperf.gate._render import github_summary, why_markdown
from pytest_gpuperf.measuring import PROFILE, OpStat, WorkProfile
from pytest_gpuperf.report import compare, render
from pytest_gpuperf.results import Baseline, Record, ResultsDir, save_run
from tests.synthetic import make_record, make_run

MS = 1e-3
CRAFTED = "mylib::<script>alert('x')</script>|*_`"


def profiled(median: float, *ops: OpStat, test: str = "t.py::test_step[cpu]") -> Record:
    record = make_record(median, test=test)
    profile = WorkProfile(level="full", calls=1, ops=ops)
    return dataclasses.replace(record, measurement=record.measurement.with_reading(PROFILE, profile))


def planted(extra: str = "aten::mm") -> tuple[list[Record], list[Record]]:
    """Baseline 10 ms per call (8 ms in one mm); current 13 ms: a second op ``extra`` of 2.5 ms, 0.5 ms outside."""
    base = profiled(10 * MS, OpStat("aten::mm", 1, 8 * MS))
    head = profiled(13 * MS, OpStat("aten::mm", 1, 8 * MS), OpStat(extra, 1, 2.5 * MS))
    return [base] * 3, [head]


def result_of(extra: str = "aten::mm") -> GateResult:
    base, head = planted(extra)
    return compare_runs([make_run(r) for r in base], [make_run(*head)])


def test_a_slower_row_of_the_stored_route_gets_its_why() -> None:
    (row,) = result_of("aten::gelu").rows
    assert row.verdict is Verdict.SLOWER and row.why is not None
    first, outside = row.why.lines
    assert (first.name, first.base_count, first.head_count) == ("aten::gelu", 0.0, 1.0)
    assert abs(first.share - 2.5 / 3) < 0.01 and outside.kind == "outside"


def test_an_unchanged_row_gets_none() -> None:
    base, _ = planted()
    (row,) = compare_runs([make_run(r) for r in base], [make_run(base[0])]).rows
    assert row.verdict is Verdict.UNCHANGED and row.why is None


def test_the_terminal_lines() -> None:
    lines = why_lines(result_of("aten::gelu"))
    assert lines[0].startswith("why test_step [cpu] SLOWER: +3 ms/call; the top 2 lines explain 100% of it")
    assert lines[1] == "  +2.5 ms/call   83%  op aten::gelu, 0 -> 1 calls/call"
    assert lines[2] == "  +500 us/call   17%  outside any op (Python, the host, waits)"


def test_a_share_above_all_of_it_says_that_lines_got_faster() -> None:
    # Baseline 10 ms per call (8 ms mm, 1 ms add); current 11 ms: mm 11 ms, the add gone.
    base = profiled(10 * MS, OpStat("aten::mm", 1, 8 * MS), OpStat("aten::add", 1, 1 * MS))
    head = profiled(11 * MS, OpStat("aten::mm", 1, 11 * MS))
    lines = why_lines(compare_runs([make_run(base)] * 3, [make_run(head)]))
    assert lines[0].endswith("the top line explains 300% of it; lines that got faster took back 200%")
    assert lines[1] == "  +3 ms/call  300%  op aten::mm, 1 calls/call"
    assert lines[2] == "  -1 ms/call -100%  op aten::add, 1 -> 0 calls/call"


def test_a_python_call_is_named_as_one() -> None:
    base = profiled(10 * MS, OpStat("aten::mm", 1, 8 * MS))
    head = make_record(13 * MS, test="t.py::test_step[cpu]")
    ops, python = (OpStat("aten::mm", 1, 8 * MS),), (OpStat("Tensor.item", 400, 2.5 * MS),)
    profile = WorkProfile(level="full", calls=1, ops=ops, python=python)
    head = dataclasses.replace(head, measurement=head.measurement.with_reading(PROFILE, profile))
    lines = why_lines(compare_runs([make_run(base)] * 3, [make_run(head)]))
    assert lines[1] == "  +2.5 ms/call   83%  Python call Tensor.item, 0 -> 400 calls/call"


def test_the_job_summary_escapes_names() -> None:
    summary = github_summary(result_of(CRAFTED), title="t")
    assert "<script>" not in summary and "&lt;script&gt;" in summary
    why = [line for line in why_markdown(result_of(CRAFTED)) if "mylib" in line]
    assert len(why) == 1 and "\\|\\*\\_\\`" in why[0]


def test_the_html_report_shows_it_escaped() -> None:
    base, head = planted(CRAFTED)
    run = make_run(*head)
    page = render(run, compare(Baseline(Path("/b/main.json"), [make_run(r) for r in base], "main"), run))
    assert '<table class="why">' in page
    assert "<script" not in page.lower()
    assert "mylib::&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;|*_`" in page
    assert "83%" in page and "0 -&gt; 1 calls/call" in page


def test_the_compare_command_prints_it_and_writes_it_in_the_job_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pytest-gpuperf compare`` of saved files (the baseline's profiles saved in its records)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    base, head = planted("aten::gelu")
    for record in base:
        ResultsDir(tmp_path / ".gpuperf").save_baseline("main", make_run(record))
    save_run(tmp_path / "head.json", make_run(*head))
    assert main(["compare", "main", "head.json"]) == 1
    out = capsys.readouterr().out.splitlines()
    start = out.index("why test_step [cpu] SLOWER: +3 ms/call; the top 2 lines explain 100% of it")
    assert out[start + 1] == "  +2.5 ms/call   83%  op aten::gelu, 0 -> 1 calls/call"
    # the count lines (issue 22, item 2: one more op) come between the why and the summary line
    assert out[start + 3] == "test_step [cpu]: counts more (ops more; failing on ops)"
    assert out[-1].startswith("gpuperf gate: FAILED: 1 slower; ")
    summary = (tmp_path / "summary.md").read_text()
    assert "- **why** test\\_step \\[cpu\\] SLOWER: " in summary and "aten::gelu" in summary
