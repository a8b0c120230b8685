"""Faults a CI machine inflicts on pytest-gpuperf, injected for real: kills inside the writes and just after their
publish step, sessions saving at once, a full disk; and the proof that it catches real bugs planted in the package.

    python bench/fault_injection.py              # every fault, several trials each (7 to 9 minutes)
    python bench/fault_injection.py --quick      # one or two trials of each (a smoke run)
    python bench/fault_injection.py --planted    # each of BUGS planted in a copy of the package: exit 0 only if
                                                 # every one is caught (1 to 2 minutes)

Every trial runs real processes (pytest sessions, ``pytest-gpuperf`` commands) in a scratch project
whose baseline ``base`` already holds runs, so that a lost update or a damaged merge shows. A kill
meant for a write lands inside it: a ``sitecustomize`` put on ``PYTHONPATH`` (the idea of the
SLOW_WRITES conftest of tests/plugin/test_output_files.py, reaching the CLI commands too) slows the
``fsync`` of the file named by ``GPUPERF_FAULT_SLOW``, notes each such call in a flag file, and the
script signals the process once the flag names the file. The publish step has a kill point of its own
(``GPUPERF_FAULT_SLOW_PUBLISH``): the moment just after the target itself was given new content, renamed
(``os.replace``) or linked (``os.link``) into place, or opened for writing in place, so that damage done
after the temporary's fsync is under a kill too. ``SESSIONS`` sessions save to one baseline at once: the
project's conftest holds each, its tests done, at a barrier until all have come. A full disk is a small
tmpfs when this runs as root, else an ``fsync`` that raises ENOSPC (``GPUPERF_FAULT_ENOSPC``); the traces'
full disk is a tmpfs only (torch writes a trace from C++, which no Python stand-in reaches).

After each trial the script checks what a user would:

- **corrupt**: every JSON file of the project (runs, baselines, ``--gpuperf-json``, ``ab --json``,
  asv results, every trace: ``traces/<run id>/*.json`` and ``baselines/*.traces/*.json.gz``) loads;
- **lost**: a session that saved ("now holds") has its run in the baseline, and a session stopped
  while measuring has its run file, marked ``"interrupted": true``;
- **baseline**: the baseline, which held runs, is byte-identical or extended by exactly this
  session's run (or these sessions' runs, in any order; the oldest dropped past 10 runs), nothing else;
- **litter**: no temporary or lock file, stale worktree or orphaned trace folder remains (after a
  SIGKILL: once the next normal command of that kind has run, which is what cleans them);
- **exit**: SIGTERM and SIGINT end a session with exit 2 (a CLI command with 130), without a
  traceback; a full disk gives an error line naming it, no traceback, a non-zero exit, and no line
  announcing traces.

It prints one table; a trial that fails a check has its project copied aside (the path is printed)
and the script exits 1. ``--planted`` plants each of ``BUGS`` by a source patch in its own copy of the
package, which the trials import (``PYTHONPATH``), runs the fault aimed at it until a trial finds a
problem (at most ``--trials``), prints a table (bug, fault, trials, caught) and exits 0 only if every
bug was caught. A catch says something only where the normal run passes the same fault.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gzip
import importlib.util
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

#: The sitecustomize that injects the faults into every Python process started with the scratch PYTHONPATH.
INJECT = """
import errno
import os
import time

_FLAG = os.environ.get("GPUPERF_FAULT_FLAG", "")
_SLOW = os.environ.get("GPUPERF_FAULT_SLOW", "")  # "<part of the path>=<seconds>": fsync slowed
_SLOW_UNLINK = os.environ.get("GPUPERF_FAULT_SLOW_UNLINK", "")  # the same for unlink
_FULL = os.environ.get("GPUPERF_FAULT_ENOSPC", "")  # part of the path: fsync fails as on a full disk


def _note(what, name):
    if _FLAG:
        with open(_FLAG, "a") as flag:
            flag.write(f"{what} {name}\\n")


def _matches(spec, name):
    part, _, seconds = spec.rpartition("=")
    return (part in name, float(seconds or 0))


if _SLOW or _FULL:
    _fsync = os.fsync

    def fsync(fd):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            name = ""
        if _FULL and _FULL in name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if _SLOW:
            hit, seconds = _matches(_SLOW, name)
            if hit:
                _note("fsync", name)
                time.sleep(seconds)
        _fsync(fd)

    os.fsync = fsync

if _SLOW_UNLINK:
    _unlink = os.unlink

    def unlink(path, *args, **kwargs):
        hit, seconds = _matches(_SLOW_UNLINK, os.fsdecode(path))
        if hit:
            _note("unlink", os.fsdecode(path))
            time.sleep(seconds)
        _unlink(path, *args, **kwargs)

    os.unlink = unlink
    os.remove = unlink

# "<the path's end>=<seconds>": the publish step slowed, just after a target whose path ends so (or, for a part
# ending in "/", lies in that folder) was given new content: renamed or linked into place, or opened for writing in
# place. A temporary beside it (a hidden name) never counts.
_PUBLISH = os.environ.get("GPUPERF_FAULT_SLOW_PUBLISH", "")

if _PUBLISH:
    import builtins
    import io

    _part, _, _seconds = _PUBLISH.rpartition("=")

    def _published(target):
        if not isinstance(target, (str, bytes, os.PathLike)):
            return  # a file descriptor
        name = os.path.abspath(os.fsdecode(target))
        mine = name.endswith(_part) or (_part.endswith("/") and _part in name)
        if mine and not os.path.basename(name).startswith("."):
            _note("publish", name)
            time.sleep(float(_seconds))

    def _after(real):
        def publish(src, dst, *args, **kwargs):
            result = real(src, dst, *args, **kwargs)
            _published(dst)
            return result

        return publish

    os.replace, os.rename, os.link = _after(os.replace), _after(os.rename), _after(os.link)
    _open = builtins.open

    def open(file, mode="r", *args, **kwargs):
        f = _open(file, mode, *args, **kwargs)
        if any(c in mode for c in "wax+"):
            _published(file)  # opened (and truncated) in place
        return f

    builtins.open = io.open = open
"""

TESTS = """
import os
import time
from pathlib import Path


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a(gpuperf):
    gpuperf.measure(lambda: spin(200e-6))


def test_b(gpuperf):
    Path(os.environ["GPUPERF_FAULT_MEASURING"]).touch()  # the script's cue: this session is measuring
    gpuperf.measure(lambda: spin(300e-6))


def test_c(gpuperf):
    gpuperf.measure(lambda: spin(400e-6))
