"""bench/fault_injection.py's checks tell a correct outcome from a wrong one (no process is started: the script
itself is run by hand, for minutes; see bench/evidence/robustness.md). A check that passed everything would find
nothing."""

from __future__ import annotations

import importlib.util
import json
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
