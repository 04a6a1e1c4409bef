"""Lesson 12 answer key against torch.autograd in float64 (the oracle), and the blocked backward
against the dense one: values, memory shape, FLOPs counted by FlopCounterMode, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from mhalib.reference import (
    attention_backward,
    flash_attention_backward,
    softmax_backward,
    softmax_jacobian,
)
from mhalib.viz.lesson12 import attention_with_lse
from tests.largest_tensor import LargestTensor


def _bottom_right(n_q, n_k):
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)


def autograd_gradients(q, k, v, grad_out, causal=False):
    """The oracle: torch.autograd through F.scaled_dot_product_attention (float64), with the
    bottom-right mask; rows that see no key are dropped from the graph (SDPA gives them NaN),
    which is what "contributes no gradient" means."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    mask = _bottom_right(n_q, n_k) if causal else torch.ones(n_q, n_k, dtype=torch.bool)
    live = mask.any(-1)  # queries that see at least one key
    out = F.scaled_dot_product_attention(leaves[0][..., live, :], leaves[1], leaves[2],
                                         attn_mask=mask[live])
    out.backward(grad_out[..., live, :])
    return tuple(t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves)


# -- softmax_backward --------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), seed=st.integers(0, 10**6))
def test_softmax_backward_is_autograds_gradient(shape, seed):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(shape, generator=gen, dtype=torch.float64)
    weights = torch.softmax(logits, -1)
    weights.backward(grad)
    torch.testing.assert_close(softmax_backward(weights.detach(), grad), logits.grad)


def test_softmax_backward_is_the_jacobian_of_lesson_03_applied_to_a_vector():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(9))
    g = rng.normal(size=9)
    by_jacobian = softmax_jacobian(p) @ g  # lesson 03's (n, n) matrix
    mine = softmax_backward(torch.tensor(p), torch.tensor(g)).numpy()
    np.testing.assert_allclose(mine, by_jacobian, rtol=1e-12, atol=1e-15)


def test_a_fully_masked_row_gives_zeros_and_keeps_the_dtype():
    weights = torch.softmax(torch.randn(3, 5), -1)
    weights[1] = 0.0
    grad = torch.randn(3, 5)
    out = softmax_backward(weights.to(torch.bfloat16), grad.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16 and torch.equal(out[1].float(), torch.zeros(5))


# -- attention_backward ------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(1, 9), n_k=st.integers(1, 9), d=st.integers(1, 6), d_v=st.integers(1, 5),
       causal=st.booleans(), seed=st.integers(0, 10**6))
def test_attention_backward_is_autograds_gradient(n_q, n_k, d, d_v, causal, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 2, n_q, d, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 2, n_k, d, generator=gen, dtype=torch.float64)
    v = torch.randn(2, 2, n_k, d_v, generator=gen, dtype=torch.float64)
    grad_out = torch.randn(2, 2, n_q, d_v, generator=gen, dtype=torch.float64)
    mine = attention_backward(q, k, v, grad_out, causal)
    for got, want in zip(mine, autograd_gradients(q, k, v, grad_out, causal)):
        torch.testing.assert_close(got, want)


def test_queries_that_see_no_key_contribute_nothing():
    q, k, v, g = (torch.randn(1, 6, 4, dtype=torch.float64) for _ in range(4))
    k, v = k[:, :3], v[:, :3]  # 6 queries over 3 keys: queries 0..2 see nothing
    grad_q, grad_k, grad_v = attention_backward(q, k, v, g, causal=True)
    assert torch.equal(grad_q[:, :3], torch.zeros(1, 3, 4, dtype=torch.float64))
    changed = g.clone()
    changed[:, :3] = 1e6  # their upstream gradient changes nothing
    again = attention_backward(q, k, v, changed, causal=True)
    for a, b in zip((grad_q, grad_k, grad_v), again):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_attention_backward_keeps_the_dtype(dtype):
    q, k, v, g = (torch.randn(1, 2, 5, 4, dtype=dtype) for _ in range(4))
    assert all(t.dtype == dtype for t in attention_backward(q, k, v, g, causal=True))


def test_attention_with_lse_is_sdpa_and_logsumexp():
    q, k, v = (torch.randn(2, 3, 7, 5, dtype=torch.float64) for _ in range(3))
    out, lse = attention_with_lse(q, k, v, causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(5)).masked_fill(~_bottom_right(7, 7), -math.inf)
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))


