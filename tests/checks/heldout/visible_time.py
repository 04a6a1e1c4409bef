"""How long a learner waits for a visible check, on a held-out catalogue's wrong answers.

    python -m tests.checks.heldout.visible_time --catalogue /path/to/round_v

Each wrong answer is checked once to warm up, then once timed, through
``mhalib.checks.check`` (what a notebook's test cell calls: probe, repair search and judge),
in one process, with the visible suite's own budgets. Prints the median, the 90th percentile
and the maximum, then the slowest answers. A benchmark, not a test: the numbers depend on the
machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from mhalib.checks import CheckFailed, check
from tests.checks.heldout import measure


def timed(entries) -> list[tuple[float, str]]:
    """``(seconds, key)`` for each wrong entry's second visible check."""
    def run(entry):
        try:
            check(entry.exercise, entry.func, seed=0, quiet=True)
        except CheckFailed:
            pass
    rows = []
    for entry in entries:
        if entry.kind != "wrong":
            continue
        run(entry)
        started = time.perf_counter()
        run(entry)
        rows.append((time.perf_counter() - started, measure.key_of(entry)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalogue", required=True, help="a catalogue folder (catalogue.py)")
    parser.add_argument("--slowest", type=int, default=6, help="how many slowest to list")
    args = parser.parse_args()
    os.environ.pop("MHALIB_REPAIR_BUDGET_S", None)  # (the visible suite's own budget)
    rows = timed(measure.catalogue(folder=args.catalogue))
    seconds = sorted(s for s, _ in rows)
    p90 = seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]
    print(f"{len(rows)} wrong answers: median {statistics.median(seconds):.3f} s, "
          f"90th percentile {p90:.3f} s, max {seconds[-1]:.3f} s")
    for s, key in sorted(rows, reverse=True)[:args.slowest]:
        print(f"  {s:.3f} s  {key}")


if __name__ == "__main__":
    main()
