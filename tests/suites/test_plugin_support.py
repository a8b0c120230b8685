"""What the suites need from the plugin, through pytester inner runs: records, notes, peaks, skips, defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FAST = ("--gpuperf-min-time=0.01", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.05")
REPO = Path(__file__).parents[2]

PEAK_TEST = """
import torch

def test_peak(gpuperf, gpuperf_device):
    a = torch.randn(64, 64, device=gpuperf_device)
    m = gpuperf.measure(lambda: a @ a, flops=2 * 64**3, name="mm")
    peak = gpuperf.offer_reference_peak(2 * m.throughput("FLOP").value, "twice mm, for the test")
    # A lower offer does not replace the peak.
    assert gpuperf.offer_reference_peak(1.0, "lower") == peak
    assert gpuperf.reference_peak() == peak
    gpuperf.note("why nothing was asserted")
"""


def test_reference_peak_gives_a_percent_column_notes_and_json(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_peak=PEAK_TEST)
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-json=run.json", *FAST)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*= gpuperf results =*",
            "test*device*median*95% CI*throughput*% peak*peak mem*samples*flags",
            "*test_peak::mm*cpu*FLOP/s*50%*",
            "% peak: of cpu's reference peak, the best FLOP/s measured in this run: twice mm, for the test",
            "*- gpuperf notes -*",
            "test_peak.py::test_peak[[]cpu[]]: why nothing was asserted",
        ]
    )
    devices = json.loads((pytester.path / "run.json").read_text())["devices"]
    assert devices["cpu"]["reference_peak"]["how"] == "twice mm, for the test"


RECORD_TEST = """
import dataclasses
import pytest
import torch
from pytest_gpuperf.measuring import Step, Workload
from pytest_gpuperf.measuring import measure_paired

def test_recorded(gpuperf):
    steps = {"a": Step(lambda: torch.ones(8).sum(), work={"items": 8}), "b": Step(lambda: None, work={"items": 1})}
    rounds = measure_paired(steps, gpuperf.backend, gpuperf.settings.measure, device=gpuperf.slot.id,
                            names={"a": "first"})
    record = gpuperf.record(rounds.measurements["a"], params={"n": 8})
    record.measurement.assert_throughput(at_least="1 items/s")
    (record,) = gpuperf.records
    assert [c.outcome for c in record.checks] == ["pass"]
    assert record.params == {"n": "8"}
    with pytest.raises(ValueError, match="already recorded a measurement named 'first'"):
        gpuperf.record(rounds.measurements["a"])

def test_unsupported(gpuperf):
    unicorn = Workload("unicorn", lambda d, s: Step(lambda: None, work={}), unsupported=lambda d: "needs a unicorn")
    gpuperf.run(unicorn)
"""


def test_record_and_unsupported_workloads(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    pytester.makepyfile(test_rec=RECORD_TEST)
    result = pytester.runpytest("--gpuperf-device=cpu", "-rs", "--gpuperf-memory=off", *FAST)
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*test_recorded::first*cpu*items/s*", "SKIPPED*unicorn on cpu: needs a unicorn"])


@pytest.mark.parametrize(("threads_option", "threads"), [((), 1), (("--gpuperf-threads=2",), 2)])
def test_suite_defaults_apply_unless_the_user_sets_the_option(
    pytester: pytest.Pytester, threads_option: tuple[str, ...], threads: int
) -> None:
    """The real suite file: one CPU thread by default, the command line wins; the loss check runs."""
    result = pytester.runpytest_subprocess(
        str(REPO / "suites" / "test_mlp.py"),
        "-k",
        "mlp_train and not wide",
        "--gpuperf-device=cpu",
        "--gpuperf-memory=off",
        "--gpuperf-json=run.json",
        # The suite file makes the clone the rootdir, and its .gpuperf the results directory: not from a test.
        f"--gpuperf-results-dir={pytester.path / '.gpuperf'}",
        "-p",
        "no:cacheprovider",
        *FAST,
        *threads_option,
    )
    assert result.ret == 0
    (record,) = json.loads((pytester.path / "run.json").read_text())["records"]
    assert record["measurement"]["threads"] == threads
    assert record["measurement"]["sampling_seconds"] < 1.0, "the command line's max time (0.3 s) won"
    assert record["params"]["model"] == "mlp" and record["params"]["widths"] == "1000-512-256-2"


def test_suite_defaults_yield_to_an_ini_value_too(pytester: pytest.Pytester) -> None:
    """``gpuperf_threads`` and ``gpuperf_max_time`` in ini win over the suite's one thread and 2 s, as flags do.

    Given with ``-o``, which sets ini values: the rootdir, and so the ini file read, is the repository's."""
    result = pytester.runpytest_subprocess(
        "-o",
        "gpuperf_threads=2",
        "-o",
        "gpuperf_max_time=0.3",
        str(REPO / "suites" / "test_mlp.py"),
        "-k",
        "mlp_train and not wide",
        "--gpuperf-device=cpu",
        "--gpuperf-memory=off",
        "--gpuperf-json=run.json",
        "-p",
        "no:cacheprovider",
        "--gpuperf-min-time=0.01",
        "--gpuperf-warmup-time=0.05",
        f"--gpuperf-results-dir={pytester.path / '.gpuperf'}",  # not the clone's
    )
    assert result.ret == 0
    (record,) = json.loads((pytester.path / "run.json").read_text())["records"]
    assert record["measurement"]["threads"] == 2
    # the ini's max time (0.3 s) won over the suite's 2 s: sampling stopped at it, or converged well before the 2 s
    # (a busy machine can stretch the block in flight past 1 s: the stop reason names the cap then)
    measurement = record["measurement"]
    assert "time cap 0.3 s reached" in measurement["stop_reason"] or measurement["sampling_seconds"] < 1.0
