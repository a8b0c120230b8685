"""History at scale: asv results for a fleet (machines x commits x benchmarks), then ``asv publish``, timed.

    python bench/asv_scale.py                      # 20 machines x 1000 commits x 30 benchmarks
    python bench/asv_scale.py --machines 2 --commits 5 --benchmarks 3 --shard

What it does, in a fresh directory (``--out``, default a temporary one, removed unless ``--keep``):

1. a git repository of ``--commits`` commits made with ``git fast-import`` (asv publish
   resolves every results file's commit in the repository named by asv.conf.json);
2. asv results written by pytest-gpuperf's own writer: ``history.write_results`` for each
   machine's first commit, from a synthetic Run of ``--benchmarks`` records on one device;
   every later commit through the same row writer (``history.row_of``) with the first
   file's header, which is what ``write_results`` would write for it, without building a
   Run per commit. Values drift slowly per machine and benchmark, with a 10% step planted
   halfway, so the regressions page has work;
3. ``asv publish`` timed under ``/usr/bin/time -v`` (wall time, peak RSS); with
   ``--shard``, also one ``asv publish`` per machine into an html directory of its own.

It prints one table (results size, page size, publish time, peak RSS) and checks that the
results merge without conflicts: one file per machine per commit, and no file written by
two machines except ``benchmarks.json``. No speed is asserted; the figures are this machine's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_gpuperf.history import CI, Commit, Point, read_results, row_of, write_results  # noqa: E402
from pytest_gpuperf.measuring import Measurement, Warmup, summarize  # noqa: E402
from pytest_gpuperf.results import Evidence, Fingerprint, Record, Run, atomic_write_text  # noqa: E402

DEVICE = "cuda"
#: First commit's time (seconds since the epoch); commits are an hour apart.
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z
#: Normalized sample sets (median 1) drawn once and scaled per point: summarizing 600,000 points would dominate.
POOL = 97


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=positive, default=20)
    parser.add_argument("--commits", type=positive, default=1000)
    parser.add_argument("--benchmarks", type=positive, default=30)
    parser.add_argument("--samples", type=positive, default=10, help="raw samples kept per point (default: 10)")
    parser.add_argument("--shard", action="store_true", help="also publish each machine into its own html dir")
    parser.add_argument("--no-publish", action="store_true", help="write the results only")
    parser.add_argument("--out", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="asv-scale-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        run(args, out)
    finally:
        if not args.keep and args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    return 0


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive whole number")
    return value


def run(args: argparse.Namespace, out: Path) -> None:
    started = time.perf_counter()
    commits = make_repo(out / "repo", args.commits)
    made = time.perf_counter()
    results = out / "results"
    write_fleet(results, commits, args.machines, args.benchmarks, args.samples)
    written = time.perf_counter()
    merge = check_merge(results, args.machines, len(commits))
    rows = [
        (
            "size",
            f"{args.machines} machines x {args.commits} commits x {args.benchmarks} benchmarks, "
            f"{args.samples} samples per point",
        ),
        ("git fast-import", f"{made - started:.1f} s"),
        ("results written", f"{written - made:.1f} s"),
        ("results on disk", f"{mib(tree_bytes(results))} in {files(results)} files"),
        ("merge", merge),
    ]
    if not args.no_publish:
        publish = asv_publish(out, results, out / "html", "all")
        rows += [
            ("asv publish (all)", f"{publish.wall:.1f} s wall, peak RSS {publish.rss_mib:.0f} MiB"),
            ("page (html dir)", f"{mib(tree_bytes(out / 'html'))} in {files(out / 'html')} files"),
        ]
        if args.shard:
            rows += shard(out, results, args.machines)
    print(f"asv scale run, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {machine_line()}")
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


# ---------------------------------------------------------------- the repository


def make_repo(repo: Path, count: int) -> list[Commit]:
    """``count`` commits on ``main``, an hour apart, made in one ``git fast-import``."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    chunks = []
    for i in range(1, count + 1):
        message = f"commit {i}\n"
        content = f"{i}\n"
        chunks.append(
            f"commit refs/heads/main\nmark :{i}\n"
            f"committer Bench <bench@example.com> {EPOCH + 3600 * i} +0000\n"
            f"data {len(message)}\n{message}"
            + (f"from :{i - 1}\n" if i > 1 else "")
            + f"M 644 inline version.txt\ndata {len(content)}\n{content}\n"
        )
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input="".join(chunks), text=True, check=True)
    hashes = git(repo, "rev-list", "--reverse", "main").split()
    return [Commit(h, (EPOCH + 3600 * (i + 1)) * 1000) for i, h in enumerate(hashes)]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


