"""Settings: one frozen dataclass, resolved once per session and once more per test with a marker.

Precedence, highest first: ``@pytest.mark.gpuperf(...)`` on the test > command-line
option > ini value (``pytest.ini``, ``pyproject.toml`` ``[tool.pytest.ini_options]``,
``tox.ini``, ``setup.cfg``) > default. Every option is declared once in ``_options.py`` and
parsed by its entry in ``PARSERS`` here, which a session of plain tests never loads.
What one measurement needs is ``settings.measure`` (the core's MeasureSettings); the
rest is the session's: devices, files, baselines and the gate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..gate import DEFAULT_FAIL_ON
from ..measuring import MEASURE_FIELDS, SIZES, MeasureSettings, SettingError, values
from ._options import BY_FIELD, OPTIONS, OptionSpec, chosen, given_values, in_ini

if TYPE_CHECKING:
    import pytest

__all__ = ["PARSERS", "SettingError", "Settings", "user_settings"]


def _checked(raw: object, check: Callable[[str], Any]) -> Any:
    """``check`` (the gate's or the results' own validator, raising ValueError with the fix) as a parser."""
    try:
        return check(str(raw))
    except ValueError as exc:
        raise SettingError(str(exc)) from None


# The devices', the gate's and the results' validators are imported when a value is parsed, not with the
# settings: a session made for its tests' own measuring options need not load them.


def _devices(raw: object) -> tuple[str, ...]:
    from ..measuring import parse_device_option

    return tuple(_checked(raw, parse_device_option))  # a DeviceError is a ValueError


def _goal(raw: object) -> float | None:
    """``--gpuperf-detect``: a fraction, or none given (None, or an empty ini value)."""
    return None if raw is None or str(raw).strip() == "" else values.fraction(raw)


def _optional_name(raw: object) -> str | None:
    text = values.given_text("a baseline name such as main")(raw)
    if text is None:
        return None
    from ..results import check_name

    name: str = _checked(text, check_name)
    return name


def _mismatch_keys(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    from ..results import parse_mismatch_keys

    return tuple(_checked(raw, parse_mismatch_keys))


def _verdicts(raw: object) -> tuple[str, ...]:
    from ..gate import parse_verdicts

    return tuple(_checked(raw, parse_verdicts))


#: Every option's parser, by field (``_options.OPTIONS`` declares the same fields, tested): the measuring core's for
#: the measuring settings, shared with the ``pytest-gpuperf`` command line, and the session's own.
PARSERS: Final[dict[str, Callable[[object], Any]]] = {
    "device": _devices,
    "missing_device": values.choice("skip", "error"),
    **MEASURE_FIELDS,
    "trace": values.choice("failing", "all", "off"),
    "size": values.choice(*SIZES),
    "json": values.given_text("a file path such as results.json"),
    "html": values.given_text("a file path such as report.html"),
    "asv": values.given_text("an asv results directory such as .asv/results"),
    "asv_machine": values.given_text("a machine name"),
    "results_dir": values.given_text("a directory such as .gpuperf"),
    "save": _optional_name,
    "replace": values.on_off,
    "compare": values.given_text("a baseline name or a results file path"),
    "tolerance": values.tolerance,
    "noise_floor": values.fraction,
    "fail_on": _verdicts,
    "allow_mismatch": _mismatch_keys,
    "quiet_wait": values.quiet_wait,
    "confirm": values.confirmations,
    "detect": _goal,
    "rounds": values.rounds,
    "measuring": values.choice("on", "untimed", "skip", "only"),
}

#: Options that belong to one session, not to a confirmation run measuring its tests again.
_SESSION_ONLY: Final = frozenset(
    {
        *("save", "replace", "compare", "json", "html", "asv", "asv_machine"),
        *("confirm", "detect", "rounds", "results_dir", "fail_on", "quiet_wait", "trace", "measuring"),
    }
)


@dataclass(frozen=True)
class Settings:
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    device: tuple[str, ...] = ("auto",)
    missing_device: str = "skip"
    size: str = "auto"
    json: str | None = None
    html: str | None = None
    asv: str | None = None
    asv_machine: str | None = None
    results_dir: str = ".gpuperf"
    save: str | None = None
    replace: bool = False
    compare: str | None = None
    tolerance: values.Tolerance = 0.05
    noise_floor: float = 0.02
    fail_on: tuple[str, ...] = DEFAULT_FAIL_ON
    allow_mismatch: tuple[str, ...] = ()
    quiet_wait: float | None = None  # None: auto
    confirm: int = 4
    detect: float | None = None  # --gpuperf-detect: confirmation runs until each test can see this
    rounds: int = 1
    trace: str = "failing"
    measuring: str = "on"  # on, untimed, skip, only (_untimed.py)

    def value(self, name: str) -> Any:
        """The value of any option's field (measuring ones live in ``measure``)."""
        return getattr(self.measure if name in MEASURE_FIELDS else self, name)

    @classmethod
    def resolve(cls, cli: Mapping[str, object], ini: Mapping[str, object]) -> Settings:
        """Build from command-line values (None when not given) and ini values (None or '' when not set).

        Raises SettingError naming the option or ini key, the value and the fix.
        """
        parsed: dict[str, Any] = {}
        for spec in OPTIONS:  # what is not given keeps the field's default, the option's default parsed (tested)
            raw_cli, raw_ini = cli.get(spec.field), ini.get(spec.field)
            if raw_cli is not None:
                parsed[spec.field] = _parse(spec, raw_cli, f"{spec.flag}={raw_cli}")
            elif in_ini(raw_ini):
                parsed[spec.field] = _parse(spec, raw_ini, f"ini {spec.ini} = {raw_ini}")
        measure = dataclasses.replace(_DEFAULT.measure, **{k: parsed.pop(k) for k in MEASURE_FIELDS if k in parsed})
        settings = dataclasses.replace(_DEFAULT, measure=measure, **parsed)
        if cli.get("replace") and not settings.save:  # an ini default may hold it for the sessions that save
            raise SettingError(
                "--gpuperf-replace only changes what --gpuperf-save=NAME does: add --gpuperf-save=NAME, "
                "or leave --gpuperf-replace out"
            )
        _check_trace(settings.trace, measure.profile)
        measure.check("options")
        return settings

    def with_marker(self, kwargs: Mapping[str, object]) -> Settings:
        """Apply ``@pytest.mark.gpuperf(...)`` keywords; unknown keywords and bad values raise SettingError."""
        allowed = sorted(spec.field for spec in OPTIONS if spec.marker)
        changes: dict[str, Any] = {}
        for key, raw in kwargs.items():
            spec = BY_FIELD.get(key)
            if spec is None or not spec.marker:
                import difflib

                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise SettingError(
                    f"@pytest.mark.gpuperf got an unknown keyword {key!r}{hint}; it accepts: {', '.join(allowed)}"
                )
            changes[key] = _parse(spec, raw, f"@pytest.mark.gpuperf({key}={raw!r})")
        measured = {k: changes.pop(k) for k in list(changes) if k in MEASURE_FIELDS}
        measure = dataclasses.replace(self.measure, **measured)
        measure.check("@pytest.mark.gpuperf")
        return dataclasses.replace(self, measure=measure, **changes)

    def flags(self) -> list[str]:
        """This session's measuring options as command-line flags, for a confirmation run of its tests."""
        out = []
        for spec in OPTIONS:
            if spec.field not in _SESSION_ONLY:
                value = self.value(spec.field)
                if spec.switch:  # a flag without a value: given when on
                    out += [spec.flag] if value else []
                    continue
                text = _flag_value(value)
                if text is not None:
                    out.append(f"{spec.flag}={text}")
        return out

    def as_dict(self) -> dict[str, Any]:
        """Every option's value by field, as a run's ``settings`` stores it (devices joined by commas)."""
        out = {spec.field: self.value(spec.field) for spec in OPTIONS}
        out["device"] = ",".join(self.device)
        out["tolerance"] = values.tolerance_json(self.tolerance)
        return out


