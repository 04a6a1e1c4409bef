"""What to re-teach: the misconceptions that affect the most students, across the report.

Candidates are the named mistakes of every exercise, the distractors of every multiple-choice
quick check and the known slips of every fill-in (a wrong answer with no name is not a
misconception the course can point to). They are ranked by how many students they affect,
then by their share of those who had a verdict (exercise) or answered (quick check), then in
course order; each links to the lesson section that teaches its exercise or quick check.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalib.classroom.report.exercises import ExerciseSummary
from mhalib.classroom.report.quick_checks import QuickCheckSummary
from mhalib.classroom.report.sections import Section

DEFAULT_TOP = 5


@dataclass
class ReteachItem:
    """One misconception: ``kind`` "mistake" (exercise), "distractor" or "slip" (quick
    check); ``students`` of ``of`` were affected."""

    assignment: str
    item: str
    kind: str
    name: str
    students: int
    of: int
    share: float
    message: str
    section: Section | None


def reteach(exercises: list[ExerciseSummary], quick_checks: list[QuickCheckSummary],
            top: int = DEFAULT_TOP) -> list[ReteachItem]:
    """The ``top`` misconceptions (module docstring)."""
    if top < 0:
        raise ValueError(f"top={top} must be at least 0")
    found: list[ReteachItem] = []
    for summary in exercises:
        for row in summary.mistakes:
            found.append(ReteachItem(summary.assignment, summary.exercise, "mistake",
                                     row.mistake, row.students, summary.students, row.share,
                                     row.message, summary.section))
    for check in quick_checks:
        for choice in check.choices:
            named = check.kind == "multiple_choice" or choice.choice not in ("right", "other")
            if named and not choice.key and choice.count and choice.choice != "unrecognised":
                found.append(ReteachItem(
                    check.assignment, check.question,
                    "distractor" if check.kind == "multiple_choice" else "slip", choice.label,
                    choice.count, check.answered, choice.share, choice.explanation,
                    check.section))
    ranked = sorted(enumerate(found), key=lambda pair: (-pair[1].students, -pair[1].share,
                                                        pair[0]))
    return [item for _, item in ranked[:top]]
