"""bench/fault_injection.py's checks tell a correct outcome from a wrong one, its injection fires where it is aimed,
and its planted bugs reach the package's modules (no session is started: the script itself is run by hand, for
minutes, see bench/evidence/robustness.md; its --planted proof runs in tests/test_bench.py). A check that passed
everything would find nothing."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def bench() -> Any:
    """The script as a module, loaded once (registered first: its dataclasses look their module up)."""
    if "fault_injection" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fault_injection", ROOT / "bench" / "fault_injection.py")
        assert spec is not None and spec.loader is not None
        sys.modules["fault_injection"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["fault_injection"])
    return sys.modules["fault_injection"]


def write(project: Path, runs: list[dict[str, Any]]) -> tuple[bytes, Any]:
    path = project / ".gpuperf" / "baselines" / "base.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": "pytest-gpuperf/baseline", "name": "base", "runs": runs}))
    data = path.read_bytes()
    return data, json.loads(data)


def test_a_baseline_is_right_only_unchanged_or_extended_by_exactly_the_new_runs(tmp_path: Path) -> None:
    fi = bench()
    old = [{"created": str(i)} for i in range(10)]
    new = {"created": "new"}

    def outcome(after: list[dict[str, Any]], runs: list[dict[str, Any]]) -> tuple[str, int]:
        before = write(tmp_path, old)
        write(tmp_path, after)
        row = fi.Row("x")
        result = fi.check_baseline(fi.Trial(row, tmp_path, tmp_path), tmp_path, before, runs)
        return result, row.baseline

    assert outcome(old, []) == ("identical", 0)
    assert outcome([*old[1:], new], [new]) == ("extended", 0)  # the oldest dropped past 10 runs
    assert outcome([*old, new], [new]) == ("wrong", 1)  # 11 runs kept
    assert outcome([*old[1:], {"created": "other"}], [new]) == ("wrong", 1)  # someone else's run
    assert outcome([*old[2:], new], [new]) == ("wrong", 1)  # an old run lost
    assert outcome(old[1:], []) == ("wrong", 1)  # changed with no new run


def test_litter_names_temporaries_locks_stale_worktrees_and_traces_without_their_run(tmp_path: Path) -> None:
    fi = bench()
    runs, traces = tmp_path / ".gpuperf" / "runs", tmp_path / ".gpuperf" / "traces"
    (traces / "kept").mkdir(parents=True)
    (traces / "orphan").mkdir()
    runs.mkdir()
    (runs / "kept.json").write_text("{}")
    assert fi.litter(tmp_path) == ["orphaned traces/orphan"]
    (runs / ".x.json.gpuperf-1-abcdefgh.tmp").write_text("")
    (tmp_path / "scratch" / "gpuperf-ab-1").mkdir(parents=True)
    assert sorted(fi.litter(tmp_path)) == [
        ".gpuperf/runs/.x.json.gpuperf-1-abcdefgh.tmp",
        "orphaned traces/orphan",
        "stale worktree gpuperf-ab-1",
    ]


def test_a_baseline_extended_by_sessions_at_once_holds_their_runs_in_any_order_each_once() -> None:
    fi = bench()
    old = [{"created": str(i)} for i in range(9)]
    new = [{"created": f"new {i}"} for i in range(10)]
    assert fi.extended(old, [*reversed(new[3:]), *new[:3]], new)  # all ten kept, every old one dropped
    assert fi.extended(old, [*old[1:], new[1], new[0]], new[:2])  # the oldest dropped past 10
    assert fi.extended(old[:3], [*old[:3], new[1], new[0]], new[:2])  # nothing dropped
    assert not fi.extended(old, [*new[1:], new[1]], new)  # one run twice, another lost
    assert not fi.extended(old, [*old, new[0]], new[:2])  # one run lost
    assert not fi.extended(old, [*old[:8], new[1], new[0]], new[:2])  # the wrong old run dropped


def test_every_trace_is_opened_a_cut_or_empty_one_is_corrupt(tmp_path: Path) -> None:
    fi = bench()
    traces = tmp_path / ".gpuperf" / "baselines" / "base.traces"
    traces.mkdir(parents=True)
    whole = gzip.compress(json.dumps({"traceEvents": []}).encode())
    (traces / "whole.json.gz").write_bytes(whole)
    assert fi.corrupt_files(tmp_path) == []
    (traces / "cut.json.gz").write_bytes(whole[: len(whole) // 2])
    (traces / "empty.json.gz").write_bytes(b"")
    run = tmp_path / ".gpuperf" / "traces" / "run"
    run.mkdir(parents=True)
    (run / "t.head.json").write_bytes(b"")
    expected = [".gpuperf/baselines/base.traces/cut.json.gz", ".gpuperf/baselines/base.traces/empty.json.gz"]
    assert sorted(fi.corrupt_files(tmp_path)) == [*expected, ".gpuperf/traces/run/t.head.json"]
    names = ["cut.json.gz", "empty.json.gz", "whole.json.gz", "t.head.json"]
    assert [p.name for p in fi.trace_files(tmp_path)] == names


def test_the_publish_kill_point_fires_after_a_rename_link_or_open_in_place_of_the_target_only(tmp_path: Path) -> None:
    """The injected sitecustomize notes (and slows) the publish step of the target it is given, never a temporary."""
    fi = bench()
    (tmp_path / "inject").mkdir()
    (tmp_path / "inject" / "sitecustomize.py").write_text(fi.INJECT)
    folder = tmp_path / "baselines"
    folder.mkdir()
    script = f"""
