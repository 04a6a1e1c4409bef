"""The quick checks of lessons 05-08: right answers in any form pass, the slips the lessons warn
about are rejected with a reason, and every bank matches its notebook's answer cells."""

import importlib

import nbformat
import pytest

from mhalib.quiz import FillIn, MultipleChoice, QuickCheckWrong, ask, grade, option_digest
from mhalib.release import REPO

NOTEBOOKS = {
    "mhalib.quiz.lesson05": "solutions/05-flops/flops.ipynb",
    "mhalib.quiz.lesson06": "solutions/06-gqa/gqa_kv_cache.ipynb",
    "mhalib.quiz.lesson07": "solutions/07-flash/flash_attention.ipynb",
    "mhalib.quiz.lesson08": "solutions/08-heads/what_heads_learn.ipynb",
}

ACCEPT = {
    "qc_matmul_flops": ["2 * m * k * n", "2*k*m*n", "m * n * (2 * k)"],
    "qc_attention_share": ["seq_len / (seq_len + 2 * d_model)",
                           "4*seq_len**2*d_model / (8*seq_len*d_model**2 + 4*seq_len**2*d_model)"],
    "qc_mfu": ["tokens_per_second * flops_per_token / peak_flops",
               "flops_per_token / (peak_flops / tokens_per_second)"],
    "qc_kv_group": ["h // (num_heads // num_kv_heads)", "h * num_kv_heads // num_heads",
                    "np.floor(h / (num_heads / num_kv_heads))"],
    "qc_cache_shrink": ["num_heads / num_kv_heads", "num_heads // num_kv_heads"],
    "qc_decode_growth": ["c", "C", 2],
    "qc_rescale": ["np.exp(m_old - m_new)", "math.exp(m_old) / math.exp(m_new)",
                   "1 / np.exp(m_new - m_old)"],
    "qc_num_blocks": ["math.ceil(n_k / block_size)", "(n_k + block_size - 1) // block_size",
                      "-(-n_k // block_size)"],
    "qc_flash_memory": ["b", 1],
    "qc_induction_key": ["i - period + 1", "i + 1 - period"],
    "qc_uniform_previous": ["1 / (i + 1)", "(i + 1) ** -1"],
    "qc_induction_circuit": ["a", 0],
}
REJECT = {
    "qc_matmul_flops": ["m * k * n", "2 * m * n", "m * k + k * n"],
    "qc_attention_share": ["seq_len / (2 * d_model)", "4 * seq_len**2 * d_model",
                           "seq_len / (seq_len + d_model)"],
    "qc_mfu": ["tokens_per_second / peak_flops",
               "peak_flops / (tokens_per_second * flops_per_token)"],
    "qc_kv_group": ["h % num_kv_heads", "h // num_kv_heads", "h"],
    "qc_cache_shrink": ["num_heads", "num_kv_heads / num_heads", "2"],
    "qc_decode_growth": ["a", "b", "d"],
    "qc_rescale": ["np.exp(m_new - m_old)", "m_old - m_new", "1"],
    "qc_num_blocks": ["n_k // block_size", "n_k / block_size", "n_k // block_size + 1"],
    "qc_flash_memory": ["a", "c", "d"],
    "qc_induction_key": ["i - period", "i - period - 1", "i + 1"],
    "qc_uniform_previous": ["1 / i", "1", "1 / (i - 1)"],
    "qc_induction_circuit": ["b", "c", "d"],
}


def questions():
    for bank in NOTEBOOKS:
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
def test_question_is_well_formed_and_its_form_works(qid):
    question = QUESTIONS[qid]
    form = ask(qid)
    if isinstance(question, MultipleChoice):
        right = [i for i in range(len(question.options))
                 if option_digest(qid, i) == question.key]
        assert len(right) == 1
        assert set(question.why_wrong) == set(range(len(question.options))) - set(right)
        form.answer.value = form.answer.options[right[0]]
    else:
        assert isinstance(question, FillIn) and "____" in question.template
        for example in question.examples:
            assert question.judge(example).correct, example
        form.answer.value = ACCEPT[qid][0]
    form.check(None)
    assert "Right" in form.feedback.value


@pytest.mark.parametrize("bank", sorted(NOTEBOOKS))
def test_bank_matches_the_notebook_answer_cells(bank):
    notebook = nbformat.read(str(REPO / NOTEBOOKS[bank]), as_version=4)
    graded = {c.metadata["nbgrader"]["grade_id"] for c in notebook.cells
              if c.metadata.get("nbgrader", {}).get("solution")}
    bank_ids = set(importlib.import_module(bank).QUESTIONS)
    assert bank_ids == {g for g in graded if g.startswith("qc_")}
    for qid in bank_ids:  # the solution cell's answer is right
        source = next(c.source for c in notebook.cells
                      if c.metadata.get("nbgrader", {}).get("grade_id") == qid)
        namespace = {}
        exec(source.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""), namespace)
        assert grade(qid, namespace[qid]) is True
