"""Issue 24 item 6, the small things users hit in the plugin: an output file that a session which measured nothing
leaves as it was (``--co``, a ``-k`` selecting no measuring test), one record per test under pytest-rerunfailures,
torch's own import warnings kept out of a ``-W error`` session's collection; and (issue 35, item 9) a session whose
tests failed marked in its run file and in ``pytest-gpuperf runs``, with the baseline it went into."""

from __future__ import annotations

import json

import pytest

TEST = "def test_m(gpuperf):\n    gpuperf.measure(lambda: None)\n\n\ndef test_plain():\n    pass\n"
FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.005",
    "--gpuperf-max-time=0.05",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-quiet-wait=0",
    "-p",
    "no:randomly",
)


# ---------------------------------------------------------------- c: nothing measured, nothing replaced


@pytest.mark.parametrize("selection", [("--co",), ("-k", "test_plain")])
def test_a_session_that_measured_nothing_leaves_the_results_and_report_as_they_were(
    pytester: pytest.Pytester, selection: tuple[str, ...]
) -> None:
    """On main, ``--co`` replaced out.json with a results file of 0 records and the report with an empty one."""
    pytester.makepyfile(test_m=TEST)
    result = pytester.runpytest(*FAST, "--gpuperf-json=out.json", "--gpuperf-html=report.html")
    assert result.ret == pytest.ExitCode.OK
    before = {name: (pytester.path / name).read_bytes() for name in ("out.json", "report.html")}
    assert len(json.loads(before["out.json"])["records"]) == 1

    result = pytester.runpytest(*FAST, "--gpuperf-json=out.json", "--gpuperf-html=report.html", *selection)
    assert result.ret == pytest.ExitCode.OK
    assert {name: (pytester.path / name).read_bytes() for name in before} == before
    result.stdout.fnmatch_lines(
        [
            "gpuperf: nothing was measured, so out.json was left as it was",
            "gpuperf: nothing was measured, so the HTML report report.html was left as it was",
        ],
        consecutive=False,
    )


def test_a_session_that_measured_nothing_writes_no_new_results_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_m=TEST)
    result = pytester.runpytest(*FAST, "--gpuperf-json=out.json", "--gpuperf-html=report.html", "--co")
    assert result.ret == pytest.ExitCode.OK
    assert not (pytester.path / "out.json").exists() and not (pytester.path / "report.html").exists()


# ---------------------------------------------------------------- b: one record per test under pytest-rerunfailures

FLAKY = """
from pathlib import Path


def test_flaky(gpuperf):
    gpuperf.measure(lambda: None)
    attempts = Path("attempts")
    attempts.write_text(attempts.read_text() + "x" if attempts.exists() else "x")
    assert len(attempts.read_text()) == 3, "fails twice, then passes"


def test_steady(gpuperf):
    gpuperf.measure(lambda: None)
"""


#: What pytest-rerunfailures does with a failed test (its ``pytest_runtest_protocol``): run it again, each attempt's
#: fixtures set up anew, until it passes or the attempts run out; only the last attempt's reports are logged.
RERUN_CONFTEST = """
import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for attempt in range(3):
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        if not any(report.failed for report in reports):
            break
        item._initrequest()
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""


def test_a_test_run_again_keeps_one_record_its_last_attempts(pytester: pytest.Pytester) -> None:
    """The same as pytest-rerunfailures' attempts, without it (it is not a dependency): on main 3 records."""
    pytester.makeconftest(RERUN_CONFTEST)
    pytester.makepyfile(test_m=FLAKY)
    result = pytester.runpytest(*FAST, "-p", "no:rerunfailures", "--gpuperf-json=out.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["test_m.py::test_flaky[[]cpu[]]: measured in 3 attempts (rerun): the last attempt's record is kept"]
    )
    saved = json.loads((pytester.path / "out.json").read_text())
    assert [r["key"] for r in saved["records"]] == ["test_m.py::test_flaky[cpu]", "test_m.py::test_steady[cpu]"]
    assert "failures" not in saved  # its last attempt passed: the session's tests did not fail


def test_a_rerun_test_keeps_one_record_its_last_attempts(pytester: pytest.Pytester) -> None:
    """With the real pytest-rerunfailures where it is installed (not a dev dependency: loaded into every inner
    pytest run, it keeps a failed test's exception, and so its tensors, alive past our release of them)."""
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(test_m=FLAKY)
    result = pytester.runpytest(*FAST, "-p", "rerunfailures", "--reruns=2", "--gpuperf-json=out.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*2 passed*2 rerun*"])
    result.stdout.fnmatch_lines(
        ["test_m.py::test_flaky[[]cpu[]]: measured in 3 attempts (rerun): the last attempt's record is kept"]
    )
    saved = json.loads((pytester.path / "out.json").read_text())
    assert [r["key"] for r in saved["records"]] == ["test_m.py::test_flaky[cpu]", "test_m.py::test_steady[cpu]"]
    assert [note[1] for note in saved["notes"]] == ["measured in 3 attempts (rerun): the last attempt's record is kept"]
    from pytest_gpuperf.cli import main

    gab = ["export", "--format", "github-action-benchmark", "out.json", "-o", "gab.json"]
    assert main(gab) == 0  # in pytester.path, the cwd
    names = [entry["name"] for entry in json.loads((pytester.path / "gab.json").read_text())]
    assert names == ["test_m.py::test_flaky[cpu]", "test_m.py::test_steady[cpu]"]