# ---------------------------------------------------------------- the results


@dataclass(frozen=True)
class Shape:
    """A normalized sample set (median 1) and its statistics, scaled to each point."""

    samples: tuple[float, ...]
    low: float | None
    high: float | None
    q1: float
    q3: float


def shapes(count: int, samples: int, rng: random.Random) -> list[Shape]:
    out = []
    for _ in range(count):
        raw = [
            math.exp(rng.gauss(0.0, 0.01)) * (1.0 + (rng.random() < 0.05) * rng.random() * 0.1) for _ in range(samples)
        ]
        s = summarize(raw, CI)
        scaled = tuple(x / s.median for x in raw)
        short = s.ci.falls_short(CI)
        out.append(
            Shape(
                scaled,
                None if short else s.ci.low / s.median,
                None if short else s.ci.high / s.median,
                s.q1 / s.median,
                s.q3 / s.median,
            )
        )
    return out


def value(machine: int, bench: int, commit: int, commits: int) -> float:
    """Seconds per step: a base per benchmark and machine, a slow drift, a 10% slowdown planted halfway."""
    base = 1e-4 * (1 + bench) * (1.0 + 0.3 * machine)
    drift = 1.0 + 0.02 * math.sin(commit / 50.0 + bench)
    step = 1.10 if commit >= commits // 2 and bench % 3 == 0 else 1.0
    return base * drift * step


def point(shape: Shape, scale: float, started: int, iterations: int) -> Point:
    return Point(
        median=scale,
        ci_low=None if shape.low is None else shape.low * scale,
        ci_high=None if shape.high is None else shape.high * scale,
        q1=shape.q1 * scale,
        q3=shape.q3 * scale,
        number=iterations,
        samples=tuple(x * scale for x in shape.samples),
        started_at=started,
        duration=0.5,
    )


def first_run(machine: int, benchmarks: int, pool: list[Shape], commits: int) -> Run:
    """The Run a fleet machine's pytest session would give at the first commit: one record per benchmark."""
    records = []
    for b in range(benchmarks):
        shape = pool[(machine * 31 + b) % len(pool)]
        scale = value(machine, b, 0, commits)
        m = Measurement(
            name=f"suites/test_fleet.py::test_bench_{b:02d}[{DEVICE}]",
            device=DEVICE,
            device_name=f"GPU type {machine}",
            samples=tuple(x * scale for x in shape.samples),
            iterations=8,
            warmup=Warmup(3, 24, 0.1, True, (scale,) * 3),
            converged=True,
            stop_reason="CI half-width within target",
            sampling_seconds=0.5,
            target=0.01,
            confidence=0.95,
            work={"FLOP": 1e9 * (1 + b)},
            timer="torch.cuda.Event pair",
        )
        records.append(Record(test=m.name, device=DEVICE, measurement=m, params={}, evidence=Evidence.from_dict({})))
    fingerprint = Fingerprint.from_dict(
        {
            "python": "3.12.3",
            "platform": "Linux-6.8-x86_64",
            "machine": "x86_64",
            "cpu_model": "fleet CPU",
            "cpu_count": 64,
            "torch": "2.11.0+cu130",
            "cuda_devices": [{"name": f"GPU type {machine}"}],
        }
    )
    return Run(created="2026-01-01T00:00:00+00:00", fingerprint=fingerprint, settings={}, records=records)


