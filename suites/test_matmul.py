"""Matmul throughput per dtype and size, each as a percentage of the device's own measured peak.

The reference peak is the fastest supported dtype at the sweep's largest size, measured
once per session per device by ``test_matmul_peak``, which ``conftest.py`` moves ahead
of the tests that compare with it (whatever order a plugin chose). Its records belong to
``test_matmul_peak`` only, whichever test needed the peak first (``conftest.matmul_peak``). The sweep's smaller
sizes are each timed in interleaved rounds with that peak operation, so their fraction
of the peak is a paired estimate that a change of load on the machine does not bias."""

from __future__ import annotations

from typing import Final

import pytest

from pytest_gpuperf import Gpuperf

from .conftest import PeakOp
from .support import expectations, fraction_of_reference, percent
from .workloads import MATMUL_DTYPES, MATMUL_SWEEP, matmul_step, matmul_unsupported

#: On any healthy device the best dtype at half the largest size reaches at least this
#: fraction of the peak: a GEMM of n/2 (512 on a CPU, 8192 on a GPU) still fills the
#: device; below it the device is throttling, shared, or misconfigured (threads, BLAS).
FRACTION_OF_PEAK: Final = 0.5
SCALES: Final = {"half": 2, "quarter": 4}


def test_matmul_peak(gpuperf: Gpuperf, matmul_peak: PeakOp) -> None:
    """Measure the reference peak; on CUDA at the large preset, hold each dtype to its datasheet floor."""
    if gpuperf.slot.kind != "cuda" or gpuperf.size != "large":
        gpuperf.note(
            f"reference peak {matmul_peak.dtype} n={matmul_peak.n}; datasheet floors apply to CUDA devices "
            f"at --gpuperf-size=large only (this run: {gpuperf.slot.id}, {gpuperf.size})"
        )
        return
    device_name = str(gpuperf.backend.describe().get("name", gpuperf.slot.id))
    floors = expectations().for_device(device_name)
    if floors is None:
        why = (
            expectations().why_none(device_name) or f"no datasheet floors for {device_name!r} in {expectations().path}"
        )
        gpuperf.note(f"{why}; nothing asserted")
        return
    for record in gpuperf.records:
        floor = floors.floor(f"matmul_{record.params['dtype']}")
        if floor is not None:
            record.measurement.assert_throughput(at_least=floor)


@pytest.mark.parametrize("scale", list(SCALES))
@pytest.mark.parametrize("dtype", MATMUL_DTYPES)
def test_matmul(gpuperf: Gpuperf, matmul_peak: PeakOp, dtype: str, scale: str) -> None:
    why = matmul_unsupported(gpuperf.device, dtype)
    if why:
        pytest.skip(f"matmul {dtype} on {gpuperf.slot.id}: {why}")
    n = MATMUL_SWEEP[gpuperf.size][-1] // SCALES[scale]
    fraction = fraction_of_reference(
        gpuperf,
        matmul_step(gpuperf.device, dtype, n),
        matmul_step(gpuperf.device, matmul_peak.dtype, matmul_peak.n),
        unit="FLOP",
        name=f"n={n}",
        what=f"matmul {dtype} n={n} as a fraction of the reference peak",
    )
    if dtype == matmul_peak.dtype and scale == "half":
        gpuperf.expect(fraction, at_least=FRACTION_OF_PEAK, record=f"n={n}")
    else:
        gpuperf.note(
            f"matmul {dtype} n={n} reaches {percent(fraction.value)} of the peak "
            f"({matmul_peak.dtype} n={matmul_peak.n}; CI [{percent(fraction.low)}, {percent(fraction.high)}]); "
            "not asserted: only the peak's own dtype at half size has a device-independent expected fraction"
        )
