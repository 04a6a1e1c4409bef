"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math
import operator
from functools import reduce

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mla_bytes_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token = 2 * kv_lora_rank + rope_head_dim  # latent for K and latent for V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_layer_token = (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * seq_len * per_layer_token


def mla_bytes_in_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    values = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return values * bytes_per_element * 8


def mla_bytes_no_rope_key(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_numpy_int(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    dims = np.array([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                     bytes_per_element])
    return np.prod(dims)


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = (num_layers, seq_len, batch_size, bytes_per_element)
    return reduce(operator.mul, factors, 1) * (kv_lora_rank + rope_head_dim)


# ============================================================ mla_attention: wrong
def mla_scale_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_head_width_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    wt = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2).to(wt)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), -math.inf)
    out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, n, num_heads * d_head)
    return out.to(x.dtype) @ w_o


def mla_triu_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).permute(0, 2, 1, 3).to(ct)
    k = (latent @ w_uk).view(B, N, num_heads, dh).permute(0, 2, 1, 3).to(ct)
    v = (latent @ w_uv).view(B, N, num_heads, dh).permute(0, 2, 1, 3).to(ct)
    att = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        allowed = torch.triu(torch.ones(N, N, dtype=torch.bool))
        att = att.masked_fill(~allowed, float("-inf"))
    y = torch.softmax(att, dim=-1) @ v
    return y.permute(0, 2, 1, 3).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_heads_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh).to(ct)
    k = (c @ w_uk).reshape(B, num_heads, N, dh).to(ct)
    v = (c @ w_uv).reshape(B, num_heads, N, dh).to(ct)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, dim=-1) @ v
    return o.reshape(B, N, width).to(x.dtype) @ w_o


def mla_masked_fill_zero(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = (x @ w_dkv).to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    s = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool))
        s = s.masked_fill(~keep, 0.0)
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v).transpose(1, 2).reshape(B, N, num_heads * dh)
    return (ctx @ w_o.to(ct)).to(x.dtype)


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)  # noqa: E731
    q = split(x @ w_q)
    k = split(c @ w_uk)
    v = split(c @ w_uk)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, -1) @ v
    return o.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


# ============================================================ mla_attention: right
def mla_per_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    f = torch.float64
    X = x.to(f)
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    C = X @ w_dkv.to(f)  # (B, N, d_c)
    result = torch.zeros(x.shape, dtype=f)
    future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = X @ w_q[:, cols].to(f)
        kh = C @ w_uk[:, cols].to(f)
        vh = C @ w_uv[:, cols].to(f)
        s = qh @ kh.transpose(1, 2) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(future, -math.inf)
        p = torch.softmax(s, dim=-1)
        result = result + (p @ vh) @ w_o[cols, :].to(f)  # head h's rows of w_o
    return result.to(x.dtype)


def mla_sdpa_einsum(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    xc = x.to(ct)
    c = torch.einsum("bnm,mc->bnc", xc, w_dkv.to(ct))
    q = torch.einsum("bnm,mhd->bhnd", xc, w_q.to(ct).reshape(-1, H, dh))
    k = torch.einsum("bnc,chd->bhnd", c, w_uk.to(ct).reshape(-1, H, dh))
    v = torch.einsum("bnc,chd->bhnd", c, w_uv.to(ct).reshape(-1, H, dh))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    out = torch.einsum("bhnd,hdm->bnm", ctx, w_o.to(ct).reshape(H, dh, -1))
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_product_reversed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_uk[:, cols] @ w_q[:, cols].T)  # (d_c, d_model)
        wo_lat.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_heads_strided(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # head h: columns h, h+H, ...
    k_h = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    v_h = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return q_h @ k_h.transpose(1, 2), v_h @ o_h


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    k_h = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    v_h = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    o_h = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = q_h @ k_h.transpose(-2, -1) / math.sqrt(dh)  # scale folded in once and for all
    return w_q_latent, v_h @ o_h


def absorb_head_width_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    first, second = [], []
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        first.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].transpose(0, 1))
        second.append(w_uv[:, lo:hi] @ w_o[lo:hi])
    return torch.stack(first, 0), torch.stack(second, 0)


def absorb_stacked_on_dim1(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs = [w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T for h in range(num_heads)]
    os_ = [w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :] for h in range(num_heads)]
    return torch.stack(qs, dim=1), torch.stack(os_, dim=1)


