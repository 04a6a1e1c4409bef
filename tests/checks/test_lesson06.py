"""Lesson 06 checkers: GQA, cache-size and decoding slips are named; correct styles pass; a
decoder that re-projects the prefix is rejected by the work it does, not only by its output."""

import pytest
import torch

from mhalib.checks import exercises_of, get_exercise
from mhalib.checks.lesson06 import decode_flop_budget
from mhalib.checks.torch_exercise import case_tensors, count_flops
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson06 as answers

EXERCISES = exercises_of("06-gqa")
MEASURED = {("decode_with_cache", "recomputes_prefix")}  # judged on FLOPs, not on values


@pytest.mark.parametrize("exercise,mistake,func", h.mistake_params(answers))
def test_realistic_mistake_is_rejected_and_named(exercise, mistake, func):
    h.assert_named(exercise, func, mistake)


@pytest.mark.parametrize("exercise,func", h.right_params(answers))
def test_differently_written_correct_answer_passes(exercise, func):
    h.assert_accepted(exercise, func)


@pytest.mark.parametrize("exercise,mistake", [
    p for p in h.model_params(EXERCISES) if tuple(p.values) not in MEASURED])
def test_every_mistake_model_is_reachable(exercise, mistake):
    h.assert_model_detectable(exercise, mistake)
    h.assert_model_cannot_pass(exercise, mistake)


@pytest.mark.parametrize("exercise,func", h.answer_key_params(answers))
def test_calling_mhalib_answer_scores_zero(exercise, func):
    h.assert_answer_key_refused(exercise, func)


@pytest.mark.parametrize("exercise,func", h.broken_params(answers))
def test_numpy_output_is_refused(exercise, func):
    verdict = h.verdict_of(exercise, func, seed=0)
    assert not verdict.passed
    assert "torch.Tensor" in " ".join(verdict.details)


@pytest.mark.parametrize("exercise", EXERCISES)
def test_replaced_numpy_comparison_scores_zero(exercise, monkeypatch):
    h.assert_tampering_refused(exercise, answers.RIGHT[exercise][0], monkeypatch)


@pytest.mark.parametrize("exercise", EXERCISES)
def test_grading_suite_is_fast(exercise):
    h.assert_fast(exercise, answers.RIGHT[exercise][0], limit_s=2.0)


def test_decoder_that_reruns_the_layer_is_named_too():
    h.assert_named("decode_with_cache", answers.decode_reruns_layer, "recomputes_prefix")


def test_flop_budget_separates_cache_from_recompute_on_every_case():
    checker = get_exercise("decode_with_cache")
    for case in checker.cases(0, "grading"):
        args, _ = case_tensors(case)
        if args[0].shape[1] < 4:
            continue
        cached = count_flops(answers.decode_preallocated, *args)[1]
        masked = count_flops(answers.decode_fused_qkv_masked_cache, *args)[1]
        wasteful = count_flops(answers.decode_reprojects_prefix, *args)[1]
        budget = decode_flop_budget(case)
        assert cached <= budget and masked <= budget < wasteful, case.label


def test_flop_counter_sees_sdpa_on_cpu():
    q = torch.randn(1, 2, 8, 4)
    _, flops = count_flops(torch.nn.functional.scaled_dot_product_attention, q, q, q)
    assert flops == 2 * 2 * 2 * 8 * 8 * 4  # q k^T and weights v, 2 FLOPs per multiply-add


def test_cases_cover_mha_mqa_and_half_precision():
    labels = " ".join(c.label for c in get_exercise("grouped_query_attention").cases(0, "hidden"))
    assert "MHA" in labels and "MQA" in labels and "float16" in labels and "float64" in labels
    dtypes = {c.dtype for c in get_exercise("repeat_kv").cases(0, "hidden")}
    assert {"float32", "float64", "float16", "bfloat16"} <= dtypes
