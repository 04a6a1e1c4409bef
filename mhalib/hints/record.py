"""The record of hint use: a display output saved with the notebook, read back by the grader.

In an assessed release every place that shows hints (the ``hint`` call's cell, the hint button
under a failed check, and every later check of the kernel) also shows one record, a display of
mime type :data:`MIME` whose JSON holds, for each exercise, how many of its hints the learner
has seen so far in this notebook. All of a kernel's records share one display id, so the
notebook updates them together and a record in a cell that ran earlier follows too. A record is
a running total, so the grader takes, per exercise, the largest count among all the records in
the submitted file (:func:`hints_taken`): a stale copy can only under-count, and a forged one
can only count more hints against its author. Nothing here needs a kernel.
"""

from __future__ import annotations

import html

from mhalib.hints.ladder import MAX_RUNGS

MIME = "application/vnd.mhalib.hints+json"
MAX_EXERCISES = 64  # a record naming more exercises than a course has is not a record


def describe(taken: dict[str, int], totals: dict[str, int]) -> str:
    """ "attention 2 of 4, softmax 1 of 3" (the exercises in the order given)."""
    return ", ".join(f"{name} {count} of {totals.get(name, count)}"
                     for name, count in taken.items() if count > 0)


def bundle(taken: dict[str, int], totals: dict[str, int]) -> dict:
    """The display data of a record: the JSON the grader reads, and what the learner sees."""
    seen = {name: int(count) for name, count in taken.items() if count > 0}
    if seen:
        text = (f"Hints taken, recorded with this notebook: {describe(seen, totals)}. Your "
                "instructor sees this when grading.")
    else:
        text = "Hints you take here are recorded with this notebook; your instructor sees them."
    return {MIME: {"hints": seen, "version": 1}, "text/plain": text,
            "text/html": f'<div class="mhalib-hint-record"><small>{html.escape(text)}</small>'
                         "</div>"}


def parse(data) -> dict[str, int] | None:
    """The counts of a record's JSON (None when it is not a well-formed record)."""
    if not isinstance(data, dict) or not isinstance(data.get("hints"), dict):
        return None
    counts = data["hints"]
    if len(counts) > MAX_EXERCISES:
        return None
    parsed = {}
    for name, count in counts.items():
        if not isinstance(name, str) or isinstance(count, bool) or not isinstance(count, int):
            return None
        parsed[name[:100]] = max(0, min(count, MAX_RUNGS))
    return parsed


def records_in(notebook: dict):
    """Every hint record among the outputs of a notebook given as (untrusted) JSON."""
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else []
    for cell in cells if isinstance(cells, list) else []:
        outputs = cell.get("outputs", []) if isinstance(cell, dict) else []
        for output in outputs if isinstance(outputs, list) else []:
            data = output.get("data", {}) if isinstance(output, dict) else {}
            counts = parse(data.get(MIME)) if isinstance(data, dict) else None
            if counts is not None:
                yield counts


def hints_taken(notebook: dict, exercises=None) -> dict[str, int]:
    """Exercise -> the most hints any record of ``notebook`` says were taken (only exercises
    with at least one; only those in ``exercises`` when given)."""
    wanted = None if exercises is None else set(exercises)
    taken: dict[str, int] = {}
    for counts in records_in(notebook):
        for name, count in counts.items():
            if count > 0 and (wanted is None or name in wanted):
                taken[name] = max(taken.get(name, 0), count)
    return taken
