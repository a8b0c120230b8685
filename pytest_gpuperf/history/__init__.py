"""History: asv results written from pytest runs, the recorded history of a repository's commits, the
offline assets that let asv's published page work without the internet, and the history's steps, confirmed by
``ab`` and bisected to their commit (``history regressions``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from ._asv import AsvTarget, Commit, write_results
    from ._asv_files import CI, COLUMNS, FORMAT, RESULTS_API, AsvError, Point, points_of, read_results, row_of
    from ._changes import (
        ChangeRule,
        commit_order,
        find_steps,
    )
    from ._commands import add_parser as add_history_command

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "CI",
    "COLUMNS",
    "FORMAT",
    "RESULTS_API",
    "AsvError",
    "AsvTarget",
    "ChangeRule",
    "Commit",
    "Point",
    "add_history_command",
    "commit_order",
    "find_steps",
    "points_of",
    "read_results",
    "row_of",
    "write_results",
]
