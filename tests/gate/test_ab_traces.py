"""``pytest-gpuperf ab --trace``: base's and head's traces of a failing workload, written where the output says.

A scratch repository whose workload runs a real matmul (so that its profiled calls have aten ops in the trace)
and returns its nominal duration for the exact timer (``tests/exact_timing.py``): head's 3x is exactly 3x.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.cli import main
from tests.exact_timing import install
from tests.history.repo import commit, git

FAST = ("--max-time", "30", "--device", "cpu", "--workloads", "perf/workloads.py", "--tolerance", "25%")
WORKLOADS = """\
import torch

from pytest_gpuperf.measuring import Step, Workload

from .delays import DELAY


def matmul(device, size):
    a = torch.ones(16, 16)

    def step():
        a @ a  # an aten::mm in the profiled calls' trace
        return DELAY  # its duration, for the exact timer

    return Step(step, work={"items": 1.0})


WORKLOADS = {"slow/../ down": Workload("slow/../ down", matmul), "steady": Workload("steady", matmul)}
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"perf/__init__.py": "", "perf/workloads.py": WORKLOADS, "perf/delays.py": "DELAY = 0.002\n"}, "base")
    git(root, "tag", "base")
    monkeypatch.chdir(root)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    install(monkeypatch)
    return root


def chrome_trace(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    assert data["traceEvents"] and any(str(e.get("name", "")).startswith("aten::") for e in data["traceEvents"])
    return data


def test_a_failing_workload_gets_both_traces_in_the_output_and_the_json(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Both workloads read DELAY: -k keeps the one whose name holds "/", ".." and a space.
    commit(repo, {"perf/delays.py": "DELAY = 0.006\n"}, "three times as slow")
    out_json = tmp_path / "ab.json"
    assert main(["ab", "--base", "base", *FAST, "-k", "slow", "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    found = re.search(r"^trace of slow/\.\./ down \[cpu\]: base (\S+), head (\S+)$", out, re.MULTILINE)
    assert found, out
    base, head = Path(found[1]), Path(found[2])
    folder = (repo / ".gpuperf" / "traces").resolve()
    for path in (base, head):
        # Nothing the workload's name holds ("/", "..", a space) leaves the run's folder of traces.
        assert path.resolve().parent.parent == folder and path.resolve().parent.name.startswith("ab-")
        chrome_trace(path)
    assert base.name.endswith(".base.json") and head.name.endswith(".head.json")
    row = json.loads(out_json.read_text())["results"][0]
    assert row["traces"] == {"base": str(base), "head": str(head)}


def test_trace_all_writes_every_row_and_off_none(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ab", "--base", "HEAD", *FAST, "--trace", "all", "-q"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"^trace of .*: base \S+\.base\.json, head \S+\.head\.json$", out, re.MULTILINE)) == 2
    traces = repo / ".gpuperf" / "traces"
    assert len(list(traces.glob("ab-*/*.json"))) == 4

    assert main(["ab", "--base", "HEAD", *FAST, "--trace", "off", "-q", "-k", "steady"]) == 0
    assert "trace of" not in capsys.readouterr().out
    assert len(list(traces.glob("ab-*"))) == 1


def test_a_bad_trace_value_is_refused(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ab", "--base", "HEAD", *FAST, "--trace", "some"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --trace: invalid choice: 'some'" in err and "failing" in err and "off" in err


def test_traces_their_writer_cut_short_are_not_published(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: on a full disk ``ab --trace`` published 0-byte traces (torch's export_chrome_trace does not report
    ENOSPC). The stand-in: an export that returns, its file cut short."""
    from torch.autograd.profiler import profile

    def export_chrome_trace(self: object, path: str, *args: object, **kwargs: object) -> None:
        Path(path).write_text('{"traceEvents": [')

    monkeypatch.setattr(profile, "export_chrome_trace", export_chrome_trace)
    out_json = tmp_path / "ab.json"
    assert main(["ab", "--base", "HEAD", *FAST, "--trace", "all", "-q", "-k", "steady", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    found = re.findall(r"^trace of steady \[cpu\]: (.*)$", out, re.MULTILINE)
    assert len(found) == 1 and "Traceback" not in out, out
    assert re.fullmatch(
        r"no base trace: could not be written: cannot write \S+\.base\.json: .*, no head trace: .*", found[0]
    )
    assert [p for p in (repo / ".gpuperf" / "traces").rglob("*") if p.is_file()] == []
    assert json.loads(out_json.read_text())["results"][0]["traces"] == {"base": None, "head": None}


def test_a_side_whose_profiled_calls_were_not_read_says_so_not_another_process(tmp_path: Path) -> None:
    """A short step's profile, reduced to keep within its budget, has no profiled call to write: on main its row
    read "measured in another process (a pytest-xdist worker)" in a run without workers."""
    from pytest_gpuperf.gate import Verdict
    from pytest_gpuperf.gate._compare import Row
    from pytest_gpuperf.gate._traces import trace_rows
    from pytest_gpuperf.measuring import WorkProfile

    why = "the counting call's figures only: reading 1 call's 61 events would take about 2.74 ms, over the 1.5 ms left"
    reduced = WorkProfile(level="full", calls=0, reduced=why)
    row = Row("t", "t", "cpu", Verdict.SLOWER, "", base_profiles=(reduced,), head_profiles=(reduced,))
    (traces,) = trace_rows([row], tmp_path / "traces")
    assert traces.base is None and traces.head is None and "xdist" not in traces.line()
    assert traces.head_why == f"its profiled calls were not read, to keep within the profile's budget ({why})"
    assert not (tmp_path / "traces").exists()
