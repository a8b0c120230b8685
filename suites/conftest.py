"""Suite-wide sampling defaults, the torch the suites need, and the per-device matmul reference peak."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import pytest
import torch

from pytest_gpuperf import Gpuperf, Quantity, Step, user_settings

# Only .compat here: the suites' other modules use torch APIs an older torch lacks (torch 2.2 has no
# torch.nn.attention), and an import error in a conftest is a traceback, not the refusal with the fix
# that pytest_configure gives. The fixtures import the workloads when they run.
from .compat import check_torch

#: Sampling for the suites unless the command line or ini sets it: short enough that the
#: whole CPU run takes a few minutes on two cores, long enough for a 3% CI on a quiet GPU.
#: A test module may raise these for its own tests with a module-level ``SAMPLING`` dict.
SUITE_SAMPLING: Final = {"max_time": "2 s", "warmup_time": "0.5 s", "target": "3%"}
_HERE: Final = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    """Refuse, with the fix, a torch older than the suites need (a --no-deps install can bring one)."""
    why = check_torch(str(torch.__version__))
    if why:
        raise pytest.UsageError(why)


#: The tests that measure and record a per-device reference (each once per session and device); they run first.
REFERENCE_TESTS: Final = ("test_matmul_peak", "test_bandwidth_reference")


def _reference_test(item: pytest.Item) -> str | None:
    name = getattr(item, "originalname", "")
    return name if item.path.is_relative_to(_HERE) and name in REFERENCE_TESTS else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give suite tests the suite's sampling defaults for each setting the user did not choose (CLI or ini win),
    and measure each device's reference peak before the tests that compare with it."""
    # trylast: after any plugin that reorders (pytest-randomly shuffles), so that in any order the peak comes
    # first, its records always belong to test_matmul_peak and the datasheet floors are always checked there.
    items.sort(key=lambda item: _reference_test(item) is None)
    chosen = user_settings(config)  # on the command line or in ini
    for item in items:
        # This hook sees the whole session's items; only the suites' own tests get the defaults.
        if not item.path.is_relative_to(_HERE):
            continue
        wanted = {**SUITE_SAMPLING, **getattr(getattr(item, "module", None), "SAMPLING", {})}
        defaults = {key: value for key, value in wanted.items() if key not in chosen}
        if defaults:
            # Appended, so a test's own @pytest.mark.gpuperf(...) still takes precedence.
            item.add_marker(pytest.mark.gpuperf(**defaults), append=True)


@dataclass(frozen=True)
class PeakOp:
    """The device's reference peak: the fastest matmul dtype at the sweep's largest size."""

    dtype: str
    n: int
    flops_per_second: float
    #: Whether its measurements were recorded (by ``test_matmul_peak``, the only test that records them).
    recorded: bool = False


PEAKS: Final = pytest.StashKey[dict[str, PeakOp]]()


def measure_peak(gpuperf: Gpuperf, *, record: bool) -> PeakOp:
    """Every supported dtype at the largest size, in interleaved rounds; the fastest is the reference peak.

    With ``record`` the dtypes' measurements become the test's records, one per dtype."""
    from .workloads import MATMUL_DTYPES, MATMUL_SWEEP, matmul_step, matmul_unsupported

    n = MATMUL_SWEEP[gpuperf.size][-1]
    dtypes = [d for d in MATMUL_DTYPES if matmul_unsupported(gpuperf.device, d) is None]
    steps = {dtype: matmul_step(gpuperf.device, dtype, n) for dtype in dtypes}
    best, flops = _fastest(gpuperf, steps, "FLOP", record=record)
    gpuperf.offer_reference_peak(flops, f"matmul {best} n={n}, {Quantity(flops, 'FLOP/s')} median")
    datasheet = datasheet_peak(gpuperf, best)
    if datasheet is not None:
        gpuperf.offer_reference_peak(*datasheet, source="datasheet")
    return PeakOp(best, n, flops, recorded=record)


