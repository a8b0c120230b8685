"""``pytest-gpuperf export``: a saved run in another tool's JSON (``_export.py``), a subcommand of the one CLI.

SOURCE is what ``pytest-gpuperf compare`` takes: a baseline name in the results directory, or the
path of a results file, a baseline file or a pytest-benchmark JSON file. A baseline holds several
runs; its newest is exported. Exit status: 0 written, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..measuring import counted, values
from ._export import EXPORT_OUTPUTS, FORMATS, export
from ._files import ResultsError, atomic_write_text, output_problem
from ._store import ResultsDir, add_results_dir_argument

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    """Add ``export`` to the CLI's subparsers."""
    exp = commands.add_parser(
        "export",
        help="write a saved run as pytest-benchmark, github-action-benchmark or Bencher JSON",
        description=(__doc__ or "").split("\n\n")[1].replace("\n", " "),
    )
    exp.add_argument("source", metavar="SOURCE", help="baseline name or results file path (the newest run is used)")
    exp.add_argument(
        "--format",
        dest="fmt",
        required=True,
        choices=list(FORMATS),
        help="pytest-benchmark (its --benchmark-json schema), github-action-benchmark (customSmallerIsBetter, ns) "
        "or bencher (Bencher Metric Format, latency in ns)",
    )
    exp.add_argument(
        "-o",
        "--output",
        type=values.argtype(values.given_path),
        default=None,
        metavar="FILE",
        help="where to write (default: standard output)",
    )
    add_results_dir_argument(exp)
    exp.set_defaults(handler=export_command)


def export_command(args: argparse.Namespace) -> int:
    kind = EXPORT_OUTPUTS[args.fmt]
    problem = None if args.output is None else output_problem(args.output, kind)
    if problem:
        print(f"error: -o {args.output}: {problem}", file=sys.stderr)
        return 2
    try:
        source = ResultsDir(args.results_dir).load(args.source, Path.cwd())
        text = export(source.runs[-1], args.fmt)
        if args.output is not None:
            atomic_write_text(args.output, text, kind=kind)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(source.runs) > 1:
        print(f"export: {source.describe()}: exported the newest run", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
    else:
        records = len(source.runs[-1].records)
        print(f"export: wrote {counted(records, 'record')} as {args.fmt} to {args.output}")
    return 0
