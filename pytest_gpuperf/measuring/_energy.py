"""Energy per call: a joule counter read after every block, differenced over a span of whole blocks.

Two counters are read where the machine has them:

- a CUDA device: NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``,
  millijoules since the driver loaded; Volta and later), through the clock monitor's
  NVML device (``_clocks.py``), so that one NVML session serves both;
- the CPU: RAPL through ``/sys/class/powercap`` (each ``intel-rapl:N`` package zone's
  ``energy_uj``, which wraps to 0 past ``max_energy_range_uj``). Since Linux 5.10 these
  files are readable by root only (CVE-2020-8694), so usually there is none.

Where there is no counter the measurement records no figure, and its ``EnergySummary``
says why in ``note`` (the results table says it once per device, under the table).

**Why a span of blocks, and not energy per block.** NVML's counter advances in steps,
20 to 100 ms apart on recent GPUs; a block is sized for timing (often a few ms) and its
own difference is mostly 0 or a whole step. Sizing the blocks for the counter instead
would change what is timed (fewer, longer samples; another stop), so the blocks stay as
timing sizes them and the energy is taken over a span of them: from the first reading
after which the counter had stepped to the last such reading among the samples' blocks.
Each end of that span is then known to within the block before it (the step fell
between the two readings), so its energy, time and calls agree to within one block at
each end; ``error`` is that bound relative to the span. A span with fewer than two steps,
or an error above ``ENERGY_MAX_ERROR``, gives no figure (``note`` says so and what to
raise). RAPL steps about every millisecond, so there every reading is a step.

The span counts everything between its two readings: the timed blocks and the gaps
between them (the launch lead's spin, the synchronization, the readings). ``joules /
calls`` is therefore an upper bound of the step's own energy, close where the gaps are
short against the blocks (``timed_seconds`` against ``seconds`` shows how close). RAPL
counts the whole package, other processes' work included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._backends import Backend, CpuBackend, CudaBackend
from ._clocks import CLOCKS, ClockMonitor, nvml_field
from ._reading import Around, Reading, Sensor
from ._units import format_rate
from ._values import optional

if TYPE_CHECKING:
    from ._measurement import Measurement

__all__ = [
    "ENERGY",
    "ENERGY_MAX_ERROR",
    "POWERCAP",
    "EnergySummary",
    "EnergyTrace",
    "RaplCounter",
    "energy_trace",
    "nvml_joules",
    "rapl_counter",
]

#: A span whose ends are known to within more than this share of it gives no figure.
ENERGY_MAX_ERROR: Final = 0.1
#: Where Linux exposes RAPL.
POWERCAP: Final = Path("/sys/class/powercap")


@dataclass(frozen=True)
class EnergySummary:
    """The energy of a measurement's sampled blocks, or (``note``) why there is none."""

    #: the counter: ``nvml 0 total energy``, ``rapl package-0+package-1``; "" where there is none
    source: str
    #: joules counted over the span, and its host seconds
    joules: float | None = None
    seconds: float | None = None
    #: calls made in the span's blocks, and the seconds those blocks were timed
    calls: int = 0
    timed_seconds: float | None = None
    #: bound of the relative error from where the counter stepped (one block at each end of the span)
    error: float | None = None
    #: why there is no figure ("" where there is one)
    note: str = ""

    @property
    def joules_per_call(self) -> float | None:
        if self.joules is None or self.calls <= 0:
            return None
        return self.joules / self.calls

    @property
    def watts(self) -> float | None:
        """Mean power over the span."""
        if self.joules is None or not self.seconds:
            return None
        return self.joules / self.seconds

    def per_joule(self, amount: float) -> float | None:
        """Work per joule for ``amount`` of work per call (samples per joule for samples)."""
        per_call = self.joules_per_call
        return None if not per_call else amount / per_call

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "joules": self.joules,
            "seconds": self.seconds,
            "calls": self.calls,
            "timed_seconds": self.timed_seconds,
            "error": self.error,
            "joules_per_call": self.joules_per_call,
            "watts": self.watts,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> EnergySummary | None:
        if not isinstance(data, Mapping):
            return None
        return cls(
            source=str(data.get("source", "")),
            joules=optional(data.get("joules"), float),
            seconds=optional(data.get("seconds"), float),
            calls=int(data.get("calls", 0)),
            timed_seconds=optional(data.get("timed_seconds"), float),
            error=optional(data.get("error"), float),
            note=str(data.get("note", "")),
        )


