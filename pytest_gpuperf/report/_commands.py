"""``pytest-gpuperf report``: the HTML report of a saved run, against a baseline when one is given.

RUN and BASELINE are what ``pytest-gpuperf compare`` takes: a baseline name in the results
directory, or the path of a results file, a baseline file or a pytest-benchmark JSON file.
Of RUN the newest run is reported; a BASELINE counts each of its runs, as the gate does, and
is judged with the gate's policy of the session that measured RUN (its tolerance, noise floor,
verdicts that fail and allowed mismatches). Exit status: 0 written (whatever the verdicts),
2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from ..measuring import counted, values
from ..results import ResultsDir, ResultsError, add_results_dir_argument, output_problem
from ._html import REPORT_OUTPUT, compare, render, write

__all__ = ["DEFAULT_OUTPUT", "add_parser"]

DEFAULT_OUTPUT: Final = Path("gpuperf-report.html")


def add_parser(commands: Any) -> None:
    """Add ``report`` to the CLI's subparsers."""
    rep = commands.add_parser(
        "report",
        help="write a saved run (and its verdicts against a baseline) as one self-contained HTML file",
        description=(__doc__ or "").split("\n\n")[1].replace("\n", " "),
    )
    rep.add_argument("run", metavar="RUN", help="baseline name or results file path (the newest run is reported)")
    rep.add_argument(
        "baseline",
        metavar="BASELINE",
        nargs="?",
        default=None,
        help="baseline name or results file path to judge against",
    )
    rep.add_argument(
        "-o",
        "--output",
        type=values.argtype(values.given_path),
        default=DEFAULT_OUTPUT,
        metavar="PATH",
        help=f"where to write the page (default: {DEFAULT_OUTPUT})",
    )
    add_results_dir_argument(rep)
    rep.set_defaults(handler=report_command)


def report_command(args: argparse.Namespace) -> int:
    problem = output_problem(args.output, REPORT_OUTPUT)
    if problem:  # before reading anything: only a page of ours is ever replaced
        print(f"error: -o {args.output}: {problem}", file=sys.stderr)
        return 2
    store = ResultsDir(args.results_dir)
    try:
        source = store.load(args.run, Path.cwd())
        baseline = None if args.baseline is None else store.load(args.baseline, Path.cwd())
        run = source.runs[-1]
        comparison = None if baseline is None else compare(baseline, run)
        write(args.output, render(run, comparison, source=source.describe()))
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(source.runs) > 1:
        print(f"report: {source.describe()}: reported the newest run", file=sys.stderr)
    records = len(run.records)
    against = "" if baseline is None else f" against {baseline.describe()}"
    print(f"report: wrote {counted(records, 'record')}{against} to {args.output}")
    return 0