"""

#: The session project's conftest: with ``GPUPERF_FAULT_BARRIER`` ("<folder>=<sessions>") each session waits, once
#: its tests are done and before pytest-gpuperf saves (its sessionfinish is trylast), until that many have come, then
#: writes the moment it went on: the saves start together, as the sessions of one CI matrix can.
CONFTEST = """
import os
import time
from pathlib import Path


def pytest_sessionfinish(session):
    spec = os.environ.get("GPUPERF_FAULT_BARRIER")
    if not spec:
        return
    folder, _, sessions = spec.rpartition("=")
    mine = Path(folder) / str(os.getpid())
    mine.touch()
    deadline = time.monotonic() + 120
    while len(os.listdir(folder)) < int(sessions) and time.monotonic() < deadline:
        time.sleep(0.001)
    mine.write_text(repr(time.time()))
"""

FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.05",
    "--gpuperf-max-time=0.3",
    "--gpuperf-warmup-time=0.05",
    "--gpuperf-quiet-wait=0",
    "--gpuperf-memory=off",
)

WORKLOADS = """\
import time

from pytest_gpuperf.measuring import Step, Workload


def build(device, size):
    return Step(lambda: time.sleep(0.0005), work={"items": 1.0})


WORKLOADS = {"nap": Workload("nap", build)}
"""

#: Slow enough that a signal sent once the flag names the file lands inside the write on a loaded machine.
SLOW_SECONDS = 1.5
MAX_RUNS = 10  # results/_store.py's MAX_RUNS: a baseline keeps its newest 10 runs
#: Sessions saving to one baseline at once: as many as it keeps, so that each one's run must be found there.
SESSIONS = MAX_RUNS


@dataclass
class Row:
    """One fault's trials and what its checks found."""

    fault: str
    trials: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    corrupt: int = 0
    baseline: int = 0  # baselines neither byte-identical nor correctly extended
    litter: int = 0
    exit: int = 0  # wrong exit status, a traceback, or a missing message
    kept: list[str] = field(default_factory=list)
    skipped: str = ""  # why its trials could not run here

    def failed(self) -> int:
        return self.lost + self.corrupt + self.baseline + self.litter + self.exit


class Trial:
    """One trial's problems, counted into its row; a failed trial's project is copied aside."""

    def __init__(self, row: Row, project: Path, keep: Path | None) -> None:
        self.row, self.project, self.keep, self.problems = row, project, keep, list[str]()
        row.trials += 1

    def check(self, ok: bool, column: str, what: str) -> None:
        if not ok and f"{column}: {what}" not in self.problems:  # one problem counted once, seen twice or not
            setattr(self.row, column, getattr(self.row, column) + 1)
            self.problems.append(f"{column}: {what}")

    def outcome(self, name: str) -> None:
        self.row.outcomes[name] = self.row.outcomes.get(name, 0) + 1

    def close(self, output: str = "") -> None:
        if not self.problems:
            return
        if self.keep is None:  # a planted bug's trial: the problems are what was wanted
            print(f"  {self.row.fault} trial {self.row.trials}: {'; '.join(self.problems)}", file=sys.stderr)
            return
        where = self.keep / f"{re.sub(r'[^A-Za-z0-9.]+', '-', self.row.fault).strip('-')}-{self.row.trials}"
        shutil.copytree(self.project, where, symlinks=True, dirs_exist_ok=True)
        (where / "FAULT-INJECTION-PROBLEMS.txt").write_text("\n".join(self.problems) + "\n\n" + output)
        self.row.kept.append(str(where))
        print(f"  FAILED {self.row.fault} trial {self.row.trials}: {'; '.join(self.problems)}", file=sys.stderr)
        print(f"    its files are kept in {where}", file=sys.stderr)


# ---------------------------------------------------------------- processes


class Scratch:
    """The scratch area: the injection module, a flag file, and a copy kept of each failed trial (none where
    ``package``, a folder holding a planted copy of ``pytest_gpuperf``, is what the processes import)."""

    def __init__(self, root: Path, package: Path | None = None) -> None:
        self.root, self.package = root, package
        self.inject = root / "inject"
        self.inject.mkdir(parents=True)
        (self.inject / "sitecustomize.py").write_text(INJECT)
        self.keep = None if package else Path(tempfile.mkdtemp(prefix="gpuperf-faults-failed-"))

    def env(self, project: Path, **faults: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUPERF_FAULT", "PYTEST_ADDOPTS"))}
        paths = [str(self.inject), str(self.package or ""), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        env["GPUPERF_FAULT_FLAG"] = str(project / "flag")
        env["GPUPERF_FAULT_MEASURING"] = str(project / "measuring")
        env["TMPDIR"] = str(project / "scratch")  # ab's and history's worktrees: a stale one shows
        (project / "scratch").mkdir(exist_ok=True)
        env.update({f"GPUPERF_FAULT_{k.upper()}": v for k, v in faults.items()})
        return env


def start(scratch: Scratch, project: Path, argv: Sequence[str], **faults: str) -> subprocess.Popen[str]:
    for cue in ("flag", "measuring"):
        (project / cue).unlink(missing_ok=True)
    return subprocess.Popen(
        list(argv),
        cwd=project,
        env=scratch.env(project, **faults),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a group signal reaches its children, as CI sends it
    )


def pytest_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *FAST, *args]


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest_gpuperf", *args]


def finish(proc: subprocess.Popen[str], timeout: float = 300) -> str:
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0] + "\n[fault_injection: timed out, killed]"


def run(scratch: Scratch, project: Path, argv: Sequence[str], **faults: str) -> tuple[int, str]:
    proc = start(scratch, project, argv, **faults)
    out = finish(proc)
    return proc.returncode, out


def wait_for(project: Path, cue: str, part: str, proc: subprocess.Popen[str], count: int = 1) -> bool:
    """Wait until the flag file names ``part`` ``count`` times (or the cue file exists); False if the process
    ended first."""
    path = project / cue
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if path.exists() and (not part or path.read_text().count(part) >= count):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def signal_group(proc: subprocess.Popen[str], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)


# ---------------------------------------------------------------- what the files hold


def load(path: Path) -> Any:
    """The JSON in ``path`` (gunzipped for a ``.gz``), or None where it does not load."""
    try:
        data = path.read_bytes()
        return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)
    except (OSError, EOFError, ValueError):  # gzip's BadGzipFile is an OSError; a cut stream an EOFError
        return None


