"""The quick checks of lessons 01-04: right answers in any form pass, wrong ones are explained.

ACCEPT / REJECT list, per question id, answers a learner could type; every question of the
banks must appear in both tables (so a new question cannot go untested).
"""

import importlib

import pytest

from mhalib.quiz import FillIn, MultipleChoice, QuickCheckWrong, ask, grade, option_digest
from mhalib.release import REPO

BANKS = ["mhalib.quiz.lesson01", "mhalib.quiz.lesson02", "mhalib.quiz.lesson03",
         "mhalib.quiz.lesson04"]
NOTEBOOKS = {"mhalib.quiz.lesson01": "solutions/01-single-head/single_head_attention.ipynb",
             "mhalib.quiz.lesson02": "solutions/02-multi-head/multi_head_attention.ipynb",
             "mhalib.quiz.lesson03": "solutions/03-scaling/scaling.ipynb",
             "mhalib.quiz.lesson04": "solutions/04-masks/masks.ipynb"}

ACCEPT = {
    "qc_scale_divisor": ["np.sqrt(d_k)", "d_k ** 0.5", "math.sqrt(q.shape[-1])"],
    "qc_weights_shape": ["a", "A", 0],
    "qc_softmax_shift": ["np.max(x, axis=-1, keepdims=True)", "x.max(axis=1, keepdims=True)",
                         "x.max(-1, keepdims=True)", "np.max(x, -1, keepdims=True)"],
    "qc_head_dim": ["d_model // num_heads", "d_model / num_heads", "d_model * num_heads ** -1"],
    "qc_split_transpose": ["b", "y.transpose(0, 2, 1, 3)", 1],
    "qc_gpt3_heads": ["c", 2],
    "qc_dot_variance": ["d_k * s2 ** 2", "d_k * s2 * s2", "s2 ** 2 * d_k"],
    "qc_saturated_gradient": ["b", 1],
    "qc_max_entropy": ["np.log(N)", "math.log(N)", "-np.log(1 / N)", "np.log2(N) * np.log(2)"],
    "qc_cache_offset": ["n_k - n_q", "-(n_q - n_k)", "n_k-n_q"],
    "qc_mask_fill": ["b", 1],
    "qc_padding_shape": ["c", 2],
}
REJECT = {
    "qc_scale_divisor": ["d_k", "np.sqrt(q.shape[0])", "np.sqrt(k.shape[0])", "1"],
    "qc_weights_shape": ["b", "c", "d", 3, "z", None],
    "qc_softmax_shift": ["x.max()", "x.max(axis=-1)", "x.max(axis=0, keepdims=True)",
                         "x.min(axis=-1, keepdims=True)", "x.mean(axis=-1, keepdims=True)"],
    "qc_head_dim": ["d_model", "num_heads", "d_model * num_heads", "np.sqrt(d_model)", "64"],
    "qc_split_transpose": ["a", "c", "d", "(0, 2, 1, 3)"],
    "qc_gpt3_heads": ["a", "b", "d"],
    "qc_dot_variance": ["d_k", "d_k * s2", "np.sqrt(d_k) * s2", "1"],
    "qc_saturated_gradient": ["a", "c", "d"],
    "qc_max_entropy": ["N", "np.log2(N)", "1", "np.log(N - 1)"],
    "qc_cache_offset": ["0", "n_q - n_k", "n_k", "1", "n_k - n_q - 1"],
    "qc_mask_fill": ["a", "c", "d"],
    "qc_padding_shape": ["a", "b", "d"],
}


def questions():
    for bank in BANKS:
        yield from importlib.import_module(bank).QUESTIONS.values()


QUESTIONS = {q.id: q for q in questions()}


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
def test_question_is_well_formed(qid):
    question = QUESTIONS[qid]
    assert question.id == qid and qid.startswith("qc_")
    if isinstance(question, MultipleChoice):
        right = [i for i in range(len(question.options))
                 if option_digest(qid, i) == question.key]
        assert len(right) == 1
        assert set(question.why_wrong) == set(range(len(question.options))) - set(right)
    else:
        assert isinstance(question, FillIn)
        for example in question.examples:
            assert question.judge(example).correct, example
        assert "____" in question.template


@pytest.mark.parametrize("qid", sorted(QUESTIONS))
def test_form_renders_and_answers(qid):
    question = QUESTIONS[qid]
    form = ask(qid)
    if isinstance(question, FillIn):
        form.answer.value = ACCEPT[qid][0]
    else:
        right = next(i for i in range(len(question.options))
                     if option_digest(qid, i) == question.key)
        form.answer.value = form.answer.options[right]
    form.check(None)
    assert "Right" in form.feedback.value


@pytest.mark.parametrize("bank", BANKS)
def test_bank_matches_the_notebook_answer_cells(bank):
    import nbformat

    notebook = nbformat.read(str(REPO / NOTEBOOKS[bank]), as_version=4)
    graded = {c.metadata["nbgrader"]["grade_id"] for c in notebook.cells
              if c.metadata.get("nbgrader", {}).get("solution")}
    bank_ids = set(importlib.import_module(bank).QUESTIONS)
    assert bank_ids == {g for g in graded if g.startswith("qc_")}
