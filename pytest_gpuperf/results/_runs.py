"""``pytest-gpuperf runs``: what the results directory holds, one saved run again, and pruning old runs.

    pytest-gpuperf runs                  every run file (runs/*.json) and baseline (baselines/*.json)
    pytest-gpuperf runs show ID|NAME     one run's results table, as the session printed it
    pytest-gpuperf runs prune --keep N   delete the run files beyond the newest N, with their traces (never a
                                         baseline)

A run's id is its file's stem (``20261122T023000.123456Z-1a2b3c4d``); a baseline's is its name. Every
command that takes a run (``compare``, ``report``, ``export``, ``runs show``, ``--gpuperf-compare``) takes
these ids, or the unique start of one, through one resolver (``ResultsDir.find``).
The listing reads every file up to ``LIST_READ_BYTES`` (a larger one is listed by its size) and
never writes one: a file that cannot be read is listed as damaged, with the reason. A baseline
holds copies of its runs (``_store.py``), so deleting run files never changes one. Exit status: 0 done,
2 bad input (no such directory or id, N < 0).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tabulate import tabulate

from .._jsonfile import size_of
from ..measuring import counted, values
from ._files import ResultsError, load_runs
from ._record import Run
from ._store import ResultsDir, add_format_argument, add_results_dir_argument
from ._table import peaks_of, table_lines, terminal_width
from ._traces import remove_traces

__all__ = ["Entry", "add_parser", "entries", "prunable", "resolve"]

EXIT_OK, EXIT_BAD_INPUT = 0, 2
#: The listing reads a file up to 32 MiB (under a second); a larger one is listed by its size, so that one huge
#: file does not make every listing slow (a million-record file took 39 s). ``runs show`` reads any size.
LIST_READ_BYTES: Final = 32 << 20
#: What ``ResultsDir.save_run`` names a run file: ``<UTC time>-<commit>[-dirty][-N]``. Only these are pruned.
_RUN_STEM: Final = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-")
#: ``runs show`` names this many of a run's failed tests, then says how many more
_NAMED: Final = 5


@dataclass(frozen=True)
class Entry:
    """One file of the results directory: a run file, or a baseline (several runs), or why it cannot be read."""

    kind: str  # "run" or "baseline"
    id: str
    path: Path
    runs: tuple[Run, ...] = ()
    damaged: str = ""
    #: the file's size when the listing did not read it (over LIST_READ_BYTES), else 0
    large: int = 0

    @property
    def newest(self) -> Run | None:
        return self.runs[-1] if self.runs else None


def _entry(kind: str, ident: str, path: Path, *, limit: int | None = None) -> Entry:
    """The file read (a file over ``limit`` bytes is not: it is listed by its size)."""
    size = size_of(path)
    if limit is not None and size is not None and size > limit:
        return Entry(kind, ident, path, large=size)
    try:
        return Entry(kind, ident, path, tuple(load_runs(path)))
    except ResultsError as exc:
        return Entry(kind, ident, path, damaged=str(exc))


def run_files(store: ResultsDir) -> list[Path]:
    """``runs/*.json``, oldest first (their names start with the UTC time they were saved)."""
    return [store.runs_dir / f"{ident}.json" for ident in store.run_ids()]


def entries(store: ResultsDir, *, limit: int | None = None) -> list[Entry]:
    """Every run file, oldest first, then every baseline by name (not the ``.bak`` copies or ``.lock`` files);
    files over ``limit`` bytes are not read."""
    runs = [_entry("run", path.stem, path, limit=limit) for path in run_files(store)]
    return runs + [_entry("baseline", name, store.baseline_path(name), limit=limit) for name in store.names()]


def prunable(store: ResultsDir, keep: int) -> list[Path]:
    """The run files beyond the newest ``keep``, oldest first; files not named as a session names them stay."""
    ours = [path for path in run_files(store) if _RUN_STEM.match(path.stem)]
    return ours[: max(0, len(ours) - keep)]


# ---------------------------------------------------------------- cells


def _date(created: str) -> str:
    try:
        when = dt.datetime.fromisoformat(created)
    except ValueError:
        return created or "-"
    zone = " UTC" if when.utcoffset() == dt.timedelta(0) else when.strftime(" %z") if when.tzinfo else ""
    return when.strftime("%Y-%m-%d %H:%M:%S") + zone


def _commit(run: Run) -> str:
    commit = (run.git.commit or "")[:8]
    if not commit:
        return "-"
    return commit + ("+dirty" if run.git.dirty else "")


def _devices(run: Run) -> str:
    ids = list(dict.fromkeys(record.device for record in run.records)) or list(run.devices)
    out = []
    for device in ids:
        name = run.devices.get(device, {}).get("name")
        out.append(f"{device} ({name})" if name and not device.startswith("cpu") else device)
    return ", ".join(out) or "-"


def _same_run(run: Run) -> tuple[object, ...]:
    """What a baseline's copy of a run shares with the run's file: when it was saved, where, and its samples."""
    fingerprint = json.dumps(run.fingerprint.to_dict(), sort_keys=True, default=str)
    return (run.created, fingerprint, tuple((record.key, record.measurement.samples) for record in run.records))


def _failed(run: Run, held: Mapping[tuple[object, ...], list[str]]) -> str:
    """A run file's note on its failed tests, and the baselines that hold it (a session whose tests failed still
    saves its baseline: ``--gpuperf-save`` keeps the records it measured)."""
    names = held.get(_same_run(run), [])
    where = f"in baseline{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}" if names else "in no baseline"
    return f"{counted(len(run.failures), 'test')} failed; {where}"


def _row(entry: Entry, held: Mapping[tuple[object, ...], list[str]]) -> list[str]:
    run = entry.newest
    if entry.large:
        note = f"{entry.large / 2**20:,.0f} MB, not read for a listing: pytest-gpuperf runs show {entry.id} reads it"
        return [entry.id, "-", "-", "-", "-", note]
    if run is None:
        return [entry.id, "-", "-", "-", "-", f"damaged: {entry.damaged}"]
    notes = ["interrupted"] if run.interrupted else []
    if entry.kind == "run" and run.failures:
        notes.append(_failed(run, held))
    failed = sum(1 for r in entry.runs if r.failures)
    if entry.kind == "baseline" and failed:
        notes.append(f"{counted(failed, 'run')} of a session whose tests failed")
    return [entry.id, _date(run.created), _commit(run), _devices(run), str(len(run.records)), "; ".join(notes)]


def listing(store: ResultsDir) -> list[str]:
    """The lines of ``pytest-gpuperf runs``: a table of the run files, then one of the baselines."""
    found = entries(store, limit=LIST_READ_BYTES)
    runs = [e for e in found if e.kind == "run"]
    baselines = [e for e in found if e.kind == "baseline"]
    held: dict[tuple[object, ...], list[str]] = {}
    for baseline in baselines:
        for run in baseline.runs:
            if run.failures:
                held.setdefault(_same_run(run), []).append(baseline.id)
    lines = [f"runs in {store.runs_dir} ({len(runs)}, oldest first):"]
    headers = ["id", "date (saved)", "commit", "devices", "records", "note"]
    rows = [_row(e, held) for e in runs]
    lines += tabulate(rows, headers=headers, disable_numparse=True).splitlines() if runs else []
    lines += ["", f"baselines in {store.baselines_dir} ({len(baselines)}):"]
    if baselines:
        rows = []
        for entry in baselines:
            ident, *rest = _row(entry, held)
            rows.append([ident, str(len(entry.runs)) if entry.runs else "-", *rest])
        headers = ["name", "runs", "newest run", "commit", "devices", "records", "note"]
        lines += tabulate(rows, headers=headers, disable_numparse=True).splitlines()
    return lines


# ---------------------------------------------------------------- show


def resolve(store: ResultsDir, ident: str) -> Entry:
    """The file ``ident`` names, read: the one resolver every command uses (``ResultsDir.find``)."""
    found = store.find(ident)
    return _entry(found.kind, found.id, found.path)


def show(entry: Entry, *, tablefmt: str = "simple") -> list[str]:
    """The lines of ``runs show``: what the file is, then the results table of its (newest) run."""
    run = entry.newest
    assert run is not None
    if entry.kind == "baseline":
        count = len(entry.runs)
        head = f"baseline {entry.id!r} ({entry.path}) holds {counted(count, 'run')}; the newest:"
    elif entry.kind == "run":
        head = f"run {entry.id} ({entry.path}):"
    else:
        head = f"results file {entry.path}:"
    state = ", interrupted: the records measured before" if run.interrupted else ""
    if run.failures:
        failed = list(run.failures)
        more = f" and {len(failed) - _NAMED} more" if len(failed) > _NAMED else ""
        state += f"; {counted(len(failed), 'test')} failed: {', '.join(failed[:_NAMED])}{more}"
    records = counted(len(run.records), "record")
    about = f"saved {_date(run.created)}, commit {_commit(run)}, {records}{state}"
    lines = [head, about]
    if run.records:
        lines += table_lines(run.records, peaks_of(run), width=terminal_width(sys.stdout.isatty()), tablefmt=tablefmt)
    return lines


# ---------------------------------------------------------------- the command


#: ``--keep``'s count: 0 or more, at most the bound on every count.
_KEEP: Final = values.whole(0, values.MAX_COUNT, " (the bound on every count)")


def _keep(raw: str) -> int:
    try:
        return _KEEP(raw)
    except values.PastBound as exc:
        raise argparse.ArgumentTypeError(f"{raw!r}: {exc}") from None
    except values.SettingError:
        raise argparse.ArgumentTypeError(
            f"{raw!r} is not a whole number of 0 or more; give how many of the newest runs to keep, such as 20"
        ) from None


def add_parser(commands: Any) -> None:
    """Add ``runs`` (with ``show`` and ``prune``) to the CLI's subparsers."""
    description = (__doc__ or "").split("\n\n")[2].replace("\n", " ")
    # Given before or after the subcommand: the subcommands' copy sets it only when given (SUPPRESS).
    parent = argparse.ArgumentParser(add_help=False)
    add_results_dir_argument(parent, default=argparse.SUPPRESS)
    runs = commands.add_parser(
        "runs", help="list the saved runs and baselines; show one, or prune old runs", description=description
    )
    add_results_dir_argument(runs)
    runs.set_defaults(handler=list_command)
    sub = runs.add_subparsers(dest="runs_command")
    shw = sub.add_parser("show", parents=[parent], help="print a saved run's results table (a baseline's newest run)")
    shw.add_argument(
        "ident", metavar="ID|NAME", help="a run id (its file's stem, or its unique start), a baseline or a file path"
    )
    add_format_argument(shw)
    shw.set_defaults(handler=show_command)
    prn = sub.add_parser("prune", parents=[parent], help="delete the oldest run files beyond N (never a baseline)")
    prn.add_argument("--keep", type=_keep, required=True, metavar="N", help="how many of the newest runs to keep")
    prn.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
    prn.set_defaults(handler=prune_command)


def _store(args: argparse.Namespace) -> ResultsDir | None:
    store = ResultsDir(args.results_dir)
    if not store.root.is_dir():
        print(
            f"error: no results directory {store.root}: pytest sessions that measure save there; "
            "run from the project's rootdir or pass --results-dir DIR",
            file=sys.stderr,
        )
        return None
    return store


def list_command(args: argparse.Namespace) -> int:
    store = _store(args)
    if store is None:
        return EXIT_BAD_INPUT
    for line in listing(store):
        print(line)
    return EXIT_OK


def show_command(args: argparse.Namespace) -> int:
    store = _store(args)
    if store is None:
        return EXIT_BAD_INPUT
    try:
        entry = resolve(store, args.ident)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if entry.damaged:
        print(f"error: {entry.damaged}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in show(entry, tablefmt=args.format):
        print(line)
    return EXIT_OK


def prune_command(args: argparse.Namespace) -> int:
    store = _store(args)
    if store is None:
        return EXIT_BAD_INPUT
    doomed = prunable(store, args.keep)
    verb = "would delete" if args.dry_run else "deleted"
    said: set[str] = set()
    for path in doomed:
        if not args.dry_run:
            # The run's traces go with it, first: a prune killed in between leaves a run file that the next
            # prune deletes, never a traces folder whose run is gone, which no prune would ever delete.
            note = _prune_traces(store, path.stem)
            if note and note not in said:
                said.add(note)
                print(f"runs prune: {note}")
            try:
                path.unlink()
            except FileNotFoundError:  # another prune got there first
                continue
            except OSError as exc:
                print(f"error: cannot delete {path}: {exc.strerror or exc}; check its permissions", file=sys.stderr)
                return EXIT_BAD_INPUT
        print(f"runs prune: {verb} {path}")
    kept = len(run_files(store)) - (len(doomed) if args.dry_run else 0)
    print(
        f"runs prune: {verb} {_count(len(doomed))}, kept {_count(kept)}; "
        f"baselines in {store.baselines_dir} were not touched"
    )
    return EXIT_OK


def _prune_traces(store: ResultsDir, run_id: str) -> str:
    """Delete run ``run_id``'s traces (only files named as our trace writer names them, never through a symbolic
    link) and their folder once empty; what was kept and why, or ""."""
    try:
        left = remove_traces(store.root, f"{store.traces_dir.name}/{run_id}", rmdir=True)
    except ResultsError as exc:  # a link in the way: said once, as it names no run when it is traces/ itself
        return str(exc)
    if not left:
        return ""
    names = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
    return f"kept {store.traces_dir / run_id}: it holds files pytest-gpuperf did not write ({names})"


def _count(n: int) -> str:
    return counted(n, "run file")
