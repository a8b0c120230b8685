"""Counts that noise cannot move (issue 22, item 2): two sides' work profiles compared exactly, by category."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from pytest_gpuperf.measuring import CATEGORIES, OpStat, WorkProfile
from pytest_gpuperf.measuring._profile import (
    NO_DATA_OPS,
    SHOWN_CHANGES,
    CompileCounters,
    WorkComparison,
    compare_work,
)

MiB = 1 << 20


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


#: The categories the profiled calls give, and those of the counting call (``measuring/_profiler.py``).
CALLS = ("ops", "kernels", "runtime", "syncs", "allocated")
COUNTING = ("flops", "copied")


def full(mm: int = 1) -> WorkProfile:
    return profile(2, {"aten::mm": 2 * mm}, flops=100 * mm, bytes_copied={"htod": 64}, bytes_allocated={"cpu": 64})


def test_what_a_profile_reduced_to_keep_within_its_budget_left_out_is_unknown_never_a_change() -> None:
    """Issue 37 item 2: a profile that read only its counting call (no op counted), or ran no counting call (no
    FLOPs, no copies), or nothing, against a full one: on main each left-out count would have read as zero."""
    counting_only = WorkProfile(level="full", calls=0, flops=100, bytes_copied={"htod": 64}, left_out=CALLS)
    work = compared([full()], [counting_only])
    assert work.verdict == "same" and work.changes == () and work.compared == 2  # flops, copied htod
    no_counting = dataclasses.replace(full(), flops=None, bytes_copied={}, left_out=COUNTING)
    work = compared([full()], [no_counting])
    assert work.verdict == "same" and work.compared == 2  # aten::mm, allocated cpu
    none = WorkProfile(level="full", calls=0, left_out=COUNTING + CALLS, reduced="not profiled: ...")
    assert compared([full()], [none]).verdict == "unknown" and compared([none], [full()]).compared == 0
    assert compared([full()], [counting_only]).summary(CATEGORIES) is None


def test_a_reduced_profile_among_a_sides_full_ones_neither_hides_a_change_nor_makes_a_count_varying() -> None:
    counting_only = WorkProfile(level="full", calls=0, flops=100, bytes_copied={"htod": 64}, left_out=CALLS)
    work = compared([full(), counting_only], [full(mm=2)])
    assert work.verdict == "more" and work.varying == ()
    assert [c.key for c in work.changes] == ["op:aten::mm", "flops"]


def test_nothing_to_compare_is_unknown() -> None:
    empty = WorkProfile(level="counts", calls=1)
    assert compared([empty], [empty]).verdict == "unknown"


# ------------------------------------------------------------------ the order of the lines (issue 35, item 1)


def timed(calls: int, ops: dict[str, tuple[int, float]], **fields: Any) -> WorkProfile:
    """A level ``full`` profile of ``calls`` calls: each op's total count and total seconds over the calls."""
    stats = tuple(OpStat(name, count, seconds) for name, (count, seconds) in ops.items())
    return WorkProfile(level="full", calls=calls, ops=stats, **fields)


#: ``out += a @ b``, and with ``out[:77] += a[:77] @ b`` planted: the counts a real profile read (2 calls), each
#: view op a few microseconds, the matmul a millisecond.
PLAIN = {"aten::mm": (2, 2e-3), "aten::matmul": (2, 4e-5), "aten::resolve_conj": (6, 6e-6), "aten::add_": (2, 6e-5)}
PLANTED = {
    **PLAIN,
    "aten::mm": (4, 3.2e-3),
    "aten::matmul": (4, 8e-5),
    "aten::resolve_conj": (12, 1.2e-5),
    "aten::add_": (4, 1e-4),
    "aten::as_strided": (6, 1.2e-5),
    "aten::slice": (6, 6e-5),
    "aten::copy_": (2, 5e-5),
}


def test_the_line_of_the_costliest_change_comes_first_and_the_ops_that_move_no_data_share_one() -> None:
    """On main the lines ran by the size of the change: ``aten::as_strided 0 -> 3``, ``aten::resolve_conj 3 -> 6``,
    ``aten::slice 0 -> 3``, and the planted matmul fourth."""
    work = compared([timed(2, PLAIN, flops=4 * MiB)], [timed(2, PLANTED, flops=6 * MiB)])
    assert work.verdict == "more" and work.categories["ops"] == "more"  # the verdicts are those of the counts
    assert work.details() == [
        "aten::mm 1 -> 2/call (+1)",
        "aten::copy_ 0 -> 1/call (+1)",
        "aten::add_ 1 -> 2/call (+1)",
        "aten::matmul 1 -> 2/call (+1)",
        "view/metadata ops 3 -> 12/call (+9): aten::as_strided 0 -> 3, aten::resolve_conj 3 -> 6, aten::slice 0 -> 3",
        "flops 4.19e+06 -> 6.29e+06/call (+50.0%)",
    ]
    assert work.details(3) == [
        "aten::mm 1 -> 2/call (+1)",
        "aten::copy_ 0 -> 1/call (+1)",
        "flops 4.19e+06 -> 6.29e+06/call (+50.0%)",
    ]
    assert work.details(2)[-1] == "flops 4.19e+06 -> 6.29e+06/call (+50.0%)"  # the first of each category first
    # the JSON keeps every change, in the order of the lines
    assert [c["key"] for c in work.to_dict(CATEGORIES)["changes"]] == [
        "op:aten::mm",
        "op:aten::copy_",
        "op:aten::add_",
        "op:aten::matmul",
        "op:aten::as_strided",
        "op:aten::resolve_conj",
        "op:aten::slice",
        "flops",
    ]


