"""The results directory: a file for every run, and named baselines that keep several runs each.

Layout (``.gpuperf/`` in the rootdir unless ``--gpuperf-results-dir`` or the ini key
``gpuperf_results_dir`` says otherwise)::

    runs/20261122T023000.123456Z-1a2b3c4d.json   one results file per session that measured
    baselines/main.json                          a named baseline: the runs of one code state
    baselines/main.traces/                       its tests' traces (``_traces.py``)
    traces/20261122T023000.123456Z-1a2b3c4d/     a run's traces of its failing (or every) rows

``--gpuperf-save=NAME`` adds the run to baseline NAME as one more run when it was
measured from the same code on the same kind of machine (same git commit and
uncommitted diff, no blocking fingerprint difference), keeping the newest
``MAX_RUNS``. A baseline holding runs of other code or another machine is replaced
only when asked (``--gpuperf-replace``), and then its old file is kept beside it as
``NAME.json.<time>.bak``; otherwise the save is refused (``ReplaceRefused``), before
measuring when the difference can be seen then.
Rounds are what lets a comparison learn how much results vary from run to run.
Every file is written atomically; a file that cannot be read is never overwritten.
The directory is created in one place (``ResultsDir.make``), which gives a directory it creates a
``.gitignore`` of ``*`` as pytest does for ``.pytest_cache``; one that exists is left as it is.

Sessions may save at the same time. A run file's name is taken only if free (never
replaced), and a baseline is re-read, merged and written under a lock on that baseline
(``_files.locked``), so each session adds its run to what the file holds at that moment
and none is lost.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import difflib
import os
import re
import stat
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._escape import printable
from ..measuring import counted, values
from ._comparable import blocking_differences
from ._files import (
    ResultsError,
    atomic_write_text,
    load_runs,
    locked,
    name_problem,
    remove_stale_temporaries,
    save_baseline_file,
    save_run,
)
from ._fingerprint import Fingerprint
from ._record import Run

__all__ = [
    "DEFAULT_RESULTS_DIR",
    "MAX_RUNS",
    "Baseline",
    "Found",
    "ReplaceRefused",
    "ResultsDir",
    "SaveOutcome",
    "StorageError",
    "UnknownRef",
    "add_format_argument",
    "add_results_dir_argument",
    "check_name",
    "same_code",
]

MAX_RUNS: Final = 10
#: How many run ids an ambiguous start lists.
_CANDIDATES: Final = 10
#: The results directory the CLI's commands use when ``--results-dir`` is not given.
DEFAULT_RESULTS_DIR: Final = Path(".gpuperf")


def add_results_dir_argument(parser: argparse.ArgumentParser, default: Any = DEFAULT_RESULTS_DIR) -> None:
    """The CLI's ``--results-dir`` on ``parser`` (``default``: ``argparse.SUPPRESS`` where a parent parser
    already gives it)."""
    parser.add_argument(
        "--results-dir",
        type=values.argtype(values.given_path),
        default=default,
        help=f"the results directory, where names are looked up (default: {DEFAULT_RESULTS_DIR})",
    )


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    """The CLI's ``--format`` of a printed table (tabulate's formats), on ``parser``."""
    from tabulate import tabulate_formats

    parser.add_argument(
        "--format",
        default="simple",
        choices=tabulate_formats,
        metavar="FORMAT",
        help="tabulate table format: simple, github, grid ...",
    )


#: What a results directory this package creates holds as ``.gitignore``: git ignores all of it.
GITIGNORE: Final = "# Created by pytest-gpuperf automatically.\n*\n"
#: The most characters of a baseline name (ASCII: as many bytes); its file adds ``.json``, and a name says which
#: commit or branch it holds.
NAME_MAX_CHARS: Final = 100
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class StorageError(ResultsError):
    """The results directory or a baseline cannot be used; the message names the path and the fix."""


class UnknownRef(StorageError):
    """A name that is no baseline, run id or start of one, or the start of several run ids; the message lists
    what there is."""


@dataclass(frozen=True)
class Found:
    """What a name given for a run stands for (``ResultsDir.find``): a baseline, a run file, or a file by path."""

    kind: str  # "baseline", "run" or "file"
    id: str  # the baseline's name, the run's id (its file's stem), or the path as given
    path: Path


class ReplaceRefused(StorageError):
    """``--gpuperf-save`` would replace a baseline of other code or another machine without ``--gpuperf-replace``."""


def check_name(raw: str) -> str:
    """A baseline name: letters, digits, ``.``, ``_`` and ``-``, not a path. Raises ValueError with the fix."""
    name = raw.strip()
    if len(name) > NAME_MAX_CHARS:
        raise ValueError(
            f"{name[:20]!r}... is {len(name)} characters, over the {NAME_MAX_CHARS} a baseline name may have; "
            "give a shorter name, such as main or pr-123"
        )
    if not _NAME.match(name) or name.endswith(".json"):
        raise ValueError(
            f"{raw!r} is not a baseline name: use letters, digits, '.', '_' and '-' (such as main or pr-123); "
            "to compare with a file, give its path to --gpuperf-compare"
        )
    return name


def _there(path: Path, *, file: bool = False) -> bool:
    """Does ``path`` exist (as a file, with ``file``)? False where the system cannot look: a name or a whole path
    longer than it takes (``baseline_path`` of a 252-character name is 257 bytes)."""
    try:
        return path.is_file() if file else path.exists()
    except OSError:
        return False


def _code(fingerprint: Fingerprint) -> tuple[str, str] | None:
    git = fingerprint.git
    if git is None or not git.commit:
        return None
    return git.commit, (git.diff_sha or "") if git.dirty else ""


def _same_origin(a: Fingerprint, b: Fingerprint, allow: Collection[str] = ()) -> bool:
    return _code(a) == _code(b) and not blocking_differences([a], [b], allow)


def same_code(a: Run, b: Run) -> bool:
    """Were both runs measured from the same code (commit and uncommitted diff) on the same kind of machine?

    Outside git the code cannot be told apart, so runs count as the same code.
    """
    return _same_origin(a.fingerprint, b.fingerprint)


def _describe_code(fingerprint: Fingerprint) -> str:
    git = fingerprint.git
    if git is None or not git.commit:
        return "code outside git"
    return f"commit {git.commit[:10]}" + (" with uncommitted changes" if git.dirty else "")


def _stamp() -> str:
    """The time now, as the results directory's files are named: ``20261122T023000.123456Z``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def _keep_backup(path: Path) -> Path:
    """Keep the baseline file about to be replaced as ``NAME.json.<time>.bak`` (a hard link, else a copy)."""
    backup = path.with_name(f"{path.name}.{_stamp()}.bak")
    try:
        os.link(path, backup)
    except FileExistsError:
        raise
    except OSError:  # no hard links here: copy it, atomically like every results file
        atomic_write_text(backup, path.read_text(encoding="utf-8"), new=True)
    return backup


