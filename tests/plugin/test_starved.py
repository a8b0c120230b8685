"""A test the load monitor saw starved of cores says so, in the results table and under its failure (issue 21,
item 11): a test got 0.25 of a core while 1.75 cores were busy elsewhere, failed its throughput bound like a real
regression, and neither the table nor the failure said why."""

from __future__ import annotations

import pytest

FAST = ("--gpuperf-device=cpu", "--gpuperf-min-time=0.01", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.05")

#: Exact timing (each call returns its duration, the block timer adds them up) and a load gauge that, with
#: STARVE=1, sees the two cores of the machine busy: 1.75 of them by other processes, 0.25 by this one.
CONFTEST = """
import os
import time

from pytest_gpuperf.measuring._backends import CpuBackend
from pytest_gpuperf.measuring import _load as load
from pytest_gpuperf.measuring._load import CpuSnapshot

SAVED = {}


def _time_block(self, fn, iterations):
    return sum(float(fn()) for _ in range(iterations))


def _gauge(*args):
    now = time.perf_counter()
    if os.environ.get("STARVE") == "1":
        return CpuSnapshot(wall=now, busy=2.0 * now, steal=0.0, own=0.25 * now, cpus=2)
    return CpuSnapshot(wall=now, busy=now, steal=0.0, own=now, cpus=2)


def pytest_configure(config):
    SAVED.update(block=CpuBackend.time_block, snapshot=load.snapshot)
    CpuBackend.time_block = _time_block
    load.snapshot = _gauge


def pytest_unconfigure(config):
    CpuBackend.time_block = SAVED["block"]
    load.snapshot = SAVED["snapshot"]
"""

TEST = """
def test_bound(gpuperf):
    m = gpuperf.measure(lambda: 0.002, flops=1e6)  # 0.5 GFLOP/s
    m.assert_throughput(at_least="1 GFLOP/s")
"""


@pytest.fixture
def starving(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_bound=TEST)
    return pytester


def test_a_starved_test_is_flagged_in_the_table_and_under_its_failure(
    starving: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STARVE", "1")
    result = starving.runpytest(*FAST, "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- gpuperf: starved of CPU -*",
            "test_bound.py::test_bound[[]cpu[]]: starved of CPU while it sampled: it got 0.25 cores of the 1 core it "
            "needs while other processes kept 1.75 cores of the machine's 2 busy (load monitor, over * s)*",
            "*= gpuperf results =*",
            "test_bound *cpu*2 ms*500 MFLOP/s*starved, throughput fail",
            "flags in full:",
            "  test_bound: starved (0.25 of 1 core)",
        ]
    )


def test_a_test_on_a_quiet_machine_is_not_flagged(starving: pytest.Pytester) -> None:
    result = starving.runpytest(*FAST, "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    assert "starved" not in result.stdout.str()


def test_a_test_that_got_its_core_on_a_busy_machine_is_disturbed_but_not_starved() -> None:
    import dataclasses

    from pytest_gpuperf.measuring import Load
    from pytest_gpuperf.results import Evidence, disturbed_by
    from pytest_gpuperf.results._starved import starved_flag
    from tests.synthetic import make_record

    record = make_record(2e-3, threads=1)
    starving = Load(seconds=1.0, cpus=2, background_cores=1.75, own_cores=0.25)
    busy = Load(seconds=1.0, cpus=2, background_cores=1.5, own_cores=1.0)
    assert starved_flag(dataclasses.replace(record, evidence=Evidence(load=starving))) == "starved (0.25 of 1 core)"
    got_its_core = dataclasses.replace(record, evidence=Evidence(load=busy))
    assert disturbed_by(got_its_core, busy), "the gate still leaves the run out"
    assert starved_flag(got_its_core) == ""


def test_the_run_queue_wait_decides_where_it_was_read() -> None:
    """A test whose work runs in child processes (a DDP world) asks its own process for next to no CPU: on a busy
    machine its low CPU share is not starvation, and its threads never waited to run. One that waited is starved."""
    import dataclasses

    from pytest_gpuperf.measuring import Load
    from pytest_gpuperf.results import Evidence
    from pytest_gpuperf.results._starved import starved_flag
    from tests.synthetic import make_record

    record = make_record(2e-3, threads=1)
    idle_parent = Load(seconds=1.0, cpus=2, background_cores=2.0, own_cores=0.004, waited_cores=0.0)
    kept_waiting = Load(seconds=1.0, cpus=2, background_cores=1.75, own_cores=0.25, waited_cores=0.75)
    assert starved_flag(dataclasses.replace(record, evidence=Evidence(load=idle_parent))) == ""
    assert starved_flag(dataclasses.replace(record, evidence=Evidence(load=kept_waiting))) == "starved (0.25 of 1 core)"
