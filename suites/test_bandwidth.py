"""Memory bandwidth (B/s of the bytes an operation reads and writes), as a fraction of the device's own reference.

The bandwidth reference is the faster of a device-to-device copy and ``y = a*x + y``
(``BANDWIDTH_OPS``) over buffers of the preset's size, measured once per session per
device by ``test_bandwidth_reference`` (``conftest.bandwidth_reference``, as the matmul
peak is), which ``conftest.py`` moves ahead of the tests that compare with it. On CUDA at
``--gpuperf-size=large`` the reference test holds the copy to its datasheet floor
(``suites/expectations.json``, block ``bandwidth``). Each op at half the size is timed in
the same rounds as the reference op, so its fraction of the reference is a paired
estimate; the table's ``% peak`` column is FLOP-based, so these fractions are notes.

Host-device copies (pinned against pageable) are in ``test_copy.py``.
"""

from __future__ import annotations

from typing import Final

import pytest

from pytest_gpuperf import Estimate, Gpuperf, Quantity

from .conftest import BandwidthOp
from .support import expectations, fraction_of_reference, percent
from .workloads import BANDWIDTH_OPS, bandwidth_step

#: On any healthy device the reference op at half the size moves at least this fraction of the reference's B/s:
#: both sizes stream through memory (far beyond a GPU's L2; on a CPU whose cache holds them, both from cache), so
#: only a device that throttles, is shared or falls back to a slow kernel between the two misses it.
FRACTION_OF_REFERENCE: Final = 0.5
#: The datasheet workload the floor applies to.
FLOOR_WORKLOAD: Final = "bandwidth_d2d_copy"


def hold_to_datasheet(gpuperf: Gpuperf, device_name: str) -> None:
    """Assert the recorded copy's B/s against its datasheet floor, or note why there is none."""
    __tracebackhide__ = True
    table = expectations("bandwidth")
    floors = table.for_device(device_name)
    if floors is None:
        why = table.why_none(device_name) or f"no datasheet bandwidth for {device_name!r} in {table.path}"
        gpuperf.note(f"{why}; nothing asserted")
        return
    floor = floors.floor(FLOOR_WORKLOAD)
    for record in gpuperf.records:
        if floor is not None and record.params.get("op") == "d2d_copy":
            gpuperf.note(
                f"d2d_copy floor: {percent(floors.fraction)} of the datasheet's {floors.datasheet[FLOOR_WORKLOAD]} "
                f"({floors.source}) = {floor}"
            )
            record.measurement.assert_throughput(at_least=floor)


def test_bandwidth_reference(gpuperf: Gpuperf, bandwidth_reference: BandwidthOp) -> None:
    """Measure the bandwidth reference; on CUDA at the large preset, hold the copy to its datasheet floor."""
    summary = (
        f"bandwidth reference {bandwidth_reference.op} over {bandwidth_reference.nbytes >> 20} MiB buffers, "
        f"{Quantity(bandwidth_reference.bytes_per_second, 'B/s')} median"
    )
    if gpuperf.slot.kind != "cuda" or gpuperf.size != "large":
        gpuperf.note(
            f"{summary}; datasheet floors apply to CUDA devices at --gpuperf-size=large only "
            f"(this run: {gpuperf.slot.id}, {gpuperf.size})"
        )
        return
    gpuperf.note(summary)
    hold_to_datasheet(gpuperf, str(gpuperf.backend.describe().get("name", gpuperf.slot.id)))


def judge(gpuperf: Gpuperf, op: str, reference: BandwidthOp, fraction: Estimate, record: str) -> None:
    """Assert the reference op's fraction at half size (the check in the op's ``record``); note the other op's, with
    why it is not asserted."""
    __tracebackhide__ = True
    if op == reference.op:
        gpuperf.expect(fraction, at_least=FRACTION_OF_REFERENCE, record=record)
        return
    gpuperf.note(
        f"{fraction.what}: {percent(fraction.value)} (reference {reference.op} over {reference.nbytes >> 20} MiB; "
        f"CI [{percent(fraction.low)}, {percent(fraction.high)}]); not asserted: a copy and y = a*x + y load the "
        "memory differently (two read streams per write; a CPU's write-allocate reads a copy's destination, which "
        "the count leaves out), so how their B/s compare depends on the device"
    )


@pytest.mark.parametrize("op", BANDWIDTH_OPS)
def test_bandwidth(gpuperf: Gpuperf, bandwidth_reference: BandwidthOp, op: str) -> None:
    nbytes = bandwidth_reference.nbytes // 2
    name = f"bytes={nbytes}"
    fraction = fraction_of_reference(
        gpuperf,
        bandwidth_step(gpuperf.device, op, nbytes),
        bandwidth_step(gpuperf.device, bandwidth_reference.op, bandwidth_reference.nbytes),
        unit="B",
        name=name,
        what=f"{op} over {nbytes >> 20} MiB as a fraction of the bandwidth reference",
    )
    judge(gpuperf, op, bandwidth_reference, fraction, name)
