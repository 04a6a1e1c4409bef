"""Lesson 08 checkers: diagonal slips in the head scores are named, correct styles pass."""

import numpy as np

from mhalib.checks.lesson08 import induction_patterns, planted_patterns


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
