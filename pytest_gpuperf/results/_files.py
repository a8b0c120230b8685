"""Results files on disk: written atomically, read with a clear error for every way a file can be wrong.

A results file is one Run (``--gpuperf-json``, ``runs/*.json``); a baseline file holds
several runs of the same code (see ``_record.py`` for the schema and its history); ``load_runs``
reads a pytest-benchmark JSON file as one run too (``_pytest_benchmark.py``). A reader sees the
old file or the new one, never half of one; a file that cannot be read is reported and left as it is.
Reading is bounded (``_jsonfile.read_json``: a regular file of at most 1 GiB) and a file of more than
``MAX_RECORDS`` records, or holding a record no measurement can have (``_impossible``), is refused.

``locked(path)`` serialises the writers of one file across processes (see its docstring). ``remove_ours`` deletes
only files named as ours, and never through a symbolic link.

Every output path (``--gpuperf-json``, ``--gpuperf-html``, ``report -o``, ``export -o``, ``ab --json``) replaces
only a file this tool wrote, of the same kind: each output names its ``OutputKind``, whose ``recognise`` tells
one of ours from anything else; ``output_problem`` refuses the path before any work is done, and
``atomic_write_text(..., kind=)`` checks again at the moment of replacing.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from .._escape import printable
from .._jsonfile import JsonFileError, lined, read_json
from .._process import alive
from ._pytest_benchmark import PytestBenchmarkError, from_pytest_benchmark, is_pytest_benchmark
from ._record import (
    BASELINE_SCHEMA,
    BASELINE_SCHEMA_VERSION,
    READABLE_VERSIONS,
    SCHEMA,
    UNRELEASED_VERSIONS,
    DamagedRecord,
    Record,
    Run,
)

if sys.platform != "win32":
    import fcntl

__all__ = [
    "RESULTS_OUTPUT",
    "LockHeld",
    "OutputKind",
    "ResultsError",
    "atomic_export",
    "atomic_write_text",
    "load_run",
    "load_runs",
    "locked",
    "output_path_problem",
    "output_problem",
    "real_folder",
    "remove_ours",
    "save_baseline_file",
    "save_run",
    "stale_temporary",
]

#: Seconds to wait for another process's lock. A holder keeps it for one read-merge-write
#: (milliseconds), so a wait this long means that process is stuck, not busy.
LOCK_TIMEOUT: Final = 60.0
#: The most records a file may hold, all its runs together: a 135 MB baseline (the largest seen in use) holds about
#: 60,000, read in 4 s; 250,000 takes some 20 s. More is not a file this tool wrote (a million took 100 s and 5.5 GB).
MAX_RECORDS: Final = 250_000
#: The most bytes one name in a path (a file's or a folder's) may have: 255 on the file systems in use (ext4, XFS,
#: btrfs, ZFS, APFS; NTFS counts 255 UTF-16 units), so that a longer one can be neither found nor created.
NAME_MAX: Final = 255
#: flock errors that mean "this file system cannot lock" (some network file systems), not "held".
_CANNOT_LOCK: Final = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL})


class ResultsError(Exception):
    """A results file that cannot be read or written; the message names the file and the fix."""


class LockHeld(ResultsError):
    """Another process held a lock past the wait ``locked`` was given; ``holder`` is what it wrote there."""

    def __init__(self, message: str, lock: Path, holder: str) -> None:
        super().__init__(message)
        self.lock, self.holder = lock, holder


@dataclass(frozen=True)
class OutputKind:
    """A kind of file this tool writes, and how to tell one it wrote from anything else at that path.

    ``recognise`` is given an existing regular file and says whether it is one of ours of this kind: it reads
    at most ``RECOGNISE_LIMIT`` bytes and never raises. Only such a file is ever replaced.
    """

    name: str  # as the error says it: "results file", "HTML report", "bencher export"
    example: str  # the file name the fix suggests when the path given is a directory
    recognise: Callable[[Path], bool]

    @property
    def a_name(self) -> str:
        """The name with its article: "a results file", "an HTML report"."""
        vowel = self.name[:1].lower() in "aeiou" or self.name.startswith("HTML")
        return f"{'an' if vowel else 'a'} {self.name}"

    @classmethod
    def of_schema(cls, name: str, example: str, schema: str) -> OutputKind:
        """A JSON file of ours, told by its ``"schema"``."""
        return cls(name, example, lambda path: _schema_of(path) == schema)


#: The most bytes read to recognise an existing output as ours; a bigger file is not replaced.
RECOGNISE_LIMIT: Final = 256 * 2**20
#: Our temporary files: ``.<name>.gpuperf-<pid>-<mkstemp's 8 characters>.tmp``, so that they can never be taken
#: for another program's (``.x.<number>.y.tmp`` is someone else's) and a killed writer's can be told by its pid; and
#: what an outside writer given one makes beside it under its name (kineto's ``<path>.tmp``, see ``atomic_export``).
_TEMPORARY: Final = re.compile(r"\..+\.gpuperf-(?P<pid>[0-9]+)-[a-z0-9_]{8}\.tmp(?:\..+)?")
#: errnos of a disk with no room left: its fix is room, not another writable place.
_NO_ROOM: Final = frozenset({errno.ENOSPC, errno.EDQUOT})


def head_bytes(path: Path, limit: int) -> bytes | None:
    """The first ``limit`` bytes of ``path`` if it is a regular file we can read, else None; a FIFO or a device is
    never read (opened without blocking, then refused by its type)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def json_of(path: Path) -> Any:
    """The JSON value of the regular file ``path``, or None where it is none or is over ``RECOGNISE_LIMIT`` bytes
    (for an ``OutputKind``'s ``recognise``)."""
    try:
        return read_json(path, limit=RECOGNISE_LIMIT)
    except JsonFileError:
        return None


