"""Build asv benchmark classes from workloads; used by ``workloads.py`` beside this file.

Only the public ``pytest_gpuperf.measuring`` API is used here (``MeasureSettings``,
``resolve_slots``, ``backend_for``, ``measure_on``, ``resolve_size``): with asv's
``virtualenv`` environments the installed pytest-gpuperf is the one of the commit
being measured, and this file comes from the current checkout (commits from before
that API existed, 0.1.0's redesign, cannot be measured that way). Threads follow the
one default, ``auto``: one on a CPU, torch's default on a GPU.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

FORMAT: Final = "gpuperf-asv-1"
#: asv kills a benchmark after this many seconds beyond the sampler's own time caps.
TIMEOUT_MARGIN: Final = 300.0


#: Where a checkout keeps ``suites.workloads``: a package, or one module in commits before the package.
WORKLOADS_FILES: Final = ("suites/workloads/__init__.py", "suites/workloads.py")


def suites_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where ``suites/`` is: the commit asv checked out into its environment, else this checkout."""
    env_dir = environ.get("ASV_ENV_DIR")
    if env_dir and any((Path(env_dir) / "project" / name).is_file() for name in WORKLOADS_FILES):
        return Path(env_dir) / "project"
    return Path(__file__).resolve().parent.parent


def load_workloads(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """``suites.workloads.WORKLOADS``, imported from :func:`suites_root` (asv imports only this package)."""
    root = str(suites_root(environ))
    if root not in sys.path:
        # Appended, not prepended: the installed pytest_gpuperf must win over a copy in the checkout.
        sys.path.append(root)
    from suites.workloads import WORKLOADS

    return dict(WORKLOADS)


def settings_from(text: str) -> Any:
    """``"max_time=2 target=2%"`` -> MeasureSettings; a bad pair raises ValueError naming it and the fix."""
    from pytest_gpuperf.measuring import MeasureSettings

    pairs: dict[str, str] = {}
    for item in text.replace(",", " ").split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(
                f"GPUPERF_ASV_SETTINGS item {item!r} is not key=value; write for example 'max_time=2 target=2%'"
            )
        pairs[key.strip()] = value.strip()
    try:
        return MeasureSettings().with_values(pairs)
    except ValueError as exc:
        raise ValueError(f"GPUPERF_ASV_SETTINGS={text!r}: {exc}") from None


def device_ids(text: str) -> list[Any]:
    """The device slots ``GPUPERF_ASV_DEVICE`` names (absent ones included: they are skipped with the reason)."""
    from pytest_gpuperf.measuring import resolve_slots

    return resolve_slots(text)


def benchmark_classes(workloads: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> dict[str, type]:
    """``{workload name: asv benchmark class}``."""
    settings = settings_from(environ.get("GPUPERF_ASV_SETTINGS", ""))
    size = environ.get("GPUPERF_ASV_SIZE", "auto")
    slots = {slot.id: slot for slot in device_ids(environ.get("GPUPERF_ASV_DEVICE", "auto"))}
    return {name: _benchmark_class(workload, slots, size, settings) for name, workload in workloads.items()}


def _benchmark_class(workload: Any, slots: Mapping[str, Any], size: str, settings: Any) -> type:
    from pytest_gpuperf.measuring import resolve_size

    def setup(self: Any, device: str) -> None:
        slot = slots[device]
        if not slot.available:
            raise NotImplementedError(slot.reason)
        why = workload.why_unsupported(device) if hasattr(workload, "why_unsupported") else None
        if why:
            raise NotImplementedError(why)

    def track_step_seconds(self: Any, device: str) -> dict[str, Any]:
        import torch

        from pytest_gpuperf.measuring import backend_for, measure_on

        slot = slots[device]
        backend = backend_for(slot)
        step = workload.build(torch.device(device), resolve_size(size, slot.kind, backend))
        measurement = measure_on(step.fn, backend, settings, name=workload.name, device=device, work=dict(step.work))
        if step.check is not None:
            step.check()
        # asv's timing-result form: it derives median, ci_99 and quartiles from the samples.
        return {"samples": list(measurement.samples), "number": measurement.iterations}

    track_step_seconds.pretty_name = f"{workload.name}: time per step (lower is better)"  # type: ignore[attr-defined]
    return type(
        re.sub(r"\W", "_", workload.name),
        (),
        {
            "__doc__": workload.description or workload.name,
            "params": [list(slots)],
            "param_names": ["device"],
            "unit": "seconds",
            "version": f"{FORMAT} {workload.name} size={size}",
            "timeout": settings.warmup_time + settings.max_time + TIMEOUT_MARGIN,
            "setup": setup,
            "track_step_seconds": track_step_seconds,
        },
    )
