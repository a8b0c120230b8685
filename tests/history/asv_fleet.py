"""The writers of test_asv.py's fleet test, in a module that imports no torch: each writer is a spawned interpreter,
which imports the module of its target first, and on a busy machine importing torch took seconds per interpreter."""

from __future__ import annotations

from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Final

from pytest_gpuperf.history import Commit, write_results
from pytest_gpuperf.results import Record
from tests.synthetic import make_measurement, make_run

EIGHT: Final = (1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98)  # the fewest samples a 99% interval of the median needs


def write_many(directory: str, worker: int, start: Barrier) -> None:
    """Writer ``worker``'s 15 runs of one test each, into one asv results directory, on one of two machines."""
    start.wait(timeout=120)  # all writers begin together, however long each took to start
    for i in range(15):
        test = f"t.py::test_w{worker}_{i}[cpu]"
        measurement = make_measurement(test, EIGHT, device_name="a cpu", iterations=3, sampling_seconds=0.5)
        run = make_run(Record(test=test, device="cpu", measurement=measurement))
        write_results(Path(directory), run, machine=f"m{worker % 2}", commit=Commit("d" * 40, 1))
