"""Lesson 05 checkers: FLOP and parameter slips are named, every correct style passes."""

import pytest

from mhalib.checks import exercises_of, get_exercise
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson05 as answers

EXERCISES = exercises_of("05-flops")
# judged on the output's structure, not by recomputing a wrong answer (see test below)
STRUCTURAL = {("mha_flops", "n2_with_d_head")}


@pytest.mark.parametrize("exercise,mistake,func", h.mistake_params(answers))
def test_realistic_mistake_is_rejected_and_named(exercise, mistake, func):
    h.assert_named(exercise, func, mistake)


@pytest.mark.parametrize("exercise,func", h.right_params(answers))
def test_differently_written_correct_answer_passes(exercise, func):
    h.assert_accepted(exercise, func)


@pytest.mark.parametrize("exercise,mistake", [
    p for p in h.model_params(EXERCISES) if tuple(p.values) not in STRUCTURAL])
def test_every_mistake_model_is_reachable(exercise, mistake):
    h.assert_model_detectable(exercise, mistake)
    h.assert_model_cannot_pass(exercise, mistake)


@pytest.mark.parametrize("exercise,func", h.answer_key_params(answers))
def test_calling_mhalib_answer_scores_zero(exercise, func):
    h.assert_answer_key_refused(exercise, func)


@pytest.mark.parametrize("exercise", EXERCISES)
def test_replaced_numpy_comparison_scores_zero(exercise, monkeypatch):
    h.assert_tampering_refused(exercise, answers.RIGHT[exercise][0], monkeypatch)


@pytest.mark.parametrize("exercise", EXERCISES)
def test_grading_suite_is_fast(exercise):
    h.assert_fast(exercise, answers.RIGHT[exercise][0])


def test_per_head_n2_terms_are_recognised_for_any_head_count():
    checker = get_exercise("mha_flops")
    case = checker.cases(0, "visible")[0]  # N=1024, d_model=768
    mistake = next(m for m in checker.mistakes() if m.name == "n2_with_d_head")
    right = checker.expected(case)
    for heads in (2, 12, 768):
        wrong = {**right, "scores": right["scores"] // heads}
        assert checker.matches(case, mistake, wrong)
    assert not checker.matches(case, mistake, right)
    assert not checker.matches(case, mistake, {**right, "scores": right["scores"] // 7})


def test_off_by_one_flop_counts_are_not_accepted():
    verdict = h.verdict_of("mha_flops", lambda seq_len, d_model: {
        **answers.flops_by_formula(seq_len, d_model),
        "total": answers.flops_by_formula(seq_len, d_model)["total"] + 1}, seed=0)
    assert not verdict.passed


def test_hidden_cases_cover_big_models_and_keywords():
    labels = [c.label for c in get_exercise("mha_flops").cases(0, "hidden")]
    assert any("405B" in label for label in labels) and "keyword arguments" in labels
