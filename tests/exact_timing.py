"""Exact timing, for tests whose verdicts must not depend on how busy the machine is.

Each call of a step returns its nominal duration in seconds instead of taking it, and the
CPU backend's block timer adds up what the calls of a block return. A planted 3x slowdown is
then exactly 3x: real sleeps and spins are not, on a shared machine (a 2 ms sleep measured
3 to 12 ms there). Everything around the timer (sampling, paired rounds, records, the gate)
runs as it does for real, but for the work profile's budget: a step claims milliseconds it does not take, so a share
of the real measuring time would not fit its claimed calls, and the profile's budget is unbounded (``SHARE``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, cast

import pytest

from pytest_gpuperf.measuring import _profiler
from pytest_gpuperf.measuring._backends import CpuBackend

__all__ = ["INSTALL", "SHARE", "exact_time_block", "install"]

#: The work profile's share of the measuring time under exact timing (``PROFILE_SHARE``): a million times it.
SHARE: Final = 1e6


def exact_time_block(self: CpuBackend, fn: Callable[[], object], iterations: int) -> float:
    """``CpuBackend.time_block`` for this process (``monkeypatch.setattr``): the sum of what the calls return."""
    return sum(float(cast(float, fn())) for _ in range(iterations))


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact timing in this process, for the test: the block timer, and the work profile's budget."""
    monkeypatch.setattr(CpuBackend, "time_block", exact_time_block)
    monkeypatch.setattr(_profiler, "PROFILE_SHARE", SHARE)


#: The same timer for a fresh process, as the source of its ``conftest.py`` (pytester inner runs in a subprocess,
#: torchrun ranks, xdist workers) or of a ``sitecustomize.py`` on its PYTHONPATH (a command such as
#: ``python -m pytest_gpuperf ab``): importing it installs the timer for the life of that process.
INSTALL: Final = """
from pytest_gpuperf.measuring import _profiler
from pytest_gpuperf.measuring._backends import CpuBackend


def _exact_time_block(self, fn, iterations):
    return sum(float(fn()) for _ in range(iterations))


CpuBackend.time_block = _exact_time_block
_profiler.PROFILE_SHARE = 1e6  # SHARE
"""
