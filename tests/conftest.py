"""Test-wide setup: warnings as errors, real-hardware markers, and pytester inner runs that behave the same in any
test order."""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import torch
import torch._dynamo

import pytest_gpuperf

# pytester's in-process runs restore sys.modules afterwards, so a module that an inner run
# imports first is imported again by the next one, as a second copy. torch modules that
# register operator libraries fail the second time (torch._dynamo pulls in
# torch._inductor.test_operators: "Only a single TORCH_LIBRARY can be used ..."), and a test
# that patches one copy of a pytest_gpuperf module would miss the other (the plugin imports
# most of its modules lazily). So everything is imported once, here, before any inner run.
for _module in pkgutil.walk_packages(pytest_gpuperf.__path__, "pytest_gpuperf."):
    if not _module.name.endswith("__main__"):
        importlib.import_module(_module.name)


_TESTS: Final = Path(__file__).parent

#: The clone's own results directory, where ``pytest suites/`` run in the clone keeps its runs and baselines. An
#: inner run given a file of the clone (``suites/test_mlp.py``) takes the clone as its rootdir, and with it this
#: directory, unless the test gives it ``--gpuperf-results-dir`` under its tmp path.
_CLONE_RESULTS: Final = _TESTS.parent / ".gpuperf"

#: Warning filters of the project's own tests: every warning is an error, except the plugin's
#: InconclusiveWarning, a verdict some tests expect. They are marks on the tests below this folder,
#: not pyproject's ``filterwarnings`` ini, which would apply to ``pytest suites/`` too, where a torch,
#: cuDNN or NCCL warning must not fail a measurement, and to other plugins' configure-time warnings
#: (pytest-benchmark's under xdist), which pytest then turns into an INTERNALERROR.
#: Also not an error: importlib's load_module deprecation, raised inside torch 2.3's inductor (Python 3.11).
STRICT_WARNINGS: Final = (
    "error",
    "default::pytest_gpuperf.InconclusiveWarning",
    r"default:the load_module\(\) method is deprecated:DeprecationWarning",
)


def strict_warnings(items: list[pytest.Item], root: Path) -> None:
    """Give every item below ``root`` the ``STRICT_WARNINGS`` filters, weaker than the test's own filters."""
    for item in items:
        if item.path.is_relative_to(root):
            # A later filter wins; pytest applies an item's own marks in order, before its class's
            # and module's. Inserted at the front, in reverse: error, then the exception to it, then
            # whatever the test itself says.
            for spec in reversed(STRICT_WARNINGS):
                item.add_marker(pytest.mark.filterwarnings(spec), append=False)


@pytest.fixture
def whole_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests that check what a real work profile reads, not its budget: the profile gets the whole measuring time,
    so that a busy machine's slow reading never reduces it (to counts without times, or none)."""
    from pytest_gpuperf.measuring import _profiler

    monkeypatch.setattr(_profiler, "PROFILE_SHARE", 1.0)


def _absent(kind: str) -> str:
    """Why a test marked ``kind`` cannot run here, or '' when it can."""
    if kind == "cuda" and not torch.cuda.is_available():
        return f"needs a CUDA GPU; torch {torch.__version__} sees none on this machine"
    if kind == "mps" and not torch.backends.mps.is_available():
        return "needs Apple MPS; not available on this machine"
    return ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Warnings are errors in the project's tests; ``@pytest.mark.cuda`` and ``@pytest.mark.mps`` tests need real
    hardware, and elsewhere they skip with the reason."""
    strict_warnings(items, _TESTS)
    for item in items:
        for kind in ("cuda", "mps"):
            if item.get_closest_marker(kind):
                reason = _absent(kind)
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole of the project's tests (``pytest``, ``pytest -m e2e``: the testpaths, no file named) run on every
    core this process may use, in pytest-xdist's workers, unless ``-n`` says otherwise (``-n 0``: in this process);
    ``--dist`` given is kept.
    A run of some files, one under ``--pdb``, and pytest-xdist's workers themselves run as asked. Before
    pytest-xdist's own hook, which reads the count."""
    option = config.option
    whole = config.args_source is pytest.Config.ArgsSource.TESTPATHS
    if not whole or getattr(option, "numprocesses", 0) is not None or option.usepdb or hasattr(config, "workerinput"):
        return
    option.numprocesses = len(os.sched_getaffinity(0))
    if option.dist == "no":
        option.dist = "worksteal"  # an idle worker takes tests queued for a busy one: the slow ones do not end alone


#: What pytest-xdist tells a worker process about itself: an inner run of a test must not inherit it, or it would
#: take itself for a worker of the outer session (the plugin binds a worker's device by it).
_XDIST_WORKER_ENV: Final = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the project's tests run in pytest-xdist's workers, their inner runs (in-process and subprocess) are
    sessions of their own, as they are in one process."""
    for name in _XDIST_WORKER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs write to a pipe or a buffer, which keeps the results table one line a row (``terminal_width``),
    unless a test sets COLUMNS. pytest's capture plugin imports readline, which puts the terminal's COLUMNS (80
    without one) in the C environment of the process, where Python's ``os.environ`` does not see it, and so in
    every process it starts: pytest-xdist's workers, whose inner runs then fitted their tables to 80 columns."""
    # Set first, so that deleting it unsets it in the C environment too, where a subprocess.run would find it.
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("COLUMNS")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what this process holds now (torch, the package, every collected test) out of the garbage collector's
    reach: each measurement collects before it samples, a full collection (as on a GPU) walked it all, and the
    measuring tests here took a quarter longer for it. What the tests make from here on is collected as before."""
    gc.freeze()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester with pytest-randomly off in its inner runs (in-process and subprocess alike): an inner
    session's tests run in file order, so that what it prints can be checked line by line."""
    # Set after pytester's own setup, which clears PYTEST_ADDOPTS.
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester


@pytest.fixture(autouse=True)
def _not_on_github(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate writes to $GITHUB_STEP_SUMMARY and prints annotations on GitHub Actions: not from the tests' own
    compares, when this suite runs there (tests/gate/test_github.py sets them where it checks them)."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


def _files_under(folder: Path) -> frozenset[Path]:
    """Every file below ``folder`` (none where it does not exist)."""
    return frozenset(path for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else frozenset()


@pytest.fixture(autouse=True)
def _nothing_written_to_the_clone() -> Iterator[None]:
    """The project's tests write their results under their tmp paths, never into the clone's ``.gpuperf``, where
    they would mix with the user's own runs; a test that does errors at teardown with the files it left."""
    before = _files_under(_CLONE_RESULTS)
    yield
    new = sorted(str(path.relative_to(_CLONE_RESULTS.parent)) for path in _files_under(_CLONE_RESULTS) - before)
    assert not new, (
        f"this test wrote into the clone's results directory: {', '.join(new)}; give its inner run "
        "--gpuperf-results-dir under its tmp path"
    )
