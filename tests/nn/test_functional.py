"""attend() with random boolean masks against an explicit float64 softmax."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.nn import attend


def _explicit(q, k, v, mask):
    """softmax over allowed keys by hand; rows with no allowed key are 0."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = torch.where(mask, scores.exp(), torch.zeros_like(scores))
    total = weights.sum(-1, keepdim=True)
    return (weights / torch.where(total == 0, 1.0, total)) @ v


@settings(max_examples=40, deadline=None)
@given(
    n_q=st.integers(1, 6),
    n_k=st.integers(1, 6),
    kv_heads=st.sampled_from([1, 2]),
    rep=st.sampled_from([1, 3]),
    per_head=st.booleans(),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_masks(n_q, n_k, kv_heads, rep, per_head, causal, seed):
    generator = torch.Generator().manual_seed(seed)
    heads = kv_heads * rep
    q = torch.randn(2, heads, n_q, 4, dtype=torch.float64, generator=generator)
    k = torch.randn(2, kv_heads, n_k, 4, dtype=torch.float64, generator=generator)
    v = torch.randn(2, kv_heads, n_k, 4, dtype=torch.float64, generator=generator)
    shape = (2, heads, n_q, n_k) if per_head else (n_q, n_k)
    mask = torch.rand(shape, generator=generator) < 0.6  # some rows end up fully masked
    out = attend(q, k, v, attn_mask=mask, causal=causal)
    full = mask
    if causal:
        full = mask & torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out, _explicit(q, k, v, full.expand(2, heads, n_q, n_k)))
