"""``pytest-gpuperf history record --anchor REV`` on scratch repositories (``bench/culprit.py`` builds them).

``ab`` runs for real, in this process, with the exact timer of ``tests/exact_timing.py``: a step
returns its nominal time, so a commit planted 50% slower than the anchor is recorded as exactly
1.5 whatever the machine is doing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.history import commit_order, points_of, read_results
from pytest_gpuperf.history._anchored import UNIT, anchored_name, point_text, ratio_point
from pytest_gpuperf.history._asv_files import REFUSED
from pytest_gpuperf.history._changes import history_series
from tests.exact_timing import install
from tests.history.test_regressions import BENCH, ROOT, scratch_repository

MACHINE = "anchor-box"
regressions_args = BENCH.regressions_args


@pytest.fixture(autouse=True)
def exact_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def record_args(repo: Path, *more: str) -> list[str]:
    return [
        "history",
        "record",
        "--repo",
        str(repo),
        "--machine",
        MACHINE,
        "--workloads",
        "perf/workloads.py",
        "--device",
        "cpu",
        "--max-time",
        "0.05",
        "--no-publish",
        "-q",
        *more,
    ]


def results_of(repo: Path) -> Path:
    return repo / ".asv" / "pytest" / "results"


def snapshot(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git" not in p.parts)


def test_each_commit_is_recorded_as_its_ratio_to_the_anchor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 3 + [0.003] * 3, work=False)
    assert main(record_args(repo, "--anchor", commits[0], "--last", "6")) == 0
    out = capsys.readouterr().out
    line = f"{commits[3][:8]} commit 3: DELAY 0.003000: recorded against {commits[0][:8]}: spin 1.500 [1.500, 1.500]"
    assert line in out and "refused" not in out
    name = anchored_name(commits[0], "spin")
    assert name == f"ab_vs_{commits[0][:8]}.spin"
    (series,) = history_series(results_of(repo), order=commit_order(repo, "main"), machine=MACHINE).values()
    assert series.key.benchmark == name and series.key.device == "cpu"
    assert [p.commit for p in series.points] == commits
    assert [p.value for p in series.points] == [1.0, 1.0, 1.0, 1.5, 1.5, 1.5]
    (path,) = (results_of(repo) / MACHINE).glob(f"{commits[3][:8]}-*.json")
    (point,) = points_of(read_results(path), name).values()
    assert point.ci_low is not None and point.ci_high is not None and point.ci_low <= 1.5 <= point.ci_high
    assert point.samples and set(point.samples) == {1.5}  # the per-round ratios
    entry = json.loads((results_of(repo) / "benchmarks.json").read_text())[name]
    assert entry["unit"] == UNIT and "paired rounds" in entry["pretty_name"] and commits[0] in entry["code"]


def test_the_anchored_history_is_hunted_and_bisected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A step recorded every third commit is confirmed and bisected to its commit, as for the tests' history."""
    repo = tmp_path / "repo"
    delays = [0.002] * 13 + [0.003] * 11
    commits = scratch_repository(repo, delays, work=False)
    every_third = commits[::3]
    assert main(record_args(repo, "--anchor", commits[0], *every_third)) == 0
    capsys.readouterr()
    assert main(regressions_args(repo, 0.05, machine=MACHINE)) == 1
    out = capsys.readouterr().out
    assert "1 candidate step in 1 series: 1 confirmed slower" in out
    assert f"{commits[13][:8]} commit 13: DELAY 0.003000" in out


def test_recorded_commits_are_skipped_and_force_measures_them_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 2, work=False)
    anchor = ["--anchor", commits[0], "--last", "2"]
    assert main(record_args(repo, *anchor)) == 0
    capsys.readouterr()
    assert main(record_args(repo, *anchor)) == 0
    assert capsys.readouterr().out.count(": already recorded") == 2
    assert main(record_args(repo, *anchor, "--force")) == 0
    assert capsys.readouterr().out.count(f"recorded against {commits[0][:8]}: spin 1.000") == 2
    # Against another anchor, the same commits are not recorded yet: it is another series.
    assert main(record_args(repo, "--anchor", commits[1], "--last", "2")) == 0
    assert capsys.readouterr().out.count(f"recorded against {commits[1][:8]}") == 2