def write_fleet(results: Path, commits: Sequence[Commit], machines: int, benchmarks: int, samples: int) -> None:
    rng = random.Random(14)
    pool = shapes(POOL, samples, rng)
    for machine in range(machines):
        name = f"gpu-type-{machine:02d}"
        first = write_results(
            results, first_run(machine, benchmarks, pool, len(commits)), machine=name, commit=commits[0]
        )
        header = read_results(first)
        env = header["env_name"]
        names = sorted(header["results"])
        for c, commit in enumerate(commits[1:], start=1):
            started = commit.date_ms + 600_000
            rows = {
                bench: row_of(
                    {
                        DEVICE: point(
                            pool[(machine * 31 + b + c * 7) % len(pool)], value(machine, b, c, len(commits)), started, 8
                        )
                    }
                )
                for b, bench in enumerate(names)
            }
            data = {**header, "commit_hash": commit.hash, "date": commit.date_ms, "results": rows, "version": 2}
            text = json.dumps(data, indent=1, allow_nan=True) + "\n"  # as write_results writes it
            atomic_write_text(results / name / f"{commit.hash[:8]}-{env}.json", text)


def check_merge(results: Path, machines: int, commits: int) -> str:
    """One results file per machine per commit, and which files more than one machine writes."""
    per_machine = [d for d in results.iterdir() if d.is_dir()]
    counts = {d.name: sum(1 for p in d.iterdir() if p.name != "machine.json") for d in per_machine}
    if len(per_machine) != machines or set(counts.values()) != {commits}:
        raise SystemExit(f"expected {commits} results files in each of {machines} machine directories, got {counts}")
    shared = sorted(p.name for p in results.iterdir() if p.is_file())
    return (
        f"{commits} files per machine directory, one per commit, each written by its machine alone; "
        f"written by every machine: {', '.join(shared)}"
    )


# ---------------------------------------------------------------- publishing


@dataclass(frozen=True)
class Timed:
    wall: float
    rss_mib: float


def asv_publish(out: Path, results: Path, html: Path, label: str) -> Timed:
    config = out / f"asv.{label}.conf.json"
    config.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "asv-scale",
                "project_url": "",
                "repo": str(out / "repo"),
                "branches": ["main"],
                "environment_type": "existing",
                "pythons": ["same"],
                "benchmark_dir": str(out / "benchmarks"),
                "results_dir": str(results),
                "html_dir": str(html),
            }
        )
    )
    home = out / "home"
    home.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "asv", "--config", str(config), "publish"]
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    began = time.perf_counter()
    done = subprocess.run(
        ([timer, "-v"] if timer else []) + command,
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"asv publish ({label}) failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return Timed(wall, int(found.group(1)) / 1024 if found else math.nan)


def shard(out: Path, results: Path, machines: int) -> list[tuple[str, str]]:
    """One asv publish per machine, each on a results dir holding that machine and benchmarks.json (hard links)."""
    walls, rss, pages = [], [], 0
    for machine_dir in sorted(d for d in results.iterdir() if d.is_dir()):
        part = out / "shards" / machine_dir.name
        part.mkdir(parents=True)
        # Hard links, not symlinks: asv walks the results directory without following links.
        os.link(results / "benchmarks.json", part / "benchmarks.json")
        (part / machine_dir.name).mkdir()
        for path in machine_dir.iterdir():
            os.link(path, part / machine_dir.name / path.name)
        html = out / "html-shards" / machine_dir.name
        timed = asv_publish(out, part, html, machine_dir.name)
        if not json.loads((html / "index.json").read_text())["revision_to_hash"]:
            raise SystemExit(f"asv publish of {machine_dir.name} alone found no results in {part}")
        walls.append(timed.wall)
        rss.append(timed.rss_mib)
        pages += tree_bytes(html)
    return [
        (
            "asv publish per machine",
            f"{sum(walls) / len(walls):.1f} s wall each (max {max(walls):.1f} s), {sum(walls):.1f} s for all "
            f"{machines} in turn; peak RSS {max(rss):.0f} MiB",
        ),
        ("pages (per machine)", f"{mib(pages // machines)} each, {mib(pages)} in all"),
    ]


# ---------------------------------------------------------------- sizes


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def files(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def mib(count: float) -> str:
    return f"{count / 2**20:.1f} MiB"


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


if __name__ == "__main__":
    raise SystemExit(main())
