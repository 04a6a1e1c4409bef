"""Quick checks: fill-in-the-blank and multiple-choice questions, answered once, in a form.

In a lesson, the quick check's one cell ``ask("qc_id")`` shows the form; the answer given there
is recorded in the cell's output and saved with the notebook, and that is what the graders score
(outside the learner's kernel, with the instructor's keys). A release is ``practice`` (instant
right/wrong with an explanation per option) or ``assessed`` (recorded only), as
``mhalib release --quick-checks`` chose. Each lesson's questions are in ``mhalib.quiz.lessonNN``
(``QUESTIONS``), found through the course manifest (:mod:`mhalib.course`); the keys are
instructor data (:mod:`mhalib.quiz.keys`).
"""

from __future__ import annotations

import importlib
import os

from mhalib import course
from mhalib.quiz.question import FillIn, MultipleChoice


class QuickCheckNotScoredHere(RuntimeError):
    """nbgrader ran a quick-check cell without the course's quick-check preprocessors."""


def _banks():
    for lesson in course.LESSONS:
        try:
            yield lesson, importlib.import_module(lesson.quiz)
        except ModuleNotFoundError as error:
            if error.name != lesson.quiz:
                raise


def find(question_id: str):
    """(question, assignment) of the quick check with id ``question_id``."""
    if not isinstance(question_id, str) or not question_id.startswith("qc_"):
        raise ValueError(f"question_id must start with 'qc_', got {question_id!r}")
    for lesson, module in _banks():
        if question_id in module.QUESTIONS:
            return module.QUESTIONS[question_id], lesson.assignment
    raise ValueError(f"question_id={question_id!r} is not a known quick check")


def get_question(question_id: str):
    """The quick check with id ``question_id`` (ids start with ``qc_``)."""
    return find(question_id)[0]


def all_questions() -> dict[str, object]:
    return {qid: q for _, module in _banks() for qid, q in module.QUESTIONS.items()}


def ask(question_id: str):
    """The quick check's form (shown when it is the cell's result); see the module docstring."""
    question, assignment = find(question_id)
    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        raise QuickCheckNotScoredHere(
            f"{question_id} is scored by the course's grader from the answer saved in the "
            f"notebook; this nbgrader run lacks the quick-check preprocessors of "
            f"grading/nbgrader_config.py, so it gives no points")
    if os.environ.get("NBGRADER_EXECUTION"):
        print(f"{question_id}: the answer saved in the notebook is scored when it is graded.")
        return None
    from mhalib.quiz.session import current
    from mhalib.quiz.widget import QuickCheckForm

    return QuickCheckForm(question, current(), assignment)


__all__ = ["FillIn", "MultipleChoice", "QuickCheckNotScoredHere", "all_questions", "ask",
           "find", "get_question"]
