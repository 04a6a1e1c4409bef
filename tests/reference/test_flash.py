"""Lesson 07 answer key: merge_attention_states against attention over all the keys at once,
online_softmax_attention against SDPA, and its memory shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.reference import merge_attention_states, online_softmax_attention
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


def _partial(q, k, v):
    """(out, lse) of q over the keys k (an empty key set gives zeros and -inf)."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if k.shape[-2] == 0:
        return torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype), torch.full(
            q.shape[:-1], float("-inf"), dtype=q.dtype)
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(1, 6), n_k=st.integers(1, 12), split=st.integers(0, 12),
       d=st.integers(1, 5), d_v=st.integers(1, 5), shift=st.sampled_from([0.0, 1e4, -1e4]))
def test_merge_of_two_key_sets_is_attention_over_both(n_q, n_k, split, d, d_v, shift):
    split = min(split, n_k)
    q = torch.randn(2, 3, n_q, d, dtype=torch.float64)
    k = torch.randn(2, 3, n_k, d, dtype=torch.float64)
    v = torch.randn(2, 3, n_k, d_v, dtype=torch.float64)
    out_a, lse_a = _partial(q, k[..., :split, :], v[..., :split, :])
    out_b, lse_b = _partial(q, k[..., split:, :], v[..., split:, :])
    out, lse = merge_attention_states(out_a, lse_a + shift, out_b, lse_b + shift)
    want_out, want_lse = _partial(q, k, v)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(lse, want_lse + shift)


def test_merge_with_empty_sides_never_gives_nan():
    ninf = float("-inf")
    out_a, out_b = torch.randn(4, 3), torch.randn(4, 3)
    lse_a = torch.tensor([ninf, 2.0, ninf, 1e4])
    lse_b = torch.tensor([ninf, ninf, -5.0, ninf])
    out_a[lse_a == ninf] = 0.0
    out_b[lse_b == ninf] = 0.0
    out, lse = merge_attention_states(out_a, lse_a, out_b, lse_b)
    assert not out.isnan().any() and not lse.isnan().any()
    assert torch.equal(out[0], torch.zeros(3)) and lse[0] == ninf
    torch.testing.assert_close(out[1], out_a[1])
    torch.testing.assert_close(out[2], out_b[2])
    torch.testing.assert_close(out[3], out_a[3])
    torch.testing.assert_close(lse[1:], torch.tensor([2.0, -5.0, 1e4]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_merge_keeps_dtypes(dtype):
    out_a, out_b = torch.randn(2, 5, 4, dtype=dtype), torch.randn(2, 5, 4, dtype=dtype)
    lse_a, lse_b = torch.randn(2, 5, dtype=dtype), torch.randn(2, 5, dtype=dtype)
    out, lse = merge_attention_states(out_a, lse_a, out_b, lse_b)
    assert out.dtype == dtype and lse.dtype == dtype
    torch.testing.assert_close(lse.double(), torch.logaddexp(lse_a.double(), lse_b.double()),
                               atol=2e-2, rtol=2e-2)


def test_merge_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="lse_a"):
        merge_attention_states(torch.zeros(2, 5, 4), torch.zeros(2, 4), torch.zeros(2, 5, 4),
                               torch.zeros(2, 5))