#: Every field's default: what an option not given keeps (each option's default, parsed, is this; tested).
_DEFAULT: Final = Settings()


def _check_trace(trace: str, profile: str) -> None:
    """A trace is of the profiled calls: asking for every test's trace with profiles off means nothing."""
    if trace == "all" and profile == "off":
        raise SettingError(
            "--gpuperf-trace=all writes the trace of each test's profiled calls, and --gpuperf-profile=off profiles "
            "none: drop --gpuperf-profile=off (or use --gpuperf-profile=counts), or leave --gpuperf-trace=all out"
        )


def user_settings(config: pytest.Config) -> frozenset[str]:
    """The settings the user chose for this session, by name (``max_time``, ``threads`` ...): those given on the
    command line (``--gpuperf-max-time``) or in an ini file (``gpuperf_max_time``).

    For a conftest with defaults of its own for its tests: apply one only where the user set
    nothing, with an appended ``@pytest.mark.gpuperf(...)`` (a test's own marker still wins),
    as ``suites/conftest.py`` does.
    """
    return chosen(*given_values(config))


def _flag_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or None
    return str(value)


def _parse(spec: OptionSpec, raw: object, source: str) -> Any:
    try:
        return PARSERS[spec.field](raw)
    except SettingError as exc:
        raise SettingError(f"{source}: {exc}") from None
