"""The item statistics against a hand-worked example and against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mhalib.classroom.report.statistics import (
    facility,
    group_size,
    group_weights,
    point_biserial,
    upper_group_counts,
    upper_lower_index,
)

# Hand-worked: five students, item right for 1, 2, 4 and 5; rest scores 10, 7, 2.5, 4, 4.
RIGHT = [1, 1, 0, 1, 1]
REST = [10, 7, 2.5, 4, 4]


def test_hand_worked_point_biserial():
    # p = 4/5; M1 = (10 + 7 + 4 + 4) / 4 = 6.25; M0 = 2.5; mean = 5.5; deviations 4.5, 1.5,
    # -3, -1.5, -1.5: sum of squares 36, variance 36/5 = 7.2, s = sqrt(7.2);
    # r = (6.25 - 2.5) / sqrt(7.2) * sqrt(0.8 * 0.2) = 3.75 * 0.4 / 2.683282 = 0.559017
    assert facility(RIGHT) == 0.8
    assert point_biserial(RIGHT, REST) == pytest.approx(3.75 * 0.4 / np.sqrt(7.2), abs=1e-12)
    assert point_biserial(RIGHT, REST) == pytest.approx(0.5590169943749475, abs=1e-12)


def test_hand_worked_upper_lower_index():
    # n = 5: groups of round(0.27 * 5) = round(1.35) = 1. Upper: the rest score 10 (right),
    # lower: 2.5 (wrong): D = 1 - 0 = 1.
    assert group_size(5) == 1
    assert upper_lower_index(RIGHT, REST) == 1.0


def test_ties_at_the_edge_share_the_places():
    # n = 11: groups of round(2.97) = 3. Upper: 9 (right), then 8, 8, 8 tied for 2 places:
    # each counts 2/3; of those only the first is right: p_U = (1 + 2/3) / 3 = 5/9.
    # Lower: 0, 1 (both wrong), then 3, 3 tied for 1 place, one right: p_L = (1/2) / 3 = 1/6.
    rest = [9, 8, 8, 8, 5, 5, 4, 3, 3, 1, 0]
    right = [1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0]
    upper = group_weights(rest, upper=True)
    assert upper.tolist() == pytest.approx([1, 2 / 3, 2 / 3, 2 / 3, 0, 0, 0, 0, 0, 0, 0])
    lower = group_weights(rest, upper=False)
    assert lower.tolist() == pytest.approx([0, 0, 0, 0, 0, 0, 0, 0.5, 0.5, 1, 1])
    assert upper_lower_index(right, rest) == pytest.approx(5 / 9 - 1 / 6)
    # the roster's order does not matter
    order = np.random.default_rng(0).permutation(11)
    assert upper_lower_index(np.array(right)[order], np.array(rest)[order]) == pytest.approx(
        5 / 9 - 1 / 6)


def test_upper_lower_index_against_an_independent_count():
    # no ties: the index is the plain Kelley index over the top and bottom g students
    rng = np.random.default_rng(3)
    for n in (7, 20, 100, 333):
        rest = rng.permutation(n).astype(float) + rng.random()
        right = (rng.random(n) < 0.3 + 0.4 * rest / n).astype(int)
        g = int(round(0.27 * n)) or 1
        order = np.argsort(rest)
        expected = right[order[-g:]].mean() - right[order[:g]].mean()
        assert upper_lower_index(right, rest) == pytest.approx(expected)


def test_point_biserial_matches_scipy():
    rng = np.random.default_rng(7)
    for n in (5, 12, 60, 500):
        rest = rng.normal(20, 5, size=n).round(1)
        right = (rest + rng.normal(0, 6, size=n) > 20).astype(int)
        if 0 < right.sum() < n:
            expected = stats.pointbiserialr(right, rest).statistic
            assert point_biserial(right, rest) == pytest.approx(expected, abs=1e-12)
    expected = stats.pointbiserialr(RIGHT, REST).statistic
    assert point_biserial(RIGHT, REST) == pytest.approx(expected, abs=1e-12)


def test_undefined_cases_are_none():
    assert point_biserial([1, 1, 1], [1, 2, 3]) is None  # everybody right
    assert point_biserial([0, 0], [1, 2]) is None  # nobody right
    assert point_biserial([1, 0, 1], [4, 4, 4]) is None  # no spread in rest scores
    assert point_biserial([1], [3]) is None
    assert upper_lower_index([1], [3]) is None
    assert facility([]) is None


def test_a_question_the_strong_get_wrong_has_negative_indices():
    rest = list(range(10))
    right = [1] * 5 + [0] * 5  # the weaker half right
    assert point_biserial(right, rest) < 0
    assert upper_lower_index(right, rest) == -1.0


def test_upper_group_counts_weigh_ties():
    # n = 4: one place; the two best tie, so each counts 1/2
    assert upper_group_counts(["a", "b", "c", "a"], [5, 5, 1, 0]) == {"a": 0.5, "b": 0.5}


def test_mismatched_lengths_and_bad_fraction_are_named():
    with pytest.raises(ValueError, match="right has 2 entries and rest has 3"):
        point_biserial([1, 0], [1, 2, 3])
    with pytest.raises(ValueError, match="fraction=0.7"):
        group_size(10, 0.7)
