"""The results table's flags for what a CUDA sample is made of: host-bound steps and short leads."""

from __future__ import annotations

from pytest_gpuperf.measuring import Measurement
from pytest_gpuperf.results import Record, flags
from tests.synthetic import make_measurement


def on_gpu(**fields: object) -> Record:
    m = make_measurement("suites/test_x.py::test_loader[cuda:0]", [10.1e-3] * 12, device="cuda:0", **fields)
    return Record(test=m.name, device="cuda:0", measurement=m)


def test_a_host_bound_step_shows_its_host_and_device_times() -> None:
    record = on_gpu(host_per_call=10.1e-3, device_per_call=4e-3)
    assert flags(record) == "host-bound (host 10.1 ms/call, device 4 ms/call)"
    assert flags(on_gpu(host_per_call=50e-6, device_per_call=10.1e-3)) == ""  # device-bound: the samples are its


def test_short_leads_are_counted_among_the_samples() -> None:
    assert flags(on_gpu(host_per_call=50e-6, device_per_call=10.1e-3, short_leads=2)) == "short lead 2/12"


def test_the_new_fields_round_trip_and_older_files_read_their_samples_as_device_time() -> None:
    m = on_gpu(host_per_call=10.1e-3, device_per_call=4e-3, short_leads=1, latency=True).measurement
    again = Measurement.from_dict(m.to_dict())
    assert (again.device_per_call, again.short_leads, again.latency) == (4e-3, 1, True)
    older = {k: v for k, v in m.to_dict().items() if k not in ("device_per_call", "short_leads", "latency")}
    old = Measurement.from_dict({**older, "host_per_call": 20e-3})
    assert old.device_per_call is None and old.short_leads == 0 and not old.latency
    assert old.host_bound  # its samples (10.1 ms) were device time, below its 20 ms of host time
