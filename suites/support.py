"""Glue between the suites' tests and the plugin: paired measurements recorded as the test's, estimates judged."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Final

from pytest_gpuperf import Check, Estimate, Gpuperf, Paired, Step, measure_paired
from pytest_gpuperf.measuring import Expectations, JudgeContext, expect_estimate

__all__ = ["EXPECTATIONS_ENV", "expect", "expectations", "paired", "percent"]

#: Environment variable naming another expectations file than the one shipped with the suites.
EXPECTATIONS_ENV: Final = "GPUPERF_EXPECTATIONS"
_SHIPPED: Final = Path(__file__).with_name("expectations.json")


def paired(
    gpuperf: Gpuperf,
    steps: Mapping[str, Step],
    *,
    record: Collection[str] | None = None,
    params: Mapping[str, object] | None = None,
    names: Mapping[str, str] | None = None,
    metadata: Mapping[str, Mapping[str, object]] | None = None,
) -> tuple[Paired, dict[str, list[Check]]]:
    """Measure ``steps`` in interleaved rounds on the test's device and record those named in ``record``.

    ``names`` renames steps in the records (``{"this": "n=512"}``); ``metadata``, per step, is kept in its
    record's metadata (not compared by the gate: a compile time). Returns the rounds
    and, per step, the list its assertions land in.
    """
    wanted = list(steps) if record is None else list(record)
    checks: dict[str, list[Check]] = {name: [] for name in steps}
    result = measure_paired(
        steps,
        gpuperf.backend,
        gpuperf.settings.measure,
        device=gpuperf.slot.id,
        observers={name: checks[name].append for name in steps},
        names=names,
    )
    for name in wanted:
        step = steps[name]
        gpuperf.record(
            result.measurements[name],
            params={"size": gpuperf.size, **step.params, **(params or {})},
            checks=checks[name],
            metadata=(metadata or {}).get(name),
        )
    return result, checks


def fraction_of_reference(
    gpuperf: Gpuperf, this: Step, reference: Step, *, unit: str, name: str, what: str
) -> tuple[Estimate, list[Check]]:
    """``this`` against a device's reference step in paired rounds: its throughput in ``unit`` as a fraction of the
    reference's (labelled ``what``), with ``this`` recorded as ``name`` and its check run; and its checks."""
    rounds, checks = paired(gpuperf, {"this": this, "reference": reference}, record=["this"], names={"this": name})
    assert this.check is not None
    this.check()
    ratio = rounds.throughput_ratio("this", "reference", unit)
    return dataclasses.replace(ratio, what=what), checks["this"]


def expect(
    gpuperf: Gpuperf,
    estimate: Estimate,
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    checks: list[Check] | None = None,
) -> Check:
    """Judge ``estimate`` by its CI (pass / fail / inconclusive) and note the verdict in the summary."""
    __tracebackhide__ = True
    judged = dataclasses.replace(estimate, evidence=f"from {estimate.count} paired rounds on {gpuperf.slot.id}")
    observer = checks.append if checks is not None else None
    context = JudgeContext(inconclusive=gpuperf.settings.measure.inconclusive, observer=observer)
    check = expect_estimate(judged, at_least=at_least, at_most=at_most, context=context, stacklevel=2)
    gpuperf.note(f"{check.outcome}: {check.message}")
    return check


def expectations(section: str | None = None) -> Expectations:
    """The per-device floors: ``$GPUPERF_EXPECTATIONS`` if set, else the file shipped with the suites;
    with ``section``, those of that block of the file (``"bandwidth"``)."""
    return Expectations.load(Path(os.environ.get(EXPECTATIONS_ENV) or _SHIPPED), section)


def percent(value: float) -> str:
    return f"{value:.0%}"