# ---------------------------------------------------------------- a: torch's import warnings under -W error

#: A plugin loaded before ours (``-p``) that makes numpy absent, as in a clean install without it.
BLOCK_NUMPY = """
import sys


class NoNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoNumpy())


def pytest_sessionfinish(session):
    with open("imported.txt", "w") as out:
        out.write(" ".join(name for name in ("numpy", "torch") if name in sys.modules))
"""
PLAIN = "def test_plain():\n    assert 1 + 1 == 2\n"


@pytest.fixture
def without_numpy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(blocknumpy=BLOCK_NUMPY, test_plain=PLAIN)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A fresh process (torch imported anew, numpy blocked before it), warnings as errors."""
    return pytester.runpytest_subprocess("-p", "blocknumpy", "-W", "error", *FAST, *args)


def test_torchs_numpy_warning_is_no_collection_error_under_w_error(without_numpy: pytest.Pytester) -> None:
    """On main: ``ERROR test_m.py - UserWarning: Failed to initialize NumPy``, 1 error during collection, exit 2,
    raised in our pytest_generate_tests; test_plain.py, which never imports torch, did not run either."""
    without_numpy.makepyfile(test_m=TEST)
    result = _run(without_numpy)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*UserWarning: Failed to initialize NumPy*", "*3 passed, 1 warning*"])
    assert (without_numpy.path / "imported.txt").read_text() == "torch"


def test_a_session_without_our_fixtures_never_imports_torch(without_numpy: pytest.Pytester) -> None:
    result = _run(without_numpy, "test_plain.py")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert (without_numpy.path / "imported.txt").read_text() == ""


@pytest.mark.parametrize("fixture", ["benchmark", "gpuperf"])
def test_devices_resolved_at_the_start_are_no_error_under_w_error(without_numpy: pytest.Pytester, fixture: str) -> None:
    """``--gpuperf-missing-device=error`` resolves the devices at the session's start; the ``benchmark`` fixture
    (ours, under ``-p no:benchmark``) imports torch while its test runs."""
    call = {"benchmark": "benchmark(sum, range(10))", "gpuperf": "gpuperf.measure(lambda: sum(range(10)))"}[fixture]
    without_numpy.makepyfile(test_b=f"def test_b({fixture}):\n    {call}\n")
    result = _run(without_numpy, "-p", "no:benchmark", "--gpuperf-missing-device=error", "--gpuperf-json=out.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert json.loads((without_numpy.path / "out.json").read_text())["records"]


# ---------------------------------------------------------------- issue 35, item 9: a session whose tests failed

FAILING = """
def test_ok(gpuperf):
    gpuperf.measure(lambda: None)


def test_bad(gpuperf):
    gpuperf.measure(lambda: None)
    assert False


def test_plain():
    assert False
"""


def test_a_session_whose_tests_failed_is_marked_in_its_run_file_and_in_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--gpuperf-save`` keeps the run of a session whose tests failed (the records it measured, the failed test's
    too): ``runs`` said nothing of the failures, neither on the run file's line nor on the baseline's."""
    from pytest_gpuperf.cli import main

    pytester.makepyfile(test_m=FAILING)
    result = pytester.runpytest(*FAST, "--gpuperf-save=main")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["gpuperf: saved 2 records to *", "gpuperf: baseline 'main' * now holds 1 run*"])
    (path,) = (pytester.path / ".gpuperf" / "runs").glob("*.json")
    saved = json.loads(path.read_text())
    assert saved["failures"] == {"test_m.py::test_bad[cpu]": "failed", "test_m.py::test_plain": "failed"}
    pytester.makepyfile(test_m=TEST)
    assert pytester.runpytest(*FAST).ret == pytest.ExitCode.OK  # a run file that no baseline holds, and none failed

    monkeypatch.chdir(pytester.path)
    assert main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    failed, passed = (line for line in lines if line[:1].isdigit())
    assert failed.endswith("2 tests failed; in baseline 'main'") and failed.startswith(path.stem)
    assert passed.split()[-1] == "1"  # its records: no note
    (baseline,) = (line for line in lines if line.startswith("main "))
    assert baseline.endswith("1 run of a session whose tests failed")
    assert main(["runs", "show", path.stem]) == 0
    about = capsys.readouterr().out.splitlines()[1]
    assert about.endswith("2 records; 2 tests failed: test_m.py::test_bad[cpu], test_m.py::test_plain")
