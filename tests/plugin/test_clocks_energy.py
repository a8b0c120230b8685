"""The clock and energy settings as a user meets them: the throttle threshold from the command line, the ini file and
the marker, and the energy of a CPU run in the table, the JSON and the line under the table."""

from __future__ import annotations

import json

import pytest

FAST = ("--gpuperf-min-time=0.01", "--gpuperf-max-time=0.2", "--gpuperf-warmup-time=0.02", "--gpuperf-memory=off")

THRESHOLD_TEST = """
import pytest

def test_default(gpuperf):
    print("threshold", gpuperf.settings.measure.throttle_threshold)

@pytest.mark.gpuperf(throttle_threshold="50%")
def test_marked(gpuperf):
    print("threshold", gpuperf.settings.measure.throttle_threshold)
"""


def test_the_throttle_threshold_from_the_ini_the_command_line_and_the_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_t=THRESHOLD_TEST)
    pytester.makeini("[pytest]\ngpuperf_throttle_threshold = 60%\n")
    result = pytester.runpytest("-s", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*threshold 0.6*", "*threshold 0.5*"])
    result = pytester.runpytest("-s", "-p", "no:randomly", "--gpuperf-throttle-threshold=0.9")
    result.stdout.fnmatch_lines(["*threshold 0.9*", "*threshold 0.5*"])


def test_a_cpu_run_says_once_why_it_has_no_energy_or_shows_it(pytester: pytest.Pytester) -> None:
    """Where RAPL is unreadable (absent here, root-only on most machines) every record says why, and the table says
    it once; where it is readable (a root CI runner) the table has a "per joule" column instead."""
    pytester.makepyfile(
        test_e="""
import torch

def test_a(gpuperf):
    a = torch.randn(32, 32)
    gpuperf.measure(lambda: a @ a, samples=32)

def test_b(gpuperf):
    a = torch.randn(32, 32)
    gpuperf.measure(lambda: a + a, samples=32)
"""
    )
    result = pytester.runpytest(*FAST, "--gpuperf-device=cpu", "--gpuperf-json=out.json")
    assert result.ret == pytest.ExitCode.OK
    records = json.loads((pytester.path / "out.json").read_text())["records"]
    energies = [r["measurement"]["energy"] for r in records]
    assert len(energies) == 2
    if all(e["joules"] is None for e in energies):
        notes = [line for line in result.stdout.lines if line.startswith("energy: none")]
        assert notes == [f"energy: none on cpu: {energies[0]['note']}"]
        assert energies[0]["note"].startswith(("no RAPL package zone", "RAPL's", "the counter"))
    else:
        assert any("per joule" in line for line in result.stdout.lines)
