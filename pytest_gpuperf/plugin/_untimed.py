"""``--gpuperf-measuring``: which tests that measure run, and whether they time (pytest-benchmark's
``--benchmark-disable``, ``--benchmark-skip`` and ``--benchmark-only``, for both fixtures).

- ``on`` (the default): tests measure as usual.
- ``untimed``: each test that measures runs as a plain test, its step called once and nothing timed or
  recorded. A ``benchmark`` test calls its function once and goes on (``benchmark.enabled`` is False and
  ``benchmark.stats`` None, as under ``--benchmark-disable``). A ``gpuperf`` test calls its step once
  (``measure``, ``run``; each step of ``paired``), and then stops as skipped with the reason: the rest of such a
  test judges the Measurement, which an untimed run does not make. A step that raises fails the test.
- ``skip``: tests that measure are skipped; ``only``: the other tests are.

Where pytest-gpuperf's ``benchmark`` fixture serves (pytest-benchmark absent or blocked), pytest-benchmark's
three flags (and ``--benchmark-enable``) are accepted and mapped onto this option (``BENCHMARK_FLAGS``), and
``--benchmark-json=PATH`` is declared here too (``_benchmark.py`` writes it); where pytest-benchmark is active
they are its own, and it handles its tests.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Final, NoReturn

import pytest

if TYPE_CHECKING:
    from ..measuring import Step, StepFactory
    from ._session import GpuperfSession

__all__ = [
    "JSON_DEST",
    "MODES",
    "UntimedPlugin",
    "add_benchmark_flags",
    "call_step_once",
    "mode_from_benchmark_flags",
    "skip_untimed",
]

MODES: Final = ("on", "untimed", "skip", "only")

#: pytest-benchmark's flags accepted where our ``benchmark`` fixture serves: flag -> (dest, help). The dests are
#: ours, so that pytest-benchmark's own options, where it is active, are never read as ours.
BENCHMARK_FLAGS: Final = {
    "--benchmark-disable": (
        "gpuperf_benchmark_disable",
        "pytest-benchmark's flag, mapped by pytest-gpuperf: --gpuperf-measuring=untimed (each test that measures "
        "runs its step once, untimed)",
    ),
    "--benchmark-enable": (
        "gpuperf_benchmark_enable",
        "pytest-benchmark's flag, mapped by pytest-gpuperf: overrides --benchmark-disable (in an ini's addopts)",
    ),
    "--benchmark-skip": (
        "gpuperf_benchmark_skip",
        "pytest-benchmark's flag, mapped by pytest-gpuperf: --gpuperf-measuring=skip (skip the tests that measure)",
    ),
    "--benchmark-only": (
        "gpuperf_benchmark_only",
        "pytest-benchmark's flag, mapped by pytest-gpuperf: --gpuperf-measuring=only (skip the tests that do not "
        "measure); overrides --benchmark-skip",
    ),
}


#: Where ``--benchmark-json`` (ours, ``_benchmark.py`` writes it) keeps its value.
JSON_DEST: Final = "gpuperf_benchmark_json"


def pytest_benchmark_loads(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Will pytest-benchmark serve this session? Asked while options are declared, before its plugin may have
    loaded: it is installed and not blocked (``-p no:benchmark``). Where it is installed and not loaded for another
    reason (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), this says yes, and its flags are not added (docs/options.md)."""
    if pluginmanager.has_plugin("benchmark"):
        return True
    return not pluginmanager.is_blocked("benchmark") and importlib.util.find_spec("pytest_benchmark") is not None


def add_benchmark_flags(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """pytest-benchmark's untimed and selection flags and --benchmark-json, where pytest-benchmark will not declare
    them itself."""
    if pytest_benchmark_loads(pluginmanager):
        return
    group = parser.getgroup("gpuperf-benchmark", "pytest-benchmark's flags, mapped by pytest-gpuperf")
    for flag, (dest, text) in BENCHMARK_FLAGS.items():
        group.addoption(flag, dest=dest, action="store_true", default=False, help=text)
    group.addoption(
        "--benchmark-json",
        dest=JSON_DEST,
        metavar="PATH",
        default=None,
        help="pytest-benchmark's flag, kept by pytest-gpuperf: write this run's records as pytest-benchmark's JSON "
        "(the schema of pytest-gpuperf export --format pytest-benchmark), through pytest-benchmark's JSON hooks",
    )


def mode_from_benchmark_flags(config: pytest.Config) -> str | None:
    """The ``--gpuperf-measuring`` value pytest-benchmark's flags ask for, as pytest-benchmark reads them (``only``
    over ``skip``, ``--benchmark-enable`` over ``--benchmark-disable``), or None when none is given."""
    given = {dest: bool(config.getoption(dest, False)) for dest, _ in BENCHMARK_FLAGS.values()}
    disabled = given["gpuperf_benchmark_disable"] and not given["gpuperf_benchmark_enable"]
    if disabled and given["gpuperf_benchmark_only"]:
        raise pytest.UsageError(
            "--benchmark-only runs only the tests that measure, and --benchmark-disable keeps them from timing: "
            "give one of them (as pytest-benchmark refuses both)"
        )
    if given["gpuperf_benchmark_only"]:
        return "only"
    if given["gpuperf_benchmark_skip"]:
        return "skip"
    return "untimed" if disabled else None


def call_step_once(step: Step | StepFactory) -> None:
    """Run one of ``gpuperf.paired``'s steps once, untimed: a factory builds its Step first; the Step's check runs."""
    from ..measuring import Step

    built = step if isinstance(step, Step) else step()
    built.fn()
    if built.check is not None:
        built.check()


def skip_untimed(what: str) -> NoReturn:
    """Stop a ``gpuperf`` test after its steps ran once: what it judges next is a Measurement, which is not made."""
    __tracebackhide__ = True
    pytest.skip(
        f"gpuperf: untimed run (--gpuperf-measuring=untimed): {what} ran once, untimed; what this test judges on its "
        "measurement is not judged"
    )


class UntimedPlugin:
    """Registered by ``entry.py`` when ``--gpuperf-measuring`` is not ``on``: skips the tests the mode leaves out,
    and says in the terminal what the run did not time."""

    def __init__(self, session: GpuperfSession) -> None:
        self.session = session
        self.mode: str = session.settings.measuring

    @pytest.hookimpl(trylast=True)  # after the fixtures that measure are declared and tests parametrized
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        skip_measuring = pytest.mark.skip(reason="gpuperf: a test that measures (--gpuperf-measuring=skip)")
        skip_other = pytest.mark.skip(reason="gpuperf: a test that does not measure (--gpuperf-measuring=only)")
        for item in items:
            measures = self.session.measures(item)
            if measures and self.mode == "skip":
                item.add_marker(skip_measuring)
            elif not measures and self.mode == "only":
                item.add_marker(skip_other)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.session.is_reporter or self.mode == "only":
            return
        if self.mode == "untimed":
            line = (
                "gpuperf: untimed run (--gpuperf-measuring=untimed): the tests that measure ran their steps once; "
                "nothing was timed, recorded, saved or compared"
            )
        else:
            line = "gpuperf: the tests that measure were skipped (--gpuperf-measuring=skip); nothing was timed"
        terminalreporter.write_sep("-", "gpuperf")
        terminalreporter.write_line(line)
