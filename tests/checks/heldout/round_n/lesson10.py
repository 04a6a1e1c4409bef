"""Lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ mla_kv_cache_bytes
def mla_bytes_times_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent_bytes = kv_lora_rank * bytes_per_element
    return num_layers * seq_len * batch_size * latent_bytes


def mla_bytes_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    values_per_token = num_layers * (kv_lora_rank + rope_head_dim)
    return values_per_token * seq_len * bytes_per_element


def mla_bytes_bf16_hardcoded(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    bf16 = 2
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bf16


def mla_bytes_right_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        per_layer = (kv_lora_rank * bytes_per_element + rope_head_dim * bytes_per_element)
        total += per_layer * seq_len * batch_size
    return total


def mla_bytes_right_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    factors = (int(num_layers), int(seq_len), int(batch_size), int(bytes_per_element))
    return functools.reduce(operator.mul, factors, 1) * (kv_lora_rank + rope_head_dim)


# ============================================================================ mla_attention
def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def mla_scale_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x.to(ct) @ w_dkv.to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv.to(ct)).reshape(B, N, num_heads, dh).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    out = ctx.transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o.to(ct)
    return out.to(x.dtype)


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)
    q = (xc @ w_q.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    w = scores.softmax(-1)
    return ((w @ v).transpose(1, 2).reshape(B, N, -1) @ w_o.to(ct)).to(x.dtype)


def mla_strict_lower_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    dh = w_q.shape[1] // num_heads
    c = x.to(ct) @ w_dkv.to(ct)
    q = _split(x.to(ct) @ w_q.to(ct), num_heads)
    k = _split(c @ w_uk.to(ct), num_heads)
    v = _split(c @ w_uv.to(ct), num_heads)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)
        s = s.masked_fill(~allowed, -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    ctx = (w @ v).transpose(1, 2).reshape(B, N, -1)
    return (ctx @ w_o.to(ct)).to(x.dtype)


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    dh = w_q.shape[1] // num_heads
    latent = x.to(ct) @ w_dkv.to(ct)
    q = _split(x.to(ct) @ w_q.to(ct), num_heads)
    k = _split(latent @ w_uk.to(ct), num_heads)
    v = _split(latent @ w_uk.to(ct), num_heads)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.arange(N)[None, :] > torch.arange(N)[:, None], -math.inf)
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bhqk,bhkd->bqhd", p, v).reshape(B, N, -1)
    return (ctx @ w_o.to(ct)).to(x.dtype)


def mla_mask_after_softmax(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    dh = w_q.shape[1] // num_heads
    c = x.to(ct) @ w_dkv.to(ct)
    q = _split(x.to(ct) @ w_q.to(ct), num_heads)
    k = _split(c @ w_uk.to(ct), num_heads)
    v = _split(c @ w_uv.to(ct), num_heads)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
    if causal:
        w = w * torch.tril(torch.ones(N, N, dtype=ct))  # zero the future weights
    ctx = (w @ v).transpose(1, 2).reshape(B, N, -1)
    return (ctx @ w_o.to(ct)).to(x.dtype)


def mla_interleaved_merge(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    dh = w_q.shape[1] // num_heads
    c = x.to(ct) @ w_dkv.to(ct)
    q = _split(x.to(ct) @ w_q.to(ct), num_heads)
    k = _split(c @ w_uk.to(ct), num_heads)
    v = _split(c @ w_uv.to(ct), num_heads)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v  # (B, H, N, dh)
    merged = ctx.permute(0, 2, 3, 1).reshape(B, N, -1)  # (B, N, dh, H) flattened
    return (merged @ w_o.to(ct)).to(x.dtype)


def mla_right_absorbed_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Absorbed form, head by head in float64: scores from the latents alone."""
    B, N, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    out = torch.zeros(B, N, d_model, dtype=torch.float64)
    future = torch.arange(N)[None, :] > torch.arange(N)[:, None]
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q.double()[:, cols] @ w_uk.double()[:, cols].T  # (d_model, d_c)
        wo_lat = w_uv.double()[:, cols] @ w_o.double()[cols, :]  # (d_c, d_model)
        s = (x64 @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)  # (B, N, N)
        if causal:
            s = s.masked_fill(future, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += p @ c @ wo_lat
    return out.to(x.dtype)


def mla_right_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    x64 = x.to(torch.float64)
    lat = torch.matmul(x64, w_dkv.to(torch.float64))
    q = torch.matmul(x64, w_q.to(torch.float64)).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = torch.matmul(lat, w_uk.to(torch.float64)).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    v = torch.matmul(lat, w_uv.to(torch.float64)).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    ctx = ctx.permute(0, 2, 1, 3).reshape(B, N, width)
    return torch.matmul(ctx, w_o.to(torch.float64)).to(x.dtype)


# ============================================================================ absorb_mla_weights
def absorb_head_fastest_reshape(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    wuk = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wuv = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)  # (H, dh, d_model)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_w_o_columns(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, sl] @ w_uk[:, sl].T)
        o_lat.append(w_uv[:, sl] @ w_o[:, sl])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = wq @ wuk.transpose(-2, -1) / math.sqrt(dh)  # fold the score scale in
    return w_q_latent, wuv @ wo


def absorb_stack_dim1(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    a, b = [], []
    for h in range(num_heads):
        lo, hi = h * dh, (h + 1) * dh
        a.append(torch.mm(w_q[:, lo:hi], w_uk[:, lo:hi].t()))
        b.append(torch.mm(w_uv[:, lo:hi], w_o[lo:hi, :]))
    return torch.stack(a, dim=1), torch.stack(b, dim=1)


def absorb_uk_uv_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    wq_l = torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @ w_uv[:, h * d_head:(h + 1) * d_head].T
                        for h in range(num_heads)])
    wo_l = torch.stack([w_uv[:, h * d_head:(h + 1) * d_head] @ w_o[h * d_head:(h + 1) * d_head]
                        for h in range(num_heads)])
    return wq_l, wo_l


