"""``--gpuperf-trace``: the traces of a failing row, base's (kept with the baseline) and head's, where the gate
says; every test's with ``all``; none with ``off``; bad values and a trace of nothing refused.

Timing is exact (the inner run's conftest, as ``tests/exact_timing.py``'s, restored at its end): the planted
2.5 ms step is exactly 25% slower than the baseline's 2 ms, whatever the machine does. The step runs a real
matmul, so that its profiled calls hold aten ops.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.full_disk import full_tmpfs

FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.005",
    "--gpuperf-max-time=0.3",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-memory=off",
    "--gpuperf-confirm=0",
    "--gpuperf-quiet-wait=0",
    "-p",
    "no:cacheprovider",
)

EXACT_TIMING = """
from pytest_gpuperf.measuring._backends import CpuBackend
from pytest_gpuperf.measuring import _load as load, _profiler

SAVED = []


def _exact_time_block(self, fn, iterations):
    return sum(float(fn()) for _ in range(iterations))


def pytest_configure(config):
    SAVED.append((CpuBackend.time_block, load.snapshot, _profiler.PROFILE_SHARE))
    CpuBackend.time_block = _exact_time_block
    load.snapshot = lambda *args: None  # the load gauge sees nothing: no verdict depends on this machine's load
    _profiler.PROFILE_SHARE = 1e6  # a step claims milliseconds it does not take (exact_timing.SHARE)


def pytest_unconfigure(config):
    CpuBackend.time_block, load.snapshot, _profiler.PROFILE_SHARE = SAVED.pop()
"""

STEPS = """
import os

import pytest
import torch

a = torch.ones(16, 16)


@pytest.mark.parametrize("name", ["a/../b c"])
def test_step(gpuperf, name):
    seconds = float(os.environ["TRACE_TEST_STEP_MS"]) / 1e3

    def step():
        a @ a  # an aten::mm in the profiled calls
        return seconds  # its duration, for the exact timer

    gpuperf.measure(step)


def test_steady(gpuperf):
    gpuperf.measure(lambda: (a @ a, 0.002)[1])
"""


@pytest.fixture
def steps(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(EXACT_TIMING)
    pytester.makepyfile(test_steps=STEPS)
    monkeypatch.setenv("TRACE_TEST_STEP_MS", "2")
    return pytester


def chrome_trace(path: Path) -> dict[str, Any]:
    """A trace that Perfetto and chrome://tracing open: Chrome's JSON, with the profiled aten ops in it."""
    raw = path.read_bytes()
    data: dict[str, Any] = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    assert data["traceEvents"] and any(str(e.get("name", "")).startswith("aten::") for e in data["traceEvents"])
    return data


def save(pytester: pytest.Pytester, *more: str) -> pytest.RunResult:
    result = pytester.runpytest(*FAST, "--gpuperf-save=main", *more)
    assert result.ret == pytest.ExitCode.OK
    return result


