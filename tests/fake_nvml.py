"""A stand-in for ``pynvml`` (nvidia-ml-py): GPUs with UUIDs, PCI bus ids, clocks, reasons and an energy counter a
test sets; any call can be made to fail, as a GPU or driver that does not support it does."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


@dataclass
class FakeGpu:
    uuid: str | bytes
    pci: tuple[int, int, int]
    name: str | bytes = "NVIDIA H100 80GB HBM3"
    max_sm_clock_mhz: int = 1980
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 2619
    temperature_c: int = 40
    power_mw: int = 300_000
    reasons: int = 0
    #: (current, pending) MIG mode; None: the GPU has no MIG (the call raises)
    mig: tuple[int, int] | None = (0, 0)
    #: NVML's total-energy counter in millijoules (a test advances it); None: no counter (before Volta)
    energy_mj: int | None = 0


def gpus(count: int) -> list[FakeGpu]:
    """``count`` GPUs, NVML index i with UUID ``GPU-0000000i-...`` on PCI bus i + 1."""
    return [FakeGpu(f"GPU-0000000{i}-1111-2222-3333-444444444444", (0, i + 1, 0)) for i in range(count)]


def cuda_props(gpu: FakeGpu, *, uuid: bool = True, pci: bool = True) -> SimpleNamespace:
    """What ``torch.cuda.get_device_properties`` says of ``gpu``: its UUID without NVML's ``GPU-`` prefix."""
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=80 * 2**30)
    props.multi_processor_count = 132
    text = gpu.uuid.decode() if isinstance(gpu.uuid, bytes) else gpu.uuid
    if uuid:
        props.uuid = text.removeprefix("GPU-")
    if pci:
        props.pci_domain_id, props.pci_bus_id, props.pci_device_id = gpu.pci
    return props


def cuda_torch(props: list[SimpleNamespace]) -> Any:
    """Just enough of torch for a CUDA device list: ``torch.cuda.get_device_properties(i)``."""
    return SimpleNamespace(cuda=SimpleNamespace(get_device_properties=lambda i: props[i]))


@dataclass
class FakeNvml:
    devices: list[FakeGpu]
    fail_init: bool = False
    #: raise from these call names, as NVML raises NVMLError_NotSupported (power on a vGPU, say)
    failing: frozenset[str] = frozenset()
    driver: str | bytes = b"580.159.04"
    calls: list[str] = field(default_factory=list)
    inits: int = 0
    shutdowns: int = 0

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name in self.failing:
            raise RuntimeError(f"NVML {name}: Not Supported")

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.devices[index]

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str | bytes:
        self._call("uuid")
        return h.uuid

    def nvmlDeviceGetPciInfo(self, h: FakeGpu) -> SimpleNamespace:
        domain, bus, device = h.pci
        return SimpleNamespace(domain=domain, bus=bus, device=device, busId=f"{domain:08x}:{bus:02x}:{device:02x}.0")

    def nvmlDeviceGetName(self, h: FakeGpu) -> str | bytes:
        self._call("name")
        return h.name

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, which: int) -> int:
        self._call("clock")
        return h.sm_clock_mhz if which == self.NVML_CLOCK_SM else h.mem_clock_mhz

    def nvmlDeviceGetMaxClockInfo(self, h: FakeGpu, which: int) -> int:
        self._call("max_clock")
        return h.max_sm_clock_mhz if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        self._call("power")
        return h.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeGpu) -> int:
        self._call("power_limit")
        return 700_000

    def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeGpu) -> int:
        self._call("energy")
        if h.energy_mj is None:
            raise RuntimeError("NVML energy: Not Supported")
        return h.energy_mj

    def nvmlDeviceGetTemperature(self, h: FakeGpu, which: int) -> int:
        self._call("temperature")
        return h.temperature_c

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeGpu) -> int:
        self._call("reasons")
        return h.reasons

    def nvmlDeviceGetMigMode(self, h: FakeGpu) -> list[int]:
        self._call("mig")
        if h.mig is None:
            raise RuntimeError("Not Supported")
        return list(h.mig)
