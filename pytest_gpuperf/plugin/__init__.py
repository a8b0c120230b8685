"""The pytest adapter: entry point, options and settings, markers, hookspecs, the session object, the
``gpuperf`` fixture, the results table, and the gate's hooks. It turns pytest's world into Settings and
Records; the work is done by the measuring, results, gate and history packages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from ._fixture import Gpuperf
    from ._gate import is_out_of_memory, release_failed_test_memory
    from ._settings import Settings, user_settings

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "Gpuperf",
    "Settings",
    "is_out_of_memory",
    "release_failed_test_memory",
    "user_settings",
]
