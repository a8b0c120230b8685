"""GPU clocks while measuring: NVML read after every block, throttled samples flagged.

A sample timed while the GPU ran below its clocks measures the throttling, not the
code. NVML (``pip install nvidia-ml-py``, imported as ``pynvml``) says what the clocks
were: after every block, outside the timed region, one reading of the SM and memory
clocks, the temperature, the power and the clocks-event (throttle) reasons (5 NVML
calls; 12.7 us together on an H100). A reading is *throttled* as nvbench judges it
(its ``--throttle-threshold``, default 0.75): the SM clock below ``threshold`` of the
device's maximum SM clock, or a slowdown reason set (hardware slowdown, software or
hardware thermal slowdown, hardware power brake). The software power cap alone is
recorded but is not a throttle by its bit; a capped clock below the threshold still is.

Throttled samples are flagged, not dropped: a GPU that runs power-capped under a heavy
kernel stays so (a bf16 matmul on an H100 ended at 1425 of 1980 MHz, below 0.75, with
only the power-cap reason), and dropping its samples would measure nothing (nvbench
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

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Final

from ._backends import Backend, CudaBackend
from ._devices import torch_of
from ._stats import median

__all__ = [
    "THROTTLE_REASONS",
    "THROTTLE_THRESHOLD",
    "THROTTLING_REASONS",
    "ClockMonitor",
    "ClockReading",
    "ClockSummary",
    "NvmlMatch",
    "clock_monitor",
    "import_nvml",
    "match_nvml_device",
    "monitored",
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
#: A reading whose SM clock is below this fraction of the maximum SM clock is throttled (nvbench's default).
THROTTLE_THRESHOLD: Final = 0.75


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
    """One NVML reading of a GPU."""

    sm_clock_mhz: int
    mem_clock_mhz: int
    temperature_c: int
    power_w: float
    #: NVML clocks-event reason bits (``throttle_names`` names them)
    reasons: int

    def throttled(self, max_sm_clock_mhz: int | None, threshold: float = THROTTLE_THRESHOLD) -> bool:
        """A slowdown reason is set, or the SM clock is below ``threshold`` of the maximum (when known)."""
        if self.reasons & THROTTLING_REASONS:
            return True
        return bool(max_sm_clock_mhz) and self.sm_clock_mhz < threshold * float(max_sm_clock_mhz or 0)


def read_clocks(pynvml: Any, handle: Any) -> ClockReading:
    """Read the clocks, temperature, power and clocks-event reasons of one NVML device (5 NVML calls)."""
    if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons"):
        reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    else:  # nvidia-ml-py before 12.535 names it after throttling
        reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
    return ClockReading(
        sm_clock_mhz=int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        mem_clock_mhz=int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
        temperature_c=int(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        power_w=pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        reasons=int(reasons),
    )


# ---------------------------------------------------------------- the summary a Measurement keeps


@dataclass(frozen=True)
class ClockSummary:
    """The GPU's clocks over a measurement's samples: one reading after each sample's block."""

    #: readings taken (one per sample; fewer if NVML failed to answer)
    readings: int
    sm_clock_mhz_min: int
    sm_clock_mhz_median: float
    sm_clock_mhz_max: int
    mem_clock_mhz_min: int
    mem_clock_mhz_max: int
    temperature_c_max: int
    power_w_max: float
    #: the device's maximum SM clock (None: NVML did not say)
    max_sm_clock_mhz: int | None
    #: every clocks-event reason seen in any reading
    reasons: tuple[str, ...]
    #: indices into the Measurement's samples of those whose reading was throttled
    throttled_samples: tuple[int, ...] = ()
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
        seen = [r for r in readings if r is not None]
        if not seen:
            return None
        sm = [r.sm_clock_mhz for r in seen]
        bits = 0
        for r in seen:
            bits |= r.reasons
        return cls(
            readings=len(seen),
            sm_clock_mhz_min=min(sm),
            sm_clock_mhz_median=median(sm),
            sm_clock_mhz_max=max(sm),
            mem_clock_mhz_min=min(r.mem_clock_mhz for r in seen),
            mem_clock_mhz_max=max(r.mem_clock_mhz for r in seen),
            temperature_c_max=max(r.temperature_c for r in seen),
            power_w_max=max(r.power_w for r in seen),
            max_sm_clock_mhz=max_sm_clock_mhz,
            reasons=tuple(throttle_names(bits)),
            throttled_samples=tuple(
                i for i, r in enumerate(readings) if r is not None and r.throttled(max_sm_clock_mhz, threshold)
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
        top = data.get("max_sm_clock_mhz")
        return cls(
            readings=int(data.get("readings", 0)),
            sm_clock_mhz_min=int(sm.get("min", 0)),
            sm_clock_mhz_median=float(sm.get("median", 0.0)),
            sm_clock_mhz_max=int(sm.get("max", 0)),
            mem_clock_mhz_min=int(mem.get("min", 0)),
            mem_clock_mhz_max=int(mem.get("max", 0)),
            temperature_c_max=int(data.get("temperature_c_max", 0)),
            power_w_max=float(data.get("power_w_max", 0.0)),
            max_sm_clock_mhz=None if top is None else int(top),
            reasons=tuple(str(r) for r in data.get("reasons") or ()),
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
        """One reading, appended to ``readings``; a failing NVML call gives None and never fails the measurement."""
        try:
            reading: ClockReading | None = read_clocks(self.nvml, self.match.handle)
        except Exception:  # noqa: BLE001 - a lost reading must not lose the measurement
            reading = None
        self.readings.append(reading)
        return reading

    def summary(self, samples: int) -> ClockSummary | None:
        """The summary of the last ``samples`` readings: those of the samples (the warmup's blocks come first)."""
        last = self.readings[-samples:] if samples > 0 else []
        source = f"nvml {self.match.index} ({self.match.how})"
        return ClockSummary.of(last, self.max_sm_clock_mhz, self.threshold, source)


def _max_sm_clock(pynvml: Any, handle: Any) -> int | None:
    try:
        return int(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)) or None
    except Exception:  # noqa: BLE001 - without it only the reasons can say throttled
        return None


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


def monitored(run_block: Callable[[int], float], monitor: ClockMonitor | None) -> Callable[[int], float]:
    """``run_block`` followed by one reading of ``monitor`` after every block, outside the timed region;
    ``run_block`` itself when there is no monitor."""
    if monitor is None:
        return run_block
    read = monitor.read

    def block(iterations: int) -> float:
        elapsed = run_block(iterations)
        read()
        return elapsed

    return block
