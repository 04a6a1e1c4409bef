"""Lesson 04 checkers: mask slips (off by one, inverted, misaligned, NaN rows) are named."""

import numpy as np
import pytest

from mhalib.checks import exercises_of, get_exercise
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson04 as answers

EXERCISES = exercises_of("04-masks")


def test_every_mistake_model_has_a_fixture():
    h.assert_every_mistake_has_a_fixture(answers, EXERCISES)


def test_cases_cover_cache_alignment_and_empty_rows():
    causal = get_exercise("causal_mask").cases(0, "hidden")
    assert any(len(c.args) > 1 and c.args[0] < c.args[1] for c in causal)  # N_q < N_k
    assert any(len(c.args) > 1 and c.args[0] > c.args[1] for c in causal)  # N_q > N_k
    masked = get_exercise("masked_attention").cases(0, "hidden")
    empty = [c for c in masked
             if not np.broadcast_to(c.args[3], c.args[0].shape[:-2] + (c.args[0].shape[-2],
                                                                       c.args[1].shape[-2]))
             .any(axis=-1).all()]
    assert len(empty) >= 2  # fully masked rows, in the visible and hidden suites
    assert any(c.args[3].ndim == 1 for c in masked)  # a mask that must broadcast


@pytest.mark.parametrize("func", [answers.masked_nan, answers.masked_inverted_naive])
def test_nan_rows_are_reported_with_their_position(func):
    verdict = h.verdict_of("masked_attention", func, 0, "visible")
    assert any("contains NaN" in d for d in verdict.details)


def test_visible_cell_already_names_the_top_left_causal_mask():
    verdict = h.verdict_of("causal_mask", answers.causal_top_left, 0, "visible")
    assert "mistake:top_left" in verdict.flags and "n_k - n_q" in verdict.diagnosis


def test_flat_padding_mask_reports_the_expected_shape():
    verdict = h.verdict_of("padding_mask", answers.padding_flat, 0, "visible")
    assert any("expected shape (3, 1, 1, 5), got shape (3, 5)" in d for d in verdict.details)
