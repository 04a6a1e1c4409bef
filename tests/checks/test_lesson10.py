"""Lesson 10 checkers: cache-count, MLA and absorption slips are named; correct styles pass;
outputs that leave torch (or are not a pair of tensors) are refused with a reason."""

import time

import pytest

from mhalib.checks import check, get_exercise
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson10 as answers

EXERCISES = ("mla_kv_cache_bytes", "mla_attention", "absorb_mla_weights")


def test_every_mistake_model_has_a_learner_style_fixture():
    h.assert_every_mistake_has_a_fixture(answers, EXERCISES)


@pytest.mark.parametrize("exercise,func", h.broken_params(answers))
def test_numpy_output_is_refused(exercise, func):
    verdict = h.verdict_of(exercise, func, seed=0)
    assert not verdict.passed
    assert "torch.Tensor" in " ".join(verdict.details)


def test_untransposed_w_uk_is_named_on_the_visible_suite():
    """It raises where d_c != d_head and is recognised where they are equal (a visible case)."""
    verdict = h.verdict_of("absorb_mla_weights", answers.absorb_no_transpose, seed=3,
                           suite="visible")
    assert "mistake:w_uk_not_transposed" in verdict.flags and "error" in verdict.flags


def test_the_rope_key_slip_is_named_on_the_visible_suite():
    verdict = h.verdict_of("mla_kv_cache_bytes", answers.cache_latent_only, seed=0,
                           suite="visible")
    assert verdict.flags == ["mistake:no_rope_key"]
    assert "RoPE key" in verdict.diagnosis


def test_cases_cover_shapes_dtypes_and_both_mask_settings():
    attention = get_exercise("mla_attention").cases(0, "grading")
    assert {c.dtype for c in attention} >= {"float32", "float64", "float16", "bfloat16"}
    assert {c.kwargs.get("causal", True) for c in attention} == {True, False}
    widths = {(c.args[4].shape[1], c.args[0].shape[-1]) for c in attention}  # (H*d_head, d_model)
    assert any(width != d_model for width, d_model in widths)
    absorb = get_exercise("absorb_mla_weights").cases(0, "visible")
    d_c, d_head = absorb[1].args[0].shape[0], absorb[1].args[0].shape[1] // absorb[1].args[4]
    assert d_c == d_head  # the untransposed w_uk runs, and is named, in the visible suite
    cache = get_exercise("mla_kv_cache_bytes").cases(0, "visible")
    assert cache[0].args == (61, 512, 64, 1)  # DeepSeek-V3: 70,272 bytes per token
    assert get_exercise("mla_kv_cache_bytes").expected(cache[0]) == 70_272


@pytest.mark.parametrize("exercise", EXERCISES)
def test_visible_check_answers_within_a_second(exercise):
    right = answers.RIGHT[exercise][0]
    start = time.perf_counter()
    assert check(exercise, right, quiet=True).passed
    assert time.perf_counter() - start < 1.0
