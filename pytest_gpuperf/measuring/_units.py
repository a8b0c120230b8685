"""Quantities with units: parse ``"120 TFLOP/s"``, ``"3.2 ms"``, ``"1.5 GB/s"``; print them back.

Values are kept in base units: seconds for times, bytes for memory, and
``<unit>/s`` for rates (``FLOP/s``, ``B/s``, ``samples/s`` ...). Prefixes are SI
(``k M G T P``, ``m u µ n``) plus binary ones for bytes (``KiB MiB GiB TiB``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "TIME",
    "Quantity",
    "UnitError",
    "clipped",
    "counted",
    "duration_unit",
    "format_bytes",
    "format_duration",
    "format_rate",
    "parse_quantity",
]

TIME: Final = "s"

#: Units of work a measurement can be credited with; a rate is ``<unit>/s``.
#: Each maps to the spellings accepted for it.
WORK_UNITS: Final[dict[str, tuple[str, ...]]] = {
    "FLOP": ("FLOP", "FLOPs", "flop", "flops"),
    "B": ("B", "bytes", "byte"),
    "samples": ("samples", "sample"),
    "items": ("items", "item"),
    "images": ("images", "image", "img"),
    "tokens": ("tokens", "token"),
}

_SI: Final[dict[str, float]] = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "m": 1e-3,
    "u": 1e-6,
    "µ": 1e-6,
    "n": 1e-9,
}
_BINARY: Final[dict[str, float]] = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_TIME_UNITS: Final[dict[str, float]] = {
    "s": 1.0,
    "sec": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    "min": 60.0,
}
_NUMBER = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")
_UP_PREFIXES: Final = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))


class UnitError(ValueError):
    """A quantity that cannot be parsed, or one of the wrong kind."""


@dataclass(frozen=True)
class Quantity:
    """A value in base units: ``unit`` is ``"s"``, a work unit such as ``"B"``, or ``"<work>/s"``."""

    value: float
    unit: str

    @property
    def is_time(self) -> bool:
        return self.unit == TIME

    @property
    def is_rate(self) -> bool:
        return self.unit.endswith("/s")

    @property
    def work_unit(self) -> str:
        """For a rate, the unit of work per second (``"FLOP"`` for ``FLOP/s``)."""
        if not self.is_rate:
            raise UnitError(f"{self} is not a rate")
        return self.unit[:-2]

    def __str__(self) -> str:
        if self.is_time:
            return format_duration(self.value)
        if self.is_rate:
            return format_rate(self.value, self.work_unit)
        if self.unit == "B":
            return format_bytes(self.value)
        return f"{_si(self.value)} {self.unit}"


def _known_units() -> str:
    rates = ", ".join(f"{u}/s" for u in WORK_UNITS)
    return f"times (ns, us, ms, s), rates ({rates}) with SI prefixes such as T or G, bytes (B, MiB, GB)"


def _lookup_work(word: str) -> str | None:
    for unit, spellings in WORK_UNITS.items():
        if word in spellings:
            return unit
    return None


def _split_prefix(token: str) -> tuple[float, str] | None:
    """``"TFLOP"`` -> (1e12, "FLOP"); ``"GiB"`` -> (2**30, "B"); None when no work unit fits."""
    unit = _lookup_work(token)
    if unit is not None:
        return 1.0, unit
    for prefix, factor in _BINARY.items():
        if token.startswith(prefix) and _lookup_work(token[len(prefix) :]) == "B":
            return factor, "B"
    if token[:1] in _SI and token[:1]:
        unit = _lookup_work(token[1:])
        if unit is not None:
            return _SI[token[:1]], unit
    return None


def parse_quantity(text: str | float | int | Quantity, *, kind: str | None = None) -> Quantity:
    """Parse ``"120 TFLOP/s"``, ``"3.2 ms"``, ``"8.1e3 samples/s"``, ``"1.5 GB/s"``, ``"512 MiB"``.

    ``kind`` restricts the result: ``"time"``, ``"rate"`` or ``"bytes"``. A bare
    number is accepted only for ``kind="time"`` (seconds) or ``kind="bytes"``.
    """
    if isinstance(text, Quantity):
        q = text
    elif isinstance(text, (int, float)) and not isinstance(text, bool):
        if kind == "time":
            q = Quantity(float(text), TIME)
        elif kind == "bytes":
            q = Quantity(float(text), "B")
        else:
            raise UnitError(f"{text!r} has no unit; write it with one, for example '50 TFLOP/s' or '3.2 ms'")
    else:
        q = _parse_text(str(text), kind)
    _check_kind(q, kind, text)
    return q


def _parse_text(text: str, kind: str | None) -> Quantity:
    match = _NUMBER.match(text)
    if match is None:
        raise UnitError(
            f"cannot parse {text!r} as a quantity: expected a number and a unit, such as '50 TFLOP/s' or '3.2 ms'"
        )
    value = float(match.group(1))
    unit = match.group(2).replace(" ", "")
    if not math.isfinite(value):
        raise UnitError(f"{text!r} is not a finite number")
    if unit == "":
        if kind == "time":
            return Quantity(value, TIME)
        if kind == "bytes":
            return Quantity(value, "B")
        raise UnitError(f"{text!r} has no unit; write it with one: {_known_units()}")
    if unit in _TIME_UNITS:
        return Quantity(value * _TIME_UNITS[unit], TIME)
    per_second = unit.endswith("/s")
    stem = unit[:-2] if per_second else unit
    if not per_second and stem.endswith("PS") and stem.upper().endswith("FLOPS"):
        stem, per_second = stem[:-1], True  # "TFLOPS" is the common spelling of TFLOP/s
    split = _split_prefix(stem)
    if split is None:
        raise UnitError(f"unknown unit {unit!r} in {text!r}; use one of: {_known_units()}")
    factor, work = split
    return Quantity(value * factor, f"{work}/s" if per_second else work)


def _check_kind(q: Quantity, kind: str | None, original: object) -> None:
    if kind is None:
        return
    ok = {"time": q.is_time, "rate": q.is_rate, "bytes": q.unit == "B"}.get(kind)
    if ok is None:
        raise ValueError(f"unknown quantity kind {kind!r}")
    if not ok:
        examples = {"time": "'3.2 ms'", "rate": "'50 TFLOP/s' or '8e3 samples/s'", "bytes": "'512 MiB'"}[kind]
        raise UnitError(f"{original!r} is not a {kind}; write a {kind} such as {examples}")


def _si(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:.4g}"
    for prefix, factor in _UP_PREFIXES:
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}".rstrip()
    return f"{value:.4g}"


def format_rate(per_second: float, work_unit: str, per: str = "s") -> str:
    """``format_rate(1.2e14, "FLOP")`` -> ``"120 TFLOP/s"``; ``(8100, "samples")`` -> ``"8.1k samples/s"``;
    ``per="J"`` for work per joule."""
    if per_second == 0 or not math.isfinite(per_second):
        return f"{per_second:.4g} {work_unit}/{per}"
    prefix, factor = next(((p, f) for p, f in _UP_PREFIXES if abs(per_second) >= f), ("", 1.0))
    if work_unit in ("FLOP", "B"):
        return f"{per_second / factor:.4g} {prefix}{work_unit}/{per}"
    return f"{per_second / factor:.4g}{prefix} {work_unit}/{per}"


def duration_unit(seconds: float) -> tuple[str, float]:
    """The unit in which ``seconds`` reads best (s, ms, us or ns), and its size in seconds."""
    magnitude = abs(seconds)
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if magnitude >= factor:
            return unit, factor
    return "ns", 1e-9


def format_duration(seconds: float) -> str:
    """``format_duration(0.0032)`` -> ``"3.2 ms"``."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    unit, factor = duration_unit(seconds)
    return f"{seconds / factor:.4g} {unit}"


def clipped(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: cut at the last word that fits, with ``...`` after it (a first
    word longer than ``width`` is cut inside), never mid-word where a word boundary fits."""
    if len(text) <= width:
        return text
    room = text[: max(width - 3, 1)]
    cut = room.rsplit(" ", 1)[0] if " " in room.strip() else room
    return cut.rstrip(" ,;:") + "..."


def counted(count: int, noun: str) -> str:
    """``1 paired round``, ``3 paired rounds``: a count and its noun, plural where the count is not 1."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def format_bytes(n: float) -> str:
    """Binary prefixes, as memory is sized: ``format_bytes(3 * 2**20)`` -> ``"3 MiB"``."""
    magnitude = abs(n)
    for prefix, factor in (("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20), ("Ki", 2.0**10)):
        if magnitude >= factor:
            return f"{n / factor:.4g} {prefix}B"
    return f"{n:.0f} B"
