"""Lesson 03 checkers: a Monte Carlo estimate judged statistically, entropy and Jacobian slips."""

import numpy as np
import pytest

from mhalib.checks import exercises_of, get_exercise
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson03 as answers

EXERCISES = exercises_of("03-scaling")


def test_every_mistake_model_has_a_fixture():
    h.assert_every_mistake_has_a_fixture(answers, EXERCISES)


@pytest.mark.parametrize("seed", range(12))
def test_variance_tolerance_never_rejects_a_fair_sample(seed):
    # six standard errors: a correct estimator with any seed passes
    assert h.verdict_of("dot_product_variance", answers.variance_numpy, seed).passed


def test_variance_tolerance_is_tight_enough_to_catch_a_small_bias():
    def biased(d_k, n_samples=100_000, seed=0):
        return 1.1 * answers.variance_numpy(d_k, n_samples, seed)

    verdict = h.verdict_of("dot_product_variance", biased, 0)
    assert not verdict.passed and "expected about" in verdict.diagnosis


def test_seed_case_explains_a_non_repeatable_answer():
    verdict = h.verdict_of("dot_product_variance", answers.variance_global_rng, 0)
    assert any("gave" in d and "default_rng(seed)" in d for d in verdict.details)


def test_nan_rows_are_reported_where_the_zeros_are():
    verdict = h.verdict_of("softmax_entropy", answers.entropy_nan, 0, "visible")
    assert any("contains NaN" in d for d in verdict.details)


def test_edge_cases_are_covered():
    rows = get_exercise("softmax_entropy").cases(0, "hidden")
    assert any((c.args[0] == 0).any() for c in rows)
    assert any(c.kwargs.get("axis", -1) != -1 for c in rows)
    jac = get_exercise("softmax_jacobian").cases(0, "hidden")
    assert any(np.isin(c.args[0], (0.0, 1.0)).all() for c in jac)  # one-hot p
    assert any(c.args[0].dtype == np.float32 for c in jac)