@dataclass(frozen=True)
class _Mark:
    """One reading of the counter, after a block (or before the first): when, joules, and that block's calls and
    timed seconds."""

    at: float
    joules: float | None
    calls: int
    timed: float


@dataclass
class EnergyTrace:
    """Reads a joule counter before the first block and after every block, and sums up a span of the last ones."""

    counter: Callable[[], float | None]
    source: str
    clock: Callable[[], float] = time.perf_counter
    marks: list[_Mark] = field(default_factory=list)

    def start(self) -> None:
        self.marks.append(_Mark(self.clock(), self.counter(), 0, 0.0))

    def after_block(self, iterations: int, seconds: float) -> None:
        """Read the counter after a block of ``iterations`` calls timed at ``seconds`` (outside the timed region)."""
        self.marks.append(_Mark(self.clock(), self.counter(), iterations, seconds))

    def value(self, samples: int) -> EnergySummary:
        return self.summary(samples)

    def summary(self, blocks: int) -> EnergySummary:
        """The energy of the last ``blocks`` blocks (the samples'; the warmup's come first), edge-aligned to the
        counter's steps."""
        window = self.marks[-(blocks + 1) :] if blocks > 0 else []
        if len(window) < 2 or any(m.joules is None for m in window):
            return EnergySummary(self.source, note="the counter did not answer after every sampled block")
        steps = [i for i in range(1, len(window)) if window[i].joules != window[i - 1].joules]
        span = window[-1].at - window[0].at
        if len(steps) < 2:
            return EnergySummary(
                self.source,
                note=f"the counter stepped {len(steps)} time(s) in the {span:.3g} s of sampled blocks, too few for "
                "a span; raise --gpuperf-min-time",
            )
        first, last = steps[0], steps[-1]
        start, end = window[first], window[last]
        seconds = end.at - start.at
        error = (start.at - window[first - 1].at + end.at - window[last - 1].at) / seconds
        if error > ENERGY_MAX_ERROR:
            return EnergySummary(
                self.source,
                note=f"the counter's steps span {seconds:.3g} s, known to {error:.0%} only (one block at each end); "
                "raise --gpuperf-min-time",
            )
        inside = window[first + 1 : last + 1]
        return EnergySummary(
            self.source,
            joules=(end.joules or 0.0) - (start.joules or 0.0),
            seconds=seconds,
            calls=sum(m.calls for m in inside),
            timed_seconds=sum(m.timed for m in inside),
            error=error,
        )


# ---------------------------------------------------------------- RAPL


@dataclass
class RaplCounter:
    """The joules of RAPL package zones since the first reading, each zone's wrap-around undone."""

    zones: Sequence[tuple[Path, int]]  # (energy_uj, max_energy_range_uj)
    last: list[int] = field(default_factory=list)
    total_uj: int = 0

    def __call__(self) -> float | None:
        try:
            now = [int(path.read_text()) for path, _ in self.zones]
        except (OSError, ValueError):
            return None
        if self.last:
            for (_, top), before, after in zip(self.zones, self.last, now, strict=True):
                self.total_uj += after - before if after >= before else after + top - before
        self.last = now
        return self.total_uj / 1e6


def _zone_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip()
    except OSError:
        return ""


def rapl_counter(root: Path = POWERCAP) -> tuple[RaplCounter | None, str]:
    """A counter over the machine's RAPL package zones, with its source; or None and why not."""
    # Top-level zones only (``intel-rapl:0``, not its ``intel-rapl:0:0`` parts), and packages only: a ``psys``
    # zone contains them and would count them twice.
    zones = sorted(
        z for z in root.glob("intel-rapl:*") if z.name.count(":") == 1 and _zone_name(z).startswith("package")
    )
    if not zones:
        return None, f"no RAPL package zone under {root}"
    parts = []
    for zone in zones:
        try:
            (zone / "energy_uj").read_text()
            top = int((zone / "max_energy_range_uj").read_text())
        except PermissionError:
            return None, f"RAPL's {zone / 'energy_uj'} is readable by root only"
        except (OSError, ValueError) as exc:
            return None, f"RAPL's {zone} is unreadable ({exc})"
        parts.append((zone / "energy_uj", top))
    counter = RaplCounter(parts)
    counter()  # the first reading is the zero
    return counter, "rapl " + "+".join(_zone_name(z) for z in zones)


# ---------------------------------------------------------------- which counter


