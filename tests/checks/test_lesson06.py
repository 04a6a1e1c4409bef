"""Lesson 06 checkers: GQA, cache-size and decoding slips are named; correct styles pass; a
decoder that re-projects the prefix, never decodes (one causal pass, or every token projected
first) or hides its work in numpy is rejected by what the probe sees, not only by its output."""

import pytest
import torch

from mhalib.checks import get_exercise
from mhalib.checks.lesson06 import decode_flop_budget, projection_tokens
from mhalib.checks.torch_exercise import case_tensors
from mhalib.checks.work import count_flops, watch_products
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


def test_decoder_that_projects_every_token_first_is_named():
    h.assert_named("decode_with_cache", answers.decode_project_first,
                   "projects_all_tokens_at_once")


@pytest.mark.parametrize("sidestep,mistake,words", [
    (answers.decode_single_causal_pass, "projects_all_tokens_at_once", "single causal pass"),
    (answers.decode_project_first, "projects_all_tokens_at_once", "before the loop"),
    (answers.decode_numpy_prefix, "leaves_torch", "numpy"),
], ids=["single_causal_pass", "project_first", "numpy_prefix"])
def test_sidesteps_of_the_work_check_are_rejected_by_name(sidestep, mistake, words):
    """Work outside torch, or no decoding at all, gives the right numbers (and no extra torch
    FLOPs); the probe sees it all the same and says which."""
    verdict = h.verdict_of("decode_with_cache", sidestep, seed=3, suite="visible")
    assert not verdict.passed and f"mistake:{mistake}" in verdict.flags, verdict.diagnosis
    assert words in verdict.diagnosis


def test_projections_take_one_token_per_sequence_in_right_answers_only():
    checker = get_exercise("decode_with_cache")
    for case in checker.cases(0, "grading"):
        args, _ = case_tensors(case)
        batch, n, d_model = args[0].shape
        for right in (answers.decode_preallocated, answers.decode_fused_qkv_masked_cache,
                      answers.decode_growing_cat):
            _, watch = watch_products(right, *args)
            assert projection_tokens(watch.products, d_model) == batch, (case.label, right)
        _, watch = watch_products(answers.decode_single_causal_pass, *args)
        assert projection_tokens(watch.products, d_model) == batch * n, case.label


def test_product_watch_counts_the_flops_of_torchs_counter():
    from mhalib.accounting.flop_counter import count_flops as torch_counter

    checker = get_exercise("decode_with_cache")
    for case in checker.cases(1, "visible"):
        args, _ = case_tensors(case)
        for func in (answers.decode_preallocated, answers.decode_reruns_layer):
            assert count_flops(func, *args)[1] == torch_counter(func, *args).total


def test_printing_inside_a_measured_call_is_allowed():
    def chatty(*args):
        print(args[0][0, 0, :3], f"{args[0].sum():.2f}")
        return answers.decode_preallocated(*args)

    h.assert_accepted("decode_with_cache", chatty, seeds=(0,))


def test_first_visible_decode_check_is_instant():
    from tests.checks.test_lesson07 import first_check_in_fresh_process

    measured = first_check_in_fresh_process("decode_with_cache")
    assert not measured["dynamo"]
    assert measured["cpu"] < 0.8, measured


def _conv_projection(t, w):
    """t @ w as a width-1 convolution over the tokens (no matrix product op)."""
    out = torch.nn.functional.conv1d(t.transpose(1, 2), w.T.unsqueeze(-1))
    return out.transpose(1, 2)


def decode_project_first_by_conv1d(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Every token projected before the loop, as a convolution (attack catalogue:
    work-decode-conv1d); the output projection per step stays a product."""
    split = answers._split
    q_all = split(_conv_projection(x, w_q), num_heads)
    k_all = split(_conv_projection(x, w_k), num_kv_heads)
    v_all = split(_conv_projection(x, w_v), num_kv_heads)
    outs = []
    for t in range(x.shape[1]):
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            q_all[:, :, t:t + 1], k_all[:, :, :t + 1], v_all[:, :, :t + 1], enable_gqa=True))
    return answers._merge(torch.cat(outs, dim=2)) @ w_o


def test_projections_written_as_a_convolution_are_seen():
    _, watch = watch_products(torch.nn.functional.conv1d, torch.ones(2, 8, 5),
                              torch.ones(3, 8, 1))
    assert watch.products == [("convolution", 2, 5, 8, 3)]
    h.assert_named("decode_with_cache", decode_project_first_by_conv1d,
                   "projects_all_tokens_at_once")


def decode_keys_never_written(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """The values are written to the zeroed cache, the keys never: every score is 0."""
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d = d_model // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(b, num_kv_heads, n, d, dtype=x.dtype)
    v_cache = torch.zeros(b, num_kv_heads, n, d, dtype=x.dtype)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(b, 1, num_heads, d).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(b, 1, num_kv_heads, d).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        w = torch.softmax(q @ k.transpose(-2, -1) / d ** 0.5, dim=-1)
        outs.append((w @ v).transpose(1, 2).reshape(b, 1, d_model) @ w_o)
    return torch.cat(outs, dim=1)


def test_uniform_weights_in_every_head_also_name_keys_that_are_all_equal():
    """The sentence audit: a cache slot never written gives every head the same (uniform)
    weights, which the same-weights reading put down only to combined heads."""
    verdict = h.verdict_of("decode_with_cache", decode_keys_never_written, seed=0)
    assert "weights:same_for_all_heads" in verdict.flags, verdict.diagnosis
    assert "cache slots that were never written" in verdict.diagnosis