def corrupt_files(project: Path) -> list[str]:
    """Every JSON file of the project that does not load as an object: runs, baselines, outputs, asv results, and
    every trace (``traces/<run id>/*.json``, ``baselines/<name>.traces/*.json.gz``)."""
    bad = []
    for path in [*project.rglob("*.json"), *project.rglob("*.json.gz")]:
        if "scratch" in path.relative_to(project).parts or path.name == "asv.conf.json":
            continue
        if path.is_file() and not isinstance(load(path), dict):
            bad.append(str(path.relative_to(project)))
    return bad


def trace_files(project: Path) -> list[Path]:
    gpuperf = project / ".gpuperf"
    return sorted([*gpuperf.glob("traces/*/*.json"), *gpuperf.glob("baselines/*.traces/*.json.gz")])


def litter(project: Path) -> list[str]:
    found = [
        str(p.relative_to(project))
        for p in project.rglob("*")
        if p.name.endswith((".tmp", ".lock")) and "scratch" not in p.relative_to(project).parts
    ]
    scratch = project / "scratch"
    found += [f"stale worktree {p.name}" for p in scratch.iterdir()] if scratch.is_dir() else []
    runs, traces = project / ".gpuperf" / "runs", project / ".gpuperf" / "traces"
    if traces.is_dir():
        found += [
            f"orphaned traces/{d.name}"
            for d in traces.iterdir()
            if d.is_dir() and not (runs / f"{d.name}.json").exists()
        ]
    return found


def run_files(project: Path) -> set[Path]:
    runs = project / ".gpuperf" / "runs"
    return set(runs.glob("*.json")) if runs.is_dir() else set()


def baseline_state(project: Path, name: str = "base") -> tuple[bytes, Any]:
    path = project / ".gpuperf" / "baselines" / f"{name}.json"
    data = path.read_bytes()
    return data, json.loads(data)


def extended(before: Sequence[Any], after: Any, new: Sequence[Any]) -> bool:
    """Is ``after`` the runs ``before`` followed by the runs ``new`` in some order (each saved once, by whichever
    session took the lock first), the oldest dropped past ``MAX_RUNS``?"""
    if not isinstance(after, list) or len(after) != min(MAX_RUNS, len(before) + len(new)) or len(new) > MAX_RUNS:
        return False
    kept = len(after) - len(new)  # the old runs still there, the newest of them
    text = [json.dumps(run, sort_keys=True) for run in (*after[kept:], *new)]
    return after[:kept] == list(before[len(before) - kept :]) and sorted(text[: len(new)]) == sorted(text[len(new) :])


def check_baseline(trial: Trial, project: Path, before: tuple[bytes, Any], new: Sequence[Any]) -> str:
    """``identical``, ``extended`` (by exactly the runs ``new``, in any order) or ``wrong`` (counted)."""
    path = project / ".gpuperf" / "baselines" / "base.json"
    try:
        after = path.read_bytes()
    except OSError:
        trial.check(False, "baseline", "the baseline is gone")
        return "wrong"
    if after == before[0]:
        return "identical"
    data = load(path)
    ok = isinstance(data, dict) and bool(new) and extended(before[1]["runs"], data.get("runs"), new)
    ok = ok and {k: v for k, v in data.items() if k != "runs"} == {k: v for k, v in before[1].items() if k != "runs"}
    trial.check(ok, "baseline", f"changed, but not by exactly this session's run ({len(new)} new run files)")
    return "extended" if ok else "wrong"


def check_common(trial: Trial, project: Path, *, clean: bool = True) -> None:
    corrupt = corrupt_files(project)
    trial.check(not corrupt, "corrupt", ", ".join(corrupt))
    if clean:
        left = litter(project)
        trial.check(not left, "litter", ", ".join(left))


def check_interrupted_exit(trial: Trial, code: int, out: str, expected: int) -> None:
    trial.check(code == expected, "exit", f"exit {code}, expected {expected}")
    trial.check("Traceback" not in out, "exit", "a traceback was printed")


# ---------------------------------------------------------------- the pytest session's faults


def session_project(scratch: Scratch, name: str, *args: str) -> Path:
    """A project of three measuring tests whose baseline ``base`` holds two runs (saved by sessions given ``args``)."""
    project = scratch.root / name
    project.mkdir()
    (project / "test_steps.py").write_text(textwrap.dedent(TESTS))
    (project / "conftest.py").write_text(CONFTEST)
    for _ in range(2):
        code, out = run(scratch, project, pytest_argv(*args, "--gpuperf-save=base"))
        if code != 0:
            raise SystemExit(f"the setup session failed (exit {code}):\n{out}")
    return project


def session_fault(
    scratch: Scratch, project: Path, row: Row, signals: Sequence[int], where: str, rng: random.Random, span: float
) -> None:
    """One session saving to ``base`` (and ``--gpuperf-json``), sent ``signals`` at ``where``: ``write`` (inside the
    baseline's write, at its temporary file's fsync), ``json`` (inside the --gpuperf-json write), ``publish`` (just
    after the baseline's publish: renamed into place, or opened for writing in place), ``run file`` (just after the
    run file's, linked into place), ``trace`` (just after the first of the baseline's traces, the work profile on),
    ``measuring``, or ``random`` (any moment)."""
    trial = Trial(row, project, scratch.keep)
    before, runs_before, json_before = baseline_state(project), run_files(project), load(project / "out.json")
    seconds = SLOW_SECONDS * 2 if len(signals) > 1 else SLOW_SECONDS
    slow = {"write": "baselines/.base.json", "json": "/.out.json"}.get(where)
    publish = {"publish": "/baselines/base.json", "run file": "/.gpuperf/runs/", "trace": "/base.traces/"}.get(where)
    faults = {"slow": f"{slow}={seconds}"} if slow else {"slow_publish": f"{publish}={seconds}"} if publish else {}
    traced = ("--gpuperf-memory=on",) if where == "trace" else ()  # the work profile rides on the memory probe
    proc = start(scratch, project, pytest_argv(*traced, "--gpuperf-save=base", "--gpuperf-json=out.json"), **faults)
    if where == "random":
        time.sleep(rng.uniform(0.1, span))
        landed = proc.poll() is None
    elif where == "measuring":
        landed = wait_for(project, "measuring", "", proc)
    else:
        landed = wait_for(project, "flag", f"publish {project}" if publish else str(slow), proc)
    for i, signum in enumerate(signals):
        if i:
            time.sleep(0.3)
        proc.send_signal(signum)
    out = finish(proc)
    killed = signals[0] == signal.SIGKILL
    new_files = sorted(run_files(project) - runs_before)
    new_runs = [load(p) for p in new_files]
    if where != "random":
        trial.check(landed, "exit", f"the signal did not land {where} (the session ended first)")
    outcome = check_baseline(trial, project, before, [r for r in new_runs if isinstance(r, dict)])
    trial.outcome(f"baseline {outcome}")
    if "now holds" in out:  # it said it saved: its run must be there
        trial.check(outcome == "extended", "lost", "the session said it saved, the baseline does not hold its run")
    if not killed:
        check_interrupted_exit(trial, proc.returncode, out, 2)
        interrupted = [r for r in new_runs if isinstance(r, dict) and r.get("interrupted")]
        if where == "measuring":
            trial.check(len(interrupted) == 1, "lost", "no run file marked interrupted")
            trial.check(outcome == "identical", "baseline", "an interrupted run changed the baseline")
            trial.check("interrupted, so baseline 'base' was left as it was" in out, "exit", "no line says so")
        elif len(signals) == 1:
            trial.check(outcome == "extended" and not interrupted, "lost", "the save was not completed")
            trial.check("received while saving: the save was completed first" in out, "exit", "no line says so")
        else:
            trial.check(outcome == "identical", "baseline", "a save abandoned by a second signal changed it")
            trial.check("interrupted twice while saving: the save was abandoned" in out, "exit", "no line says so")
            trial.check(load(project / "out.json") == json_before, "exit", "--gpuperf-json was written after all")
        check_common(trial, project)
    else:
        corrupt = corrupt_files(project)  # before the next session, which may write the same files again
        trial.check(not corrupt, "corrupt", ", ".join(corrupt))
        if where in ("write", "run file"):
            trial.check(outcome == "identical", "baseline", f"a SIGKILL at the {where} changed the baseline")
        if where == "run file":
            trial.check(len(new_files) == 1, "lost", "the run file linked into place is not there")
        if where in ("publish", "trace"):
            trial.check(outcome == "extended", "baseline", f"a SIGKILL after the {where} left the baseline unsaved")
        if where == "json":
            trial.check(load(project / "out.json") == json_before, "corrupt", "--gpuperf-json changed mid-write")
        code, after = run(scratch, project, pytest_argv("--gpuperf-save=base", "--gpuperf-json=out.json"))
        trial.check(code == 0, "exit", f"the next normal session exited {code}")
        check_common(trial, project)  # that session removed what the killed one left
        out += "\n--- next session\n" + after
    trial.close(out)


