"""pytest entry point: options, ini keys, markers, hooks and fixtures. The work lives in ``_session.py``
(the session's state and hooks, its record book in ``_records.py``) and ``_gate.py`` (saving, comparing, the
exit status).

A session of plain tests pays for none of it: the session and the gate are made (``_Start.session``) at
configure only where an option or ini key is given or the run has several processes, and otherwise when
collection first meets a test that measures or carries one of our markers (``bench/startup.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from . import hookspecs
from ._markers import MARKERS, marked
from ._options import OPTIONS, add_ini, chosen, given_values
from ._processes import is_controller, local_world_size, worker_index
from ._untimed import JSON_DEST, add_benchmark_flags, mode_from_benchmark_flags

if TYPE_CHECKING:
    from ..measuring import DeviceSlot
    from ._fixture import Gpuperf
    from ._session import GpuperfSession
    from ._settings import Settings

#: The session of this pytest run, once made (``_Start.session``).
SESSION_KEY = pytest.StashKey["GpuperfSession"]()

START_PLUGIN_NAME = "gpuperf-start"
PLUGIN_NAME = "gpuperf-session"
GATE_PLUGIN_NAME = "gpuperf-gate"
XDIST_PLUGIN_NAME = "gpuperf-xdist"
BENCHMARK_PLUGIN_NAME = "gpuperf-benchmark"
UNTIMED_PLUGIN_NAME = "gpuperf-untimed"
STATUS_PLUGIN_NAME = "gpuperf-report-status"
#: The plugin objects a session registers only where it needs them, unregistered at its end.
_REGISTERED_WHERE_NEEDED = (
    START_PLUGIN_NAME,
    XDIST_PLUGIN_NAME,
    BENCHMARK_PLUGIN_NAME,
    UNTIMED_PLUGIN_NAME,
    STATUS_PLUGIN_NAME,
)


class _Start:
    """Makes the session where it is first needed, and hands it the hooks it was made too late to receive."""

    def __init__(self, config: pytest.Config, cli: dict[str, object], ini: dict[str, object]) -> None:
        self._config = config
        self._given = cli, ini  # resolved with the session: a session of plain tests loads no parser
        self._pytest_session: pytest.Session | None = None  # pytest's, once started: a late session is told of it

    def session(self) -> GpuperfSession:
        """This run's session, made and registered (with the gate and the plugins it needs) on the first call."""
        config = self._config
        made = config.stash.get(SESSION_KEY, None)
        if made is not None:
            return made
        from ._gate import ReportStatus
        from ._session import GpuperfSession
        from ._untimed import UntimedPlugin
        from ._xdist import XdistController

        settings = _resolved(*self._given)
        session = GpuperfSession(config, settings)
        config.stash[SESSION_KEY] = session
        config.pluginmanager.register(session, PLUGIN_NAME)
        config.pluginmanager.register(session.gate, GATE_PLUGIN_NAME)
        if ReportStatus.makes_reports(settings):
            config.pluginmanager.register(ReportStatus(), STATUS_PLUGIN_NAME)
        if session.controller:
            config.pluginmanager.register(XdistController(session.book), XDIST_PLUGIN_NAME)
        if settings.measuring != "on":
            config.pluginmanager.register(UntimedPlugin(session), UNTIMED_PLUGIN_NAME)
        if config.pluginmanager.has_plugin(BENCHMARK_PLUGIN_NAME):
            session.declare_measuring_fixture("benchmark")
        if self._pytest_session is not None:  # made during collection: the start it missed
            session.pytest_sessionstart(self._pytest_session)
            session.gate.pytest_sessionstart(self._pytest_session)
        return session

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._pytest_session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """A test that measures on a device: the session is made, and parametrizes this first one itself (a plugin
        registered during a hook's call is not called for it)."""
        if "gpuperf_device" in metafunc.fixturenames and SESSION_KEY not in self._config.stash:
            self.session().pytest_generate_tests(metafunc)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """A collected test carrying one of our markers, in a session that has none yet: made now."""
        if SESSION_KEY not in self._config.stash and any(marked(item) for item in session.items):
            self.session().pytest_collection_finish(session)


