"""Issue 23 item 7: inputs that mean nothing are refused, with the fix, never taken silently.

On main, ``--gpuperf-fail-on=`` (and ``ab --fail-on ''``) turned the gate off with exit 0, a baseline record
with ``"iterations": 0`` was read and merged, ``compare``/``ab`` took ``--format bogus``, and an empty
``--results-dir=`` quietly used the current directory as the results directory.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.gate import parse_verdicts
from pytest_gpuperf.results import ResultsDir, ResultsError, StorageError
from pytest_gpuperf.results._files import load_runs
from tests.synthetic import make_record, make_run


def test_an_empty_fail_on_is_refused_and_none_still_turns_failing_off() -> None:
    for raw in ("", "  "):
        with pytest.raises(ValueError, match=r"is empty, which would turn the gate off; .* none to report without"):
            parse_verdicts(raw)
    assert parse_verdicts("none") == ()


def test_the_plugin_refuses_an_empty_fail_on_before_measuring(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(gpuperf):\n    gpuperf.measure(lambda: None)\n")
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-fail-on=", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --gpuperf-fail-on=: is empty, which would turn the gate off; *"])
    assert "Traceback" not in result.stderr.str() and "passed" not in result.stdout.str()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "a", "b", "--fail-on", ""], "argument --fail-on: is empty, which would turn the gate off"),
        (["ab", "--base", "main", "--fail-on", ""], "argument --fail-on: is empty, which would turn the gate off"),
        (["compare", "a", "b", "--format", "bogus"], "argument --format: invalid choice: 'bogus'"),
        (["ab", "--base", "main", "--format", "bogus"], "argument --format: invalid choice: 'bogus'"),
        (["runs", "show", "x", "--format", "bogus"], "argument --format: invalid choice: 'bogus'"),
        (["runs", "--results-dir", ""], "argument --results-dir: '': is empty; give a path"),
        (["compare", "a", "b", "--results-dir="], "argument --results-dir: '': is empty; give a path"),
        (["ab", "--base", "main", "--repo="], "argument --repo: '': is empty; give a path"),
        (["ab", "--base", "main", "--workloads="], "argument --workloads: '': is empty; give a path"),
        (["ab", "--base", "main", "-k", ""], "argument -k: '': is empty; give a value"),
        (["export", "x.json", "--format", "bencher", "-o", ""], "argument -o/--output: '': is empty; give a path"),
        (["report", "x.json", "-o", ""], "argument -o/--output: '': is empty; give a path"),
        (["history", "publish", "--out="], "argument --out: '': is empty; give a path"),
        (["history", "publish", "--machine="], "argument --machine: '': is empty; give a value"),
        (["history", "record", "--install="], "argument --install: '': is empty; give a value"),
        (["history", "record", "--timeout=0"], "argument --timeout: '0': must be a positive time"),
        (["history", "record", "--last=0"], "argument --last: '0': must be at least 1"),
    ],
)
def test_the_command_line_refuses_values_that_mean_nothing(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def _baseline_with(tmp_path: Path, change: dict[str, Any], where: str = "measurement") -> ResultsDir:
    store = ResultsDir(tmp_path)
    store.save_baseline("main", make_run(make_record(1e-3, rounds=[1e-3])))
    path = store.baseline_path("main")
    data = json.loads(path.read_text())
    record = data["runs"][0]["records"][0]
    target = record["measurement"] if where == "measurement" else record["gate"]["rounds"][0]
    target.update(change)
    path.write_text(json.dumps(data))
    return store


@pytest.mark.parametrize(
    ("change", "where", "problem"),
    [
        (
            {"iterations": 0},
            "measurement",
            "field 'measurement.iterations' must be a whole number from 1 to 2**53, not 0",
        ),
        ({"iterations": -3}, "measurement", "field 'measurement.iterations' must be a whole number from 1"),
        ({"samples": []}, "measurement", "field 'measurement.samples' must be a list of 1 sample or more"),
        ({"samples": [1e-3, -1e-3]}, "measurement", "field 'measurement.samples' must be positive finite times"),
        ({"samples": [1e-3, math.nan]}, "measurement", "field 'measurement.samples' must be positive finite times"),
        ({"samples": [1e-3, 0.0]}, "round", "field 'gate.rounds[1].samples' must be positive finite times"),
        ({"samples": []}, "round", "field 'gate.rounds[1].samples' must be a list of 1 sample or more"),
        ({"work": {"FLOP": -1.0}}, "measurement", "field 'measurement.work.FLOP' must be a finite amount, 0 or more"),
    ],
)
def test_a_record_no_measurement_can_have_is_refused_and_not_merged(
    tmp_path: Path, change: dict[str, Any], where: str, problem: str
) -> None:
    store = _baseline_with(tmp_path, change, where)
    path = store.baseline_path("main")
    before = path.read_bytes()
    with pytest.raises(ResultsError, match=r"main\.json: record 1 \(test_x\.py::test_step\[cpu\]\): field ") as info:
        load_runs(path)
    assert problem in str(info.value)
    with pytest.raises(StorageError, match="left as it is, so this run was not added"):
        store.save_baseline("main", make_run(make_record(1e-3)))
    assert path.read_bytes() == before