def at_once(scratch: Scratch, project: Path, row: Row) -> None:
    """``SESSIONS`` sessions started together, saving to ``base`` behind a barrier (the project's conftest): each
    says it saved, and the baseline holds every run, each once."""
    trial = Trial(row, project, scratch.keep)
    before, runs_before = baseline_state(project), run_files(project)
    barrier = Path(tempfile.mkdtemp(prefix="barrier-", dir=scratch.root))
    argv = pytest_argv("--gpuperf-save=base")
    procs = [start(scratch, project, argv, barrier=f"{barrier}={SESSIONS}") for _ in range(SESSIONS)]
    outs = [finish(p) for p in procs]
    went_on = [load(path) for path in barrier.iterdir()]
    shutil.rmtree(barrier)
    met = len(went_on) == SESSIONS and all(isinstance(t, float) for t in went_on)
    trial.check(met, "exit", f"{len(went_on)} of {SESSIONS} sessions came to the barrier")
    if met:
        trial.outcome(f"went on within {math.ceil((max(went_on) - min(went_on)) * 100) * 10} ms")
    new_runs = [load(p) for p in sorted(run_files(project) - runs_before)]
    for proc, out in zip(procs, outs, strict=True):
        trial.check(proc.returncode == 0, "exit", f"exit {proc.returncode}")
        trial.check("now holds" in out, "exit", "a session did not say it saved")
    outcome = check_baseline(trial, project, before, new_runs)
    trial.outcome(f"baseline {outcome}")
    held = load(project / ".gpuperf" / "baselines" / "base.json")
    held_runs = {json.dumps(r, sort_keys=True) for r in held.get("runs", [])} if isinstance(held, dict) else set()
    lost = SESSIONS - sum(json.dumps(r, sort_keys=True) in held_runs for r in new_runs)
    trial.check(lost == 0 and len(new_runs) == SESSIONS, "lost", f"{lost} of {SESSIONS} runs missing from the baseline")
    check_common(trial, project)
    trial.close("\n".join(outs))


# ---------------------------------------------------------------- the CLI commands' faults


def kill_cli_write(
    scratch: Scratch, project: Path, row: Row, argv: Sequence[str], target: str, signum: int, again: Sequence[str]
) -> None:
    """A CLI command (``report -o``, ``ab --json``) sent ``signum`` inside the write of ``target``, which holds the
    previous command's output: it is byte-identical after; SIGTERM exits 130 without a traceback; the litter of a
    SIGKILL goes at the next run of ``again``."""
    trial = Trial(row, project, scratch.keep)
    before = (project / target).read_bytes()
    proc = start(scratch, project, argv, slow=f"/.{target}={SLOW_SECONDS}")
    landed = wait_for(project, "flag", f"/.{target}", proc)
    trial.check(landed, "exit", "the signal did not land inside the write")
    signal_group(proc, signum)
    out = finish(proc)
    same = (project / target).read_bytes() == before
    trial.check(same, "corrupt", f"{target} changed under a kill inside its write")
    trial.outcome("output identical" if same else "output changed")
    if signum != signal.SIGKILL:
        check_interrupted_exit(trial, proc.returncode, out, 130)
        check_common(trial, project)
    else:
        code, after = run(scratch, project, again)
        trial.check(code == 0, "exit", f"the next run exited {code}")
        out += "\n--- next run\n" + after
        check_common(trial, project)
    trial.close(out)


def report_project(scratch: Scratch) -> Path:
    project = session_project(scratch, "report")
    code, out = run(scratch, project, cli_argv("report", "base", "-o", "page.html"))
    if code != 0:
        raise SystemExit(f"report failed (exit {code}):\n{out}")
    return project


def ab_project(scratch: Scratch) -> tuple[Path, list[str]]:
    project = scratch.root / "ab"
    (project / "perf").mkdir(parents=True)
    (project / "perf" / "__init__.py").write_text("")
    (project / "perf" / "workloads.py").write_text(WORKLOADS)
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "base"], ["tag", "base"]):
        subprocess.run(
            ["git", "-c", "user.name=f", "-c", "user.email=f@f", *args], cwd=project, check=True, capture_output=True
        )
    (project / ".gitignore").write_text("scratch/\nflag\nmeasuring\nab.json\n.*.tmp\n.gpuperf/\n")
    argv = cli_argv("ab", "--base", "base", "--workloads", "perf/workloads.py", "--device", "cpu", "--max-time", "1")
    argv += ["-q", "--json", "ab.json"]
    code, out = run(scratch, project, argv)
    if code != 0:
        raise SystemExit(f"ab failed (exit {code}):\n{out}")
    return project, argv