# -- flash_attention_backward ------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), block=st.integers(1, 24), d=st.integers(1, 8),
       causal=st.booleans(), seed=st.integers(0, 10**6))
def test_flash_backward_equals_autograd_for_any_block_size(n, block, d, causal, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k, v, g = (torch.randn(2, 2, n, d, generator=gen, dtype=torch.float64)
                  for _ in range(4))
    out, lse = attention_with_lse(q, k, v, causal)
    mine = flash_attention_backward(q, k, v, out, lse, g, block_size=block, causal=causal)
    for got, want in zip(mine, autograd_gradients(q, k, v, g, causal)):
        torch.testing.assert_close(got, want)


def test_flash_backward_handles_rows_with_no_key():
    q, g = torch.randn(1, 1, 6, 4), torch.randn(1, 1, 6, 4)
    k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    out, lse = attention_with_lse(q, k, v, causal=True)
    assert torch.isneginf(lse[0, 0, :3]).all()
    mine = flash_attention_backward(q, k, v, out, lse, g, block_size=2, causal=True)
    for got, want in zip(mine, attention_backward(q, k, v, g, causal=True)):
        assert not torch.isnan(got).any()
        torch.testing.assert_close(got, want)


def test_delta_from_out_is_the_row_term_of_the_softmax_gradient():
    q, k, v, g = (torch.randn(2, 2, 9, 4, dtype=torch.float64) for _ in range(4))
    out, _ = attention_with_lse(q, k, v)
    p = torch.softmax(q @ k.transpose(-2, -1) / 2.0, -1)
    grad_p = g @ v.transpose(-2, -1)
    torch.testing.assert_close((g * out).sum(-1), (grad_p * p).sum(-1))


def test_flash_backward_never_builds_an_n_by_n_tensor():
    n, block, d = 256, 32, 16
    q, k, v, g = (torch.randn(1, 2, n, d) for _ in range(4))
    out, lse = attention_with_lse(q, k, v, causal=True)
    with LargestTensor() as probe:
        flash_attention_backward(q, k, v, out, lse, g, block_size=block, causal=True)
    assert probe.largest <= 2 * n * max(block, d)
    with LargestTensor() as dense:
        attention_backward(q, k, v, g, causal=True)
    assert dense.largest == 2 * n * n


def _counted(fn, *args, **kwargs) -> int:
    counter = FlopCounterMode(display=False)
    with counter:
        fn(*args, **kwargs)
    return counter.get_total_flops()


@pytest.mark.parametrize("n,d,block", [(128, 16, 32), (96, 8, 40), (64, 32, 64)])
def test_flash_backward_spends_one_recomputation(n, d, block):
    """Five products per block: 10 N^2 d FlopCounterMode FLOPs per head (dense)."""
    q, k, v, g = (torch.randn(1, 3, n, d) for _ in range(4))
    out, lse = attention_with_lse(q, k, v)
    flops = _counted(flash_attention_backward, q, k, v, out, lse, g, block_size=block)
    assert flops == 10 * 3 * n * n * d
    assert _counted(attention_backward, q, k, v, g) == 10 * 3 * n * n * d  # it builds p too


# -- errors ------------------------------------------------------------------------------------
def test_bad_arguments_are_named():
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(TypeError, match="weights must be a torch.Tensor"):
        softmax_backward(np.ones(3), torch.ones(3))
    with pytest.raises(ValueError, match=r"grad_weights.shape=\(3,\)"):
        softmax_backward(torch.ones(4), torch.ones(3))
    with pytest.raises(ValueError, match=r"grad_out.shape=\(1, 2, 4, 3\)"):
        attention_backward(q, q, q, torch.randn(1, 2, 4, 3))
    with pytest.raises(TypeError, match="causal must be a bool"):
        attention_backward(q, q, q, q, causal=1)
    out, lse = attention_with_lse(q, q, q)
    with pytest.raises(ValueError, match="block_size must be positive, got block_size=0"):
        flash_attention_backward(q, q, q, out, lse, q, block_size=0)
    with pytest.raises(ValueError, match=r"lse.shape=\(1, 2, 4, 1\)"):
        flash_attention_backward(q, q, q, out, lse[..., None], q)
    with pytest.raises(ValueError, match="q must have 4 dimensions"):
        flash_attention_backward(q[0], q[0], q[0], out[0], lse[0], q[0])
    with pytest.raises(TypeError, match="grad_out.dtype=torch.float64"):
        attention_backward(q, q, q, q.double())
