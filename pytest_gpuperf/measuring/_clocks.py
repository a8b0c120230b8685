"""GPU clocks while measuring: NVML read after every block, throttled samples flagged.

A sample timed while the GPU ran below its clocks measures the throttling, not the
code. NVML (``pip install nvidia-ml-py``, imported as ``pynvml``) says what the clocks
were: after every block, outside the timed region, one reading of the SM and memory
clocks, the temperature, the power and the clocks-event (throttle) reasons (5 NVML
calls; 12.7 us together on an H100). Each field is read on its own: a call the GPU or
driver does not support (power on a vGPU, a field a MIG instance does not report) leaves
that field None and the others stand.

A GPU's clocks have a normal state that is often below its maximum: a heavy bf16 matmul
keeps an H100 power-capped at 1425 of its 1980 MHz with only ``sw_power_cap`` set, and
clocks locked on purpose (``nvidia-smi --lock-gpu-clocks``, application clocks) sit where
they were set. Neither is throttling. So a reading is *throttled* when a slowdown reason
is set (hardware slowdown, software or hardware thermal slowdown, hardware power brake),
or when its SM clock fell below ``threshold`` (``--gpuperf-throttle-threshold``, default
0.75) of the measurement's own median SM clock: a dip below the state the measurement ran
in, not a distance from a maximum the GPU may never run at. Whether a *change* between two
runs is the clocks' is the gate's question, and it answers it from the two sides' median
SM clocks (``gate/_compare.py``), not from these flags.

A summary lists every reason seen but ``gpu_idle``: a reading follows its block's synchronization, on the drained
GPU, where NVML sets it in most readings, and it slows nothing (``UNLISTED_REASONS``).

Throttled samples are flagged, not dropped: dropping them could measure nothing (nvbench
issue 231: "GPU throttle detection leads to empty benchmarks"). The Measurement keeps
which samples were throttled, so no interval is ever claimed from samples that were
thrown away, and the results table flags the record.

The NVML device is the CUDA device's by UUID (torch gives ``3edc53b4-...``, NVML
``GPU-3edc53b4-...``), else by PCI bus id; never by index, which differs under
``CUDA_VISIBLE_DEVICES``. Without NVML, without a driver, or without a match there is
no monitor (None), and the measurement has no clock summary. NVML is reached through a
module object passed in, so tests drive every path with a stand-in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ._backends import Backend, CudaBackend
from ._devices import torch_of
from ._reading import Around, Reading
from ._settings import THROTTLE_THRESHOLD
from ._stats import median
from ._values import optional

if TYPE_CHECKING:
    from ._measurement import Measurement

_T = TypeVar("_T")

__all__ = [
    "CLOCKS",
    "THROTTLE_REASONS",
    "THROTTLING_REASONS",
    "UNLISTED_REASONS",
    "ClockMonitor",
    "ClockReading",
    "ClockSummary",
    "NvmlMatch",
    "clock_monitor",
    "import_nvml",
    "match_nvml_device",
    "nvml_field",
    "read_clocks",
    "same_uuid",
    "throttle_names",
]

#: NVML clocks-event (throttle) reason bits, by name.
THROTTLE_REASONS: Final[dict[int, str]] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: The reasons that make a reading throttled whatever the clock (nvbench's set).
THROTTLING_REASONS: Final = 0x8 | 0x20 | 0x40 | 0x80
#: The reasons a summary does not list: no slowdown. NVML sets ``gpu_idle`` where no work runs on the GPU and its
#: clocks fall toward idle; a reading taken after a block, once it was synchronized, finds the GPU drained, so it
#: is set in most. Every other reason of NVML's reference limits the clocks under work (a setting, a cap, a slowdown).
UNLISTED_REASONS: Final = 0x1


def throttle_names(bits: int) -> list[str]:
    """Names of the NVML throttle-reason bits set in ``bits``; unknown bits as hex."""
    names = [name for bit, name in THROTTLE_REASONS.items() if bits & bit]
    unknown = bits & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(hex(unknown))
    return names


def import_nvml() -> Any:
    """The ``pynvml`` module of nvidia-ml-py, or None when it is not installed."""
    try:
        return __import__("pynvml")
    except ImportError:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _uuid_key(value: Any) -> str:
    text = _text(value).strip().lower()
    return text[len("gpu-") :] if text.startswith("gpu-") else text


def same_uuid(a: Any, b: Any) -> bool:
    """Whether two GPU UUIDs are the same: torch's bare ``3edc53b4-...`` equals NVML's ``GPU-3edc53b4-...``."""
    return a is not None and b is not None and _uuid_key(a) == _uuid_key(b) != ""


# ---------------------------------------------------------------- which NVML device


@dataclass(frozen=True)
class NvmlMatch:
    """The NVML device that is a CUDA device, and how that was established (``uuid`` or ``pci bus id``)."""

    index: int
    handle: Any
    how: str


def _cuda_pci(props: Any) -> tuple[int, int, int] | None:
    try:
        return int(props.pci_domain_id), int(props.pci_bus_id), int(props.pci_device_id)
    except (AttributeError, TypeError, ValueError):
        return None


def _nvml_pci(pynvml: Any, handle: Any) -> tuple[int, int, int] | None:
    try:
        info = pynvml.nvmlDeviceGetPciInfo(handle)
        return int(info.domain), int(info.bus), int(info.device)
    except Exception:  # noqa: BLE001 - an unreadable bus id matches nothing
        return None


def match_nvml_device(pynvml: Any, props: Any) -> NvmlMatch | None:
    """The NVML device of the CUDA device with properties ``props`` (``torch.cuda.get_device_properties``):
    by UUID, else by PCI bus id, else None. Never by index: under ``CUDA_VISIBLE_DEVICES=5`` CUDA's device 0
    is NVML's device 5. ``pynvml`` must be initialized."""
    uuid = getattr(props, "uuid", None)
    pci = _cuda_pci(props)
    handles = []
    for index in range(int(pynvml.nvmlDeviceGetCount())):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        handles.append((index, handle))
        try:
            if same_uuid(uuid, pynvml.nvmlDeviceGetUUID(handle)):
                return NvmlMatch(index, handle, "uuid")
        except Exception:  # noqa: BLE001 - this device's UUID is unreadable: try the next one
            continue
    if pci is not None:
        for index, handle in handles:
            if _nvml_pci(pynvml, handle) == pci:
                return NvmlMatch(index, handle, "pci bus id")
    return None