def prune_project(scratch: Scratch, name: str, source: Path) -> Path:
    """A results directory of 16 run files (each with a traces folder) and the baseline of ``source``."""
    project = scratch.root / name
    (project / ".gpuperf" / "runs").mkdir(parents=True)
    shutil.copytree(source / ".gpuperf" / "baselines", project / ".gpuperf" / "baselines")
    runs = project / ".gpuperf" / "runs"
    model = load(sorted((source / ".gpuperf" / "runs").glob("*.json"))[0])
    for i in range(16):
        stem = f"20261122T0230{i:02d}.123456Z-1a2b3c4d"
        (runs / f"{stem}.json").write_text(json.dumps(model))
        traces = project / ".gpuperf" / "traces" / stem
        traces.mkdir(parents=True)
        for t in range(3):
            # named as our trace writer names a run's traces (``results.trace_file``): prune removes no other name
            (traces / f"test_{t}-{t:08x}.head.json").write_text('{"traceEvents": []}')  # one that opens
    return project


def prune_fault(scratch: Scratch, row: Row, signum: int, rng: random.Random, n: int, source: Path) -> None:
    """``runs prune --keep 4`` killed after a random number of its deletions (each slowed)."""
    project = prune_project(scratch, f"prune-{n}", source)
    trial = Trial(row, project, scratch.keep)
    before = baseline_state(project)
    proc = start(scratch, project, cli_argv("runs", "prune", "--keep", "4"), slow_unlink="=0.05")
    # 12 run files to delete, each with 3 trace files (unlinked by their bare names, through rmtree's dir_fd)
    landed = wait_for(project, "flag", "unlink", proc, count=rng.randint(1, 48))
    trial.check(landed, "exit", "the prune ended before the kill")
    signal_group(proc, signum)
    out = finish(proc)
    trial.outcome(f"{len(run_files(project))} run files left")
    trial.check(check_baseline(trial, project, before, []) == "identical", "baseline", "prune touched a baseline")
    if signum != signal.SIGKILL:
        check_interrupted_exit(trial, proc.returncode, out, 130)
    check_common(trial, project)  # no temporary file is involved: nothing may be left for a next prune
    code, after = run(scratch, project, cli_argv("runs", "prune", "--keep", "4"))
    trial.check(code == 0 and len(run_files(project)) == 4, "exit", f"the next prune: exit {code}")
    check_common(trial, project)
    trial.close(out + "\n--- next prune\n" + after)


# ---------------------------------------------------------------- history record

HISTORY_TEST = """
def test_h(gpuperf):
    gpuperf.measure(lambda: sum(range(200)))
"""


def history_project(scratch: Scratch, name: str) -> tuple[Path, list[str]]:
    project = scratch.root / name
    (project / "perf_tests").mkdir(parents=True)
    (project / "perf_tests" / "test_h.py").write_text(HISTORY_TEST)
    (project / ".gitignore").write_text("scratch/\nflag\nmeasuring\n.asv/\n")
    git = ["git", "-c", "user.name=f", "-c", "user.email=f@f"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=project, check=True)
    for i in range(3):
        (project / "perf_tests" / "n.txt").write_text(str(i))
        subprocess.run([*git, "add", "."], cwd=project, check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"c{i}"], cwd=project, check=True)
    argv = cli_argv(
        "history", "record", "--last", "3", "--tests", "perf_tests", "--no-publish", "-q", "--machine", "m",
        *(f"--pytest-arg={a}" for a in FAST),
    )  # fmt: skip
    return project, argv


def history_fault(scratch: Scratch, row: Row, signum: int, n: int) -> None:
    """``history record`` signalled (its whole process group) inside a write of an asv result: every asv file
    loads, the lock is released, and the next record completes the history."""
    project, argv = history_project(scratch, f"history-{n}")
    trial = Trial(row, project, scratch.keep)
    proc = start(scratch, project, argv, slow=f"/results/m/={SLOW_SECONDS}")
    landed = wait_for(project, "flag", "/results/m/", proc, count=2)  # the second commit's result
    trial.check(landed, "exit", "the record ended before the kill")
    signal_group(proc, signum)
    out = finish(proc)
    if signum != signal.SIGKILL:
        check_interrupted_exit(trial, proc.returncode, out, 130)
    trial.check(not corrupt_files(project), "corrupt", ", ".join(corrupt_files(project)))
    trial.check(lock_free(project / ".asv" / "pytest" / "history.lock"), "litter", "history.lock is still held")
    code, after = run(scratch, project, argv)
    recorded = len(list((project / ".asv" / "pytest" / "results" / "m").glob("*-*.json")))
    trial.outcome(f"{recorded} of 3 commits recorded after the next record")
    trial.check(code == 0 and recorded == 3, "lost", f"the next record: exit {code}, {recorded} of 3 recorded")
    check_common(trial, project)
    trial.close(out + "\n--- next record\n" + after)


def lock_free(path: Path) -> bool:
    if not path.exists():
        return True
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    return True


# ---------------------------------------------------------------- a full disk


@contextlib.contextmanager
def tmpfs(where: Path, size: str, allowed: bool) -> Iterator[bool]:
    """A tmpfs of ``size`` mounted on the folder ``where`` for the ``with`` block, the files it held copied onto it
    (they show again once it is unmounted); False where it cannot be (``allowed`` False, not root, mount refused)."""
    files = {p.relative_to(where): p.read_bytes() for p in where.rglob("*") if p.is_file()}
    argv = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
    mounted = allowed and os.geteuid() == 0 and subprocess.run(argv, capture_output=True, check=False).returncode == 0
    try:
        if mounted:
            for name, data in files.items():
                (where / name).parent.mkdir(parents=True, exist_ok=True)
                (where / name).write_bytes(data)
        yield mounted
    finally:
        if mounted and subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(where)], check=False)


@contextlib.contextmanager
def full_disk(scratch: Scratch, mount: bool) -> Iterator[tuple[Path, dict[str, str], str]]:
    """A directory on a full file system (an 8 MB tmpfs, filled, when this runs as root and may mount), else one
    whose every fsync fails with ENOSPC; yields it, the faults for ``start``, and which it is."""
    where = scratch.root / "disk"
    where.mkdir()
    with tmpfs(where, "8m", mount) as mounted:
        kind = "a full 8 MB tmpfs" if mounted else "ENOSPC from fsync"
        yield where, ({} if mounted else {"enospc": str(where)}), kind


