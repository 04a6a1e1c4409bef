"""Lesson 12 answer key: the backward pass of attention, written out by hand (torch).

Notation of the contract: ``s = q k^T / sqrt(d)`` (masked entries ``-inf``), ``p = softmax(s)``
over the keys, ``out = p v``; ``grad_X`` is dL/dX for a loss L whose gradient ``grad_out`` is
given. The chain rule, one product at a time:

- ``grad_v = p^T grad_out`` (the weighted sum, read backwards),
- ``grad_p = grad_out v^T``,
- ``grad_s = p * (grad_p - rowsum(grad_p * p))`` (:func:`softmax_backward`: lesson 03's
  Jacobian ``diag(p) - p p^T`` applied to a row without building it),
- ``grad_q = grad_s k / sqrt(d)`` and ``grad_k = grad_s^T q / sqrt(d)``.

Four products of N_q x N_k x d each: 8 N^2 d FLOPs, twice the forward's 4 N^2 d.
:func:`flash_attention_backward` does the same block by block over the keys, as
FlashAttention-2 does: each block's ``p`` is recomputed from the log-sum-exp the forward kept
(``exp(s - lse)``, one more product: 10 N^2 d in all), and the row term comes from
``delta = rowsum(grad_out * out)``, which equals ``rowsum(grad_p * p)`` without any N x N
tensor. Nothing here calls torch.autograd; the tests compare with it in float64.
"""

from __future__ import annotations

import math

import torch

from mhalib import validate


def softmax_backward(weights, grad_weights):
    """The gradient with respect to a softmax's input, given its output and the gradient of
    its output.

    weights: (..., n) rows of a softmax; grad_weights: same shape. Returns grad_scores
    (..., n) = weights * (grad_weights - rowsum(grad_weights * weights)). A row of zero
    weights (a fully masked row) gives zeros. Computed in at least float32, returned in
    weights' dtype.
    """
    validate.tensor("weights", weights)
    validate.tensor("grad_weights", grad_weights)
    validate.same_dtype_and_device(weights=weights, grad_weights=grad_weights)
    if weights.dim() < 1:
        raise ValueError(f"weights must be (..., n), got weights.shape={tuple(weights.shape)}")
    validate.shape_equals("grad_weights", grad_weights, tuple(weights.shape), "(..., n) like "
                          "weights")
    compute = torch.promote_types(weights.dtype, torch.float32)
    p, g = weights.to(compute), grad_weights.to(compute)  # (..., n)
    row = (g * p).sum(dim=-1, keepdim=True)  # (..., 1): the p p^T g part of the Jacobian
    return (p * (g - row)).to(weights.dtype)  # (..., n)


def attention_backward(q, k, v, grad_out, causal=False):
    """Gradients of out = softmax(q k^T / sqrt(d)) v with respect to q, k and v.

    q: (..., N_q, d); k: (..., N_k, d); v: (..., N_k, d_v); grad_out: (..., N_q, d_v).
    ``causal`` aligns bottom-right (query i sees keys j <= i + N_k - N_q); a query with no
    visible key has out = 0 and contributes no gradient. Returns (grad_q, grad_k, grad_v)
    with the shapes of q, k, v, in the inputs' dtype (computed in at least float32).
    """
    _check_dense(q, k, v, grad_out)
    validate.boolean("causal", causal)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d)
    q_, k_, v_, g_ = (t.to(compute) for t in (q, k, v, grad_out))
    scores = q_ @ k_.transpose(-2, -1) * scale  # (..., N_q, N_k)
    if causal:
        scores = scores.masked_fill(~visible_keys(n_q, n_k, q.device), -math.inf)
    p = _softmax_rows(scores)  # (..., N_q, N_k), zero rows where no key is visible
    grad_v = p.transpose(-2, -1) @ g_  # (..., N_k, d_v)
    grad_p = g_ @ v_.transpose(-2, -1)  # (..., N_q, N_k)
    grad_s = p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))  # (..., N_q, N_k)
    grad_q = grad_s @ k_ * scale  # (..., N_q, d)
    grad_k = grad_s.transpose(-2, -1) @ q_ * scale  # (..., N_k, d)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def flash_attention_backward(q, k, v, out, lse, grad_out, block_size=64, causal=False):
    """:func:`attention_backward` block by block over the keys, from the forward's ``out`` and
    ``lse``, never building an (N_q, N_k) tensor.

    q, out, grad_out: (B, H, N_q, d); k, v: (B, H, N_k, d) (the contract has N_q = N_k = N);
    lse: (B, H, N_q), the natural log-sum-exp of each query's scaled scores (-inf for a row
    with no visible key). For each block of keys the probabilities are recomputed as
    exp(s - lse), the row term is delta = rowsum(grad_out * out), grad_k and grad_v of the
    block are finished at once and grad_q accumulates over the blocks. The largest temporary
    is (B, H, N_q, block_size); five products per block, 10 N_q N_k d FLOPs per head.
    Returns (grad_q, grad_k, grad_v) in q's dtype (computed in at least float32).
    """
    _check_flash(q, k, v, out, lse, grad_out)
    block_size = validate.positive_int("block_size", block_size)
    validate.boolean("causal", causal)
    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    compute = torch.promote_types(q.dtype, torch.float32)
    q_scaled = q.to(compute) * (1.0 / math.sqrt(d))  # (B, H, N_q, d)
    g_ = grad_out.to(compute)  # (B, H, N_q, d)
    delta = (g_ * out.to(compute)).sum(dim=-1, keepdim=True)  # (B, H, N_q, 1)
    # a row with no visible key: exp(-inf - (+inf)) = 0 instead of exp(-inf - (-inf)) = NaN
    lse_ = lse.to(compute).masked_fill(torch.isneginf(lse), math.inf)[..., None]  # (B, H, N_q, 1)
    query_pos = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)  # (N_q, 1)
    grad_q = torch.zeros_like(q_scaled)  # (B, H, N_q, d)
    grad_k = torch.empty(k.shape, dtype=compute, device=k.device)  # (B, H, N_k, d)
    grad_v = torch.empty(v.shape, dtype=compute, device=v.device)  # (B, H, N_k, d)
    for start in range(0, n_k, block_size):
        stop = min(start + block_size, n_k)
        k_blk = k[..., start:stop, :].to(compute)  # (B, H, b, d)
        v_blk = v[..., start:stop, :].to(compute)  # (B, H, b, d)
        scores = q_scaled @ k_blk.transpose(-2, -1)  # (B, H, N_q, b): the recomputation
        if causal:
            key_pos = torch.arange(start, stop, device=q.device)[None, :]  # (1, b)
            scores = scores.masked_fill(key_pos > query_pos, -math.inf)
        p = torch.exp(scores - lse_)  # (B, H, N_q, b), exact probabilities of this block
        grad_v[..., start:stop, :] = p.transpose(-2, -1) @ g_  # (B, H, b, d)
        grad_p = g_ @ v_blk.transpose(-2, -1)  # (B, H, N_q, b)
        grad_s = p * (grad_p - delta)  # (B, H, N_q, b)
        grad_q += grad_s @ k_blk  # (B, H, N_q, d), summed over the key blocks
        grad_k[..., start:stop, :] = grad_s.transpose(-2, -1) @ q_scaled  # (B, H, b, d)
    grad_q = grad_q * (1.0 / math.sqrt(d))
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


