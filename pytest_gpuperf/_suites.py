"""Where the shipped suites are: a clone's ``suites/``, or the copy installed with the package.

A clone keeps the suites in ``suites/`` (``pytest suites/``); the wheel installs the same files as
``pytest_gpuperf.suites`` (``pytest --pyargs pytest_gpuperf.suites``), a name that cannot collide in
site-packages. ``ab`` and ``history record`` take the repository's own ``suites/`` when it has one (a clone:
each revision's suites measure that revision), else the installed copy. The suites are found here by name and
never imported: they import torch, and a module of the package that imported them would load them under a
second name in a clone, beside pytest's ``suites``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Final

__all__ = ["CLONE", "PACKAGE", "default_tests", "installed"]

#: The suites' folder in a clone, relative to the repository root.
CLONE: Final = Path("suites")
#: The suites' package in an installed wheel.
PACKAGE: Final = "pytest_gpuperf.suites"


def installed() -> Path | None:
    """The folder of the installed suites (in an editable install, the clone's ``suites/``), or None where the
    package was installed without them."""
    spec = importlib.util.find_spec(PACKAGE)  # finds the folder; imports pytest_gpuperf, not the suites
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(folders[0]) if folders else None


def default_tests(repo: Path) -> tuple[str, ...]:
    """``history record``'s pytest arguments when ``--tests`` is not given: the repository's ``suites/`` when it
    has one (each commit's own), else the installed suites (``--pyargs pytest_gpuperf.suites``)."""
    return (str(CLONE),) if (repo / CLONE).is_dir() else ("--pyargs", PACKAGE)
