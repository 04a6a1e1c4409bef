"""Every hint of lesson 12 is true: its numbers recomputed, its steps checked on an example
against torch.autograd, its last step followed."""

from __future__ import annotations

import math

import torch

from tests.hints.claims import passes, says


def _forward(q, k, v, causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n_q, n_k = scores.shape[-2:]
        sees = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        scores = scores.masked_fill(~sees, -math.inf)
    return scores


def softmax_backward(weights, grad_weights):
    """The last hint of softmax_backward, followed."""
    compute = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(compute), grad_weights.to(compute)
    row = (g * p).sum(dim=-1, keepdim=True)
    return (p * (g - row)).to(weights.dtype)


def test_the_row_term_is_the_jacobian_applied_without_building_it():
    says("softmax_backward", 1, "dp_i/ds_j = p_i (delta_ij - p_j)")
    says("softmax_backward", 2, "No (n, n) matrix is needed")
    s = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 6, dtype=torch.float64)
    p = torch.softmax(s, dim=-1)
    (expected,) = torch.autograd.grad(p, s, g)
    jacobian = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]  # (3, 6, 6)
    assert torch.allclose((g[..., None, :] @ jacobian)[..., 0, :], expected)
    assert torch.allclose(softmax_backward(p.detach(), g), expected)
    zeros = torch.zeros(2, 4)
    assert (softmax_backward(zeros, torch.randn(2, 4)) == 0).all()  # a fully masked row


def test_the_last_softmax_hint_passes():
    says("softmax_backward", -1, "weights * (grad_weights - row)")
    passes("softmax_backward", softmax_backward)


def attention_backward(q, k, v, grad_out, causal=False):
    """The last hint of attention_backward, followed (with the third hint's forward)."""
    d = q.shape[-1]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    p = torch.softmax(_forward(q_, k_, v_, causal), dim=-1).nan_to_num(0.0)
    grad_p = g_ @ v_.transpose(-2, -1)
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ k_ / math.sqrt(d)
    grad_k = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
    grad_v = p.transpose(-2, -1) @ g_
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def test_the_products_of_the_backward_match_autograd():
    says("attention_backward", 2, "grad_v = p^T grad_out", "grad_p = grad_out v^T")
    says("attention_backward", 3, "it appears in both remaining gradients")
    q = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 7, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 7, 3, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 5, 3, dtype=torch.float64)
    out = torch.softmax(_forward(q, k, v), dim=-1) @ v
    expected = torch.autograd.grad(out, (q, k, v), g)
    for mine, theirs in zip(attention_backward(q.detach(), k.detach(), v.detach(), g), expected):
        assert torch.allclose(mine, theirs)


def test_the_last_attention_hint_passes():
    says("attention_backward", -1, "grad_s @ k / sqrt(d)", "p.transpose(-2, -1) @ grad_out")
    passes("attention_backward", attention_backward)


def test_the_flop_count_is_four_products_plus_one():
    says("attention_backward_flops", 2, "four of them")
    says("attention_backward_flops", 3, "4 x 2 N^2 d", "2x or 2.5x the forward's 4 N^2 d")
    n, d = 1024, 64
    forward = 2 * (2 * n * n * d)
    assert 4 * 2 * n * n * d == 2 * forward
    assert (4 + 1) * 2 * n * n * d == 2.5 * forward

    def attention_backward_flops(seq_len, head_dim, recompute=True):
        return (4 + (1 if recompute else 0)) * 2 * seq_len * seq_len * head_dim

    passes("attention_backward_flops", attention_backward_flops)


def flash_attention_backward(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """The third and last hints of flash_attention_backward, followed."""
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_, g_ = q.to(compute), grad_out.to(compute)
    delta = (g_ * out.to(compute)).sum(-1, keepdim=True)
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf)[..., None]
    query_pos = torch.arange(n_q)[:, None] + (n_k - n_q)
    grad_q = torch.zeros_like(q_)
    grad_k = torch.zeros(k.shape, dtype=compute)
    grad_v = torch.zeros(v.shape, dtype=compute)
    for start in range(0, n_k, block_size):
        blk = slice(start, start + block_size)
        k_blk, v_blk = k[..., blk, :].to(compute), v[..., blk, :].to(compute)
        s = q_ @ k_blk.transpose(-2, -1) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(start, start + k_blk.shape[-2]) > query_pos,
                              -math.inf)
        p = torch.exp(s - lse_)
        grad_s = p * (g_ @ v_blk.transpose(-2, -1) - delta)
        grad_v[..., blk, :] = p.transpose(-2, -1) @ g_
        grad_k[..., blk, :] = grad_s.transpose(-2, -1) @ q_ / math.sqrt(d)
        grad_q += grad_s @ k_blk / math.sqrt(d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def test_delta_from_the_output_equals_the_row_term():
    says("flash_attention_backward", 2, "delta = rowsum(grad_out * out)",
         "equals rowsum(grad_p * p)")
    q, k, v = (torch.randn(1, 2, 6, 4, dtype=torch.float64) for _ in range(3))
    g = torch.randn(1, 2, 6, 4, dtype=torch.float64)
    p = torch.softmax(_forward(q, k, v), dim=-1)
    out, grad_p = p @ v, g @ v.transpose(-2, -1)
    assert torch.allclose((g * out).sum(-1), (grad_p * p).sum(-1))
    says("flash_attention_backward", 1, "p = exp(s - lse)")
    lse = torch.logsumexp(_forward(q, k, v), dim=-1)
    assert torch.allclose(torch.exp(_forward(q, k, v) - lse[..., None]), p)


def test_the_last_flash_hint_passes():
    says("flash_attention_backward", -1, "grad_q += grad_s @ k_blk / sqrt(d)",
         "nothing N x N")
    passes("flash_attention_backward", flash_attention_backward)
