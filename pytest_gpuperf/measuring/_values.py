"""Option values: the one set of parsers behind the ``--gpuperf-*`` options, their ini keys, the markers and the CLI.

Each parser takes what a user wrote (a string from the command line or an ini file,
or a Python value from a marker) and returns the value, or raises SettingError whose
message says what is wrong and how to write it; the caller prefixes where the value
came from (``--gpuperf-target=2``, ``ini gpuperf_target``, ``--tolerance``). Every value has a
bound (docs/options.md says each, and why): a count at most ``MAX_COUNT``, a session's rounds
and confirmation runs at most ``MAX_ROUNDS`` and ``MAX_CONFIRM``, a fixed budget's counts at most
``MAX_SAMPLES``, a time budget at most ``MAX_SECONDS``, threads at most the machine's CPUs.

The values read back from a file are read here too: ``stored`` reads one field, with the
converters after it (``stored_count`` ...), raising FieldError that names the field and its
bound; ``optional`` converts a value that may be null.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar

from ._units import UnitError, parse_quantity

__all__ = [
    "MAX_AMOUNT",
    "MAX_COMMIT_SECONDS",
    "MAX_CONFIRM",
    "MAX_COUNT",
    "MAX_ROUNDS",
    "MAX_SAMPLES",
    "MAX_SECONDS",
    "AutoTolerance",
    "FieldError",
    "PastBound",
    "SettingError",
    "Threads",
    "Tolerance",
    "argtype",
    "budget_iterations",
    "budget_rounds",
    "budget_warmup_rounds",
    "choice",
    "commit_timeout",
    "confirmations",
    "fraction",
    "given_path",
    "given_word",
    "min_samples",
    "on_off",
    "optional",
    "positive_int",
    "positive_seconds",
    "quiet_wait",
    "rounds",
    "seconds",
    "shown",
    "stored",
    "stored_count",
    "stored_flag",
    "stored_list",
    "stored_map",
    "stored_number",
    "stored_numbers",
    "stored_text",
    "stored_tolerance",
    "threads",
    "tolerance",
    "tolerance_json",
    "whole",
]

#: The largest whole number any input may be (an option's count, a file's): 2**53, the last from which every whole
#: number is exact in a double, JSON's number in most readers. No count of what a step does comes near it.
MAX_COUNT: Final = 2**53
#: The largest FLOPs or bytes of one call a file may hold: 2**64 (1.8e19), an hour of a GPU at 5 PFLOP/s.
MAX_AMOUNT: Final = 2**64
#: ``--gpuperf-rounds``: each round measures every test again, so a session of this many is already days long.
MAX_ROUNDS: Final = 10_000
#: ``--gpuperf-confirm``: each confirmation is a fresh pytest process per slower test.
MAX_CONFIRM: Final = 100
#: The most samples one measurement takes (``SamplingPlan.max_samples``); a fixed budget's counts too.
MAX_SAMPLES: Final = 1_000_000
#: A time budget (``max_time``, ``warmup_time``, ``min_time``, ``quiet_wait``, ``ab --max-time``): an hour per
#: measurement; a budget past it is a typo, and ``1e308`` overflowed the block size.
MAX_SECONDS: Final = 3600.0
#: ``history record --timeout``: a commit's whole test run.
MAX_COMMIT_SECONDS: Final = 86_400.0

#: ``auto``: one thread on a CPU device, torch's default on a GPU; ``torch``: torch's default everywhere.
Threads: TypeAlias = int | Literal["auto", "torch"]

T = TypeVar("T")


class SettingError(ValueError):
    """A value that cannot be used; the message says which and how to fix it."""


class PastBound(SettingError):
    """A value of the right kind, past its bound; the message says the bound, why, and what to give."""


def optional(value: Any, convert: Callable[[Any], T]) -> T | None:
    """``convert(value)``, or None for None: a value read from a file or a mapping, where null means not known."""
    return None if value is None else convert(value)


def argtype(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse ``type=`` from one of these parsers (or any that raises ValueError with the fix)."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def seconds(most: float, why: str) -> Callable[[object], float]:
    """A positive time of at most ``most`` seconds (a bare number is seconds); ``why`` follows the bound."""

    def parse(raw: object) -> float:
        try:
            value = parse_quantity(raw if isinstance(raw, (int, float, str)) else str(raw), kind="time").value
        except UnitError as exc:
            raise SettingError(f"{exc}; write a time such as 0.5, '500 ms' or '2 s'") from None
        if not value > 0 or math.isnan(value):
            raise SettingError("must be a positive time, such as 0.5, '500 ms' or '2 s'")
        if value > most:
            raise PastBound(f"must be at most {most:g} s{why}; give a time of {most:g} s or less, such as '2 s'")
        return value

    return parse


#: A measuring time budget: a positive time of at most ``MAX_SECONDS``.
positive_seconds: Final = seconds(MAX_SECONDS, " (an hour, the bound on a measuring time budget)")
#: ``history record --timeout``.
commit_timeout: Final = seconds(MAX_COMMIT_SECONDS, " (a day, the bound on one commit's run)")


def fraction(raw: object) -> float:
    text = str(raw).strip()
    try:
        value = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise SettingError("is not a number; write a fraction such as 0.01 or a percentage such as 1%") from None
    if not 0 < value < 1:
        raise SettingError("must be between 0 and 1 (exclusive); write 0.01 or 1% for one percent")
    return value


@dataclass(frozen=True)
class AutoTolerance:
    """A tolerance of ``auto``: each row's is the smallest change its own evidence can see (the gate's
    ``detectable``), never under ``floor``. Written as the option takes it: ``auto``, ``auto:3%``."""

    floor: float = 0.02

    def __str__(self) -> str:
        return "auto" if self == AutoTolerance() else f"auto:{self.floor * 100:.4g}%"


#: A fixed tolerance (a fraction) or ``auto``.
Tolerance: TypeAlias = float | AutoTolerance


def tolerance_json(value: Tolerance) -> float | str:
    """How a file stores a tolerance: the fraction, or auto's text (``tolerance`` reads either back)."""
    return value if isinstance(value, float) else str(value)


