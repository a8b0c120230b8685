"""pytest entry point: options, ini keys, markers, hooks and fixtures. The work lives in ``session.py``."""

from __future__ import annotations

from typing import Any

import pytest

from . import hookspecs
from .devices import DeviceSlot
from .fixture import Gpuperf
from .gate import GatePlugin
from .session import SESSION_KEY, GpuperfSession
from .settings import OPTIONS, SettingError, Settings

PLUGIN_NAME = "gpuperf-session"
GATE_PLUGIN_NAME = "gpuperf-gate"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuperf", "pytest-gpuperf: deep-learning performance tests")
    for spec in OPTIONS:
        group.addoption(
            spec.flag,
            dest=f"gpuperf_{spec.field}",
            metavar=spec.metavar,
            default=None,
            help=spec.help.replace("%", "%%"),
        )
        parser.addini(spec.ini, help=f"ini form of {spec.flag}", default=None)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gpuperf(**settings): per-test sampling settings, for example "
        "@pytest.mark.gpuperf(target=0.02, max_time=10); they override the command line and ini",
    )
    config.addinivalue_line(
        "markers",
        "gpuperf_requires(*kinds, count=1): run only on devices of these kinds, for example "
        '@pytest.mark.gpuperf_requires("cuda", count=2); other devices skip with the reason',
    )
    cli = {spec.field: config.getoption(f"gpuperf_{spec.field}") for spec in OPTIONS}
    ini = {spec.field: config.getini(spec.ini) for spec in OPTIONS}
    try:
        settings = Settings.resolve(cli, ini)
    except SettingError as exc:
        raise pytest.UsageError(str(exc)) from None
    session = GpuperfSession(config, settings)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, PLUGIN_NAME)
    config.pluginmanager.register(GatePlugin(session), GATE_PLUGIN_NAME)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        config.pluginmanager.unregister(name=GATE_PLUGIN_NAME)
        config.pluginmanager.unregister(session)
        del config.stash[SESSION_KEY]


@pytest.fixture
def gpuperf_device(request: pytest.FixtureRequest) -> Any:
    """The ``torch.device`` this test instance runs on (tests run once per ``--gpuperf-device``)."""
    import torch

    slot: DeviceSlot = request.param
    return torch.device(slot.id)


@pytest.fixture
def gpuperf(request: pytest.FixtureRequest, gpuperf_device: Any) -> Gpuperf:
    """Measure on this test's device: ``gpuperf.measure(fn, flops=...)`` returns a Measurement."""
    session = request.config.stash[SESSION_KEY]
    slot = request.node.callspec.params["gpuperf_device"]
    return Gpuperf(request.node, session, slot)
