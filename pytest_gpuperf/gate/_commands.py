"""``pytest-gpuperf compare`` and ``pytest-gpuperf ab``: the gate's subcommands of the one CLI.

``compare``: the gate on two saved runs, for CI that measures on one machine and judges
on another. Same verdicts, table and exit status as ``pytest --gpuperf-compare``. BASE
and HEAD are baseline names in the results directory (``--results-dir``, default
``.gpuperf``) or paths of results files (``--gpuperf-json``, ``runs/*.json``) or baseline
files; each run in a file (a baseline holds several) counts as one run of evidence.

``ab``: base and head of a pull request measured side by side in one process, in
paired rounds (``_ab.py``), for noisy machines where separate runs cannot be compared.

Exit status: 0 the gate passes, 1 a verdict in ``--fail-on`` occurred, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final, Literal

from ..measuring import SIZES, values
from ..results import (
    TRACE_LEVELS,
    Baseline,
    Incomparable,
    ResultsDir,
    ResultsError,
    add_format_argument,
    add_results_dir_argument,
    check_comparable,
    parse_mismatch_keys,
)
from . import _ab
from ._compare import baseline_noise, compare_runs
from ._render import gate_lines, gate_table, report_to_github, why_lines
from ._rule import DEFAULT_NOISE_FLOOR, DEFAULT_TOLERANCE, Policy, stored_tolerance
from ._verdicts import DEFAULT_FAIL_ON, MORE_WORK, VERDICTS, WORK_NAMES, parse_verdicts

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "add_ab_option", "add_parsers"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _fail_on_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        type=values.argtype(parse_verdicts),
        default=DEFAULT_FAIL_ON,
        metavar="VERDICTS",
        help=f"what fails: a comma list of verdicts ({', '.join(VERDICTS)}) and of what the work can grow in, "
        f"failing where it went up ({', '.join(WORK_NAMES)}; {MORE_WORK}: any of them, on a row not measured "
        f"unchanged or faster), or none (default: {','.join(DEFAULT_FAIL_ON)})",
    )


def _compare_parser(commands: Any) -> None:
    cmp = commands.add_parser("compare", help="compare HEAD's records with BASE's; exit 1 if the gate fails")
    cmp.add_argument("base", metavar="BASE", help="baseline name or results file path")
    cmp.add_argument("head", metavar="HEAD", help="baseline name or results file path")
    add_results_dir_argument(cmp)
    for flag, parse, default, what in (
        ("--tolerance", values.tolerance, DEFAULT_TOLERANCE, "tolerance (a fraction, auto or auto:FLOOR)"),
        ("--noise-floor", values.fraction, DEFAULT_NOISE_FLOOR, "noise floor"),
    ):
        cmp.add_argument(
            flag,
            type=values.argtype(parse),
            default=None,
            help=f"{what} for records without their own (a test's marker); "
            f"default: the one HEAD was measured with, else {default * 100:g}%%",
        )
    _fail_on_option(cmp)
    cmp.add_argument(
        "--allow-mismatch",
        type=values.argtype(parse_mismatch_keys),
        default=(),
        metavar="KEYS",
        help="compare across these fingerprint differences anyway, or all",
    )
    add_format_argument(cmp)
    cmp.set_defaults(handler=compare_command)


#: ``ab``'s measuring options, declared once for ``ab`` and the history commands that run it (``add_ab_option``).
_AB_OPTIONS: Final[dict[str, dict[str, Any]]] = {
    "--device": {"default": "auto"},
    "--tolerance": {"type": values.argtype(values.tolerance), "default": DEFAULT_TOLERANCE},
    "--max-time": {"type": values.argtype(values.positive_seconds), "default": _ab.DEFAULT_MAX_TIME, "metavar": "TIME"},
}


def add_ab_option(
    parser: argparse.ArgumentParser,
    flag: Literal["--device", "--tolerance", "--max-time"],
    help_text: str,
    *,
    unset: bool = False,
) -> None:
    """One of ``ab``'s measuring options, in a command's own words; with ``unset`` its value is None when not given,
    so that a history command can tell (``history record`` refuses it without ``--anchor``)."""
    parser.add_argument(flag, **_AB_OPTIONS[flag] | ({"default": None} if unset else {}), help=help_text)


def _ab_measuring_options(abp: argparse.ArgumentParser) -> None:
    add_ab_option(abp, "--device", "one device: cpu, cuda, cuda:N, mps, auto (default: auto)")
    abp.add_argument("--size", choices=SIZES, default="auto", help="workload size preset (default: auto)")
    add_ab_option(
        abp,
        "--tolerance",
        "slower/faster only beyond this ratio; auto: each workload's own smallest detectable change, at least 2%% "
        f"(auto:3%% for at least 3%%) (default: {DEFAULT_TOLERANCE * 100:g}%%)",
    )
    max_time = _ab.DEFAULT_MAX_TIME
    add_ab_option(
        abp, "--max-time", f"paired rounds per workload stop after this long, after warmup (default: {max_time:g} s)"
    )
    abp.add_argument(
        "--threads",
        type=values.argtype(values.threads),
        default="auto",
        metavar="N",
        help="torch threads while measuring: a count, auto (1 on a CPU, torch's default on a GPU) or torch "
        "(torch's default); default: auto",
    )


def _ab_parser(commands: Any) -> None:
    abp = commands.add_parser(
        "ab",
        help="measure BASE's and HEAD's workloads side by side in one process, in paired rounds; "
        "exit 1 if one got slower",
        description=(_ab.__doc__ or "").split("\n\n")[0],
    )
    abp.add_argument("--base", required=True, metavar="REV", help="the revision to compare against, e.g. main")
    abp.add_argument(
        "--head", metavar="REV", default=None, help="the revision under review (default: the working tree)"
    )
    abp.add_argument(
        "--workloads",
        type=values.argtype(values.given_path),
        default=None,
        metavar="PATH",
        help="the module with the WORKLOADS dict, relative to the repository root, the same in both revisions: "
        f"a file (perf/workloads.py) or a package (perf/workloads) (default: {_ab.DEFAULT_WORKLOADS_HELP})",
    )
    abp.add_argument(
        "--repo",
        type=values.argtype(values.given_path),
        default=Path("."),
        help="a directory of the git repository (default: .)",
    )
    _ab_measuring_options(abp)
    abp.add_argument(
        "-k",
        dest="select",
        type=values.argtype(values.given_word),
        action="append",
        default=[],
        metavar="NAME",
        help="only workloads whose name contains NAME (or matches a glob such as 'matmul_*'); repeatable",
    )
    _fail_on_option(abp)
    abp.add_argument(
        "--detect",
        type=values.argtype(values.fraction),
        default=None,
        metavar="FRACTION",
        help="run each workload's rounds until they can see a change of FRACTION (3%% or 0.03) at 80%% power, or "
        "to --max-time, and say what they saw and the time the goal would need (default: until the ratio's 95%% "
        "interval is within 1%%)",
    )
    abp.add_argument(
        "--confirm",
        type=values.argtype(values.builds),
        default=_ab.CONFIRM_BUILDS,
        metavar="N",
        help="measure every workload the first pass calls slower or faster again in N fresh builds (its workloads "
        "imported anew) and judge it on those, each at 95%% shared by the suspects: a run's chance of any false "
        f"alarm at most 5%%; 0: no confirmation (default: {_ab.CONFIRM_BUILDS})",
    )
    abp.add_argument(
        "--json",
        type=values.argtype(values.given_path),
        default=None,
        metavar="PATH",
        help="write every round's times to PATH",
    )
    _ab_trace_options(abp)
    add_format_argument(abp)
    abp.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines (checkout, each workload): the table and verdict"
    )
    abp.set_defaults(handler=ab_command)


def _ab_trace_options(abp: argparse.ArgumentParser) -> None:
    abp.add_argument(
        "--trace",
        choices=TRACE_LEVELS,
        default="failing",
        help="write base's and head's traces of their profiled calls (Chrome JSON, for ui.perfetto.dev or "
        "chrome://tracing) for the failing workloads, all of them, or none, under RESULTS_DIR/traces/ "
        "(default: failing)",
    )
    add_results_dir_argument(abp)


def add_parsers(commands: Any) -> None:
    """Add ``compare`` and ``ab`` to the CLI's subparsers."""
    _compare_parser(commands)
    _ab_parser(commands)


