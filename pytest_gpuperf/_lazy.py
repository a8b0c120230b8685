"""Lazy re-exports for the packages' ``__init__``: a public name's module is imported on first use.

pytest imports the plugin at every start, with the package and its subpackages; importing
every module of the package then would cost a session that never measures more than its
whole collection (``bench/startup.py`` measures it). Each ``__init__`` names its exports
once, as the imports of its ``if TYPE_CHECKING:`` block (what type checkers and readers
see), and ``exports`` reads that block to know where each name lives. A module may be
exported too (``from . import _values as values``): a namespace of functions that other
packages use by that name.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["exports"]

#: One ``from .x import a, b as c`` (or ``import (...)`` over several lines) of the ``if TYPE_CHECKING:`` block.
_IMPORT = re.compile(r"from\s+(\.+[\w.]*)\s+import\s+(\([^)]*\)|[^\n]*)")


def _table(init_file: str) -> dict[str, tuple[str, str]]:
    """Name -> (relative module, its name there), from the ``from .x import a, b as c`` lines under
    ``if TYPE_CHECKING:``: read as text, not parsed (parsing the four ``__init__`` a session loads cost more than
    the rest of their import; ``tests/test_package.py`` checks this reading against Python's own parser)."""
    text = Path(init_file).read_text(encoding="utf-8")
    _, found, rest = text.partition("\nif TYPE_CHECKING:\n")
    block: list[str] = []
    for line in rest.splitlines() if found else ():
        if line and not line[0].isspace():
            break
        block.append(line.partition("#")[0])
    table: dict[str, tuple[str, str]] = {}
    for module, names in _IMPORT.findall("\n".join(block)):
        for alias in names.strip("()").split(","):
            name, _, asname = (part.strip() for part in alias.partition(" as "))
            if name:
                table[asname or name] = (module, name)
    return table


def exports(package: str, init_file: str) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__`` and ``__file__``); the table of
    names is read on the first lookup, so that a package none of whose names a session uses reads nothing."""

    @functools.cache
    def table() -> dict[str, tuple[str, str]]:
        return _table(init_file)

    def __getattr__(name: str) -> object:
        where = table().get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, original = where
        if module.strip("."):
            value = getattr(importlib.import_module(module, package), original)
        else:  # ``from . import _x as x``: the submodule itself
            value = importlib.import_module(f"{module}{original}", package)
        setattr(sys.modules[package], name, value)  # later lookups are plain attributes
        return value

    def __dir__() -> list[str]:
        return sorted(table())

    return __getattr__, __dir__