@dataclass(frozen=True)
class Baseline:
    """Runs to compare against: a named baseline's runs, or the run(s) in a file given by path."""

    path: Path
    runs: list[Run]
    name: str | None = None

    @property
    def foreign(self) -> str | None:
        """The tool that wrote this file when it was not pytest-gpuperf (``pytest-benchmark``), else None."""
        return self.runs[-1].fingerprint.source or None

    def unrecorded(self) -> str:
        """Why a fingerprint difference may be a fact the file's tool did not record ("" for our own files)."""
        if self.foreign is None:
            return ""
        return (
            f"; {self.path} was written by {self.foreign}, which records neither the GPU nor the torch and CUDA "
            "versions, so they cannot be checked: if it was measured on this machine with this torch, allow them"
        )

    def describe(self) -> str:
        what = f"baseline {self.name!r}" if self.name else f"{self.foreign} file" if self.foreign else "results file"
        newest = self.runs[-1]
        runs = f"{counted(len(self.runs), 'run')}"
        code = _describe_code(newest.fingerprint)
        return printable(f"{what} {self.path} ({runs} of {code}, newest {newest.created})")


@dataclass(frozen=True)
class SaveOutcome:
    path: Path
    runs: int
    replaced: int  # runs of other code (or another machine) dropped to start afresh
    dropped: int  # oldest runs dropped beyond MAX_RUNS
    backup: Path | None = None  # where the replaced file was kept

    def describe(self, name: str) -> str:
        text = f"baseline {name!r} ({self.path}) now holds {counted(self.runs, 'run')}"
        if self.replaced:
            text += f"; replaced {self.replaced} run(s) of other code or another machine"
            if self.backup is not None:
                text += f" (the old file is kept as {self.backup})"
        if self.dropped:
            text += f"; dropped the oldest {self.dropped} beyond {MAX_RUNS}"
        if self.runs < 3:
            text += "; save 3 or more runs (separate sessions) so the gate can learn this machine's run-to-run noise"
        return text