def _resolved(cli: dict[str, object], ini: dict[str, object]) -> Settings:
    """The session's settings; a bad value is a usage error naming it (only a value given can be bad: the defaults
    resolve, tested, and where one is given the session is made at configure)."""
    from ._settings import SettingError, Settings

    try:
        return Settings.resolve(cli, ini)
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None


def _eager(config: pytest.Config, cli: dict[str, object], ini: dict[str, object]) -> bool:
    """Is the session needed from the start: an option or ini key given, or a run of several processes (an xdist
    controller or worker, torchrun's ranks), or pytest-benchmark's JSON asked of our ``benchmark`` fixture?"""
    given = bool(chosen(cli, ini))  # "--gpuperf-json=" is given (and refused); an empty ini key is not
    several = worker_index(config) is not None or is_controller(config) or local_world_size() > 1
    return given or several or bool(config.getoption(JSON_DEST, None))


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("gpuperf", "pytest-gpuperf: deep-learning performance tests")
    for spec in OPTIONS:
        shape: dict[str, Any] = {"action": "store_true"} if spec.switch else {"metavar": spec.metavar}
        group.addoption(
            spec.flag, dest=f"gpuperf_{spec.field}", default=None, help=spec.help.replace("%", "%%"), **shape
        )
        add_ini(parser, spec)
    add_benchmark_flags(parser, pluginmanager)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    cli, ini = given_values(config)
    mapped = mode_from_benchmark_flags(config)
    if mapped is not None:
        if cli["measuring"] not in (None, mapped):
            raise pytest.UsageError(
                f"--gpuperf-measuring={cli['measuring']} and pytest-benchmark's flags (--gpuperf-measuring={mapped}) "
                "disagree: give one of them"
            )
        cli["measuring"] = mapped
    start = _Start(config, cli, ini)
    config.pluginmanager.register(start, START_PLUGIN_NAME)
    if not config.pluginmanager.has_plugin("benchmark"):
        # pytest-benchmark absent or blocked (-p no:benchmark): its suites get our `benchmark` fixture, and their
        # conftests' pytest-benchmark hooks the specifications pytest checks them against. They are added here,
        # not in pytest_addhooks, which runs before it is known whether pytest-benchmark loads (its own
        # specifications would then clash with ours); pytest checks hooks without one only after collection.
        from . import _benchmark_hooks
        from ._benchmark_plugin import MARKER, BenchmarkPlugin

        if not _has_benchmark_specs(config):
            config.pluginmanager.add_hookspecs(_benchmark_hooks)
        config.addinivalue_line("markers", MARKER)
        config.pluginmanager.register(BenchmarkPlugin(config, start.session), BENCHMARK_PLUGIN_NAME)
    if _eager(config, cli, ini):
        start.session()


def _has_benchmark_specs(config: pytest.Config) -> bool:
    """Are pytest-benchmark's hook specifications registered already (by pytest-benchmark, or a first configure)?"""
    caller = getattr(config.hook, "pytest_benchmark_update_machine_info", None)
    return caller is not None and caller.spec is not None


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    names = [*_REGISTERED_WHERE_NEEDED]
    if session is not None:
        from ._session import PER_TEST_HOOKS

        names += [GATE_PLUGIN_NAME, PER_TEST_HOOKS]
    for name in names:
        if config.pluginmanager.has_plugin(name):
            config.pluginmanager.unregister(name=name)
    if session is not None:
        config.pluginmanager.unregister(session)
        del config.stash[SESSION_KEY]


@pytest.fixture
def gpuperf_device(request: pytest.FixtureRequest) -> Any:
    """The ``torch.device`` this test instance runs on (tests run once per ``--gpuperf-device``)."""
    import torch

    slot: DeviceSlot = request.config.stash[SESSION_KEY].physical(request.param)
    return torch.device(slot.id)


@pytest.fixture
def gpuperf(request: pytest.FixtureRequest, gpuperf_device: Any) -> Gpuperf:
    """Measure on this test's device: ``gpuperf.measure(fn, flops=...)`` returns a Measurement."""
    from ._fixture import Gpuperf

    session = request.config.stash[SESSION_KEY]
    slot = session.physical(request.node.callspec.params["gpuperf_device"])
    return Gpuperf(request.node, session, slot)
