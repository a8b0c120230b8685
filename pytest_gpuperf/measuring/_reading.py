"""What is read beside a measurement's samples: one ``Reading`` per figure, each in a module of its own.

The built-in readings are ``BUILTIN_READINGS`` (``_measurement.py``), each in a module of its own; more are added
with ``register_reading``. Each says, in one place:

- its ``name``: the key of its value in ``Measurement.readings`` (and the value's keys in the measurement's JSON,
  ``encode``/``decode``);
- what it reads and when: ``open`` gives a ``Sensor`` for the sampling, told after every block outside the timed
  region; ``after`` gives the value once the samples are taken (from the sensor, or by calling the step outside
  the samples, as the memory probe and the work profile do);
- its table cell (``header``, ``cell``), its flags and the lines under a table (``notes``), and its facts on the
  HTML report's card of a record (``facts``);
- its comparison for the gate (``compare``: a ``Change``, or None where it compares nothing).

The runner, the Measurement's codec, the results table, the HTML report and the gate iterate over ``readings()``
and name none of them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from ._backends import Backend
    from ._measurement import Measurement
    from ._sampling import SamplingResult
    from ._settings import MeasureSettings

__all__ = [
    "After",
    "Around",
    "Change",
    "Reading",
    "Rider",
    "Sensor",
    "open_sensors",
    "read_after",
    "readings",
    "register_reading",
    "sensed",
]

V = TypeVar("V")
V_co = TypeVar("V_co", covariant=True)


class Sensor(Protocol[V_co]):
    """A reading's state over one sampling: told after every block (outside the timed region), asked for the value
    of the last ``samples`` blocks (the kept samples; the warmup's blocks come first)."""

    def after_block(self, iterations: int, seconds: float) -> None: ...

    def value(self, samples: int) -> V_co: ...


@dataclass(frozen=True)
class Around:
    """What a sensor is opened with: the backend and settings of the measurement, its clock, whether a block is a
    round of several steps (paired rounds: no step's own block), and the sensors opened before this one, by name
    (a reading may read through another's session)."""

    backend: Backend
    settings: MeasureSettings
    clock: Callable[[], float] = time.perf_counter
    paired: bool = False
    opened: Mapping[str, Sensor[Any]] = field(default_factory=dict)


class Rider(Protocol):
    """Calls of a reading that ride on another's calls of the step (the work profile on the CPU's memory probe,
    which runs the step under the profiler anyway): the first ``settle`` call, then a range around each call
    measured, and the probe's profiler windows once it is done (with the events each recorded)."""

    python: bool
    windows: list[Any]
    events: list[int]

    def settle(self, fn: Callable[[], object]) -> None: ...

    def call_range(self) -> AbstractContextManager[None]: ...


@dataclass
class After:
    """What a reading may use once the samples are taken: the step, where it ran, the sampling's result, and

    - ``share_of``: the steps timed in the same rounds (paired rounds give each its share of their time);
    - ``agree``: in a distributed run, True on every rank where a flag is True on any (``Coordinator.agree``): every
      rank reads the same calls, their collectives must meet; None in a single process;
    - ``skip``: why the readings that call the step must not (``over max_time``; a fixed budget); "" to read;
    - ``over_time``: the skip is the step's being over ``max_time``, where a reading of one call still may be read;
    - ``rider``: calls that ride on another reading's (``prepare`` sets it, before any reading's ``after``).
    """

    fn: Callable[[], object]
    backend: Backend
    settings: MeasureSettings
    device: str
    result: SamplingResult
    share_of: int = 1
    agree: Callable[[bool], bool] | None = None
    skip: str = ""
    over_time: bool = False
    rider: Rider | None = None

    @property
    def distributed(self) -> bool:
        return self.agree is not None


class Change(Protocol):
    """What a reading's comparison found between the two sides of a gate row (``Reading.compare``)."""

    def failing(self, fail_on: Collection[str]) -> list[str]:
        """What went up and is among ``fail_on`` (``ops``, ``memory``)."""
        ...

    def summary(self, fail_on: Collection[str]) -> str | None:
        """One line of what changed (what fails on ``fail_on`` said), None where nothing did."""
        ...

    def details(self, limit: int | None = None) -> list[str]:
        """The changes under that line, at most ``limit`` chosen where one is given."""
        ...

    def to_dict(self, fail_on: Collection[str]) -> dict[str, Any]: ...


class Reading(Protocol, Generic[V]):
    """One figure read beside the samples (the module's docstring). A reading subclasses this protocol for its
    defaults: no sensor, no cell, flags, notes or facts, no comparison, its value stored under its name."""

    #: its key in ``Measurement.readings`` and (by default) in the measurement's JSON
    name: str
    #: its column in the results tables; "" for none
    header: str = ""
    #: its comparison's key in a gate row (``Row.changes``, and the row's JSON); "" where it compares nothing
    change_key: str = ""

    def open(self, around: Around) -> AbstractContextManager[Sensor[Any] | None]:
        """The sensor of one sampling (entered before the first block, left after the last), or None."""
        return nullcontext()

    def prepare(self, after: After) -> bool:
        """Before any reading's ``after``: set what others run for this one (``after.rider``); True where it did,
        and this reading then reads after the others."""
        return False

    def after(self, after: After, sensor: Sensor[Any] | None) -> V | None:
        """The value, once the samples are taken: by default the sensor's over the kept samples (``sensor`` is what
        ``open`` gave)."""
        value: V | None = None if sensor is None else sensor.value(len(after.result.samples))
        return value

    def encode(self, value: V | None) -> dict[str, Any]:
        """The measurement JSON's keys for ``value`` (None: not read)."""
        return {self.name: None if value is None else self.to_json(value)}

    def to_json(self, value: V) -> Any:
        return value

    def decode(self, data: Mapping[str, Any]) -> V | None:
        """The value from a measurement's JSON (``data``, the whole of it); None where it has none."""
        return None

    def cell(self, m: Measurement) -> str | None:
        """Its cell in a results table's row, or None: the column is shown where some row has a cell."""
        return None

    def flags(self, m: Measurement) -> list[str]:
        return []

    def notes(self, measurements: Sequence[Measurement]) -> list[str]:
        """The lines under a results table of these measurements."""
        return []

    def facts(self, m: Measurement) -> list[tuple[str, str]]:
        """(label, text) pairs on the HTML report's card of a record."""
        return []

    def compare(self, base: Sequence[Measurement], head: Sequence[Measurement]) -> Change | None:
        """What changed between the two sides of a gate row (one Measurement per run or side), or None."""
        return None


#: Readings registered after the built-in ones (``register_reading``), by name.
_REGISTERED: dict[str, Reading[Any]] = {}


def readings() -> tuple[Reading[Any], ...]:
    """Every reading, in order: the built-in ones (``BUILTIN_READINGS``), then those registered."""
    from ._measurement import BUILTIN_READINGS

    return (*BUILTIN_READINGS, *_REGISTERED.values())


@contextmanager
def register_reading(reading: Reading[Any]) -> Iterator[Reading[Any]]:
    """Read ``reading`` beside every measurement inside the block (and decode it from files read there). ValueError
    for a name already taken."""
    if any(r.name == reading.name for r in readings()):
        raise ValueError(f"a reading named {reading.name!r} is registered already; give yours another name")
    _REGISTERED[reading.name] = reading
    try:
        yield reading
    finally:
        _REGISTERED.pop(reading.name, None)


@contextmanager
def open_sensors(around: Around) -> Iterator[dict[str, Sensor[Any]]]:
    """Every reading's sensor for one sampling (by name; readings with none are left out), opened in order: each
    sees those opened before it."""
    opened: dict[str, Sensor[Any]] = {}
    with ExitStack() as stack:
        for reading in readings():
            sensor = stack.enter_context(reading.open(dataclasses.replace(around, opened=dict(opened))))
            if sensor is not None:
                opened[reading.name] = sensor
        yield opened


def sensed(run_block: Callable[[int], float], sensors: Iterable[Sensor[Any]]) -> Callable[[int], float]:
    """``run_block`` with each sensor told after every block, outside the timed region; ``run_block`` itself without
    sensors."""
    told = tuple(sensors)
    if not told:
        return run_block

    def block(iterations: int) -> float:
        elapsed = run_block(iterations)
        for sensor in told:
            sensor.after_block(iterations, elapsed)
        return elapsed

    return block


def read_after(after: After, sensors: Mapping[str, Sensor[Any]]) -> dict[str, object]:
    """Every reading's value once the samples are taken (``Reading.after``), by name; ``prepare`` runs for each
    first, and a reading whose calls ride on the others' reads after them."""
    riding = {reading.name: reading.prepare(after) for reading in readings()}
    order = sorted(readings(), key=lambda reading: riding[reading.name])
    return {reading.name: reading.after(after, sensors.get(reading.name)) for reading in order}
