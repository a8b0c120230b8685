"""Trace files: names that stay in their folder, atomic writes that leave nothing behind, a baseline's own."""

from __future__ import annotations

import errno
import gc
import gzip
import json
import os
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_gpuperf.measuring import Measurement, WorkProfile
from pytest_gpuperf.results import (
    ResultsDir,
    ResultsError,
    TraceSpool,
    baseline_trace,
    baseline_traces_dir,
    released,
    save_baseline_traces,
    trace_file,
    write_trace,
)
from pytest_gpuperf.results._traces import trace_name
from tests.full_disk import full_tmpfs
from tests.results.test_files import dead_pid
from tests.synthetic import make_measurement

TRACE = {"traceEvents": [{"name": "aten::mm", "ph": "X", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]}


def exporter(path: str) -> None:
    Path(path).write_text(json.dumps(TRACE))


def atomic_export(path: Path, export: Callable[[str], object], *, compress: bool = False) -> None:
    """``results._files.atomic_export`` as the traces use it: through ``write_trace``."""
    write_trace(WorkProfile("full", 1, write_trace=export), path, compress=compress)


@pytest.mark.parametrize("key", ["tests/a.py::test_x[a/../b c]", "../../etc/passwd", "..", ".hidden", "", "x" * 500])
def test_a_trace_name_is_one_plain_file_name(tmp_path: Path, key: str) -> None:
    name = trace_name(key)
    assert "/" not in name and ".." not in name and not name.startswith((".", "-"))
    assert (tmp_path / name).resolve().parent == tmp_path.resolve() and len(name) <= 90


def test_keys_that_read_alike_get_different_names() -> None:
    assert trace_name("test_x[a b]") != trace_name("test_x[a/b]")


def test_export_is_atomic_and_gzips(tmp_path: Path) -> None:
    path = tmp_path / "t" / "x.json.gz"
    atomic_export(path, exporter, compress=True)
    with gzip.open(path, "rt") as f:
        assert json.load(f) == TRACE
    assert [p.name for p in path.parent.iterdir()] == ["x.json.gz"]


def test_a_failed_export_leaves_nothing(tmp_path: Path) -> None:
    def broken(path: str) -> None:
        Path(path).write_text('{"traceEv')
        raise KeyboardInterrupt  # a kill in the middle of the write

    with pytest.raises(KeyboardInterrupt):
        atomic_export(tmp_path / "x.json", broken, compress=True)
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_folder_is_a_results_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ResultsError, match="cannot write"):
        atomic_export(tmp_path / "file" / "x.json", exporter)


def test_a_profile_read_from_a_file_writes_no_trace(tmp_path: Path) -> None:
    assert not write_trace(WorkProfile("full", 1), tmp_path / "x.json")
    assert not write_trace(None, tmp_path / "x.json")
    assert write_trace(WorkProfile("full", 1, write_trace=exporter), tmp_path / "x.json")
    assert json.loads((tmp_path / "x.json").read_text()) == TRACE


def test_a_baseline_keeps_one_trace_per_test_and_a_fresh_one_drops_the_old(tmp_path: Path) -> None:
    baseline = tmp_path / "baselines" / "main.json"
    profile = WorkProfile("full", 1, write_trace=exporter)
    assert save_baseline_traces(baseline, [("a", profile), ("b", profile), ("c", None)]) == 2
    assert baseline_traces_dir(baseline) == tmp_path / "baselines" / "main.traces"
    found = baseline_trace(baseline, "a")
    assert found is not None and found.name.endswith(".json.gz") and baseline_trace(baseline, "c") is None
    assert save_baseline_traces(baseline, [("a", profile)], fresh=True) == 1
    assert baseline_trace(baseline, "a") is not None and baseline_trace(baseline, "b") is None


# ---------------------------------------------------------------- issue 36: no write announced that did not happen


@pytest.mark.parametrize("left", ["", '{"traceEvents": [{"name": "aten::mm", "ph": "X"'], ids=["empty", "cut short"])
def test_an_export_its_writer_cut_short_is_not_published(tmp_path: Path, left: str) -> None:
    """torch's export_chrome_trace does not report a full disk: it returns, leaving its file empty or cut short (and
    its own ``<path>.tmp`` beside it). That file is never published, and nothing is left."""

    def silent_failure(path: str) -> None:
        Path(path).write_text(left)
        Path(f"{path}.tmp").write_text(left)  # kineto writes <path>.tmp, then renames it; on ENOSPC it stays

    for compress in (False, True):
        with pytest.raises(ResultsError, match=r"cannot write .*x\.json: .*(empty|not whole JSON).*free some space"):
            atomic_export(tmp_path / "x.json", silent_failure, compress=compress)
        assert list(tmp_path.iterdir()) == []


