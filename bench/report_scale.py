"""Issue 23 item 9: the HTML report's cost at scale: time, peak RSS and page size of ``pytest-gpuperf report``.

    python bench/report_scale.py                             # 5,000 records against a 10-run baseline
    python bench/report_scale.py --records 3000 --runs 10 --samples 41
    python bench/report_scale.py --code /tmp/main            # another checkout's package (main's, say)

Writes, in a scratch directory (``--scratch``, default a temporary one, removed), a results file of one run of
``--records`` synthetic records (``--samples`` samples each, spread +-20% in no order) and a baseline of ``--runs``
runs of the same records, with this checkout's writer (the file format is the same on main). Then runs
``python -m pytest_gpuperf.cli report RUN BASELINE -o page.html`` in a fresh process on the code in ``--code``
(first on PYTHONPATH; default: this checkout), reaped as ``bench/scale.py`` reaps its processes (``run_measured``:
``os.wait4``, the child's CPU time and peak RSS), and prints one line: records, baseline runs, wall and CPU time,
peak RSS, page size. To see main's behaviour:
``git archive main pytest_gpuperf | tar -x -C /tmp/main && python bench/report_scale.py --code /tmp/main``.
No speed is asserted; the figures are this machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scale import run_measured  # noqa: E402

from pytest_gpuperf.results import Record, Run, save_baseline_file  # noqa: E402
from tests.synthetic import make_measurement, make_record, make_run  # noqa: E402


def records(count: int, samples: int, seed: int) -> list[Record]:
    """``count`` records of ``samples`` samples around medians from 10 us to 100 ms, in no order (a run's own)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        median = 10e-6 * 10 ** (4 * i / max(count - 1, 1))
        values = [median * (1 + 0.2 * (2 * rng.random() - 1)) for _ in range(samples)]
        test = f"t_{i // 100}.py::test_step_{i}[cpu]"
        record = make_record(median, test=test)
        out.append(Record(record.test, record.device, make_measurement(test, values), evidence=record.evidence))
    return out


def write_inputs(scratch: Path, count: int, runs: int, samples: int) -> tuple[Path, Path]:
    head = scratch / "run.json"
    run: Run = make_run(*records(count, samples, 0))
    head.write_text(json.dumps(run.to_dict()), encoding="utf-8")
    base = scratch / "base.json"
    save_baseline_file(base, "main", [make_run(*records(count, samples, seed)) for seed in range(1, runs + 1)])
    return head, base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--samples", type=int, default=41)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose pytest_gpuperf renders")
    parser.add_argument("--scratch", type=Path, default=None)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="report-scale-")) if args.scratch is None else args.scratch
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        head, base = write_inputs(scratch, args.records, args.runs, args.samples)
        page = scratch / "page.html"
        env = {**os.environ, "PYTHONPATH": str(args.code.resolve())}
        command = [sys.executable, "-m", "pytest_gpuperf.cli", "report", str(head), str(base), "-o", str(page)]
        cost, _ = run_measured(command, scratch, env)
        size = page.stat().st_size
        print(
            f"records {args.records}, baseline runs {args.runs}, samples {args.samples}: "
            f"{cost.wall:.1f} s ({cost.cpu:.1f} s CPU), peak RSS {cost.rss / 2**20:.0f} MiB, page {size / 1e6:.1f} MB "
            f"(inputs: run {head.stat().st_size / 1e6:.1f} MB, baseline {base.stat().st_size / 1e6:.1f} MB)"
        )
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
