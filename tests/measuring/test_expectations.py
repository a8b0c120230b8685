"""Per-device floors read from an expectations file, and the interval judgment of relative estimates."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.measuring import (
    EXPECTATIONS_ENV,
    Check,
    Estimate,
    Expectations,
    GpuperfAssertionError,
    InconclusiveWarning,
    JudgeContext,
    Quantity,
    expect_estimate,
    expectations_path,
)
from pytest_gpuperf.measuring._expectations import ExpectationsError


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "cannot read it as JSON"),
        ('{"schema": "other"}', "not a pytest-gpuperf expectations file"),
        ('{"schema": "pytest-gpuperf/expectations", "version": 1, "floor_fraction": 2}', "floor_fraction 2"),
        (
            '{"schema": "pytest-gpuperf/expectations", "version": 1, "floor_fraction": 0.5, "devices": {"X": {}}}',
            "device 'X' needs \"source\"",
        ),
        (
            '{"schema": "pytest-gpuperf/expectations", "version": 1, "floor_fraction": 0.5, '
            '"devices": {"X": {"source": "s", "datasheet": {"matmul_float32": "fast"}}}}',
            "device 'X', matmul_float32",
        ),
    ],
)
def test_bad_files_are_refused_naming_the_file_and_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ExpectationsError, match=message) as info:
        Expectations.load(path)
    assert str(path) in str(info.value)
    with pytest.raises(ExpectationsError, match="no such expectations file"):
        Expectations.load(tmp_path / "absent.json")


def _estimate(
    what: str,
    median: float,
    low: float,
    high: float,
    evidence: str = "e",
    *,
    confidence: float = 0.95,
    count: int = 0,
    nominal: float | None = None,
) -> Estimate:
    """An estimate of ``what`` from ``evidence``; ``confidence`` is the one achieved, ``nominal`` the one asked for."""
    return Estimate(what, median, low, high, confidence, count, nominal=nominal, evidence=evidence)


def test_interval_judgment_passes_fails_or_is_inconclusive() -> None:
    seen: list[Check] = []
    speedup = _estimate("speedup", 1.5, 1.3, 1.7, "from 10 rounds")
    check = expect_estimate(speedup, at_least=1.1, context=JudgeContext(observer=seen.append))
    assert check.outcome == "pass" and seen == [check]
    failed = r"speedup at least 1.1 expected, but median 1.05, 95% CI \[1, 1.08\] from 10 rounds"
    with pytest.raises(GpuperfAssertionError, match=failed):
        expect_estimate(_estimate("speedup", 1.05, 1.0, 1.08, "from 10 rounds"), at_least=1.1)
    with pytest.warns(InconclusiveWarning, match="straddles the bound"):
        check = expect_estimate(_estimate("overhead", 1.4, 1.2, 1.6, "from 10 rounds"), at_most=1.5)
    assert check.outcome == "inconclusive"
    with pytest.raises(GpuperfAssertionError, match="inconclusive"):
        expect_estimate(_estimate("overhead", 1.4, 1.2, 1.6), at_most=1.5, context=JudgeContext(inconclusive="fail"))
    assert expect_estimate(_estimate("overhead", 1.0, 0.9, 1.1), at_most=1.5).outcome == "pass"
    with pytest.raises(GpuperfAssertionError, match="whole interval is on the wrong side"):
        expect_estimate(_estimate("overhead", 2.0, 1.8, 2.2), at_most=1.5)
    with pytest.raises(ValueError, match="exactly one"):
        expect_estimate(_estimate("x", 1.0, 1.0, 1.0))


def test_an_estimate_from_too_few_rounds_is_inconclusive_wherever_its_range_lies() -> None:
    seen: list[Check] = []
    short = _estimate("speedup", 1.5, 1.3, 1.7, confidence=0.75, count=3, nominal=0.95)
    for at_least in (1.1, 2.0):  # the range [1.3, 1.7] clears 1.1 and misses 2.0: neither decides
        with pytest.warns(InconclusiveWarning, match=r"only 3 paired rounds, and a distribution-free 95% interval"):
            expect_estimate(short, at_least=at_least, context=JudgeContext(observer=seen.append))
    assert [c.outcome for c in seen] == ["inconclusive", "inconclusive"]
    with pytest.raises(GpuperfAssertionError, match=r"the 75% interval \[1.3, 1.7\] e, on the right side of the bound"):
        expect_estimate(short, at_least=1.1, context=JudgeContext(inconclusive="fail"))
    # an interval that reaches the confidence asked for is judged as usual
    enough = _estimate("speedup", 1.5, 1.3, 1.7, confidence=0.97, count=6, nominal=0.95)
    assert expect_estimate(enough, at_least=1.1).outcome == "pass"


@pytest.mark.parametrize("bound", [float("nan"), float("inf"), float("-inf")])
def test_an_estimate_bound_that_is_not_finite_is_bad_input(bound: float) -> None:
    with pytest.raises(ValueError, match=rf"^speedup: at_least={bound!r}: the bound must be a finite number"):
        expect_estimate(_estimate("speedup", 1.5, 1.3, 1.7), at_least=bound)


def test_a_ceiling_is_the_highest_figure_of_a_key_and_the_datasheet_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(
        '{"schema": "pytest-gpuperf/expectations", "version": 1, "floor_fraction": 0.5, "devices": {'
        '"A": {"source": "s", "datasheet": {"copy": "1555 GB/s"}, "ceiling": {"copy": "2039 GB/s"}},'
        '"B": {"source": "s", "datasheet": {"copy": "900 GB/s"}}}}'
    )
    loaded = Expectations.load(path)
    a, b = loaded.devices["A"], loaded.devices["B"]
    assert [a.floor("copy"), a.ceiling("copy")] == [Quantity(777.5e9, "B/s"), Quantity(2039e9, "B/s")]
    assert b.ceiling("copy") == Quantity(900e9, "B/s") and b.ceiling("other") is None
    path.write_text(path.read_text().replace('"ceiling": {"copy": "2039 GB/s"}', '"ceiling": "2039 GB/s"'))
    with pytest.raises(ExpectationsError, match="device 'A': \"ceiling\" must be"):
        Expectations.load(path)


def test_the_file_in_use_is_the_environments_else_the_suites(tmp_path: Path) -> None:
    assert expectations_path({EXPECTATIONS_ENV: str(tmp_path / "x.json")}) == tmp_path / "x.json"
    shipped = expectations_path({})
    assert shipped is not None and shipped.name == "expectations.json" and shipped.parent.name == "suites"
    assert Expectations.load(shipped).for_device("NVIDIA H100 80GB HBM3") is not None