def test_a_fold_of_many_ops_names_the_first_three_where_the_lines_are_few() -> None:
    views = {f"aten::{name}": (1, 1e-6) for name in ("view", "expand", "t", "unsqueeze", "empty")}
    work = compared([timed(1, {"aten::mm": (1, 1e-3)})], [timed(1, {"aten::mm": (1, 1e-3), **views})])
    assert work.details(SHOWN_CHANGES) == [
        "view/metadata ops 0 -> 5/call (+5): aten::empty 0 -> 1, aten::expand 0 -> 1, aten::t 0 -> 1 and 2 more"
    ]
    assert work.details()[0].endswith("aten::unsqueeze 0 -> 1, aten::view 0 -> 1")
    assert set(views) <= NO_DATA_OPS and "aten::mm" not in NO_DATA_OPS and "aten::copy_" not in NO_DATA_OPS


def test_kernels_rank_by_their_device_time_and_counts_without_times_by_the_relative_change() -> None:
    ops = {"aten::mm": (1, 1e-5)}
    base = timed(1, ops, kernels=(OpStat("gemm", 1, 1e-3), OpStat("fill", 10, 1e-5)))
    head = timed(1, ops, kernels=(OpStat("gemm", 2, 2e-3), OpStat("fill", 15, 1.5e-5)))
    assert compared([base], [head]).details() == ["kernels gemm: 1 -> 2/call (+1)", "kernels fill: 10 -> 15/call (+5)"]
    # level counts keeps no times: the doubled op before the one that ran 20% more often
    counted = compared([profile(1, {"aten::mm": 1, "aten::add": 10})], [profile(1, {"aten::mm": 2, "aten::add": 12})])
    assert counted.details() == ["aten::mm 1 -> 2/call (+1)", "aten::add 10 -> 12/call (+2)"]


def test_a_sync_change_stays_in_sight_beside_changes_of_every_category() -> None:
    many = {f"aten::op{i}": (i, i * 1e-4) for i in range(1, 12)}
    head = timed(
        1,
        {k: (2 * n, 2 * s) for k, (n, s) in many.items()},
        kernels=(OpStat("k", 2, 2e-3),),
        runtime={"cudaLaunchKernel": 2},
        syncs={"stream": 1},
        flops=10,
        bytes_allocated={"cpu": 8},
    )
    work = compared([timed(1, many, flops=5, bytes_allocated={"cpu": 4})], [head])
    shown = work.details(SHOWN_CHANGES)
    assert shown[0] == "aten::op11 11 -> 22/call (+11)" and "syncs stream: 0 -> 1/call (+1)" in shown
    assert len(shown) == SHOWN_CHANGES and work.categories["syncs"] == "more"


def test_an_op_that_runs_more_often_costs_what_its_time_grew_not_its_mean_run_times_the_count() -> None:
    """bench/count_ranking.py: ``x + bias.repeat(n, 1)`` adds two tiny ``aten::add`` runs (repeat's own) beside the
    step's large one, and the copy the repeat makes. Costed at the add's mean run (the large one's half) times two,
    ``aten::add 1 -> 3`` led; its time grew by a few microseconds, the copy's by 100."""
    base = timed(1, {"aten::add": (1, 2e-4)})
    head = timed(1, {"aten::add": (3, 2.04e-4), "aten::copy_": (1, 1e-4), "aten::repeat": (1, 3e-5)})
    assert compared([base], [head]).details() == [
        "aten::copy_ 0 -> 1/call (+1)",
        "aten::repeat 0 -> 1/call (+1)",
        "aten::add 1 -> 3/call (+2)",
    ]


def test_the_ops_a_change_added_come_before_those_it_removed_however_costly() -> None:
    """bench/count_ranking.py: SDPA pinned to its math backend led with the fused op it no longer runs, ``aten::
    _scaled_dot_product_flash_attention_for_cpu 1 -> 0``, above the math backend's ``aten::bmm``."""
    flash = "aten::_scaled_dot_product_flash_attention_for_cpu"
    base = timed(2, {flash: (2, 4e-3)})
    head = timed(2, {"aten::bmm": (4, 3e-3), "aten::_softmax": (2, 1e-3)})
    assert compared([base], [head]).details() == [
        "aten::bmm 0 -> 2/call (+2)",
        "aten::_softmax 0 -> 1/call (+1)",
        f"{flash} 1 -> 0/call (-1)",
    ]
    # at level counts, which keeps no times, too
    counted = compared([profile(1, {flash: 1})], [profile(1, {"aten::bmm": 2})])
    assert counted.details() == ["aten::bmm 0 -> 2/call (+2)", f"{flash} 1 -> 0/call (-1)"]