def _schema_of(path: Path) -> object:
    data = json_of(path)
    return data.get("schema") if isinstance(data, dict) else None


#: ``--gpuperf-json`` and the run files of the results directory.
RESULTS_OUTPUT: Final = OutputKind.of_schema("results file", "results.json", SCHEMA)
#: The levels a run file indents (``_jsonfile.lined``): the run's keys, then one line a record.
RUN_DEPTH: Final = 2


def output_problem(path: Path, kind: OutputKind) -> str | None:
    """Why ``kind`` cannot be written at ``path`` (told before any work is done), or None: the place cannot be
    written, or an existing file there is not a ``kind`` this tool wrote. Callers add their option's name."""
    problem = output_path_problem(path, kind.example)
    if problem or not os.path.lexists(path):
        return problem
    return _not_ours(path, kind)


def _not_ours(path: Path, kind: OutputKind) -> str | None:
    """Why the existing ``path`` must not be replaced by a ``kind`` (None when it is one of ours)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0  # a dangling symbolic link: replacing it would destroy the link
    if not stat.S_ISREG(mode):
        return f"that is not a regular file; give the path of a new file, or of {kind.a_name} written by pytest-gpuperf"
    if kind.recognise(path):
        return None
    schema = _schema_of(path)
    if schema == BASELINE_SCHEMA:
        what = "a pytest-gpuperf baseline"
    elif schema == SCHEMA:
        what = "a pytest-gpuperf results file"
    else:
        what = f"not {kind.a_name} written by pytest-gpuperf"
    return (
        f"that file exists and is {what}, so writing the {kind.name} there would destroy it; "
        f"choose another path ({kind.a_name} written by pytest-gpuperf is replaced)"
    )


def atomic_write_text(path: Path, text: str, *, new: bool = False, kind: OutputKind | None = None) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never half of one.

    ``new=True`` never replaces a file: if ``path`` exists (another process just wrote it),
    FileExistsError is raised and nothing is written. With ``kind``, an existing file is replaced only
    if it is a ``kind`` this tool wrote (checked again here: one may have appeared since the start).
    """
    path = Path(path)
    fd, tmp = _temporary(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if new:
            _publish_new(Path(tmp), path)
        else:
            problem = None if kind is None or not os.path.lexists(path) else _not_ours(path, kind)
            if problem:
                raise ResultsError(f"did not write {path}: {problem}")
            os.replace(tmp, path)
    except BaseException as exc:  # nothing half-written is left, whatever stopped the write (an interruption too)
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, FileExistsError):
            raise _cannot_write(path, exc) from None
        raise


