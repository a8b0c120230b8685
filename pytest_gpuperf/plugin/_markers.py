"""The plugin's markers: their help lines, and the checks of ``@pytest.mark.gpuperf_requires``."""

from __future__ import annotations

from typing import Final

import pytest

from ..measuring import KINDS, DeviceSlot, Inventory

__all__ = ["MARKERS", "bad_requirement", "unmet_requirement"]

MARKERS: Final = (
    "gpuperf(**settings): per-test sampling settings, for example "
    "@pytest.mark.gpuperf(target=0.02, max_time=10); they override the command line and ini",
    "gpuperf_requires(*kinds, count=1): run only on devices of these kinds, for example "
    '@pytest.mark.gpuperf_requires("cuda", count=2); other devices skip with the reason',
)


def bad_requirement(marker: pytest.Mark) -> str:
    """What is wrong with a ``gpuperf_requires`` marker's arguments, or ''."""
    usage = 'write for example @pytest.mark.gpuperf_requires("cuda") or @pytest.mark.gpuperf_requires("cuda", count=2)'
    if not marker.args or any(kind not in KINDS for kind in marker.args):
        return f"@pytest.mark.gpuperf_requires{marker.args!r}: name device kinds among {', '.join(KINDS)}; {usage}"
    unknown = set(marker.kwargs) - {"count"}
    count = marker.kwargs.get("count", 1)
    if unknown or not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return (
            f"@pytest.mark.gpuperf_requires: only count=<whole number >= 1> is accepted, got {marker.kwargs!r}; {usage}"
        )
    return ""


def unmet_requirement(marker: pytest.Mark, slot: DeviceSlot, inventory: Inventory | None) -> str:
    """``@pytest.mark.gpuperf_requires("cuda", count=2)``: why this slot does not meet it, or ''."""
    kinds = marker.args
    count = int(marker.kwargs.get("count", 1))
    if slot.kind not in kinds:
        return f"needs a {' or '.join(kinds)} device; this run is on {slot.id}"
    have = inventory.cuda_count if (inventory and slot.kind == "cuda") else 1
    if count > have:
        return f"needs {count} {slot.kind} devices; this machine has {have}"
    return ""
