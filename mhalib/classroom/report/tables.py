"""The report's numbers as CSV tables and one JSON document (the same numbers the page shows).

JSON: the whole :class:`~mhalib.classroom.report.build.ClassReport` (format
:data:`REPORT_FORMAT`). CSV: one table per kind of row, exact values (the page rounds them):

- ``exercises``: outcome counts per exercise; ``mistakes``: each named mistake of each
  exercise; ``unnamed``: every wrong answer the grader could not name;
- ``quick-checks``: facility, point-biserial, upper-lower index and flags per quick check;
  ``choices``: each option, known slip or other answer of each quick check;
- ``reteach``: the summary at the top; ``scores``: the score histograms; ``grid``: one row per
  student and exercise.
"""

from __future__ import annotations

import csv
from dataclasses import asdict
from pathlib import Path

from mhalib.classroom.report.build import ClassReport

REPORT_FORMAT = "mhalib-class-report/1"


def as_json(report: ClassReport) -> dict:
    """The report as JSON-ready data."""
    return {"format": REPORT_FORMAT, **asdict(report)}


def _section(section) -> dict:
    return {"section": section.title if section else "", "section_url": section.url
            if section else ""}


def tables(report: ClassReport) -> dict[str, list[dict]]:
    """Table name -> rows (dicts with the same keys in every row)."""
    out: dict[str, list[dict]] = {name: [] for name in (
        "exercises", "mistakes", "unnamed", "quick-checks", "choices", "reteach", "scores",
        "grid")}
    for assignment in report.assignments:
        name = assignment.assignment
        for low, high, count in assignment.scores.bins:
            out["scores"].append({"assignment": name, "low": low, "high": high,
                                  "students": count})
        for e in assignment.exercises:
            out["exercises"].append({"assignment": name, "exercise": e.exercise,
                                     "students": e.students, **e.counts, "flagged": e.flagged,
                                     "mean_points": e.mean_points, "max_points": e.max_points,
                                     **_section(e.section)})
            for m in e.mistakes:
                out["mistakes"].append({"assignment": name, "exercise": e.exercise,
                                        "mistake": m.mistake, "students": m.students,
                                        "share": m.share, "price_points": m.price_points,
                                        "max_points": m.max_points, "message": m.message})
            for f in e.unnamed:
                out["unnamed"].append({"assignment": name, "exercise": e.exercise,
                                       "student": f.student, "outcome": f.outcome,
                                       "flags": " ".join(f.flags), "diagnosis": f.diagnosis})
        for q in assignment.quick_checks:
            out["quick-checks"].append({
                "assignment": name, "question": q.question, "kind": q.kind,
                "students": q.students, "answered": q.answered, "right": q.right,
                "facility": q.facility, "point_biserial": q.point_biserial,
                "upper_lower": q.upper_lower, "unpicked": " | ".join(q.unpicked),
                "broken": " | ".join(q.broken), **_section(q.section)})
            for c in q.choices:
                out["choices"].append({"assignment": name, "question": q.question,
                                       "choice": c.choice, "label": c.label, "key": c.key,
                                       "students": c.count, "share": c.share,
                                       "upper_group": c.upper, "explanation": c.explanation})
    for rank, r in enumerate(report.reteach, start=1):
        out["reteach"].append({"rank": rank, "assignment": r.assignment, "item": r.item,
                               "kind": r.kind, "name": r.name, "students": r.students,
                               "of": r.of, "share": r.share, "message": r.message,
                               **_section(r.section)})
    for row in report.grid:
        for (name, exercise), cell in zip(report.grid_columns, row.cells):
            if cell is not None:
                out["grid"].append({"student": row.label, "assignment": name,
                                    "exercise": exercise, "outcome": cell.outcome,
                                    "mistake": cell.mistake or "", "points": cell.points,
                                    "max_points": cell.max_points, "flagged": cell.flagged})
    return out


def write_table(path: Path, rows: list[dict], columns: list[str]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    return path


COLUMNS = {
    "exercises": ["assignment", "exercise", "students", "passed", "partial", "failed", "blank",
                  "not_graded", "flagged", "mean_points", "max_points", "section",
                  "section_url"],
    "mistakes": ["assignment", "exercise", "mistake", "students", "share", "price_points",
                 "max_points", "message"],
    "unnamed": ["assignment", "exercise", "student", "outcome", "flags", "diagnosis"],
    "quick-checks": ["assignment", "question", "kind", "students", "answered", "right",
                     "facility", "point_biserial", "upper_lower", "unpicked", "broken",
                     "section", "section_url"],
    "choices": ["assignment", "question", "choice", "label", "key", "students", "share",
                "upper_group", "explanation"],
    "reteach": ["rank", "assignment", "item", "kind", "name", "students", "of", "share",
                "message", "section", "section_url"],
    "scores": ["assignment", "low", "high", "students"],
    "grid": ["student", "assignment", "exercise", "outcome", "mistake", "points", "max_points",
             "flagged"],
}
