"""``python -m tests.grading.attacks.run``: grade the attack catalogue and print a table.

    .venv/bin/python -m tests.grading.attacks.run                     # everything (~15 min)
    .venv/bin/python -m tests.grading.attacks.run --only work- qc-    # entries whose name has
                                                                      # one of these parts
    .venv/bin/python -m tests.grading.attacks.run --list              # the catalogue, no grading
    .venv/bin/python -m tests.grading.attacks.run --report DIR/report.json   # print a past run

Columns: entry, mechanism, expected (the rules a trustworthy grader meets), got (what the
grader gave), verdict (attacks: ``held`` or ``THROUGH``; controls: ``ok`` or ``FAILED``).
Exit status 0 only when every rule holds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from pathlib import Path


def _table(rows, width: int, wide: bool) -> str:
    columns = [("entry", 30), ("mechanism", 26), ("expected", 44), ("got", 0), ("verdict", 8)]
    fixed = sum(w for _, w in columns if w) + 2 * len(columns)
    got_width = max(30, width - fixed)
    lines = []
    header = "  ".join(f"{name:<{w or got_width}}" for name, w in columns)
    lines += [header, "-" * len(header)]
    for row in rows:
        cells = [row.name, row.family, row.expected, row.got, row.verdict]
        if wide:
            lines.append(" | ".join(cells))
            continue
        wrapped = [textwrap.wrap(text, w or got_width) or [""] for text, (_, w) in
                   zip(cells, columns)]
        for i in range(max(len(w) for w in wrapped)):
            lines.append("  ".join(f"{(w[i] if i < len(w) else ''):<{c[1] or got_width}}"
                                   for w, c in zip(wrapped, columns)).rstrip())
    return "\n".join(lines)


def _summary(rows) -> str:
    attacks = [r for r in rows if r.kind == "attack"]
    controls = [r for r in rows if r.kind != "attack"]
    through = [r for r in attacks if not r.passed]
    limits = [r for r in attacks if r.verdict == "limit"]
    failed = [r for r in controls if not r.passed]
    return (f"attacks: {len(attacks) - len(through) - len(limits)} held, {len(limits)} through "
            f"as documented known limits, {len(through)} got through "
            f"(issue 21 mechanisms: {sum(not r.passed for r in through if r.issue21)} of "
            f"{sum(r.issue21 for r in attacks)}; new: "
            f"{sum(not r.passed for r in through if not r.issue21)} of "
            f"{sum(not r.issue21 for r in attacks)}); controls and slips: "
            f"{len(controls) - len(failed)} ok, {len(failed)} failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.grading.attacks.run",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="entries whose name contains one of these")
    parser.add_argument("--out", type=Path, help="run folder (default: a new one under /tmp)")
    parser.add_argument("--release", type=Path, help="an assessed release to reuse")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--list", action="store_true", help="list the catalogue and stop")
    parser.add_argument("--report", type=Path, help="print the table of a past run's report")
    parser.add_argument("--rejudge", type=Path, help="evaluate a finished run folder again with "
                        "the current rules and known limits (no grading)")
    parser.add_argument("--wide", action="store_true", help="one line per entry")
    parser.add_argument("--notes", action="store_true",
                        help="also print the [attack] lines each notebook printed (whether its "
                             "trick found its target)")
    args = parser.parse_args(argv)

    from tests.grading.attacks.catalogue import CATALOGUE
    from tests.grading.attacks.runner import rejudge, rows_of, run_catalogue

    width = shutil.get_terminal_size((160, 40)).columns
    if args.list:
        for entry in CATALOGUE:
            print(f"{entry.name:<32} {entry.kind:<8} {entry.assignment:<11} "
                  f"{'issue21' if entry.issue21 else 'new':<8} {entry.mechanism}")
            print(f"{'':<32} expects: {entry.expected()}")
        print(f"{len(CATALOGUE)} entries")
        return 0
    if args.rejudge:
        report = rejudge(args.rejudge)
    elif args.report:
        report = json.loads(args.report.read_text(encoding="utf-8"))
    else:
        report = run_catalogue(args.out, args.only, args.release, jobs=args.jobs,
                               log=lambda text: print(text, file=sys.stderr))
    rows = rows_of(report)
    print(_table(rows, width, args.wide))
    print()
    if args.notes:
        for row in rows:
            for note in row.notes:
                print(f"{row.name:<32} {note}")
        print()
    print(_summary(rows))
    print(f"run folder: {report['out']} ({report['seconds']:.0f} s)")
    return 0 if all(r.passed for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
