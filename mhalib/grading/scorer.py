"""Scores decided outside the learner's kernel: records in, verdicts and points out.

Runs in the grader's own process (never in the sandbox). Every exercise's record is judged by
``mhalib.checks.judge_record``, which re-generates the inputs from the seed and compares with
the answer key; its verdict earns points under the rubric (:mod:`mhalib.grading.credit`).
Quick checks are judged from the answers recorded in the submitted notebook, with the
instructor's keys (:mod:`mhalib.grading.quick_checks`). A missing, unreadable or hostile record
gives 0 for that item with the reason, never an exception.
"""

from __future__ import annotations

import json

from mhalib.grading.assignment import NotebookModel
from mhalib.grading.credit import Credit, exercise_credit
from mhalib.grading.records import ItemVerdict
from mhalib.grading.rubric import Rubric

# the judge's per-case statuses, renamed so they never read as the notebook-level flags
EXERCISE_FLAGS = {"timeout": "call_timeout", "error": "call_error",
                  "too_large": "output_too_large"}


def _parse(text: str | None) -> dict | None:
    """The record as a dict (None: none came back readable, e.g. over ``Limits.record_bytes``)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def judge_exercise(name: str, text: str | None, present: bool, seed: int,
                   not_reached: str | None, rubric: Rubric) -> tuple[ItemVerdict, Credit]:
    """Verdict of exercise ``name`` from its record text, and the credit it earns."""
    from mhalib.checks import judge_record

    def failure(diagnosis: str, *flags: str) -> tuple[ItemVerdict, Credit]:
        return ItemVerdict.failure("exercise", name, diagnosis, *flags), Credit(0.0)

    if not present:
        reason = not_reached or "no record was written for it"
        return failure(f"{name}: not graded: {reason}.", "no_record")
    record = _parse(text)
    if record is None:
        return failure(f"{name}: the grading record was too large or unreadable.", "bad_record")
    try:
        verdict = judge_record(name, record, seed)
        credit = exercise_credit(verdict, rubric)
    except Exception as error:  # the judge promises not to raise; belt and braces
        return failure(f"{name}: the record could not be judged ({type(error).__name__}).",
                       "bad_record")
    if not isinstance(verdict.score, (int, float)) or not 0.0 <= float(verdict.score) <= 1.0:
        return failure(f"{name}: the judge returned no valid score.", "bad_record")
    diagnosis = str(verdict.diagnosis)
    if not diagnosis.startswith(f"{name}:"):
        diagnosis = f"{name}: {diagnosis}"
    flags = [EXERCISE_FLAGS.get(str(f), str(f)) for f in verdict.flags]
    item = ItemVerdict("exercise", name, bool(verdict.passed), float(credit.share), diagnosis,
                       [str(d) for d in verdict.details][:20], flags)
    return item, credit


def score_notebook(model: NotebookModel, records: dict, answers: dict, seed: int,
                   not_reached: dict[str, str], rubric: Rubric, student: str | None = None,
                   keys: dict | None = None) -> dict[str, ItemVerdict]:
    """Verdicts of every exercise and quick check, with points, max points and credit notes.

    ``records`` maps exercise -> record text (None: present but larger than
    ``Limits.record_bytes``, or unreadable); ``answers`` maps
    quick check -> :class:`~mhalib.quiz.record.Recorded` read from the submission;
    ``not_reached`` maps exercises whose recording step never ran -> the reason. Points are
    exact (rounding is for display only).
    """
    from mhalib.grading.quick_checks import judge_recorded

    verdicts: dict[str, ItemVerdict] = {}
    for name in model.exercises:
        verdict, credit = judge_exercise(name, records.get(name), name in records, seed,
                                         not_reached.get(name), rubric)
        verdict.max_points = model.points_of(name)
        verdict.credit = credit.note(verdict.max_points)
        verdicts[name] = verdict
    for question in model.questions:
        verdicts[question] = judge_recorded(question, answers.get(question), student,
                                            keys or {})
        verdicts[question].max_points = model.points_of(question)
    for verdict in verdicts.values():
        verdict.points = verdict.share * verdict.max_points
    return verdicts


def grade_cell_scores(model: NotebookModel,
                      verdicts: dict[str, ItemVerdict]) -> dict[str, float | None]:
    """nbgrader auto_score of every grade cell, exact (None: left for manual grading)."""
    scores: dict[str, float | None] = {}
    for cell in model.grade_cells:
        verdict = verdicts.get(cell.item) if cell.item else None
        scores[cell.grade_id] = None if verdict is None else verdict.share * cell.points
    return scores
