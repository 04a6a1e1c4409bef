"""Lesson 10 answer key: multi-head latent attention (DeepSeek-V2/V3), naive and absorbed (torch).

Weights follow the course's functional convention (``x @ W``, W of shape (d_in, d_out)). Head
``h`` owns columns ``h*d_head:(h+1)*d_head`` of ``w_q``, ``w_uk`` and ``w_uv`` and the same rows
of ``w_o``. The cache size :func:`mla_kv_cache_bytes` lives in
:mod:`mhalib.accounting.kv_cache` next to ``kv_cache_bytes``.

Besides the two exercise functions this module holds :func:`absorbed_mla_attention`, attention
computed from the cached latents alone (tested against :func:`mla_attention`). DeepSeek's
decoupled RoPE, which the exercises leave out, is demonstrated in :mod:`mhalib.viz.lesson10`.
Scores and softmax run in float32 for half-precision inputs; results come back in x's dtype.
"""

from __future__ import annotations

import math

import torch

from mhalib import validate
from mhalib.nn.masks import causal_mask
from mhalib.reference.gqa import _merge, _split


def mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Multi-head latent attention, naive form: expand the latent into per-head keys and values.

    x: (B, N, d_model); w_dkv: (d_model, d_c); w_uk, w_uv: (d_c, H * d_head);
    w_q: (d_model, H * d_head); w_o: (H * d_head, d_model). Returns (B, N, d_model).
    """
    num_heads, d_head = _check_mla_args(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads)
    validate.boolean("causal", causal)
    c = x @ w_dkv  # (B, N, d_c): the only thing a decoder has to cache
    q = _split(x @ w_q, num_heads)  # (B, H, N, d_head)
    k = _split(c @ w_uk, num_heads)  # (B, H, N, d_head)
    v = _split(c @ w_uv, num_heads)  # (B, H, N, d_head)
    n = x.shape[1]
    mask = causal_mask(n, n, device=x.device) if causal else None  # (N, N)
    weights = _softmax_weights(q @ k.transpose(-2, -1), d_head, mask)  # (B, H, N, N)
    ctx = (weights @ v.to(weights.dtype)).to(x.dtype)  # (B, H, N, d_head)
    return _merge(ctx) @ w_o  # (B, N, d_model)


def absorb_mla_weights(w_uk, w_uv, w_q, w_o, num_heads):
    """Fold the up-projections into the query and output projections, head by head.

    Returns ``(w_q_latent (H, d_model, d_c), w_o_latent (H, d_c, d_model))`` with
    ``w_q_latent[h] = w_q_h @ w_uk_h.T`` and ``w_o_latent[h] = w_uv_h @ w_o_h``.
    """
    validate.tensor("w_uk", w_uk, 2, "(d_c, H * d_head)")
    validate.tensor("w_q", w_q, 2, "(d_model, H * d_head)")
    num_heads = validate.positive_int("num_heads", num_heads)
    d_c, width = w_uk.shape
    validate.divisible("w_uk.shape[1]", width, "num_heads", num_heads)
    d_head = width // num_heads
    d_model = w_q.shape[0]
    for name, w, shape in (("w_uv", w_uv, (d_c, width)), ("w_q", w_q, (d_model, width)),
                           ("w_o", w_o, (width, d_model))):
        validate.tensor(name, w, 2, "(d_in, d_out)")
        validate.shape_equals(name, w, shape)
    validate.same_dtype_and_device(w_uk=w_uk, w_uv=w_uv, w_q=w_q, w_o=w_o)
    w_q_heads = w_q.reshape(d_model, num_heads, d_head).permute(1, 0, 2)  # (H, d_model, d_head)
    w_uk_heads = w_uk.reshape(d_c, num_heads, d_head).permute(1, 0, 2)  # (H, d_c, d_head)
    w_uv_heads = w_uv.reshape(d_c, num_heads, d_head).permute(1, 0, 2)  # (H, d_c, d_head)
    w_o_heads = w_o.reshape(num_heads, d_head, d_model)  # (H, d_head, d_model)
    w_q_latent = w_q_heads @ w_uk_heads.transpose(-2, -1)  # (H, d_model, d_c)
    w_o_latent = w_uv_heads @ w_o_heads  # (H, d_c, d_model)
    return w_q_latent, w_o_latent


def absorbed_mla_attention(x, c, w_q_latent, w_o_latent, d_head, causal=True):
    """Attention of the queries of ``x`` over the cached latents ``c`` alone.

    x: (B, N_q, d_model) new tokens; c: (B, N_k, d_c) latents of all tokens so far (the new ones
    last); w_q_latent (H, d_model, d_c), w_o_latent (H, d_c, d_model) from
    :func:`absorb_mla_weights`. Nothing of width H * d_head per cached token is ever built.
    With ``causal`` the mask is aligned bottom-right (query i sits at position i + N_k - N_q).
    Returns (B, N_q, d_model).
    """
    validate.tensor("x", x, 3, "(B, N_q, d_model)")
    validate.tensor("c", c, 3, "(B, N_k, d_c)")
    d_head = validate.positive_int("d_head", d_head)
    q_latent = x.unsqueeze(1) @ w_q_latent  # (B, H, N_q, d_c): each head's query
    scores = q_latent @ c.unsqueeze(1).transpose(-2, -1)  # (B, H, N_q, N_k)
    n_q, n_k = x.shape[1], c.shape[1]
    mask = causal_mask(n_q, n_k, device=x.device) if causal else None
    weights = _softmax_weights(scores, d_head, mask)  # (B, H, N_q, N_k)
    mixed = (weights @ c.unsqueeze(1).to(weights.dtype)).to(x.dtype)  # (B, H, N_q, d_c)
    return (mixed @ w_o_latent).sum(dim=1)  # (B, N_q, d_model): heads add up


# -- helpers ---------------------------------------------------------------------------------------

def _softmax_weights(scores, width: int, mask):
    """softmax(scores / sqrt(width)) over the keys in float32 (or float64); masked-out keys get 0
    and a row with no allowed key is all zeros."""
    compute = torch.promote_types(scores.dtype, torch.float32)
    scores = scores.to(compute) / math.sqrt(width)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), 0.0, row_max)
    weights = torch.exp(scores - row_max)
    total = weights.sum(dim=-1, keepdim=True)
    return weights / torch.where(total == 0, 1.0, total)


def _check_mla_args(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads):
    """Validate shapes, dtypes and the head count; return (num_heads, d_head)."""
    validate.tensor("x", x, 3, "(B, N, d_model)")
    d_model = x.shape[-1]
    num_heads = validate.positive_int("num_heads", num_heads)
    validate.tensor("w_q", w_q, 2, "(d_model, H * d_head)")
    width = w_q.shape[1]
    validate.divisible("w_q.shape[1]", width, "num_heads", num_heads)
    validate.tensor("w_dkv", w_dkv, 2, "(d_model, d_c)")
    d_c = w_dkv.shape[1]
    expected = {"w_dkv": (d_model, d_c), "w_uk": (d_c, width), "w_uv": (d_c, width),
                "w_q": (d_model, width), "w_o": (width, d_model)}
    for name, w in (("w_dkv", w_dkv), ("w_uk", w_uk), ("w_uv", w_uv), ("w_q", w_q), ("w_o", w_o)):
        validate.tensor(name, w, 2, "(d_in, d_out)")
        validate.shape_equals(name, w, expected[name], "(d_in, d_out)")
    validate.same_dtype_and_device(x=x, w_dkv=w_dkv, w_uk=w_uk, w_uv=w_uv, w_q=w_q, w_o=w_o)
    return num_heads, width // num_heads
