"""pytest-benchmark's ``benchmark`` fixture, timed by pytest-gpuperf: suites written for pytest-benchmark run unchanged.

``entry.py`` registers its plugin object (``_benchmark_plugin.py``, which imports this module when a test first
asks for ``benchmark``) only when pytest-benchmark is absent or blocked (``-p no:benchmark``); with pytest-benchmark
active its own fixture serves ``benchmark``.

- ``benchmark(fn, *args, **kwargs)`` measures ``fn`` with the sampler every test uses
  (``measuring.measure_on``: warmup until steady, blocks sized from steady calls, samples
  until the median's 95% interval is within the target), then returns the result of one
  more, untimed, call.
- ``benchmark.pedantic(...)`` keeps the user's fixed budget exactly (``measuring.measure_fixed``):
  ``rounds`` samples of ``iterations`` calls each, ``setup`` before each round and outside the
  time; the interval is the one that budget gives (none under 6 rounds: the table shows
  ``- (5 samples)``).
- ``@pytest.mark.benchmark(...)``: each keyword maps to a setting of ours or is ignored,
  and the ignored ones are listed once per session, with the reason, in the terminal
  summary (not as warnings: a suite's ``filterwarnings = error`` would fail on them).

The step names no device, so the timing cannot pick one: the host clock is read after
``torch.cuda.synchronize`` on the CUDA devices the step may use (``measuring.AllCudaBackend``).
The record's device is ``cpu`` when the test's own ``device`` parameter says cpu or torch sees
no GPU, ``mps`` on Apple silicon, and on CUDA:

- ``cuda`` (every visible device, each that the process has a CUDA context on synchronized, so
  that none is opened on a GPU the step never used) in a process that has the machine: a step
  that names no device may use any GPU (DataParallel, a model split over two);
- ``cuda:N`` in a process bound to one GPU (xdist worker ``gwN`` of two or more, the torchrun
  rank with ``LOCAL_RANK=N`` beside others, a confirmation run of a record measured there;
  ``GpuperfSession.binding``), the same binding as the ``gpuperf`` fixture's: the session makes
  that GPU current before the test's fixtures run, only it is synchronized, and under torchrun
  it is the rank's device before NCCL starts. The timer is the same host clock either way, so
  a record measured under ``-n`` compares with one measured without.

Such a test is not parametrized by ``--gpuperf-device``: only tests that ask for ``gpuperf`` or
``gpuperf_device`` are.

A suite's conftest may implement pytest-benchmark's hooks (their specifications are ``_benchmark_hooks.py``'s):
the machine info and commit info hooks are called when the run's fingerprint is taken (``_benchmark_plugin.py``'s
``pytest_gpuperf_fingerprint``), the others are accepted and not called. Under ``--gpuperf-measuring=untimed``
(``--benchmark-disable``) the fixture is ``disabled``: ``benchmark(fn)`` and ``pedantic`` call the function once
and record nothing.

The record keeps ``benchmark.group`` and ``benchmark.extra_info`` in its metadata
(``"group"``, ``"extra_info"``) and the test's own parameters as its params; it is kept when
the test's fixtures are torn down, after the test body has set ``extra_info``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import pytest

from ..measuring import DeviceError, DeviceSlot, SettingError, optional
from ._session import GpuperfSession

if TYPE_CHECKING:
    from ..measuring import Backend, Check, Inventory, Measurement, MeasureSettings
    from ..results import Evidence, OutputKind

__all__ = [
    "BenchmarkFixture",
    "BenchmarkStats",
    "ExportedBenchmark",
    "FixtureAlreadyUsed",
    "MarkerSettings",
    "Stats",
    "gpuperf_marked",
    "json_kind",
    "json_safe",
    "read_markers",
    "target_slot",
]

#: pytest-benchmark's marker keywords that set one of our measuring settings.
MAPPED: Final = {"max_time": "max_time", "min_rounds": "min_samples", "precision": "target"}
#: Keywords we honour with one value (what we always do) and ignore, with the reason, with any other.
HONOURED_AS: Final[dict[str, tuple[object, str]]] = {
    "disable_gc": (True, "pytest-gpuperf always pauses the garbage collector while it samples"),
    "warmup": (True, "pytest-gpuperf always warms up until block times stop falling (--gpuperf-warmup-time caps it)"),
    "confidence": (0.95, "pytest-gpuperf's intervals are distribution-free 95% intervals of the median"),
}
#: Keywords ignored whatever their value, with the reason.
IGNORED: Final = {
    "timer": "pytest-gpuperf times with device-synchronized clocks (perf_counter_ns after synchronizing "
    "every visible CUDA device the process uses, or the process's own GPU under xdist or torchrun)",
    "min_time": "pytest-gpuperf sizes each sample to last at least its clock's minimum block (1 ms on the CPU); "
    "--gpuperf-min-time is the least sampling time instead",
    "calibration_precision": "pytest-gpuperf sizes each sample to last at least its clock's minimum block",
    "warmup_iterations": "pytest-gpuperf warms up until block times stop falling (--gpuperf-warmup-time caps it)",
    "cprofile": "pytest-gpuperf does not profile; run pytest-benchmark with --benchmark-cprofile for that",
}
KEYWORDS: Final = (*MAPPED, "group", *HONOURED_AS, *IGNORED)


class FixtureAlreadyUsed(Exception):
    """``benchmark`` called a second time in one test (pytest-benchmark refuses it with the same name)."""


# ---------------------------------------------------------------- the marker


@dataclass(frozen=True)
class MarkerSettings:
    """What a test's ``@pytest.mark.benchmark(...)`` says: setting changes, its group, and what we ignore."""

    changes: Mapping[str, object] = field(default_factory=dict)
    group: str | None = None
    #: (keyword, value as written, why it is ignored)
    ignored: tuple[tuple[str, str, str], ...] = ()

    def apply(self, measure: MeasureSettings, keep: frozenset[str] = frozenset()) -> MeasureSettings:
        """``measure`` with the marker's changes, except the settings in ``keep`` (set by ``@pytest.mark.gpuperf``)."""
        from ..measuring import MEASURE_FIELDS

        parsed: dict[str, Any] = {}
        for keyword, setting in MAPPED.items():
            if keyword in self.changes and setting not in keep:
                raw = self.changes[keyword]
                try:
                    parsed[setting] = MEASURE_FIELDS[setting](raw)
                except SettingError as exc:
                    raise SettingError(
                        f"@pytest.mark.benchmark({keyword}={raw!r}): {exc} (it sets pytest-gpuperf's {setting})"
                    ) from None
        updated = dataclasses.replace(measure, **parsed)
        updated.check("@pytest.mark.benchmark")
        return updated


