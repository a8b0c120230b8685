"""``pytest-gpuperf history regressions`` on scratch repositories (``bench/culprit.py`` builds them).

``ab`` runs for real, in this process, with the exact timer of ``tests/exact_timing.py``: each
step returns its nominal time, so a planted 50% slowdown is exactly 50% whatever the machine is
doing, and every verdict here holds with both vCPUs busy.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.history._asv_files import REFUSED
from tests.exact_timing import install

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> Any:
    """``bench/culprit.py``, imported from its file (bench/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("_culprit_bench", ROOT / "bench" / "culprit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses and annotations look themselves up there
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
BENCHMARK, MACHINE = BENCH.BENCHMARK, BENCH.MACHINE
culprit_scenario, noisy, scratch_repository, write_history = (
    BENCH.culprit_scenario,
    BENCH.noisy,
    BENCH.scratch_repository,
    BENCH.write_history,
)

BETWEEN = 8  # commits between the step's recorded ends
SEED = 3  # plants the culprit at commit 4 of the 8


@pytest.fixture(autouse=True)
def exact_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def args(repo: Path, *more: str) -> list[str]:
    words: list[str] = BENCH.regressions_args(repo, 0.2, *more)
    return words


def planted(root: Path) -> tuple[int, list[str]]:
    found: tuple[int, list[str]] = culprit_scenario(root, SEED, between=BETWEEN, factor=1.5, work=False)
    return found


def test_a_planted_regression_is_confirmed_bisected_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    culprit, commits = planted(repo)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    report = tmp_path / "regressions.json"
    assert main(args(repo, "--json", str(report))) == 1  # a confirmed regression, and no --since: it fails
    out = capsys.readouterr().out
    subject = f"commit {3 + culprit}: DELAY 0.003000"
    assert "ab: after/before [95% CI]" in out and subject in out
    assert "1 candidate step in 1 series: 1 confirmed slower, 0 confirmed faster; 1 regression" in out
    data = json.loads(report.read_text())
    assert (data["schema"], data["version"], data["machine"], data["branch"]) == (
        "pytest-gpuperf/regressions",
        1,
        MACHINE,
        "main",
    )
    (finding,) = data["findings"]
    assert (finding["benchmark"], finding["device"], finding["workload"]) == (BENCHMARK, "cpu", "spin")
    assert (finding["before_commit"], finding["after_commit"]) == (commits[3], commits[3 + BETWEEN])
    found = finding["culprit"]
    assert (found["kind"], found["direction"], found["commit"], found["subject"]) == (
        "commit",
        "slower",
        commits[3 + culprit],
        subject,
    )
    roles = [p["role"] for p in found["probes"]]
    assert roles[0] == "confirm" and roles[-1] == "culprit" and found["ab_runs"] == len(roles) <= 5
    assert all(p["ratio"] is not None and p["rounds"] > 0 for p in found["probes"])
    assert finding["newer_than_since"] is True
    fragment = f"#{BENCHMARK}?machine={MACHINE}&p-device=%27cpu%27&commits={commits[3][:8]}-{commits[11][:8]}"
    assert finding["graph"] == f"{repo / '.asv/pytest/html/index.html'}{fragment}"
    markdown = summary.read_text()
    assert markdown.startswith("### pytest-gpuperf history regressions")
    assert f"[{BENCHMARK}]({finding['graph']})" in markdown and subject in markdown


def test_since_a_commit_fails_only_on_a_culprit_newer_than_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    culprit, commits = planted(repo)
    # The nightly ran last at the culprit itself: the regression is not new; the step is still listed.
    assert main(args(repo, "--since", commits[3 + culprit])) == 0
    out = capsys.readouterr().out
    assert f"commit {3 + culprit}:" in out and "1 confirmed slower" in out
    assert f"0 regressions newer than --since {commits[3 + culprit]}" in out
    # At the step's base, the culprit is new: the nightly fails.
    assert main(args(repo, "--since", commits[3])) == 1


def test_since_a_date_after_the_step_measures_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    planted(repo)
    assert main(args(repo, "--since", "2999-01-01")) == 0
    out = capsys.readouterr().out
    assert "not measured: " in out and "not newer than --since 2999-01-01" in out
    assert "0 candidate steps in 1 series" in out
    assert re.search(
        rf"nothing confirmed in {BENCHMARK} \[cpu\] on {MACHINE}: 1 candidate step: \w{{8}}\.\.\w{{8}} \(\+\d+\.\d%\) "
        r"not measured \(not newer than --since 2999-01-01\)",
        out,
    ), out


def test_a_benchmark_no_workload_is_named_in_is_listed_not_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    delays = [0.002] * 3 + [0.003] * 3
    commits = scratch_repository(repo, delays, work=False)
    results = repo / ".asv" / "pytest" / "results"
    write_history(results, commits, noisy(delays, 1))
    renamed = results / MACHINE
    for path in renamed.glob("*-existing-py.json"):
        path.write_text(path.read_text().replace(BENCHMARK, "perf.test_other.test_other"))
    assert main(args(repo)) == 0
    out = capsys.readouterr().out
    assert "no workload's name is in the benchmark's name; name one with --workload" in out


def test_with_no_candidate_step_each_series_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's ``0 candidate steps`` with nothing per series: each series now says why nothing was confirmed,
    and counts the commits whose points were refused as too wide when recorded."""
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 8, work=False)
    results = repo / ".asv" / "pytest" / "results"
    write_history(results, commits, noisy([0.002] * 8, 1))
    short = f"{BENCHMARK}_short"
    for number, commit in enumerate(commits):
        (path,) = (results / MACHINE).glob(f"{commit[:8]}-*.json")
        data = json.loads(path.read_text())
        if number < 2:  # a second series of two commits
            data["results"][short] = data["results"][BENCHMARK]
        if number == 5:  # the point of commit 5 was refused as too wide when recorded
            data["results"][BENCHMARK][0] = [None]
            data[REFUSED] = {BENCHMARK: {"cpu": "its 99% interval is not within 5% of the ratio"}}
        path.write_text(json.dumps(data))
    report = tmp_path / "regressions.json"
    assert main(args(repo, "--json", str(report))) == 0
    out = capsys.readouterr().out
    assert "0 candidate steps in 2 series" in out
    noise = re.search(
        rf"nothing confirmed in {BENCHMARK} \[cpu\] on {MACHINE}: no step beyond the noise: the likeliest step, "
        r"\w{8}\.\.\w{8} \([+-]\d+\.\d%\), (has p = \S+, not under 0\.001|is under the 2% a step must reach); "
        rf"1 commit left out, its ratio refused when recorded \({commits[5][:8]}: too wide, or too few rounds\): "
        "record them again with --force and a longer --max-time\n",
        out,
    )
    assert noise, out
    assert f"nothing confirmed in {short} [cpu] on {MACHINE}: 2 points: a step needs 3 on each side\n" in out
    unconfirmed = json.loads(report.read_text())["unconfirmed"]
    assert [(u["benchmark"], u["device"], u["machine"]) for u in unconfirmed] == [
        (BENCHMARK, "cpu", MACHINE),
        (short, "cpu", MACHINE),
    ]
    assert unconfirmed[1]["why"] == "2 points: a step needs 3 on each side"


def test_a_candidate_ab_does_not_confirm_is_said_per_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A step in the recorded values between commits that do not differ (a noisy recording): ab finds them equal."""
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 8, work=False)
    write_history(repo / ".asv" / "pytest" / "results", commits, noisy([0.002] * 4 + [0.003] * 4, 1))
    assert main(args(repo)) == 0
    out = capsys.readouterr().out
    assert "1 candidate step in 1 series: 0 confirmed slower, 0 confirmed faster" in out
    step = f"{commits[3][:8]}..{commits[4][:8]}"
    assert re.search(
        rf"nothing confirmed in {BENCHMARK} \[cpu\] on {MACHINE}: 1 candidate step: {step} \(\+\d+\.\d%\) not "
        r"confirmed by ab \(1\.000 \[1\.000, 1\.000\] unchanged\)\n",
        out,
    ), out


def test_a_confirmed_step_leaves_its_series_unlisted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    planted(repo)
    assert main(args(repo)) == 1
    assert "nothing confirmed in" not in capsys.readouterr().out


# ---------------------------------------------------------------- bad input: exit 2, a clear error, nothing changed


@pytest.fixture(scope="module")
def history_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("bad") / "repo"
    planted(repo)
    return repo


def snapshot(repo: Path) -> tuple[list[str], str]:
    files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git" not in p.parts)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    return files, status


def refused(repo: Path, capsys: pytest.CaptureFixture[str], *more: str, machine: str = MACHINE) -> str:
    before = snapshot(repo)
    argv = args(repo, *more)
    argv[argv.index("--machine") + 1] = machine
    assert main(argv) == 2
    assert snapshot(repo) == before
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "ab " not in captured.out
    return captured.err


def test_no_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    scratch_repository(repo, [0.002] * 3, work=False)
    err = refused(repo, capsys)
    assert "no history in" in err and "pytest-gpuperf history record --last N" in err


def test_one_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002], work=False)
    write_history(repo / ".asv" / "pytest" / "results", commits, [0.002])
    err = refused(repo, capsys)
    assert "holds 1 recorded commit of branch main" in err and "record at least 6" in err


