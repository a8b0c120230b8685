"""Confirmation runs: measure tests that look slower again, in a fresh pytest process each time.

Rounds measured in the same process share that session's state of the machine, so
they cannot tell a slow session from a slow change; a new process, started later, is
a new sample of the machine. Each confirmation run is a plain ``pytest NODEID ...``
with this session's measuring options, writing ``--gpuperf-json`` to a temporary
file; its records come back, and ``results.with_repeats`` adds them as further runs of
the records they repeat (``Evidence.runs``, raw samples and load kept). The pytest adapter passes the
session's measuring options as command-line flags (``Settings.flags``), so this module
needs nothing of pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from ..measuring import BIND_ENV
from ..results import Record, ResultsError, load_run

__all__ = ["CONFIRMATION_ENV", "command", "run"]

_PASSED_FLAGS: Final = ("-p", "-o", "-c", "--config-file", "--rootdir", "--confcutdir")
#: Set in a confirmation run's environment: its records are evidence for another session's, so it fires no
#: ``pytest_gpuperf_measured`` of its own.
CONFIRMATION_ENV: Final = "GPUPERF_CONFIRMATION_RUN"


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
    flags: Sequence[str],
    nodeids: Iterable[str],
    json_path: Path,
    results_dir: Path,
    quiet_wait: float,
    args: Sequence[str],
) -> list[str]:
    """The pytest command line of one confirmation run: ``flags`` are the session's measuring options."""
    cmd = [sys.executable, "-m", "pytest", *nodeids, "-q", "-p", "no:cacheprovider", *_invocation_flags(args)]
    cmd += [
        *flags,
        f"--gpuperf-json={json_path}",
        f"--gpuperf-results-dir={results_dir}",
        f"--gpuperf-quiet-wait={quiet_wait:g}" if quiet_wait > 0 else "--gpuperf-quiet-wait=off",
        "--gpuperf-confirm=0",
        "--gpuperf-trace=off",  # its records come back through a file, without traces (an ini's "all" too)
    ]
    return cmd


def run(
    rootpath: Path,
    args: Sequence[str],
    flags: Sequence[str],
    nodeids: Sequence[str],
    quiet_wait: float,
    *,
    devices: Mapping[str, str] | None = None,
) -> list[Record]:
    """Run ``nodeids`` once more in fresh processes, as the command line ``args`` ran in ``rootpath``; their records.

    ``devices`` names the device each test's record was measured on (node id -> ``cuda:1``): the tests measured on
    one GPU are run in a process of their own bound to it, one after another. ResultsError says why when a run left
    no results.
    """
    groups: dict[str, list[str]] = {}
    for nodeid in nodeids:
        device = (devices or {}).get(nodeid, "")
        groups.setdefault(device if _one_gpu(device) else "", []).append(nodeid)
    records: list[Record] = []
    for device, group in groups.items():
        records += _run_once(rootpath, args, flags, group, quiet_wait, device)
    return records


def _one_gpu(device: str) -> bool:
    kind, _, index = device.partition(":")
    return kind == "cuda" and index.isdigit()


def _run_once(
    rootpath: Path, args: Sequence[str], flags: Sequence[str], nodeids: Sequence[str], quiet_wait: float, device: str
) -> list[Record]:
    with tempfile.TemporaryDirectory(prefix="gpuperf-confirm-") as tmp:
        json_path = Path(tmp) / "run.json"
        cmd = command(flags, nodeids, json_path, Path(tmp) / "results", quiet_wait, args)
        env = {key: value for key, value in os.environ.items() if key != BIND_ENV}
        env[CONFIRMATION_ENV] = "1"
        if device:
            env[BIND_ENV] = device
        done = subprocess.run(cmd, cwd=rootpath, env=env, capture_output=True, text=True, check=False)
        if not json_path.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise ResultsError(f"the confirmation run exited {done.returncode} without results: {' | '.join(tail)}")
        return list(load_run(json_path).records)
