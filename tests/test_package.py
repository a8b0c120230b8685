"""The package as a whole: its public API resolves lazily, and starting pytest loads only what options need."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = (
    "pytest_gpuperf",
    "pytest_gpuperf.measuring",
    "pytest_gpuperf.results",
    "pytest_gpuperf.gate",
    "pytest_gpuperf.history",
    "pytest_gpuperf._pytest",
)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves_and_is_listed(name: str) -> None:
    package = importlib.import_module(name)
    exported = sorted(package.__all__)
    assert exported == dir(package), "__all__ and the TYPE_CHECKING imports name the same exports"
    for attribute in exported:
        assert getattr(package, attribute) is not None, f"{name}.{attribute}"
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'nothing_here'"):
        getattr(package, "nothing_here")  # noqa: B009 - the lazy lookup's error is what is tested


def test_the_documented_imports_keep_working() -> None:
    from pytest_gpuperf import Measurement, Step, Workload, measure

    assert callable(measure) and Measurement.__name__ == "Measurement"
    assert Step.__module__.startswith("pytest_gpuperf.measuring") and Workload.__name__ == "Workload"


_LOADED = """
import sys
import pytest
import pytest_gpuperf._pytest.plugin
print("\\n".join(sorted(sys.modules)))
"""


def test_loading_the_plugin_imports_no_measuring_machinery() -> None:
    """What pytest imports at every start: no torch, numpy or tabulate, no results, gate or history code."""
    done = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "pytest_gpuperf._pytest.plugin" in loaded
    heavy = {"torch", "numpy", "tabulate", "pytest_gpuperf.results", "pytest_gpuperf.history", "pytest_gpuperf.cli"}
    assert not heavy & loaded
    assert not {
        name for name in loaded if name.startswith("pytest_gpuperf.gate.") and name != "pytest_gpuperf.gate._verdicts"
    }
