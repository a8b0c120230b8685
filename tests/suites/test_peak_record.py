"""The matmul reference peak's records are named the same whatever order the tests run in.

A record's key names its benchmark in baselines, the gate and asv's history. The peak is
measured by the first test that needs it; before, that test also recorded it, so under
pytest-randomly with ``test_matmul_peak`` left out (``-k``, ``--lf``, another xdist worker)
each order named the peak's records after another test: in asv, one single-point history
per commit. Now only ``test_matmul_peak`` records them. Real suites, real torch, on the CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
#: Three pytest processes of the real matmul suite, end to end: 12 s and more.
pytestmark = pytest.mark.e2e
_QUICK = ("--gpuperf-max-time=0.2", "--gpuperf-warmup-time=0.05", "--gpuperf-min-samples=5")


def _keys(tmp_path: Path, seed: int, selection: str) -> list[str]:
    out = tmp_path / f"{seed}-{len(selection)}.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "suites/test_matmul.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "randomly",
            f"--randomly-seed={seed}",
            "-k",
            selection,
            *_QUICK,
            f"--gpuperf-results-dir={tmp_path / 'results'}",
            f"--gpuperf-json={out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(record["key"] for record in json.loads(out.read_text())["records"])


def test_the_peak_is_recorded_by_test_matmul_peak_only_in_any_order(tmp_path: Path) -> None:
    pytest.importorskip("pytest_randomly", reason="needs pytest-randomly to shuffle the order")
    # Seeds 1 and 2 run test_matmul[cpu-float32-half] and [...-quarter] in opposite orders.
    without_peak = [_keys(tmp_path, seed, "float32 and not peak") for seed in (1, 2)]
    assert (
        without_peak[0]
        == without_peak[1]
        == [
            "suites/test_matmul.py::test_matmul[cpu-float32-half]::n=512",
            "suites/test_matmul.py::test_matmul[cpu-float32-quarter]::n=256",
        ]
    )
    with_peak = _keys(tmp_path, 2, "float32 or peak")
    peak = [key for key in with_peak if "test_matmul_peak" in key]
    assert "suites/test_matmul.py::test_matmul_peak[cpu]::float32" in peak
    assert sorted(set(with_peak) - set(peak)) == without_peak[0]