def tolerance(raw: object) -> Tolerance:
    """``0.05`` or ``5%`` (fixed), ``auto`` (each row's own smallest detectable change, at least 2%), or
    ``auto:3%`` (at least 3%); also the value a run's settings store (a number or that text)."""
    if isinstance(raw, AutoTolerance):
        return raw
    text = str(raw).strip().lower()
    if text == "auto":
        return AutoTolerance()
    if text.startswith("auto:"):
        try:
            return AutoTolerance(fraction(text[len("auto:") :]))
        except SettingError as exc:
            raise SettingError(f"the floor after auto: {exc}") from None
    try:
        return fraction(raw)
    except SettingError as exc:
        raise SettingError(f"{exc}; or auto, or auto:3% for auto with a floor of 3%") from None


def _bound(most: int) -> str:
    return {MAX_COUNT: "2**53", MAX_AMOUNT: "2**64"}.get(most, str(most))


_DIGITS: Final = re.compile(r"[+]?[0-9_]+")


def _whole(raw: object) -> int:
    """The whole number written; one of more digits than Python converts (4,300) is past every bound, and reads as
    ``MAX_COUNT + 1``."""
    if isinstance(raw, bool):
        raise SettingError("is not a whole number")
    text = str(raw).strip()
    try:
        return int(text)
    except ValueError:
        if _DIGITS.fullmatch(text):
            return MAX_COUNT + 1
        raise SettingError("is not a whole number") from None


def whole(least: int, most: int = MAX_COUNT, why: str = "") -> Callable[[object], int]:
    """A whole number from ``least`` to ``most``; ``why`` (" (a bound that keeps a session finite)") follows the
    bound in the message."""
    shown = _bound(most)

    def parse(raw: object) -> int:
        value = _whole(raw)
        if value < least:
            raise SettingError("must be at least 1" if least == 1 else f"must be {least} or more")
        if value > most:
            raise PastBound(f"must be at most {shown}{why}; give {shown} or less")
        return value

    return parse


positive_int: Final = whole(1, MAX_COUNT, " (the bound on every count)")
#: ``--gpuperf-rounds``.
rounds: Final = whole(1, MAX_ROUNDS, " (each round measures every test again: a bound that keeps a session finite)")
#: ``--gpuperf-confirm``.
confirmations: Final = whole(0, MAX_CONFIRM, " (fresh runs of each slower test: a bound that keeps a session finite)")
_builds: Final = whole(0, MAX_CONFIRM, " (fresh builds of each suspect: a bound that keeps a run finite)")


