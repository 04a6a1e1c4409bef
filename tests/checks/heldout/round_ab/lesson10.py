"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ mla_kv_cache_bytes
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_numpy_int(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    factors = [num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element]
    return np.prod(factors)


def mla_bytes_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    bits = bytes_per_element  # bits per element
    elements = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return elements * bits // 8


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    latent = num_layers * kv_lora_rank * seq_len
    rope = num_layers * rope_head_dim * seq_len
    return (latent + rope) * bytes_per_element


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = num_layers * kv_lora_rank + rope_head_dim  # the RoPE key is shared
    return per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mla_bytes_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return int(math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                          bytes_per_element)))


# ============================================================================ mla_attention
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    s = q @ k.transpose(-1, -2) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2).to(ct)

    c = x @ w_dkv
    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    o = torch.softmax(s, -1) @ v
    return o.transpose(1, 2).reshape(b, n, -1).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv
    q = (x @ w_q).reshape(b, n, num_heads, dh).permute(0, 2, 1, 3).to(ct)
    k = (latent @ w_uk).reshape(b, n, num_heads, dh).permute(0, 2, 1, 3).to(ct)
    v = (latent @ w_uk).reshape(b, n, num_heads, dh).permute(0, 2, 1, 3).to(ct)
    att = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dh)
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        att = att.masked_fill(~keep, float("-inf"))
    ctx = torch.einsum("bhij,bhjd->bhid", att.softmax(-1), v)
    return ctx.permute(0, 2, 1, 3).reshape(b, n, width).to(x.dtype) @ w_o


