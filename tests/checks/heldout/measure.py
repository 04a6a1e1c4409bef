"""Measure the checkers' diagnoses on a frozen held-out catalogue (issue 22).

Every entry of the catalogue (``tests/checks/heldout/<round>/catalogue.py``: ``ENTRIES`` of
``Entry(exercise, kind, label, mistake, func)``) is probed and judged as the grader does: suite
"grading", the grader's call timeout, :func:`mhalib.checks.probe.probe` then
:func:`mhalib.checks.judge_record`, on each seed of ``SEEDS``. The result is a table: exercise,
label, the catalogue's sentence, passed (on any seed), the mistake flag(s) the verdicts name,
and the diagnosis text.

How a wrong entry's diagnosis is judged (by a person, reading the catalogue's sentence against
the diagnosis) is recorded in a judgement file beside the catalogue (``<round>_<name>.json``):
for each wrong entry ``named`` (the diagnosis says what the slip is, in substance),
``named_wrongly`` (it names a slip the answer did not make, or a fix the answer already makes)
or ``unnamed`` (generic "wrong result on case X", a raw exception, "contains NaN" with no
reason), with the diagnosis it judged. :func:`rates` turns a table and a judgement into the
rates reported.

    python -m tests.checks.heldout.measure round_a --out /tmp/round_a.json [--jobs 2]
    python -m tests.checks.heldout.measure round_a --rates round_a_baseline.json
    python -m tests.checks.heldout.measure --catalogue /path/to/round_b --out /tmp/b.json

A catalogue anywhere (``--catalogue FOLDER``) needs only a ``catalogue.py`` defining
``ENTRIES`` (entries with ``exercise``, ``kind``, ``label``, ``mistake``, ``func``); any
exercise of the course counts, lesson 12's included.

Runs from the checkout's top folder.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = (0, 1)
CALL_TIMEOUT = 10.0  # the grader's (mhalib.checks.record.record_exercises)
MISTAKE = "mistake:"


def catalogue(round_name: str | None = None, folder: str | None = None) -> list:
    """The entries of the catalogue ``round_name`` (a folder beside this file) or of the
    catalogue in ``folder`` (anywhere): its folder goes on sys.path, its modules import each
    other."""
    path = Path(folder).resolve() if folder else HERE / str(round_name)
    if not (path / "catalogue.py").is_file():
        raise SystemExit(f"no catalogue.py in {path}")
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    if not folder:
        module = importlib.import_module(f"tests.checks.heldout.{round_name}.catalogue")
    else:
        spec = importlib.util.spec_from_file_location(f"heldout_{path.name}_catalogue",
                                                      path / "catalogue.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return list(module.ENTRIES)


def key_of(entry) -> str:
    return f"{entry.exercise}/{entry.label}"


def measure_entry(entry, seeds=SEEDS) -> dict:
    """Probe and judge one entry on every seed, as the grader does."""
    from mhalib.checks import get_exercise, judge_record
    from mhalib.checks.probe import probe

    checker = get_exercise(entry.exercise)
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in seeds:
            record = probe(checker, entry.func, seed, "grading", call_timeout=CALL_TIMEOUT)
            verdict = judge_record(entry.exercise, record, seed)
            runs.append({"seed": seed, "passed": verdict.passed, "score": verdict.score,
                         "flags": verdict.flags, "diagnosis": verdict.diagnosis,
                         "details": verdict.details[:4]})
    mistakes = []
    for run in runs:
        for flag in run["flags"]:
            if flag.startswith(MISTAKE) and flag[len(MISTAKE):] not in mistakes:
                mistakes.append(flag[len(MISTAKE):])
    diagnoses = []
    for run in runs:
        if run["diagnosis"] not in diagnoses:
            diagnoses.append(run["diagnosis"])
    return {"key": key_of(entry), "exercise": entry.exercise, "label": entry.label,
            "kind": entry.kind, "mistake": entry.mistake,
            "passed": any(run["passed"] for run in runs),
            "passed_all": all(run["passed"] for run in runs),
            "named": mistakes, "diagnoses": diagnoses, "runs": runs}


_ENTRIES: list = []


def _measure_index(index: int) -> dict:
    return measure_entry(_ENTRIES[index])


def measure(round_name: str | None, jobs: int = 1, only: str | None = None,
            folder: str | None = None) -> list[dict]:
    """The table of a catalogue, in catalogue order (``only``: exercises or lessons, comma
    separated, e.g. "attention,06"; ``folder``: a catalogue outside tests/checks/heldout)."""
    from mhalib.checks import get_exercise

    entries = catalogue(round_name, folder)
    if only:
        wanted = set(only.split(","))
        entries = [e for e in entries if e.exercise in wanted
                   or get_exercise(e.exercise).assignment[:2] in wanted]
    _ENTRIES[:] = entries
    if jobs <= 1:
        return [measure_entry(entry) for entry in entries]
    import multiprocessing

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_measure_index, range(len(entries)), chunksize=1))


def lesson_of(exercise: str) -> str:
    from mhalib.checks import get_exercise

    return get_exercise(exercise).assignment[:2]


def rates(table: list[dict], judgement: dict) -> dict:
    """Rates of a measured table under a judgement ({key: {"verdict": named|wrong|unnamed}}):
    per lesson and overall, of the rejected wrong answers named correctly, named wrongly and
    not named; wrong answers accepted; right answers rejected, those rejected only because
    they do not refuse the contract's bad arguments counted apart."""
    counts: dict[str, Counter] = {}
    for row in table:
        for group in (lesson_of(row["exercise"]), "all"):
            c = counts.setdefault(group, Counter())
            if row["kind"] == "right":
                c["right"] += 1
                if not row["passed_all"]:  # refused for not refusing bad arguments: the contract
                    contract = {"refusal_without_values", "no_argument_check"} & set(row["named"])
                    c["right_rejected_contract" if contract else "right_rejected"] += 1
                continue
            c["wrong"] += 1
            if row["passed"]:
                c["accepted"] += 1
                continue
            c["rejected"] += 1
            verdict = judgement.get(row["key"], {}).get("verdict", "unjudged")
            c["named_wrongly" if verdict == "wrong" else verdict] += 1  # "wrong" counts entries
    return {group: dict(c) for group, c in sorted(counts.items())}


