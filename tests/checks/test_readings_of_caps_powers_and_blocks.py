"""Readings added after round W (issue 22), each with a slip written here, apart from the
catalogue that found its kind: logits capped instead of shifted, a variance that grows as the
wrong power of d_k, an output computed in float16, a reshape of an empty tensor with -1, the
last, shorter block of keys skipped in a flash backward pass, a head score cast to float32
before it is read back, and a factor undone at one operand of a place where another may be
the slip. Each must be named, and none may be said of a right answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.probe import probe
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def softmax_capped_at_eighty(x, axis=-1):
    e = np.exp(np.minimum(np.maximum(x, -80.0), 80.0))  # "keeps exp finite"
    return e / np.sum(e, axis=axis, keepdims=True)


def test_logits_clipped_instead_of_shifted_are_said_clipped():
    verdict = judged("softmax", softmax_capped_at_eighty)
    assert not verdict.passed
    assert "clipped to [-" in verdict.diagnosis and "subtract the maximum" in verdict.diagnosis, \
        verdict.diagnosis


def variance_of_scaled_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k)) * math.sqrt(d_k)  # std sqrt(d_k), not 1
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.einsum("nd,nd->n", q, k)))


def test_a_variance_that_grows_as_d_k_squared_says_the_power():
    verdict = judged("dot_product_variance", variance_of_scaled_draws)
    assert not verdict.passed
    assert "grows as d_k^2" in verdict.diagnosis, verdict.diagnosis


def rope_angles_in_float16(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float16) / head_dim
    return positions.to(torch.float16)[:, None] * base ** -exponents


def test_an_output_computed_in_float16_is_said_so():
    verdict = judged("rope_angles", rope_angles_in_float16)
    assert not verdict.passed
    assert "is float16" in verdict.diagnosis, verdict.diagnosis


def repeat_kv_reshaped_with_minus_one(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, -1, n, d)


def test_a_reshape_of_an_empty_tensor_with_minus_one_is_explained():
    verdict = judged("repeat_kv", repeat_kv_reshaped_with_minus_one)
    assert not verdict.passed
    assert "cannot infer the size written -1" in verdict.diagnosis, verdict.diagnosis


def flash_backward_whole_blocks_only(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    d, n_q, n_k, dtype = q.shape[-1], q.shape[-2], k.shape[-2], q.dtype
    work = torch.promote_types(q.dtype, torch.float32)
    q, k, v = q.to(work), k.to(work), v.to(work)
    out, grad_out, lse = out.to(work), grad_out.to(work), lse.to(work)[..., None]
    delta = (grad_out * out).sum(-1, keepdim=True)  # (B, H, N_q, 1)
    grad_q, grad_k, grad_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    rows = torch.arange(n_q)[:, None] + (n_k - n_q)
    for block in range(n_k // block_size):  # the last, shorter block is never visited
        cols = slice(block * block_size, (block + 1) * block_size)
        s = q @ k[..., cols, :].transpose(-1, -2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(n_k)[cols][None, :] > rows, float("-inf"))
        p = torch.exp(s - lse).nan_to_num(0.0)
        grad_v[..., cols, :] = p.transpose(-1, -2) @ grad_out
        grad_s = p * (grad_out @ v[..., cols, :].transpose(-1, -2) - delta)
        grad_q += grad_s @ k[..., cols, :] / math.sqrt(d)
        grad_k[..., cols, :] = grad_s.transpose(-1, -2) @ q / math.sqrt(d)
    return tuple(t.to(dtype) for t in (grad_q, grad_k, grad_v))


def test_a_backward_pass_that_skips_the_last_shorter_block_is_said_so():
    verdict = judged("flash_attention_backward", flash_backward_whole_blocks_only, seed=0)
    assert not verdict.passed
    assert "last, shorter block" in verdict.diagnosis, verdict.diagnosis


def previous_token_block_in_float32(weights):
    return weights[:, 1:, :-1].to(torch.float32).mean(dim=(1, 2))  # every earlier entry


def test_a_head_score_cast_to_float32_is_still_read_back():
    verdict = judged("previous_token_score", previous_token_block_in_float32)
    assert not verdict.passed
    assert "read back from your output" in verdict.diagnosis and "whole block" in \
        verdict.diagnosis, verdict.diagnosis


def rope_exponent_over_the_half_width(x, positions, base=10000.0):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head_dim={d} is odd")
    half = d // 2
    pair = torch.arange(half, dtype=torch.float64)
    angles = positions.double()[:, None] * base ** (-2 * pair / half)  # / d belongs
    first, second = x[..., :half].double(), x[..., half:].double()
    cos, sin = angles.cos(), angles.sin()
    return torch.cat([first * cos - second * sin, first * sin + second * cos], -1).to(x.dtype)


def test_a_number_changed_where_another_operand_also_mends_says_both(searching):  # noqa: F811
    repair, verdict = repaired("apply_rope", rope_exponent_over_the_half_width)
    assert repair is not None and not verdict.passed, verdict.diagnosis
    assert "in either of two ways" in verdict.diagnosis, verdict.diagnosis
    assert "/ d`" in verdict.diagnosis and "-1 * pair / half" in verdict.diagnosis


def softmax_shifted(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def variance_of_standard_draws(d_k, n_samples=100_000, seed=0):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n_samples, d_k))
    return float(np.var((q * k).sum(-1)))


@pytest.mark.parametrize(("exercise", "func"), [("softmax", softmax_shifted),
                                                ("dot_product_variance",
                                                 variance_of_standard_draws)])
def test_right_answers_pass(exercise, func):
    verdict = judged(exercise, func)
    assert verdict.passed, verdict.diagnosis


def previous_token_mean_over_heads(weights):
    diagonal = torch.diagonal(weights, offset=-1, dim1=1, dim2=2)  # (H, N - 1)
    return diagonal.mean(dim=0)  # over the heads


def rope_exponent_with_its_sign_dropped(positions, head_dim, base=10000.0):
    if head_dim % 2:
        raise ValueError(f"head_dim={head_dim} is odd")
    pair = torch.arange(head_dim // 2, dtype=torch.float64)
    return (positions.double()[:, None] * base ** (2 * pair / head_dim)).float()


@pytest.mark.parametrize(("exercise", "func"), [
    ("previous_token_score", previous_token_mean_over_heads),  # an axis: 1 or -1, one change
    ("rope_angles", rope_exponent_with_its_sign_dropped),  # a sign: not another operand's
])
def test_a_number_that_is_no_factor_of_the_place_is_said_alone(searching, exercise,  # noqa: F811
                                                               func):
    repair, verdict = repaired(exercise, func)
    assert repair is not None and not verdict.passed, verdict.diagnosis
    assert "either of two ways" not in verdict.diagnosis, verdict.diagnosis


def test_the_causality_probe_finds_the_first_step_that_read_a_later_token():
    from mhalib.checks.causality import first_step_reading_the_last_token

    x = torch.randn(2, 5, 4)

    def causal(x):
        return x.cumsum(dim=1)  # step t reads tokens 0..t

    def peeks(x):
        return x.cumsum(dim=1) + x[:, -1:]  # every step reads the last token

    assert first_step_reading_the_last_token(causal, causal(x), (x,), {}) is None
    assert first_step_reading_the_last_token(peeks, peeks(x), (x,), {}) == 0