import os
from pathlib import Path
d = Path({str(folder)!r})
(d / ".base.json.tmp").write_text("x")  # a temporary: opened for writing, hidden
os.replace(d / ".base.json.tmp", d / "base.json")  # renamed into place
(d / ".b.tmp").write_text("x")
os.link(d / ".b.tmp", d / "other.json")  # linked into place, but not the target
with open(d / "base.json", "w") as f:  # opened for writing in place
    f.write("{{}}")
"""
    flag = tmp_path / "flag"
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path / "inject"),
        "GPUPERF_FAULT_FLAG": str(flag),
        "GPUPERF_FAULT_SLOW_PUBLISH": "/baselines/base.json=0",
    }
    subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=tmp_path)
    assert flag.read_text().splitlines() == [f"publish {folder / 'base.json'}"] * 2


def test_each_planted_bug_reaches_every_module_that_uses_the_name(tmp_path: Path) -> None:
    """The name a bug replaces is the planted one wherever the package's modules took it (imported at their import)."""
    fi = bench()
    for i, bug in enumerate(fi.BUGS):
        root = fi.plant(bug, tmp_path / str(i))
        module = "pytest_gpuperf." + bug.module.removesuffix(".py").replace("/", ".")
        check = f"""
import importlib, pkgutil, pytest_gpuperf
import inspect, sys
for info in pkgutil.walk_packages(pytest_gpuperf.__path__, "pytest_gpuperf."):
    if not info.name.endswith("__main__") and ".suites" not in info.name:
        importlib.import_module(info.name)
planted = getattr(sys.modules[{module!r}], {bug.replaces!r})
code = inspect.unwrap(planted).__code__
lines = open(code.co_filename).read().splitlines()
assert code.co_firstlineno > lines.index(next(l for l in lines if l.startswith("# PLANTED"))), "not the planted one"
users = [m.__name__ for m in list(sys.modules.values()) if getattr(m, {bug.replaces!r}, planted) is not planted
         and m.__name__.startswith("pytest_gpuperf")]
assert not users, users
print(code.co_filename)
"""
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, bug.name + done.stderr
        assert done.stdout.strip() == str(root / "pytest_gpuperf" / bug.module)
