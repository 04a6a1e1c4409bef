"""Lesson 07 answer key: online_softmax_attention against SDPA, and its memory shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.reference import online_softmax_attention
from tests.largest_tensor import LargestTensor

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _oracle(q, k, v, causal):
    n_q, n_k = q.shape[2], k.shape[2]
    if not causal:
        return F.scaled_dot_product_attention(q, k, v)
    mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.masked_fill(~mask.any(-1, keepdim=True), 0.0)


@settings(max_examples=40, deadline=None)
@given(
    n_q=st.integers(1, 20),
    n_k=st.integers(1, 20),
    block=st.integers(1, 24),
    d=st.integers(1, 8),
    causal=st.booleans(),
)
def test_matches_sdpa_for_any_block_size(n_q, n_k, block, d, causal):
    q = torch.randn(2, 3, n_q, d, dtype=torch.float64)
    k = torch.randn(2, 3, n_k, d, dtype=torch.float64)
    v = torch.randn(2, 3, n_k, d, dtype=torch.float64)
    out = online_softmax_attention(q, k, v, block_size=block, causal=causal)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out, _oracle(q, k, v, causal))


def test_queries_without_visible_keys_get_zeros():
    q = torch.randn(1, 1, 7, 4)
    k = torch.randn(1, 1, 3, 4)
    out = online_softmax_attention(q, k, k, block_size=2, causal=True)
    assert torch.equal(out[0, 0, :4], torch.zeros(4, 4))  # 4 queries sit before every key
    torch.testing.assert_close(out, _oracle(q, k, k, True))


def test_never_builds_an_n_by_n_tensor():
    n, block = 256, 32
    q, k, v = (torch.randn(1, 2, n, 16) for _ in range(3))
    with LargestTensor() as probe:
        online_softmax_attention(q, k, v, block_size=block, causal=True)
    assert probe.largest <= 2 * n * max(block, 16)  # (B, H, N, block) or (B, H, N, d)
    with LargestTensor() as naive:
        torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    assert naive.largest == 2 * n * n  # the probe does see a score matrix when there is one


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_large_logits(dtype):
    q = torch.full((1, 1, 4, 64), 40.0)  # q.k = 102400: overflows float16 if not scaled first
    k = torch.full((1, 1, 8, 64), 40.0)
    k[..., ::2, :] = -40.0
    v = torch.randn(1, 1, 8, 64)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    out = online_softmax_attention(q.to(dtype), k.to(dtype), v.to(dtype), block_size=3)
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), expected, atol=2e-2, rtol=2e-2)


def test_errors_name_argument_and_value():
    q = torch.randn(1, 2, 5, 4)
    with pytest.raises(ValueError, match="block_size must be positive, got block_size=0"):
        online_softmax_attention(q, q, q, block_size=0)
    with pytest.raises(TypeError, match="block_size must be an int, got block_size=8.0"):
        online_softmax_attention(q, q, q, block_size=8.0)
    with pytest.raises(
        ValueError, match=r"k.shape=\(1, 3, 5, 4\) does not match the expected shape \(1, 2, 5, 4\)"
    ):
        online_softmax_attention(q, torch.randn(1, 3, 5, 4), torch.randn(1, 3, 5, 4))
    with pytest.raises(
        ValueError, match=r"v.shape=\(1, 2, 6, 4\) does not match the expected shape \(1, 2, 5, 4\)"
    ):
        online_softmax_attention(q, q, torch.randn(1, 2, 6, 4))
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got q of type ndarray"):
        online_softmax_attention(q.numpy(), q, q)
    with pytest.raises(TypeError, match="causal must be a bool, got causal=None"):
        online_softmax_attention(q, q, q, causal=None)


@cuda
def test_cuda_matches_sdpa():
    q, k, v = (torch.randn(2, 4, 100, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    out = online_softmax_attention(q, k, v, block_size=32, causal=True)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected, atol=2e-3, rtol=2e-3)