def read_markers(node: pytest.Item | pytest.Function) -> MarkerSettings:
    """The test's ``@pytest.mark.benchmark`` keywords, the class's first and the test's over them.

    SettingError names a positional argument or an unknown keyword and lists the known ones.
    """
    kwargs: dict[str, object] = {}
    for marker in reversed(list(node.iter_markers("benchmark"))):
        if marker.args:
            raise SettingError(
                f"@pytest.mark.benchmark takes keywords only, got positional {marker.args!r}; "
                "write for example @pytest.mark.benchmark(group='hub')"
            )
        kwargs.update(marker.kwargs)
    unknown = [key for key in kwargs if key not in KEYWORDS]
    if unknown:
        raise SettingError(
            f"@pytest.mark.benchmark got an unknown keyword {unknown[0]!r}; pytest-benchmark's marker "
            f"(and so pytest-gpuperf's benchmark fixture) accepts: {', '.join(KEYWORDS)}"
        )
    ignored = []
    for key, raw in kwargs.items():
        if key in IGNORED:
            ignored.append((key, _shown(raw), IGNORED[key]))
        elif key in HONOURED_AS and raw != HONOURED_AS[key][0]:
            ignored.append((key, _shown(raw), HONOURED_AS[key][1]))
    return MarkerSettings(
        changes={key: kwargs[key] for key in MAPPED if key in kwargs},
        group=optional(kwargs.get("group"), str),
        ignored=tuple(ignored),
    )


