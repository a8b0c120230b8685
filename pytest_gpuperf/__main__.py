"""``python -m pytest_gpuperf compare BASE HEAD``: the gate on two saved runs, for CI that measures on one
machine and judges on another. Same verdicts, table and exit status as ``pytest --gpuperf-compare``.

BASE and HEAD are baseline names in the results directory (``--results-dir``, default
``.gpuperf``) or paths of results files (``--gpuperf-json``, ``runs/*.json``) or baseline
files; several runs in one (a baseline's rounds) are used as rounds.

Exit status: 0 the gate passes, 1 a verdict in ``--fail-on`` occurred, 2 bad input
(unreadable or foreign file, unknown name, runs from other hardware or software).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import fingerprint
from .compare import DEFAULT_NOISE_FLOOR, DEFAULT_TOLERANCE, Policy, compare_runs, parse_mismatch_keys, parse_verdicts
from .gate_report import gate_lines, gate_table
from .records import ResultsError
from .storage import Baseline, ResultsDir

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _argtype(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _fraction(text: str) -> float:
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a number; write a fraction such as 0.05 or a percentage such as 5%"
        ) from None
    if not 0 < value < 1:
        raise ValueError(f"{text!r} must be between 0 and 1 (exclusive); write 0.05 or 5% for five percent")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_gpuperf", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cmp = commands.add_parser("compare", help="compare HEAD's records with BASE's; exit 1 if the gate fails")
    cmp.add_argument("base", metavar="BASE", help="baseline name or results file path")
    cmp.add_argument("head", metavar="HEAD", help="baseline name or results file path")
    cmp.add_argument("--results-dir", type=Path, default=Path(".gpuperf"), help="where names are looked up")
    cmp.add_argument(
        "--tolerance",
        type=_argtype(_fraction),
        default=None,
        help="tolerance for records without their own (a test's marker); "
        f"default: the one HEAD was measured with, else {DEFAULT_TOLERANCE:.0%}",
    )
    cmp.add_argument(
        "--noise-floor",
        type=_argtype(_fraction),
        default=None,
        help="noise floor for records without their own; "
        f"default: the one HEAD was measured with, else {DEFAULT_NOISE_FLOOR:.0%}",
    )
    cmp.add_argument(
        "--fail-on",
        type=_argtype(parse_verdicts),
        default=("slower",),
        metavar="VERDICTS",
        help="verdicts that fail: a comma list of slower, faster, unchanged, inconclusive, incomparable, new, "
        "missing, or none (default: slower)",
    )
    cmp.add_argument(
        "--allow-mismatch",
        type=_argtype(parse_mismatch_keys),
        default=(),
        metavar="KEYS",
        help="compare across these fingerprint differences anyway, or all",
    )
    cmp.add_argument("--format", default="simple", help="tabulate table format: simple, github, grid ...")
    return parser


def _load(store: ResultsDir, ref: str) -> Baseline:
    return store.load(ref, Path.cwd())


def _blocking(base: Baseline, head: Baseline, allow: Sequence[str]) -> str:
    problems: list[str] = []
    for b in base.runs:
        for h in head.runs:
            for diff in fingerprint.differences(b.fingerprint, h.fingerprint, allow):
                if diff.blocking and str(diff) not in problems:
                    problems.append(str(diff))
    return "; ".join(problems)


def _setting(given: float | None, head: Baseline, name: str, default: float) -> float:
    """The command line's value, else the one HEAD's session ran with, else the default."""
    if given is not None:
        return given
    value = head.runs[-1].settings.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def compare_command(args: argparse.Namespace) -> int:
    store = ResultsDir(args.results_dir)
    try:
        base = _load(store, args.base)
        head = _load(store, args.head)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    problem = _blocking(base, head, args.allow_mismatch)
    if problem:
        keys = sorted(
            {
                d.key
                for b in base.runs
                for h in head.runs
                for d in fingerprint.differences(b.fingerprint, h.fingerprint, args.allow_mismatch)
                if d.blocking
            }
        )
        print(
            f"error: {base.path} and {head.path} were measured on different hardware or software ({problem}), "
            "so their records cannot be compared. Compare runs from one machine, "
            f"or pass --allow-mismatch={','.join(keys)} to compare anyway",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    policy = Policy(
        tolerance=_setting(args.tolerance, head, "tolerance", DEFAULT_TOLERANCE),
        noise_floor=_setting(args.noise_floor, head, "noise_floor", DEFAULT_NOISE_FLOOR),
        fail_on=frozenset(args.fail_on),
        allow_mismatch=frozenset(args.allow_mismatch),
    )
    result = compare_runs(base.runs, head.runs, policy)
    print(f"base: {base.describe()}")
    print(f"head: {head.describe()}")
    print(gate_table(result, tablefmt=args.format))
    for line in gate_lines(result):
        print(line)
    return EXIT_FAILED if result.failed else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "compare":
        return compare_command(args)
    raise AssertionError(args.command)  # pragma: no cover - argparse requires a known command


if __name__ == "__main__":
    sys.exit(main())
