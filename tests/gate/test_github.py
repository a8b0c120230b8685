"""The gate on GitHub Actions: the verdict table appended to $GITHUB_STEP_SUMMARY, annotations for slower records."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.gate import GateResult, Policy, compare_runs
from pytest_gpuperf.gate._render import SUMMARY_LIMIT, github_annotations, locate, locate_workload, report_to_github
from pytest_gpuperf.results import save_run
from tests.synthetic import make_record, make_run, save_main_baseline

SOURCE = """
import pytest


class TestSteps:
    @pytest.mark.parametrize("n", [1])
    def test_step(self, n):
        pass


def test_other():
    pass
"""


def test_locate_finds_the_def_line_of_a_method_and_a_function(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(SOURCE)
    assert locate("tests/test_x.py::TestSteps::test_step[1-cpu]", tmp_path) == ("tests/test_x.py", 7)
    assert locate("tests/test_x.py::test_other", tmp_path) == ("tests/test_x.py", 11)
    assert locate("tests/test_x.py::test_gone", tmp_path) == ("tests/test_x.py", None)
    assert locate("elsewhere/test_y.py::test_z[cpu]", tmp_path) == ("elsewhere/test_y.py", None)


def test_an_ab_workload_is_located_in_the_workloads_module(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "workloads.py").write_text('WORKLOADS = {\n    "matmul": matmul,\n    "mlp": mlp,\n}\n')
    assert locate_workload("mlp", Path("bench/workloads.py"), tmp_path) == ("bench/workloads.py", 3)
    assert locate_workload("conv", Path("bench/workloads.py"), tmp_path) == ("bench/workloads.py", None)
    assert locate_workload("mlp", Path("gone.py"), tmp_path) == ("gone.py", None)


def test_an_ab_workload_is_located_in_the_module_of_its_package_that_names_it(tmp_path: Path) -> None:
    package = tmp_path / "perf" / "workloads"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .conv import conv\nWORKLOADS = {'matmul': matmul, 'conv': conv}\n")
    (package / "conv.py").write_text('def conv():\n    return Workload(\n        "conv_train",\n    )\n')
    assert locate_workload("matmul", Path("perf/workloads"), tmp_path) == ("perf/workloads/__init__.py", 2)
    assert locate_workload("conv_train", Path("perf/workloads"), tmp_path) == ("perf/workloads/conv.py", 3)
    # The package's old path (a file before it became a package) names the same module.
    assert locate_workload("conv_train", Path("perf/workloads.py"), tmp_path) == ("perf/workloads/conv.py", 3)
    assert locate_workload("gone", Path("perf/workloads"), tmp_path) == ("perf/workloads/__init__.py", None)


def slower_result(fail_on: str = "slower") -> GateResult:
    """test_step 20% slower, test_same unchanged: three runs a side, enough to see a change of the 5% tolerance."""
    base = make_run(make_record(10e-3), make_record(10e-3, test="test_x.py::test_same[cpu]"))
    head = make_run(make_record(12e-3), make_record(10e-3, test="test_x.py::test_same[cpu]"))
    return compare_runs([base] * 3, [head] * 3, Policy(fail_on=frozenset({fail_on}) - {"none"}))


def test_an_error_annotation_per_failing_record(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_step(gpuperf):\n    pass\n")
    result = slower_result()
    (line,) = github_annotations(result, tmp_path)
    assert line.startswith("::error file=test_x.py,line=1,title=gpuperf gate%3A test_step [cpu] SLOWER::")
    assert "test_x.py::test_step[cpu] on cpu: slower (ratio 1.200 [" in line and "\n" not in line


def test_a_slower_record_that_does_not_fail_is_a_warning(tmp_path: Path) -> None:
    (line,) = github_annotations(slower_result("none"), tmp_path)
    assert line.startswith("::warning file=test_x.py,title=gpuperf gate%3A test_step [cpu] SLOWER::")


def test_the_summary_is_appended_and_annotations_printed_only_on_github(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    printed: list[str] = []
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"}
    result = slower_result()
    assert report_to_github(result, title="T", context="c", root=tmp_path, environ=env, out=printed.append) == []
    text = summary.read_text()
    assert text.startswith("earlier step\n### T\n\nc\n\n| test ")
    assert "| test_step | cpu " in text and "- gpuperf gate: FAILED: 1 slower; 1 unchanged;" in text
    assert "| ratio [95% CI] | can see | runs |" in text
    assert len(printed) == 1 and printed[0].startswith("::error ")
    printed.clear()
    assert report_to_github(result, title="T", root=tmp_path, environ={}, out=printed.append) == []
    assert printed == []


def test_an_unwritable_summary_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path)}  # a directory
    (warning,) = report_to_github(slower_result(), title="T", root=tmp_path, environ=env)
    assert warning.startswith(f"gpuperf gate: could not append to GITHUB_STEP_SUMMARY={tmp_path}: ")


@pytest.fixture
def on_github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    return tmp_path / "summary.md"


def test_compare_command_on_github(on_github: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_main_baseline(Path())
    save_run(Path("head.json"), make_run(make_record(12e-3)))
    assert main(["compare", "main", "head.json"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("::error file=test_x.py,title=gpuperf gate%3A test_step [cpu] SLOWER::")
    summary = on_github.read_text()
    assert summary.startswith("### pytest-gpuperf compare\n\nbase: baseline 'main' ")
    assert "| test_step | cpu " in summary


def test_pytest_gate_on_github(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    pytester.makepyfile(test_steps="def test_step(gpuperf):\n    gpuperf.measure(lambda: sum(range(200)))\n")
    fast = (
        *("--gpuperf-device=cpu", "--gpuperf-max-time=0.2", "--gpuperf-memory=off", "--gpuperf-confirm=0"),
        "--gpuperf-quiet-wait=0",  # no wait for a quiet machine (auto: up to 10 s a run on a busy one)
    )
    assert pytester.runpytest(*fast, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    # Every verdict fails here, so the outcome and its annotation do not depend on this machine's noise (a busy
    # machine's slowdown is unattributed, or same-work with every count identical).
    fail_on = "slower,unattributed,same-work,faster,unchanged,inconclusive"
    result = pytester.runpytest(*fast, "--gpuperf-compare=main", f"--gpuperf-fail-on={fail_on}")
    result.stdout.fnmatch_lines(["::error file=test_steps.py,line=1,title=gpuperf gate%3A test_step [[]cpu[]] *::*"])
    text = summary.read_text()
    assert text.startswith("### pytest --gpuperf-compare\n\nagainst baseline 'main' ")
    assert "| test_step | cpu " in text and "- gpuperf gate: " in text


#: 60 tests, one of them with a 20,000-character id (a generated id, a long repr): on main each row of the job
#: summary's table was padded to that id's width, 1.2 MB here (2.9 MB in the issue's suite), and GitHub drops a
#: step summary over 1 MiB.
LONG_IDS = """
import pytest


