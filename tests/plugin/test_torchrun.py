"""torchrun: each rank measures on cuda:LOCAL_RANK (two GPUs are a stand-in; the ranks run on the CPU with gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.exact_timing import INSTALL

from .test_xdist import TWO_GPUS

#: Each test launches torchrun and a world of ranks, end to end.
pytestmark = pytest.mark.e2e

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
    # Refused at the start (the session asks for cuda), as a usage error on stderr: rank 2 measures nothing.
    assert "ERROR: gpuperf: torchrun's LOCAL_RANK=2 measures on cuda:2, and this machine has 2 GPUs; run torchrun " in (
        done.stderr
    )


#: Each call returns its duration, timed exactly (``tests/exact_timing.py``) where a test installs the timer: real spins
#: of two ranks on a busy machine's two cores can put the median far from rank 1's 600 us (a 900 us spin under
#: xdist read 1.36 ms).
RANKS_MEASURE = """
import json
import os
from pathlib import Path

import pytest


def test_ranks(gpuperf):
    rank = os.environ["RANK"]
    cost = 600e-6 if rank == "1" else 300e-6  # rank 1 is the slow one
    name = os.environ.get("GPUPERF_TEST_NAME_" + rank, "step")
    m = gpuperf.measure(lambda: cost, name=name)
    Path(f"rank{rank}.json").write_text(json.dumps({"median": m.median, "samples": len(m.samples)}))
"""

FAST = ("--gpuperf-min-time=0.05", "--gpuperf-max-time=0.5", "--gpuperf-warmup-time=0.05", "--gpuperf-memory=off")


def test_a_users_measurement_under_torchrun_is_rank_aware(pytester: pytest.Pytester) -> None:
    """Barrier per block, the slowest rank counts, agreed stops: both ranks report rank 1's time, with one table."""
    pytester.makeconftest(INSTALL)
    pytester.makepyfile(test_ranks=RANKS_MEASURE)
    done = torchrun(pytester, 2, "--gpuperf-device=cpu", *FAST)
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = [json.loads((pytester.path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1], "the same blocks, the same stop, the same (slowest) times on every rank"
    assert ranks[0]["median"] == pytest.approx(600e-6, rel=0.1)
    assert done.stdout.count("gpuperf results") == 1  # only rank 0 reports


def test_ranks_measuring_different_things_are_refused_not_hung(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ranks=RANKS_MEASURE)
    env_name = {"GPUPERF_TEST_NAME_1": "other"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    command += ["-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--gpuperf-device=cpu", *FAST]
    done = subprocess.run(
        command,
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env_name},
    )
    assert done.returncode != 0
    assert "measuring different things at once (rank 0: test_ranks.py::test_ranks[cpu] step; rank 1: " in done.stdout
    assert "run torchrun with -p no:randomly" in done.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_two_nodes_by_c10d_rendezvous_measure_as_one_world(pytester: pytest.Pytester) -> None:
    """Multi-node torchrun, as two launches on 127.0.0.1 (one per "node"), gloo: one world, rank 0 reports."""
    pytester.makeconftest(INSTALL)
    pytester.makepyfile(test_ranks=RANKS_MEASURE)
    endpoint = f"127.0.0.1:{free_port()}"
    launches = []
    for node in (0, 1):
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={node}"]
        command += ["--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=gpuperf"]
        command += ["-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--gpuperf-device=cpu", *FAST]
        launches.append(
            subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    outputs = [launch.communicate(timeout=180)[0] for launch in launches]
    assert [launch.returncode for launch in launches] == [0, 0], "\n".join(outputs)
    ranks = [json.loads((pytester.path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1] and ranks[0]["median"] == pytest.approx(600e-6, rel=0.1)
    assert sum(out.count("gpuperf results") for out in outputs) == 1
