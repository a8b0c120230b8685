"""The "why" on both routes, end to end: ``pytest-gpuperf ab`` on a tiny git repository (its JSON too) and
``pytest --gpuperf-compare`` in an inner run. Timing is exact (``tests/exact_timing.py``: a step returns its
duration), so the verdict is certain; the profile is real torch: the head runs one more ``aten::mm``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from tests.exact_timing import install
from tests.history.repo import commit, git
from tests.plugin.test_gate import EXACT_TIMING_CONFTEST, FAST

WORKLOADS = """\
import torch

from pytest_gpuperf.measuring import Step, Workload

from .planted import EXTRA, SECONDS  # relative: each side gets its own


def build(device, size):
    a = torch.ones(16, 16)

    def step():
        for _ in range(EXTRA):
            a @ a
        return SECONDS  # its duration, for the exact timer

    return Step(step, work={"items": 1.0})


WORKLOADS = {"planted": Workload("planted", build)}
"""


def test_ab_prints_the_why_of_a_slower_row_and_writes_it_in_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    files = {"perf/__init__.py": "", "perf/workloads.py": WORKLOADS, "perf/planted.py": "EXTRA = 0\nSECONDS = 0.002\n"}
    commit(root, files, "base")
    commit(root, {"perf/planted.py": "EXTRA = 1\nSECONDS = 0.003\n"}, "one more matmul, 1 ms more")
    monkeypatch.chdir(root)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    install(monkeypatch)
    args = ["ab", "--base", "HEAD~1", "--device", "cpu", "--workloads", "perf/workloads.py", "--max-time", "30"]
    assert main([*args, "--json", str(tmp_path / "ab.json")]) == 1
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("why planted [cpu] SLOWER: +1 ms/call; "))
    why = [out[start]]
    for line in out[start + 1 :]:
        if not line.startswith("  "):
            break
        why.append(line)
    assert any(line.endswith("op aten::mm, 0 -> 1 calls/call") for line in why), why
    assert any("outside any op (Python, the host, waits)" in line for line in why), why
    (row,) = json.loads((tmp_path / "ab.json").read_text())["results"]
    assert row["why"]["slowdown_seconds"] == pytest.approx(1e-3)
    mm = next(line for line in row["why"]["lines"] if line["name"] == "aten::mm")
    assert (mm["kind"], mm["base_count"], mm["head_count"]) == ("op", 0.0, 1.0)
    assert row["why"]["lines"][-1]["kind"] == "outside" or any(
        line["kind"] == "outside" for line in row["why"]["lines"]
    )


STEP = """
import os

import torch

a = torch.ones(16, 16)


def test_step(gpuperf):
    extra = int(os.environ.get("WHY_EXTRA", "0"))
    seconds = float(os.environ["WHY_STEP_MS"]) / 1e3

    def step():
        for _ in range(extra):
            a @ a
        return seconds

    gpuperf.measure(step)
"""


def test_pytest_gpuperf_compare_prints_the_why_of_a_slower_row(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(EXACT_TIMING_CONFTEST)
    pytester.makepyfile(test_steps=STEP)
    monkeypatch.setenv("WHY_STEP_MS", "2")
    assert pytester.runpytest(*FAST, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    monkeypatch.setenv("WHY_STEP_MS", "3")
    monkeypatch.setenv("WHY_EXTRA", "2")
    result = pytester.runpytest(*FAST, "--gpuperf-compare=main")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "test_step *SLOWER*",
            "why test_step [[]cpu[]] SLOWER: +*/call; the top * explain *% of it*",
            "*op aten::mm, 0 -> 2 calls/call",
            "gpuperf gate: FAILED: 1 slower; *",
        ]
    )
    result.stdout.fnmatch_lines(["*outside any op (Python, the host, waits)"])
    # The gate's failed report (what JUnit XML and pytest's summary read) carries the why too.
    assert "why test_step [cpu] SLOWER: " in str(result.reprec.getfailures()[-1].longrepr)  # type: ignore[attr-defined]


def test_pytest_gpuperf_compare_gives_a_count_failed_inconclusive_row_its_count_lines(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: two more matmuls per call and 7.5% more time, which one run a side cannot call (the noise floor's
    interval is wider): the timing is inconclusive, the counts fail, and the why gives the count lines with both
    sides' times."""
    pytester.makeconftest(EXACT_TIMING_CONFTEST)
    pytester.makepyfile(test_steps=STEP)
    monkeypatch.setenv("WHY_STEP_MS", "2")
    assert pytester.runpytest(*FAST, "--gpuperf-save=main").ret == pytest.ExitCode.OK
    monkeypatch.setenv("WHY_STEP_MS", "2.15")
    monkeypatch.setenv("WHY_EXTRA", "2")
    result = pytester.runpytest(*FAST, "--gpuperf-compare=main")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "test_step *MORE WORK (timing inconclusive)*",
            "why test_step [[]cpu[]] MORE WORK (timing inconclusive): +150 us/call, which the times cannot judge "
            "(its interval: -* to +*/call); the lines whose count changed, each with its time per call on both sides",
            "*op aten::mm, 0 -> 2 calls/call; 0 ns -> */call",
            "*outside any op (Python, the host, waits), * -> */call",
        ]
    )
    result.stdout.fnmatch_lines(["test_step [[]cpu[]]: counts more (ops more*"])
    result.stdout.fnmatch_lines(["gpuperf gate: FAILED: 1 more work (ops, flops, allocated); *: test_step [[]cpu[]]"])
