"""The results table's "per joule" column beside throughput, and the line under it that says once per device why
records have no energy figure."""

from __future__ import annotations

import dataclasses

from pytest_gpuperf.measuring._energy import ENERGY, EnergySummary
from pytest_gpuperf.results import Record, results_table
from tests.synthetic import make_measurement, samples_around

#: 70 J over 0.1 s and 1000 calls: 70 mJ per call, 700 W
NVML = EnergySummary("nvml 0 total energy", joules=70.0, seconds=0.1, calls=1000, timed_seconds=0.095, error=0.02)
NO_RAPL = EnergySummary("", note="no RAPL package zone under /sys/class/powercap")


def per_joule_cell(record: Record) -> str:
    """The record's cell in the "per joule" column."""
    return ENERGY.cell(record.measurement) or "-"


def energy_lines(records: list[Record]) -> list[str]:
    """The lines under the table of these records that the energy reading writes."""
    return ENERGY.notes([r.measurement for r in records])


def record(device: str, energy: EnergySummary | None, work: dict[str, float] | None = None) -> Record:
    test = f"suites/test_x.py::test_mlp[{device}]"
    m = make_measurement(test, samples_around(1e-3), device=device, work=work or {"samples": 256.0}, energy=energy)
    return Record(test=test, device=device, measurement=m, params={})


def test_samples_per_joule_beside_samples_per_second() -> None:
    gpu = record("cuda:0", NVML)
    assert NVML.joules_per_call == 0.07 and NVML.watts == 700.0
    assert per_joule_cell(gpu) == "3.657k samples/J"  # 256 samples / 0.07 J
    assert per_joule_cell(record("cuda:0", NVML, {"FLOP": 7e9})) == "100 GFLOP/J"
    assert per_joule_cell(dataclasses.replace(gpu, measurement=dataclasses.replace(gpu.measurement, work={}))) == (
        "0.07 J/call"
    )
    header, _, line = results_table([gpu, record("cpu", NO_RAPL)]).splitlines()[:3]
    assert header.index("throughput") < header.index("per joule") < header.index("peak mem")
    assert "256k samples/s" in line and "3.657k samples/J" in line


def test_no_column_without_a_figure_and_one_line_per_device_that_says_why() -> None:
    cpu = [record("cpu", NO_RAPL) for _ in range(3)]
    assert "per joule" not in results_table(cpu)
    assert energy_lines(cpu) == ["energy: none on cpu: no RAPL package zone under /sys/class/powercap"]
    short = EnergySummary("nvml 0 total energy", note="the counter stepped 1 time(s) in the 0.05 s ...")
    gpu = [record("cuda:0", NVML), record("cuda:0", short)]
    assert energy_lines(gpu) == [
        "energy: none for 1 of 2 records on cuda:0: the counter stepped 1 time(s) in the 0.05 s ..."
    ]
    assert energy_lines([record("cpu", None)]) == []  # not read (paired rounds, a file from before): nothing