# ---------------------------------------------------------------- readings


@dataclass(frozen=True)
class ClockReading:
    """One NVML reading of a GPU; a field NVML did not answer is None."""

    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    temperature_c: int | None
    #: ``nvmlDeviceGetPowerUsage``: on Ampere (GA100 excepted) and newer GPUs the mean over the last second, on
    #: older ones the power at that moment (NVML's reference)
    power_w: float | None
    #: NVML clocks-event reason bits, all of them (``throttle_names`` names them)
    reasons: int | None

    def throttled(self, reference_mhz: float | None, threshold: float = THROTTLE_THRESHOLD) -> bool:
        """A slowdown reason is set, or the SM clock is below ``threshold`` of ``reference_mhz`` (the
        measurement's median SM clock, when known). The power cap and clock settings are no reason."""
        if (self.reasons or 0) & THROTTLING_REASONS:
            return True
        if not reference_mhz or self.sm_clock_mhz is None:
            return False
        return self.sm_clock_mhz < threshold * reference_mhz

    @property
    def empty(self) -> bool:
        """NVML answered none of the calls."""
        return all(v is None for v in dataclasses.astuple(self))


def nvml_field(read: Callable[[], Any], convert: Callable[[Any], _T]) -> _T | None:
    """One NVML field, or None when its call fails: a call one GPU does not support loses only that field."""
    try:
        return convert(read())
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and kin: that field is unknown
        return None


def _reasons_call(pynvml: Any) -> Any:
    if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        return pynvml.nvmlDeviceGetCurrentClocksEventReasons
    return pynvml.nvmlDeviceGetCurrentClocksThrottleReasons  # nvidia-ml-py before 12.535 names it after throttling


def read_clocks(pynvml: Any, handle: Any) -> ClockReading:
    """Read the clocks, temperature, power and clocks-event reasons of one NVML device (5 NVML calls), each on its
    own: a failing call leaves its field None."""
    reasons = nvml_field(lambda: _reasons_call(pynvml)(handle), int)
    return ClockReading(
        sm_clock_mhz=nvml_field(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM), int),
        mem_clock_mhz=nvml_field(lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM), int),
        temperature_c=nvml_field(lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU), int),
        power_w=nvml_field(lambda: pynvml.nvmlDeviceGetPowerUsage(handle), lambda mw: float(mw) / 1000.0),
        reasons=reasons,
    )


# ---------------------------------------------------------------- the summary a Measurement keeps


