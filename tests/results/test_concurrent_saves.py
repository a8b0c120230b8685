"""Sessions that save at the same time: every run is kept, no file is replaced, nothing is left behind."""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from pytest_gpuperf.results import (
    ReplaceRefused,
    ResultsDir,
    ResultsError,
    Run,
    StorageError,
    _files,
    _store,
    save_run,
)
from pytest_gpuperf.results._store import GITIGNORE, MAX_RUNS
from tests.synthetic import make_record, make_run, with_fingerprint

_ROOT = Path(__file__).parents[2]


def tagged(tag: str, commit: str = "a" * 40) -> Run:
    """A run that says which session saved it (in its settings)."""
    git = {"commit": commit, "branch": "main", "dirty": False}
    run = make_run(make_record(1e-3), fingerprint=with_fingerprint(git=git))
    return dataclasses.replace(run, settings={"tag": tag})


def tags(store: ResultsDir, name: str) -> list[str]:
    return [str(run.settings["tag"]) for run in store.load(name).runs]


def litter(root: Path) -> list[str]:
    """Temporaries and lock files left behind (the results directory's own ``.gitignore`` is not litter)."""
    return sorted(
        p.name
        for p in root.rglob("*")
        if (p.name.endswith((".tmp", ".lock")) or p.name.startswith(".")) and p.name != ".gitignore"
    )


# ---------------------------------------------------------------- a short session during a long one