def test_a_history_too_short_once_its_refused_ratios_are_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 7, work=False)
    results = repo / ".asv" / "pytest" / "results"
    write_history(results, commits, [0.002] * 7)
    for commit in commits[:3]:
        (path,) = (results / MACHINE).glob(f"{commit[:8]}-*.json")
        data = json.loads(path.read_text())
        data["results"][BENCHMARK][0] = [None]
        data[REFUSED] = {BENCHMARK: {"cpu": "too wide"}}
        path.write_text(json.dumps(data))
    err = refused(repo, capsys)
    assert "holds 4 recorded commits of branch main" in err and "record at least 6" in err
    assert (
        "; 3 more commits were recorded with a refused ratio (too wide, or too few rounds): record them again " in err
    )


def test_a_machine_that_does_not_exist(history_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(history_repo, capsys, machine="no-such-box")
    assert "no results of machine 'no-such-box'" in err and MACHINE in err


def test_a_dirty_tree(history_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    delay = history_repo / "perf" / "delay.py"
    kept = delay.read_text()
    delay.write_text("DELAY = 1.0\n")
    try:
        err = refused(history_repo, capsys)
    finally:
        delay.write_text(kept)
    assert "has uncommitted changes" in err and "commit or stash" in err


def test_a_since_that_is_neither_commit_nor_date(history_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(history_repo, capsys, "--since", "last-tuesday")
    assert "--since 'last-tuesday' is neither a commit" in err


def test_a_json_path_that_is_not_a_report_of_ours(history_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = history_repo / "notes.json"
    other.write_text('{"mine": true}\n')
    try:
        err = refused(history_repo, capsys, "--json", str(other))
        assert other.read_text() == '{"mine": true}\n'
    finally:
        other.unlink()
    assert "--json" in err and str(other) in err


@pytest.mark.e2e  # a bench/ script end to end, with the real timer
def test_the_bench_runs_quick() -> None:
    """``bench/culprit.py --quick``: both scenarios run end to end with the real timer (no figure is asserted)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "culprit.py"), "--quick"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "| scenario | trial | planted | reported | ab runs | wall |" in done.stdout
    assert "| culprit among 64 | 1 | commit " in done.stdout and "| creep 1% x 8 (commits 8-15) | 1 |" in done.stdout
    assert re.search(r"culprit found: [01]/1, within 8 ab runs: [01]/1; creep reported: [01]/1", done.stdout)


def test_a_device_this_machine_lacks(history_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv_device = ["--device", "nosuch"]
    err = refused(history_repo, capsys, *argv_device)
    assert "--device nosuch:" in err


def test_a_workload_the_module_lacks(history_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(history_repo, capsys, "--workload", "nosuch")
    assert "--workload nosuch: perf/workloads.py at main has no such workload; its workloads: spin" in err


def test_a_commit_whose_workloads_module_breaks_is_a_probe_that_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A probe on a broken commit does not end the hunt in an error: it is asked from the head, and the commits
    left are named."""
    repo = tmp_path / "repo"
    commits = scratch_repository(repo, [0.002] * 4, work=False)
    workloads = (repo / "perf" / "workloads.py").read_text()

    def commit(message: str) -> str:
        subprocess.run(["git", "commit", "-q", "-am", message], cwd=repo, check=True)
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    (repo / "perf" / "workloads.py").write_text("raise ImportError('broken on purpose')\n")
    broken = commit("broken")
    (repo / "perf" / "workloads.py").write_text(workloads)
    (repo / "perf" / "delay.py").write_text("DELAY = 0.003\n")
    commits += [broken, commit("slower, fixed")]
    for n in range(2):
        (repo / "perf" / "delay.py").write_text(f"DELAY = 0.003  # {n}\n")
        commits.append(commit(f"later {n}"))
    recorded = [0, 1, 2, 3, 5, 6, 7]
    write_history(repo / ".asv" / "pytest" / "results", [commits[i] for i in recorded], [0.002] * 4 + [0.003] * 3)
    assert main(args(repo)) == 1  # confirmed slower; the culprit is one of the two
    out = capsys.readouterr().out
    assert f"probe: {commits[3][:8]}..{broken[:8]} failed: importing perf/workloads.py in head" in out
    assert "broken on purpose" in out and f"one of {broken[:8]}..{commits[5][:8]}" in out