def fill(where: Path) -> None:
    with contextlib.suppress(OSError), open(where / "filler", "wb", buffering=0) as f:
        while True:
            f.write(b"\0" * 4096)


#: Lines saying that traces were written, which a full disk must not be followed by.
ANNOUNCED = re.compile(r"^gpuperf: (wrote|kept) the traces of [1-9]", re.MULTILINE)


def trace_project(scratch: Scratch) -> Path:
    """The session project, its baseline's traces kept beside it (saved with the work profile on)."""
    project = session_project(scratch, "traces", "--gpuperf-memory=on")
    if not trace_files(project):
        raise SystemExit("the traced setup sessions kept no trace")
    return project


def trace_disk_fault(
    scratch: Scratch, project: Path, row: Row, mount: bool, ab: Callable[[], tuple[Path, list[str]]]
) -> None:
    """The traces' folders on a full disk (full tmpfs mounts on ``traces/`` and ``baselines/base.traces/``, the old
    traces copied onto them): a session saving to ``base`` with the work profile on (its gzipped traces beside the
    baseline), then one with ``--gpuperf-trace=all`` (plain JSON in ``traces/<run id>/``; a session's traces are
    exported by torch into its spool in ``traces/`` as its records are made), then ``ab --trace all`` into this
    results directory (both sides' plain JSON, exported by torch straight into ``traces/ab-<time>/``). Each names
    the full disk, announces no trace, publishes none (every trace opens, the old ones byte-identical) and leaves
    nothing on the full disk; the baseline is extended by the saving session's run alone."""
    traces, kept = project / ".gpuperf" / "traces", project / ".gpuperf" / "baselines" / "base.traces"
    traces.mkdir(exist_ok=True)
    ab_root, ab_argv = ab()
    with tmpfs(traces, "1m", mount) as one, tmpfs(kept, "1m", mount) as other:
        if not (one and other):
            row.skipped = "needs root and mount -t tmpfs (torch writes a trace from C++, out of a stand-in's reach)"
            return
        trial = Trial(row, project, scratch.keep)
        fill(traces)
        fill(kept)
        old = {path: path.read_bytes() for path in trace_files(project)}
        outs = []
        for args in (("--gpuperf-save=base",), ("--gpuperf-trace=all",), ("ab",)):
            before, runs_before = baseline_state(project), run_files(project)
            if args == ("ab",):
                argv = [*ab_argv, "--trace", "all", "--results-dir", str(project / ".gpuperf")]
                code, out = run(scratch, ab_root, argv)
            else:
                code, out = run(scratch, project, pytest_argv("--gpuperf-memory=on", *args))
            outs.append(f"--- {' '.join(args)}: exit {code}\n{out}")
            new_runs = [load(p) for p in sorted(run_files(project) - runs_before)]
            outcome = check_baseline(trial, project, before, new_runs if "--gpuperf-save=base" in args else [])
            trial.check(outcome == ("extended" if "--gpuperf-save=base" in args else "identical"), "baseline", outcome)
            trial.check("Traceback" not in out, "exit", "a traceback was printed")
            # torch's writer does not report ENOSPC: ours names the full disk from what the writer left
            full = "No space left on device" in out or "as on a full disk" in out
            trial.check(full, "exit", f"{args[0]}: no line names the full disk")
            trial.check(not ANNOUNCED.search(out), "exit", f"{args[0]}: traces announced on a full disk")
            changed = [str(p.relative_to(project)) for p, data in old.items() if p.read_bytes() != data]
            trial.check(not changed, "corrupt", f"old traces changed: {', '.join(changed)}")
            check_common(trial, project)  # every trace opens; nothing left on the full disk
        trial.outcome("checked on 2 full tmpfs mounts")
        for folder in (traces, kept):
            (folder / "filler").unlink()
        trial.close("\n".join(outs))


def disk_faults(scratch: Scratch, rows: dict[str, Row], ab: tuple[Path, list[str]] | None, mount: bool) -> None:
    """A session saving to a baseline that holds runs, ``--gpuperf-json``, ``report -o`` and ``ab --json``, each on
    a full disk: an error line naming it, no traceback, a non-zero exit, the old files byte-identical, no litter."""
    with full_disk(scratch, mount) as (where, faults, kind):
        project = where / "p"
        project.mkdir()
        (project / "test_steps.py").write_text(textwrap.dedent(TESTS))
        for _ in range(2):
            run(scratch, project, pytest_argv("--gpuperf-save=base", "--gpuperf-json=out.json"))
        run(scratch, project, cli_argv("report", "base", "-o", "page.html"))
        cases = [
            ("session save", project, pytest_argv("--gpuperf-save=base", "--gpuperf-json=out.json"), "out.json"),
            ("report -o", project, cli_argv("report", "base", "-o", "page.html"), "page.html"),
        ]
        if ab is not None:  # the repository and its worktrees elsewhere, --json on the full disk
            argv = [*ab[1][:-1], str(project / "ab.json"), "--trace", "off"]
            run(scratch, ab[0], argv)
            cases.append(("ab --json", ab[0], argv, "ab.json"))
        if "enospc" not in faults:
            fill(where)
        for name, cwd, argv, output in cases:
            row = rows.setdefault(name, Row(f"full disk ({kind}): {name}"))
            trial = Trial(row, project, scratch.keep)
            before = baseline_state(project)
            old = (project / output).read_bytes()
            code, out = run(scratch, cwd, argv, **faults)
            trial.check(code not in (0, 1), "exit", f"exit {code} on a full disk")
            trial.check("Traceback" not in out, "exit", "a traceback was printed")
            trial.check("No space left on device" in out, "exit", "no line names the full disk")
            trial.outcome(f"exit {code}")
            check_baseline(trial, project, before, [])
            trial.check((project / output).read_bytes() == old, "corrupt", f"{output} changed")
            check_common(trial, project)
            check_common(trial, cwd)
            trial.close(out)
        (where / "filler").unlink(missing_ok=True)


# ---------------------------------------------------------------- the plan

#: The faults that catch the planted bugs (``BUGS``), by name.
BASELINE_PUBLISH = "SIGKILL just after the baseline's publish"
TRACE_PUBLISH = "SIGKILL just after a trace's publish"
AT_ONCE = f"{SESSIONS} sessions saving at once (a barrier before the save)"
TRACE_DISK = "full disk (full tmpfs mounts on the traces' folders): traces"

Plan = list[tuple[str, Callable[[Row], None], int]]


