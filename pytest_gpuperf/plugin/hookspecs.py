"""Extension hooks. Implement them in a ``conftest.py`` or a plugin::

def pytest_gpuperf_record_metadata(item, measurement):
    return {"batch_size": 256}

def pytest_gpuperf_measured(item, record):
    print(record.key, record.measurement.describe())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import pytest

    from ..measuring import Measurement
    from ..results import Record

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_gpuperf_record_metadata(item: pytest.Item, measurement: Measurement) -> dict[str, Any] | None:
    """Return metadata to store with the record of ``measurement``; the dicts of all implementations are merged."""


@hookspec
def pytest_gpuperf_measured(item: pytest.Item, record: Record) -> None:
    """Called once per record kept (not for the extra rounds the gate measures), for example to stream it elsewhere.

    ``record`` holds the checks made so far; a check made later replaces the record in the session's Run."""


@hookspec
def pytest_gpuperf_fingerprint(fingerprint: dict[str, Any]) -> None:
    """Called once per session with the environment fingerprint; add keys to it in place. The session then freezes
    it as a ``results.Fingerprint``, where the added keys read back from ``extra``."""