def _tolerance(given: values.Tolerance | None, head: Baseline) -> values.Tolerance:
    """The command line's tolerance, else the one HEAD's session ran with, else the default."""
    return given if given is not None else stored_tolerance(head.runs[-1].settings, DEFAULT_TOLERANCE)


def _noise_floor(given: float | None, head: Baseline) -> float:
    """The command line's noise floor, else the one HEAD's session ran with, else the default."""
    if given is not None:
        return given
    value = head.runs[-1].settings.get("noise_floor")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else DEFAULT_NOISE_FLOOR


def compare_command(args: argparse.Namespace) -> int:
    store = ResultsDir(args.results_dir)
    try:
        base = store.load(args.base, Path.cwd())
        head = store.load(args.head, Path.cwd())
        check_comparable((r.fingerprint for r in base.runs), (r.fingerprint for r in head.runs), args.allow_mismatch)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Incomparable as exc:
        print(
            f"error: {base.path} and {head.path} were measured on different hardware or software ({exc.what}), "
            "so their records cannot be compared. Compare runs from one machine, "
            f"or pass --allow-mismatch={exc.keys} to compare anyway{base.unrecorded()}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    policy = Policy(
        tolerance=_tolerance(args.tolerance, head),
        noise_floor=_noise_floor(args.noise_floor, head),
        fail_on=frozenset(args.fail_on),
        allow_mismatch=frozenset(args.allow_mismatch),
    )
    if base.path.resolve() == head.path.resolve():
        print(
            f"warning: BASE and HEAD are the same file ({base.path}): every record is compared with itself, "
            "which tells nothing; give the baseline and the run to judge",
            file=sys.stderr,
        )
    result = compare_runs(base.runs, head.runs, policy)
    print(f"base: {base.describe()}")
    print(f"head: {head.describe()}")
    noise = baseline_noise(base.runs, policy)
    if noise is not None:
        print(noise.describe(policy.tolerance, result.rows))
    print(gate_table(result, tablefmt=args.format))
    for line in why_lines(result):
        print(line)
    for line in gate_lines(result):
        print(line)
    context = f"base: {base.describe()}<br>head: {head.describe()}"
    for warning in report_to_github(result, title="pytest-gpuperf compare", context=context):
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_FAILED if result.failed else EXIT_OK