def builds(raw: object) -> int:
    """``ab --confirm``: fresh builds of each suspect row, 0 (none) or 2 or more (one gives no spread between
    builds to judge it by)."""
    value = _builds(raw)
    if value == 1:
        raise SettingError("gives no spread between builds to judge by; give 0 (no confirmation) or 2 or more")
    return value


#: ``min_samples``: at most the sampling loop's cap on samples, which a minimum above it could never meet.
min_samples: Final = whole(1, MAX_SAMPLES, " (the sampling loop's cap on samples, which a minimum cannot pass)")
#: A fixed budget's counts (``benchmark.pedantic``'s), kept exactly and at no cap: its rounds are samples kept,
budget_rounds: Final = whole(1, MAX_SAMPLES, " (each round is a sample kept: the sampling loop's cap on samples)")
#: its untimed rounds as many,
budget_warmup_rounds: Final = whole(0, MAX_SAMPLES, " (untimed rounds: as many as the rounds may be)")
#: and a round's calls never need more to be timed (``min_block_time`` is 1 ms on a CPU).
budget_iterations: Final = whole(
    1, MAX_SAMPLES, " (a million calls of a one-nanosecond step already fill the 1 ms block the sampler times)"
)


def threads(raw: object) -> Threads:
    text = str(raw).strip().lower()
    if text == "auto":
        return "auto"
    if text == "torch":
        return "torch"
    try:
        value = _whole(raw)
    except SettingError:
        raise SettingError(
            "is not a whole number; write a thread count such as 1, auto (1 on a CPU, torch's default on a GPU) "
            "or torch (torch's default everywhere)"
        ) from None
    if value < 1:
        raise SettingError("must be at least 1, or auto or torch")
    cpus = os.cpu_count() or 1
    if value > cpus:
        raise PastBound(
            f"must be at most {cpus}, this machine's CPU count (more threads than CPUs time only their contention); "
            f"give {cpus} or less, or auto"
        )
    return value


def choice(*choices: str) -> Callable[[object], str]:
    def parse(raw: object) -> str:
        value = str(raw).strip().lower()
        if value not in choices:
            raise SettingError(f"must be one of: {', '.join(choices)}")
        return value

    return parse


def given_text(example: str) -> Callable[[object], str | None]:
    """A text option that is off when left out (None), and refused when given empty: an empty value given on
    purpose (``--gpuperf-save=``, from an unset shell variable) must not switch the feature off silently."""

    def parse(raw: object) -> str | None:
        if raw is None:
            return None
        text = str(raw).strip()
        if not text:
            raise SettingError(f"is empty; give {example}, or leave the option out")
        return text

    return parse


def given_path(raw: object) -> Path:
    """A path given on the command line; an empty one (``--results-dir=``, an unset shell variable) is refused,
    where ``Path("")`` would quietly mean the current directory."""
    text = str(raw)
    if not text.strip():
        raise SettingError("is empty; give a path, or leave the option out")
    return Path(text)


def given_word(raw: object) -> str:
    """A non-empty text given on the command line (``-k ''`` would select everything)."""
    text = str(raw)
    if not text.strip():
        raise SettingError("is empty; give a value, or leave the option out")
    return text


def on_off(raw: object) -> bool:
    value = str(raw).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise SettingError("must be on or off")


def quiet_wait(raw: object) -> float | None:
    """``auto`` (None), ``off`` (0) or a time."""
    text = str(raw).strip().lower()
    if text == "auto":
        return None
    if text in ("0", "off", "no"):
        return 0.0
    try:
        return positive_seconds(raw)
    except PastBound:
        raise
    except SettingError:
        raise SettingError("must be auto, off, or a time such as 10 or '30 s'") from None


# ---------------------------------------------------------------- values read back from a file


class FieldError(ValueError):
    """A value read back from a file that no file of ours holds: ``field`` names it from where it was read
    (``measurement.profile.ops[2].count``; list items counted from 1), ``must`` says what it must be."""

    def __init__(self, field: str, must: str) -> None:
        super().__init__(f"field {field!r} {must}" if field else must)
        self.field, self.must = field, must

    def inside(self, outer: str) -> FieldError:
        """This error, its field named from ``outer`` (a key, or ``[N]``)."""
        if not self.field:
            return FieldError(outer, self.must)
        return FieldError(outer + (self.field if self.field.startswith("[") else "." + self.field), self.must)


_REQUIRED: Final = object()


