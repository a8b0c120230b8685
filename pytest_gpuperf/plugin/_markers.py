"""The plugin's markers: their help lines, and the checks of ``@pytest.mark.gpuperf_requires``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from ..measuring import Binding, DeviceSlot, Inventory

__all__ = ["MARKERS", "bad_requirement", "gpus_used", "marked", "unmet_requirement"]

MARKERS: Final = (
    "gpuperf(**settings): per-test sampling settings, for example "
    "@pytest.mark.gpuperf(target=0.02, max_time=10); they override the command line and ini",
    "gpuperf_requires(*kinds, count=1): run only on devices of these kinds, for example "
    '@pytest.mark.gpuperf_requires("cuda", count=2); other devices skip with the reason. count: the GPUs the test '
    "uses at once when it runs on cuda (DataParallel, a spawned NCCL world); such a test skips in an xdist worker "
    "or torchrun rank bound to one GPU",
)


def bad_requirement(marker: pytest.Mark) -> str:
    """What is wrong with a ``gpuperf_requires`` marker's arguments, or ''."""
    from ..measuring import KINDS

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


def gpus_used(marker: pytest.Mark, slot: DeviceSlot) -> int:
    """The GPUs a test marked ``gpuperf_requires(..., count=N)`` uses at once on ``slot``: N on cuda, else none."""
    return int(marker.kwargs.get("count", 1)) if slot.kind == "cuda" else 0


def unmet_requirement(
    marker: pytest.Mark, slot: DeviceSlot, inventory: Inventory | None, binding: Binding | None = None
) -> str:
    """``@pytest.mark.gpuperf_requires("cuda", count=2)``: why this slot does not meet it, or ''.

    ``count`` is the GPUs the test uses at once on cuda (a cpu or mps run is one device whatever it says): more
    than the machine has skips, and so does more than one in a process bound to one GPU beside others (``binding``).
    """
    kinds = marker.args
    if slot.kind not in kinds:
        return f"needs a {' or '.join(kinds)} device; this run is on {slot.id}"
    count = gpus_used(marker, slot)
    have = inventory.cuda_count if inventory else 0
    if count > have:
        return f"needs {count} {slot.kind} devices; this machine has {have}"
    if count > 1 and binding is not None:
        return binding.multi_gpu_refusal(count)
    return ""


def marked(item: pytest.Item) -> bool:
    """Does ``item`` carry a ``gpuperf`` or ``gpuperf_requires`` marker, its own or its class's or module's? Read in
    its keywords, which pytest keeps of every marker of it and of its parents: two lookups a node, not a walk of
    every marker (asked of every collected test; a name among the keywords alike only costs its test the hooks)."""
    keywords = item.keywords
    return "gpuperf" in keywords or "gpuperf_requires" in keywords
