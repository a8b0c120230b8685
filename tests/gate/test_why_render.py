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
    """Three current runs of the baseline's record: evidence that can see a change of the tolerance, unchanged."""
    base, _ = planted()
    (row,) = compare_runs([make_run(r) for r in base], [make_run(r) for r in base]).rows
    assert row.verdict is Verdict.UNCHANGED and row.why is None


def test_the_terminal_lines() -> None:
    lines = why_lines(result_of("aten::gelu"))
    # the time outside any op grew 0.5 ms, within the row's own interval: it does not rank, and is shown, as always
    assert lines[0] == (
        "why test_step [cpu] SLOWER: +3 ms/call; the top line explains 83% of it; the op times cannot separate "
        "1 other line from noise (each moved by 586.2 us/call or less, within the row's own interval)"
    )
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


def test_lines_within_the_rows_noise_are_said_not_ranked() -> None:
    """Issue 35: the mm and the add, of the same count, took 0.1 and 0.05 ms more per call, and the time outside
    them 0.32 ms more, each less than the row's own interval; the heading says the op times cannot separate them
    from noise, and only the planted op ranks (the outside line is shown, as always)."""
    base = [profiled(ms * MS, OpStat("aten::mm", 1, 8 * MS), OpStat("aten::add", 1, 1 * MS)) for ms in (10, 10.3, 9.8)]
    head = profiled(
        13 * MS, OpStat("aten::mm", 1, 8.1 * MS), OpStat("aten::add", 1, 1.05 * MS), OpStat("aten::gelu", 1, 2.5 * MS)
    )
    lines = why_lines(compare_runs([make_run(r) for r in base], [make_run(head)]))
    assert lines[0] == (
        "why test_step [cpu] SLOWER: +2.969 ms/call; the top line explains 84% of it; the op times cannot separate "
        "3 other lines from noise (each moved by 776.7 us/call or less, within the row's own interval)"
    )
    assert lines[1] == "    +2.5 ms/call   84%  op aten::gelu, 0 -> 1 calls/call"
    assert lines[2].endswith("outside any op (Python, the host, waits)") and len(lines) == 3


def inconclusive() -> GateResult:
    """A noisy baseline (10, 10.6 and 9.5 ms per call, one mm of 8 ms) and a current run of 10.3 ms with an added
    gelu of 0.5 ms: the timing is inconclusive, the counts went up."""
    base = [profiled(ms * MS, OpStat("aten::mm", 1, 8 * MS)) for ms in (10, 10.6, 9.5)]
    head = profiled(10.3 * MS, OpStat("aten::mm", 1, 8 * MS), OpStat("aten::gelu", 1, 0.5 * MS))
    return compare_runs([make_run(r) for r in base], [make_run(head)])


def test_an_inconclusive_row_whose_counts_went_up_gets_its_count_lines_with_both_sides_times() -> None:
    """Issue 35: a row that fails on counts while its timing is inconclusive had no why (22 of 30 planted runs)."""
    result = inconclusive()
    (row,) = result.rows
    assert row.verdict is Verdict.INCONCLUSIVE and row in result.failing
    assert row.why is not None and row.why.counts_only
    lines = why_lines(result)
    assert lines[0] == (
        "why test_step [cpu] MORE WORK (timing inconclusive): +276.7 us/call, which the times cannot judge "
        "(its interval: -709.2 us to +1.367 ms/call); the lines whose count changed, each with its time per call on "
        "both sides"
    )
    assert lines[1] == "    +500 us/call  op aten::gelu, 0 -> 1 calls/call; 0 ns -> 500 us/call"
    assert lines[2] == "  -223.3 us/call  outside any op (Python, the host, waits), 2.023 ms -> 1.8 ms/call"
    assert len(lines) == 3
    markdown = why_markdown(result)
    assert markdown[1] == "  - \\+500 us/call op aten::gelu, 0 -> 1 calls/call; 0 ns -> 500 us/call"
    # no share of a slowdown the times did not call, on the page either
    run = make_run(profiled(10.3 * MS, OpStat("aten::mm", 1, 8 * MS), OpStat("aten::gelu", 1, 0.5 * MS)))
    base = [make_run(profiled(ms * MS, OpStat("aten::mm", 1, 8 * MS))) for ms in (10, 10.6, 9.5)]
    page = render(run, compare(Baseline(Path("/b/main.json"), base, "main"), run))
    why = page[page.index('<table class="why">') :]
    assert "which the times cannot judge" in why and "<td>-</td>" in why and "%</td>" not in why.split("</table>")[0]


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
    start = next(i for i, line in enumerate(out) if line.startswith("why test_step [cpu] SLOWER: +3 ms/call; "))
    assert out[start + 1] == "  +2.5 ms/call   83%  op aten::gelu, 0 -> 1 calls/call"
    # the count lines (issue 22, item 2: one more op) come between the why and the summary line
    assert out[start + 3] == "test_step [cpu]: counts more (ops more; failing on ops)"
    assert out[-1].startswith("gpuperf gate: FAILED: 1 slower; ")
    summary = (tmp_path / "summary.md").read_text()
    assert "- **why** test\\_step \\[cpu\\] SLOWER: " in summary and "aten::gelu" in summary