def test_a_failing_row_prints_base_and_head_traces_that_open(
    steps: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = save(steps)
    saved.stdout.fnmatch_lines(["gpuperf: kept the traces of 2 tests beside the baseline, in */main.traces"])
    monkeypatch.setenv("TRACE_TEST_STEP_MS", "2.5")
    slower = steps.runpytest(*FAST, "--gpuperf-compare=main")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(
        ["trace of test_step[[]a/../b c[]] [[]cpu[]]: base *, head *", "gpuperf gate: FAILED: 1 slower; *"]
    )
    found = re.search(r"^trace of test_step\[a/\.\./b c\] \[cpu\]: base (\S+), head (\S+)$", slower.stdout.str(), re.M)
    assert found and "trace of test_steady" not in slower.stdout.str()
    base, head = Path(found[1]), Path(found[2])
    results = (steps.path / ".gpuperf").resolve()
    assert base.resolve().parent == results / "baselines" / "main.traces" and base.name.endswith(".json.gz")
    # Nothing the test's id holds ("/", "..", a space) leaves the run's folder, named as the run's file.
    assert head.resolve().parent.parent == results / "traces" and head.name.endswith(".head.json")
    assert (results / "runs" / f"{head.parent.name}.json").is_file()
    chrome_trace(base)
    chrome_trace(head)


def test_a_baseline_saved_without_traces_says_why(steps: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    saved = save(steps, "--gpuperf-trace=off")
    assert "kept the traces" not in saved.stdout.str()
    assert not (steps.path / ".gpuperf" / "baselines" / "main.traces").exists()
    monkeypatch.setenv("TRACE_TEST_STEP_MS", "2.5")
    slower = steps.runpytest(*FAST, "--gpuperf-compare=main")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(
        [
            "trace of test_step[[]a/../b c[]] [[]cpu[]]: no base trace: the baseline was saved without traces "
            "(before this version, or --gpuperf-trace=off), head */traces/*/*.head.json"
        ]
    )


def test_trace_off_writes_and_prints_none(steps: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    save(steps)
    monkeypatch.setenv("TRACE_TEST_STEP_MS", "2.5")
    slower = steps.runpytest(*FAST, "--gpuperf-compare=main", "--gpuperf-trace=off")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    assert "trace of" not in slower.stdout.str()
    assert not (steps.path / ".gpuperf" / "traces").exists()


def test_trace_all_writes_every_test_and_prints_the_folder_once(steps: pytest.Pytester) -> None:
    result = steps.runpytest(*FAST, "--gpuperf-trace=all")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["gpuperf: wrote the traces of 2 tests to */.gpuperf/traces/*"])
    (folder,) = (steps.path / ".gpuperf" / "traces").iterdir()
    written = sorted(folder.glob("*.head.json"))
    assert len(written) == 2 and all(chrome_trace(path) for path in written)
    assert str(result.stdout).count("wrote the traces") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpuperf-trace=some",), "*--gpuperf-trace=some: must be one of: failing, all, off*"),
        (
            ("--gpuperf-trace=all", "--gpuperf-profile=off"),
            "*--gpuperf-trace=all writes the trace of each test's profiled calls, and --gpuperf-profile=off "
            "profiles none: drop --gpuperf-profile=off*",
        ),
    ],
)
def test_bad_values_are_refused_at_the_start(steps: pytest.Pytester, args: tuple[str, ...], message: str) -> None:
    result = steps.runpytest(*FAST, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_profiles_off_fails_the_gate_without_traces_or_errors(
    steps: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(steps, "--gpuperf-profile=off")
    assert not list((steps.path / ".gpuperf" / "baselines").glob("main.traces/*"))
    monkeypatch.setenv("TRACE_TEST_STEP_MS", "2.5")
    slower = steps.runpytest(*FAST, "--gpuperf-compare=main", "--gpuperf-profile=off")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(["trace of test_step*: no base trace: *, no head trace: no work profile on this side*"])


def test_a_confirmation_run_writes_no_traces_whatever_the_ini_says(
    steps: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's --gpuperf-trace=off with the ini's all and profiles off: a confirmation run, which reads the
    ini, must not refuse the combination (it traces nothing)."""
    save(steps, "--gpuperf-trace=off", "--gpuperf-profile=off")
    steps.makeini("[pytest]\ngpuperf_trace = all\n")
    monkeypatch.setenv("TRACE_TEST_STEP_MS", "2.5")
    args = ("--gpuperf-compare=main", "--gpuperf-trace=off", "--gpuperf-profile=off", "--gpuperf-confirm=1")
    slower = steps.runpytest(*FAST, *args)
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(["gpuperf: measured 1 test(s) that looked slower again (1 confirmation run(s) *"])
    assert "could not confirm" not in slower.stdout.str()


# ---------------------------------------------------------------- issue 36: no write announced that did not happen


def _cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in for a full disk under torch's export_chrome_trace: it returns as if all went well, its file cut
    short (as kineto leaves one on ENOSPC, which it does not report)."""
    from torch.autograd.profiler import profile

    def export_chrome_trace(self: object, path: str, *args: object, **kwargs: object) -> None:
        Path(path).write_text('{"traceEvents": [{"name": "aten::mm", "ph": "X", "ts": 1')
        print("ERROR: output_json.cpp:977] Failed to write to log file!")  # kineto's complaint, on the terminal

    monkeypatch.setattr(profile, "export_chrome_trace", export_chrome_trace)


@pytest.mark.parametrize("disk", ["tmpfs", "stand-in"])
def test_traces_not_written_are_neither_published_nor_announced(
    steps: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, disk: str
) -> None:
    """Issue 36: on a full disk ``--gpuperf-trace=all`` published 0-byte traces and printed ``wrote the traces of 1
    test``, exit 0."""
    with contextlib.ExitStack() as stack:
        if disk == "tmpfs":
            results = stack.enter_context(full_tmpfs(tmp_path / "disk")) / "results"
        else:
            results = steps.path / ".gpuperf"
            _cut_short(monkeypatch)
        result = steps.runpytest(*FAST, "--gpuperf-trace=all", f"--gpuperf-results-dir={results}")
        out = result.stdout.str()
        assert "wrote the traces" not in out and "Traceback" not in out
        assert [line for line in result.outlines if "%]" in line and not line.endswith("%]")] == []  # a line apart
        result.stdout.fnmatch_lines(["gpuperf: the traces of 2 tests were not written: cannot write */traces/*"])
        assert [p for p in (results / "traces").rglob("*") if p.is_file()] == []
        # The run itself was saved where there was room (exit 0: a trace never changes the outcome), not on the full
        # disk (exit 3: a run that was not saved fails the session).
        assert result.ret == (pytest.ExitCode.INTERNAL_ERROR if disk == "tmpfs" else pytest.ExitCode.OK)


# ---------------------------------------------------------------- issue 37: a record holds only its figures

HELD = """
import gc


def pytest_sessionfinish(session):
    from torch.autograd.profiler import profile

    gc.collect()
    held = sum(isinstance(thing, profile) for thing in gc.get_objects())
    (session.config.rootpath / "held.txt").write_text(str(held))
"""


@pytest.mark.parametrize(
    "more",
    [
        (),
        ("--gpuperf-memory=on",),  # the profile rides on the memory probe's calls, its profiler the probe's
        ("--gpuperf-save=main",),
        ("--gpuperf-trace=all", "--gpuperf-memory=on"),
        ("--gpuperf-trace=off", "--gpuperf-save=main"),
    ],
)
def test_no_record_keeps_its_profiler(steps: pytest.Pytester, more: tuple[str, ...]) -> None:
    """A record kept its profiler, and every event of the profiled calls with it, until the session ended: some MiB
    a record. With the default options and when the session writes traces (from a copy kept as the record was
    made), no profiler is alive once the tests ran."""
    steps.makeconftest(EXACT_TIMING + HELD)
    result = steps.runpytest(*FAST, *more)
    assert result.ret == pytest.ExitCode.OK
    assert (steps.path / "held.txt").read_text() == "0"


def test_saving_with_every_trace_writes_both(steps: pytest.Pytester) -> None:
    """Issue 36: with --gpuperf-save and --gpuperf-trace=all, the second export of a profile failed with torch's
    "Trace is already saved": the run's traces were not written, and their folder was left empty."""
    result = save(steps, "--gpuperf-trace=all")
    result.stdout.fnmatch_lines(
        [
            "gpuperf: kept the traces of 2 tests beside the baseline, in */main.traces",
            "gpuperf: wrote the traces of 2 tests to */.gpuperf/traces/*",
        ]
    )
    assert "not written" not in result.stdout.str()
    results = steps.path / ".gpuperf"
    kept = sorted(p.name.removesuffix(".json.gz") for p in (results / "baselines" / "main.traces").iterdir())
    (folder,) = (results / "traces").iterdir()  # the run's folder alone: the session's own copies are gone
    written = sorted(p.name.removesuffix(".head.json") for p in folder.iterdir())
    assert len(kept) == 2 and written == kept
    assert all(chrome_trace(path) for path in [*folder.iterdir(), *(results / "baselines" / "main.traces").iterdir()])
