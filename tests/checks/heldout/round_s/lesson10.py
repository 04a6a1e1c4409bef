"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch

from entry import Entry


# ================================================================ mla_kv_cache_bytes: wrong
def cache_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    # slip: a factor 2 for "keys and values", but the latent serves both
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def cache_forgets_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token = kv_lora_rank * bytes_per_element  # slip: the shared RoPE key is left out
    return num_layers * per_token * seq_len * batch_size


def cache_in_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    bits = 8 * bytes_per_element  # slip: counts bits, not bytes
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bits


def cache_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    dims = [num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element]
    return np.prod(dims)  # slip: a numpy int64, not a plain int


def cache_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element  # slip


def cache_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    # slip: missing parentheses, only the RoPE part is multiplied by tokens, batch and bytes
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


# ================================================================ mla_kv_cache_bytes: right
def cache_loop_over_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def cache_reduce_mul(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    values_per_token = kv_lora_rank + rope_head_dim
    return functools.reduce(operator.mul, (num_layers, values_per_token, seq_len, batch_size,
                                           bytes_per_element), 1)


# ===================================================================== mla_attention: wrong
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _attend(scores, v, causal, fill=-math.inf, dim=-1):
    n = scores.shape[-1]
    if causal:
        allowed = torch.ones(n, n, dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, fill)
    return torch.softmax(scores, dim=dim) @ v


def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    X = x.to(ct)
    c = X @ w_dkv.to(ct)
    q = _heads(X @ w_q.to(ct), num_heads)
    k = _heads(c @ w_uk.to(ct), num_heads)
    v = _heads(c @ w_uv.to(ct), num_heads)
    d_c = w_dkv.shape[1]
    s = q @ k.transpose(-1, -2) / math.sqrt(d_c)  # slip: latent width, not d_head
    ctx = _attend(s, v, causal)
    B, H, N, dh = ctx.shape
    return (ctx.transpose(1, 2).reshape(B, N, H * dh) @ w_o.to(ct)).to(x.dtype)


def mla_inverted_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    X = x.to(ct)
    c = X @ w_dkv.to(ct)
    q = _heads(X @ w_q.to(ct), num_heads)
    k = _heads(c @ w_uk.to(ct), num_heads)
    v = _heads(c @ w_uv.to(ct), num_heads)
    dh = q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        n = s.shape[-1]
        allowed = torch.ones(n, n, dtype=torch.bool).tril()
        s = s.masked_fill(allowed, -math.inf)  # slip: fills where attention IS allowed
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    ctx = w @ v
    B, H, N, _ = ctx.shape
    return (ctx.transpose(1, 2).reshape(B, N, H * dh) @ w_o.to(ct)).to(x.dtype)


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    X = x.to(ct)
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = X @ w_dkv.to(ct)
    q = (X @ w_q.to(ct)).reshape(B, num_heads, N, dh)  # slip: reshaped straight to (B, H, N, dh)
    k = (c @ w_uk.to(ct)).reshape(B, num_heads, N, dh)
    v = (c @ w_uv.to(ct)).reshape(B, num_heads, N, dh)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    ctx = _attend(s, v, causal)
    return (ctx.reshape(B, N, num_heads * dh) @ w_o.to(ct)).to(x.dtype)


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    X = x.to(ct)
    c = X @ w_dkv.to(ct)
    q = _heads(X @ w_q.to(ct), num_heads)
    k = _heads(c @ w_uk.to(ct), num_heads)
    v = _heads(c @ w_uv.to(ct), num_heads)
    dh = q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    ctx = _attend(s, v, causal, dim=-2)  # slip: softmax normalised over queries
    B, H, N, _ = ctx.shape
    return (ctx.transpose(1, 2).reshape(B, N, H * dh) @ w_o.to(ct)).to(x.dtype)


def mla_always_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    X = x.to(ct)
    c = X @ w_dkv.to(ct)
    q = _heads(X @ w_q.to(ct), num_heads)
    k = _heads(c @ w_uk.to(ct), num_heads)
    v = _heads(c @ w_uv.to(ct), num_heads)
    dh = q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    ctx = _attend(s, v, True)  # slip: the causal flag is ignored
    B, H, N, _ = ctx.shape
    return (ctx.transpose(1, 2).reshape(B, N, H * dh) @ w_o.to(ct)).to(x.dtype)


def mla_mask_fill_zero(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    X = x.to(ct)
    c = X @ w_dkv.to(ct)
    q = _heads(X @ w_q.to(ct), num_heads)
    k = _heads(c @ w_uk.to(ct), num_heads)
    v = _heads(c @ w_uv.to(ct), num_heads)
    dh = q.shape[-1]
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    ctx = _attend(s, v, causal, fill=0.0)  # slip: masked scores set to 0, not -inf
    B, H, N, _ = ctx.shape
    return (ctx.transpose(1, 2).reshape(B, N, H * dh) @ w_o.to(ct)).to(x.dtype)


# ===================================================================== mla_attention: right
def mla_per_head_einsum_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    width = w_q.shape[1]
    dh = width // num_heads
    n = x.shape[1]
    c = torch.einsum("bnm,mc->bnc", xd, w_dkv.double())
    out = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = xd @ w_q.double()[:, cols]
        kh = c @ w_uk.double()[:, cols]
        vh = c @ w_uv.double()[:, cols]
        s = torch.einsum("bqd,bkd->bqk", qh, kh) / dh ** 0.5
        if causal:
            s = s + torch.full((n, n), -math.inf, dtype=torch.float64).triu(1)
        p = torch.softmax(s, dim=-1)
        out = out + (p @ vh) @ w_o.double()[cols, :]
    return out.to(x.dtype)


def mla_absorbed_route(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention from the latents alone: per-head absorbed query and output matrices."""
    xd = x.double()
    d_model, width = w_q.shape
    d_c = w_dkv.shape[1]
    dh = width // num_heads
    c = xd @ w_dkv.double()  # (B, N, d_c)
    wq = w_q.double().reshape(d_model, num_heads, dh).permute(1, 0, 2)  # (H, d_model, dh)
    wk = w_uk.double().reshape(d_c, num_heads, dh).permute(1, 0, 2)  # (H, d_c, dh)
    wv = w_uv.double().reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.double().reshape(num_heads, dh, d_model)
    q_lat = torch.einsum("bnm,hmd,hcd->bhnc", xd, wq, wk)  # (B, H, N, d_c)
    s = torch.einsum("bhnc,bkc->bhnk", q_lat, c) / math.sqrt(dh)
    if causal:
        n = x.shape[1]
        s = s.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), -math.inf)
    p = s.softmax(-1)
    o_lat = torch.einsum("hcd,hdm->hcm", wv, wo)  # (H, d_c, d_model)
    y = torch.einsum("bhnk,bkc,hcm->bnm", p, c, o_lat)
    return y.to(x.dtype)


# ================================================================ absorb_mla_weights: wrong
def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    # slip: reshape(…, dh, H) puts head h on columns h, h + H, ... (strided, not contiguous)
    q_h = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)
    k_h = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    v_h = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return q_h @ k_h.transpose(1, 2), v_h @ o_h


def absorb_uk_for_values(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_q[:, s] @ w_uk[:, s].T)
        wo_l.append(w_uk[:, s] @ w_o[s, :])  # slip: w_uk where w_uv belongs
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    q_h = w_q.reshape(d_model, num_heads, dh).transpose(0, 1)
    k_h = w_uk.reshape(d_c, num_heads, dh).transpose(0, 1)
    v_h = w_uv.reshape(d_c, num_heads, dh).transpose(0, 1)
    o_h = w_o.reshape(num_heads, dh, d_model)
    # slip: 1/sqrt(d_head) folded in, though the scores still divide by sqrt(d_head)
    return (q_h @ k_h.transpose(1, 2)) / math.sqrt(dh), v_h @ o_h


def absorb_product_reversed(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_uk[:, s] @ w_q[:, s].T)  # slip: w_uk_h @ w_q_h.T, the transpose
        wo_l.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_last_head_missing(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq_lat = torch.zeros(num_heads, d_model, d_c, dtype=w_q.dtype)
    wo_lat = torch.zeros(num_heads, d_c, d_model, dtype=w_q.dtype)
    for h in range(num_heads - 1):  # slip: the last head is never filled
        s = slice(h * dh, (h + 1) * dh)
        wq_lat[h] = w_q[:, s] @ w_uk[:, s].T
        wo_lat[h] = w_uv[:, s] @ w_o[s, :]
    return wq_lat, wo_lat


def absorb_slice_precedence(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        lo, hi = h * dh, h + 1 * dh  # slip: h + 1 * dh is h + dh, not (h + 1) * dh
        wq_l.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].T)
        wo_l.append(w_uv[:, lo:hi] @ w_o[lo:hi, :])
    return torch.stack(wq_l), torch.stack(wo_l)


# ================================================================ absorb_mla_weights: right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    q4 = w_q.reshape(d_model, num_heads, dh)
    k4 = w_uk.reshape(d_c, num_heads, dh)
    v4 = w_uv.reshape(d_c, num_heads, dh)
    o4 = w_o.reshape(num_heads, dh, d_model)
    return torch.einsum("mhd,chd->hmc", q4, k4), torch.einsum("chd,hdm->hcm", v4, o4)


def absorb_loop_f64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        a, b = h * dh, (h + 1) * dh
        qs.append(torch.mm(w_q[:, a:b].double(), w_uk[:, a:b].double().t()))
        os_.append(torch.mm(w_uv[:, a:b].double(), w_o[a:b].double()))
    return torch.stack(qs).to(w_q.dtype), torch.stack(os_).to(w_q.dtype)


C = "mla_kv_cache_bytes"
M = "mla_attention"
W = "absorb_mla_weights"
ENTRIES = [
    Entry(C, "wrong", "factor_two_for_k_and_v", "It multiplies by 2 for keys and values as in a "
          "standard KV cache, but MLA's single latent vector is what both are rebuilt from.",
          cache_k_and_v),
    Entry(C, "wrong", "rope_key_left_out", "Only the latent's kv_lora_rank values are counted "
          "per token and layer; the shared RoPE key of rope_head_dim values is forgotten.",
          cache_forgets_rope),
    Entry(C, "wrong", "counts_bits", "It multiplies by 8 * bytes_per_element, counting bits "
          "instead of bytes.", cache_in_bits),
    Entry(C, "wrong", "numpy_int64_result", "np.prod returns a numpy int64, not the plain "
          "Python int the exercise asks for.", cache_numpy_prod),
    Entry(C, "wrong", "batch_size_ignored", "batch_size never enters the product, so the cache "
          "of a batch is counted as one sequence's.", cache_no_batch),
    Entry(C, "wrong", "missing_parentheses", "num_layers * kv_lora_rank + rope_head_dim * "
          "seq_len * ... lacks parentheses around kv_lora_rank + rope_head_dim, so only the RoPE "
          "part is scaled by tokens, batch and bytes.", cache_precedence),
    Entry(C, "right", "loop_over_layers", None, cache_loop_over_layers),
    Entry(C, "right", "functools_reduce", None, cache_reduce_mul),
    Entry(M, "wrong", "scale_by_latent_width", "The scores are divided by sqrt(d_c), the width "
          "of the latent, instead of sqrt(d_head).", mla_scale_by_latent),
    Entry(M, "wrong", "mask_polarity_inverted", "masked_fill is given the allowed mask itself "
          "(True = may attend), so it blanks the past and keeps the future.", mla_inverted_mask),
    Entry(M, "wrong", "heads_reshaped_without_transpose", "(B, N, H*d_head) is reshaped "
          "straight to (B, H, N, d_head) (and back) without a transpose, mixing tokens and heads.",
          mla_split_without_transpose),
    Entry(M, "wrong", "softmax_over_queries", "torch.softmax is taken over dim=-2, the queries, "
          "instead of over the keys.", mla_softmax_over_queries),
    Entry(M, "wrong", "causal_flag_ignored", "The causal mask is applied whatever causal says, "
          "so causal=False still masks the future.", mla_always_causal),
    Entry(M, "wrong", "masked_scores_zero_not_neg_inf", "Masked scores are filled with 0.0 "
          "instead of -inf, so future keys still get exp(0) weight.", mla_mask_fill_zero),
    Entry(M, "right", "per_head_loop_einsum_float64", None, mla_per_head_einsum_f64),
    Entry(M, "right", "absorbed_latent_route", None, mla_absorbed_route),
    Entry(W, "wrong", "strided_head_columns", "reshape(d_model, d_head, H) gives head h the "
          "strided columns h, h + H, ... instead of the contiguous block h*d_head:(h+1)*d_head.",
          absorb_strided_heads),
    Entry(W, "wrong", "w_uk_in_output_matrix", "w_o_latent[h] is built from w_uk_h @ w_o_h; "
          "the value up-projection w_uv belongs there.", absorb_uk_for_values),
    Entry(W, "wrong", "scale_folded_in", "w_q_latent is divided by sqrt(d_head), but the "
          "contract's scores divide by sqrt(d_head) again, so the scale is applied twice.",
          absorb_folds_scale),
    Entry(W, "wrong", "product_order_reversed", "w_q_latent[h] is w_uk_h @ w_q_h.T, the "
          "transpose of w_q_h @ w_uk_h.T: (d_c, d_model) per head instead of (d_model, d_c).",
          absorb_product_reversed),
    Entry(W, "wrong", "last_head_left_zero", "The loop runs over range(num_heads - 1), so the "
          "last head's matrices stay zero.", absorb_last_head_missing),
    Entry(W, "wrong", "slice_end_precedence", "The slice end is written h + 1 * d_head, which "
          "is h + d_head, not (h + 1) * d_head: every head after the first gets the wrong "
          "columns.", absorb_slice_precedence),
    Entry(W, "right", "einsum_on_4d_views", None, absorb_einsum),
    Entry(W, "right", "mm_loop_float64", None, absorb_loop_f64),
]
