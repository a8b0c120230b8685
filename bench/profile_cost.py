"""What the work profile cost, per record of a results file: its ``seconds`` against the measurement's time.

    pytest -q -p no:randomly suites/ --gpuperf-json=/tmp/suites.json
    python bench/profile_cost.py /tmp/suites.json

Each record's measuring time is its ``sampling_seconds`` plus its warmup's ``seconds``; the profile's is its
``profile.seconds`` (wall time: the reading, the counting mode's time beyond a step's, and with Python's tracer
the probe's measured calls' time beyond a timed call's). Results: bench/evidence/work-profile.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("results", type=Path, help="a results file written by --gpuperf-json")
    args = parser.parse_args()
    data = json.loads(args.results.read_text())
    measuring = profiled = worst = 0.0
    for record in data["records"]:
        m = record["measurement"]
        profile = m.get("profile")
        if not profile:
            continue
        took = float(m["sampling_seconds"]) + float(m["warmup"]["seconds"])
        cost = float(profile["seconds"])
        measuring += took
        profiled += cost
        worst = max(worst, cost / took)
        print(
            f"{record['test'][:60]:60s} calls={profile['calls']} measuring={took:.3f}s "
            f"profile={cost * 1e3:.1f}ms ({cost / took:.1%}) budget={float(profile['budget']) * 1e3:.1f}ms"
        )
    share = profiled / measuring if measuring else 0.0
    print(
        f"records={len(data['records'])} measuring={measuring:.2f}s profile={profiled:.3f}s share={share:.2%} "
        f"worst={worst:.1%}"
    )


if __name__ == "__main__":
    main()
