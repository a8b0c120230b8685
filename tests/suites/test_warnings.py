"""Warnings are errors in the project's tests (tests/), and not in ``pytest suites/``.

A warning from torch, cuDNN or NCCL must not fail a GPU measurement, nor may another
plugin's configure-time warning (pytest-benchmark's "Benchmarks are automatically
disabled because xdist plugin is active" under ``-n``) stop the suites with an
INTERNALERROR; the project's own tests keep turning every warning into an error.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

_PROJECT_TEST = """
import warnings

import pytest

from pytest_gpuperf import InconclusiveWarning


def test_a_warning_fails():
    warnings.warn("from torch, say", UserWarning)


def test_inconclusive_is_a_verdict_not_an_error():
    warnings.warn("the interval straddles the bound", InconclusiveWarning)


@pytest.mark.filterwarnings("ignore:expected here:UserWarning")
def test_a_test_of_its_own_filter_wins():
    warnings.warn("expected here", UserWarning)
"""

_NOISY_PLUGIN = """
def pytest_configure(config):
    config.issue_config_time_warning(
        UserWarning("Benchmarks are automatically disabled because xdist plugin is active."), stacklevel=2
    )
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """An inner project with this repository's pytest configuration and its tests' warning policy."""
    pytester.makefile(".toml", pyproject=(ROOT / "pyproject.toml").read_text())
    # tests/conftest.py's own function, scoped to the inner tests/ folder.
    pytester.makepyfile(
        **{
            "tests/conftest": (
                "from pathlib import Path\n\nfrom tests.conftest import strict_warnings\n\n\n"
                "def pytest_collection_modifyitems(items):\n    strict_warnings(items, Path(__file__).parent)\n"
            ),
            "tests/test_project": _PROJECT_TEST,
            "suites/test_gpu": "import warnings\n\n\ndef test_warns():\n    warnings.warn('cuDNN says', UserWarning)\n",
            "noisy": _NOISY_PLUGIN,
        }
    )
    pytester.syspathinsert()
    return pytester


# The inner runs are in-process and inherit this test's warning filters: "default" stands for a fresh process.
@pytest.mark.filterwarnings("default")
def test_a_bare_pytest_runs_tests_with_warnings_as_errors_but_inconclusive_and_own_filters_pass(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("-p", "noisy", "-rf")
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.fnmatch_lines(["FAILED tests/test_project.py::test_a_warning_fails - UserWarning*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


@pytest.mark.filterwarnings("default")
def test_pytest_suites_reports_warnings_and_a_plugins_configure_time_warning_is_no_error(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("-p", "noisy", "suites")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    # The test's and the plugin's, both reported (the count may hold pytest's own, such as an assert-rewrite one).
    result.stdout.fnmatch_lines(["*UserWarning: Benchmarks are automatically disabled*", "*UserWarning: cuDNN says*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


@pytest.mark.filterwarnings("default")
def test_in_one_session_with_both_only_the_project_tests_are_strict(project: pytest.Pytester) -> None:
    result = project.runpytest("-p", "noisy", "tests", "suites")
    result.assert_outcomes(failed=1, passed=3)
    result.stdout.fnmatch_lines(["*UserWarning: Benchmarks are automatically disabled*", "*UserWarning: cuDNN says*"])


def test_this_session_turns_a_warning_into_an_error() -> None:
    with pytest.raises(UserWarning, match="strict"):
        warnings.warn("strict", UserWarning, stacklevel=1)
