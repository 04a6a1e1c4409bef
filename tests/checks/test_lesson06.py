"""Lesson 06 checkers: GQA, cache-size and decoding slips are named; correct styles pass; a
decoder that re-projects the prefix is rejected by the work it does, not only by its output."""

import pytest
import torch

from mhalib.checks import get_exercise
from mhalib.checks.lesson06 import decode_flop_budget
from mhalib.checks.torch_exercise import case_tensors
from mhalib.checks.work import count_flops
from tests.checks import lesson_harness as h
from tests.checks.answers import lesson06 as answers


@pytest.mark.parametrize("exercise,func", h.broken_params(answers))
def test_numpy_output_is_refused(exercise, func):
    verdict = h.verdict_of(exercise, func, seed=0)
    assert not verdict.passed
    assert "torch.Tensor" in " ".join(verdict.details)


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
