"""Real asv on a real git history: record commits with pytest, publish, find the planted slowdown."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.history.repo import CONTROL, MACHINE, STEP, PlantedHistory, planted_history

_ASV_COMPARE = (sys.executable, "-m", "asv", "--config")
pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a history"),
    # A real history recorded end to end (a pytest process per commit, asv publish twice, asv compare): 20 s and more.
    pytest.mark.e2e,
]


@pytest.fixture
def history(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PlantedHistory:
    return planted_history(request, tmp_path_factory)


def _step_entries(data: dict[str, Any], name: str) -> list[list[Any]]:
    return [r for r in data["regressions"] if r[0].startswith(name + "(")]


def _median(history: PlantedHistory, label: str, name: str) -> float:
    from asv.results import Results

    commit = history.commits[label]
    (path,) = (history.out / "results" / MACHINE).glob(f"{commit[:8]}-*.json")
    results = Results.load(str(path), machine_name=MACHINE)
    value = results.get_result_value(name, results.get_result_params(name))
    assert results.benchmark_version[name] == "pytest-gpuperf-asv-1"
    return float(value[0])


def test_every_commit_is_recorded_in_asv_format(history: PlantedHistory) -> None:
    for label in ("base", "docs", "slow", "docs2", "revert"):
        assert _median(history, label, STEP) > 0, label
        assert _median(history, label, CONTROL) > 0, label
    # The planted slowdown is 4x (2 ms -> 8 ms per call); the revert restores it.
    assert _median(history, "slow", STEP) > 2.5 * _median(history, "base", STEP)
    assert _median(history, "revert", STEP) < 1.5 * _median(history, "base", STEP)


def test_the_second_record_measures_only_the_new_commit(history: PlantedHistory) -> None:
    second = history.logs[1]
    assert second.count("already recorded") == 4, second
    assert f"{history.commits['revert'][:8]} Revert" in second and ": recorded" in second
    # the progress line before measuring it: which commit of how many
    assert f"history: measuring {history.commits['revert'][:8]} Revert " in second and "(commit 5 of 5)" in second


def test_planted_slowdown_is_in_regressions_json(history: PlantedHistory) -> None:
    (entry,) = _step_entries(history.before, STEP)
    name, _, _, _, last, best, jumps = entry
    assert name == f"{STEP}('cpu')"
    assert last > 2.5 * best
    ((_, rev_after, before, after),) = jumps
    assert history.before["revision_to_hash"][str(rev_after)] == history.commits["slow"]
    assert after > 2.5 * before
    assert not _step_entries(history.before, CONTROL)


def test_revert_is_not_a_regression(history: PlantedHistory) -> None:
    # Lower is better: the revert is a fall back to the best value, so nothing is outstanding.
    # Were throughput recorded instead, asv would report the revert as the regression here.
    assert not _step_entries(history.after, STEP), history.after
    assert not _step_entries(history.after, CONTROL), history.after


def test_plain_asv_compare_reads_the_pytest_results(history: PlantedHistory) -> None:
    c = history.commits
    done = subprocess.run(
        [*_ASV_COMPARE, str(history.out / "asv.conf.json"), "compare", "--machine", MACHINE, c["docs"], c["slow"]],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _change_mark(done.stdout, STEP) == "+", done.stdout  # "+": worse
    assert _change_mark(done.stdout, CONTROL) == "", done.stdout


def _change_mark(table: str, name: str) -> str:
    """The "Change" cell of ``name``'s row in asv compare's table."""
    (row,) = [line for line in table.splitlines() if f"{name}(" in line]
    return row.strip().strip("|").split("|")[0].strip()


def test_published_graph_has_a_point_per_commit(history: PlantedHistory) -> None:
    html = history.out / "html"
    (graph,) = [p for p in (html / "graphs").rglob(f"{STEP}.json") if "summary" not in p.parts]
    points = json.loads(graph.read_text())
    assert len([p for p in points if p[1][0] is not None]) == 5


def test_record_refuses_bad_input(history: PlantedHistory, tmp_path: Path) -> None:
    done = history.history("record", "--out", str(tmp_path), "--machine", "a/b", "--last", "1", check=False)
    assert done.returncode == 2
    assert "asv machine name 'a/b'" in done.stderr
    done = history.history("record", "--out", str(tmp_path), check=False)
    assert done.returncode == 2
    assert "--last N" in done.stderr
