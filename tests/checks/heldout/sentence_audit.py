"""Every sentence the judge says, read against every slip that reaches it (issue 22).

Each single edit of an exercise's answer key (:mod:`mhalib.checks.mutant_schema`: an operator, a
constant, a keyword, a transpose, a variable, a slice bound) is run as a learner's answer through
the probe and the judge, with the repair search off. The wrong answers that a mistake model or a
reading names (not the key's own mutant reading, which restates the edit) are grouped by what
named them, and each group is printed with the edits that reached it: a sentence that states one
cause must fit every edit in its group, or say the others too. Edits whose code no one would
write (a variable swapped for an unrelated one, a constant set to -1) are in the groups as well;
the reader skips them.

    python -m tests.checks.heldout.sentence_audit --out audit.json softmax attention ...
    python -m tests.checks.heldout.sentence_audit --show audit.json [exercise ...]

Round M's fixes of the sentences before it was measured came from this audit (the shift of a
softmax added or by another value, a scale applied where it changes nothing, a count's constant
factor said by what the exercise counts...).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import sys
import time

LIMIT = 250  # mutants per exercise, in the schema's order (the key's own edits first)


def audit(name: str, limit: int = LIMIT, seed: int = 0) -> list[dict]:
    """The failing verdicts of ``name``'s first ``limit`` mutants: ``{mutant, flags,
    diagnosis}`` each."""
    from mhalib.checks import get_exercise, judge_record
    from mhalib.checks.answer_key import answer_key
    from mhalib.checks.mutant_schema import build_schema
    from mhalib.checks.probe import probe

    exercise = get_exercise(name)
    key = answer_key(name)
    schema = build_schema(key)
    found = []
    for mutant in schema.mutants[:limit]:
        @functools.wraps(key)
        def learner(*args, _ids=mutant.ids, **kwargs):
            schema.active.clear()
            schema.active.update(_ids)
            try:
                return schema.function(*args, **kwargs)
            finally:
                schema.active.clear()

        try:
            verdict = judge_record(name, probe(exercise, learner, seed, "grading",
                                               repair_budget_s=0), seed, "grading")
        except Exception as error:  # an edit that breaks the judge is worth a look too
            found.append({"mutant": mutant.sentence, "flags": ["judge-error"],
                          "diagnosis": repr(error)})
            continue
        if not verdict.passed:
            found.append({"mutant": mutant.sentence, "flags": verdict.flags,
                          "diagnosis": verdict.diagnosis[:700]})
    return found


def groups(results: dict[str, list[dict]], only=()) -> dict[tuple, list[dict]]:
    """The named verdicts grouped by exercise and what named them (a model, a reading)."""
    grouped = collections.defaultdict(list)
    for name, found in results.items():
        if only and name not in only:
            continue
        for item in found:
            named = tuple(f for f in item["flags"] if f != "error")
            if named and not any(f.startswith("mutant:") for f in named):
                grouped[(name, named)].append(item)
    return grouped


def show(results: dict[str, list[dict]], only=(), most: int = 12) -> str:
    lines = []
    for (name, named), items in sorted(groups(results, only).items()):
        lines.append(f"\n## {name} {list(named)} x{len(items)}")
        lines.append(f"  said: {items[0]['diagnosis'][:420]}")
        lines += [f"   - {item['mutant'][:200]}" for item in items[:most]]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercises", nargs="*")
    parser.add_argument("--out", help="write the verdicts of the exercises' mutants here")
    parser.add_argument("--show", help="print the groups of a file written with --out")
    parser.add_argument("--limit", type=int, default=LIMIT)
    options = parser.parse_args(argv)
    os.environ["MHALIB_REPAIR_BUDGET_S"] = "0"
    if options.show:
        print(show(json.loads(open(options.show).read()), set(options.exercises)))
        return 0
    if not options.out or not options.exercises:
        parser.error("give --out and the exercises to audit, or --show FILE")
    results = {}
    for name in options.exercises:
        started = time.perf_counter()
        results[name] = audit(name, options.limit)
        print(f"{name}: {len(results[name])} failing mutants, "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        with open(options.out, "w") as handle:  # (written after each: a long run can stop)
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
