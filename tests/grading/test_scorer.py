"""Scores decided from records under a rubric: the points each kind of answer earns, and why.

The fixture lesson's ``attention`` is worth 3 points and ``softmax`` 2; the default rubric gives
``no_scale`` 1/3 and ``softmax_over_queries`` nothing.
"""

from __future__ import annotations

from functools import cache

import pytest

from mhalib.grading.assignment import load_assignment
from mhalib.grading.rubric import Rubric, default_rubric, rubric_from_table
from mhalib.grading.scorer import grade_cell_scores, judge_exercise, score_notebook
from tests.grading.answers import lesson01 as answers
from tests.grading.conftest import ASSIGNMENT, SOURCE

SEED = 11
CAPPED = default_rubric().overlaid(rubric_from_table({"unnamed_cap": "1/2"}, "the course rubric",
                                                     "test"))


def _attention(func, rubric: Rubric):
    verdicts = score_notebook_for(
        {"attention": {"generic": answers.record_text("attention", func, SEED)}}, rubric)
    return verdicts["attention"]


@cache
def _model():
    return load_assignment(ASSIGNMENT, SOURCE)[0]


def score_notebook_for(records: dict, rubric: Rubric):
    return score_notebook(_model(), records, {}, {}, rubric)


@pytest.mark.parametrize("func, points, capped_points, flag", [
    (answers.correct, 3.0, 3.0, None),
    (answers.no_scale, 1.0, 1.0, "mistake:no_scale"),
    (answers.no_scale_and_overflow, 1.0, 1.0, "mistake:no_scale"),
    (answers.transposed_scores, 0.0, 0.0, "mistake:softmax_over_queries"),
    (answers.uniform_weights, 0.0, 0.0, "mistake:wrong_scale"),
    (answers.position_weights, 0.0, 0.0, None),  # passes only the single-key case
    (answers.wrong_for_one_query, 0.0, 1.5, None),  # 6 of 7 general cases, capped at 1/2
    (answers.raises, 0.0, 0.0, "call_error"),
], ids=lambda value: getattr(value, "__name__", None))
def test_points_follow_the_diagnosis(func, points, capped_points, flag):
    default = _attention(func, default_rubric())
    assert default.points == pytest.approx(points), default.credit
    assert _attention(func, CAPPED).points == pytest.approx(capped_points)
    if flag:
        assert flag in default.flags
    assert default.passed == (points == 3.0)


def test_the_credit_note_says_why():
    verdict = _attention(answers.no_scale, default_rubric())
    assert "without the 1/sqrt(d_k) scale" in verdict.diagnosis
    assert verdict.credit == ("1 of 3 points, as the course rubric sets for this mistake "
                              "(no_scale).")
    both = _attention(answers.no_scale_and_overflow, default_rubric())
    assert both.credit.startswith("1 of 3 points, as the course rubric sets for this mistake")
    unnamed = _attention(answers.position_weights, CAPPED)
    assert "passed no general case" in unnamed.credit
    capped = _attention(answers.wrong_for_one_query, CAPPED)
    assert capped.credit.startswith("1.5 of 3 points") and "capped at 50%" in capped.credit


def test_points_are_exact_and_cells_follow():
    rubric = default_rubric().overlaid(rubric_from_table(
        {"attention": {"mistakes": {"no_scale": "8/11"}}}, "the course rubric", "test"))
    verdicts = score_notebook_for({"attention": {"generic": answers.record_text(
        "attention", answers.no_scale, SEED)}}, rubric)
    assert verdicts["attention"].points == pytest.approx(3 * 8 / 11, abs=1e-12)
    assert verdicts["attention"].credit.startswith("2.18 of 3 points")
    cells = grade_cell_scores(_model(), verdicts)
    assert cells["test_attention"] == pytest.approx(3 * 8 / 11, abs=1e-12)  # not rounded


def test_unreadable_and_absent_records_score_zero_with_a_reason():
    absent, _ = judge_exercise("softmax", {}, False, "the kernel died", default_rubric())
    assert absent.flags == ["no_record"] and "the kernel died" in absent.diagnosis
    garbage, _ = judge_exercise("softmax", {"generic": "{not json"}, True, None,
                                default_rubric())
    assert garbage.flags == ["bad_record"] and garbage.points == 0
