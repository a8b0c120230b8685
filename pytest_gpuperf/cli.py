"""``pytest-gpuperf`` (also ``python -m pytest_gpuperf``): the one command line besides pytest itself.

    pytest-gpuperf compare BASE HEAD      the stored-baseline gate on two saved runs
    pytest-gpuperf ab --base REV          base and head measured side by side (the gate for noisy machines)
    pytest-gpuperf history record|publish|offline   the asv history of a repository
    pytest-gpuperf history regressions        the history's steps, confirmed by ab and bisected to their commit
    pytest-gpuperf export --format F SOURCE   a saved run as pytest-benchmark, github-action-benchmark or Bencher JSON
    pytest-gpuperf runs [show ID | prune --keep N]   the saved runs and baselines: list, show one, prune
    pytest-gpuperf report RUN [BASELINE]      a saved run (and its verdicts) as one self-contained HTML file

Exit status: 0 done (the gate passed), 1 the gate failed (or a commit could not be
recorded, or a confirmed regression is newer than --since), 2 bad input, 130 interrupted
(Ctrl-C or SIGTERM, after cleaning up); every error names the input and the fix.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence

from ._escape import EscapedStream
from ._signals import terminate_as_interrupt
from .gate import add_gate_commands
from .history import add_history_command
from .report import add_report_command
from .results import add_export_command, add_runs_command

__all__ = ["main"]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="pytest-gpuperf",
        description="Gate pull requests on saved or side-by-side measurements, publish the history of "
        "pytest-gpuperf suites with asv, export saved runs to other tools, list, show or prune them, and "
        "report them as HTML.",
    )
    commands = top.add_subparsers(dest="command", required=True)
    add_gate_commands(commands)
    add_history_command(commands)
    add_export_command(commands)
    add_runs_command(commands)
    add_report_command(commands)
    return top


#: The exit status of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    with escaped_output():
        try:
            with terminate_as_interrupt():
                return handler(args)
        except KeyboardInterrupt as exc:
            why = f" ({exc})" if str(exc) else ""
            print(f"pytest-gpuperf {args.command}: interrupted{why}; nothing was judged", file=sys.stderr)
            return EXIT_INTERRUPTED


@contextlib.contextmanager
def escaped_output() -> Iterator[None]:
    """Everything a command prints goes through ``EscapedStream``: text from a results file (a test name, a
    machine name, an error naming a record) can neither send terminal control codes nor start a line that a CI
    log runs as a command (``_escape.py``)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapedStream(out), EscapedStream(err)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":
    sys.exit(main())