class ResultsDir:
    """One results directory: run history and named baselines."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def baselines_dir(self) -> Path:
        return self.root / "baselines"

    @property
    def traces_dir(self) -> Path:
        """``traces/``: a folder per run (``<run id>/``, ``_traces.py``) with the traces of its rows."""
        return self.root / "traces"

    def traces_of(self, run_id: str | None = None, *, prefix: str = "") -> Path:
        """The folder of run ``run_id``'s traces (a run file's stem), created here; without a run id, a new one named
        ``<prefix><UTC time>`` (``ab-20261122T023000.123456Z`` for ``ab``)."""
        folder = self.traces_dir / (run_id or f"{prefix}{_stamp()}")
        try:
            self.make(folder)
        except OSError as exc:
            raise self._unwritable(folder, exc) from None
        return folder

    def _unwritable(self, path: Path, exc: OSError) -> StorageError:
        return StorageError(
            f"results directory {self.root} is not writable ({path}: {exc.strerror or exc}); "
            "choose a writable one with --gpuperf-results-dir=DIR or the ini key gpuperf_results_dir"
        )

    def make(self, directory: Path) -> None:
        """Create ``directory`` (``runs/`` or ``baselines/``); when the root is created here, it gets a ``.gitignore``
        of ``*`` (never replacing one), as pytest's ``.pytest_cache`` has. Raises OSError when it cannot."""
        try:
            self.root.mkdir(parents=True)
        except FileExistsError:
            pass
        else:
            # Another session may create the root at the same moment: new=True never replaces its file. An
            # unwritable root is left to the directory made next, whose error names it.
            with contextlib.suppress(FileExistsError, ResultsError):
                atomic_write_text(self.root / ".gitignore", GITIGNORE, new=True)
        directory.mkdir(parents=True, exist_ok=True)

    def check_writable(self) -> None:
        """Create the directories and a scratch file in each, so that a run never measures for nothing."""
        for directory in (self.runs_dir, self.baselines_dir):
            try:
                self.make(directory)
                fd, scratch = tempfile.mkstemp(prefix=".probe.", dir=directory)
            except OSError as exc:
                raise self._unwritable(directory, exc) from None
            os.close(fd)
            os.unlink(scratch)

    # ------------------------------------------------------------ history

    def save_run(self, run: Run) -> Path:
        """Write ``run`` as a new file under runs/ and return its path; never replaces another session's file."""
        now = _stamp()
        commit = (run.git.commit or "")[:8] or "nogit"
        suffix = "-dirty" if run.git.dirty else ""
        try:
            self.make(self.runs_dir)
        except OSError as exc:
            raise self._unwritable(self.runs_dir, exc) from None
        path = self.runs_dir / f"{now}-{commit}{suffix}.json"
        counter = 1
        while True:
            try:
                save_run(path, run, new=True)
                return path
            except FileExistsError:  # another session took this name in the same microsecond
                counter += 1
                path = self.runs_dir / f"{now}-{commit}{suffix}-{counter}.json"
            except ResultsError as exc:
                raise StorageError(f"{exc}; or choose another results directory with --gpuperf-results-dir") from None

    # ------------------------------------------------------------ baselines

    def baseline_path(self, name: str) -> Path:
        return self.baselines_dir / f"{name}.json"

    def names(self) -> list[str]:
        if not self.baselines_dir.is_dir():
            return []
        return sorted(p.stem for p in self.baselines_dir.glob("*.json"))

    def run_ids(self) -> list[str]:
        """The run files' ids (their stems), oldest first: what ``pytest-gpuperf runs`` lists."""
        return sorted(p.stem for p in self.runs_dir.glob("*.json")) if self.runs_dir.is_dir() else []

    def find(self, ref: str, cwd: Path | None = None) -> Found:
        """The one resolver of a name given for a run, for every command that takes one (``compare``, ``report``,
        ``export``, ``runs show``, ``--gpuperf-compare``): anything path-like (``/``, ``.json``, an existing file)
        is a file; else a baseline of that name; else the run of that id, or the one run whose id starts so (the
        ids ``pytest-gpuperf runs`` prints). UnknownRef lists the candidates of an ambiguous start, or what
        there is."""
        problem = name_problem(Path(ref))
        if problem:
            raise StorageError(problem)
        candidate = Path(ref) if Path(ref).is_absolute() else (cwd or Path.cwd()) / ref
        if "/" in ref or os.sep in ref or ref.endswith(".json") or _there(candidate, file=True):
            return Found("file", ref, candidate)
        if ref and _there(self.baseline_path(ref)):
            return Found("baseline", ref, self.baseline_path(ref))
        ids = self.run_ids()
        matches = [i for i in ids if i == ref] or [i for i in ids if ref and i.startswith(ref)]
        if len(matches) == 1:
            return Found("run", matches[0], self.runs_dir / f"{matches[0]}.json")
        if matches:
            shown = ", ".join(matches[:_CANDIDATES]) + (", ..." if len(matches) > _CANDIDATES else "")
            raise UnknownRef(
                f"{ref!r} starts {len(matches)} run ids in {self.runs_dir} ({shown}); give more of one, "
                "or the whole id (pytest-gpuperf runs lists them)"
            )
        raise UnknownRef(self._unknown(ref, ids))

    def _unknown(self, ref: str, ids: list[str]) -> str:
        names = self.names()
        close = difflib.get_close_matches(ref, [*reversed(ids), *names], n=3, cutoff=0.6)
        runs = f"{counted(len(ids), 'run')}, the newest {ids[-1]}" if ids else "no runs"
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return (
            f"no baseline or run {ref!r} in {self.root} (baselines there: {', '.join(names) or 'none yet'}; {runs}); "
            f"{hint}{'R' if hint else 'r'}ecord a baseline on the base commit with: pytest --gpuperf-save={ref}, "
            f"or give a run id (pytest-gpuperf runs --results-dir {self.root} lists them) or the path of a results file"
        )

    def load(self, ref: str, cwd: Path | None = None) -> Baseline:
        """The runs of ``ref``: a baseline's, a run file's (its id or the start of one), or a file's by path
        (``find``)."""
        found = self.find(ref, cwd)
        name = found.id if found.kind == "baseline" else None  # a run file or a path has none
        baseline = Baseline(found.path, load_runs(found.path), name)
        # What a writer of this file left when it was SIGKILLed mid-write goes when the file is next read, not
        # only when it is next written (which may never come): only our own, and only a dead writer's.
        remove_stale_temporaries(found.path.parent)
        return baseline

    def existing(self, name: str) -> list[Run]:
        """The runs baseline ``name`` holds now ([] if none); an unreadable file raises, and is left alone.

        A saving session calls this at its start, to stop before measuring for nothing: a baseline
        made read-only (its owner's write bit off) or immutable is refused here too, not replaced
        at the end.
        """
        try:
            runs = self._runs_of(name)
        except ResultsError as exc:
            raise StorageError(
                f"{exc}. --gpuperf-save={name} would replace it, so nothing was measured: "
                f"move {self.baseline_path(name)} away (or delete it), or save under another name"
            ) from None
        self._check_replaceable(name)
        return runs

    def check_save(self, name: str, fingerprint: Mapping[str, Any], *, replace: bool) -> None:
        """Stop a saving session before it measures: the baseline unreadable or unwritable (see ``existing``),
        or holding runs of other code or another machine while ``replace`` was not asked for.

        ``fingerprint`` (a Fingerprint, or its stored form) is taken at the start, before the tests ran, so
        torch's precision flags (which a test may set) are left to the check made again when saving.
        """
        runs = self.existing(name)
        if not replace:
            now_fp = Fingerprint.of(fingerprint)
            allow = ("precision",)
            other = [r for r in runs if not _same_origin(r.fingerprint, now_fp, allow)]
            if other:
                now = f"this session runs {_describe_code(now_fp)}"
                raise self._refusal(name, other, now, now_fp, allow)

    def _refusal(
        self, name: str, other: list[Run], now: str, fingerprint: Fingerprint, allow: Collection[str] = ()
    ) -> ReplaceRefused:
        runs = f"{counted(len(other), 'run')}"
        diffs = blocking_differences([other[-1].fingerprint], [fingerprint], allow)
        machine = f" on another machine ({'; '.join(str(d) for d in diffs)})" if diffs else ""
        code = _describe_code(other[-1].fingerprint)
        return ReplaceRefused(
            f"baseline {name!r} ({self.baseline_path(name)}) holds {runs} of {code}{machine}, "
            f"and {now}: saving would replace them. "
            f"Add --gpuperf-replace to replace it (the old file is kept as "
            f"{self.baseline_path(name).name}.<time>.bak), or save under another name"
        )

    def _check_replaceable(self, name: str) -> None:
        path = self.baseline_path(name)
        if not path.exists():
            return
        why = None
        if not path.stat().st_mode & stat.S_IWUSR:
            why = "is read-only"
        else:
            try:  # an immutable file (chattr +i) refuses even root; opening it to append changes nothing
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
            except OSError as exc:
                why = f"cannot be written ({exc.strerror or exc})"
        if why:
            raise StorageError(
                f"baseline {path} {why}, so --gpuperf-save={name} would not add this run; nothing was measured: "
                f"make it writable (chmod u+w {path}) if it may change, or save under another name"
            )

    def _runs_of(self, name: str) -> list[Run]:
        path = self.baseline_path(name)
        return load_runs(path) if path.exists() else []

    def save_baseline(self, name: str, run: Run, *, replace: bool = False) -> SaveOutcome:
        """Add ``run`` to baseline ``name`` as one more run, or (``replace``) start it afresh (see the module
        docstring); runs of other code without ``replace`` raise ReplaceRefused and change nothing.

        Decided on the file as it is now, read under the baseline's lock: a run saved by
        another session since this one started is kept. An unreadable file is left as it is.
        """
        path = self.baseline_path(name)
        try:
            self.make(self.baselines_dir)
            with locked(path):
                try:
                    existing = self._runs_of(name)
                except ResultsError as exc:
                    raise StorageError(
                        f"{exc}. It was left as it is, so this run was not added: "
                        f"move {path} away (or delete it) and save again, or save under another name"
                    ) from None
                same = [r for r in existing if same_code(r, run)]
                other = [r for r in existing if not same_code(r, run)]
                if other and not replace:
                    raise self._refusal(name, other, f"this run is {_describe_code(run.fingerprint)}", run.fingerprint)
                backup = _keep_backup(path) if other else None
                runs = [*same, run]
                dropped = max(0, len(runs) - MAX_RUNS)
                runs = runs[dropped:]
                save_baseline_file(path, name, runs)
        except OSError as exc:
            raise self._unwritable(self.baselines_dir, exc) from None
        except StorageError:
            raise
        except ResultsError as exc:
            raise StorageError(f"{exc}; or choose another results directory with --gpuperf-results-dir") from None
        return SaveOutcome(path, len(runs), len(other), dropped, backup)
