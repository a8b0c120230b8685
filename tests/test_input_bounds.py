"""Issue 36 item 5: every input has a bound, and a value past it is refused in one line that names the input, the
bound and the fix (``pytest.UsageError`` for the options, exit 2 for the command line), never a traceback.

Before: ``--gpuperf-threads=100000`` segfaulted the session; ``--gpuperf-rounds=100000`` and
``--gpuperf-confirm=1000000000`` ran until killed; ``@pytest.mark.gpuperf(max_time=1e308)`` raised a raw
OverflowError; a name over 255 bytes was an INTERNALERROR; a results file with ``"created": 12345``, ``"key": 5``,
``"iterations": 10**30``, negative or huge op counts, ``"calls": 0`` or a million ops was read (and merged into a
baseline), and a damaged record was told as ``a record lacks or mangles string indices must be integers``.

The values that would run forever on the code before are shown refused by their parser, or in a session that
collects only (``--co``), which measures nothing whatever it is given.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.measuring import FixedBudget, OpStat, SettingError, WorkProfile
from pytest_gpuperf.plugin._settings import PARSERS
from pytest_gpuperf.results import (
    RESULTS_OUTPUT,
    Record,
    ResultsDir,
    ResultsError,
    StorageError,
    output_problem,
    save_run,
)
from pytest_gpuperf.results._files import load_runs
from tests.synthetic import make_measurement, make_record, make_run, samples_around, save_main_baseline

CPUS = os.cpu_count() or 1
LONG = "a" * 256  # one byte over what a file name may have


# ---------------------------------------------------------------- option values: the one set of parsers


@pytest.mark.parametrize(
    ("field", "most", "over", "message"),
    [
        ("threads", str(CPUS), "100000", f"must be at most {CPUS}, this machine's CPU count"),
        ("threads", str(CPUS), str(CPUS + 1), f"must be at most {CPUS}, this machine's CPU count"),
        ("rounds", "10000", "100000", "must be at most 10000"),
        ("rounds", "10000", "9" * 401, "must be at most 10000"),
        ("rounds", "10000", "9" * 5000, "must be at most 10000"),
        ("confirm", "100", "1000000000", "must be at most 100"),
        ("min_samples", "1000000", "1000001", "must be at most 1000000"),
        ("max_time", "3600", "1e308", "must be at most 3600 s"),
        ("max_time", "3600 s", "3601", "must be at most 3600 s"),
        ("warmup_time", "3600", "1e308", "must be at most 3600 s"),
        ("min_time", "3600", "1e308", "must be at most 3600 s"),
        ("quiet_wait", "3600", "1e9", "must be at most 3600 s"),
    ],
)
def test_an_option_value_past_its_bound_is_refused_by_its_parser(
    field: str, most: str, over: str, message: str
) -> None:
    parse = PARSERS[field]
    parse(most)  # the bound itself is a value
    with pytest.raises(SettingError, match=message) as info:
        parse(over)
    assert "give" in str(info.value) and "\n" not in str(info.value)


def test_the_session_refuses_an_option_past_its_bound_before_anything_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(gpuperf):\n    gpuperf.measure(lambda: None)\n")
    for args, line in (
        ([f"--gpuperf-threads={CPUS + 1}"], f"ERROR: --gpuperf-threads={CPUS + 1}: must be at most {CPUS}, *; give *"),
        (["--gpuperf-rounds=10001"], "ERROR: --gpuperf-rounds=10001: must be at most 10000 *; give *"),
        (["--gpuperf-confirm=101"], "ERROR: --gpuperf-confirm=101: must be at most 100 *; give *"),
        (["--gpuperf-max-time=1e308"], "ERROR: --gpuperf-max-time=1e308: must be at most 3600 s *; give *"),
        (["-o", "gpuperf_rounds=10001"], "ERROR: ini gpuperf_rounds = 10001: must be at most 10000 *"),
    ):
        result = pytester.runpytest("--gpuperf-device=cpu", "--co", "-p", "no:cacheprovider", *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([line])
        assert "Traceback" not in result.stderr.str()


def test_a_marker_time_past_its_bound_errors_its_test_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n"
        "@pytest.mark.gpuperf(max_time=1e308)\n"
        "def test_x(gpuperf):\n"
        "    gpuperf.measure(lambda: None)\n"
    )
    result = pytester.runpytest("--gpuperf-device=cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.gpuperf(max_time=1e+308): must be at most 3600 s *; give *"])
    assert "OverflowError" not in result.stdout.str()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ab", "--base", "main", "--threads", str(CPUS + 1)], f"argument --threads: '{CPUS + 1}': must be at most"),
        (["ab", "--base", "main", "--max-time", "1e308"], "argument --max-time: '1e308': must be at most 3600 s"),
        (["history", "record", "--timeout=1e308"], "argument --timeout: '1e308': must be at most 86400 s"),
        (["history", "record", "--last=" + "9" * 401], "argument --last: '999"),
    ],
)
def test_the_command_line_refuses_a_value_past_its_bound(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--repo", str(tmp_path)])  # not a repository: the code before stopped there, at once
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "give" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argument", "why"),
    [
        ("rounds", "each round is a sample kept: the sampling loop's cap on samples"),
        ("warmup_rounds", "untimed rounds: as many as the rounds may be"),
        ("iterations", "a million calls of a one-nanosecond step already fill the 1 ms block the sampler times"),
    ],
)
def test_a_fixed_budget_past_its_bound_is_refused_naming_the_argument(argument: str, why: str) -> None:
    """``benchmark.pedantic(rounds=10**12)`` ran until killed: a fixed budget is kept exactly, at no cap."""
    FixedBudget(**{"rounds": 1, argument: 1_000_000}, caller="benchmark.pedantic")  # the bound itself is a value
    with pytest.raises(ValueError, match=r"^benchmark") as info:
        FixedBudget(**{"rounds": 1, argument: 1_000_001}, caller="benchmark.pedantic")
    assert str(info.value) == (
        f"benchmark.pedantic({argument}=1000001): must be at most 1000000 ({why}); give 1000000 or less"
    )


def test_a_pedantic_budget_past_its_bound_fails_its_test_before_it_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "CALLS = []\n\n"
        "def test_x(benchmark):\n"
        "    benchmark.pedantic(CALLS.append, args=(1,), iterations=1_000_001)\n\n"
        "def test_y():\n"
        "    assert CALLS == []\n"
    )
    result = pytester.runpytest(
        "--gpuperf-device=cpu", "-p", "no:benchmark", "-p", "no:randomly", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["E * ValueError: benchmark.pedantic(iterations=1000001): must be at most 1000000 (*); give 1000000 or less"]
    )
    assert "_sampling.py" not in result.stdout.str(), "the test's call, not the budget's inner frames"


@pytest.mark.parametrize(
    ("keep", "why"),
    [
        ("-1", "is not a whole number of 0 or more; give how many of the newest runs to keep, such as 20"),
        ("all", "is not a whole number of 0 or more; give how many of the newest runs to keep, such as 20"),
        ("2.5", "is not a whole number of 0 or more; give how many of the newest runs to keep, such as 20"),
        (str(2**53 + 1), "': must be at most 2**53 (the bound on every count); give 2**53 or less"),
        ("9" * 5000, "': must be at most 2**53 (the bound on every count); give 2**53 or less"),
    ],
)
def test_prune_refuses_a_keep_past_its_bound_in_one_line(
    keep: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "runs").mkdir()
    with pytest.raises(SystemExit) as info:
        main(["runs", "prune", "--keep", keep, "--results-dir", str(tmp_path)])
    assert info.value.code == 2
    *usage, error = capsys.readouterr().err.splitlines()  # argparse's usage, then the one line of the error
    assert usage[0].startswith("usage: ") and "error" not in "".join(usage)
    assert error.startswith("pytest-gpuperf runs prune: error: argument --keep: '") and error.endswith(why)


# ---------------------------------------------------------------- names: the one output-path check


def test_a_name_over_255_bytes_is_refused_by_the_output_check(tmp_path: Path) -> None:
    assert output_problem(tmp_path / ("é" * 125 + ".json"), RESULTS_OUTPUT) is None  # 255 bytes: é is two
    for path in (tmp_path / ("é" * 128 + ".json"), tmp_path / LONG / "x.json"):
        problem = output_problem(path, RESULTS_OUTPUT)
        assert problem is not None and "over the 255 bytes a file name may have; give a shorter name" in problem
    deep = tmp_path.joinpath(*["d" * 200] * 30, "x.json")  # each name fits, the whole path does not
    assert "give a shorter path" in (output_problem(deep, RESULTS_OUTPUT) or "")


@pytest.mark.parametrize("option", ["--gpuperf-json", "--gpuperf-html", "--gpuperf-asv", "--gpuperf-compare"])
def test_a_name_over_255_bytes_is_a_usage_error_not_an_internal_error(pytester: pytest.Pytester, option: str) -> None:
    pytester.makepyfile("def test_x(gpuperf):\n    gpuperf.measure(lambda: None)\n")
    result = pytester.runpytest("--gpuperf-device=cpu", "--co", "-p", "no:cacheprovider", f"{option}={LONG}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option}=aaa*: *'aaaa*' is 256 bytes, over the 255 bytes a file name may*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_baseline_name_over_its_bound_says_the_bound(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(gpuperf):\n    gpuperf.measure(lambda: None)\n")
    result = pytester.runpytest("--gpuperf-device=cpu", "--co", "-p", "no:cacheprovider", "--gpuperf-save=" + "a" * 101)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --gpuperf-save=aaa*: *is 101 characters, over the 100 a baseline name *"])


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", LONG, "head.json"],
        ["runs", "show", LONG],
        ["report", "head.json", "-o", LONG + ".html"],
        ["export", "head.json", "--format", "bencher", "-o", LONG + ".json"],
    ],
)
def test_the_command_line_refuses_a_name_over_255_bytes(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    save_main_baseline(tmp_path)
    save_run(tmp_path / "head.json", make_run(make_record(1e-3)))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(r"is 2(56|61) bytes, over the 255 bytes a file name may have; give a shorter name", err)
    assert err.count("\n") == 1


# ---------------------------------------------------------------- results files: the one reader of them


def _profile(ops: int = 2, **fields: Any) -> WorkProfile:
    stats = tuple(OpStat(f"aten::op{i}", 2, 1e-6) for i in range(ops))
    return WorkProfile(**{"level": "full", "calls": 2, "ops": stats, **fields})


def _baseline(tmp_path: Path, change: Callable[[dict[str, Any]], object], profile: WorkProfile | None = None) -> Path:
    """Baseline ``main`` of one record (with ``profile``), its file then changed by ``change`` (given the whole)."""
    store = ResultsDir(tmp_path)
    measurement = make_measurement("test_x.py::test_step[cpu]", samples_around(1e-3), profile=profile or _profile())
    store.save_baseline("main", make_run(Record("test_x.py::test_step[cpu]", "cpu", measurement)))
    path = store.baseline_path("main")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def _record(data: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = data["runs"][0]["records"][0]
    return record


def _set(*keys: str | int, value: object) -> Callable[[dict[str, Any]], object]:
    def change(data: dict[str, Any]) -> None:
        target: Any = _record(data)
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return change


RECORD = r"main\.json: record 1 \(test_x\.py::test_step\[cpu\]\): "
LEFT = "; the file is left as it is"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_set("key", value=5), RECORD + "field 'key' must be a string, not 5"),
        (
            _set("measurement", "iterations", value=10**30),
            RECORD + r"field 'measurement\.iterations' must be a whole number from 1 to 2\*\*53, not 1000",
        ),
        (
            _set("measurement", "profile", "ops", 1, "count", value=-1),
            RECORD + r"field 'measurement\.profile\.ops\[2\]\.count' must be a whole number from 0 to 2\*\*53, not -1",
        ),
        (
            _set("measurement", "profile", "ops", 0, "count", value=10**4000),
            RECORD + r"field 'measurement\.profile\.ops\[1\]\.count' must be .*, not 1000.*\(4001 digits\)",
        ),
        (
            _set("measurement", "profile", "calls", value=0),
            RECORD + r"field 'measurement\.profile\.calls' must be a whole number from 1 to 2\*\*53, not 0",
        ),
        (
            _set("measurement", "profile", "left_out", value=["ops", "time"]),
            RECORD + r"field 'measurement\.profile\.left_out\[2\]' must be one of ops, kernels, .*, not 'time'",
        ),
        (
            _set("measurement", "profile", "runtime", value={"cudaLaunchKernel": -2}),
            RECORD + r"field 'measurement\.profile\.runtime\.cudaLaunchKernel' must be a whole number from 0",
        ),
        (
            _set("measurement", "warmup", value="x"),
            RECORD + r"field 'measurement\.warmup' must be an object, not 'x'",
        ),
        (_set("measurement", "samples", value=[1e-3, 0.0]), RECORD + r"field 'measurement\.samples' must be posit"),
        (_set("gate", value={"rounds": [{"samples": []}]}), RECORD + r"field 'gate\.rounds\[1\]\.samples' must be "),
        (_set("measurement", "work", value={"FLOP": -1.0}), RECORD + r"field 'measurement\.work\.FLOP' must be "),
        (lambda data: _record(data).pop("measurement"), RECORD + "field 'measurement' is missing"),
        (lambda data: data["runs"][0]["records"].append(5), r"main\.json: record 2: must be an object, not 5"),
        (
            lambda data: data["runs"][0].update(created=12345),
            r"main\.json: field 'created' must be the time the run was saved, as an ISO 8601 string .*, not 12345",
        ),
    ],
)
def test_a_field_past_its_bound_is_refused_naming_the_record_and_the_field_and_not_merged(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], message: str
) -> None:
    path = _baseline(tmp_path, change)
    before = path.read_bytes()
    with pytest.raises(ResultsError, match=message) as info:
        load_runs(path)
    assert LEFT in str(info.value) and "\n" not in str(info.value) and len(str(info.value)) < 500
    with pytest.raises(StorageError, match="so this run was not added"):
        ResultsDir(tmp_path).save_baseline("main", make_run(make_record(1e-3)))
    assert path.read_bytes() == before


def test_a_profile_of_more_ops_than_any_step_has_is_refused_before_it_is_compared(tmp_path: Path) -> None:
    path = _baseline(tmp_path, lambda data: None, _profile(ops=10_001))
    with pytest.raises(ResultsError, match=RECORD + r"field 'measurement\.profile\.ops' holds 10001 entries, over the"):
        load_runs(path)
    assert load_runs(_baseline(tmp_path / "at", lambda data: None, _profile(ops=10_000)))  # the bound itself is read


def test_every_reader_of_a_results_file_refuses_it_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _baseline(tmp_path / ".gpuperf", _set("measurement", "profile", "calls", value=0))
    monkeypatch.chdir(tmp_path)
    for argv in (["compare", "main", str(path)], ["runs", "show", "main"], ["report", "main", "-o", "r.html"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "record 1 (test_x.py::test_step[cpu]): field 'measurement.profile.calls' must be a whole number" in err
        assert err.count("\n") == 1
