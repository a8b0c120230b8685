"""What the plugin costs a test session that does not measure: 500 trivial tests with and without it.

    python bench/startup.py [--tests 500] [--repeats 7] [--plugin MODULE]

Runs ``python -m pytest -q -p no:randomly -p no:cacheprovider`` on a generated file of
trivial tests, alternating a run with the plugin loaded and one with ``-p no:gpuperf``,
``--repeats`` times each, and prints the median wall time of each and their ratio. The
runs alternate so that a change in the machine's speed falls on both alike. Also prints
what importing the plugin costs a process that has imported pytest already (median of
``--repeats`` fresh processes) and how many of the package's modules that import loads.

``--plugin MODULE`` loads the plugin from that module instead of the installed entry
point (``-p no:gpuperf -p MODULE``), to measure another version: for the version before
the redesign, ``PYTHONPATH=<its checkout> python bench/startup.py --plugin pytest_gpuperf.plugin``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]


def _session(directory: Path, *extra: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([*BASE, *extra], cwd=directory, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return took


_IMPORT = """
import sys, time
import pytest
start = time.perf_counter()
import {module}
took = time.perf_counter() - start
print(took, len([name for name in sys.modules if name.startswith("pytest_gpuperf")]))
"""


def _plugin_import(module: str, repeats: int) -> tuple[float, int]:
    """Median seconds to import the plugin after pytest, and how many of the package's modules it loads."""
    code = _IMPORT.format(module=module)
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        for _ in range(repeats)
    ]
    return statistics.median(float(r[0]) for r in runs), int(runs[0][1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tests", type=int, default=500, help="trivial tests in the session (default: 500)")
    parser.add_argument("--repeats", type=int, default=7, help="sessions of each kind (default: 7)")
    parser.add_argument("--plugin", default=None, help="load the plugin from this module, not the entry point")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuperf-startup-") as tmp:
        directory = Path(tmp)
        (directory / "pytest.ini").write_text("[pytest]\n")
        body = "".join(f"def test_{i}():\n    assert {i} + 1 > {i}\n\n\n" for i in range(args.tests))
        (directory / "test_trivial.py").write_text(body)
        plugin = ["-p", "no:gpuperf", "-p", args.plugin] if args.plugin else []
        _session(directory, *plugin)  # warm the file system and the bytecode caches
        loaded: list[float] = []
        without: list[float] = []
        for _ in range(args.repeats):
            loaded.append(_session(directory, *plugin))
            without.append(_session(directory, "-p", "no:gpuperf"))
    with_plugin, bare = statistics.median(loaded), statistics.median(without)
    print(f"{args.tests} trivial tests, {args.repeats} sessions each, alternating:")
    print(f"  with pytest-gpuperf:  median {with_plugin:.3f} s  (all: {', '.join(f'{t:.2f}' for t in loaded)})")
    print(f"  with -p no:gpuperf:   median {bare:.3f} s  (all: {', '.join(f'{t:.2f}' for t in without)})")
    print(f"  ratio: {with_plugin / bare:.3f}")
    seconds, modules = _plugin_import(args.plugin or "pytest_gpuperf.plugin.entry", args.repeats)
    print(f"  importing the plugin after pytest: {seconds * 1e3:.1f} ms median, {modules} of its modules loaded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