def _cannot_write(path: Path, exc: OSError) -> ResultsError:
    """``cannot write PATH: why; the fix``: room on a full disk, else a writable location."""
    fix = (
        "free some space on its disk, or choose another location"
        if exc.errno in _NO_ROOM
        else "choose a writable location"
    )
    return ResultsError(f"cannot write {path}: {exc.strerror or exc}; {fix}")


def _temporary(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path`` (its descriptor and name), named so that ``remove_stale_temporaries``
    removes it once its writer is gone."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _sweep_once(path.parent)
        # The writer's pid is in the name, so that what a killed writer leaves can be told from a live one's;
        # "gpuperf-" makes the name ours alone (see _TEMPORARY).
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.gpuperf-{os.getpid()}-", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a results file follows the umask like any other
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    return fd, tmp


#: The folders this process has swept of killed writers' temporaries, with its pid (a forked child sweeps again).
_SWEPT: Final[set[tuple[int, str]]] = set()


def _sweep_once(folder: Path) -> None:
    """``remove_stale_temporaries(folder)`` at this process's first write there: a sweep reads the whole folder, so
    one at every write made a session that writes a file a test (its spool of traces, the baseline's) quadratic in
    its tests (5,000 files: 2.8 s of sweeps). What a writer killed later leaves goes at the next process's."""
    key = (os.getpid(), str(folder))
    if key not in _SWEPT:
        remove_stale_temporaries(folder)
        _SWEPT.add(key)


def atomic_export(
    path: Path,
    export: Callable[[str], object],
    *,
    whole: Callable[[Path], str],
    compress: bool = False,
    compresslevel: int = 9,
) -> None:
    """Write ``path`` atomically where another library writes the file to a path it is given (torch.profiler's
    ``export_chrome_trace``): ``export`` fills a temporary file beside ``path``; ``whole`` says what is wrong with
    what it left there ("" when nothing), since such a writer may not report an error (torch's does not report a
    full disk: it returns, its file empty or cut short); only a whole file is fsynced, gzipped (``compress``, at
    gzip's ``compresslevel``) and renamed. A reader sees the whole file or none; what the writer made beside the
    temporary file under its name goes with it, and a killed writer's temporaries are removed as
    ``atomic_write_text``'s are."""
    path = Path(path)
    made: list[Path] = []
    done = False
    try:
        fd, name = _temporary(path)
        tmp = Path(name)
        made.append(tmp)
        os.close(fd)
        export(name)
        problem = whole(tmp)
        if problem:
            raise ResultsError(
                f"cannot write {path}: its writer returned, but {problem}, as on a full disk (which it does not "
                "report); free some space on its disk, or choose another location"
            )
        if compress:
            fd, name = _temporary(path)
            made.append(Path(name))
            with open(tmp, "rb") as raw, os.fdopen(fd, "wb") as out:
                with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=compresslevel) as gz:
                    shutil.copyfileobj(raw, gz)
                out.flush()
                os.fsync(out.fileno())
            tmp = Path(name)
        else:
            _fsync(tmp)
        os.replace(tmp, path)
        done = True
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    finally:
        for made_here in made:
            with contextlib.suppress(OSError):
                made_here.unlink(missing_ok=True)
            if not done:  # and the outside writer's own temporaries beside it (kineto's <name>.tmp)
                _remove_beside(made_here)


def _remove_beside(made: Path) -> None:
    """The files whose names start with the temporary ``made``'s, which its outside writer made beside it (one that
    did not finish); a writer that finished renamed its own."""
    with contextlib.suppress(OSError), os.scandir(made.parent) as entries:
        for entry in entries:
            if entry.name.startswith(made.name):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def name_problem(path: Path) -> str | None:
    """Why ``path`` can name no file: one of its names is over ``NAME_MAX`` bytes (None where none is)."""
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            shown = part if len(part) <= 24 else part[:20] + "..."
            return f"{shown!r} is {size} bytes, over the {NAME_MAX} bytes a file name may have; give a shorter name"
    return None