def shown(value: object) -> str:
    """``value`` as a message shows it: short, JSON's words, a long number by its digits, a string escaped."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        try:
            text = str(value)
        except ValueError:  # past the 4,300 digits Python converts (a JSON file cannot hold one)
            return "a number of over 4300 digits"
        digits = len(text.lstrip("-"))
        return text if digits <= 20 else f"{text[:12]}... ({digits} digits)"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:30]) + "..."
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def stored(data: object, key: str, convert: Callable[[Any], T], default: Any = _REQUIRED) -> T:
    """``convert(data[key])``, or ``default`` where ``data`` (an object read from a file) has no ``key``, or holds
    null there.

    The one reader of a field of a file: FieldError names the field (from ``key``, through every ``stored`` it is
    read under) where it is missing, is not an object where one is read, or ``convert`` refuses it (a
    FieldError of its own, or a KeyError, TypeError or ValueError from a converter such as ``str``).
    """
    if type(data) is not dict and not isinstance(data, Mapping):  # JSON's objects are dicts: the quick test first
        raise FieldError("", f"must be an object, not {shown(data)}")
    raw = data.get(key)
    if raw is None and default is not _REQUIRED:
        value: T = default
        return value
    if key not in data:
        raise FieldError(key, "is missing")
    try:
        return convert(raw)
    except FieldError as exc:
        raise exc.inside(key) from None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
        raise FieldError(key, f"is {shown(raw)}, not a value pytest-gpuperf writes there") from None


def stored_text(value: object) -> str:
    if not isinstance(value, str):
        raise FieldError("", f"must be a string, not {shown(value)}")
    return value


def stored_number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldError("", f"must be a number, not {shown(value)}")
    return float(value)


def stored_tolerance(value: object) -> Tolerance:
    """A tolerance as ``tolerance_json`` writes it: a number, or auto's text."""
    if isinstance(value, str):
        try:
            return tolerance(value)
        except SettingError:
            raise FieldError("", f"must be a fraction or auto's text (auto, auto:3%), not {shown(value)}") from None
    return stored_number(value)


def stored_numbers(value: object) -> tuple[float, ...]:
    """A list of numbers (samples: a file holds hundreds of thousands, read at one check each)."""
    if not isinstance(value, list):
        raise FieldError("", f"must be a list, not {shown(value)}")
    if not all(type(x) is float or type(x) is int for x in value):
        i, item = next((i, x) for i, x in enumerate(value, 1) if type(x) is not float and type(x) is not int)
        raise FieldError(f"[{i}]", f"must be a number, not {shown(item)}")
    return tuple(map(float, value))


def stored_flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise FieldError("", f"must be true or false, not {shown(value)}")
    return value


def stored_count(least: int = 0, most: int = MAX_COUNT) -> Callable[[object], int]:
    """A whole number from ``least`` to ``most`` (a float that is one, as other tools may write it, too)."""
    bound = _bound(most)

    def convert(value: object) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise FieldError("", f"must be a whole number from {least} to {bound}, not {shown(value)}")
        return value

    return convert


def stored_list(convert: Callable[[Any], T], most: int, why: str = "") -> Callable[[object], tuple[T, ...]]:
    """A list of at most ``most`` items (``why`` says why the bound), each read by ``convert``; an item's
    FieldError names it by its place, from 1."""

    def read(value: object) -> tuple[T, ...]:
        if not isinstance(value, list):
            raise FieldError("", f"must be a list, not {shown(value)}")
        if len(value) > most:
            raise FieldError("", f"holds {len(value)} entries, over the {most}{why}")
        out = []
        for i, item in enumerate(value, 1):
            try:
                out.append(convert(item))
            except FieldError as exc:
                raise exc.inside(f"[{i}]") from None
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
                raise FieldError(f"[{i}]", f"is {shown(item)}, not a value pytest-gpuperf writes there") from None
        return tuple(out)

    return read


def stored_map(convert: Callable[[Any], T], most: int, why: str = "") -> Callable[[object], dict[str, T]]:
    """An object of at most ``most`` keys, each value read by ``convert`` (its FieldError names the key)."""

    def read(value: object) -> dict[str, T]:
        if not isinstance(value, Mapping):
            raise FieldError("", f"must be an object, not {shown(value)}")
        if len(value) > most:
            raise FieldError("", f"holds {len(value)} entries, over the {most}{why}")
        return {str(key): stored(value, key, convert) for key in value}

    return read
