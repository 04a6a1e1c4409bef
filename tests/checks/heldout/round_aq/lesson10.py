"""Held-out learners' answers, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention,
absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ mla_kv_cache_bytes

def mla_bytes_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # a key and a value
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    latents = num_layers * kv_lora_rank * seq_len * batch_size
    shared_rope = num_layers * rope_head_dim * batch_size  # one RoPE key shared by everyone
    return (latents + shared_rope) * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_layer_token = (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * seq_len * per_layer_token


def mla_bytes_in_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    bits = 8 * bytes_per_element
    numbers = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return numbers * bits


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _seq in range(batch_size):
            total += seq_len * (kv_lora_rank * bytes_per_element + rope_head_dim * bytes_per_element)
    return total


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = (num_layers, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1) * kv_lora_rank
               + functools.reduce(operator.mul, factors, 1) * rope_head_dim)


# ============================================================================ mla_attention

def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v.to(ct)
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    dh = w_q.shape[1] // num_heads
    lat = x @ w_dkv
    q = (x @ w_q).reshape(b, num_heads, n, dh)
    k = (lat @ w_uk).reshape(b, num_heads, n, dh)
    v = (lat @ w_uv).reshape(b, num_heads, n, dh)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(f) @ k.to(f).transpose(-1, -2) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~allowed, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v.to(f)
    merged = out.transpose(1, 2).reshape(b, n, num_heads * dh).to(x.dtype)
    return merged @ w_o


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv

    def heads(t):
        return t.view(B, N, num_heads, dh).permute(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        mask = torch.ones(N, N, dtype=torch.bool).tril()  # True = may attend
        s = s.masked_fill(mask, -math.inf)
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v.to(ct)).permute(0, 2, 1, 3).reshape(B, N, width).to(x.dtype)
    return ctx @ w_o


def mla_values_from_wuk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[-1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = torch.matmul(q.to(ct), k.to(ct).transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    p = s.softmax(-1)
    o = torch.matmul(p, v.to(ct)).transpose(1, 2).reshape(B, N, num_heads * dh)
    return o.to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    sp = lambda t: t.reshape(B, N, num_heads, dh).transpose(1, 2)  # noqa: E731
    q, k, v = sp(x @ w_q), sp(c @ w_uk), sp(c @ w_uv)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    p = torch.softmax(s, dim=-2)
    ctx = p @ v.to(ct)
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_sqrt_precedence(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(ct) @ k.to(ct).transpose(-2, -1) / d_head ** 1 / 2
    if causal:
        scores = scores.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(scores, dim=-1) @ v.to(ct)
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_per_head_loop_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    X = x.double()
    c = X @ w_dkv.double()  # (B, N, d_c)
    out = torch.zeros((B, N, d_model), dtype=torch.float64)
    future = torch.arange(N)[None, :] > torch.arange(N)[:, None]
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_h = X @ w_q.double()[:, cols]
        k_h = c @ w_uk.double()[:, cols]
        v_h = c @ w_uv.double()[:, cols]
        s = q_h @ k_h.transpose(1, 2) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(future, -math.inf)
        s = s - s.max(dim=-1, keepdim=True).values
        e = s.exp()
        p = e / e.sum(dim=-1, keepdim=True)
        out += (p @ v_h) @ w_o.double()[cols, :]
    return out.to(x.dtype)


def mla_einsum_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    f32 = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(f32)
    c = torch.einsum("bnm,mc->bnc", xf, w_dkv.to(f32))
    q = torch.einsum("bnm,mhe->bhne", xf, w_q.to(f32).reshape(d_model, num_heads, dh))
    k = torch.einsum("bnc,che->bhne", c, w_uk.to(f32).reshape(-1, num_heads, dh))
    v = torch.einsum("bnc,che->bhne", c, w_uv.to(f32).reshape(-1, num_heads, dh))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))  # scale 1/sqrt(dh)
    y = torch.einsum("bhne,hem->bnm", ctx, w_o.to(f32).reshape(num_heads, dh, d_model))
    return y.to(x.dtype)


# ============================================================================ absorb_mla_weights

def absorb_reshape_without_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(num_heads, d_model, dh)
    wuk = w_uk.reshape(num_heads, d_c, dh)
    wuv = w_uv.reshape(num_heads, d_c, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_keeps_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    qh = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    kh = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    vh = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    oh = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = qh @ kh.transpose(-2, -1) / math.sqrt(dh)  # fold the score scale in too
    return w_q_latent, vh @ oh


def absorb_dhead_from_dmodel(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    dh = d_model // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_q[:, s] @ w_uk[:, s].T)
        wo_l.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_cat_not_stack(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_parts, o_parts = [], []
    for h in range(num_heads):
        lo, hi = h * dh, (h + 1) * dh
        q_parts.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].t())
        o_parts.append(w_uv[:, lo:hi] @ w_o[lo:hi])
    return torch.cat(q_parts), torch.cat(o_parts)


def absorb_uk_slice_start(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = []
    o_lat = []
    for h in range(num_heads):
        wq_h = w_q[:, h * dh:(h + 1) * dh]
        wuk_h = w_uk[:, h:h + dh]
        wuv_h = w_uv[:, h * dh:(h + 1) * dh]
        wo_h = w_o[h * dh:(h + 1) * dh, :]
        q_lat.append(wq_h @ wuk_h.T)
        o_lat.append(wuv_h @ wo_h)
    return torch.stack(q_lat, dim=0), torch.stack(o_lat, dim=0)


def absorb_all_heads_mixed(w_uk, w_uv, w_q, w_o, num_heads):
    full_q = w_q @ w_uk.T  # (d_model, d_c)
    full_o = w_uv @ w_o  # (d_c, d_model)
    return (full_q.unsqueeze(0).repeat(num_heads, 1, 1),
            full_o.unsqueeze(0).repeat(num_heads, 1, 1))


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    q3 = w_q.reshape(d_model, num_heads, e)
    k3 = w_uk.reshape(d_c, num_heads, e)
    v3 = w_uv.reshape(d_c, num_heads, e)
    o3 = w_o.reshape(num_heads, e, d_model)
    return (torch.einsum("mhe,che->hmc", q3, k3), torch.einsum("che,hem->hcm", v3, o3))


def absorb_outer_sums_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    wq_lat = torch.zeros((num_heads, d_model, d_c), dtype=torch.float64)
    wo_lat = torch.zeros((num_heads, d_c, d_model), dtype=torch.float64)
    for h in range(num_heads):
        for j in range(dh):
            col = h * dh + j
            wq_lat[h] += torch.outer(w_q[:, col].double(), w_uk[:, col].double())
            wo_lat[h] += torch.outer(w_uv[:, col].double(), w_o[col, :].double())
    return wq_lat.to(w_q.dtype), wo_lat.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_key_and_value",
          "multiplies by 2 for a key and a value as in an MHA cache, but MLA's keys and values "
          "are both read from the one cached latent", mla_bytes_factor_two),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_prod_returns_int64",
          "multiplies with np.prod, which returns a numpy.int64, not the plain Python int the "
          "exercise asks for", mla_bytes_np_prod),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once_per_layer",
          "reads 'shared' as shared by all tokens and counts the RoPE key once per layer and "
          "sequence instead of once per token (it is shared by the heads, not the tokens)",
          mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_forgotten",
          "leaves batch_size out of the product, so the cache of a batch is counted as one "
          "sequence's", mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "counts_bits",
          "multiplies by 8 * bytes_per_element, the bits per number, so the result is in bits "
          "instead of bytes", mla_bytes_in_bits),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so only the RoPE "
          "part is multiplied by the tokens and bytes: (kv_lora_rank + rope_head_dim) needs "
          "parentheses", mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "right", "loops_over_layers_and_sequences", None, mla_bytes_loop),
    Entry("mla_kv_cache_bytes", "right", "functools_reduce_split_terms", None, mla_bytes_reduce),

    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model; here the "
          "head width is w_q.shape[1] // num_heads, so the reshape fails or splits wrongly",
          mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head), which "
          "mixes tokens and heads; it needs reshape(B, N, H, d_head) then transpose(1, 2)",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "mask_convention_inverted",
          "fills -inf where the causal mask is True, but True means 'may attend': it hides the "
          "past and the diagonal and keeps the future (the last row becomes all -inf, NaN)",
          mla_mask_inverted),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "computes the values as c @ w_uk, reusing the key up-projection, instead of c @ w_uv",
          mla_values_from_wuk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "applies the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "sqrt_precedence",
          "writes / d_head ** 1 / 2, which is (scores / d_head) / 2, instead of dividing by "
          "d_head ** 0.5", mla_sqrt_precedence),
    Entry("mla_attention", "right", "per_head_loop_float64", None, mla_per_head_loop_float64),
    Entry("mla_attention", "right", "einsum_projections_and_sdpa", None, mla_einsum_sdpa),

    Entry("absorb_mla_weights", "wrong", "head_split_without_permute",
          "reshapes w_q (d_model, H*d_head) directly to (H, d_model, d_head) (and w_uk, w_uv "
          "likewise), which does not pick head h's columns; it needs (d_model, H, d_head) and a "
          "permute", absorb_reshape_without_permute),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "folds 1/sqrt(d_head) into w_q_latent, but the contract keeps the scale out: the "
          "scores divide by sqrt(d_head) afterwards", absorb_keeps_scale),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "computes d_head = d_model // num_heads instead of w_q.shape[1] // num_heads, so the "
          "per-head column slices are the wrong width when H*d_head != d_model",
          absorb_dhead_from_dmodel),
    Entry("absorb_mla_weights", "wrong", "cat_instead_of_stack",
          "joins the per-head products with torch.cat, giving (H*d_model, d_c) instead of "
          "stacking them on a new head axis (H, d_model, d_c)", absorb_cat_not_stack),
    Entry("absorb_mla_weights", "wrong", "w_uk_slice_starts_at_h",
          "slices w_uk[:, h:h + d_head] instead of w_uk[:, h*d_head:(h+1)*d_head], so every "
          "head after the first reads the wrong key columns", absorb_uk_slice_start),
    Entry("absorb_mla_weights", "wrong", "heads_not_separated",
          "multiplies the full matrices w_q @ w_uk.T and w_uv @ w_o and copies the result to "
          "every head, which adds the cross terms between different heads",
          absorb_all_heads_mixed),
    Entry("absorb_mla_weights", "right", "einsum_head_axis", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "sum_of_outer_products_float64", None,
          absorb_outer_sums_float64),
]