def output_path_problem(path: Path, example: str, *, directory: str = "") -> str | None:
    """Why a file cannot be written at ``path`` (told before any work is done), or None; ``example`` is the
    file name the fix suggests when ``path`` is a directory. With ``directory`` (what it is for: "the asv results
    directory"), ``path`` is a directory to write in, and a file there is refused. Callers add their option's name.
    Every output path is checked here: its names are bounded (``name_problem``), and so is the whole path."""
    problem = name_problem(path)
    if problem:
        return problem
    try:
        if directory and path.exists() and not path.is_dir():
            return f"{path} is a file; give {directory}"
        if not directory and path.is_dir():
            return f"that is a directory; give a file path such as {path / example}"
        existing = path.absolute() if directory else path.absolute().parent
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            return f"{existing} is a file, not a directory; choose another location"
        if not os.access(existing, os.W_OK):
            return f"{existing} is not a writable directory; choose a writable location"
    except OSError as exc:  # a path longer than the system takes (ENAMETOOLONG), or one it cannot look at
        fix = "give a shorter path" if exc.errno == errno.ENAMETOOLONG else "choose another location"
        return f"{exc.strerror or exc}; {fix}"
    return None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Remove the temporary files of ``atomic_write_text`` in ``directory`` whose writer is gone (SIGKILLed in the
    middle of a write); a live writer's are kept, and so is every file not named as ours (``_TEMPORARY``): another
    program's ``.x.123.y.tmp`` is its own business. Returns what was removed."""
    removed: list[Path] = []
    try:
        with os.scandir(directory) as entries:
            names = [e.name for e in entries if e.name.startswith(".") and ".gpuperf-" in e.name]
    except OSError:
        return removed
    for name in names:
        tmp = directory / name
        if stale_temporary(name) and tmp.is_file() and not tmp.is_symlink():
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
    return removed


def stale_temporary(name: str) -> bool:
    """Is ``name`` a temporary of ours (named as ``_TEMPORARY`` names them) whose writer is gone?"""
    match = _TEMPORARY.fullmatch(name)
    return match is not None and int(match["pid"]) != os.getpid() and not alive(int(match["pid"]))


def real_folder(top: Path, below: str) -> Path:
    """The folder ``top/below``, where we delete and replace files; ResultsError when it, or a folder between, is a
    symbolic link: ours never is, and through one we would change another program's files. ``top`` (a results
    directory, or its baselines folder) may be one: it is where the user keeps them."""
    folder = top
    for part in Path(below).parts:
        folder = folder / part
        if folder.is_symlink():
            raise ResultsError(
                f"{folder} is a symbolic link, and a folder of ours never is, so it was not followed: nothing was "
                f"deleted or written through it; remove it (rm {folder}) and run again"
            )
    return folder


def remove_ours(top: Path, below: str, ours: Callable[[str], bool], *, rmdir: bool = False) -> list[str]:
    """Delete the files of the folder ``top/below`` that ``ours`` says are named as our writer names them (and the
    temporaries a dead writer of ours left), never following a symbolic link: one in the folder's way raises
    ResultsError (``real_folder``), one in the folder is never ours. ``rmdir``: the folder goes too, once nothing
    else is in it. Returns the names left in it, sorted (none where it does not exist)."""
    folder = real_folder(top, below)
    left: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False) and (ours(entry.name) or stale_temporary(entry.name)):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                else:
                    left.append(entry.name)
        if rmdir and not left:
            folder.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno != errno.ENOTEMPTY:  # a file written since it was listed stays, and so does its folder
            raise ResultsError(f"cannot delete in {folder}: {exc.strerror or exc}; check its permissions") from None
        left = os.listdir(folder)
    return sorted(left)


