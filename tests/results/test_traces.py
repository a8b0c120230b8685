"""Trace files: names that stay in their folder, atomic writes that leave nothing behind, a baseline's own."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pytest_gpuperf.measuring import WorkProfile
from pytest_gpuperf.results import (
    ResultsError,
    baseline_trace,
    baseline_traces_dir,
    save_baseline_traces,
    trace_name,
    write_trace,
)
from pytest_gpuperf.results._files import atomic_export

TRACE = {"traceEvents": [{"name": "aten::mm", "ph": "X", "ts": 0, "dur": 1, "pid": 1, "tid": 1}]}


def exporter(path: str) -> None:
    Path(path).write_text(json.dumps(TRACE))


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