def test_an_export_is_fsynced_before_it_is_published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk may show only at fsync: then nothing is published either."""

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    for compress in (False, True):
        with pytest.raises(ResultsError, match=r"cannot write .*x\.json: No space left on device; free some space"):
            atomic_export(tmp_path / "x.json", exporter, compress=compress)
        assert list(tmp_path.iterdir()) == []


def test_a_real_trace_on_a_full_disk_is_not_published(tmp_path: Path) -> None:
    import torch

    with full_tmpfs(tmp_path / "disk") as disk:
        for compress in (False, True):
            with torch.profiler.profile() as prof:  # a profile's trace is saved once
                torch.ones(8, 8) @ torch.ones(8, 8)
            with pytest.raises(ResultsError, match=r"cannot write .*x\.json: "):
                atomic_export(disk / "x.json", prof.export_chrome_trace, compress=compress)
            assert [p.name for p in disk.iterdir()] == ["filler"]


# ---------------------------------------------------------------- issue 36: no file we do not own is removed


def test_a_fresh_baseline_removes_only_its_own_traces(tmp_path: Path) -> None:
    baseline = tmp_path / "baselines" / "main.json"
    profile = WorkProfile("full", 1, write_trace=exporter)
    save_baseline_traces(baseline, [("a", profile)])
    folder = baseline_traces_dir(baseline)
    for name in ("foreign-data.json.gz", "notes.txt", "x-0123456.json.gz"):  # not names our writer gives
        (folder / name).write_bytes(b"someone else's")
    assert save_baseline_traces(baseline, [("b", profile)], fresh=True) == 1
    assert baseline_trace(baseline, "a") is None and baseline_trace(baseline, "b") is not None
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["foreign-data.json.gz", "notes.txt", "x-0123456.json.gz", f"{trace_name('b')}.json.gz"]
    )
    assert all((folder / n).read_bytes() == b"someone else's" for n in ("foreign-data.json.gz", "notes.txt"))


def test_a_baseline_traces_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    """Issue 36: ``--gpuperf-save=NAME --gpuperf-replace`` deleted every ``*.json.gz`` of another program's folder
    that ``baselines/NAME.traces`` linked to. Nothing is deleted, or written, through the link."""
    foreign = tmp_path / "elsewhere"
    foreign.mkdir()
    data = b"\x1f\x8b another program's"
    (foreign / "foreign-data.json.gz").write_bytes(data)
    (foreign / f"{trace_name('a')}.json.gz").write_bytes(data)  # even a name of ours
    baseline = tmp_path / "baselines" / "main.json"
    baseline.parent.mkdir()
    baseline_traces_dir(baseline).symlink_to(foreign)
    profile = WorkProfile("full", 1, write_trace=exporter)
    for fresh in (True, False):
        with pytest.raises(ResultsError, match=r"main\.traces is a symbolic link.*rm .*main\.traces"):
            save_baseline_traces(baseline, [("a", profile)], fresh=fresh)
    assert sorted(p.name for p in foreign.iterdir()) == sorted(["foreign-data.json.gz", f"{trace_name('a')}.json.gz"])
    assert all(p.read_bytes() == data for p in foreign.iterdir())


# ---------------------------------------------------------------- issue 37: a record holds only its figures


class Profiler:
    """A stand-in for torch's profiler: its trace is saved once ("Trace is already saved" after)."""

    def __init__(self) -> None:
        self.saved = False

    def export_chrome_trace(self, path: str) -> None:
        if self.saved:
            raise RuntimeError("Trace is already saved.")
        self.saved = True
        exporter(path)


def profiled(profiler: Profiler | None = None) -> Measurement:
    writer = (profiler or Profiler()).export_chrome_trace
    return make_measurement("step", [1e-3] * 5, profile=WorkProfile("full", 1, write_trace=writer))


