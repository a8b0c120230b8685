"""What one measurement needs to know: the sampling budget, threads, peak memory, what an inconclusive check does.

The measuring core takes a ``MeasureSettings``; the pytest plugin's Settings holds one
(``settings.measure``) and adds what only a session needs (devices, baselines, the gate).
``with_values`` applies ``key=value`` changes through the same parsers as the options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from . import _values as values
from ._values import SettingError, Threads

if TYPE_CHECKING:
    from ._sampling import SamplingPlan

__all__ = ["CATEGORIES", "MEASURE_FIELDS", "MODES", "PROFILE_LEVELS", "SIZES", "THROTTLE_THRESHOLD", "MeasureSettings"]

# The values the settings take are named here, not in the modules that act on them (``_backends.py``,
# ``_clocks.py``, ``_profile.py``, ``_workload.py``): pytest parses the options at every start, and most sessions
# never measure.

#: Timing modes: warm (calls back to back), cold (caches flushed before each call), graph (CUDA graph replay).
MODES: Final = ("warm", "cold", "graph")
#: A reading whose SM clock is below this fraction of the measurement's median SM clock is throttled.
THROTTLE_THRESHOLD: Final = 0.75
#: ``full``: counts and times; ``counts``: one profiled call, counts only (no times kept); ``off``: no profile.
PROFILE_LEVELS: Final = ("full", "counts", "off")
#: Workload size presets (``--gpuperf-size``); ``auto`` means small on cpu and mps, large on a CUDA device of
#: ``_workload.LARGE_MIN_MEMORY`` or more, else medium (``_workload.resolve_size``).
SIZES: Final = ("auto", "small", "medium", "large")
#: The count categories of a step's work (``_profile.category_of``), in the order they are shown; the gate's
#: ``--gpuperf-fail-on`` names them beside its verdicts.
CATEGORIES: Final = ("ops", "kernels", "runtime", "syncs", "flops", "allocated", "copied", "compiles")

#: Every field of MeasureSettings and the parser of what a user writes for it.
MEASURE_FIELDS: Final[dict[str, Callable[[object], Any]]] = {
    "target": values.fraction,
    "min_time": values.positive_seconds,
    "max_time": values.positive_seconds,
    "warmup_time": values.positive_seconds,
    "min_samples": values.min_samples,
    "threads": values.threads,
    "inconclusive": values.choice("warn", "fail"),
    "memory": values.on_off,
    "mode": values.choice(*MODES),
    "per_call": values.on_off,
    "throttle_threshold": values.fraction,
    "profile": values.choice(*PROFILE_LEVELS),
}


@dataclass(frozen=True)
class MeasureSettings:
    #: stop when the 95% CI of the median is within this relative half-width
    target: float = 0.01
    min_time: float = 0.1
    max_time: float = 5.0
    warmup_time: float = 1.0
    min_samples: int = 10
    #: torch's intra-op threads while measuring: a count, ``auto`` (1 on a CPU, torch's default
    #: on a GPU) or ``torch`` (torch's default); the count in effect is recorded with every result
    threads: Threads = "auto"
    #: what a check whose interval straddles its bound does: ``warn`` or ``fail``
    inconclusive: str = "warn"
    #: measure the memory of a call after timing (its high-water mark; on a CPU its transient part and the RSS)
    memory: bool = True
    #: timing mode: ``warm`` (calls back to back), ``cold`` (caches flushed before each call, flush untimed)
    #: or ``graph`` (the step captured once in a CUDA graph, replays timed)
    mode: str = "warm"
    #: time every call alone (blocks of one call), so the samples give per-call percentiles (p50, p90, p99)
    per_call: bool = False
    #: a GPU sample is flagged throttled when its SM clock fell below this fraction of the measurement's median
    #: SM clock (or a slowdown reason was set); ``_clocks.py``
    throttle_threshold: float = THROTTLE_THRESHOLD
    #: a work profile of the step after timing (``_profile.py``): ``full`` (counts and times), ``counts`` (one
    #: call, counts only) or ``off``
    profile: str = "full"

    def plan(self, min_block_time: float = 1e-3) -> SamplingPlan:
        from ._sampling import SamplingPlan

        return SamplingPlan(
            target=self.target,
            min_samples=self.min_samples,
            min_time=self.min_time,
            max_time=self.max_time,
            warmup_time=self.warmup_time,
            min_block_time=min_block_time,
            per_call=self.per_call,
        )

    def threads_for(self, device: str) -> int | None:
        """The thread count to set on ``device`` (``cpu``, ``cuda:1``, or a kind), or None to leave torch's own."""
        if self.threads == "torch":
            return None
        if self.threads == "auto":
            return 1 if device.split(":", 1)[0] == "cpu" else None
        return self.threads

    def with_values(self, changes: Mapping[str, object], context: str = "") -> MeasureSettings:
        """These settings with ``changes`` parsed and applied; SettingError names a bad key or value.

        ``context`` (such as ``measure()``) starts the message.
        """
        prefix = f"{context}: " if context else ""
        parsed: dict[str, Any] = {}
        for key, raw in changes.items():
            parse = MEASURE_FIELDS.get(key)
            if parse is None:
                raise SettingError(f"{prefix}unknown setting {key!r}; the settings are: {', '.join(MEASURE_FIELDS)}")
            try:
                parsed[key] = parse(raw)
            except SettingError as exc:
                raise SettingError(f"{prefix}{key}={raw!r}: {exc}") from None
        updated = dataclasses.replace(self, **parsed)
        updated.check(context or "settings")
        return updated

    def check(self, context: str) -> None:
        if self.min_time > self.max_time:
            raise SettingError(
                f"{context}: min_time {self.min_time:g} s is above max_time {self.max_time:g} s; "
                "raise --gpuperf-max-time or lower --gpuperf-min-time"
            )
