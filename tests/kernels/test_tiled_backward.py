"""The tiled backward kernel against torch.autograd through F.scaled_dot_product_attention:
values (GQA, causal bottom-right, N_q != N_k, tiles of any size), memory that does not grow
with N^2, and errors that name the argument."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalib.kernels.tiled_backward import tiled_attention_backward
from mhalib.viz.lesson12 import attention_with_lse
from tests.largest_tensor import LargestTensor


def _oracle(q, k, v, grad_out, causal):
    """Autograd through SDPA (float64); queries that see no key are left out of the graph."""
    n_q, n_k = q.shape[2], k.shape[2]
    rep = q.shape[1] // k.shape[1]
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    mask = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        mask = mask.tril(n_k - n_q)
    live = mask.any(-1)
    out = F.scaled_dot_product_attention(
        leaves[0][:, :, live], leaves[1].repeat_interleave(rep, 1),
        leaves[2].repeat_interleave(rep, 1), attn_mask=mask[live])
    out.backward(grad_out[:, :, live])
    return tuple(t.grad for t in leaves)


def _forward(q, k, v, causal):
    rep = q.shape[1] // k.shape[1]
    return attention_with_lse(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                              causal)


@settings(max_examples=30, deadline=None)
@given(n_q=st.integers(1, 24), n_k=st.integers(1, 24), groups=st.sampled_from([1, 2]),
       rep=st.sampled_from([1, 3]), block_q=st.integers(1, 9), block_k=st.integers(1, 9),
       causal=st.booleans(), seed=st.integers(0, 10**6))
def test_equals_autograd_through_sdpa(n_q, n_k, groups, rep, block_q, block_k, causal, seed):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, groups * rep, n_q, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, groups, n_k, 8, generator=gen, dtype=torch.float64)
            for _ in range(2))
    grad_out = torch.randn(2, groups * rep, n_q, 8, generator=gen, dtype=torch.float64)
    out, lse = _forward(q, k, v, causal)
    got = tiled_attention_backward(q, k, v, out, lse, grad_out, causal=causal,
                                   block_q=block_q, block_k=block_k)
    for mine, want in zip(got, _oracle(q, k, v, grad_out, causal)):
        assert not torch.isnan(mine).any()
        torch.testing.assert_close(mine, want)


def test_default_tiles_and_half_precision():
    q, k, v, g = (torch.randn(1, 4, 300, 32) for _ in range(4))
    out, lse = _forward(q, k, v, True)
    want = _oracle(q.double(), k.double(), v.double(), g.double(), True)
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 5e-2)):
        got = tiled_attention_backward(*(t.to(dtype) for t in (q, k, v, out)), lse,
                                       g.to(dtype), causal=True)
        for mine, ref in zip(got, want):
            assert mine.dtype == dtype
            torch.testing.assert_close(mine.double(), ref, rtol=tol, atol=tol)


def test_no_tensor_grows_with_n_squared():
    n = 1024
    q, k, v, g = (torch.randn(1, 2, n, 16) for _ in range(4))
    out, lse = attention_with_lse(q, k, v)
    with LargestTensor() as probe:
        tiled_attention_backward(q, k, v, out, lse, g, block_q=64, block_k=64)
    assert probe.largest <= max(2 * 2 * 64 * 64, 2 * n * 16)  # two tiles, or a gradient


def test_bad_arguments_are_named():
    q = torch.randn(1, 2, 4, 8)
    out, lse = attention_with_lse(q, q, q)
    with pytest.raises(ValueError, match=r"lse.shape=\(1, 2, 5\)"):
        tiled_attention_backward(q, q, q, out, torch.zeros(1, 2, 5), q)
    with pytest.raises(TypeError, match="causal must be a bool"):
        tiled_attention_backward(q, q, q, out, lse, q, causal="yes")
    with pytest.raises(ValueError, match="block_k must be positive"):
        tiled_attention_backward(q, q, q, out, lse, q, block_k=0)