def _publish_new(tmp: Path, path: Path) -> None:
    """Give the finished ``tmp`` the name ``path`` unless that name exists; the check and the naming are one step."""
    try:
        os.link(tmp, path)  # fails with FileExistsError rather than replace
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system (FAT, some network mounts): claim the name, then fill it
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        os.replace(tmp, path)
    else:
        tmp.unlink()


@contextlib.contextmanager
def locked(path: Path, *, timeout: float = LOCK_TIMEOUT, holder: str = "") -> Iterator[None]:
    """Hold an exclusive lock for writing ``path``, against other processes, for the ``with`` block.

    The lock is ``flock`` on a sibling file ``<name>.lock``, removed again on release. The
    kernel releases a flock when its holder dies, so a crashed session never blocks the
    next; its leftover lock file is harmless and the next holder removes it. A holder stuck
    for ``timeout`` seconds raises LockHeld (a ResultsError) naming the lock file; ``timeout=0``
    does not wait at all. ``holder`` (who holds it, for a person) is written into the lock
    file, and a LockHeld carries the text the other holder wrote. Where there is no flock
    (Windows, file systems that cannot lock), the block runs unlocked.
    """
    if sys.platform == "win32":
        yield
        return
    lock = path.with_name(path.name + ".lock")
    fd = _lock(lock, time.monotonic() + timeout, timeout)
    if fd is not None and holder:
        try:
            os.ftruncate(fd, 0)
            os.write(fd, holder.encode("utf-8", "replace"))
        except OSError as exc:  # a full disk: no lock is left behind, and the error is one line
            _release(lock, fd)
            raise _cannot_write(lock, exc) from None
    try:
        yield
    finally:
        if fd is not None:
            _release(lock, fd)


def _release(lock: Path, fd: int) -> None:
    # Remove the file while still holding it: a waiter that then gets the lock sees the
    # file it opened is gone (see _lock) and locks a fresh one, so two never both hold.
    with contextlib.suppress(OSError):
        os.unlink(lock)
    os.close(fd)


def _lock(lock: Path, deadline: float, timeout: float) -> int | None:
    """Lock ``lock`` (created if absent) and return its descriptor; None where it cannot be locked."""
    while True:
        fd = _open_lock(lock)
        try:
            if not _flock(fd, lock, deadline, timeout):
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(lock)  # nobody can hold it on this file system: leave nothing behind
                return None
            held = os.fstat(fd)
            try:
                now = os.stat(lock)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)  # the previous holder removed the file we opened: lock the current one


def _open_lock(lock: Path) -> int:
    """Open (or create) the lock file itself, never what a symbolic link in its place points at: a planted or
    dangling ``NAME.json.lock`` link would have us create or truncate a file anywhere."""
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or lock.is_symlink():
            raise ResultsError(
                f"{lock} is a symbolic link, and a lock file of ours never is, so it was not followed; "
                f"remove it (rm {lock}) and run again"
            ) from None
        raise _cannot_write(lock, exc) from None


