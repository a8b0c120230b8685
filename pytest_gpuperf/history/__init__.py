"""History: asv results written from pytest runs, the recorded history of a repository's commits, the
offline assets that let asv's published page work without the internet, and the history's steps, confirmed by
``ab`` and bisected to their commit (``history regressions``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from ._assets import ASSETS, Asset, OfflineError, default_cache, localize, remote_urls
    from ._asv import AsvTarget, Commit, benchmark_name, write_results
    from ._asv_files import CI, COLUMNS, FORMAT, RESULTS_API, AsvError, Point, points_of_row, read_results, row_of
    from ._bisect import Culprit, Probe, Span, hunt_span
    from ._changes import (
        DEFAULT_RULE,
        Change,
        ChangeRule,
        HistoryPoint,
        Series,
        SeriesKey,
        Step,
        changes_of,
        commit_order,
        find_changes,
        find_steps,
        history_series,
    )
    from ._commands import add_parser as add_history_command
    from ._record import DEFAULT_OUT, HistoryError, Layout, Recipe, publish, record
    from ._regressions import Finding, Hunt, Report, hunt_regressions

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "ASSETS",
    "CI",
    "COLUMNS",
    "DEFAULT_OUT",
    "DEFAULT_RULE",
    "FORMAT",
    "RESULTS_API",
    "Asset",
    "AsvError",
    "AsvTarget",
    "Change",
    "ChangeRule",
    "Commit",
    "Culprit",
    "Finding",
    "HistoryError",
    "HistoryPoint",
    "Hunt",
    "Layout",
    "OfflineError",
    "Point",
    "Probe",
    "Recipe",
    "Report",
    "Series",
    "SeriesKey",
    "Span",
    "Step",
    "add_history_command",
    "benchmark_name",
    "changes_of",
    "commit_order",
    "default_cache",
    "find_changes",
    "find_steps",
    "history_series",
    "hunt_regressions",
    "hunt_span",
    "localize",
    "points_of_row",
    "publish",
    "read_results",
    "record",
    "remote_urls",
    "row_of",
    "write_results",
]
