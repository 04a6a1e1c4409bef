"""Quick checks scored by the grader: the answer recorded in the submitted notebook, the
instructor's key, the learner's variant.

Runs outside the learner's kernel (``mhalib grade``'s own process, or nbgrader's preprocessors
in :mod:`mhalib.classroom.nbgrader_quick_checks`). The verdict's message reveals the expected
answer and the explanations, for the returned feedback; it names the answer as recorded.
"""

from __future__ import annotations

from mhalib.grading.records import ItemVerdict
from mhalib.quiz import find
from mhalib.quiz.judge import judge
from mhalib.quiz.keys import BadKeys, parse_key
from mhalib.quiz.question import FillIn, MultipleChoice
from mhalib.quiz.record import Recorded
from mhalib.quiz.variant import for_student, is_variant, rng_for


def learner_variant(recorded: Recorded, student: str | None) -> tuple[str | None, list[str]]:
    """The variant to judge with, and flags: the recorded one (flagged when it names another
    student), else the grading student's."""
    flags = []
    if recorded.variant is not None and is_variant(recorded.variant):
        if student and recorded.variant.startswith("student:") and \
                recorded.variant != f"student:{student}":
            flags.append("variant_of_other_student")
        return recorded.variant, flags
    try:
        return (for_student(student) if student else None), flags
    except ValueError:
        return None, flags


def shown_answer(question, answer) -> str:
    if isinstance(question, MultipleChoice):
        index = question.index_of(answer)
        return f"\u201c{question.options[index]}\u201d" if index is not None else repr(answer)
    return repr(answer)


def judge_recorded(question_id: str, recorded: Recorded | None, student: str | None,
                   keys: dict) -> ItemVerdict:
    """Verdict (1 or 0 of the points) on one quick check; never raises for a submission."""

    def failure(message: str, *flags: str) -> ItemVerdict:
        return ItemVerdict.failure("quick_check", question_id, f"{question_id}: {message}",
                                   *flags)

    question, _ = find(question_id)
    if recorded is None or recorded.answer is None:
        return failure("no answer was recorded in the notebook (the form was never used, or "
                       "the notebook was not saved after it).", "no_record")
    if question_id not in keys:
        return failure("no key for this quick check in the instructor's keys.", "no_key")
    try:
        key = parse_key(question, keys[question_id])
    except BadKeys as error:
        return failure(f"the instructor's key is malformed ({error}).", "no_key")
    variant, flags = learner_variant(recorded, student)
    numbers = {}
    if isinstance(question, FillIn) and question.variant is not None:
        if variant is None:
            return failure("the answer has no variant and the student is unknown, so its "
                           "numbers cannot be recomputed.", "bad_record")
        numbers = question.numbers(rng_for(variant, question_id))
    try:
        feedback = judge(question, key, recorded.answer, numbers, reveal=True)
    except Exception as error:  # a judge bug must not lose the class: 0 and say so
        return failure(f"the answer could not be judged ({type(error).__name__}).",
                       "invalid_answer")
    message = f"{question_id}: your answer {shown_answer(question, recorded.answer)}. " \
              f"{feedback.message}"
    verdict = ItemVerdict("quick_check", question_id, bool(feedback.correct),
                          1.0 if feedback.correct else 0.0, message)
    verdict.flags = flags
    option = question.index_of(recorded.answer) if isinstance(question, MultipleChoice) else None
    verdict.response = {"answer": recorded.answer, "option": option, "slip": feedback.slip}
    return verdict
