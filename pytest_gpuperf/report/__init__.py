"""The report: a run, and the gate's verdicts against a baseline, as one self-contained HTML file.

``pytest --gpuperf-html=PATH`` writes it at the end of a session and ``pytest-gpuperf report``
from saved files; both render with ``render`` and write with ``write``. See ``docs/report.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from ._commands import add_parser as add_report_command
    from ._html import REPORT_OUTPUT, compare, render, write

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = ["REPORT_OUTPUT", "add_report_command", "compare", "render", "write"]
