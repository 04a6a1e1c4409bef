"""The quick checks of every lesson: right answers in any form pass, wrong ones are explained,
each form works, and each bank matches its notebook's answer cells."""

from __future__ import annotations

import importlib

import nbformat
import pytest

from mhalib.checks import LESSONS, NOTEBOOKS
from mhalib.quiz import FillIn, MultipleChoice, QuickCheckWrong, ask, grade, option_digest
from mhalib.release import REPO
from tests.quiz.bank_answers import ACCEPT, REJECT

BANKS = {f"mhalib.quiz.lesson{assignment[:2]}": assignment for assignment in LESSONS}
QUESTIONS = {question.id: question for bank in BANKS
             for question in importlib.import_module(bank).QUESTIONS.values()}


def right_option(question: MultipleChoice) -> int:
    right = [i for i in range(len(question.options))
             if option_digest(question.id, i) == question.key]
    assert len(right) == 1, f"{question.id}: {len(right)} options match the key"
    return right[0]


def test_every_question_is_tested_both_ways():
    assert set(QUESTIONS) == set(ACCEPT) == set(REJECT)


@pytest.mark.parametrize("qid,answer", [(q, a) for q, answers in ACCEPT.items() for a in answers])
def test_right_answers_pass(qid, answer):
    assert grade(qid, answer) is True


@pytest.mark.parametrize("qid,answer", [(q, a) for q, answers in REJECT.items() for a in answers])
def test_wrong_answers_fail_with_a_reason(qid, answer):
    with pytest.raises(QuickCheckWrong) as info:
        grade(qid, answer)
    assert len(str(info.value)) > len(qid) + 10


@pytest.mark.parametrize("qid", sorted(QUESTIONS))
def test_question_is_well_formed_and_its_form_works(qid):
    question = QUESTIONS[qid]
    assert question.id == qid and qid.startswith("qc_")
    form = ask(qid)
    if isinstance(question, MultipleChoice):
        right = right_option(question)
        assert set(question.why_wrong) == set(range(len(question.options))) - {right}
        form.answer.value = form.answer.options[right]
    else:
        assert isinstance(question, FillIn) and "____" in question.template
        for example in question.examples:
            assert question.judge(example).correct, example
        form.answer.value = ACCEPT[qid][0]
    form.check(None)
    assert "Right" in form.feedback.value


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_bank_matches_the_notebook_answer_cells(bank):
    assignment = BANKS[bank]
    notebook = nbformat.read(str(REPO / "solutions" / assignment / NOTEBOOKS[assignment]),
                             as_version=4)
    answer_cells = {c.metadata["nbgrader"]["grade_id"]: c.source for c in notebook.cells
                    if c.metadata.get("nbgrader", {}).get("solution")}
    bank_ids = set(importlib.import_module(bank).QUESTIONS)
    assert bank_ids == {g for g in answer_cells if g.startswith("qc_")}
    for qid in bank_ids:  # the solutions notebook's own answer is right
        namespace = {}
        exec(answer_cells[qid].replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""),
             namespace)
        assert grade(qid, namespace[qid]) is True, qid
