"""Paired claims on the fixture: ``gpuperf.paired(...)`` records steps measured in interleaved rounds, and
``gpuperf.expect(estimate, ...)`` judges a ratio by its interval, notes it, and adds its check to a record.

The judged estimates are written out in the inner tests, so that no verdict depends on the machine's speed."""

from __future__ import annotations

import json
from typing import Any

import pytest

FAST = ("--gpuperf-min-time=0.01", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.05", "--gpuperf-memory=off")

PAIRED_TEST = """
import pytest
import torch
from pytest_gpuperf import Estimate, Step

def steps():
    a = torch.ones(64)
    return {{
        "sum": Step(lambda: a.sum(), work={{"items": 64}}, params={{"n": 64}}),
        "mean": Step(lambda: a.mean(), work={{"items": 64}}),
        "idle": Step(lambda: None, work={{"items": 1}}),
    }}

def test_paired(gpuperf):
    rounds = gpuperf.paired(steps(), record=["sum", "mean"], params={{"dtype": "float32"}},
                            names={{"sum": "summed"}}, metadata={{"mean": {{"note": "kept"}}}})
    assert set(rounds.measurements) == {{"sum", "mean", "idle"}}
    assert [r.measurement.name for r in gpuperf.records] == ["summed", "mean"]
    rounds.measurements["sum"].assert_throughput(at_least="1 items/s")
    ratio = Estimate("items/s of sum / items/s of mean", {value}, {low}, {high}, 0.95, 30)
    check = gpuperf.expect(ratio, at_least=1.5, record="summed")
    assert check.outcome == "{outcome}"
    assert [c.what for c in gpuperf.records[0].checks] == ["throughput", "items/s of sum / items/s of mean"]
"""


def _records(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {record["key"]: record for record in json.loads((pytester.path / "run.json").read_text())["records"]}


def test_paired_steps_are_recorded_with_their_checks_and_the_verdict_is_noted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pairs=PAIRED_TEST.format(value=2.0, low=1.9, high=2.1, outcome="pass"))
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-json=run.json", "--gpuperf-rounds=2", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*test_paired::summed*cpu*items/s*",
            "*test_paired::mean*cpu*items/s*",
            "*- gpuperf notes -*",
            "test_pairs.py::test_paired[[]cpu[]]: pass: items/s of sum / items/s of mean at least 1.5: met; "
            "median 2, 95% CI [[]1.9, 2.1[]] from 30 paired rounds on cpu",
        ]
    )
    records = _records(pytester)
    assert list(records) == ["test_pairs.py::test_paired[cpu]::summed", "test_pairs.py::test_paired[cpu]::mean"]
    summed, mean = records.values()
    assert summed["params"] == {"size": "small", "n": "64", "dtype": "float32"}
    assert mean["params"] == {"size": "small", "dtype": "float32"} and mean["metadata"] == {"note": "kept"}
    # The second round measured the test again: one more round of evidence, and no second copy of its checks.
    assert [(c["what"], c["outcome"]) for c in summed["checks"]] == [
        ("throughput", "pass"),
        ("items/s of sum / items/s of mean", "pass"),
    ]
    assert mean["checks"] == []
    assert len(summed["gate"]["rounds"]) == 1 and len(mean["gate"]["rounds"]) == 1


def test_a_failing_claim_fails_the_test_and_lands_in_its_record(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pairs=PAIRED_TEST.format(value=1.2, low=1.1, high=1.3, outcome="fail"))
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-json=run.json", *FAST)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   *items/s of sum / items/s of mean at least 1.5 expected, but median 1.2, 95% CI [[]1.1, 1.3[]] "
            "from 30 paired rounds on cpu; the whole interval is on the wrong side",
            "test_paired::summed *cpu*check fail",
            "flags in full:",
            "  test_paired::summed: *items/s of sum / items/s of mean fail",  # "starved (...); " first when busy
        ]
    )
    summed = _records(pytester)["test_pairs.py::test_paired[cpu]::summed"]
    assert [c["outcome"] for c in summed["checks"]] == ["pass", "fail"]


def test_an_inconclusive_claim_warns_and_is_noted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pairs=PAIRED_TEST.format(value=1.6, low=1.4, high=1.8, outcome="inconclusive"))
    result = pytester.runpytest("--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*InconclusiveWarning: items/s of sum / items/s of mean at least 1.5 is inconclusive: the interval "
            "straddles the bound*",
            "test_pairs.py::test_paired[[]cpu[]]: inconclusive: items/s of sum / items/s of mean at least 1.5 is "
            "inconclusive*",
        ]
    )
    failing = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-inconclusive=fail", *FAST)
    assert failing.ret == pytest.ExitCode.TESTS_FAILED


MISNAMED = """
import torch
from pytest_gpuperf import Estimate, Step

def test_misnamed(gpuperf):
    a = torch.ones(8)
    gpuperf.paired({"sum": Step(lambda: a.sum(), work={"items": 8})})
    gpuperf.expect(Estimate("r", 2.0, 1.9, 2.1, 0.95, 30), at_least=1.0, record="summed")

def test_unknown_step(gpuperf):
    gpuperf.paired({"sum": Step(lambda: None, work={"items": 1})}, record=["mean"])

def test_twice(gpuperf):
    steps = {"sum": Step(lambda: None, work={"items": 1})}
    gpuperf.paired(steps)
    gpuperf.paired(steps)
"""


def test_a_claim_on_a_record_the_test_did_not_make_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_misnamed=MISNAMED)
    result = pytester.runpytest("--gpuperf-device=cpu", *FAST)
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "*ValueError: gpuperf.expect(record='summed'): test_misnamed.py::test_misnamed[[]cpu[]] recorded no "
            "measurement of that name (it recorded: 'sum')",
            "*ValueError: gpuperf.paired(): record names [[]'mean'[]], which are not steps (sum)",
            "*ValueError: test_misnamed.py::test_twice[[]cpu[]] already recorded a measurement named 'sum': give "
            "each measurement its own name",
        ]
    )


def test_a_step_the_timing_mode_cannot_run_skips_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pairs=PAIRED_TEST.format(value=2.0, low=1.9, high=2.1, outcome="pass"))
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-mode=graph", "-rs", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["SKIPPED*graph mode needs a CUDA device*"])
