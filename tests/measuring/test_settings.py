"""The measuring settings: one thread vocabulary for every route, parsed by the parsers the options use."""

from __future__ import annotations

import os

import pytest

from pytest_gpuperf.measuring import MeasureSettings, SettingError
from pytest_gpuperf.measuring._values import threads


@pytest.mark.parametrize(("raw", "value"), [("auto", "auto"), ("AUTO", "auto"), ("torch", "torch"), ("3", 3), (2, 2)])
def test_threads_take_a_count_auto_or_torch(raw: object, value: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 4)  # a count is at most the machine's CPUs
    assert threads(raw) == value


@pytest.mark.parametrize(("raw", "message"), [("default", "is not a whole number"), ("0", "at least 1, or auto")])
def test_other_thread_words_are_refused_with_the_vocabulary(raw: str, message: str) -> None:
    with pytest.raises(SettingError, match=message):
        threads(raw)


@pytest.mark.parametrize(
    ("setting", "kind", "count"),
    [("auto", "cpu", 1), ("auto", "cuda", None), ("auto", "mps", None), ("torch", "cpu", None), (4, "cuda", 4)],
)
def test_auto_is_one_thread_on_a_cpu_and_torchs_default_on_a_gpu(
    setting: object, kind: str, count: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert MeasureSettings().with_values({"threads": setting}).threads_for(kind) == count


def test_values_are_parsed_and_checked_with_the_context_named() -> None:
    settings = MeasureSettings().with_values({"target": "2%", "max_time": "500 ms", "memory": "off"})
    assert (settings.target, settings.max_time, settings.memory) == (0.02, 0.5, False)
    with pytest.raises(SettingError, match=r"measure\(\): target='abc': is not a number"):
        MeasureSettings().with_values({"target": "abc"}, context="measure()")
    with pytest.raises(SettingError, match="unknown setting 'tolerance'; the settings are: target, min_time"):
        MeasureSettings().with_values({"tolerance": "5%"})
    with pytest.raises(SettingError, match="min_time 2 s is above max_time 1 s"):
        MeasureSettings().with_values({"min_time": 2, "max_time": 1})