@dataclass(frozen=True)
class ClockSummary:
    """The GPU's clocks over a measurement's samples: one reading after each sample's block. A figure no reading
    had (NVML did not answer that call on this GPU) is None."""

    #: readings taken (one per sample; fewer if NVML failed to answer)
    readings: int
    sm_clock_mhz_min: int | None
    sm_clock_mhz_median: float | None
    sm_clock_mhz_max: int | None
    mem_clock_mhz_min: int | None
    mem_clock_mhz_max: int | None
    temperature_c_max: int | None
    #: the largest of the readings' power (``ClockReading.power_w``): on Ampere (GA100 excepted) and newer GPUs the
    #: largest one-second average, no peak of the draw
    power_w_max: float | None
    #: the device's maximum SM clock (None: NVML did not say)
    max_sm_clock_mhz: int | None
    #: every clocks-event reason seen in any reading, but those that are no slowdown (``UNLISTED_REASONS``)
    reasons: tuple[str, ...]
    #: indices into the Measurement's samples of those whose reading was throttled
    throttled_samples: tuple[int, ...] = ()
    #: a sample is throttled below this fraction of the median SM clock (``--gpuperf-throttle-threshold``)
    threshold: float = THROTTLE_THRESHOLD
    #: which NVML device was read and how it was matched, such as ``"nvml 5 (uuid)"``
    source: str = ""

    @property
    def throttled(self) -> int:
        """How many samples were throttled."""
        return len(self.throttled_samples)

    @classmethod
    def of(
        cls,
        readings: Sequence[ClockReading | None],
        max_sm_clock_mhz: int | None,
        threshold: float = THROTTLE_THRESHOLD,
        source: str = "",
    ) -> ClockSummary | None:
        """The summary of one reading per sample (None where NVML did not answer); None without any reading."""
        seen = [r for r in readings if r is not None and not r.empty]
        if not seen:
            return None

        def values(name: str) -> list[Any]:
            return [v for v in (getattr(r, name) for r in seen) if v is not None]

        sm, mem = values("sm_clock_mhz"), values("mem_clock_mhz")
        temperature, power = values("temperature_c"), values("power_w")
        bits = 0
        for r in seen:
            bits |= r.reasons or 0
        middle = median(sm) if sm else None
        return cls(
            readings=len(seen),
            sm_clock_mhz_min=min(sm, default=None),
            sm_clock_mhz_median=middle,
            sm_clock_mhz_max=max(sm, default=None),
            mem_clock_mhz_min=min(mem, default=None),
            mem_clock_mhz_max=max(mem, default=None),
            temperature_c_max=max(temperature, default=None),
            power_w_max=max(power, default=None),
            max_sm_clock_mhz=max_sm_clock_mhz,
            reasons=tuple(throttle_names(bits & ~UNLISTED_REASONS)),
            throttled_samples=tuple(
                i for i, r in enumerate(readings) if r is not None and r.throttled(middle, threshold)
            ),
            threshold=threshold,
            source=source,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "readings": self.readings,
            "sm_clock_mhz": {
                "min": self.sm_clock_mhz_min,
                "median": self.sm_clock_mhz_median,
                "max": self.sm_clock_mhz_max,
            },
            "mem_clock_mhz": {"min": self.mem_clock_mhz_min, "max": self.mem_clock_mhz_max},
            "temperature_c_max": self.temperature_c_max,
            "power_w_max": self.power_w_max,
            "max_sm_clock_mhz": self.max_sm_clock_mhz,
            "reasons": list(self.reasons),
            "throttled": self.throttled,
            "throttled_samples": list(self.throttled_samples),
            "threshold": self.threshold,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ClockSummary | None:
        if not isinstance(data, Mapping):
            return None
        sm, mem = data.get("sm_clock_mhz") or {}, data.get("mem_clock_mhz") or {}
        unlisted = throttle_names(UNLISTED_REASONS)  # records written before they were left out list them
        return cls(
            readings=int(data.get("readings", 0)),
            sm_clock_mhz_min=optional(sm.get("min"), int),
            sm_clock_mhz_median=optional(sm.get("median"), float),
            sm_clock_mhz_max=optional(sm.get("max"), int),
            mem_clock_mhz_min=optional(mem.get("min"), int),
            mem_clock_mhz_max=optional(mem.get("max"), int),
            temperature_c_max=optional(data.get("temperature_c_max"), int),
            power_w_max=optional(data.get("power_w_max"), float),
            max_sm_clock_mhz=optional(data.get("max_sm_clock_mhz"), int),
            reasons=tuple(str(r) for r in data.get("reasons") or () if str(r) not in unlisted),
            throttled_samples=tuple(int(i) for i in data.get("throttled_samples") or ()),
            threshold=float(data.get("threshold", THROTTLE_THRESHOLD)),
            source=str(data.get("source", "")),
        )


# ---------------------------------------------------------------- the monitor


@dataclass
class ClockMonitor:
    """Reads one NVML device on demand and keeps every reading, in order (None where NVML failed)."""

    nvml: Any
    match: NvmlMatch
    max_sm_clock_mhz: int | None
    threshold: float = THROTTLE_THRESHOLD
    readings: list[ClockReading | None] = field(default_factory=list)

    def read(self) -> ClockReading | None:
        """One reading, appended to ``readings``; None where NVML answered none of its calls. A failing NVML call
        never fails the measurement."""
        try:
            reading: ClockReading | None = read_clocks(self.nvml, self.match.handle)
        except Exception:  # noqa: BLE001 - a lost reading must not lose the measurement
            reading = None
        if reading is not None and reading.empty:
            reading = None
        self.readings.append(reading)
        return reading

    def summary(self, samples: int) -> ClockSummary | None:
        """The summary of the last ``samples`` readings: those of the samples (the warmup's blocks come first)."""
        last = self.readings[-samples:] if samples > 0 else []
        source = f"nvml {self.match.index} ({self.match.how})"
        return ClockSummary.of(last, self.max_sm_clock_mhz, self.threshold, source)

    # The monitor is the clocks' Sensor: one reading after every block, the summary of the samples' readings.

    def after_block(self, iterations: int, seconds: float) -> None:
        self.read()

    def value(self, samples: int) -> ClockSummary | None:
        return self.summary(samples)


def _max_sm_clock(pynvml: Any, handle: Any) -> int | None:
    """Recorded for the reader only (the throttle test needs no maximum); None where NVML does not say."""
    return nvml_field(lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM), int) or None


