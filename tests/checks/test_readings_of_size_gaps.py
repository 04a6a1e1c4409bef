"""Readings added after round AE (issue 22), each with a slip written here, apart from the
catalogue that found its kind: a size that is the right one less another of the case's sizes
(an offset passed where a library call takes a size), read on a case whose sizes say it rather
than on one where the gap comes out 0."""

from __future__ import annotations

import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.explain_shapes import shape_reading
from mhalib.checks.probe import probe


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def causal_mask_with_gap_for_columns(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q
    return torch.ones(n_q, offset, dtype=torch.bool).tril(offset).numpy()  # (n_q, offset)


def test_a_size_that_is_the_gap_between_two_sizes_is_said_as_that_gap():
    verdict = judged("causal_mask", causal_mask_with_gap_for_columns)
    assert not verdict.passed
    assert "= n_k - n_q: the gap between two sizes" in verdict.diagnosis, verdict.diagnosis
    # (read where n_k differs from n_q: on a square case the gap is an axis of 0 entries)
    assert "has 0 where" not in verdict.diagnosis, verdict.diagnosis


def test_a_size_that_is_no_gap_is_not_said_as_one():
    _, said = shape_reading((4, 7), (4, 3), "the output", {"n_q": 4, "n_k": 7})
    assert "3 = n_k - n_q" in said
    _, said = shape_reading((4, 7), (4, 5), "the output", {"n_q": 4, "n_k": 7})
    assert " - " not in said, said
    # (the gap must be the right size less another: 3 = 7 - 4 is not a gap of want = 9)
    _, said = shape_reading((4, 9), (4, 3), "the output", {"n_q": 4, "n_k": 7})
    assert "n_k - n_q" not in said, said
