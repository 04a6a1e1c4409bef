"""Per exercise: how the class did, and the mistakes it made, ranked.

Counts follow :mod:`mhalib.classroom.report.outcomes` (one outcome per student, ``flagged``
counted apart). A named mistake is the checker's ``mistake:<name>`` flag; its share is over the
students who have a verdict on the exercise; its price is what the rubric gives it (share of
the exercise's points). Failures with no name (wrong values no mistake model reproduces, an
error on some inputs) are counted and listed with the grader's diagnosis for the instructor to
read (all of them in the CSV and JSON; the first :data:`UNNAMED_WITH_CODE` with their code).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mhalib.classroom.report.examples import anonymise, pick_examples, scrub
from mhalib.classroom.report.outcomes import (
    OUTCOMES,
    is_flagged,
    mistake_message,
    named_mistake,
    outcome,
)
from mhalib.classroom.report.reading import GradedAssignment
from mhalib.classroom.report.sections import Section
from mhalib.grading.rubric import Rubric

UNNAMED_WITH_CODE = 40  # unnamed failures per exercise shown with their (anonymised) code


@dataclass
class MistakeRow:
    """One named mistake of one exercise: who made it, what it means, what it costs."""

    exercise: str
    mistake: str
    students: int
    share: float
    price_points: float
    max_points: float
    message: str
    examples: list[str] = field(default_factory=list)


@dataclass
class UnnamedFailure:
    """A wrong answer the grader could not name, as the instructor should read it."""

    student: str  # the pseudonym, or the id with --names
    outcome: str
    flags: list[str]
    diagnosis: str
    code: str = ""  # the first UNNAMED_WITH_CODE of an exercise only


@dataclass
class ExerciseSummary:
    assignment: str
    exercise: str
    students: int
    max_points: float
    mean_points: float
    counts: dict[str, int]
    flagged: int
    mistakes: list[MistakeRow]
    unnamed: list[UnnamedFailure]
    section: Section | None = None


def summarise_exercise(graded: GradedAssignment, exercise: str, labels: dict[str, str],
                       rubric: Rubric, section: Section | None = None) -> ExerciseSummary:
    """The summary of ``exercise`` over every student with a verdict on it (``labels``: the
    name each student is shown under)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    flagged = 0
    points: list[float] = []
    max_points = 0.0
    makers: dict[str, list[tuple[str, str, str]]] = {}
    messages: dict[str, str] = {}
    unnamed: list[tuple[str, str, UnnamedFailure]] = []
    for work in graded.students:
        verdict = work.verdicts.get(exercise)
        if verdict is None:
            continue
        kind = outcome(verdict)
        counts[kind] += 1
        flagged += is_flagged(verdict, work.issue_flags)
        points.append(verdict.points)
        max_points = max(max_points, verdict.max_points)
        answer = str(verdict.response.get("answer") or "")
        label = labels[work.student]
        mistake = named_mistake(verdict)
        if mistake is not None:
            makers.setdefault(mistake, []).append((label, work.student, answer))
            messages.setdefault(mistake, mistake_message(verdict))
        elif kind in ("failed", "partial"):
            diagnosis = scrub(verdict.diagnosis[:400], work.student)
            unnamed.append((work.student, answer, UnnamedFailure(
                label, kind, list(verdict.flags), diagnosis)))
    students = sum(counts.values())
    rows = [MistakeRow(exercise, name, len(who), len(who) / students,
                       rubric.mistake_share(exercise, name) * max_points, max_points,
                       messages[name], pick_examples(who, focus=exercise))
            for name, who in makers.items()]
    rows.sort(key=lambda row: (-row.students, row.mistake))
    unnamed.sort(key=lambda entry: entry[2].student)
    for student, answer, failure in unnamed[:UNNAMED_WITH_CODE]:  # anonymise what is shown
        failure.code = anonymise(answer, student, exercise)
    return ExerciseSummary(graded.assignment, exercise, students, max_points,
                           sum(points) / students if students else 0.0, counts, flagged, rows,
                           [entry[2] for entry in unnamed], section)