def test_ratios_do_not_count_as_the_tests_history(tmp_path: Path) -> None:
    """A commit with ratios only is not recorded for pytest's recording, nor the other way round."""
    from pytest_gpuperf.history._record import Layout

    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 2, work=False)
    assert main(record_args(repo, "--anchor", commits[0], commits[1])) == 0
    layout = Layout(repo, repo / ".asv" / "pytest", MACHINE)
    assert layout.recorded(commits[1], anchor=commits[0])
    assert not layout.recorded(commits[1])
    assert not layout.recorded(commits[1], anchor=commits[1])


def test_a_commit_that_ab_cannot_load_is_reported_and_the_others_are_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 2, work=False)
    (repo / "perf" / "workloads.py").write_text("raise RuntimeError('broken on purpose')\n")
    subprocess.run(["git", "commit", "-qam", "break the workloads"], cwd=repo, check=True)
    assert main(record_args(repo, "--anchor", commits[0], "--last", "3")) == 1
    out = capsys.readouterr().out
    assert out.count("recorded against") == 2
    assert "break the workloads: nothing recorded (ab: " in out and "broken on purpose" in out


@pytest.mark.parametrize(
    ("more", "said"),
    [
        (["--anchor", "no-such-rev", "--last", "2"], "no-such-rev"),
        (["--anchor", "HEAD", "--last", "2", "--pytest-arg=--gpuperf-max-time=2"], "--pytest-arg apply to pytest's"),
        (["--anchor", "HEAD", "--last", "2", "--tests", "perf"], "--tests apply to pytest's recording, not to"),
        (["--anchor", "HEAD", "--last", "2", "-k", "nosuch"], "-k nosuch selects none of the workloads"),
        (["--anchor", "HEAD", "--last", "2", "--device", "nosuch"], "--device nosuch:"),
        (["--last", "2"], "--workloads, --max-time, --device apply to recording with --anchor REV"),
    ],
)
def test_bad_input_is_refused_before_anything_is_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], more: list[str], said: str
) -> None:
    repo = tmp_path / "repo"
    scratch_repository(repo, [0.002] * 2, work=False)
    before = snapshot(repo)
    assert main(record_args(repo, *more)) == 2
    captured = capsys.readouterr()
    assert said in captured.err and "Traceback" not in captured.err
    assert "recorded" not in captured.out
    assert snapshot(repo) == before


def test_an_anchor_without_the_workloads_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 2, work=False)
    before = snapshot(repo)
    assert main(record_args(repo, "--anchor", commits[0], "--workloads", "perf/nosuch.py", "--last", "2")) == 2
    err = capsys.readouterr().err
    assert f"--anchor {commits[0][:8]}:" in err and "perf/nosuch.py" in err
    assert snapshot(repo) == before


def test_ratio_point_is_the_median_of_the_rounds_ratios_with_its_99_interval() -> None:
    rounds = [(1.0, 1.0 + 0.01 * (i % 7)) for i in range(60)]
    point = ratio_point(rounds, iterations=4, seconds=0.5, started=123)
    assert point.median == pytest.approx(1.03)
    assert point.ci_low is not None and point.ci_high is not None and point.ci_low <= 1.03 <= point.ci_high
    assert (point.number, point.duration, point.started_at, len(point.samples)) == (4, 0.5, 123, 60)
    assert not point.refused
    with pytest.raises(ValueError, match="no round with a positive time"):
        ratio_point([(0.0, 1.0)], iterations=1, seconds=0.1, started=0)


def test_a_tight_ratio_is_shown_with_its_99_interval() -> None:
    ratios = [1.004, 1.008, 1.010, 1.012, 1.012, 1.014, 1.016, 1.020] * 5
    point = ratio_point([(1.0, r) for r in ratios], iterations=1, seconds=1.0, started=0)
    assert not point.refused and point_text(point) == "1.012 [1.010, 1.014]"
    assert point_text(ratio_point([(1.0, r) for r in ratios[:8]], 1, 1.0, 0)) == "1.012 [1.004, 1.020]"


def test_rounds_that_disagree_give_a_refused_ratio() -> None:
    """The issue's rounds: ratios of 0.01 to 0.2 in some, 7 to 36 in the others; their median is no ratio."""
    low = [0.01 + 0.19 * i / 29 for i in range(30)]
    high = [7.0 + 29.0 * i / 33 for i in range(34)]
    point = ratio_point([(1.0, r) for r in low + high], iterations=1, seconds=5.0, started=0)
    assert point.refused == "its 99% interval is not within 5% of it: the rounds disagree, a 5% step would hide"
    text = point_text(point)
    assert text.startswith(f"{point.median:.3f} [") and " refused (its 99% interval is not within 5%" in text
    assert point.stats() == (None,) * 6  # asv is given no statistics, and (row_of) no value