def _shown(value: object) -> str:
    """A keyword's value as a note shows it: a function by its name (``timer=perf_counter``), else its repr."""
    name = getattr(value, "__name__", None)
    return str(name) if callable(value) and name else repr(value)


# ---------------------------------------------------------------- the device


def target_slot(item: pytest.Item, inventory: Inventory | None, bound: DeviceSlot | None = None) -> DeviceSlot:
    """Where a ``benchmark`` test's step runs, as far as can be told without the suite naming it.

    The test's own ``device`` parameter (TorchBench parametrizes one) settles cpu; else
    every visible CUDA device (``cuda``) when torch sees one, or, in a process bound to one
    GPU (``bound``: an xdist worker's, a torchrun rank's), that GPU; ``mps`` on Apple silicon;
    else the CPU. A ``device`` parameter naming another GPU than the bound one raises
    DeviceError: the step would run where this process neither times nor may measure.
    """
    params = getattr(getattr(item, "callspec", None), "params", {})
    declared, _, index = str(params.get("device", "")).partition(":")
    cpu = DeviceSlot("cpu", "cpu", None, True)
    if declared == "cpu" or inventory is None:
        return cpu
    if inventory.cuda_count and declared in ("", "cuda"):
        if bound is None:
            return DeviceSlot("cuda", "cuda", None, True)
        if index.isdigit() and int(index) != bound.index:
            raise DeviceError(
                f"this test's device parameter is cuda:{index}, and this process measures on {bound.id} alone while "
                f"the others of the run measure on theirs; parametrize it by cuda (the process's own GPU), or run it "
                f"in a process of its own (without -n or torchrun)"
            )
        return bound
    if inventory.mps_available and declared in ("", "mps"):
        return DeviceSlot("mps", "mps", None, True)
    return cpu


# ---------------------------------------------------------------- stats as pytest-benchmark shows them


class Stats:
    """pytest-benchmark's ``Stats`` fields, in seconds per call, from our samples (one per round).

    Quartiles are the measuring core's (linear interpolation), so ``q1``/``q3``/``iqr``
    may differ from pytest-benchmark's in the last digits for few rounds.
    """

    fields: Final = (
        "min",
        "max",
        "mean",
        "stddev",
        "rounds",
        "median",
        "iqr",
        "q1",
        "q3",
        "iqr_outliers",
        "stddev_outliers",
        "outliers",
        "ld15iqr",
        "hd15iqr",
        "ops",
        "total",
    )

    def __init__(self, samples: Sequence[float]) -> None:
        from ..measuring import summarize

        self.data = list(samples)
        summary = summarize(self.data)
        self.min, self.max, self.mean, self.median = summary.minimum, summary.maximum, summary.mean, summary.median
        self.stddev, self.q1, self.q3, self.iqr = summary.stdev, summary.q1, summary.q3, summary.iqr
        self.rounds = len(self.data)
        self.total = math.fsum(self.data)
        self.ops = self.rounds / self.total if self.total else 0.0
        low, high = self.q1 - 1.5 * self.iqr, self.q3 + 1.5 * self.iqr
        inside = sorted(x for x in self.data if low <= x <= high) or sorted(self.data)
        self.ld15iqr, self.hd15iqr = inside[0], inside[-1]
        self.iqr_outliers = sum(1 for x in self.data if not low <= x <= high)
        self.stddev_outliers = sum(1 for x in self.data if abs(x - self.mean) > self.stddev)
        self.outliers = f"{self.stddev_outliers};{self.iqr_outliers}"

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.fields}


class BenchmarkStats:
    """What ``benchmark.stats`` is in pytest-benchmark (its ``Metadata``): ``stats.stats.median``,
    ``stats["median"]``, ``stats.get("median")``; ``measurement`` is pytest-gpuperf's own."""

    def __init__(self, fixture: BenchmarkFixture, measurement: Measurement) -> None:
        self.name = fixture.name
        self.fullname = fixture.fullname
        self.group = fixture.group
        self.param = fixture.param
        self.params = fixture.params
        self.extra_info = fixture.extra_info
        self.iterations = measurement.iterations
        self.measurement = measurement
        self.stats = Stats(measurement.samples)

    def __bool__(self) -> bool:
        return bool(self.stats.data)

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self.stats, key)
        except AttributeError:
            return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except AttributeError:
            return default


