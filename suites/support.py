"""What the suites share beyond the plugin: the per-device expectations, a fraction of a device's reference."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Final

from pytest_gpuperf import Estimate, Gpuperf, Step
from pytest_gpuperf.measuring import EXPECTATIONS_ENV, Expectations

__all__ = ["EXPECTATIONS_ENV", "expectations", "fraction_of_reference", "percent"]

_SHIPPED: Final = Path(__file__).with_name("expectations.json")


def fraction_of_reference(
    gpuperf: Gpuperf, this: Step, reference: Step, *, unit: str, name: str, what: str
) -> Estimate:
    """``this`` against a device's reference step in paired rounds: its throughput in ``unit`` as a fraction of the
    reference's (labelled ``what``), with ``this`` recorded as ``name`` (``gpuperf.expect(..., record=name)`` adds
    a check to it) and its check run."""
    rounds = gpuperf.paired({"this": this, "reference": reference}, record=["this"], names={"this": name})
    assert this.check is not None
    this.check()
    ratio = rounds.throughput_ratio("this", "reference", unit)
    return dataclasses.replace(ratio, what=what)


def expectations(section: str | None = None) -> Expectations:
    """The per-device floors: ``$GPUPERF_EXPECTATIONS`` if set, else the file shipped with the suites;
    with ``section``, those of that block of the file (``"bandwidth"``)."""
    return Expectations.load(Path(os.environ.get(EXPECTATIONS_ENV) or _SHIPPED), section)


def percent(value: float) -> str:
    return f"{value:.0%}"