@pytest.mark.parametrize("n", range(60), ids=lambda n: "x" * 20_000 if n == 0 else f"n{n}")
def test_step(gpuperf, n):
    gpuperf.measure(lambda: None)
"""


def test_a_20000_character_test_id_keeps_the_job_summary_under_1_mib(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 item 4: the summary's cells are clipped and its pipe table unpadded; the row is still named."""
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(test_long=LONG_IDS)
    fast = (
        *("--gpuperf-device=cpu", "--gpuperf-min-time=0.002", "--gpuperf-max-time=0.01", "--gpuperf-warmup-time=0.002"),
        *("--gpuperf-memory=off", "--gpuperf-confirm=0", "--gpuperf-quiet-wait=0", "--gpuperf-trace=off"),
        *("--gpuperf-fail-on=none", "-p", "no:cacheprovider"),
    )
    assert pytester.runpytest(*fast, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    result = pytester.runpytest(*fast, "--gpuperf-compare=main")
    assert result.ret == pytest.ExitCode.OK
    text = summary.read_text()
    assert len(text.encode()) < 2**20
    (long_row,) = [line for line in text.splitlines() if line.startswith("| test_step[xxxxxxxxxx")]
    assert "..." in long_row and "| cpu |" in long_row
    assert sum(line.startswith("| test_step[n") for line in text.splitlines()) == 59
    assert "x" * 20_000 in result.stdout.str()  # the log holds the whole id


def test_a_summary_that_would_pass_the_limit_leaves_out_rows_and_says_so(tmp_path: Path) -> None:
    """What the step's summary already holds counts: the rows that do not fit are left out, the verdict kept."""
    tests = [f"test_x.py::test_{i}[cpu]" for i in range(50)]
    base = make_run(*(make_record(10e-3, test=test) for test in tests))
    head = make_run(*(make_record(12e-3 if i == 49 else 10e-3, test=test) for i, test in enumerate(tests)))
    result = compare_runs([base] * 3, [head] * 3)  # three runs a side: the 49 unchanged rows can see 5%
    summary = tmp_path / "summary.md"
    earlier = "earlier step\n" * ((SUMMARY_LIMIT - 5000) // 13)
    summary.write_text(earlier)
    assert report_to_github(result, title="T", root=tmp_path, environ={"GITHUB_STEP_SUMMARY": str(summary)}) == []
    data = summary.read_bytes()
    assert len(data) <= SUMMARY_LIMIT
    ours = data.decode().removeprefix(earlier).splitlines()
    kept = [line for line in ours if line.startswith("| test_")]
    assert 0 < len(kept) < 50 and kept[-2].startswith(f"| test_{len(kept) - 2} | cpu |")
    assert kept[-1].startswith("| test_49 | cpu |") and "SLOWER" in kept[-1]  # the failing row kept first
    left = f"- {50 - len(kept)} of 50 rows left out: GitHub keeps at most 1 MiB of a step's summary; the whole table"
    assert any(line.startswith(left) for line in ours)
    assert ours[-2].startswith("- gpuperf gate: FAILED: 1 slower; 49 unchanged; ") and ours[-1] == ""
    # Full: a second gate's table is not appended, and a warning says so.
    (warning,) = report_to_github(result, title="T", root=tmp_path, environ={"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.read_bytes() == data
    assert warning == (
        f"gpuperf gate: GITHUB_STEP_SUMMARY={summary} holds {len(data)} bytes already, too near GitHub's 1 MiB for "
        "the verdict table: it is not appended (this step's log has it)"
    )
