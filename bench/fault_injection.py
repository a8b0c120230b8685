"""Faults a CI machine inflicts on a session, injected for real: kills at random moments and concurrent saves.

    python bench/fault_injection.py              # 30 SIGKILL, 10 SIGTERM, 10 SIGINT, 5 concurrent pairs
    python bench/fault_injection.py --quick      # 3, 2, 2 and 2 (a minute)

Each trial runs a real pytest session in a scratch project: three tests that measure, with
``--gpuperf-save`` and ``--gpuperf-json``. A kill trial sends its signal at a random moment
between the session's start and its expected end, so that some land while measuring and
some while saving. A pair starts two sessions that save to the same baseline at once.
After all trials one more session runs normally (it cleans what killed ones left), then
the script checks:

- **corrupt files**: every JSON file under the results directory, and each ``--gpuperf-json``
  file, must load and carry our schema;
- **lost runs**: every session that reported saving to a baseline ("now holds") must have
  its run in that baseline (a killed session may lose only its own run);
- **leftover temporary files**: no ``*.tmp`` or ``*.lock`` litter anywhere in the project.

It prints one table and exits 1 if any count is not zero.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tabulate import tabulate

TESTS = """
import time


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a(gpuperf):
    gpuperf.measure(lambda: spin(200e-6))


def test_b(gpuperf):
    gpuperf.measure(lambda: spin(300e-6))


def test_c(gpuperf):
    gpuperf.measure(lambda: spin(400e-6))
"""

FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.05",
    "--gpuperf-max-time=0.3",
    "--gpuperf-warmup-time=0.05",
    "--gpuperf-quiet-wait=0",
    "--gpuperf-memory=off",
)


@dataclass
class Tally:
    kind: str
    trials: int = 0
    sessions: int = 0
    claimed: list[tuple[str, str]] = field(default_factory=list)  # (baseline name, run file path)


def session(project: Path, name: str, json_name: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *FAST]
    command += [f"--gpuperf-save={name}", f"--gpuperf-json={json_name}"]
    return subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def claims(output: str, name: str) -> list[tuple[str, str]]:
    """The (baseline, run file) a session says it saved: its "saved N records to PATH" and "now holds" lines."""
    run_file = next(
        (
            line.split(" to ", 1)[1].split(" (")[0]
            for line in output.splitlines()
            if line.startswith("gpuperf: saved ") and "/runs/" in line
        ),
        "",
    )
    return [(name, run_file)] if "now holds" in output and run_file else []


def kill_trials(project: Path, tally: Tally, signum: int, count: int, expected: float, rng: random.Random) -> None:
    for i in range(count):
        name = f"{tally.kind}-{i}"
        proc = session(project, name, f"{name}.json")
        time.sleep(rng.uniform(0.2, expected))
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=120)
        tally.trials += 1
        tally.sessions += 1
        tally.claimed += claims(output, name)


def pair_trials(project: Path, tally: Tally, count: int) -> None:
    for i in range(count):
        name = f"pair-{i}"
        procs = [session(project, name, f"{name}-{side}.json") for side in ("a", "b")]
        for proc in procs:
            output, _ = proc.communicate(timeout=300)
            tally.sessions += 1
            tally.claimed += claims(output, name)
        tally.trials += 1


def corrupt_files(project: Path) -> list[Path]:
    bad = []
    for path in [*project.glob("*.json"), *(project / ".gpuperf").rglob("*.json")]:
        try:
            data = json.loads(path.read_text())
            ok = isinstance(data, dict) and str(data.get("schema", "")).startswith("pytest-gpuperf/")
        except (OSError, ValueError):
            ok = False
        if not ok:
            bad.append(path)
    return bad


def lost_runs(project: Path, claimed: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    lost = []
    for name, run_file in claimed:
        path = project / ".gpuperf" / "baselines" / f"{name}.json"
        try:
            runs = json.loads(path.read_text())["runs"]
        except (OSError, ValueError, KeyError):
            lost.append((name, run_file))
            continue
        try:
            mine = _identity(json.loads(Path(run_file).read_text()))
        except (OSError, ValueError, KeyError, IndexError):
            mine = None
        if mine is None or not any(_identity(run) == mine for run in runs):
            lost.append((name, run_file))
    return lost


def _identity(run: dict[str, object]) -> str:
    """What tells one session's run from another's: its time and its first record's first samples (the clock's
    second is shared by concurrent sessions; their samples are not)."""
    records = run["records"]
    assert isinstance(records, list)
    return json.dumps([run.get("created"), records[0]["measurement"]["samples"][:3]])


def leftovers(project: Path) -> list[Path]:
    return [p for p in project.rglob("*") if p.is_file() and (p.name.endswith(".tmp") or p.name.endswith(".lock"))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few trials of each kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    counts = (3, 2, 2, 2) if args.quick else (30, 10, 10, 5)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="gpuperf-faults-") as tmp:
        project = Path(tmp)
        (project / "test_steps.py").write_text(textwrap.dedent(TESTS))
        start = time.perf_counter()
        first = session(project, "warm", "warm.json")
        first.communicate(timeout=300)
        expected = time.perf_counter() - start  # one whole session, to aim the kills inside it
        tallies = [Tally("SIGKILL"), Tally("SIGTERM"), Tally("SIGINT"), Tally("concurrent pairs")]
        for tally, signum, count in zip(
            tallies[:3], (signal.SIGKILL, signal.SIGTERM, signal.SIGINT), counts[:3], strict=True
        ):
            kill_trials(project, tally, signum, count, expected, rng)
            print(f"  {tally.kind}: {tally.trials} trials done", file=sys.stderr, flush=True)
        pair_trials(project, tallies[3], counts[3])
        print(f"  concurrent pairs: {tallies[3].trials} pairs done", file=sys.stderr, flush=True)
        last = session(project, "final", "final.json")  # a normal run after the kills: it cleans their litter
        last.communicate(timeout=300)
        rows = []
        for tally in tallies:
            lost = lost_runs(project, tally.claimed)
            rows.append([tally.kind, tally.trials, tally.sessions, len(tally.claimed), len(lost)])
        corrupt, litter = corrupt_files(project), leftovers(project)
        print(tabulate(rows, headers=["fault", "trials", "sessions", "runs claimed in a baseline", "lost"]))
        print(f"corrupt files: {len(corrupt)}  {', '.join(str(p.relative_to(project)) for p in corrupt)}")
        print(f"leftover temporary files: {len(litter)}  {', '.join(str(p.relative_to(project)) for p in litter)}")
        print(f"session length aimed at: {expected:.1f} s; seed {args.seed}")
        failed = corrupt or litter or any(row[-1] for row in rows)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
