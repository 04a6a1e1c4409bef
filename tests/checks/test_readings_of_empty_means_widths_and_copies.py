"""Readings added after round X (issue 22), each with a slip written here, apart from the
catalogue that found its kind: an average over no queries (NaN everywhere, never matched to a
model of zeros), RoPE applied to the first features only, the softmax Jacobian's diagonal
read back as a polynomial in p, and a count of copies of one term mended by no regrouping and
no reweighted copy (a term is missing: the models say so)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.compare import nan_where_empty
from mhalib.checks.probe import probe
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def induction_over_the_head_count(weights, period):
    n = weights.shape[0]  # the number of heads, not of tokens
    total = torch.zeros(weights.shape[0], dtype=torch.float64)
    queries = 0
    for i in range(period, n):
        total += weights[:, i, i - period + 1].double()
        queries += 1
    return (total / queries).to(weights.dtype)


def test_scores_that_are_nan_everywhere_are_not_said_as_zeros():
    verdict = judged("induction_score", induction_over_the_head_count, seed=0)
    assert not verdict.passed
    assert "every score is 0" not in verdict.diagnosis, verdict.diagnosis
    assert "NaN" in verdict.diagnosis, verdict.diagnosis


def test_a_nan_output_matches_a_model_of_zeros_only_where_it_has_finite_values():
    zeros = np.zeros(3)
    assert np.array_equal(nan_where_empty(zeros, np.array([np.nan, 0.0, 0.0])), zeros)
    assert np.isnan(nan_where_empty(zeros, np.full(3, np.nan))).all()


def rope_on_the_head_count_of_features(x, positions, base=10000.0):
    width = x.shape[1]  # the heads, where x.shape[-1] belongs
    half = width // 2
    pair = torch.arange(half, dtype=torch.float64)
    angles = positions.double()[:, None] * base ** (-2 * pair / width)
    first, second = x[..., :half].double(), x[..., half:width].double()
    turned = torch.cat([first * angles.cos() - second * angles.sin(),
                        first * angles.sin() + second * angles.cos()], -1)
    return torch.cat([turned, x[..., width:].double()], -1).to(x.dtype)


def test_rope_applied_to_the_first_features_only_is_read_back():
    verdict = judged("apply_rope", rope_on_the_head_count_of_features)
    assert not verdict.passed
    assert "only the first" in verdict.diagnosis and "neighbours" not in verdict.diagnosis, \
        verdict.diagnosis


def jacobian_diagonal_without_p(p):
    jacobian = -np.outer(p, p)
    jacobian[np.diag_indices(len(p))] = 1.0 - p  # p_i (1 - p_i) belongs
    return jacobian


def test_the_jacobians_diagonal_is_read_back_as_a_polynomial_in_p():
    verdict = judged("softmax_jacobian", jacobian_diagonal_without_p)
    assert not verdict.passed
    assert "the diagonal holds 1 - p_i" in verdict.diagnosis, verdict.diagnosis


def backward_flops_three_copies(seq_len, head_dim, recompute=True):
    term = seq_len * seq_len * head_dim
    total = 2 * term + 2 * term + 2 * term  # grad_p left out
    return total + (2 * term if recompute else 0)


def test_copies_of_one_term_are_neither_regrouped_nor_reweighted(searching):  # noqa: F811
    repair, verdict = repaired("attention_backward_flops", backward_flops_three_copies)
    assert repair is None or "2 * term + 2 * term" not in repair["old"], repair
    assert not verdict.passed and "missing" in verdict.diagnosis, verdict.diagnosis


@pytest.mark.parametrize("exercise", ["softmax_jacobian", "apply_rope", "induction_score"])
def test_right_answers_still_pass(exercise):
    from tests.checks.answers import lesson03, lesson08, lesson09

    answers = {"softmax_jacobian": lesson03, "apply_rope": lesson09, "induction_score": lesson08}
    for func in answers[exercise].RIGHT[exercise]:
        assert judged(exercise, func).passed, func.__name__