# ---------------------------------------------------------------- the fixture


class BenchmarkFixture:
    """What a test gets as ``benchmark`` when pytest-gpuperf provides it (pytest-benchmark absent or blocked)."""

    def __init__(
        self,
        item: pytest.Item,
        session: GpuperfSession,
        backend: Backend,
        slot: DeviceSlot,
        settings: MeasureSettings,
        group: str | None,
    ) -> None:
        callspec = getattr(item, "callspec", None)
        self.name: str = item.name
        self.fullname: str = item.nodeid
        self.param: str | None = callspec.id if callspec is not None else None
        self.params: dict[str, Any] | None = dict(callspec.params) if callspec is not None else None
        self.group = group
        self.extra_info: dict[str, Any] = {}
        self.stats: BenchmarkStats | None = None
        self.disabled = False
        self.has_error = False
        self._item = item
        self._session = session
        self._backend = backend
        self._slot = slot
        self._settings = settings
        self._mode: str | None = None
        self._measured: tuple[Measurement, Evidence] | None = None

    @property
    def enabled(self) -> bool:
        return not self.disabled

    @property
    def measurement(self) -> Measurement | None:
        """pytest-gpuperf's Measurement of this test (``assert_latency``, ``ci`` ...), once measured."""
        return None if self._measured is None else self._measured[0]

    @contextlib.contextmanager
    def _using(self, mode: str) -> Iterator[None]:
        """The fixture's one use, in ``mode``: a second use raises, a mode the device cannot time skips the test,
        and any other error marks the fixture ``has_error`` (no record is kept)."""
        from ..measuring import ModeUnsupported

        if self._mode:
            self.has_error = True
            raise FixtureAlreadyUsed(f"Fixture can only be used once. Previously it was used in {self._mode} mode.")
        self._mode = mode
        try:
            yield
        except ModeUnsupported as exc:
            pytest.skip(str(exc))
        except Exception:
            self.has_error = True
            raise

    def __call__(self, function_to_benchmark: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Measure ``function_to_benchmark(*args, **kwargs)`` on pytest-gpuperf's sampler; return one call's result."""
        from ..measuring import measure_on

        step = functools.partial(function_to_benchmark, *args, **kwargs) if args or kwargs else function_to_benchmark
        if self.disabled:  # --gpuperf-measuring=untimed (--benchmark-disable): one call, as pytest-benchmark's
            with self._using("benchmark(...)"):
                return step()
        with self._using("benchmark(...)"):
            measurement = measure_on(
                step,
                self._backend,
                self._settings,
                name=self.fullname,
                device=self._slot.id,
                work={},
                observer=self._observer(),
                coordinator=self._session.coordinator(self._slot, self.fullname),
            )
        self._done(measurement)
        return function_to_benchmark(*args, **kwargs)

    def pedantic(
        self,
        target: Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[..., Any] | None = None,
        rounds: int = 1,
        warmup_rounds: int = 0,
        iterations: int = 1,
    ) -> Any:
        """pytest-benchmark's fixed budget, kept exactly: ``rounds`` samples of ``iterations`` calls after
        ``warmup_rounds`` untimed rounds; ``setup`` runs before each round, outside the time."""
        from ..measuring import FixedBudget, FixedCall, Subject, measure_fixed

        __tracebackhide__ = True
        try:  # first, as pytest-benchmark's: a bad budget is refused untimed too
            budget = FixedBudget(rounds, iterations, warmup_rounds, caller="benchmark.pedantic")
        except ValueError as exc:  # raised here: the test's call, not the budget's inner frames
            raise ValueError(str(exc)) from None
        call = FixedCall(target, args, kwargs, setup, teardown)
        if self.disabled:  # --gpuperf-measuring=untimed: one round of one call, its setup and teardown around it
            with self._using("benchmark.pedantic(...)"):
                call_args, call_kwargs = call.arguments()
                result = target(*call_args, **call_kwargs)
                if teardown is not None:
                    teardown(*call_args, **call_kwargs)
                return result
        with self._using("benchmark.pedantic(...)"):
            measurement, result = measure_fixed(
                call,
                self._backend,
                self._settings,
                budget,
                Subject(self.fullname, self._slot.id, observer=self._observer()),
            )
        self._done(measurement)
        return result

    def _observer(self) -> Callable[[Check], None]:
        """Checks made on the measurement (``benchmark.measurement.assert_latency``) go to its record in the session's
        record book, which holds them until the record is kept at teardown. The measurement is named by the test's
        id, so its record's key is that id."""
        return self._session.book.observer(self.fullname)

    def _done(self, measurement: Measurement) -> None:
        """Keep the measurement for the record, kept at teardown."""
        # The gate's evidence now: it holds the machine's load over the samples that just ended.
        evidence = self._session.evidence(self._item, measurement)
        self._measured = (measurement, evidence)
        self.stats = BenchmarkStats(self, measurement)

    def finish(self) -> None:
        """Keep the record (at teardown, so that it holds the ``extra_info`` the test set after measuring)."""
        if self._measured is None or self.has_error:
            return
        from ._fixture import Gpuperf

        measurement, evidence = self._measured
        metadata: dict[str, Any] = {}
        if self.group is not None:
            metadata["group"] = self.group
        if self.extra_info:
            metadata["extra_info"] = json_safe(self.extra_info)
        Gpuperf(self._item, self._session, self._slot).record(
            measurement, params=self.params, metadata=metadata, evidence=evidence
        )


def gpuperf_marked(node: pytest.Item | pytest.Function) -> frozenset[str]:
    """The settings the test's ``@pytest.mark.gpuperf`` sets: they win over its benchmark marker's."""
    return frozenset(key for marker in node.iter_markers("gpuperf") for key in marker.kwargs)


def json_safe(info: Mapping[str, Any]) -> dict[str, Any]:
    """``extra_info`` as the results file can hold it: what JSON cannot is kept as its ``str``."""
    loaded: dict[str, Any] = json.loads(json.dumps(dict(info), default=str))
    return loaded


class ExportedBenchmark:
    """One benchmark of ``--benchmark-json`` as pytest-benchmark's JSON hooks get it (its ``Metadata``'s names):
    ``name``, ``fullname``, ``group``, ``param``, ``params``, ``extra_info``, ``stats`` (a dict), ``has_error``
    (False, settable), ``as_dict()``."""

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self._entry = dict(entry)
        self.name: str = entry["name"]
        self.fullname: str = entry["fullname"]
        self.group: str | None = entry.get("group")
        self.param: str | None = entry.get("param")
        self.params: dict[str, Any] | None = entry.get("params")
        self.extra_info: dict[str, Any] = entry.get("extra_info") or {}
        self.stats: dict[str, Any] = entry["stats"]
        self.has_error = False

    def as_dict(self, include_data: bool = True, **_: Any) -> dict[str, Any]:
        """The benchmark's entry in the JSON, with what a hook changed on it (``extra_info``, ``group``)."""
        stats = dict(self.stats) if include_data else {k: v for k, v in self.stats.items() if k != "data"}
        return {**self._entry, "group": self.group, "extra_info": self.extra_info, "stats": stats}


def json_kind() -> OutputKind:
    """What ``--benchmark-json`` writes and replaces: a pytest-benchmark JSON, ours or pytest-benchmark's own (a suite
    moved over from pytest-benchmark keeps writing to the same path); any other file there is refused at the start.
    (Built when used: the results package is not imported with the plugin.)"""
    from ..results import OutputKind, is_pytest_benchmark, json_of

    return OutputKind("pytest-benchmark JSON", "benchmark.json", lambda path: is_pytest_benchmark(json_of(path)))
