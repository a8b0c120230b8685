"""pytest entry point: options, ini keys, markers, hooks and fixtures. The work lives in ``_session.py``
(the session's state and hooks, its record book in ``_records.py``) and ``_gate.py`` (saving, comparing, the
exit status)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from . import hookspecs
from ._gate import ReportStatus
from ._markers import MARKERS
from ._options import OPTIONS, add_ini, given_values
from ._session import PER_TEST_HOOKS, SESSION_KEY, GpuperfSession
from ._settings import SettingError, Settings
from ._untimed import UntimedPlugin, add_benchmark_flags, mode_from_benchmark_flags
from ._xdist import XdistController

if TYPE_CHECKING:
    from ..measuring import DeviceSlot
    from ._fixture import Gpuperf

PLUGIN_NAME = "gpuperf-session"
GATE_PLUGIN_NAME = "gpuperf-gate"
XDIST_PLUGIN_NAME = "gpuperf-xdist"
BENCHMARK_PLUGIN_NAME = "gpuperf-benchmark"
UNTIMED_PLUGIN_NAME = "gpuperf-untimed"
STATUS_PLUGIN_NAME = "gpuperf-report-status"
#: The plugin objects a session registers only where it needs them, unregistered at its end.
_REGISTERED_WHERE_NEEDED = (
    XDIST_PLUGIN_NAME,
    BENCHMARK_PLUGIN_NAME,
    UNTIMED_PLUGIN_NAME,
    STATUS_PLUGIN_NAME,
    PER_TEST_HOOKS,
)


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
    try:
        settings = Settings.resolve(cli, ini)
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
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
        config.pluginmanager.register(BenchmarkPlugin(session), BENCHMARK_PLUGIN_NAME)


def _has_benchmark_specs(config: pytest.Config) -> bool:
    """Are pytest-benchmark's hook specifications registered already (by pytest-benchmark, or a first configure)?"""
    caller = getattr(config.hook, "pytest_benchmark_update_machine_info", None)
    return caller is not None and caller.spec is not None


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        config.pluginmanager.unregister(name=GATE_PLUGIN_NAME)
        for name in _REGISTERED_WHERE_NEEDED:
            if config.pluginmanager.has_plugin(name):
                config.pluginmanager.unregister(name=name)
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
