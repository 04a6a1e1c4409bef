"""Every lesson's quick checks: keys match the questions and the notebook, right answers in
any form pass for every learner's numbers, the slips are caught with their own explanation,
and the content rules of the course hold (counts, transfer, per-learner variants)."""

from __future__ import annotations

import json

import nbformat
import pytest

from mhalib.quiz.judge import judge
from mhalib.quiz.question import FillIn, MultipleChoice
from mhalib.quiz.variant import rng_for
from tests.checkout import COURSE, keys_of
from tests.quiz.banks import LEARNERS, LESSONS, all_items, answers, bank

ITEMS = list(all_items())
IDS = [qid for _, qid, *_ in ITEMS]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.assignment)
def test_bank_keys_and_notebook_agree(lesson):
    questions = bank(lesson)
    keys = keys_of(lesson.assignment)
    assert set(keys) == set(questions)
    json.dumps(keys)  # plain data: a practice release copies it into quick_checks.json
    notebook = nbformat.read(str(COURSE.solutions / lesson.assignment / lesson.notebook), 4)
    cells = [c.metadata.get("nbgrader", {}).get("grade_id", "") for c in notebook.cells]
    assert [g for g in cells if g.startswith("qc_")] == list(questions), \
        "the notebook's quick-check cells and the bank (in notebook order)"
    tables = answers(lesson)
    assert set(tables.ACCEPT) == set(tables.REJECT) == set(questions)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.assignment)
def test_lesson_has_enough_checks_that_transfer(lesson):
    questions = list(bank(lesson).values())
    assert len(questions) >= 3
    assert 2 * sum(q.transfer for q in questions) >= len(questions), "at least half transfer"
    variants = [q for q in questions if isinstance(q, FillIn) and q.variant is not None]
    assert variants, "at least one fill-in with per-learner numbers"


@pytest.mark.parametrize("item", ITEMS, ids=IDS)
def test_right_answers_pass_for_every_learner(item):
    lesson, qid, question, key, _ = item
    table = answers(lesson).ACCEPT[qid]
    if isinstance(question, MultipleChoice):
        for answer in [key.answer, question.options[key.answer], *table]:
            assert judge(question, key, answer).correct, answer
        return
    for learner in LEARNERS:
        numbers = question.numbers(rng_for(learner, qid))
        for answer in [key.answer, *key.accepted, *table]:
            feedback = judge(question, key, answer, numbers)
            assert feedback.correct, (learner, answer, feedback.message)


@pytest.mark.parametrize("item", ITEMS, ids=IDS)
def test_wrong_answers_fail_and_say_why(item):
    lesson, qid, question, key, _ = item
    table = answers(lesson).REJECT[qid]
    assert table, "every question needs slips to reject"
    if isinstance(question, MultipleChoice):
        wrong = set(range(len(question.options))) - {key.answer}
        assert set(key.why_wrong) == wrong, "every distractor needs its explanation"
        for index in wrong:
            feedback = judge(question, key, index)
            assert not feedback.correct and key.why_wrong[index] in feedback.message
        for answer in table:
            assert not judge(question, key, answer).correct, answer
        return
    for learner in LEARNERS:
        numbers = question.numbers(rng_for(learner, qid))
        for answer in table:
            feedback = judge(question, key, answer, numbers)
            assert not feedback.correct and len(feedback.message) > 20, (learner, answer)
        for slip, why in key.mistakes.items():  # a known slip gets its own explanation
            feedback = judge(question, key, slip, numbers)
            assert not feedback.correct and feedback.message.startswith("Not quite. ")
            assert why.split("{")[0][:40] in feedback.message, (slip, feedback.message)


@pytest.mark.parametrize("item", ITEMS, ids=IDS)
def test_question_is_well_formed(item):
    lesson, qid, question, key, _ = item
    assert question.id == qid and qid.startswith("qc_")
    if isinstance(question, FillIn):
        assert "____" in question.template
        assert question.names or question.variant is not None, "say which names it may use"
        if question.variant is not None:  # the learner's numbers are in the prompt
            shown = {question.shown_prompt(question.numbers(rng_for(v, qid))) for v in LEARNERS}
            assert len(shown) > 1, "every learner gets the same numbers"
            assert "{" not in question.shown_prompt(question.numbers(rng_for("seed:1", qid)))
    else:
        assert 3 <= len(question.options) <= 5
        assert len(set(question.options)) == len(question.options)
    for text in (question.prompt, key.explanation):
        assert len(text) > 20
