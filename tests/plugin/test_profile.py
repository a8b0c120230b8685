"""The work profile in a run's JSON, and ``--gpuperf-profile`` switching it off or down to counts."""

from __future__ import annotations

import json
from typing import Any

import pytest

FAST = (
    "--gpuperf-min-time=0.1",  # a budget of 3 ms at least: the profiler's start and stop take 1 ms
    "--gpuperf-max-time=0.2",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-memory=off",
    "--gpuperf-quiet-wait=0",
    "--gpuperf-json=run.json",
)

SUITE = """
import torch


def test_two_matmuls(gpuperf):
    a = torch.ones(32, 32)
    gpuperf.measure(lambda: (a @ a) @ a)
"""


def profile_of(pytester: pytest.Pytester) -> Any:
    data = json.loads((pytester.path / "run.json").read_text())
    (record,) = data["records"]
    return record["measurement"]["profile"]


def test_the_profile_is_in_the_json(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mm=SUITE)
    result = pytester.runpytest_subprocess(*FAST)
    assert result.ret == pytest.ExitCode.OK
    profile = profile_of(pytester)
    assert profile["level"] == "full" and profile["calls"] >= 1
    mm = next(op for op in profile["ops"] if op["name"] == "aten::mm")
    assert mm["count"] == 2 * profile["calls"]
    assert profile["flops"] == 2 * 2 * 32**3


@pytest.mark.parametrize(("level", "calls"), [("off", None), ("counts", 1)])
def test_the_option_switches_it_off_or_to_counts(pytester: pytest.Pytester, level: str, calls: int | None) -> None:
    pytester.makepyfile(test_mm=SUITE)
    pytester.makeini(f"[pytest]\ngpuperf_profile = {level}\n")
    result = pytester.runpytest_subprocess(*FAST)
    assert result.ret == pytest.ExitCode.OK
    profile = profile_of(pytester)
    if calls is None:
        assert profile is None
    else:
        assert profile["calls"] == calls and all(op["seconds"] is None for op in profile["ops"])