@contextmanager
def clock_monitor(
    backend: Backend, *, nvml_module: Any = None, threshold: float = THROTTLE_THRESHOLD
) -> Iterator[ClockMonitor | None]:
    """A ClockMonitor of a CUDA backend's device for the block, NVML initialized meanwhile; None for other
    backends, without nvidia-ml-py, when NVML does not start, or when no NVML device is the CUDA device."""
    if not isinstance(backend, CudaBackend):
        yield None
        return
    pynvml = nvml_module if nvml_module is not None else import_nvml()
    if pynvml is None:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver or library: measure without clocks
        yield None
        return
    try:
        monitor = _open(pynvml, backend, threshold)
        yield monitor
    finally:
        with suppress(Exception):  # nothing to do about a failing shutdown
            pynvml.nvmlShutdown()


def _open(pynvml: Any, backend: CudaBackend, threshold: float) -> ClockMonitor | None:
    try:
        props = torch_of(backend.torch_module).cuda.get_device_properties(backend.index)
        match = match_nvml_device(pynvml, props)
    except Exception:  # noqa: BLE001 - a device NVML cannot list is not monitored
        return None
    if match is None:
        return None
    return ClockMonitor(pynvml, match, _max_sm_clock(pynvml, match.handle), threshold)


class _Clocks(Reading[ClockSummary]):
    name = "clocks"

    def open(self, around: Around) -> AbstractContextManager[ClockMonitor | None]:
        return clock_monitor(around.backend, threshold=around.settings.throttle_threshold)

    def to_json(self, value: ClockSummary) -> dict[str, Any]:
        return value.to_dict()

    def decode(self, data: Mapping[str, Any]) -> ClockSummary | None:
        return ClockSummary.from_dict(data.get("clocks"))

    def flags(self, m: Measurement) -> list[str]:
        clocks = m.clocks
        return [f"throttled {clocks.throttled}/{len(m.samples)}"] if clocks is not None and clocks.throttled else []

    def facts(self, m: Measurement) -> list[tuple[str, str]]:
        clocks = m.clocks
        if clocks is None or clocks.sm_clock_mhz_median is None:
            return []
        text = f"median {clocks.sm_clock_mhz_median:.0f} MHz ({clocks.sm_clock_mhz_min}-{clocks.sm_clock_mhz_max})"
        text += f" of {clocks.max_sm_clock_mhz} max" if clocks.max_sm_clock_mhz else ""
        text += f", {clocks.throttled} of {len(m.samples)} samples throttled" if clocks.throttled else ""
        text += f"; reasons seen: {', '.join(clocks.reasons)}" if clocks.reasons else ""
        return [("SM clock", text)]


#: The GPU's clocks over the samples: NVML read after every block (a CUDA device with NVML only).
CLOCKS: Final = _Clocks()