def nvml_joules(monitor: ClockMonitor) -> Callable[[], float | None]:
    """NVML's total-energy counter of the monitor's device in joules (millijoules since the driver loaded; Volta
    and later), read through the clock monitor's NVML session; a reading is None where the GPU or driver has none."""
    nvml, handle = monitor.nvml, monitor.match.handle
    return lambda: nvml_field(lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle), lambda mj: float(mj) / 1e3)


def energy_trace(
    backend: Backend,
    monitor: ClockMonitor | None,
    *,
    clock: Callable[[], float] = time.perf_counter,
    powercap: Path = POWERCAP,
) -> EnergyTrace | str:
    """The energy trace of ``backend``'s device: NVML's counter through the clock ``monitor`` on a CUDA device,
    RAPL on the CPU; else why there is none."""
    if isinstance(backend, CudaBackend):
        if monitor is None:
            return "no NVML reading of this GPU (nvidia-ml-py not installed, no driver, or the device not matched)"
        joules = nvml_joules(monitor)
        if joules() is None:
            return "this GPU or its driver has no NVML total-energy counter (Volta and later GPUs have one)"
        return EnergyTrace(joules, f"nvml {monitor.match.index} total energy", clock)
    if isinstance(backend, CpuBackend):
        counter, what = rapl_counter(powercap)
        return what if counter is None else EnergyTrace(counter, what, clock)
    return f"no energy counter is read on {backend.name}"


# ---------------------------------------------------------------- the reading


@dataclass(frozen=True)
class _NoCounter:
    """The sensor where there is no counter: its value says why."""

    note: str

    def after_block(self, iterations: int, seconds: float) -> None:
        pass

    def value(self, samples: int) -> EnergySummary:
        return EnergySummary("", note=self.note)


class _Energy(Reading[EnergySummary]):
    name = "energy"
    header = "per joule"

    @contextmanager
    def open(self, around: Around) -> Iterator[Sensor[EnergySummary] | None]:
        if around.paired:  # a round times several steps: none of them has a block's energy of its own
            yield None
            return
        clocks = around.opened.get(CLOCKS.name)  # one NVML session serves both
        trace = energy_trace(around.backend, clocks if isinstance(clocks, ClockMonitor) else None, clock=around.clock)
        if isinstance(trace, str):
            yield _NoCounter(trace)
            return
        trace.start()
        yield trace

    def to_json(self, value: EnergySummary) -> dict[str, Any]:
        return value.to_dict()

    def decode(self, data: Mapping[str, Any]) -> EnergySummary | None:
        return EnergySummary.from_dict(data.get("energy"))

    def cell(self, m: Measurement) -> str | None:
        """Work per joule for each unit of work (samples/J beside samples/s), or joules per call without work; None
        without an energy figure."""
        per_call = None if m.energy is None else m.energy.joules_per_call
        if per_call is None:
            return None
        cells = [format_rate(amount / per_call, unit, per="J") for unit, amount in m.work.items()]
        return ", ".join(cells) or f"{per_call:.4g} J/call"

    def notes(self, measurements: Sequence[Measurement]) -> list[str]:
        """Once per device: why the measurements that read no energy figure have none (no counter, a span too short
        for it)."""
        out: list[str] = []
        for device in dict.fromkeys(m.device for m in measurements):
            mine = [m.energy for m in measurements if m.device == device and m.energy is not None]
            notes = [e.note for e in mine if e.joules is None and e.note]
            if not notes:
                continue
            count = "" if len(notes) == len(mine) else f" for {len(notes)} of {len(mine)} records"
            more = "" if len(set(notes)) == 1 else f" (and {len(set(notes)) - 1} other reason(s): see the JSON)"
            out.append(f"energy: none{count} on {device}: {notes[0]}{more}")
        return out

    def facts(self, m: Measurement) -> list[tuple[str, str]]:
        """The figure; or why a counter read none for this record. A device with no counter at all (no ``source``)
        is said once per session, under the results table (``notes``), not again for every record."""
        energy = m.energy
        if energy is not None and energy.joules_per_call is not None and energy.watts is not None:
            text = f"{energy.joules_per_call:.4g} J/call, mean {energy.watts:.4g} W over {energy.seconds or 0:.3g} s"
            text += f" (+-{energy.error or 0:.0%}; {energy.source})"
            return [("energy", text + (f"; {self.cell(m)}" if m.work else ""))]
        if energy is not None and energy.note and energy.source:
            return [("energy", f"none: {energy.note}")]
        return []


#: The energy of the sampled blocks: a joule counter read after every block (NVML's on CUDA, RAPL on a CPU).
ENERGY: Final = _Energy()