def ab_command(args: argparse.Namespace) -> int:
    options = _ab.AbOptions(
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
        trace=args.trace,
        results_dir=args.results_dir,
        confirm=args.confirm,
        detect=args.detect,
    )
    try:
        ab = _ab.run(options, out=None if args.quiet else lambda line: print(line, flush=True))
        print(gate_table(ab.result, tablefmt=args.format))
        for line in why_lines(ab.result):
            print(line)
        for line in ab.trace_lines():  # under the table and the why, the verdict last
            print(line)
        print(ab.false_alarm_line())
        for line in gate_lines(ab.result, label="gpuperf ab"):
            print(line)
        context = f"base {args.base}, head {args.head or 'the working tree'}"
        for warning in report_to_github(
            ab.result,
            title="pytest-gpuperf ab",
            context=context,
            label="gpuperf ab",
            root=ab.installed_at or args.repo,
            workloads=ab.workloads,
        ):
            print(f"warning: {warning}", file=sys.stderr)
        if ab.same_code_warning():
            print(ab.same_code_warning(), file=sys.stderr)
        if args.json is not None:
            _ab.write_json(ab, args.json)
            print(f"gpuperf ab: wrote every round's times to {args.json}")
    except _ab.AbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_FAILED if ab.result.failed else EXIT_OK