def format_rates(table_rates: dict) -> str:
    """The rates as a small text table."""
    lines = ["lesson  wrong  rejected  named (share)  named wrongly  unnamed  accepted  "
             "right  right rejected  rejected under the contract"]
    for group, c in table_rates.items():
        rejected = c.get("rejected", 0)
        share = f"{c.get('named', 0) / rejected:.0%}" if rejected else "-"
        lines.append(f"{group:>6}  {c.get('wrong', 0):>5}  {rejected:>8}  "
                     f"{c.get('named', 0):>5} ({share:>4})  {c.get('named_wrongly', 0):>13}  "
                     f"{c.get('unnamed', 0):>7}  {c.get('accepted', 0):>8}  "
                     f"{c.get('right', 0):>5}  {c.get('right_rejected', 0):>14}  "
                     f"{c.get('right_rejected_contract', 0):>27}")
    return "\n".join(lines)


def as_markdown(table: list[dict], judgement: dict | None = None) -> str:
    """The table for people: one row per entry."""
    rows = ["| exercise | label | catalogue's mistake | passed | named | judged | diagnosis |",
            "|---|---|---|---|---|---|---|"]
    for row in table:
        judged = (judgement or {}).get(row["key"], {}).get("verdict", "")
        cells = [row["exercise"], row["label"], row["mistake"] or "(right)",
                 "yes" if row["passed"] else "no", ", ".join(row["named"]) or "-", judged,
                 " / ".join(row["diagnoses"])]
        rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells)
                    + " |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("round", nargs="?", default=None,
                        help="catalogue folder under tests/checks/heldout, e.g. round_a")
    parser.add_argument("--catalogue", help="a catalogue folder anywhere (holds catalogue.py)")
    parser.add_argument("--out", help="write the measured table (JSON) here")
    parser.add_argument("--markdown", help="write the table as Markdown here")
    parser.add_argument("--table", help="read a measured table (JSON) instead of measuring")
    parser.add_argument("--rates", help="a judgement file: print the rates under it")
    parser.add_argument("--only", help="exercises or lesson numbers, comma separated")
    parser.add_argument("--jobs", type=int, default=1)
    options = parser.parse_args(argv)
    if options.table:
        table = json.loads(Path(options.table).read_text())
    else:
        if not (options.round or options.catalogue):
            parser.error("name a round or give --catalogue FOLDER")
        table = measure(options.round, options.jobs, options.only, options.catalogue)
    if options.out:
        Path(options.out).write_text(json.dumps(table, indent=1))
    judgement = None
    if options.rates:
        judgement = json.loads(Path(options.rates).read_text())["entries"]
        print(format_rates(rates(table, judgement)))
    if options.markdown:
        Path(options.markdown).write_text(as_markdown(table, judgement) + "\n")
    if not (options.out or options.markdown or options.rates):
        print(as_markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