def test_too_few_rounds_for_an_interval_give_a_refused_ratio() -> None:
    few = ratio_point([(1.0, 1.1), (1.0, 1.2)], iterations=1, seconds=0.1, started=0)
    assert few.median == pytest.approx(1.15) and few.ci_low is None and few.ci_high is None
    assert few.refused == "2 paired rounds, too few for a 99% interval, which needs 8"
    assert point_text(few) == f"1.150 refused ({few.refused})"


def test_a_refused_ratio_is_no_value_in_asv_and_no_point_of_the_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A commit whose rounds disagree (its step takes 1/20 of the anchor's time in one round, 15x in the next):
    the line shows the ratio with its interval and says it is refused, why and what to do; asv's file has no value
    for it, the reason beside its rows; the series leaves it out and counts it."""
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 2, work=False)
    workloads = repo / "perf" / "workloads.py"
    text = workloads.read_text()
    text = text.replace(
        "def _build(device, size):\n", "BUILDS = [0]\n\n\ndef _build(device, size):\n    BUILDS[0] += 1\n"
    )
    text = text.replace("return DELAY  #", "return DELAY * (0.05 if BUILDS[0] % 2 else 15.0)  #")
    workloads.write_text(text)
    subprocess.run(["git", "commit", "-qam", "rounds that disagree"], cwd=repo, check=True)
    assert main(record_args(repo, "--anchor", commits[0], "--last", "3")) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "rounds that disagree" in line]
    assert re.search(r": spin \d+\.\d{3} \[0\.050, 15\.000\] refused \(its 99% interval is not within 5%", line), line
    assert "measure the commit again with --force and a longer --max-time" in line
    assert sum("refused" in other for other in out.splitlines()) == 1  # the other commits are not
    name, head = anchored_name(commits[0], "spin"), commit_order(repo, "main")[-1]
    (path,) = (results_of(repo) / MACHINE).glob(f"{head[:8]}-*.json")
    data = read_results(path)
    assert data["results"][name][0] == [None] and data["results"][name][5] == [None]  # no value, no statistics
    assert data[REFUSED] == {name: {"cpu": line.split(" refused (")[1].split(");")[0]}}
    (point,) = points_of(data, name).values()
    assert point.refused == data[REFUSED][name]["cpu"]
    assert sorted({round(r, 6) for r in point.samples}) == [0.05, 15.0]  # the rounds' ratios are kept
    (series,) = history_series(results_of(repo), order=commit_order(repo, "main"), machine=MACHINE).values()
    assert [p.commit for p in series.points] == commits
    assert [p.commit for p in series.refused] == [head]


@pytest.mark.e2e  # a bench/ script end to end, with the real timer
def test_the_bench_measures_anchored_noise_quick() -> None:
    """``bench/changepoints.py --anchored``: the real ``history record --anchor`` over unchanged commits, real
    timer; the table comes out (no figure is asserted)."""
    command = [sys.executable, str(ROOT / "bench" / "changepoints.py"), "--anchored", "6", "--max-time", "0.05"]
    done = subprocess.run(
        [*command, "--series", "5"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "noise: 6 A/A ratios: median " in done.stdout and "history record --anchor over 6 unchanged" in done.stdout
    assert "target, recall and precision >= 0.9 for ours: as measured: " in done.stdout


def test_a_workload_whose_work_changed_since_the_anchor_gets_no_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ab calls it another workload (incomparable), so no ratio of it is written, and the line says why."""
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002], work=False)
    workloads = repo / "perf" / "workloads.py"
    workloads.write_text(workloads.read_text().replace('{"calls": 1}', '{"calls": 2}'))
    subprocess.run(["git", "commit", "-qam", "twice the calls"], cwd=repo, check=True)
    assert main(record_args(repo, "--anchor", commits[0], "--last", "1")) == 1
    out = capsys.readouterr().out
    assert "twice the calls: nothing recorded: ab measured no workload on both sides; spin (incomparable: " in out
    assert not list((results_of(repo) / MACHINE).glob("*.json"))