def test_a_kept_measurement_releases_its_profiler_and_writes_its_trace_as_often_as_asked(tmp_path: Path) -> None:
    profiler = Profiler()
    alive = weakref.ref(profiler)
    store = ResultsDir(tmp_path / "results")
    spool = TraceSpool(store)
    kept = spool.keep("tests/a.py::test_x", profiled(profiler))
    del profiler
    gc.collect()
    assert alive() is None
    assert write_trace(kept.profile, tmp_path / "a.head.json")
    assert write_trace(kept.profile, tmp_path / "a.json.gz", compress=True)
    assert json.loads((tmp_path / "a.head.json").read_text()) == TRACE
    assert json.loads(gzip.decompress((tmp_path / "a.json.gz").read_bytes())) == TRACE
    assert [p.name for p in (store.traces_dir / spool.name).iterdir()] == [trace_file("tests/a.py::test_x", "baseline")]
    spool.close()
    assert not store.traces_dir.exists()  # made by the spool, and empty once it went


def test_a_released_measurement_keeps_no_writer() -> None:
    profiler = Profiler()
    alive = weakref.ref(profiler)
    measurement = released(profiled(profiler))
    del profiler
    gc.collect()
    assert alive() is None and measurement.profile is not None and measurement.profile.write_trace is None
    assert measurement.profile.calls == 1  # its figures stay
    bare = make_measurement("step", [1e-3] * 5)
    assert released(bare) is bare


def test_a_copy_that_could_not_be_kept_says_why_when_its_trace_is_asked_for(tmp_path: Path) -> None:
    profiler = Profiler()
    profiler.saved = True
    kept = TraceSpool(ResultsDir(tmp_path)).keep("k", profiled(profiler))
    with pytest.raises(ResultsError, match=r"RuntimeError: Trace is already saved"):
        write_trace(kept.profile, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("target", ["x.json", "x.json.gz"])  # unpacked (a run's), or the copy itself (a baseline's)
def test_a_copy_removed_during_the_session_is_a_clear_error(tmp_path: Path, target: str) -> None:
    spool = TraceSpool(ResultsDir(tmp_path))
    kept = spool.keep("k", profiled())
    (tmp_path / "traces" / spool.name / trace_file("k", "baseline")).unlink()
    with pytest.raises(ResultsError, match=r"cannot read .*\.json\.gz, where this session kept the trace"):
        write_trace(kept.profile, tmp_path / target, compress=target.endswith(".gz"))
    assert not (tmp_path / target).exists()


def test_a_baseline_keeps_the_spools_copy_as_it_is(tmp_path: Path) -> None:
    """Saving a baseline's traces publishes each spooled copy itself, not one unpacked, parsed and packed again."""
    store = ResultsDir(tmp_path / "results")
    spool = TraceSpool(store)
    kept = spool.keep("k", profiled())
    copy = store.traces_dir / spool.name / trace_file("k", "baseline")
    baseline = tmp_path / "baselines" / "main.json"
    assert save_baseline_traces(baseline, [("k", kept.profile)]) == 1
    published = baseline_trace(baseline, "k")
    assert published is not None and published.read_bytes() == copy.read_bytes()
    assert json.loads(gzip.decompress(published.read_bytes())) == TRACE
    assert [p.name for p in published.parent.iterdir()] == [published.name]  # no temporary left


def test_a_killed_sessions_spool_is_removed_by_the_next_and_no_other_file(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    ours = f"{trace_file('k', 'baseline')}"
    dead, live, foreign = (
        traces / f".spool.gpuperf-{dead_pid()}-a1b2c3d4.tmp",
        traces / f".spool.gpuperf-{os.getppid()}-a1b2c3d4.tmp",  # a session running now
        traces / f".spool.gpuperf-{dead_pid()}-e5f6a7b8.tmp",  # holds a file we did not write
    )
    for folder in (dead, live, foreign):
        folder.mkdir(parents=True)
        (folder / ours).write_bytes(b"\x1f\x8b")
    (foreign / "notes.txt").write_text("someone else's")
    spool = TraceSpool(ResultsDir(tmp_path))
    spool.keep("k", profiled())
    assert not dead.exists() and (live / ours).exists()
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    spool.close()
    assert sorted(p.name for p in traces.iterdir()) == sorted([live.name, foreign.name])  # traces/ was there before


@pytest.mark.parametrize("target", ["x.json", "x.json.gz"])
def test_a_full_disk_at_the_end_blames_the_trace_written_not_the_copy(tmp_path: Path, target: str) -> None:
    kept = TraceSpool(ResultsDir(tmp_path / "results")).keep("k", profiled())
    with full_tmpfs(tmp_path / "disk") as disk:
        with pytest.raises(ResultsError, match=rf"cannot write .*disk/{target}: No space left on device; free some"):
            write_trace(kept.profile, disk / target, compress=target.endswith(".gz"))
        assert [p.name for p in disk.iterdir()] == ["filler"]
