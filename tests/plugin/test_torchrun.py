"""torchrun: each rank measures on cuda:LOCAL_RANK (two GPUs are a stand-in; the ranks run on the CPU with gloo)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .test_xdist import TWO_GPUS

WHERE = """
import os
from pathlib import Path


def test_where(gpuperf, gpuperf_device):
    Path(f"rank{os.environ['RANK']}.txt").write_text(f"{gpuperf_device} {gpuperf.slot.id}")
"""


def torchrun(pytester: pytest.Pytester, ranks: int, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    command += ["-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=120, check=False)


def test_each_rank_measures_on_its_local_gpu(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TWO_GPUS)
    pytester.makepyfile(test_where=WHERE)
    done = torchrun(pytester, 2, "--gpuperf-device=cuda")
    assert done.returncode == 0, done.stdout + done.stderr
    # The test id keeps cuda:0 on both ranks (the same tests everywhere); rank 1 measures on cuda:1.
    assert (pytester.path / "rank0.txt").read_text() == "cuda:0 cuda:0"
    assert (pytester.path / "rank1.txt").read_text() == "cuda:1 cuda:1"
    assert "test_where.py::test_where[cuda:0]" not in done.stdout  # -q: one line of dots per rank
    assert done.stdout.count("1 passed") == 2


def test_more_ranks_than_gpus_fail_with_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TWO_GPUS)
    pytester.makepyfile(test_where=WHERE)
    done = torchrun(pytester, 3, "--gpuperf-device=cuda", "-rE")
    assert done.returncode != 0
    assert "torchrun's LOCAL_RANK=2 measures on cuda:2, and this machine has 2 GPUs; run torchrun with " in done.stdout