class Faults:
    """Every fault: its name, its trial and how many trials a full run makes; the projects made when first used."""

    def __init__(self, scratch: Scratch, rng: random.Random, mount: bool) -> None:
        self.scratch, self.rng, self.mount = scratch, rng, mount
        self.span = 0.0  # one whole session, to aim the random kills inside it
        self.counter = iter(range(10**6))
        self._session: Path | None = None
        self._traces: Path | None = None
        self._report: Path | None = None
        self.ab: tuple[Path, list[str]] | None = None

    def session(self) -> Path:
        self._session = self._session or session_project(self.scratch, "session")
        return self._session

    def timed_session(self) -> float:
        """How long one whole session of the session project takes (timed once)."""
        if not self.span:
            t0 = time.perf_counter()
            run(self.scratch, self.session(), pytest_argv("--gpuperf-save=base", "--gpuperf-json=out.json"))
            self.span = time.perf_counter() - t0
        return self.span

    def ab_project(self) -> tuple[Path, list[str]]:
        self.ab = self.ab or ab_project(self.scratch)
        return self.ab

    def plan(self) -> Plan:
        scratch, rng = self.scratch, self.rng
        kill, term, intr = signal.SIGKILL, signal.SIGTERM, signal.SIGINT

        def sess(signals: Sequence[int], where: str) -> Callable[[Row], None]:
            def one(row: Row) -> None:
                span = self.timed_session() if where == "random" else 0.0
                session_fault(scratch, self.session(), row, signals, where, rng, span)

            return one

        def report(signum: int) -> Callable[[Row], None]:
            def one(row: Row) -> None:
                self._report = self._report or report_project(scratch)
                argv = cli_argv("report", "base", "-o", "page.html")
                kill_cli_write(scratch, self._report, row, argv, "page.html", signum, argv)

            return one

        def ab(signum: int) -> Callable[[Row], None]:
            def one(row: Row) -> None:
                project, argv = self.ab_project()
                kill_cli_write(scratch, project, row, argv, "ab.json", signum, argv)

            return one

        def prune(signum: int) -> Callable[[Row], None]:
            return lambda row: prune_fault(scratch, row, signum, rng, next(self.counter), self.session())

        def history(signum: int) -> Callable[[Row], None]:
            return lambda row: history_fault(scratch, row, signum, next(self.counter))

        def trace_disk(row: Row) -> None:
            self._traces = self._traces or trace_project(scratch)
            trace_disk_fault(scratch, self._traces, row, self.mount, self.ab_project)

        return [
            ("SIGKILL at a random moment", sess([kill], "random"), 10),
            ("SIGKILL inside the baseline write", sess([kill], "write"), 5),
            ("SIGKILL inside the --gpuperf-json write", sess([kill], "json"), 3),
            (BASELINE_PUBLISH, sess([kill], "publish"), 3),
            ("SIGKILL just after the run file's publish", sess([kill], "run file"), 2),
            (TRACE_PUBLISH, sess([kill], "trace"), 2),
            ("SIGTERM inside the baseline write", sess([term], "write"), 4),
            ("SIGINT inside the baseline write", sess([intr], "write"), 4),
            ("SIGTERM just after the baseline's publish", sess([term], "publish"), 2),
            ("two SIGTERMs inside the baseline write", sess([term, term], "write"), 2),
            ("SIGTERM while measuring", sess([term], "measuring"), 3),
            ("SIGINT while measuring", sess([intr], "measuring"), 3),
            (AT_ONCE, lambda row: at_once(scratch, self.session(), row), 2),
            ("report -o: SIGKILL inside the write", report(kill), 2),
            ("report -o: SIGTERM inside the write", report(term), 2),
            ("ab --json: SIGKILL inside the write", ab(kill), 2),
            ("ab --json: SIGTERM inside the write", ab(term), 2),
            ("runs prune: SIGKILL", prune(kill), 3),
            ("runs prune: SIGTERM", prune(term), 2),
            ("history record: SIGKILL", history(kill), 2),
            ("history record: SIGTERM", history(term), 1),
            (TRACE_DISK, trace_disk, 1),
        ]


# ---------------------------------------------------------------- planted bugs


@dataclass(frozen=True)
class Bug:
    """A real bug planted in a copy of the package: ``code``, appended to ``module``, redefines its ``replaces``
    (every module that imports the name, at its import, gets the new one); ``fault`` is the one that must catch it."""

    name: str
    module: str
    replaces: str
    code: str
    fault: str


BUGS = (
    Bug(
        "a baseline written in place, in two halves",
        "results/_files.py",
        "save_baseline_file",
        """
_planted = save_baseline_file


def save_baseline_file(path, name, runs):
    staged = path.with_name(f".planted-{path.name}")  # the text the real function writes, then put in place by hand
    _planted(staged, name, runs)
    text = staged.read_text(encoding="utf-8")
    staged.unlink()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[: len(text) // 2])
        f.flush()
        f.write(text[len(text) // 2 :])
""",
        BASELINE_PUBLISH,
    ),
    Bug(
        "locked() takes no lock",
        "results/_files.py",
        "locked",
        """
@contextlib.contextmanager
def locked(path, *, timeout=LOCK_TIMEOUT, holder=""):
    yield
""",
        AT_ONCE,
    ),
    Bug(
        "a trace published unchecked (whatever torch left in the file, empty on a full disk)",
        "results/_files.py",
        "atomic_export",
        """
def atomic_export(path, export, *, whole=None, compress=False, compresslevel=9):
    path = Path(path)
    made = []
    try:
        fd, tmp = _temporary(path)
        made.append(tmp)
        os.close(fd)
        export(tmp)
        if compress:
            fd, packed = _temporary(path)
            made.append(packed)
            with open(tmp, "rb") as raw, os.fdopen(fd, "wb") as out, gzip.GzipFile(
                fileobj=out, mode="wb", compresslevel=compresslevel
            ) as gz:
                shutil.copyfileobj(raw, gz)
            tmp = packed
        os.replace(tmp, path)
    except OSError as exc:
        raise ResultsError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        for name in made:
            Path(name).unlink(missing_ok=True)
""",
        TRACE_DISK,
    ),
    Bug(
        "a trace written in place (exported beside it, then copied into it)",
        "results/_files.py",
        "atomic_export",
        """
def atomic_export(path, export, *, whole=None, compress=False, compresslevel=9):
    path = Path(path)
    fd, tmp = _temporary(path)
    os.close(fd)
    try:
        export(tmp)
        problem = whole(Path(tmp)) if whole is not None else ""
        if problem:  # this bug is the write in place only: what the writer left is still checked
            raise ResultsError(f"cannot write {path}: its writer returned, but {problem}, as on a full disk")
        with open(tmp, "rb") as raw, (gzip.open(path, "wb", compresslevel) if compress else open(path, "wb")) as out:
            shutil.copyfileobj(raw, out)
    except OSError as exc:
        raise ResultsError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
""",
        TRACE_PUBLISH,
    ),
)