def absorb_w_o_uses_w_uk(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = torch.empty(num_heads, w_q.shape[0], w_uk.shape[0], dtype=w_q.dtype)
    o_lat = torch.empty(num_heads, w_uk.shape[0], w_o.shape[1], dtype=w_q.dtype)
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat[h] = w_q[:, sl] @ w_uk[:, sl].T
        o_lat[h] = w_uk[:, sl] @ w_o[sl]
    return q_lat, o_lat


# ============================================================ absorb_mla_weights: right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    H = num_heads
    dh = w_q.shape[1] // H
    q3 = w_q.reshape(w_q.shape[0], H, dh)  # (d_model, H, d_head)
    k3 = w_uk.reshape(w_uk.shape[0], H, dh)  # (d_c, H, d_head)
    v3 = w_uv.reshape(w_uv.shape[0], H, dh)
    o3 = w_o.reshape(H, dh, w_o.shape[1])  # (H, d_head, d_model)
    w_q_latent = torch.einsum("mhk,chk->hmc", q3, k3)
    w_o_latent = torch.einsum("chk,hkm->hcm", v3, o3)
    return w_q_latent, w_o_latent


def absorb_chunk_loop_f64(w_uk, w_uv, w_q, w_o, num_heads):
    q_parts = torch.chunk(w_q.double(), num_heads, dim=1)
    k_parts = torch.chunk(w_uk.double(), num_heads, dim=1)
    v_parts = torch.chunk(w_uv.double(), num_heads, dim=1)
    o_parts = torch.chunk(w_o.double(), num_heads, dim=0)
    wq = torch.stack([torch.mm(a, b.t()) for a, b in zip(q_parts, k_parts)])
    wo = torch.stack([torch.mm(a, b) for a, b in zip(v_parts, o_parts)])
    return wq.to(w_q.dtype), wo.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "latent_counted_twice", (
        "counts the latent twice, once for K and once for V, as a standard KV cache would; "
        "MLA recomputes both from one latent, so there is no factor 2"),
        mla_bytes_factor_two),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_ignored", (
        "never multiplies by batch_size: the cache of one sequence is returned for any batch"),
        mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "bits_not_bytes", (
        "multiplies by 8 at the end, giving bits instead of bytes"),
        mla_bytes_in_bits),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_left_out", (
        "counts only the kv_lora_rank latent and leaves out the shared RoPE key of "
        "rope_head_dim values per token and layer"),
        mla_bytes_no_rope_key),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_integer", (
        "multiplies the factors with np.prod and returns a numpy int64, not the plain Python "
        "int the contract asks for"),
        mla_bytes_numpy_int),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses", (
        "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without parentheses "
        "around kv_lora_rank + rope_head_dim only the RoPE key is scaled by tokens and bytes"),
        mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "functools_reduce", None, mla_bytes_reduce),

    Entry("mla_attention", "wrong", "scale_by_latent_width", (
        "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)"),
        mla_scale_latent_width),
    Entry("mla_attention", "wrong", "d_head_from_d_model", (
        "takes d_head = d_model // num_heads; when num_heads * d_head != d_model the reshape "
        "into heads fails (it raises) instead of using w_q.shape[1] // num_heads"),
        mla_head_width_from_d_model),
    Entry("mla_attention", "wrong", "mask_built_with_triu", (
        "builds the causal mask with torch.triu, so each query may see itself and the future "
        "instead of itself and the past"),
        mla_triu_mask),
    Entry("mla_attention", "wrong", "heads_split_without_transpose", (
        "reshapes (B, N, H * d_head) straight to (B, H, N, d_head) without going through "
        "(B, N, H, d_head) and transposing, so heads and tokens get mixed up"),
        mla_heads_without_transpose),
    Entry("mla_attention", "wrong", "masked_scores_set_to_zero", (
        "masked_fill puts 0.0 instead of -inf in the masked scores, so future keys still get "
        "weight exp(0) in the softmax"),
        mla_masked_fill_zero),
    Entry("mla_attention", "wrong", "values_from_w_uk", (
        "copy-paste slip: the values are computed as c @ w_uk, the key up-projection, instead "
        "of c @ w_uv"),
        mla_values_from_w_uk),
    Entry("mla_attention", "right", "per_head_loop_float64", None, mla_per_head_loop_f64),
    Entry("mla_attention", "right", "einsum_and_sdpa", None, mla_sdpa_einsum),

    Entry("absorb_mla_weights", "wrong", "product_order_reversed", (
        "computes w_uk_h @ w_q_h.T instead of w_q_h @ w_uk_h.T, so each w_q_latent[h] is "
        "(d_c, d_model), the transpose of what is asked"),
        absorb_product_reversed),
    Entry("absorb_mla_weights", "wrong", "heads_strided_columns", (
        "reshapes to (d_model, d_head, H) so head h gets the strided columns h, h + H, ... "
        "instead of the contiguous block h*d_head:(h+1)*d_head"),
        absorb_heads_strided),
    Entry("absorb_mla_weights", "wrong", "scale_folded_into_w_q_latent", (
        "divides w_q_latent by sqrt(d_head); the contract keeps the scale out, applied to the "
        "scores"),
        absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model", (
        "slices heads with d_head = d_model // num_heads instead of w_q.shape[1] // num_heads, "
        "so when num_heads * d_head != d_model the head blocks are the wrong columns"),
        absorb_head_width_from_d_model),
    Entry("absorb_mla_weights", "wrong", "stacked_on_dim1", (
        "torch.stack(..., dim=1) puts the head axis second: (d_model, H, d_c) and "
        "(d_c, H, d_model) instead of a leading head axis"),
        absorb_stacked_on_dim1),
    Entry("absorb_mla_weights", "wrong", "w_o_latent_uses_w_uk", (
        "copy-paste slip: w_o_latent[h] is built from w_uk_h @ w_o_h instead of w_uv_h @ w_o_h"),
        absorb_w_o_uses_w_uk),
    Entry("absorb_mla_weights", "right", "einsum_reshaped", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "chunk_loop_float64", None, absorb_chunk_loop_f64),
]
