"""Scores decided outside the learner's kernel: records in, verdicts and points out.

Runs in the grader's own process (never in the sandbox). Every exercise is judged from what the
warden sealed (``mhalib.checks.judge_seals``): the record of its cases, whose inputs are
re-generated from the seed the warden issued, and for a measured exercise its physical check;
the verdict earns points under the rubric (:mod:`mhalib.grading.credit`).
Quick checks are judged from the answers recorded in the submitted notebook, with the
instructor's keys (:mod:`mhalib.grading.quick_checks`). The hints an assessed release recorded
per exercise are reported on its verdict and priced by the rubric (free by default). A missing,
unreadable or hostile record gives 0 for that item with the reason, never an exception.
"""

from __future__ import annotations

import json

from mhalib.grading.assignment import NotebookModel
from mhalib.grading.credit import Credit, exercise_credit, with_hint_cost
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


def judge_exercise(name: str, seals: dict, present: bool, not_reached: str | None,
                   rubric: Rubric) -> tuple[ItemVerdict, Credit]:
    """Verdict of exercise ``name`` from the texts of its seals (``generic``, and ``physical``
    for a measured exercise), and the credit it earns."""
    from mhalib.checks import judge_seals

    def failure(diagnosis: str, *flags: str) -> tuple[ItemVerdict, Credit]:
        return ItemVerdict.failure("exercise", name, diagnosis, *flags), Credit(0.0)

    if not present:
        reason = not_reached or "no record was written for it"
        return failure(f"{name}: not graded: {reason}.", "no_record")
    generic = _parse(seals.get("generic"))
    if generic is None:
        return failure(f"{name}: the grading record was too large or unreadable.", "bad_record")
    try:
        verdict = judge_seals(name, generic, _parse(seals.get("physical")))
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


def seals_by_exercise(records: dict, exercises) -> dict[str, dict]:
    """The sandbox's ``{"<exercise>.<session>": text}`` as ``{exercise: {session: text}}``,
    keeping only the exercises of the notebook and the sessions the warden writes."""
    found: dict[str, dict] = {}
    for key, text in (records or {}).items():
        name, _, session = str(key).rpartition(".")
        if name in exercises and session in ("generic", "physical"):
            found.setdefault(name, {})[session] = text
    return found


def score_notebook(model: NotebookModel, records: dict, answers: dict,
                   not_reached: dict[str, str], rubric: Rubric, student: str | None = None,
                   keys: dict | None = None,
                   hints: dict[str, int] | None = None) -> dict[str, ItemVerdict]:
    """Verdicts of every exercise and quick check, with points, max points and credit notes.

    ``records`` maps exercise -> {session: seal text (None: present but larger than
    ``Limits.record_bytes``, or unreadable)}, where a recorded exercise has a ``generic`` seal;
    ``answers`` maps
    quick check -> :class:`~mhalib.quiz.record.Recorded` read from the submission;
    ``not_reached`` maps exercises whose recording step never ran -> the reason; ``hints`` maps
    exercise -> hints taken, as recorded in the submission
    (:func:`mhalib.hints.record.hints_taken`). Points are exact (rounding is for display only).
    """
    from mhalib.grading.quick_checks import judge_recorded

    verdicts: dict[str, ItemVerdict] = {}
    for name in model.exercises:
        seals = records.get(name, {})
        verdict, credit = judge_exercise(name, seals, "generic" in seals,
                                         not_reached.get(name), rubric)
        verdict.hints = (hints or {}).get(name, 0)
        credit = with_hint_cost(credit, name, verdict.hints, rubric)
        verdict.share = float(credit.share)
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
