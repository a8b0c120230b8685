"""Counts that noise cannot move (issue 22, item 2): two sides' work profiles compared exactly, by category."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from pytest_gpuperf.measuring import OpStat, WorkProfile
from pytest_gpuperf.measuring._profile import CATEGORIES, CompileCounters, WorkComparison, compare_work


def profile(calls: int = 1, ops: dict[str, int] | None = None, **fields: Any) -> WorkProfile:
    """A profile of ``calls`` calls with these op totals (over the calls) and fields."""
    stats = tuple(OpStat(name, count) for name, count in (ops or {"aten::mm": calls, "aten::add": calls}).items())
    return WorkProfile(level="counts", calls=calls, ops=stats, **fields)


def compared(base: list[WorkProfile], head: list[WorkProfile]) -> WorkComparison:
    work = compare_work(base, head)
    assert work is not None
    return work


def test_no_profile_on_a_side_gives_none() -> None:
    assert compare_work([], [profile()]) is None
    assert compare_work([profile()], []) is None


def test_the_same_counts_over_different_call_counts_are_the_same_work() -> None:
    """Per call, exactly: 3 mm over 3 calls is 6 mm over 6 calls."""
    work = compared([profile(3, flops=100)], [profile(6, flops=100)])
    assert work.verdict == "same" and work.changes == () and work.compared == 3
    assert set(work.categories) == set(CATEGORIES) and set(work.categories.values()) == {"same"}
    assert work.failing(CATEGORIES) == []


def test_one_more_matmul_is_more_ops_and_more_flops_and_fails_on_those_categories() -> None:
    base = profile(2, {"aten::mm": 2, "aten::add": 2}, flops=3 * 2**20)
    head = profile(2, {"aten::mm": 4, "aten::add": 2, "aten::t": 2}, flops=4 * 2**20)
    work = compared([base], [head])
    assert work.verdict == "more"
    assert work.categories["ops"] == "more" and work.categories["flops"] == "more"
    assert work.categories["kernels"] == "same"
    assert [(c.key, c.category, c.base, c.head) for c in work.changes] == [
        ("op:aten::mm", "ops", Fraction(1), Fraction(2)),
        ("op:aten::t", "ops", Fraction(0), Fraction(1)),
        ("flops", "flops", Fraction(3 * 2**20), Fraction(4 * 2**20)),
    ]
    assert work.failing(("slower", "ops", "flops", "memory")) == ["ops", "flops"]
    assert work.failing(("slower",)) == []


def test_fewer_ops_are_less_and_never_fail() -> None:
    work = compared([profile(1, {"aten::mm": 2})], [profile(1, {"aten::mm": 1})])
    assert work.verdict == "less" and work.categories["ops"] == "less"
    assert work.failing(CATEGORIES) == []


def test_the_same_total_in_other_ops_is_different() -> None:
    """A fused op instead of two: the same number of ops in all, other keys."""
    work = compared([profile(1, {"aten::mul": 1, "aten::add": 1})], [profile(1, {"aten::addcmul": 1, "aten::mul": 1})])
    assert work.categories["ops"] == "different" and work.verdict == "different"
    assert work.failing(CATEGORIES) == []


def test_more_in_one_category_and_less_in_another_is_more() -> None:
    work = compared(
        [profile(1, bytes_allocated={"cpu": 4096}, flops=10)], [profile(1, bytes_allocated={"cpu": 8192}, flops=5)]
    )
    assert work.categories["allocated"] == "more" and work.categories["flops"] == "less"
    assert work.verdict == "more" and work.failing(CATEGORIES) == ["allocated"]


def test_a_count_that_differs_between_the_baselines_own_profiles_is_varying_never_a_change() -> None:
    """Autotuning: two baseline records disagree on a kernel; head's third figure is not a change."""
    ops = {"aten::mm": 1}
    base = [profile(1, ops, kernels=(OpStat("gemm_a", 1),)), profile(1, ops, kernels=(OpStat("gemm_b", 1),))]
    head = [profile(1, ops, kernels=(OpStat("gemm_c", 1),))]
    work = compared(base, head)
    assert work.varying == ("kernel:gemm_a", "kernel:gemm_b")
    assert [c.key for c in work.changes] == ["kernel:gemm_c"]  # a kernel no baseline profile ran
    same = compared(base, [profile(1, ops, kernels=(OpStat("gemm_b", 1),))])
    assert same.verdict == "same" and same.compared == 1


def test_a_key_a_profile_lists_as_varying_is_left_out() -> None:
    """Keys that differed between the profiled calls of one profile (``WorkProfile.varying``)."""
    base = profile(2, {"aten::mm": 2, "aten::nonzero": 3})
    head = profile(2, {"aten::mm": 2, "aten::nonzero": 5})
    head = dataclasses.replace(head, varying=("op:aten::nonzero",))
    work = compared([base], [head])
    assert work.verdict == "same" and work.varying == ("op:aten::nonzero",)


def test_a_counter_one_side_lacks_is_not_compared() -> None:
    """FLOPs read on one side only (the counter failed on the other): not a change of zero to N."""
    work = compared([profile(1)], [profile(1, flops=100, bytes_allocated={"cpu": 64})])
    assert work.verdict == "same" and work.compared == 2


@pytest.mark.parametrize(
    ("base", "head", "category"),
    [
        ({"syncs": {"dtoh_copy": 0}}, {"syncs": {"dtoh_copy": 1}}, "syncs"),
        ({"runtime": {"cudaLaunchKernel": 3}}, {"runtime": {"cudaLaunchKernel": 4}}, "runtime"),
        ({"bytes_copied": {"htod": 10}}, {"bytes_copied": {"htod": 20}}, "copied"),
        ({"compile": CompileCounters(0, 1)}, {"compile": CompileCounters(1, 2)}, "compiles"),
        ({"kernels": (OpStat("k", 1),)}, {"kernels": (OpStat("k", 2),)}, "kernels"),
    ],
)
def test_every_category_reads_its_keys(base: dict[str, Any], head: dict[str, Any], category: str) -> None:
    work = compared([profile(1, **base)], [profile(1, **head)])
    assert work.categories[category] == "more" and work.verdict == "more"
    assert {c.category for c in work.changes} == {category}


def test_nothing_to_compare_is_unknown() -> None:
    empty = WorkProfile(level="counts", calls=1)
    assert compared([empty], [empty]).verdict == "unknown"
