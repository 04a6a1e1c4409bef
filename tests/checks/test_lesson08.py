"""Lesson 08 checkers: diagonal slips in the head scores are named, correct styles pass."""

import numpy as np
import pytest

from mhalib.checks import exercises_of
from mhalib.checks.lesson08 import induction_patterns, planted_patterns
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson08 as answers

EXERCISES = exercises_of("08-heads")


@pytest.mark.parametrize("exercise,mistake,func", h.mistake_params(answers))
def test_realistic_mistake_is_rejected_and_named(exercise, mistake, func):
    h.assert_named(exercise, func, mistake)


@pytest.mark.parametrize("exercise,func", h.right_params(answers))
def test_differently_written_correct_answer_passes(exercise, func):
    h.assert_accepted(exercise, func)


@pytest.mark.parametrize("exercise,mistake", h.model_params(EXERCISES))
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


def test_planted_patterns_are_distributions_with_the_planted_head():
    rng = np.random.default_rng(0)
    w = planted_patterns(rng, 10, [-1, None])
    assert np.allclose(w.sum(-1), 1) and np.all(np.triu(w, 1) == 0)
    diag = np.diagonal(w[0], offset=-1)
    assert diag.mean() > 0.5 > np.diagonal(w[1], offset=-1).mean()


def test_induction_patterns_hold_one_head_per_job():
    w = induction_patterns(np.random.default_rng(1), 8)
    i = np.arange(8, 16)
    induction = w[:, i, i - 7].mean(-1)
    duplicate = w[:, i, i - 8].mean(-1)
    assert (induction > 0.4).sum() == 1 and (duplicate > 0.4).sum() == 1
    assert induction.argmax() != duplicate.argmax()
