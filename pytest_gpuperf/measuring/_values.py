"""Option values: the one set of parsers behind the ``--gpuperf-*`` options, their ini keys, the markers and the CLI.

Each parser takes what a user wrote (a string from the command line or an ini file,
or a Python value from a marker) and returns the value, or raises SettingError whose
message says what is wrong and how to write it; the caller prefixes where the value
came from (``--gpuperf-target=2``, ``ini gpuperf_target``, ``--tolerance``). ``optional``
converts a value read back from a file, which may be null.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar

from ._units import UnitError, parse_quantity

__all__ = [
    "SettingError",
    "Threads",
    "argtype",
    "choice",
    "count",
    "fraction",
    "given_path",
    "given_word",
    "on_off",
    "optional",
    "positive_int",
    "positive_seconds",
    "quiet_wait",
    "threads",
]

#: ``auto``: one thread on a CPU device, torch's default on a GPU; ``torch``: torch's default everywhere.
Threads: TypeAlias = int | Literal["auto", "torch"]

T = TypeVar("T")


class SettingError(ValueError):
    """A value that cannot be used; the message says which and how to fix it."""


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


def positive_seconds(raw: object) -> float:
    try:
        seconds = parse_quantity(raw if isinstance(raw, (int, float, str)) else str(raw), kind="time").value
    except UnitError as exc:
        raise SettingError(f"{exc}; write a time such as 0.5, '500 ms' or '2 s'") from None
    if not seconds > 0 or not math.isfinite(seconds):
        raise SettingError("must be a positive time, such as 0.5, '500 ms' or '2 s'")
    return seconds


def fraction(raw: object) -> float:
    text = str(raw).strip()
    try:
        value = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise SettingError("is not a number; write a fraction such as 0.01 or a percentage such as 1%") from None
    if not 0 < value < 1:
        raise SettingError("must be between 0 and 1 (exclusive); write 0.01 or 1% for one percent")
    return value


def _whole(raw: object) -> int:
    if isinstance(raw, bool):
        raise SettingError("is not a whole number")
    try:
        return int(str(raw).strip())
    except ValueError:
        raise SettingError("is not a whole number") from None


def positive_int(raw: object) -> int:
    value = _whole(raw)
    if value < 1:
        raise SettingError("must be at least 1")
    return value


def count(raw: object) -> int:
    value = _whole(raw)
    if value < 0:
        raise SettingError("must be 0 or more")
    return value


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
    except SettingError:
        raise SettingError("must be auto, off, or a time such as 10 or '30 s'") from None