def _flock(fd: int, lock: Path, deadline: float, timeout: float) -> bool:
    pause = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno in _CANNOT_LOCK:
                return False
            raise
        if time.monotonic() >= deadline:
            raise LockHeld(
                f"another process has held {lock} for over {timeout:g} s, while a save holds it only for a moment; "
                f"find it with: fuser {lock} (or lsof), and end it if it is stuck",
                lock,
                os.pread(fd, 4096, 0).decode("utf-8", "replace").strip(),
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def save_run(path: Path, run: Run, *, new: bool = False) -> None:
    """Write one run; ``new=True`` raises FileExistsError rather than replace an existing file, and an existing file
    is replaced only if it is a results file (``RESULTS_OUTPUT``)."""
    atomic_write_text(path, lined(run.to_dict(), RUN_DEPTH) + "\n", new=new, kind=RESULTS_OUTPUT)


def save_baseline_file(path: Path, name: str, runs: Sequence[Run]) -> None:
    """Write a named baseline: several runs of the same code, oldest first."""
    data = {
        "schema": BASELINE_SCHEMA,
        "version": BASELINE_SCHEMA_VERSION,
        "name": name,
        "runs": [r.to_dict() for r in runs],
    }
    atomic_write_text(path, lined(data, RUN_DEPTH + 2) + "\n")  # its runs, each as a run file lays it out


def load_run(path: Path) -> Run:
    """Read a results file; a missing, corrupt or foreign file raises ResultsError naming it and the fix."""
    path = Path(path)
    data = _read_json(path)
    _check_schema(path, data, SCHEMA, READABLE_VERSIONS)
    _check_count(path, [data])
    return _parse_run(path, data)


def load_runs(path: Path) -> list[Run]:
    """Read a results file (one run), a baseline file (several runs) or a pytest-benchmark JSON file (one run, see
    ``_pytest_benchmark.py``); errors name the file and the fix."""
    path = Path(path)
    data = _read_json(path)
    if is_pytest_benchmark(data):
        try:
            run = from_pytest_benchmark(path, data)
        except PytestBenchmarkError as exc:
            raise ResultsError(f"{path} is a pytest-benchmark file, but {exc}") from None
        _check_records(path, run, "")
        return [run]
    if isinstance(data, dict) and data.get("schema") == BASELINE_SCHEMA:
        _check_schema(path, data, BASELINE_SCHEMA, (BASELINE_SCHEMA_VERSION,))
        runs = data.get("runs")
        if not isinstance(runs, list) or not runs:
            raise ResultsError(f'{path} is damaged: its "runs" list is missing or empty; save the baseline again')
        for i, run in enumerate(runs):
            _check_schema(path, run, SCHEMA, READABLE_VERSIONS, where=f"run {i + 1} of ")
        _check_count(path, runs)
        return [_parse_run(path, run, f"run {i}, " if len(runs) > 1 else "") for i, run in enumerate(runs, 1)]
    _check_schema(path, data, SCHEMA, READABLE_VERSIONS)
    _check_count(path, [data])
    return [_parse_run(path, data)]


def _read_json(path: Path) -> Any:
    """The JSON in ``path``, read through ``_jsonfile`` (bounded: a regular file of at most MAX_BYTES)."""
    try:
        return read_json(path, precheck=lambda text: _check_count_in_text(path, text))
    except JsonFileError as exc:
        raise ResultsError(_unreadable(path, exc)) from None


def _unreadable(path: Path, exc: JsonFileError) -> str:
    """Why ``path`` cannot be read as a results file, with the fix."""
    point = "point at a .json file written by --gpuperf-json, --gpuperf-save or the results directory"
    if exc.problem == "missing":
        return f"{path}: no such results file"
    if exc.problem == "directory":
        return f"{path} is a directory; give the path of a results or baseline .json file"
    if exc.problem == "unreadable":
        return f"{path}: {exc.detail}"
    if exc.problem in ("special", "too large", "too deep"):
        return f"{exc}, so it is not a results file; {point}"
    if exc.problem == "not text":
        return f"{path} is not a text file, so not a results file; point at one written by pytest-gpuperf"
    if path.suffix != ".json":  # someone's source or config file: no advice to delete it
        return f"{path} is not a results file (not JSON); {point}"
    return f"{exc}; it was left as it is: delete or restore it, or save a new baseline under another name"


def _check_schema(path: Path, data: Any, schema: str, versions: tuple[int, ...], where: str = "") -> None:
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise ResultsError(
            f'{where}{path} is not a pytest-gpuperf results file (no "schema": "{schema}"); '
            "point at one written by --gpuperf-json, --gpuperf-save or the results directory, "
            "or at pytest-benchmark's --benchmark-json file"
        )
    found = data.get("version")
    if found not in versions or isinstance(found, bool):
        reads = " and ".join(str(v) for v in versions)
        reads = f"this pytest-gpuperf reads version{'s' if len(versions) > 1 else ''} {reads}"
        if schema == SCHEMA and found in UNRELEASED_VERSIONS and not isinstance(found, bool):
            raise ResultsError(
                f"{where}{path} has {schema} schema version {found!r}, written by an unreleased pytest-gpuperf "
                f"(before 0.1.0); {reads}: re-record it with this version"
            )
        raise ResultsError(
            f"{where}{path} has {schema} schema version {found!r}, {reads}; "
            "re-record it with this version, or read it with the pytest-gpuperf that wrote it"
        )


def _check_count_in_text(path: Path, text: str) -> None:
    """Refuse a file of far more than MAX_RECORDS records before the JSON is parsed: each record has one
    ``"measurement"`` key, and counting them is quick where parsing a million records is not."""
    count = text.count('"measurement"')
    if count > MAX_RECORDS:
        _too_many(path, count)


def _check_count(path: Path, runs: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a file of more than MAX_RECORDS records before any is parsed into a Run (which is slower still)."""
    count = sum(len(run.get("records") or ()) for run in runs if isinstance(run.get("records"), list))
    if count > MAX_RECORDS:
        _too_many(path, count)


def _too_many(path: Path, count: int) -> NoReturn:
    raise ResultsError(
        f"{path} holds {count:,} records, over the {MAX_RECORDS:,} that pytest-gpuperf reads in one file, "
        "so it was not written by this tool; point at a results or baseline file written by --gpuperf-json or "
        "--gpuperf-save"
    )


def _parse_run(path: Path, data: Mapping[str, Any], where: str = "") -> Run:
    """The run in ``data`` (``where``: "run 2, " of a baseline of several), read through the types' own codecs
    (``Run.from_dict``: every field's type and bound, ``measuring.values.stored``), then checked for what no
    measurement can have (``_impossible``): the one check of a results file, which every reader goes through
    (``load_run``, ``load_runs``: a baseline's load and merge, ``compare``, ``runs``, ``report``, ``export``)."""
    try:
        run = Run.from_dict(data)
    except DamagedRecord as exc:
        raise ResultsError(_damaged(path, f"{where}record {exc.number}", exc.test, str(exc.problem))) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # values.FieldError: a field of the run's own
        raise ResultsError(_damaged(path, where.removesuffix(", "), "", str(exc))) from None
    _check_records(path, run, where)
    return run


def _damaged(path: Path, where: str, test: str, problem: str) -> str:
    """``<file>: record N (<test>): field 'X' must be ...; the file is left as it is``, escaped (it holds the file's
    text)."""
    place = f"{where}{f' ({test})' if test else ''}: " if where else ""
    return printable(
        f"{path}: {place}{problem}; the file is left as it is: re-record it, or restore the file from a copy"
    )


def _check_records(path: Path, run: Run, where: str) -> None:
    """Refuse a run holding a value no measurement can have (issue 23: ``"iterations": 0`` was merged into a
    baseline); the error names the file, the record and the field."""
    for number, record in enumerate(run.records, 1):
        problem = _impossible(record)
        if problem:
            raise ResultsError(_damaged(path, f"{where}record {number}", record.test, problem))


def _impossible(record: Record) -> str:
    """What in ``record`` no measurement can have (its field and what it must be), or ""; its types and bounds
    were checked as it was read (``Record.from_dict``)."""
    measurement = record.measurement
    rounds = [("measurement.samples", measurement.samples)]
    rounds += [(f"gate.rounds[{i}].samples", r.samples) for i, r in enumerate(record.evidence.rounds, 1)]
    rounds += [(f"gate.runs[{i}].samples", r.rounds[0].samples) for i, r in enumerate(record.evidence.runs, 1)]
    for where, samples in rounds:
        if not samples:
            return f"field {where!r} must be a list of 1 sample or more, not an empty one"
        if not all(math.isfinite(x) and x > 0 for x in samples):
            return f"field {where!r} must be positive finite times, and holds NaN, infinite, zero or negative ones"
    for name, amount in measurement.work.items():
        if not (math.isfinite(amount) and amount >= 0):
            return f"field {f'measurement.work.{name}'!r} must be a finite amount, 0 or more, not {amount}"
    return ""