def test_a_run_saved_during_a_longer_session_is_kept(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    store.save_baseline("main", tagged("before"))
    assert store.existing("main")  # the long session starts: it reads the baseline to check it ...
    store.save_baseline("main", tagged("short"))  # ... a short session saves meanwhile ...
    outcome = store.save_baseline("main", tagged("long"))  # ... and the long one ends
    assert tags(store, "main") == ["before", "short", "long"]
    assert outcome.runs == 3 and "now holds 3 runs" in outcome.describe("main")
    assert litter(tmp_path) == []


def test_same_code_or_afresh_is_decided_on_the_baseline_as_it_is_at_the_end(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    for i in range(2):
        store.save_baseline("main", tagged(f"old{i}", commit="b" * 40))
    assert len(store.existing("main")) == 2  # the long session (commit a) starts over commit b's runs
    # a short one of commit a, asked to replace, starts afresh
    assert store.save_baseline("main", tagged("short"), replace=True).replaced == 2
    outcome = store.save_baseline("main", tagged("long"))  # the long one joins it: no replacement needed now
    assert (outcome.runs, outcome.replaced) == (2, 0)
    assert tags(store, "main") == ["short", "long"]
    with pytest.raises(ReplaceRefused):  # and commit b, saved meanwhile without asking, is refused at the end
        store.save_baseline("main", tagged("late", commit="b" * 40))
    assert tags(store, "main") == ["short", "long"]


def test_the_newest_runs_are_kept_counting_those_saved_meanwhile(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    for i in range(MAX_RUNS):
        store.save_baseline("main", tagged(str(i)))
    outcome = store.save_baseline("main", tagged("long"))
    assert (outcome.runs, outcome.dropped) == (MAX_RUNS, 1)
    assert tags(store, "main") == [*map(str, range(1, MAX_RUNS)), "long"]


def test_a_baseline_damaged_during_the_session_is_reported_and_left_alone(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    store.save_baseline("main", tagged("before"))
    store.existing("main")
    path = store.baseline_path("main")
    path.write_text("{not json")
    with pytest.raises(StorageError) as info:
        store.save_baseline("main", tagged("long"))
    assert "main.json is not valid JSON" in str(info.value)
    assert "It was left as it is, so this run was not added: move" in str(info.value)
    assert path.read_text() == "{not json"
    assert litter(tmp_path) == []


# ---------------------------------------------------------------- processes saving at once

_SAVER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from pytest_gpuperf.results import ResultsDir
    from tests.results.test_concurrent_saves import tagged
    store, who, go = ResultsDir(Path(sys.argv[2])), sys.argv[3], Path(sys.argv[4])
    (go.parent / f"ready-{who}").touch()
    while not go.exists():  # start together, once every session is ready
        time.sleep(0.001)
    for i in range(int(sys.argv[5])):
        run = tagged(f"{who}-{i}")
        store.save_run(run)
        print(store.save_baseline("main", run).runs)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows: saves there are not locked")
def test_sessions_saving_at_once_keep_every_run_and_every_run_file(tmp_path: Path) -> None:
    sessions, saves = 5, 2  # 10 runs: all fit in MAX_RUNS, so every one must be there
    assert sessions * saves == MAX_RUNS
    root, go = tmp_path / ".gpuperf", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SAVER, str(_ROOT), str(root), f"s{n}", str(go), str(saves)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(sessions)
    ]
    # Every session has imported what it needs before any saves: on a busy machine the first could otherwise finish
    # its saves before the last has started.
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < sessions and time.monotonic() < deadline:
        if any(proc.poll() is not None for proc in procs):
            break  # a session died before it was ready: its error is below
        time.sleep(0.01)
    go.touch()
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * sessions, [err for _, err in outputs]
    store = ResultsDir(root)
    assert sorted(tags(store, "main")) == sorted(f"s{n}-{i}" for n in range(sessions) for i in range(saves))
    # each save reported the count it wrote: one save wrote each count from 1 to 10
    assert sorted(int(line) for out, _ in outputs for line in out.split()) == list(range(1, MAX_RUNS + 1))
    run_files = list(store.runs_dir.glob("*.json"))
    assert sorted(json.loads(p.read_text())["settings"]["tag"] for p in run_files) == sorted(tags(store, "main"))
    assert litter(root) == []
    assert (root / ".gitignore").read_text() == GITIGNORE  # the sessions created the directory at once: one wrote it


# ---------------------------------------------------------------- the lock


@pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows: saves there are not locked")
def test_a_lock_held_too_long_names_the_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "main.json"
    with _files.locked(path), pytest.raises(ResultsError) as info, _files.locked(path, timeout=0.05):
        pass
    assert f"another process has held {path}.lock for over 0.05 s" in str(info.value)
    assert not (tmp_path / "main.json.lock").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows: saves there are not locked")
def test_a_holder_that_died_does_not_block_the_next_save(tmp_path: Path) -> None:
    store = ResultsDir(tmp_path)
    store.save_baseline("main", tagged("before"))
    path = store.baseline_path("main")
    holder = textwrap.dedent(
        f"""
        import os, signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(_ROOT)!r})
        from pytest_gpuperf.results._files import locked
        with locked(Path({str(path)!r})):
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    died = subprocess.run([sys.executable, "-c", holder], capture_output=True, timeout=60)
    assert died.returncode == -signal.SIGKILL
    assert (tmp_path / "baselines" / "main.json.lock").exists()  # left by the dead holder, but not held
    with _files.locked(path, timeout=30):
        pass
    assert store.save_baseline("main", tagged("after")).runs == 2
    assert litter(tmp_path) == []


# ---------------------------------------------------------------- run files never replace each other


def test_run_files_written_in_the_same_microsecond_get_their_own_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen = dt.datetime(2026, 11, 22, 3, 0, tzinfo=dt.timezone.utc)
    clock = types.SimpleNamespace(datetime=types.SimpleNamespace(now=lambda tz: frozen), timezone=dt.timezone)
    monkeypatch.setattr(_store, "dt", clock)
    store = ResultsDir(tmp_path)
    paths = [store.save_run(tagged(str(i))) for i in range(3)]
    assert [p.name for p in paths] == [
        "20261122T030000.000000Z-aaaaaaaa.json",
        "20261122T030000.000000Z-aaaaaaaa-2.json",
        "20261122T030000.000000Z-aaaaaaaa-3.json",
    ]
    assert [json.loads(p.read_text())["settings"]["tag"] for p in paths] == ["0", "1", "2"]
    assert litter(tmp_path) == []


@pytest.mark.parametrize("hard_links", [True, False])
def test_a_new_file_never_replaces_one_that_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hard_links: bool
) -> None:
    if not hard_links:  # FAT and some network mounts: the name is claimed with O_EXCL instead

        def no_link(src: object, dst: object) -> None:
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(os, "link", no_link)
    path = tmp_path / "run.json"
    save_run(path, tagged("first"), new=True)
    with pytest.raises(FileExistsError):
        save_run(path, tagged("second"), new=True)
    assert json.loads(path.read_text())["settings"]["tag"] == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


@pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows")
def test_a_file_system_that_cannot_lock_saves_unlocked_and_leaves_no_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr("pytest_gpuperf.results._files.fcntl.flock", no_locks)
    store = ResultsDir(tmp_path)
    assert store.save_baseline("main", tagged("nfs")).runs == 1
    assert litter(tmp_path) == []
