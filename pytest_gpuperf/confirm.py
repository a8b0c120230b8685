"""Confirmation runs: measure tests that look slower again, in a fresh pytest process each time.

Rounds measured in the same process share that session's state of the machine, so
they cannot tell a slow session from a slow change; a new process, started later, is
a new sample of the machine. Each confirmation run is a plain ``pytest NODEID ...``
with this session's measuring options, writing ``--gpuperf-json`` to a temporary
file; its records come back as further runs of the records they repeat
(``record.gate["runs"]``, raw samples and load kept).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pytest

from .records import Record, ResultsError, load_run
from .settings import OPTIONS, Settings

__all__ = ["attach", "command", "run"]

#: Options that belong to this session, not to a confirmation run.
_NOT_PASSED: Final = frozenset(
    {"save", "compare", "json", "asv", "asv_machine", "confirm", "rounds", "results_dir", "fail_on", "quiet_wait"}
)
_PASSED_FLAGS: Final = ("-p", "-o", "-c", "--config-file", "--rootdir", "--confcutdir")


def _value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or None
    return str(value)


def _joined(arg: str) -> bool:
    """``-pNAME``, ``-oKEY=V``, ``--rootdir=DIR``: a passed flag and its value in one argument."""
    short = any(arg.startswith(flag) and len(arg) > len(flag) for flag in ("-p", "-o"))
    return short or any(arg.startswith(flag + "=") for flag in _PASSED_FLAGS if flag.startswith("--"))


def _invocation_flags(args: Sequence[str]) -> list[str]:
    """Plugins, ini overrides and config file of the original command line: a confirmation runs like it."""
    out: list[str] = []
    it = iter(args)
    for arg in it:
        if arg in _PASSED_FLAGS:
            following = next(it, None)
            if following is not None:
                out += [arg, following]
        elif _joined(arg):
            out.append(arg)
    return out


def command(
    settings: Settings,
    nodeids: Iterable[str],
    json_path: Path,
    results_dir: Path,
    quiet_wait: float,
    args: Sequence[str],
) -> list[str]:
    """The pytest command line of one confirmation run."""
    cmd = [sys.executable, "-m", "pytest", *nodeids, "-q", "-p", "no:cacheprovider", *_invocation_flags(args)]
    for spec in OPTIONS:
        if spec.field in _NOT_PASSED:
            continue
        text = _value(getattr(settings, spec.field))
        if text is not None:
            cmd.append(f"{spec.flag}={text}")
    cmd += [
        f"--gpuperf-json={json_path}",
        f"--gpuperf-results-dir={results_dir}",
        f"--gpuperf-quiet-wait={quiet_wait:g}" if quiet_wait > 0 else "--gpuperf-quiet-wait=off",
        "--gpuperf-confirm=0",
    ]
    return cmd


def run(config: pytest.Config, settings: Settings, nodeids: Sequence[str], quiet_wait: float) -> list[Record]:
    """Run ``nodeids`` once more in a fresh process; its records, or [] (with the reason raised) if it failed."""
    with tempfile.TemporaryDirectory(prefix="gpuperf-confirm-") as tmp:
        json_path = Path(tmp) / "run.json"
        cmd = command(settings, nodeids, json_path, Path(tmp) / "results", quiet_wait, config.invocation_params.args)
        done = subprocess.run(cmd, cwd=config.rootpath, capture_output=True, text=True, check=False)
        if not json_path.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise ResultsError(f"the confirmation run exited {done.returncode} without results: {' | '.join(tail)}")
        return list(load_run(json_path).records)


def attach(originals: Mapping[str, Record], fresh: Iterable[Record]) -> int:
    """Add each fresh record as one more run of the original with its key; return how many were attached."""
    attached = 0
    for record in fresh:
        original = originals.get(record.key)
        if original is None:
            continue
        entry: dict[str, Any] = {"samples": list(record.measurement.samples), "load": record.gate.get("load")}
        for name in ("rounds", "quiet_wait_s"):
            if name in record.gate:
                entry[name] = record.gate[name]
        original.gate.setdefault("runs", []).append(entry)
        attached += 1
    return attached
