"""``ab``'s confirmation of suspects in fresh builds (issue 38, item 6): the pooled ratio of the builds, and the
run-wide false alarms it bounds, on estimates drawn from a seeded generator (the command itself: test_ab.py)."""

from __future__ import annotations

import math
import random

import pytest

from pytest_gpuperf.gate import Verdict, verdict_for
from pytest_gpuperf.gate._ab_confirm import RUN_FALSE_ALARMS, pooled, run_confidence
from pytest_gpuperf.measuring import Estimate

Z95 = 1.959963984540054


def _build(log_ratio: float, se: float) -> Estimate:
    """One build's ratio with a 95% interval of standard error ``se`` (log units), as its paired rounds give."""
    return Estimate("time ratio head/base", math.exp(log_ratio), math.exp(log_ratio - Z95 * se),
                    math.exp(log_ratio + Z95 * se), 0.95, 30, nominal=0.95)  # fmt: skip


def test_builds_that_agree_pool_their_own_intervals() -> None:
    est = pooled([_build(0.10, 0.01), _build(0.10, 0.01), _build(0.10, 0.01)], 0.95)
    assert est.df is None and est.count == 3 and est.counted == "fresh builds" and est.spread == 0.0
    assert est.value == pytest.approx(math.exp(0.10))
    assert math.log(est.high / est.value) == pytest.approx(Z95 * 0.01 / math.sqrt(3))


def test_builds_that_disagree_are_judged_by_their_spread_with_its_degrees_of_freedom() -> None:
    est = pooled([_build(0.26, 0.01), _build(0.0, 0.01), _build(-0.26, 0.01)], 0.95)
    assert est.df == 2 and est.spread == pytest.approx(0.26)
    assert math.log(est.high) == pytest.approx(4.302652729911275 * 0.26 / math.sqrt(3))
    assert verdict_for(est, 0.05) is Verdict.INCONCLUSIVE
    with pytest.raises(ValueError, match="two builds or more"):
        pooled([_build(0.0, 0.01)], 0.95)


def test_the_runs_false_alarm_rate_is_shared_by_its_suspects() -> None:
    assert run_confidence(0) == run_confidence(1) == 0.95
    assert run_confidence(4) == pytest.approx(1 - 0.05 / 4)


def _run_raises_a_false_alarm(rng: random.Random, bias: float, se: float, builds: int | None) -> bool:
    """One A/A run of 30 rows: every row's builds land at a bias of their own (SD ``bias``), each with its rounds'
    standard error ``se``; ``builds`` None: the first pass alone decides."""

    def build() -> Estimate:
        return _build(rng.gauss(0.0, bias) + rng.gauss(0.0, se), se)

    first = [build() for _ in range(30)]
    split = {Verdict.SLOWER, Verdict.FASTER}
    suspects = [est for est in first if verdict_for(est, 0.05) in split]
    if builds is None:
        return bool(suspects)
    confidence = run_confidence(len(suspects))
    return any(verdict_for(pooled([build() for _ in range(builds)], confidence), 0.05) in split for _ in suspects)


@pytest.mark.parametrize(("bias", "se"), [(0.0, 0.03), (0.03, 0.004), (0.25, 0.004)])
def test_a_run_of_thirty_unchanged_rows_raises_a_false_alarm_in_at_most_five_percent_of_runs(
    bias: float, se: float
) -> None:
    """Rows whose rounds' noise reaches the 5% tolerance (se 3%) and builds independent; rows of tight rounds
    (se 0.4%) whose builds land at a bias of their own, SD 3% or 25% (fast or slow for a whole build, as
    ``mlp_wide_infer_b1`` did). Judged on the first pass alone, most such A/A runs raise a false alarm; with three
    fresh builds per suspect, at most 5% do (within three standard errors of 400 runs' rate: where every row is
    a suspect the rate is 4.9%)."""
    rng, runs = random.Random(38), 400
    assert sum(_run_raises_a_false_alarm(rng, bias, se, None) for _ in range(100)) > 60
    confirmed = sum(_run_raises_a_false_alarm(rng, bias, se, 3) for _ in range(runs)) / runs
    assert confirmed <= RUN_FALSE_ALARMS + 3 * math.sqrt(RUN_FALSE_ALARMS * (1 - RUN_FALSE_ALARMS) / runs)
