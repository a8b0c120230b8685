"""The smallest change a row can see (``gate.detectable``, issue 38 item 1): a planted change of the size an A/A
estimate states is found at the stated power, on both routes' intervals; fake data from a seeded generator."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable

import pytest

from pytest_gpuperf.gate import POWER, detectable, estimate
from pytest_gpuperf.measuring import Estimate
from pytest_gpuperf.measuring._stats import estimate_median

SIGMA = 0.03  # run-to-run (stored route) or round-to-round (ab) noise, in log units


def _stored(rng: random.Random, runs: tuple[int, int], change: float) -> Estimate:
    base = [rng.gauss(0.0, SIGMA) for _ in range(runs[0])]
    head = [rng.gauss(math.log1p(change), SIGMA) for _ in range(runs[1])]
    return estimate(base, head, noise_floor=SIGMA)


def _paired(rng: random.Random, rounds: int, change: float) -> Estimate:
    ratios = [math.exp(rng.gauss(math.log1p(change), SIGMA)) for _ in range(rounds)]
    return estimate_median("time ratio head/base", ratios)


ROUTES: dict[str, Callable[[random.Random, float], Estimate]] = {
    "stored, 3 baseline runs and 3 current": lambda rng, change: _stored(rng, (3, 3), change),
    "stored, 1 run a side": lambda rng, change: _stored(rng, (1, 1), change),
    "ab, 20 paired rounds": lambda rng, change: _paired(rng, 20, change),
    "ab, 60 paired rounds": lambda rng, change: _paired(rng, 60, change),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_planted_change_of_the_stated_size_is_found_at_the_stated_power(route: str) -> None:
    """Each A/A trial states what it could see; a change of their median size, planted, is significant in about
    ``POWER`` of trials (80%). Stating the interval's half-width instead (no power term) would find it in half."""
    draw, rng, trials = ROUTES[route], random.Random(38), 1000
    stated = [detectable(draw(rng, 0.0)) for _ in range(trials)]
    size = statistics.median(s for s in stated if s is not None)
    found = sum(draw(rng, size).low > 1.0 for _ in range(trials)) / trials
    assert POWER - 0.08 <= found <= POWER + 0.08, (route, size, found)


def test_what_a_row_can_see_follows_its_interval() -> None:
    # the normal's quantiles where the interval has no degrees of freedom: half-width q*se, seen at (q + q_power)*se
    est = Estimate("r", 1.0, math.exp(-0.0392), math.exp(0.0392), 0.95, 40)
    assert detectable(est) == pytest.approx(math.expm1(0.0392 / 1.96 * (1.96 + 0.8416)), rel=1e-3)
    assert detectable(est, power=0.9) == pytest.approx(math.expm1(0.0392 / 1.96 * (1.96 + 1.2816)), rel=1e-3)
    assert detectable(Estimate("r", 1.0, 1.0, 1.0, 0.95, 40)) == 0.0  # no noise at all: any change is seen
    wide = Estimate("r", 1.0, 0.9, 1.1, 0.95, 6, df=2.0)
    seen = detectable(wide)
    assert seen is not None and math.log1p(seen) > math.log(1.1 / 0.9) / 2  # past the interval's own half-width
    too_few = Estimate("r", 1.3, 1.1, 1.5, 0.75, 3, nominal=0.95)  # 3 paired rounds cannot give 95%
    assert detectable(too_few) is None
    with pytest.raises(ValueError, match=r"power=1\.0 must be at least 0\.5 and below 1"):
        detectable(est, power=1.0)
