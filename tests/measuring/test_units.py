from __future__ import annotations

import math

import pytest

from pytest_gpuperf.measuring import (
    Quantity,
    clipped,
    counted,
    format_bytes,
    format_duration,
    format_rate,
    parse_quantity,
)
from pytest_gpuperf.measuring._units import UnitError


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("120 TFLOP/s", 120e12, "FLOP/s"),
        ("120TFLOPS", 120e12, "FLOP/s"),
        ("3.2 ms", 3.2e-3, "s"),
        ("250us", 250e-6, "s"),
        ("250 µs", 250e-6, "s"),
        ("7 ns", 7e-9, "s"),
        ("2 s", 2.0, "s"),
        ("8.1e3 samples/s", 8100.0, "samples/s"),
        ("8.1k samples/s", 8100.0, "samples/s"),
        ("1.5 GB/s", 1.5e9, "B/s"),
        ("1 GiB/s", 2.0**30, "B/s"),
        ("512 MiB", 512 * 2.0**20, "B"),
        ("4 Mtokens/s", 4e6, "tokens/s"),
        ("300 img/s", 300.0, "images/s"),
        ("  .5 GFLOP/s ", 0.5e9, "FLOP/s"),
    ],
)
def test_parse(text: str, value: float, unit: str) -> None:
    q = parse_quantity(text)
    assert q.unit == unit
    assert math.isclose(q.value, value, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("fast", "cannot parse 'fast'"),
        ("12 widgets/s", "unknown unit 'widgets/s'"),
        ("12", "has no unit"),
        ("", "cannot parse"),
        ("1e999 ms", "not a finite number"),
    ],
)
def test_parse_errors_name_the_value(text: str, fragment: str) -> None:
    with pytest.raises(UnitError, match=fragment.replace("(", r"\(")):
        parse_quantity(text)


def test_kind_is_enforced() -> None:
    with pytest.raises(UnitError, match=r"'3 ms' is not a rate"):
        parse_quantity("3 ms", kind="rate")
    with pytest.raises(UnitError, match=r"is not a time"):
        parse_quantity("3 GFLOP/s", kind="time")
    assert parse_quantity(0.5, kind="time") == Quantity(0.5, "s")
    assert parse_quantity("0.5", kind="time") == Quantity(0.5, "s")
    with pytest.raises(UnitError, match="has no unit"):
        parse_quantity(3.0, kind="rate")


@pytest.mark.parametrize(
    "text", ["120 TFLOP/s", "3.2 ms", "8.1k samples/s", "1.5 GB/s", "7 ns", "45.5 us", "2 s", "300 images/s"]
)
def test_format_round_trips(text: str) -> None:
    q = parse_quantity(text)
    again = parse_quantity(str(q))
    assert again.unit == q.unit
    assert math.isclose(again.value, q.value, rel_tol=1e-3)


def test_formatting_picks_readable_prefixes() -> None:
    assert format_rate(1.2e14, "FLOP") == "120 TFLOP/s"
    assert format_rate(8100, "samples") == "8.1k samples/s"
    assert format_rate(12.0, "images") == "12 images/s"
    assert format_duration(0.0032) == "3.2 ms"
    assert format_duration(4.5e-8) == "45 ns"
    assert format_bytes(3 * 2**20) == "3 MiB"
    assert format_bytes(100) == "100 B"


def test_a_count_is_said_with_its_noun_plural_only_where_it_is_not_one() -> None:
    """``1 paired rounds`` was printed (issue 35, item 9): every count of the package's output is said this way."""
    assert [counted(n, "paired round") for n in (0, 1, 2)] == ["0 paired rounds", "1 paired round", "2 paired rounds"]


@pytest.mark.parametrize(
    ("text", "width", "shown"),
    [
        ("a short subject", 60, "a short subject"),
        ("measuring: the lead kept across builds of one step", 30, "measuring: the lead kept..."),
        ("supercalifragilisticexpialidocious and more", 10, "superca..."),
    ],
)
def test_a_clipped_text_is_cut_at_a_word_never_inside_one_where_a_word_fits(text: str, width: int, shown: str) -> None:
    """History subjects were cut mid-word (issue 35, item 9)."""
    assert clipped(text, width) == shown and len(shown) <= width