def visible_keys(n_q: int, n_k: int, device=None):
    """Bool (N_q, N_k), True where query i may see key j: j <= i + N_k - N_q (bottom-right)."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(n_k - n_q)


def _softmax_rows(scores):
    """Softmax over the last axis; rows that are all -inf give zeros, not NaN."""
    top = scores.amax(dim=-1, keepdim=True)  # (..., 1)
    top = top.masked_fill(torch.isneginf(top), 0.0)
    weights = torch.exp(scores - top)  # (..., n)
    total = weights.sum(dim=-1, keepdim=True)  # (..., 1)
    return weights / total.masked_fill(total == 0, 1.0)


def _check_qkv(q, k, v) -> None:
    validate.tensor("q", q)
    validate.tensor("k", k)
    validate.tensor("v", v)
    validate.same_dtype_and_device(q=q, k=k, v=v)
    if q.dim() < 2:
        raise ValueError(f"q must be (..., N_q, d), got q.shape={tuple(q.shape)}")
    lead, d = tuple(q.shape[:-2]), q.shape[-1]
    n_k = k.shape[-2] if k.dim() >= 2 else None
    validate.shape_equals("k", k, lead + (n_k, d), "(..., N_k, d) matching q's leading axes "
                          "and d")
    if v.dim() < 2:
        raise ValueError(f"v must be (..., N_k, d_v), got v.shape={tuple(v.shape)}")
    validate.shape_equals("v", v, lead + (n_k, v.shape[-1]), "(..., N_k, d_v) matching k")


def _check_dense(q, k, v, grad_out) -> None:
    _check_qkv(q, k, v)
    validate.tensor("grad_out", grad_out)
    validate.same_dtype_and_device(q=q, grad_out=grad_out)
    expected = tuple(q.shape[:-1]) + (v.shape[-1],)
    validate.shape_equals("grad_out", grad_out, expected, "(..., N_q, d_v): out's shape")


def _check_flash(q, k, v, out, lse, grad_out) -> None:
    validate.tensor("q", q, 4, "(B, H, N, d)")
    validate.tensor("k", k, 4, "(B, H, N, d)")
    validate.tensor("v", v, 4, "(B, H, N, d)")
    _check_dense(q, k, v, grad_out)
    validate.tensor("out", out)
    validate.tensor("lse", lse)
    validate.same_dtype_and_device(q=q, out=out)
    validate.shape_equals("out", out, tuple(grad_out.shape), "(B, H, N, d) like grad_out")
    if lse.device != q.device:
        raise TypeError(f"lse.device={lse.device} does not match q.device={q.device}")
    validate.shape_equals("lse", lse, tuple(q.shape[:-1]), "(B, H, N): one log-sum-exp per "
                          "query row")
