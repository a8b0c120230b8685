"""Settings: one frozen dataclass, resolved once per session and once more per test with a marker.

Precedence, highest first: ``@pytest.mark.gpuperf(...)`` on the test > command-line
option > ini value (``pytest.ini``, ``pyproject.toml`` ``[tool.pytest.ini_options]``,
``tox.ini``, ``setup.cfg``) > default. Every option is declared once in ``OPTIONS``;
``plugin.py`` turns that table into ``--gpuperf-*`` options and ini keys.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .compare import parse_mismatch_keys, parse_verdicts
from .devices import DeviceError, parse_device_option
from .sampling import SamplingPlan
from .storage import check_name
from .units import UnitError, parse_quantity
from .workload import SIZES

__all__ = ["OPTIONS", "OptionSpec", "SettingError", "Settings"]


class SettingError(ValueError):
    """A value that cannot be used; the message says which and how to fix it."""


# ---------------------------------------------------------------- value parsers


def _positive_seconds(raw: object) -> float:
    try:
        seconds = parse_quantity(raw if isinstance(raw, (int, float, str)) else str(raw), kind="time").value
    except UnitError as exc:
        raise SettingError(f"{exc}; write a time such as 0.5, '500 ms' or '2 s'") from None
    if not seconds > 0 or not math.isfinite(seconds):
        raise SettingError("must be a positive time, such as 0.5, '500 ms' or '2 s'")
    return seconds


def _fraction(raw: object) -> float:
    text = str(raw).strip()
    try:
        value = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise SettingError("is not a number; write a fraction such as 0.01 or a percentage such as 1%") from None
    if not 0 < value < 1:
        raise SettingError("must be between 0 and 1 (exclusive); write 0.01 or 1% for one percent")
    return value


def _positive_int(raw: object) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SettingError("is not a whole number") from None
    if value < 1:
        raise SettingError("must be at least 1")
    return value


def _threads(raw: object) -> int | None:
    if raw is None or str(raw).strip().lower() in ("", "default", "torch"):
        return None
    return _positive_int(raw)


def _choice(*choices: str) -> Callable[[object], str]:
    def parse(raw: object) -> str:
        value = str(raw).strip().lower()
        if value not in choices:
            raise SettingError(f"must be one of: {', '.join(choices)}")
        return value

    return parse


def _devices(raw: object) -> tuple[str, ...]:
    try:
        return parse_device_option(str(raw))
    except DeviceError as exc:
        raise SettingError(str(exc)) from None


def _optional_path(raw: object) -> str | None:
    text = "" if raw is None else str(raw).strip()
    return text or None


def _on_off(raw: object) -> bool:
    value = str(raw).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise SettingError("must be on or off")


def _checked(check: Callable[[str], Any]) -> Callable[[object], Any]:
    """A parser from a validator that raises ValueError with the fix (gate options: compare.py, storage.py)."""

    def parse(raw: object) -> Any:
        try:
            return check(str(raw))
        except ValueError as exc:
            raise SettingError(str(exc)) from None

    return parse


def _optional_name(raw: object) -> str | None:
    text = "" if raw is None else str(raw).strip()
    return _checked(check_name)(text) if text else None


def _mismatch_keys(raw: object) -> tuple[str, ...]:
    return () if raw is None else tuple(_checked(parse_mismatch_keys)(raw))


def _count(raw: object) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SettingError("is not a whole number") from None
    if value < 0:
        raise SettingError("must be 0 or more")
    return value


def _quiet_wait(raw: object) -> float | None:
    text = str(raw).strip().lower()
    if text == "auto":
        return None
    if text in ("0", "off", "no"):
        return 0.0
    try:
        return _positive_seconds(raw)
    except SettingError:
        raise SettingError("must be auto, off, or a time such as 10 or '30 s'") from None


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class OptionSpec:
    """One setting: its field, its ``--gpuperf-*`` flag and ini key, default, parser and help."""

    field: str
    default: str | None
    parse: Callable[[object], Any]
    help: str
    metavar: str = "VALUE"
    marker: bool = True  # may @pytest.mark.gpuperf(...) set it per test?

    @property
    def flag(self) -> str:
        return "--gpuperf-" + self.field.replace("_", "-")

    @property
    def ini(self) -> str:
        return "gpuperf_" + self.field


OPTIONS: Final[tuple[OptionSpec, ...]] = (
    OptionSpec(
        "device",
        "auto",
        _devices,
        "devices to run on: cpu, cuda, cuda:N, mps, auto (cuda, else mps, else cpu), all, or a comma list "
        "(default: auto)",
        "DEVICES",
        marker=False,
    ),
    OptionSpec(
        "missing_device",
        "skip",
        _choice("skip", "error"),
        "what to do when a requested device is absent: skip its tests with the reason, or error "
        "(for GPU CI machines where a missing GPU must not pass; default: skip)",
        "skip|error",
        marker=False,
    ),
    OptionSpec(
        "target",
        "1%",
        _fraction,
        "stop sampling when the 95% CI of the median is within this relative half-width (default: 1%)",
        "FRACTION",
    ),
    OptionSpec(
        "min_time",
        "0.1",
        _positive_seconds,
        "minimum sampling time per measurement, after warmup (default: 0.1 s)",
        "TIME",
    ),
    OptionSpec(
        "max_time",
        "5",
        _positive_seconds,
        "sampling time cap per measurement; a measurement that hits it is flagged as not converged (default: 5 s)",
        "TIME",
    ),
    OptionSpec(
        "warmup_time",
        "1",
        _positive_seconds,
        "warmup time cap per measurement; warmup stops earlier once block times stop falling (default: 1 s)",
        "TIME",
    ),
    OptionSpec(
        "min_samples",
        "10",
        _positive_int,
        "minimum number of samples per measurement (default: 10)",
        "N",
    ),
    OptionSpec(
        "threads",
        None,
        _threads,
        "CPU threads torch may use while measuring (torch.set_num_threads); recorded with every result "
        "(default: torch's own default)",
        "N",
    ),
    OptionSpec(
        "inconclusive",
        "warn",
        _choice("warn", "fail"),
        "what an assertion does when the CI straddles its bound: warn, or fail (default: warn)",
        "warn|fail",
    ),
    OptionSpec(
        "memory",
        "on",
        _on_off,
        "measure peak memory of one extra call after timing (default: on)",
        "on|off",
    ),
    OptionSpec(
        "size",
        "auto",
        _choice(*SIZES),
        "workload size preset for the suites: auto (small on cpu and mps, large on cuda), small, medium, large "
        "(default: auto)",
        "PRESET",
        marker=False,
    ),
    OptionSpec(
        "json",
        None,
        _optional_path,
        "write every record of this run to PATH as versioned JSON (atomically)",
        "PATH",
        marker=False,
    ),
    OptionSpec(
        "asv",
        None,
        _optional_path,
        "also write this run as asv results for the checked-out commit into the asv results directory DIR "
        "(machine.json, benchmarks.json, per-commit results), for asv publish and asv compare",
        "DIR",
        marker=False,
    ),
    OptionSpec(
        "asv_machine",
        None,
        _optional_path,
        "machine name for --gpuperf-asv results (default: the host name)",
        "NAME",
        marker=False,
    ),
    OptionSpec(
        "results_dir",
        ".gpuperf",
        _optional_path,
        "directory for every run's results (runs/) and named baselines (baselines/), relative to the rootdir "
        "(default: .gpuperf)",
        "DIR",
        marker=False,
    ),
    OptionSpec(
        "save",
        None,
        _optional_name,
        "save this run as baseline NAME: one more round if NAME holds runs of the same code on this machine, "
        "else a fresh baseline",
        "NAME",
        marker=False,
    ),
    OptionSpec(
        "compare",
        None,
        _optional_path,
        "compare this run with baseline NAME (or a results file PATH); the gate fails the session on a "
        "significant slowdown beyond the tolerance",
        "NAME|PATH",
        marker=False,
    ),
    OptionSpec(
        "tolerance",
        "5%",
        _fraction,
        "a record is slower (or faster) only when the change is significant and beyond this ratio (default: 5%)",
        "FRACTION",
    ),
    OptionSpec(
        "noise_floor",
        "2%",
        _fraction,
        "run-to-run noise assumed until a baseline's rounds show more; worth 8 runs of evidence (default: 2%)",
        "FRACTION",
    ),
    OptionSpec(
        "fail_on",
        "slower",
        _checked(parse_verdicts),
        "verdicts that fail the session when comparing: a comma list of slower, faster, unchanged, inconclusive, "
        "incomparable, new, missing, or none (default: slower)",
        "VERDICTS",
        marker=False,
    ),
    OptionSpec(
        "allow_mismatch",
        None,
        _mismatch_keys,
        "compare across these fingerprint differences anyway (for example torch_minor,threads), or all "
        "(default: none; differing hardware or torch refuses the comparison)",
        "KEYS",
        marker=False,
    ),
    OptionSpec(
        "quiet_wait",
        "auto",
        _quiet_wait,
        "before each measurement wait up to this long for other processes to leave the cores it needs; "
        "auto: 10 s when saving or comparing, else off",
        "TIME",
        marker=False,
    ),
    OptionSpec(
        "confirm",
        "4",
        _count,
        "when comparing, measure the tests whose records look slower again, in a fresh process, up to N times "
        "before judging them (default: 4; 0: judge this session's measurements alone)",
        "N",
        marker=False,
    ),
    OptionSpec(
        "rounds",
        "1",
        _positive_int,
        "measure every test N times in this session (the rounds after the first run after the other tests, "
        "spaced in time), for example for a baseline that knows this machine's noise (default: 1)",
        "N",
        marker=False,
    ),
)

_BY_FIELD: Final = {spec.field: spec for spec in OPTIONS}


@dataclass(frozen=True)
class Settings:
    device: tuple[str, ...] = ("auto",)
    missing_device: str = "skip"
    target: float = 0.01
    min_time: float = 0.1
    max_time: float = 5.0
    warmup_time: float = 1.0
    min_samples: int = 10
    threads: int | None = None
    inconclusive: str = "warn"
    memory: bool = True
    size: str = "auto"
    json: str | None = None
    asv: str | None = None
    asv_machine: str | None = None
    results_dir: str = ".gpuperf"
    save: str | None = None
    compare: str | None = None
    tolerance: float = 0.05
    noise_floor: float = 0.02
    fail_on: tuple[str, ...] = ("slower",)
    allow_mismatch: tuple[str, ...] = ()
    quiet_wait: float | None = None  # None: auto
    confirm: int = 4
    rounds: int = 1

    def plan(self, min_block_time: float = 1e-3) -> SamplingPlan:
        return SamplingPlan(
            target=self.target,
            min_samples=self.min_samples,
            min_time=self.min_time,
            max_time=self.max_time,
            warmup_time=self.warmup_time,
            min_block_time=min_block_time,
        )

    @classmethod
    def resolve(cls, cli: Mapping[str, object], ini: Mapping[str, object]) -> Settings:
        """Build from command-line values (None when not given) and ini values (None or '' when not set).

        Raises SettingError naming the option or ini key, the value and the fix.
        """
        values: dict[str, Any] = {}
        for spec in OPTIONS:
            raw_cli, raw_ini = cli.get(spec.field), ini.get(spec.field)
            if raw_cli is not None:
                source, raw = f"{spec.flag}={raw_cli}", raw_cli
            elif raw_ini not in (None, "", []):
                source, raw = f"ini {spec.ini} = {raw_ini}", raw_ini
            else:
                source, raw = f"default of {spec.flag}", spec.default
            values[spec.field] = _parse(spec, raw, source)
        settings = cls(**values)
        settings._check()
        return settings

    def with_marker(self, kwargs: Mapping[str, object]) -> Settings:
        """Apply ``@pytest.mark.gpuperf(...)`` keywords; unknown keywords and bad values raise SettingError."""
        allowed = sorted(spec.field for spec in OPTIONS if spec.marker)
        changes: dict[str, Any] = {}
        for key, raw in kwargs.items():
            spec = _BY_FIELD.get(key)
            if spec is None or not spec.marker:
                raise SettingError(
                    f"@pytest.mark.gpuperf got an unknown keyword {key!r}; it accepts: {', '.join(allowed)}"
                )
            changes[key] = _parse(spec, raw, f"@pytest.mark.gpuperf({key}={raw!r})")
        updated = dataclasses.replace(self, **changes)
        updated._check(context="@pytest.mark.gpuperf")
        return updated

    def _check(self, context: str = "options") -> None:
        if self.min_time > self.max_time:
            raise SettingError(
                f"{context}: min_time {self.min_time:g} s is above max_time {self.max_time:g} s; "
                "raise --gpuperf-max-time or lower --gpuperf-min-time"
            )


def _parse(spec: OptionSpec, raw: object, source: str) -> Any:
    try:
        return spec.parse(raw)
    except SettingError as exc:
        raise SettingError(f"{source}: {exc}") from None
