"""``python -m pytest_gpuperf compare BASE HEAD`` and ``python -m pytest_gpuperf ab --base REV``: the gates
outside pytest.

``compare``: the gate on two saved runs, for CI that measures on one machine and judges
on another. Same verdicts, table and exit status as ``pytest --gpuperf-compare``. BASE
and HEAD are baseline names in the results directory (``--results-dir``, default
``.gpuperf``) or paths of results files (``--gpuperf-json``, ``runs/*.json``) or baseline
files; several runs in one (a baseline's rounds) are used as rounds.

``ab``: base and head of a pull request measured side by side in one process, in
paired rounds (``ab.py``), for noisy machines where separate runs cannot be compared.

Exit status: 0 the gate passes, 1 a verdict in ``--fail-on`` occurred, 2 bad input
(unreadable or foreign file, unknown name or revision, runs from other hardware or
software, no workloads module).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import ab, fingerprint
from .compare import DEFAULT_NOISE_FLOOR, DEFAULT_TOLERANCE, Policy, compare_runs, parse_mismatch_keys, parse_verdicts
from .gate_report import gate_lines, gate_table
from .records import ResultsError
from .storage import Baseline, ResultsDir
from .units import UnitError, parse_quantity
from .workload import SIZES

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


def _seconds(text: str) -> float:
    try:
        seconds = parse_quantity(text, kind="time").value
    except UnitError as exc:
        raise ValueError(f"{exc}; write a time such as 5, '500 ms' or '2 s'") from None
    if not seconds > 0:
        raise ValueError(f"{text!r} must be a positive time, such as 5, '500 ms' or '2 s'")
    return seconds


def _threads(text: str) -> int | None:
    if text.strip().lower() == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number; write a thread count such as 1, or auto") from None
    if count < 1:
        raise ValueError(f"{text!r} must be at least 1, or auto")
    return count


def _fail_on_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        type=_argtype(parse_verdicts),
        default=("slower",),
        metavar="VERDICTS",
        help="verdicts that fail: a comma list of slower, faster, unchanged, inconclusive, incomparable, new, "
        "missing, or none (default: slower)",
    )


def _ab_parser(commands: Any) -> None:
    abp = commands.add_parser(
        "ab",
        help="measure BASE's and HEAD's workloads side by side in one process, in paired rounds; "
        "exit 1 if one got slower",
        description=ab.__doc__.split("\n\n")[0] if ab.__doc__ else None,
    )
    abp.add_argument("--base", required=True, metavar="REV", help="the revision to compare against, e.g. main")
    abp.add_argument(
        "--head", metavar="REV", default=None, help="the revision under review (default: the working tree)"
    )
    abp.add_argument(
        "--workloads",
        type=Path,
        default=ab.DEFAULT_WORKLOADS,
        metavar="PATH",
        help="the module with the WORKLOADS dict, relative to the repository root, the same in both revisions "
        f"(default: {ab.DEFAULT_WORKLOADS})",
    )
    abp.add_argument(
        "--repo", type=Path, default=Path("."), help="a directory of the git repository (default: the current one)"
    )
    abp.add_argument("--device", default="auto", help="one device: cpu, cuda, cuda:N, mps, auto (default: auto)")
    abp.add_argument("--size", choices=SIZES, default="auto", help="workload size preset (default: auto)")
    abp.add_argument(
        "--tolerance",
        type=_argtype(_fraction),
        default=DEFAULT_TOLERANCE,
        help=f"slower/faster only beyond this ratio (default: {DEFAULT_TOLERANCE * 100:g}%%)",
    )
    abp.add_argument(
        "--max-time",
        type=_argtype(_seconds),
        default=ab.DEFAULT_MAX_TIME,
        metavar="TIME",
        help=f"paired rounds per workload stop after this long, after warmup (default: {ab.DEFAULT_MAX_TIME:g} s)",
    )
    abp.add_argument(
        "--threads",
        type=_argtype(_threads),
        default=None,
        metavar="N",
        help="torch threads while measuring (default auto: 1 on a CPU, as the suites measure; torch's default on GPUs)",
    )
    abp.add_argument(
        "-k",
        dest="select",
        action="append",
        default=[],
        metavar="NAME",
        help="only workloads whose name contains NAME (or matches a glob such as 'matmul_*'); repeatable",
    )
    _fail_on_option(abp)
    abp.add_argument("--json", type=Path, default=None, metavar="PATH", help="write every round's times to PATH")
    abp.add_argument("--format", default="simple", help="tabulate table format: simple, github, grid ...")


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
        f"default: the one HEAD was measured with, else {DEFAULT_TOLERANCE * 100:g}%%",
    )
    cmp.add_argument(
        "--noise-floor",
        type=_argtype(_fraction),
        default=None,
        help="noise floor for records without their own; "
        f"default: the one HEAD was measured with, else {DEFAULT_NOISE_FLOOR * 100:g}%%",
    )
    _fail_on_option(cmp)
    cmp.add_argument(
        "--allow-mismatch",
        type=_argtype(parse_mismatch_keys),
        default=(),
        metavar="KEYS",
        help="compare across these fingerprint differences anyway, or all",
    )
    cmp.add_argument("--format", default="simple", help="tabulate table format: simple, github, grid ...")
    _ab_parser(commands)
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


def ab_command(args: argparse.Namespace) -> int:
    options = ab.AbOptions(
        base=args.base,
        head=args.head,
        workloads=args.workloads,
        repo=args.repo,
        device=args.device,
        size=args.size,
        tolerance=args.tolerance,
        max_time=args.max_time,
        threads=args.threads,
        select=tuple(args.select),
        fail_on=frozenset(args.fail_on),
        json=args.json,
    )
    try:
        result = ab.run(options, out=lambda line: print(line, flush=True))
        print(result.table(args.format))
        for line in result.summary():
            print(line)
        if args.json is not None:
            ab.write_json(result, args.json)
            print(f"gpuperf ab: wrote every round's times to {args.json}")
    except ab.AbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_FAILED if result.failing else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "compare":
        return compare_command(args)
    if args.command == "ab":
        return ab_command(args)
    raise AssertionError(args.command)  # pragma: no cover - argparse requires a known command


if __name__ == "__main__":
    sys.exit(main())