def plant(bug: Bug, root: Path) -> Path:
    """A copy of the package under ``root`` (the folder to put on PYTHONPATH) with ``bug`` planted."""
    spec = importlib.util.find_spec("pytest_gpuperf")  # not imported: only where it is
    if spec is None or spec.origin is None:
        raise SystemExit("pytest_gpuperf is not installed: nothing to plant a bug in")
    package = root / "pytest_gpuperf"
    shutil.copytree(Path(spec.origin).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    module = package / bug.module
    source = module.read_text(encoding="utf-8")
    if not re.search(rf"^(def|class) {bug.replaces}\b", source, re.MULTILINE):
        raise SystemExit(f"cannot plant {bug.name!r}: {bug.module} defines no {bug.replaces} any more")
    module.write_text(f"{source}\n\n# PLANTED by bench/fault_injection.py --planted: {bug.name}\n{bug.code}")
    return root


def imported_from(scratch: Scratch, project: Path) -> str:
    """Where the processes a trial starts import pytest_gpuperf from."""
    argv = [sys.executable, "-c", "import pytest_gpuperf.results._files as f; print(f.__file__)"]
    done = subprocess.run(argv, cwd=project, env=scratch.env(project), capture_output=True, text=True, check=False)
    return done.stdout.strip()


def run_planted(args: argparse.Namespace) -> int:
    """Each of ``BUGS`` planted in its own copy of the package, its fault run against that copy (up to
    ``args.trials`` trials, until one finds a problem): exit 0 only when every bug is caught."""
    started = time.perf_counter()
    table, caught = [], 0
    for bug in BUGS:
        with tempfile.TemporaryDirectory(prefix="gpuperf-planted-") as tmp:
            root = Path(tmp)
            scratch = Scratch(root / "scratch", package=plant(bug, root / "package"))
            (root / "probe").mkdir()
            where = imported_from(scratch, root / "probe")
            if not where.startswith(str(root / "package")):
                raise SystemExit(f"the trials would not import the planted copy but {where or 'nothing'}")
            faults = Faults(scratch, random.Random(args.seed), not args.no_mount)
            trial = next(trial for name, trial, _ in faults.plan() if name == bug.fault)
            row = Row(bug.fault)
            while row.trials < args.trials and not row.failed() and not row.skipped:
                trial(row)
            found = ", ".join(f"{c} {getattr(row, c)}" for c in ("lost", "corrupt", "baseline", "litter", "exit"))
            verdict = f"not tried: {row.skipped}" if row.skipped else "yes" if row.failed() else "NO"
            caught += verdict == "yes"
            table.append([bug.name, bug.fault, row.trials, found, verdict])
            print(f"  {bug.name}: {verdict}", file=sys.stderr, flush=True)
    headers = ["planted bug", "caught by", "trials", "problems found", "caught"]
    print(tabulate(table, headers=headers, tablefmt="github"))
    wall = time.perf_counter() - started
    print(f"\n{caught} of {len(BUGS)} planted bugs caught; seed {args.seed}; wall time {wall:.0f} s")
    return 0 if caught == len(BUGS) else 1


# ---------------------------------------------------------------- main


def wanted(name: str, args: argparse.Namespace) -> bool:
    return not any(s in name for s in args.skip) and (not args.only or any(s in name for s in args.only))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one trial of each fault (a smoke run)")
    parser.add_argument("--planted", action="store_true", help="plant each of BUGS in a copy of the package: exit 0 "
                        "only if every one is caught")  # fmt: skip
    parser.add_argument("--trials", type=int, default=3, help="--planted: the most trials of a bug's fault (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", action="append", default=[], help="skip the faults whose name contains this")
    parser.add_argument("--only", action="append", default=[], help="only the faults whose name contains this")
    parser.add_argument("--no-mount", action="store_true", help="a full disk by ENOSPC from fsync, even as root")
    args = parser.parse_args(argv)
    if args.planted:
        return run_planted(args)
    started = time.perf_counter()
    times = (lambda full: 1) if args.quick else (lambda full: full)
    with tempfile.TemporaryDirectory(prefix="gpuperf-faults-") as tmp:
        scratch = Scratch(Path(tmp))
        faults = Faults(scratch, random.Random(args.seed), not args.no_mount)
        rows: list[Row] = []
        for name, trial, count in faults.plan():
            if not wanted(name, args):
                continue
            row = Row(name)
            rows.append(row)
            for _ in range(times(count)):
                if not row.skipped:
                    trial(row)
            said = f"skipped: {row.skipped}" if row.skipped else f"{row.trials} trials, {row.failed()} problems"
            print(f"  {name}: {said}", file=sys.stderr, flush=True)
        disk_rows: dict[str, Row] = {}
        if wanted("full disk", args):
            disk_faults(scratch, disk_rows, faults.ab_project(), not args.no_mount)
        rows += disk_rows.values()
        table = [
            [
                r.fault,
                r.trials,
                f"skipped: {r.skipped}" if r.skipped else ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes.items())),
                r.lost,
                r.corrupt,
                r.baseline,
                r.litter,
                r.exit,
            ]
            for r in rows
        ]
        headers = ["fault", "trials", "outcomes", "lost runs", "corrupt files", "baseline wrong", "litter", "exit"]
        print(tabulate(table, headers=headers, tablefmt="github"))
        totals = [sum(getattr(r, c) for r in rows) for c in ("lost", "corrupt", "baseline", "litter", "exit")]
        print(
            f"\ntotal: {sum(r.trials for r in rows)} trials; lost runs {totals[0]}, corrupt files {totals[1]}, "
            f"baselines neither byte-identical nor correctly extended {totals[2]}, litter {totals[3]}, "
            f"wrong exit or message {totals[4]}"
        )
        failing = [r.fault for r in rows if r.failed()]
        if failing:
            print("faults with problems (this package fails them):\n  " + "\n  ".join(failing))
        kept = [k for r in rows for k in r.kept]
        if kept:
            print("failed trials' files kept in:\n  " + "\n  ".join(kept))
        elif scratch.keep is not None:
            shutil.rmtree(scratch.keep, ignore_errors=True)
        span = f"session length {faults.span:.1f} s; " if faults.span else ""
        print(f"seed {args.seed}; {span}wall time {time.perf_counter() - started:.0f} s")
        return 1 if any(totals) else 0


if __name__ == "__main__":
    sys.exit(main())
