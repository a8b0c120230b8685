"""The hunt for a step's culprit (``history._bisect``), with ``ab`` replaced by a table of each commit's time.

Each fake ``ab`` pair judges the ratio of the two commits' times with the gate's own thresholds in
spirit: beyond the tolerance is slower/faster, within a fifth of it unchanged, anything between
inconclusive; ``answers`` overrides single pairs (a noisy probe).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_gpuperf.history._bisect import Probe, Span, hunt_span
from pytest_gpuperf.history._regressions import match_workload

TOLERANCE = 0.05


def commits(n: int) -> list[str]:
    return [f"{i:040x}" for i in range(n)]


class FakeAb:
    """``ab`` over commits whose times are ``times`` (commit -> seconds); counts its runs."""

    def __init__(
        self,
        times: Mapping[str, float],
        answers: Mapping[tuple[str, str], str | tuple[str, float, float]] | None = None,
    ) -> None:
        self.times = times
        self.answers = dict(answers or {})
        self.runs: list[tuple[str, str]] = []

    def __call__(self, base: str, head: str) -> Probe:
        self.runs.append((base, head))
        ratio = self.times[head] / self.times[base]
        low, high = ratio * 0.99, ratio * 1.01
        verdict = self.answers.get((base, head))
        if isinstance(verdict, tuple):  # a noisy pair: its verdict and its (wide) interval
            verdict, low, high = verdict
        if verdict is None:
            if ratio > 1 + TOLERANCE:
                verdict = "slower"
            elif ratio < 1 / (1 + TOLERANCE):
                verdict = "faster"
            elif abs(ratio - 1) < TOLERANCE / 5:
                verdict = "unchanged"
            else:
                verdict = "inconclusive"
        return Probe(base, head, verdict, ratio, low, high, 30)


def step_history(n: int, culprit: int, factor: float = 1.25) -> tuple[list[str], dict[str, float]]:
    """``n`` commits after a base (commit 0); commit ``culprit`` (1..n) and every later one ``factor`` slower."""
    all_commits = commits(n + 1)
    return all_commits, {c: factor if i >= culprit else 1.0 for i, c in enumerate(all_commits)}


@pytest.mark.parametrize("culprit", range(1, 65))
def test_a_culprit_among_64_commits_is_found_in_at_most_8_ab_runs(culprit: int) -> None:
    all_commits, times = step_history(64, culprit)
    ab = FakeAb(times)
    found = hunt_span(Span(all_commits[0], tuple(all_commits[1:])), ab)
    assert (found.kind, found.direction, found.commit) == ("commit", "slower", all_commits[culprit])
    assert found.runs == len(ab.runs) <= 8
    # every probe asks the same question of the step's base; the last is the culprit against its parent
    roles = [p.role for p in found.probes]
    assert roles[0] == "confirm" and set(roles[1:-1]) <= {"probe"}
    assert {p.base for p in found.probes if p.role == "probe"} == {all_commits[0]}
    assert (found.probes[-1].base, found.probes[-1].head) == (all_commits[culprit - 1], all_commits[culprit])


def test_a_step_one_commit_wide_is_its_own_culprit_in_one_run() -> None:
    all_commits, times = step_history(1, 1)
    ab = FakeAb(times)
    found = hunt_span(Span(all_commits[0], (all_commits[1],)), ab)
    assert (found.kind, found.commit, found.runs) == ("commit", all_commits[1], 1)


def test_an_improvement_is_bisected_the_same_way() -> None:
    all_commits, times = step_history(16, 11, factor=0.7)
    found = hunt_span(Span(all_commits[0], tuple(all_commits[1:])), FakeAb(times))
    assert (found.kind, found.direction, found.commit) == ("commit", "faster", all_commits[11])


def test_a_step_ab_does_not_confirm_is_reported_unconfirmed_and_not_bisected() -> None:
    all_commits = commits(9)
    ab = FakeAb(dict.fromkeys(all_commits, 1.0))
    found = hunt_span(Span(all_commits[0], tuple(all_commits[1:])), ab)
    assert (found.kind, found.confirmed, found.commit, len(ab.runs)) == ("unconfirmed", False, "", 1)


def test_an_inconclusive_probe_is_asked_again_from_the_head_and_the_hunt_goes_the_right_way() -> None:
    all_commits, times = step_history(16, 5)
    base, mid = all_commits[0], all_commits[8]  # the first probe: commit 8, after the culprit
    ab = FakeAb(times, {(base, mid): "inconclusive"})
    found = hunt_span(Span(base, tuple(all_commits[1:])), ab)
    assert found.commit == all_commits[5]
    asked = next(p for p in found.probes if p.role == "probe (from head)")
    assert (asked.base, asked.head, asked.verdict) == (mid, all_commits[-1], "unchanged")


def test_a_probe_that_answers_neither_way_stops_the_hunt_with_the_commits_left() -> None:
    all_commits, times = step_history(16, 5)
    base, mid, head = all_commits[0], all_commits[8], all_commits[-1]
    ab = FakeAb(times, {(base, mid): "inconclusive", (mid, head): "failed"})
    found = hunt_span(Span(base, tuple(all_commits[1:])), ab)
    assert (found.kind, found.direction, found.commit) == ("unresolved", "slower", "")
    assert (found.first, found.last) == (all_commits[1], head)  # nothing decided: every commit is left


def test_a_probe_too_noisy_from_both_ends_is_no_creep_but_leaves_the_commits_unresolved() -> None:
    all_commits, times = step_history(16, 5)
    base, mid, head = all_commits[0], all_commits[8], all_commits[-1]
    noisy = {(base, mid): ("inconclusive", 0.5, 2.8), (mid, head): ("inconclusive", 0.4, 3.0)}
    found = hunt_span(Span(base, tuple(all_commits[1:])), FakeAb(times, noisy))
    assert (found.kind, found.commit, found.first, found.last) == ("unresolved", "", all_commits[1], head)


def creep_history(before: int, length: int, after: int, per: float = 0.01) -> tuple[list[str], dict[str, float]]:
    all_commits = commits(before + length + after)
    times = {}
    for i, c in enumerate(all_commits):
        times[c] = (1 + per) ** min(max(i - before + 1, 0), length)
    return all_commits, times


def test_a_creep_is_found_by_widening_to_the_segments_and_reported_as_a_creep() -> None:
    # 1% a commit over commits 8..15: the detector's step lies inside it, between two commits 1% apart
    all_commits, times = creep_history(8, 8, 8)
    ab = FakeAb(times)
    span = Span(all_commits[11], (all_commits[12],), all_commits[0], tuple(all_commits[1:]))
    found = hunt_span(span, ab)
    assert [p.role for p in found.probes][:2] == ["confirm", "widen"]
    assert found.kind == "creep" and found.direction == "slower"
    # what is left lies inside the creep: no single commit there is beyond the tolerance by itself
    first, last = all_commits.index(found.first), all_commits.index(found.last)
    assert 8 <= first <= last <= 15


def test_a_probe_reports_its_figures() -> None:
    probe = Probe("a" * 40, "b" * 40, "slower", 1.25, 1.2, 1.3, 38, role="probe")
    assert probe.text() == "aaaaaaaa..bbbbbbbb 1.250 [1.200, 1.300] slower (38 rounds)"
    assert probe.to_dict()["role"] == "probe" and probe.to_dict()["ratio"] == 1.25


@pytest.mark.parametrize(
    ("name", "workload"),
    [
        ("suites.test_mlp.test_mlp_train_mlp_train", "mlp_train"),
        ("suites.test_mlp.test_mlp_train_mlp_wide_train", "mlp_wide_train"),  # the parameter, not the test's name
        ("suites.test_cnn.test_cnn_train_resnet_train", "resnet_train"),
        ("suites.test_matmul.test_matmul_float32_half", "matmul_float32"),
        ("suites.test_amp.test_amp_speedup_mlp", None),  # "mlp" is no workload: not a word of "mlp_train"
        ("perf.test_spin.test_spin", "spin"),
    ],
)
def test_a_benchmark_is_measured_with_the_workload_its_name_ends_with(name: str, workload: str | None) -> None:
    names = ["mlp_train", "mlp_wide_train", "cnn_train", "resnet_train", "matmul_float32", "spin", "mlp_train_amp"]
    assert match_workload(name, names) == workload
