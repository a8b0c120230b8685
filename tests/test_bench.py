"""The GPU benchmark still runs where CI runs: on the CPU, without its GPU-only rows (no speed is asserted)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Each test runs a bench/ script end to end, with the real timer: in the e2e group (`pytest -m e2e`).
pytestmark = pytest.mark.e2e


def run_bench(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python bench/<script> args...``, its output captured; its exit status is the caller's to check."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_gpu_harness_runs_on_the_cpu() -> None:
    done = run_bench("gpu_harness.py", "--device", "cpu", "--first-call", "0.05", "--repeats", "3")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for row in ("matmul fp32 n=512", "MLP train step", "pre-warmed (reference)", "fresh (median of 3)"):
        assert row in out
    assert "CUDA graph" not in out and "do_bench" not in out  # the GPU-only rows
    assert "fresh within 3% of pre-warmed (" in out  # the target is judged, met or missed
    # the precision-matched table: Timer.blocked_autorange() is the CPU's rival, its spread defined in the output
    assert "3 runs of each method" in out and "a run-to-run spread, not a confidence interval" in out
    header = ["rival spread", "rival median wall", "ours' spread", "ours' median CI", "ours' median wall"]
    assert re.search(r"\s+".join(map(re.escape, header)), out)
    for workload in ("matmul fp32 n=512", "MLP train step"):  # judged with its figures, met or missed
        line = f"{workload}, wall time at Timer.blocked_autorange()'s precision: our median wall "
        assert re.search(rf"^(met|MISSED): {re.escape(line)}.* our run-to-run spread ", out, re.MULTILINE)


def test_pytest_benchmark_side_by_side_runs() -> None:
    """Both tools run the unchanged suites and the ratio table comes out (quick budgets: no figure is judged)."""
    done = run_bench(
        "pytest_benchmark_side.py",
        *("--quick", "--repeats", "1"),
        # pytest-benchmark turns itself off in an xdist worker, which this test may run in
        env={k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for row in ("test_torchbench.py::TestBenchNetwork::test_eval[mlp-cpu]", "test_pybench.py::test_matmul_128"):
        assert row in out
    assert "- (5 samples)" in out  # pedantic's 5 rounds claim no interval
    assert re.search(r"^pytest-benchmark +[\d.]+ s .* 1$", out, re.MULTILINE)  # wall per session, spread, ratio
    assert re.search(r"^gpuperf default +[\d.]+ s ", out, re.MULTILINE)
    assert "gpuperf default, where a session's time went" in out


def test_pytest_benchmark_side_by_side_runs_pints_real_suite() -> None:
    """pint's own benchmarks (shipped in its wheel) under both tools and a second configuration of ours, two sessions
    each, alternating: each tool's run-to-run spread and wall time, the load, where our time went (quick budgets)."""
    pytest.importorskip("pint", reason="the real suite is pint's: pip install pint")
    done = run_bench(
        "pytest_benchmark_side.py",
        *("--suite", "pint", "--select", "test_pint_eval and plain and 10 and not metros", "--quick"),
        *("--repeats", "2", "--ours", "memoryless=--gpuperf-memory=off"),
        env={k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "2 sessions of each tool, alternating" in out and "load average" in out
    assert re.search(r"^round 2 gpuperf memoryless +[\d.]+ s  load average", out, re.MULTILINE)
    assert "test_pint_eval[10 m-plain_tokenizer]" in out
    assert "spread: half the range of a test's session medians, relative to their median" in out
    for tool in ("pytest-benchmark", "gpuperf default", "gpuperf memoryless"):
        assert re.search(rf"^{tool} +[\d.]+ s +[\d.]+, [\d.]+ +[\d.]+% ", out, re.MULTILINE), tool
    assert "gpuperf memoryless: --gpuperf-memory=off" in out


def test_asv_scale_runs_small_and_publishes(tmp_path: Path) -> None:
    """The fleet history script at a tiny size: results written by our writer, merged, published (no speed judged)."""
    done = run_bench(
        "asv_scale.py",
        *("--machines", "2", "--commits", "4", "--benchmarks", "3", "--shard", "--keep"),
        *("--out", str(tmp_path / "scale")),
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "2 machines x 4 commits x 3 benchmarks" in out
    assert "4 files per machine directory, one per commit" in out and "written by every machine: benchmarks.json" in out
    for row in ("asv publish (all)", "page (html dir)", "asv publish per machine"):
        assert row in out
    html = tmp_path / "scale" / "html"
    index = json.loads((html / "index.json").read_text())
    assert len(index["revision_to_hash"]) == 4 and sorted(index["params"]["machine"]) == ["gpu-type-00", "gpu-type-01"]
    assert len(index["benchmarks"]) == 3


def test_changepoints_quick_runs() -> None:
    """The change-point proof at its smallest: real A/A medians, planted steps, ours beside asv's (no rate judged)."""
    done = run_bench("changepoints.py", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "noise: 12 A/A medians: median " in out and "load average" in out
    for noise in ("as measured", "x0.5", "x0.25"):
        for detector in ("ours (E-divisive + t-test)", "asv detect_steps (jumps >= 2%)", "asv regressions page (5%)"):
            assert re.search(rf"^\| {re.escape(noise)} \| {re.escape(detector)} \| ", out, re.MULTILINE), out
    assert re.search(r"target, recall and precision >= 0.9 for ours: as measured: (met|MISSED) within 1 commit", out)


def test_measurement_parts_runs_and_names_every_part() -> None:
    """Where a measurement's time goes, per step (short budgets: no figure is judged)."""
    done = run_bench(
        "measurement_parts.py", *("--set", "max_time=0.2", "--set", "warmup_time=0.05", "--set", "min_time=0.02")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^step +total +sample +collect +memory +profile +median +samples +CI +traced$", out, re.MULTILINE)
    for step in ("MLP train step", "sum(range(100))"):
        assert re.search(rf"^{re.escape(step)} +[\d.]+s ", out, re.MULTILINE), step
    assert "load average" in out


def test_startup_measures_the_plugins_start_and_a_measuring_tests_parts() -> None:
    """Both parts run on small counts and print every figure (none is judged: the machine's load moves them)."""
    done = run_bench("startup.py", *("--tests", "20", "--repeats", "1", "--measured", "10"))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^  ratio: [\d.]+ wall, [\d.]+ CPU$", out, re.MULTILINE)
    assert re.search(r"^  paired CPU ratio: [\d.]+ from one pair \(a point, not an interval\)$", out, re.MULTILINE)
    assert re.search(
        r"^  importing the plugin after pytest: [\d.]+ ms CPU median, \d+ of its modules loaded$", out, re.M
    )
    assert re.search(r"^ +defaults +profile off +pytest alone$", out, re.MULTILINE)
    for label in ("the memory probe", "reading the work profile", "end of the session", "beyond the measurement: from"):
        assert re.search(rf"^  {re.escape(label)}.*( +-?[\d.]+){{3}}", out, re.MULTILINE), label


def test_count_ranking_judges_both_planted_sets() -> None:
    """Both sets of planted regressions through ``ab``: a row per regression with its first count line, each set's
    hit rate beside its target, and the exit status that says whether both sets met it (the ranking's figures are
    judged in bench/evidence/count-ranking.md, not here)."""
    done = run_bench("count_ranking.py")
    out = done.stdout
    verdicts = re.findall(
        r"^(met|MISSED): (planted\.py|second): the planted op is the first count line in \d+ of 10 \(target >= 9 of 10",
        out,
        re.MULTILINE,
    )
    assert [name for _, name in verdicts] == ["planted.py", "second"], out + done.stderr
    assert done.returncode == (0 if all(v == "met" for v, _ in verdicts) else 1), out + done.stderr
    header = ["set", "regression", "planted op", "first count line", "hit"]
    assert re.search(r"^\| " + r" +\| ".join(map(re.escape, header)) + r" +\|$", out, re.MULTILINE)
    rows = re.findall(r"^\| (planted\.py|second) +\| ", out, re.MULTILINE)
    assert rows.count("planted.py") == 10 and rows.count("second") == 10
    # what no timing moves: the sleep changes no count, the wider layer runs no op more often (its FLOPs' line)
    assert re.search(r"^\| planted\.py +\| a Python-side sleep .*\| - \(no count changed\) +\| NO +\|$", out, re.M)
    assert re.search(
        r"^\| planted\.py +\| a wider hidden layer .*\| flops [\d.e+]+ -> [\d.e+]+/call .*\| yes +\|$", out, re.M
    )
    assert "load average (1 min) at start" in out


def test_fault_injection_catches_every_planted_bug() -> None:
    """``bench/fault_injection.py --planted``: each bug, planted in a copy of the package, is caught by the fault
    aimed at it, and the script exits 0 only then (the full-disk trace case needs a tmpfs: root, mount allowed)."""
    done = run_bench("fault_injection.py", "--planted")
    out = done.stdout
    rows = re.findall(r"^\| (.+?) +\| (.+?) +\| +(\d+) \| (.+?) +\| (.+?) +\|$", out, re.MULTILINE)
    assert [row[0] for row in rows] == [
        "a baseline written in place, in two halves",
        "locked() takes no lock",
        "a trace published unchecked (whatever torch left in the file, empty on a full disk)",
        "a trace written in place (exported beside it, then copied into it)",
    ], out + done.stderr
    untried = [row for row in rows if row[4].startswith("not tried: needs root and mount")]
    assert all(row[4] == "yes" for row in rows if row not in untried), out + done.stderr
    if untried:
        assert done.returncode == 1 and "3 of 4 planted bugs caught" in out
        pytest.skip("the full-disk trace case needs a tmpfs mount (root): " + untried[0][0])
    assert done.returncode == 0 and "4 of 4 planted bugs caught" in out, out + done.stderr


def test_scale_measures_every_figure_and_judges_every_target(tmp_path: Path) -> None:
    """``bench/scale.py`` at two tiny sizes: both sessions and the three commands, every row of the table with a
    figure per N and its growth, the JSON's figures positive and the sizes growing with N, each growth exponent the
    one its figures give, and the exit status that says whether every target was met (no speed is judged)."""
    figures_file = tmp_path / "scale.json"
    done = run_bench("scale.py", "--tests", "6,12", "--json", str(figures_file), "--workdir", str(tmp_path / "work"))
    out = done.stdout
    verdicts = re.findall(r"^(met|MISSED): (.+)$", out, re.MULTILINE)
    assert len(verdicts) >= 20, out + done.stderr
    assert done.returncode == (0 if all(v == "met" for v, _ in verdicts) else 1), out + done.stderr
    assert f"{sum(v == 'met' for v, _ in verdicts)} of {len(verdicts)} targets met" in out
    assert "session options: --gpuperf-max-time=0.02 " in out and "load average (1 min) around the processes" in out
    assert re.search(r"^\| figure +\| unit +\| N=6 +\| N=12 +\| growth 6->12 +\|$", out, re.MULTILINE), out
    labels = ["session `--gpuperf-save`: wall", "session `--gpuperf-compare`: after the last test (the gate)"]
    labels += ["baseline file (1 run)", "`pytest-gpuperf report RUN scale`: peak RSS", "`pytest-gpuperf runs`: wall"]
    labels += ["`pytest-gpuperf compare scale RUN`: CPU"]
    # the traces kept beside the baseline follow the profiles the budget kept whole: under a busy machine's load, none
    traces = r"^\| traces beside the baseline +\| MiB +\| [\d.]+ +\| [\d.]+ +\| (-?[\d.]+|-) +\|$"
    assert re.search(traces, out, re.MULTILINE), out
    assert re.search(r"^\| traces beside the baseline: files +\| n +\| \d+ +\| \d+ +\|", out, re.MULTILINE), out
    assert re.search(r"^\| traces beside the baseline: each +\| KiB +\| [\d.]+ +\| [\d.]+ +\|", out, re.MULTILINE), out
    # the total and the count follow the load (the profile's budget); a trace's size is judged, where there are some
    assert not re.search(r"^(met|MISSED): traces beside the baseline(: files)?: growth", out, re.MULTILINE), out
    growth = {}
    for label in labels:
        row = re.search(rf"^\| {re.escape(label)} +\| \w+ +\| [\d.]+ +\| [\d.]+ +\| (-?[\d.]+) +\|$", out, re.M)
        assert row, label + "\n" + out
        growth[label] = float(row.group(1))
    per_record = r"^\| session `--gpuperf-(save|compare)`: peak RSS per record above N=6 +\| KiB +\| - +\| -?[\d.]+ +\|"
    assert len(re.findall(per_record, out, re.MULTILINE)) == 2, out
    assert re.search(r"^N=12: gpuperf gate: (passed|FAILED)", out, re.MULTILINE), out

    data = json.loads(figures_file.read_text())
    small, large = (point["figures"] for point in data["points"])
    assert [point["tests"] for point in data["points"]] == [6, 12]
    assert small["records"] == 6 and large["records"] == 12
    for key in ("save.wall", "save.cpu", "save.rss", "save.before", "save.after", "gate.wall", "gate.after"):
        assert small[key] > 0 and large[key] > 0, key
    for key in ("runs.wall", "report.wall", "report.rss", "compare.wall", "compare.rss"):
        assert large[key] > 0, key
    for key in ("size.run", "size.baseline", "size.page"):  # more records, more bytes
        assert large[key] > small[key] > 0, key
    assert "size.baseline_traces" in large and "size.baseline_traces" in small
    for point in (small, large):
        count = point["count.baseline_traces"]
        assert point["size.baseline_trace"] == (point["size.baseline_traces"] / count if count else 0)
    assert large["gate.after"] < large["gate.wall"] and large["save.before"] < large["save.wall"]
    # the table's growth is log(f(12) / f(6)) / log(2), to its three decimals
    expected = math.log(large["size.baseline"] / small["size.baseline"]) / math.log(2)
    assert growth["baseline file (1 run)"] == pytest.approx(expected, abs=0.0011)
    assert len(data["targets"]) == len(verdicts)


def test_profile_cost_says_what_each_profile_reduced_and_reads_older_files(tmp_path: Path) -> None:
    """Issue 37 item 2: the benchmark of the profile's cost names each reduction, and counts them by kind."""

    def record(test: str, **profile: object) -> dict[str, object]:
        measurement = {"sampling_seconds": 0.9, "warmup": {"seconds": 0.1}}
        return {"test": test, "measurement": {**measurement, "profile": {"calls": 2, "budget": 0.03, **profile}}}

    results = tmp_path / "results.json"
    why = "the counting call's figures only: reading 1 call's 1,000 events would take about 10.3 ms, over the ..."
    records = [
        record("test_a", seconds=0.01, calls=0, reduced=why),
        record("test_b", seconds=0.02),  # a file written before profiles said what they reduced
        {"test": "test_c", "measurement": {"profile": None}},
    ]
    results.write_text(json.dumps({"records": records}))
    done = run_bench("profile_cost.py", str(results))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("test_a") and lines[0].endswith(" reduced: the counting call's figures only")
    assert lines[1].startswith("test_b") and "reduced" not in lines[1]
    assert lines[2] == "records=3 measuring=2.00s profile=0.030s share=1.50% worst=2.0%"
    assert lines[3] == "reduced=1 (1 the counting call's figures only)"


def test_gate_power_predicts_each_planted_sizes_detection_beside_the_observed(tmp_path: Path) -> None:
    """Issue 38, item 4: the ab protocol's power table, per condition, the ratio the trials measured, what their
    rounds could see and the detection rate that predicts, beside the rate observed (one trial: rates of one);
    under a load that comes and goes (item 5), ab's interval beside the one of rounds as independent draws."""
    args = ["--trials", "1", "--max-time", "0.5", "--conditions", "A/A,B +3%", "--workdir", str(tmp_path)]
    done = run_bench("gate_power.py", *args, "--load", "1", "--bursts", "0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 busy loops in bursts (mean 0.5 s on, 0.5 s off)" in done.stdout
    for rule in ("ab's interval: low end > 1", "the same, rounds as independent"):
        assert re.search(rf"^\| {re.escape(rule)} +\| .+ \| [01]/1 \(\d+%\) +\| [01]/1", done.stdout, re.MULTILINE)
    assert re.search(r"^A/A: .*rounds median \d+, clustered \(interval widened\) in [01] of 1$", done.stdout, re.M)
    header = ["condition", "ratio (median of trials)", "can see (median)", "predicted: significant", "observed"]
    header.append("slower under auto")
    assert re.search(r"\s*\|\s*".join(map(re.escape, header)), done.stdout), done.stdout
    for condition in ("A/A", "B +3%"):  # "-": too few rounds at this budget to see any change
        cells = rf"^\| {re.escape(condition)} +\| \d\.\d{{3}} +\| (-|[\d.]+%) +\| \d+% +\| [01]/1 \(\d+%\) +\| [01]/1 "
        assert re.search(cells, done.stdout, re.MULTILINE), done.stdout
    assert "B +5%" not in done.stdout  # only the conditions asked for


def test_gate_power_refuses_bursts_of_no_length(tmp_path: Path) -> None:
    done = run_bench("gate_power.py", "--trials", "1", "--load", "1", "--bursts", "0", "--workdir", str(tmp_path))
    assert done.returncode == 2 and "--bursts seconds > 0" in done.stderr


def test_gate_power_predicts_the_stored_routes_detection_too(tmp_path: Path) -> None:
    """The same table for the stored route, from the gate's estimate of three sessions against three (interleaved)."""
    args = ["--protocol", "interleaved", "--trials", "1", "--conditions", "A/A,B +10%", "--workdir", str(tmp_path)]
    done = run_bench("gate_power.py", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    for condition in ("A/A", "B +10%"):  # three runs a side always give an interval: a size is stated
        cells = rf"^\| {re.escape(condition)} +\| \d\.\d{{3}} +\| [\d.]+% +\| \d+% +\| [01]/1 \(\d+%\) +\| [01]/1 "
        assert re.search(cells, done.stdout, re.MULTILINE), done.stdout