def absorb_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[0] // num_heads  # meant: columns of w_q
    out_q, out_o = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        out_q.append(w_q[:, cols] @ w_uk[:, cols].T)
        out_o.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(out_q), torch.stack(out_o)


def absorb_right_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq_lat = torch.empty(num_heads, d_model, d_c, dtype=torch.float64)
    wo_lat = torch.empty(num_heads, d_c, d_model, dtype=torch.float64)
    for h in range(num_heads):
        cols = list(range(h * dh, (h + 1) * dh))
        wq_h = w_q.double()[:, cols]
        wuk_h = w_uk.double()[:, cols]
        wuv_h = w_uv.double()[:, cols]
        wo_h = w_o.double()[cols, :]
        for m in range(d_model):
            wq_lat[h, m] = (wq_h[m][None, :] * wuk_h).sum(dim=1)
        wo_lat[h] = wuv_h @ wo_h
    return wq_lat.to(w_q.dtype), wo_lat.to(w_o.dtype)


def absorb_right_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q4 = w_q.view(d_model, num_heads, dh)
    k4 = w_uk.view(d_c, num_heads, dh)
    v4 = w_uv.view(d_c, num_heads, dh)
    o4 = w_o.view(num_heads, dh, d_model)
    return (torch.einsum("mhe,che->hmc", q4, k4), torch.einsum("che,hem->hcm", v4, o4))


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "Multiplies the per-token values by 2 for a key and a value cache, as for an ordinary "
          "KV cache, though MLA caches one latent (plus one RoPE key) per token.",
          mla_bytes_times_two),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "Counts only the kv_lora_rank latent values and leaves out the shared RoPE key of "
          "rope_head_dim values per token.", mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int_return",
          "Returns np.prod of the factors, a numpy int64, instead of a plain Python int.",
          mla_bytes_numpy_prod),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "Writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so without "
          "parentheses only the RoPE part is multiplied by the tokens, batch and bytes.",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch_size",
          "Leaves batch_size out of the product, giving the cache of one sequence whatever the "
          "batch.", mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "hardcodes_two_bytes",
          "Hard-codes 2 bytes per element (bf16) instead of using bytes_per_element.",
          mla_bytes_bf16_hardcoded),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_right_loop),
    Entry("mla_kv_cache_bytes", "right", "reduce_mul", None, mla_bytes_right_reduce),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "Scales the scores by 1/sqrt(d_c), the width of the latent, instead of "
          "1/sqrt(d_head), the width of each head's keys.", mla_scale_latent_width),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "Takes d_head = d_model // num_heads, so when num_heads * d_head != d_model the head "
          "split fails with a view error (it is only right when the widths happen to agree).",
          mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "strictly_lower_mask",
          "Builds the causal mask with tril(diagonal=-1), so no query may attend to its own "
          "key and the first query gets a row of zeros.", mla_strict_lower_mask),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "Computes the values with c @ w_uk (copy-pasted from the keys) instead of c @ w_uv.",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "mask_after_softmax",
          "Applies the causal mask by zeroing the future weights after the softmax, so the "
          "remaining weights of each row no longer sum to 1.", mla_mask_after_softmax),
    Entry("mla_attention", "wrong", "interleaved_head_merge",
          "Merges the heads with permute(0, 2, 3, 1), laying the features out as (d_head, H) "
          "instead of (H, d_head), so they no longer line up with the head-ordered rows of "
          "w_o.", mla_interleaved_merge),
    Entry("mla_attention", "right", "absorbed_per_head_float64", None, mla_right_absorbed_loop),
    Entry("mla_attention", "right", "sdpa_float64", None, mla_right_sdpa),

    Entry("absorb_mla_weights", "wrong", "head_index_fastest_reshape",
          "Reshapes the width axis as (d_head, H), so head h gets the interleaved columns "
          "h, h + H, ... instead of the contiguous block h*d_head:(h+1)*d_head.",
          absorb_head_fastest_reshape),
    Entry("absorb_mla_weights", "wrong", "w_o_columns_not_rows",
          "Slices head h's block out of the columns of w_o instead of its rows, which only "
          "works with one head and otherwise fails with a shape error.", absorb_w_o_columns),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "Divides w_q_latent by sqrt(d_head), folding the score scale into the weights that "
          "the contract keeps unscaled.", absorb_scale_folded),
    Entry("absorb_mla_weights", "wrong", "stack_on_dim1",
          "Stacks the per-head matrices with torch.stack(..., dim=1), giving (d_model, H, d_c) "
          "and (d_c, H, d_model) instead of the head axis first.", absorb_stack_dim1),
    Entry("absorb_mla_weights", "wrong", "w_uv_in_query_latent",
          "Builds w_q_latent[h] from w_uv_h instead of w_uk_h (the value up-projection where "
          "the key one belongs).", absorb_uk_uv_swapped),
    Entry("absorb_mla_weights", "wrong", "d_head_from_w_q_rows",
          "Computes d_head from w_q.shape[0] (d_model) instead of w_q.shape[1], so whenever "
          "num_heads * d_head != d_model the head blocks are sliced at the wrong columns.",
          absorb_d_head_from_rows),
    Entry("absorb_mla_weights", "right", "row_by_row_float64", None, absorb_right_loop_float64),
    Entry("absorb_mla_weights", "right", "view_einsum", None, absorb_right_einsum),
]