def mla_strict_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    split = lambda t: t.view(B, N, num_heads, dh).transpose(1, 2).to(ct)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        blocked = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=0)
        s = s.masked_fill(blocked, -math.inf)
    p = torch.softmax(s, dim=-1)
    p = torch.nan_to_num(p, nan=0.0)
    return (p @ v).transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_merge_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(scores, dim=-1) @ v  # (B, H, N, dh)
    return ctx.reshape(B, N, width).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    w = torch.softmax(s, dim=-2)
    w = torch.nan_to_num(w, nan=0.0)
    return (w @ v).transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_sdpa_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    q = (x64 @ w_q.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (c @ w_uk.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    v = (c @ w_uv.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = ctx.transpose(1, 2).flatten(2) @ w_o.double()
    return out.to(x.dtype)


def mla_absorbed_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention computed from the latents alone: fold w_uk into w_q, w_uv into w_o."""
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    out = 0
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        s = (x64 @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)  # (B, N, N)
        if causal:
            future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
            s = s.masked_fill(future, float("-inf"))
        out = out + torch.softmax(s, dim=-1) @ c @ wo_lat
    return out.to(x.dtype)


# ============================================================================ absorb_mla_weights
def absorb_product_order(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        qs.append(w_uk[:, sl] @ w_q[:, sl].T)
        os_.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = wq @ wk.transpose(1, 2) / math.sqrt(dh)
    return w_q_latent, wv @ wo


def absorb_head_index_last(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, dh, num_heads)
    wk = w_uk.reshape(d_c, dh, num_heads)
    wv = w_uv.reshape(d_c, dh, num_heads)
    wo = w_o.reshape(dh, num_heads, d_model)
    w_q_latent = torch.einsum("mdh,cdh->hmc", wq, wk)
    w_o_latent = torch.einsum("cdh,dhm->hcm", wv, wo)
    return w_q_latent, w_o_latent


def absorb_sums_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh)
    wk = w_uk.reshape(d_c, num_heads, dh)
    wv = w_uv.reshape(d_c, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return torch.einsum("mhd,chd->mc", wq, wk), torch.einsum("chd,hdm->cm", wv, wo)


def absorb_output_from_w_uk(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        a, b = h * dh, (h + 1) * dh
        q_lat.append(w_q[:, a:b] @ w_uk[:, a:b].T)
        o_lat.append(w_uk[:, a:b] @ w_o[a:b])
    return torch.stack(q_lat, 0), torch.stack(o_lat, 0)


def absorb_d_head_from_w_o_cols(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_o.shape[1] // num_heads
    q_lat = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                         for h in range(num_heads)])
    o_lat = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :]
                         for h in range(num_heads)])
    return q_lat, o_lat


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    dh = width // num_heads
    wq = w_q.view(d_model, num_heads, dh)
    wk = w_uk.view(-1, num_heads, dh)
    wv = w_uv.view(-1, num_heads, dh)
    wo = w_o.view(num_heads, dh, -1)
    return torch.einsum("mhd,chd->hmc", wq, wk), torch.einsum("chd,hdm->hcm", wv, wo)


def absorb_chunk_loop_f64(w_uk, w_uv, w_q, w_o, num_heads):
    wq_h = torch.chunk(w_q.double(), num_heads, dim=1)
    wk_h = torch.chunk(w_uk.double(), num_heads, dim=1)
    wv_h = torch.chunk(w_uv.double(), num_heads, dim=1)
    wo_h = torch.chunk(w_o.double(), num_heads, dim=0)
    q_lat = torch.stack([a @ b.transpose(0, 1) for a, b in zip(wq_h, wk_h)])
    o_lat = torch.stack([a @ b for a, b in zip(wv_h, wo_h)])
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


C = "mla_kv_cache_bytes"
M = "mla_attention"
W = "absorb_mla_weights"
ENTRIES = [
    Entry(C, "wrong", "counts_k_and_v",
          "multiplies by 2 for keys and values as in the ordinary KV cache, but MLA caches "
          "one latent from which both are recomputed", mla_bytes_k_and_v),
    Entry(C, "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without "
          "parentheses only the RoPE key is multiplied by tokens and bytes",
          mla_bytes_precedence),
    Entry(C, "wrong", "returns_numpy_int",
          "returns np.prod(...), a numpy integer, where the contract asks for a plain Python "
          "int", mla_bytes_numpy_int),
    Entry(C, "wrong", "bytes_taken_as_bits",
          "treats bytes_per_element as bits and divides by 8, so the result is 8 times too "
          "small", mla_bytes_bits),
    Entry(C, "wrong", "forgets_batch",
          "never multiplies by batch_size: counts one sequence only", mla_bytes_no_batch),
    Entry(C, "wrong", "rope_key_once_for_all_layers",
          "adds the shared RoPE key once for the whole model instead of once per layer (it "
          "is shared by the heads, not by the layers)", mla_bytes_rope_once),
    Entry(C, "right", "loop_over_layers", None, mla_bytes_layer_loop),
    Entry(C, "right", "math_prod", None, mla_bytes_math_prod),
    Entry(M, "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry(M, "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads, which is wrong when num_heads * d_head != "
          "d_model (the reshape into heads then fails)", mla_d_head_from_d_model),
    Entry(M, "wrong", "values_from_w_uk",
          "computes the values as c @ w_uk (the key up-projection) instead of c @ w_uv",
          mla_values_from_w_uk),
    Entry(M, "wrong", "causal_mask_hides_diagonal",
          "builds the causal mask with triu(diagonal=0), which also hides key j = i, so each "
          "query misses itself (and query 0 sees nothing)", mla_strict_causal),
    Entry(M, "wrong", "merge_without_transpose",
          "merges the heads with ctx.reshape(B, N, H * d_head) straight from (B, H, N, "
          "d_head) without transposing back, mixing heads and positions",
          mla_merge_without_transpose),
    Entry(M, "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of the keys",
          mla_softmax_over_queries),
    Entry(M, "right", "sdpa_float64", None, mla_sdpa_float64),
    Entry(M, "right", "absorbed_per_head_loop", None, mla_absorbed_per_head),
    Entry(W, "wrong", "product_order_swapped",
          "computes w_uk_h @ w_q_h.T instead of w_q_h @ w_uk_h.T, giving (d_c, d_model) "
          "blocks, the transpose of what is asked", absorb_product_order),
    Entry(W, "wrong", "scale_folded_in",
          "divides w_q_latent by sqrt(d_head); the contract keeps the scale out of the "
          "absorbed weights (it is applied to the scores)", absorb_scale_folded),
    Entry(W, "wrong", "head_axis_last_in_reshape",
          "reshapes the width as (d_head, num_heads), so head h takes every num_heads-th "
          "column instead of the block h*d_head:(h+1)*d_head", absorb_head_index_last),
    Entry(W, "wrong", "sums_over_heads",
          "sums the per-head products over h in the einsum, returning one (d_model, d_c) "
          "and one (d_c, d_model) matrix instead of stacking them per head",
          absorb_sums_heads),
    Entry(W, "wrong", "output_from_w_uk",
          "builds w_o_latent[h] from w_uk_h @ w_o_h: the key up-projection where w_uv_h "
          "belongs", absorb_output_from_w_uk),
    Entry(W, "wrong", "d_head_from_w_o_columns",
          "takes d_head = w_o.shape[1] // num_heads, but w_o's columns are d_model; its "
          "rows (num_heads * d_head) give the width", absorb_d_head_from_w_o_cols),
    Entry(W, "right", "einsum_views", None, absorb_einsum),
    Entry(W, "right", "chunk_loop_float64", None, absorb_chunk_loop_f64),
]
