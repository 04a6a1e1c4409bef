"""Lesson 06 answer key: grouped-query attention and decoding with a KV cache (torch).

Weights follow the course's functional convention: applied as ``x @ W`` with W of shape
(d_in, d_out). ``num_kv_heads == num_heads`` is multi-head attention, ``1`` is multi-query.
Written out step by step (no SDPA) so each line can be read against the lesson; scores and
softmax run in float32 for half-precision inputs and the result comes back in x's dtype.
"""

from __future__ import annotations

import math

import torch

from mhalib import validate
from mhalib.nn.masks import causal_mask


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, G, N, d) -> (B, G * n_rep, N, d); query head h reads K/V group h // n_rep."""
    validate.tensor("x", x, 4, "(B, G, N, d)")
    n_rep = validate.positive_int("n_rep", n_rep)
    if n_rep == 1:
        return x
    batch, groups, n, d = x.shape
    copies = x[:, :, None, :, :].expand(batch, groups, n_rep, n, d)  # (B, G, n_rep, N, d)
    return copies.reshape(batch, groups * n_rep, n, d)  # (B, G * n_rep, N, d)


def grouped_query_attention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """Self-attention with ``num_heads`` query heads sharing ``num_kv_heads`` K/V heads.

    x: (B, N, d_model); w_q, w_o: (d_model, d_model); w_k, w_v: (d_model, num_kv_heads *
    d_head) with d_head = d_model // num_heads. Returns (B, N, d_model).
    """
    dims = _check_gqa_args(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)
    num_heads, num_kv_heads, d_head = dims
    validate.boolean("causal", causal)
    q = _split(x @ w_q, num_heads)  # (B, H, N, d_head)
    k = _split(x @ w_k, num_kv_heads)  # (B, G, N, d_head)
    v = _split(x @ w_v, num_kv_heads)  # (B, G, N, d_head)
    n_rep = num_heads // num_kv_heads
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, N, d_head) each
    n = x.shape[1]
    mask = causal_mask(n, n, device=x.device) if causal else None  # (N, N)
    ctx = _attention(q, k, v, mask)  # (B, H, N, d_head)
    return _merge(ctx) @ w_o  # (B, N, d_model)


def decode_with_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Causal GQA computed one token at a time with a KV cache; same result as
    ``grouped_query_attention(..., causal=True)``.

    x: (B, N, d_model) -> (B, N, d_model). Step t projects only token t (so projection work
    is linear in N), appends its key and value to the cache and attends over the cache.
    """
    num_heads, num_kv_heads, d_head = _check_gqa_args(
        x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads
    )
    batch, n, _ = x.shape
    n_rep = num_heads // num_kv_heads
    cache_shape = (batch, num_kv_heads, n, d_head)
    k_cache = torch.empty(cache_shape, dtype=x.dtype, device=x.device)  # (B, G, N, d_head)
    v_cache = torch.empty(cache_shape, dtype=x.dtype, device=x.device)  # (B, G, N, d_head)
    outputs = []
    for t in range(n):
        x_t = x[:, t : t + 1, :]  # (B, 1, d_model): only the new token
        q_t = _split(x_t @ w_q, num_heads)  # (B, H, 1, d_head)
        k_cache[:, :, t : t + 1] = _split(x_t @ w_k, num_kv_heads)  # (B, G, 1, d_head)
        v_cache[:, :, t : t + 1] = _split(x_t @ w_v, num_kv_heads)  # (B, G, 1, d_head)
        k_seen = repeat_kv(k_cache[:, :, : t + 1], n_rep)  # (B, H, t + 1, d_head)
        v_seen = repeat_kv(v_cache[:, :, : t + 1], n_rep)  # (B, H, t + 1, d_head)
        ctx_t = _attention(q_t, k_seen, v_seen, None)  # (B, H, 1, d_head): all past allowed
        outputs.append(_merge(ctx_t) @ w_o)  # (B, 1, d_model)
    return torch.cat(outputs, dim=1)  # (B, N, d_model)


def _attention(q, k, v, mask):
    """softmax(q k^T / sqrt(d)) v over (B, H, N_q, d) and (B, H, N_k, d); rows with no
    allowed key give 0. Computed in float32 (or float64) and returned in q's dtype."""
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-1])
    q32, k32, v32 = q.to(compute) * scale, k.to(compute), v.to(compute)  # scale q first
    scores = q32 @ k32.transpose(-2, -1)  # (B, H, N_q, N_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # (B, H, N_q, N_k)
    row_max = scores.amax(dim=-1, keepdim=True)  # (B, H, N_q, 1)
    row_max = torch.where(torch.isinf(row_max), 0.0, row_max)  # all-masked rows: no NaN
    weights = torch.exp(scores - row_max)  # (B, H, N_q, N_k)
    total = weights.sum(dim=-1, keepdim=True)  # (B, H, N_q, 1)
    weights = weights / torch.where(total == 0, 1.0, total)  # all-masked rows stay 0
    return (weights @ v32).to(q.dtype)  # (B, H, N_q, d)


def _split(x, num_heads):
    """(B, N, num_heads * d) -> (B, num_heads, N, d): head h takes features h*d:(h+1)*d (also
    used by the MLA and serving answer keys)."""
    batch, n, width = x.shape
    return x.reshape(batch, n, num_heads, width // num_heads).transpose(1, 2)


def _merge(x):
    """(B, H, N, d) -> (B, N, H * d)."""
    batch, heads, n, d = x.shape
    return x.transpose(1, 2).reshape(batch, n, heads * d)


def _check_gqa_args(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    """Validate shapes, dtypes and head counts; return (num_heads, num_kv_heads, d_head)."""
    validate.tensor("x", x, 3, "(B, N, d_model)")
    d_model = x.shape[-1]
    num_heads = validate.positive_int("num_heads", num_heads)
    num_kv_heads = validate.positive_int("num_kv_heads", num_kv_heads)
    validate.divisible("d_model", d_model, "num_heads", num_heads)
    validate.divisible("num_heads", num_heads, "num_kv_heads", num_kv_heads)
    d_head = d_model // num_heads
    kv_width = num_kv_heads * d_head
    expected = {
        "w_q": (d_model, d_model),
        "w_k": (d_model, kv_width),
        "w_v": (d_model, kv_width),
        "w_o": (d_model, d_model),
    }
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        validate.tensor(name, w, 2, "(d_in, d_out)")
        validate.shape_equals(name, w, expected[name], "(d_in, d_out)")
    validate.same_dtype_and_device(x=x, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o)
    return num_heads, num_kv_heads, d_head
