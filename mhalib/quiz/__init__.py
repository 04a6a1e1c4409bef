"""Quick checks: fill-in-the-blank and multiple-choice questions, shown as widgets and graded.

In a lesson, ``ask("qc_id")`` shows the form for instant feedback; the learner records the answer
in the autograded cell ``qc_id = ...`` and the test cell calls ``grade("qc_id", qc_id)``.
Each lesson's questions are in ``mhalib.quiz.lessonNN`` (``QUESTIONS``), found through the
course manifest (:mod:`mhalib.course`).
"""

from __future__ import annotations

import importlib

from mhalib import course
from mhalib.quiz.question import FillIn, MultipleChoice, option_digest


class QuickCheckWrong(AssertionError):
    """A quick-check answer is not right; the message says why."""


def get_question(question_id: str):
    """The quick check with id ``question_id`` (ids start with ``qc_``)."""
    if not isinstance(question_id, str) or not question_id.startswith("qc_"):
        raise ValueError(f"question_id must start with 'qc_', got {question_id!r}")
    for bank in (lesson.quiz for lesson in course.LESSONS):
        try:
            module = importlib.import_module(bank)
        except ModuleNotFoundError as error:
            if error.name == bank:
                continue
            raise
        if question_id in module.QUESTIONS:
            return module.QUESTIONS[question_id]
    raise ValueError(f"question_id={question_id!r} is not a known quick check")


def ask(question_id: str):
    """Show the quick check as a form with instant feedback (returns the widget)."""
    from mhalib.quiz.widget import build_form

    return build_form(get_question(question_id))


def grade(question_id: str, answer) -> bool:
    """What a quick check's test cell calls: passes silently or raises QuickCheckWrong."""
    feedback = get_question(question_id).judge(answer)
    print(("Right. " if feedback.correct else "") + feedback.message.removeprefix("Right. "))
    if not feedback.correct:
        raise QuickCheckWrong(f"{question_id}: {feedback.message}")
    return True


__all__ = ["FillIn", "MultipleChoice", "QuickCheckWrong", "ask", "get_question", "grade",
           "option_digest"]
