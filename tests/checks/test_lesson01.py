"""Lesson 01 checkers: realistic mistakes are named, every correct style passes, no shortcuts."""

import numpy as np
import pytest

from mhalib.checks import CheckFailed, check, exercises_of, get_exercise
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson01 as answers

EXERCISES = exercises_of("01-single-head")


def test_every_mistake_model_has_a_fixture():
    h.assert_every_mistake_has_a_fixture(answers, EXERCISES)


@pytest.mark.parametrize("exercise,func", h.broken_params(answers))
def test_exception_names_the_case(exercise, func):
    h.assert_broken_reported(exercise, func)


def test_wrong_scale_message_shows_expected_and_received():
    with pytest.raises(CheckFailed) as info:
        check("attention", answers.attention_no_scale, seed=3, quiet=True)
    text = str(info.value)
    assert "without the 1/sqrt(d_k) scale" in text
    verdict = h.verdict_of("attention", answers.attention_no_scale, seed=3, suite="visible")
    assert any("expected" in d and "got" in d for d in verdict.details)


def test_swapped_outputs_report_the_shapes():
    verdict = h.verdict_of("attention", answers.attention_swapped, seed=0, suite="visible")
    assert any("expected shape" in d and "got shape" in d for d in verdict.details)


def test_visible_suite_already_covers_the_main_traps():
    # a learner gets the 1e4 overflow and the axis argument in the visible test cell
    labels = " ".join(c.label for c in get_exercise("softmax").cases(0, "visible"))
    assert "1e4" in labels and "axis=0" in labels
    for mistake in ("no_max_shift", "ignores_axis", "sum_no_keepdims"):
        verdict = h.verdict_of("softmax", answers.WRONG["softmax"][mistake], 0, "visible")
        assert f"mistake:{mistake}" in verdict.flags


def test_cases_cover_the_contract_edge_cases():
    shapes = [tuple(a.shape for a in c.args) for c in get_exercise("attention").cases(0, "hidden")]
    assert any(s[0][-2] != s[1][-2] for s in shapes)  # N_q != N_k
    assert any(s[1][-1] != s[2][-1] for s in shapes)  # d_v != d_k
    assert any(len(s[0]) >= 4 for s in shapes)  # extra batch dims
    softmax_cases = get_exercise("softmax").cases(0, "hidden")
    assert any(np.isneginf(c.args[0]).any() for c in softmax_cases)
    assert any(np.abs(c.args[0]).max() >= 1e4 for c in softmax_cases)
    assert any(c.kwargs.get("axis", -1) not in (-1,) for c in softmax_cases)


def test_cases_are_fresh_per_seed_and_reproducible():
    softmax = get_exercise("softmax")
    first, again, other = (softmax.cases(s, "visible")[0].args[0] for s in (1, 1, 2))
    assert np.array_equal(first, again) and not np.array_equal(first, other)


def test_patching_numpy_during_the_call_scores_zero():
    genuine_abs = np.abs

    def attention(q, k, v):
        np.abs = lambda x, *a, **kw: genuine_abs(x) * 0  # every difference looks like 0
        return np.zeros(q.shape[:-1] + v.shape[-1:]), np.zeros(q.shape[:-1] + k.shape[-2:-1])

    try:
        with pytest.raises(CheckFailed, match="altered this kernel while it ran"):
            check("attention", attention, quiet=True)
    finally:
        np.abs = genuine_abs
