"""What the work profile cost, per record of a results file: its ``seconds`` against the measurement's time.

    pytest -q -p no:randomly suites/ --gpuperf-json=/tmp/suites.json
    python bench/profile_cost.py /tmp/suites.json

Each record's measuring time is its ``sampling_seconds`` plus its warmup's ``seconds``; the profile's is its
``profile.seconds`` (wall time: the reading, the counting mode's time beyond a step's, and with Python's tracer
the probe's measured calls' time beyond a timed call's). Each line says what a profile reduced to keep within its
budget (``profile.reduced`` up to its colon: the whole of it is in the file), the last how many did, by what.
Results: bench/evidence/work-profile.md.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("results", type=Path, help="a results file written by --gpuperf-json")
    args = parser.parse_args()
    data = json.loads(args.results.read_text())
    measuring = profiled = worst = 0.0
    reductions: Counter[str] = Counter()
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
        reduced = str(profile.get("reduced") or "").split(":", 1)[0]
        reductions[reduced] += bool(reduced)
        print(
            f"{record['test'][:60]:60s} calls={profile['calls']} measuring={took:.3f}s "
            f"profile={cost * 1e3:.1f}ms ({cost / took:.1%}) budget={float(profile['budget']) * 1e3:.1f}ms"
            + (f" reduced: {reduced}" if reduced else "")
        )
    share = profiled / measuring if measuring else 0.0
    print(
        f"records={len(data['records'])} measuring={measuring:.2f}s profile={profiled:.3f}s share={share:.2%} "
        f"worst={worst:.1%}"
    )
    kinds = ", ".join(f"{count} {kind}" for kind, count in reductions.most_common() if count)
    print(f"reduced={sum(reductions.values())}" + (f" ({kinds})" if kinds else ""))


if __name__ == "__main__":
    main()