def datasheet_peak(gpuperf: Gpuperf, dtype: str) -> tuple[float, str] | None:
    """The vendor's matmul peak of ``dtype`` on a CUDA device that ``expectations.json`` knows: the 100% of the
    "% peak" column there (a fraction of the best measured figure is no fraction of the device's peak)."""
    if gpuperf.slot.kind != "cuda":
        return None
    from .support import expectations

    name = str(gpuperf.backend.describe().get("name", gpuperf.slot.id))
    floors = expectations().for_device(name)
    figure = None if floors is None else floors.datasheet.get(f"matmul_{dtype}")
    if floors is None or figure is None:
        return None
    return figure.value, f"{floors.key} datasheet: matmul_{dtype} {figure} dense, from {floors.source!r}"


@pytest.fixture
def matmul_peak(request: pytest.FixtureRequest, gpuperf: Gpuperf) -> PeakOp:
    """This device's reference peak, measured once per session per device.

    Its records always belong to ``test_matmul_peak``, whichever test needs the peak first
    (``-k``, ``--lf`` or pytest-xdist can leave it out, or run it later): a record's name
    keys baselines, the gate and asv's history, so it must not follow the test order.
    Another test measures the peak without recording it; ``test_matmul_peak`` then measures
    it again, to record it."""
    return _once_per_device(request, gpuperf, PEAKS, "test_matmul_peak", measure_peak)


def _fastest(gpuperf: Gpuperf, steps: Mapping[str, Step], unit: str, *, record: bool) -> tuple[str, float]:
    """``steps`` in interleaved rounds (their measurements the test's records with ``record``), each step's check
    run after them; the fastest step's name and its median throughput in ``unit`` per second."""
    rounds = gpuperf.paired(steps, record=None if record else [])
    for step in steps.values():
        if step.check is not None:
            step.check()
    best = max(steps, key=lambda name: rounds.measurements[name].throughput(unit).value)
    return best, rounds.measurements[best].throughput(unit).value


Reference = TypeVar("Reference", "PeakOp", "BandwidthOp")


def _once_per_device(
    request: pytest.FixtureRequest,
    gpuperf: Gpuperf,
    key: pytest.StashKey[dict[str, Reference]],
    owner: str,
    measure: Callable[..., Reference],
) -> Reference:
    """A device's reference, measured once per session; measured (again) with its records in test ``owner``, the
    only test whose records they may be, and without records in any other test that needs it first."""
    known_by_device = request.config.stash.setdefault(key, {})
    owns = _reference_test(request.node) == owner
    known = known_by_device.get(gpuperf.slot.id)
    if known is None or (owns and not known.recorded):
        known_by_device[gpuperf.slot.id] = measure(gpuperf, record=owns)
    return known_by_device[gpuperf.slot.id]


@dataclass(frozen=True)
class BandwidthOp:
    """The device's bandwidth reference: the faster memory-bound op (``BANDWIDTH_OPS``) at the preset's size."""

    op: str
    nbytes: int
    bytes_per_second: float
    #: Whether its measurements were recorded (by ``test_bandwidth_reference``, the only test that records them).
    recorded: bool = False


BANDWIDTHS: Final = pytest.StashKey[dict[str, BandwidthOp]]()


def measure_bandwidth(gpuperf: Gpuperf, *, record: bool) -> BandwidthOp:
    """Each bandwidth op at the preset's size, in interleaved rounds; the faster one is the bandwidth reference.

    With ``record`` the ops' measurements become the test's records, one per op."""
    from .workloads import BANDWIDTH_BYTES, BANDWIDTH_OPS, bandwidth_step

    nbytes = BANDWIDTH_BYTES[gpuperf.size]
    steps = {op: bandwidth_step(gpuperf.device, op, nbytes) for op in BANDWIDTH_OPS}
    best, rate = _fastest(gpuperf, steps, "B", record=record)
    return BandwidthOp(best, nbytes, rate, recorded=record)


@pytest.fixture
def bandwidth_reference(request: pytest.FixtureRequest, gpuperf: Gpuperf) -> BandwidthOp:
    """This device's bandwidth reference, measured once per session per device, as ``matmul_peak`` is.

    Its records belong to ``test_bandwidth_reference`` only, whichever test needs it first."""
    return _once_per_device(request, gpuperf, BANDWIDTHS, "test_bandwidth_reference", measure_bandwidth)
