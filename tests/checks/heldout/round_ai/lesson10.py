"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------- mla_kv_cache_bytes
def mla_bytes_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # a key and a value
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_hardcoded_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    numbers = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return numbers * 2  # bf16


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    # the RoPE key is shared, so it is stored once
    per_token = num_layers * kv_lora_rank + rope_head_dim
    return per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    rope = rope_head_dim * bytes_per_element
    return (latent + rope) * num_layers * seq_len


def mla_bytes_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_right_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        per_layer_token = kv_lora_rank * bytes_per_element + rope_head_dim * bytes_per_element
        total += per_layer_token * seq_len * batch_size
    return total


def mla_bytes_right_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1))


# ----------------------------------------------------------------- mla_attention
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, -1).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, -1).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, -1).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = (torch.softmax(s, dim=-1) @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_masks_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        blocked = torch.triu(torch.ones(N, N, dtype=torch.bool))
        scores = scores.masked_fill(blocked, float("-inf"))
    w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    out = (w @ v).to(x.dtype).transpose(1, 2).reshape(B, N, num_heads * d_head)
    return out @ w_o


def mla_reshape_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
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
    o = torch.softmax(s, -1) @ v
    return o.reshape(B, N, width).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    lat = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).permute(0, 2, 1, 3).to(ct)
    k = (lat @ w_uk).reshape(B, N, num_heads, d_head).permute(0, 2, 1, 3).to(ct)
    v = (lat @ w_uv).reshape(B, N, num_heads, d_head).permute(0, 2, 1, 3).to(ct)
    s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    p = torch.softmax(s, dim=-2)
    out = torch.matmul(p, v).permute(0, 2, 1, 3).reshape(B, N, -1).to(x.dtype)
    return out @ w_o


def mla_mask_fill_zero(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    def split_heads(t):
        return t.unflatten(-1, (num_heads, d_head)).transpose(1, 2).to(ct)

    q, k, v = split_heads(x @ w_q), split_heads(c @ w_uk), split_heads(c @ w_uv)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), 0.0)
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_right_sdpa_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    c = xd @ w_dkv.double()
    B, N, _ = x.shape
    width = w_q.shape[1]

    def split(t):
        return t.view(B, N, num_heads, width // num_heads).transpose(1, 2)

    q, k, v = split(xd @ w_q.double()), split(c @ w_uk.double()), split(c @ w_uv.double())
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    merged = ctx.transpose(1, 2).reshape(B, N, width)
    return (merged @ w_o.double()).to(x.dtype)


def mla_right_head_loop_einsum(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    width = w_q.shape[1]
    dh = width // num_heads
    n = x.shape[1]
    x64 = x.to(torch.float64)
    lat = torch.einsum("bnm,mc->bnc", x64, w_dkv.to(torch.float64))
    allowed = torch.arange(n)[None, :] <= torch.arange(n)[:, None]
    result = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = torch.einsum("bnm,md->bnd", x64, w_q[:, cols].to(torch.float64))
        kh = torch.einsum("bnc,cd->bnd", lat, w_uk[:, cols].to(torch.float64))
        vh = torch.einsum("bnc,cd->bnd", lat, w_uv[:, cols].to(torch.float64))
        sc = torch.einsum("bid,bjd->bij", qh, kh) / dh ** 0.5
        if causal:
            sc = torch.where(allowed, sc, torch.tensor(-math.inf, dtype=torch.float64))
        pr = torch.softmax(sc, dim=-1)
        oh = torch.einsum("bij,bjd->bid", pr, vh)
        result = result + torch.einsum("bid,dm->bim", oh, w_o[cols].to(torch.float64))
    return result.to(x.dtype)


# ----------------------------------------------------------------- absorb_mla_weights
def absorb_missing_transpose(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_q[:, sl] @ w_uk[:, sl])
        wo_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_head_fastest_split(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    wuk = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)  # (H, d_c, dh)
    wuv = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)  # (H, dh, d_model)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).transpose(0, 1)
    wuk = w_uk.reshape(d_c, num_heads, dh).transpose(0, 1)
    wuv = w_uv.reshape(d_c, num_heads, dh).transpose(0, 1)
    wo = w_o.reshape(num_heads, dh, d_model)
    q_lat = wq @ wuk.transpose(-1, -2) / math.sqrt(dh)  # fold the 1/sqrt(d_head) in
    return q_lat, wuv @ wo


def absorb_w_uk_in_output(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_parts, o_parts = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_parts.append(w_q[:, cols] @ w_uk[:, cols].T)
        o_parts.append(w_uk[:, cols] @ w_o[cols, :])
    return torch.stack(q_parts, 0), torch.stack(o_parts, 0)


def absorb_einsum_output_order(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    dh = width // num_heads
    q3 = w_q.reshape(d_model, num_heads, dh)
    k3 = w_uk.reshape(d_c, num_heads, dh)
    v3 = w_uv.reshape(d_c, num_heads, dh)
    o3 = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = torch.einsum("mhd,chd->hcm", q3, k3)
    w_o_latent = torch.einsum("chd,hdm->hcm", v3, o3)
    return w_q_latent, w_o_latent


def absorb_d_head_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        a, b = h * d_head, (h + 1) * d_head
        q_lat.append(w_q[:, a:b] @ w_uk[:, a:b].transpose(0, 1))
        o_lat.append(w_uv[:, a:b] @ w_o[a:b])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_right_loop(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                         for h in range(num_heads)])
    o_lat = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :]
                         for h in range(num_heads)])
    return q_lat, o_lat


def absorb_right_einsum64(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    dh = width // num_heads
    dt = w_q.dtype
    q3 = w_q.double().reshape(d_model, num_heads, dh)
    k3 = w_uk.double().reshape(d_c, num_heads, dh)
    v3 = w_uv.double().reshape(d_c, num_heads, dh)
    o3 = w_o.double().reshape(num_heads, dh, d_model)
    return (torch.einsum("mhd,chd->hmc", q3, k3).to(dt),
            torch.einsum("chd,hdm->hcm", v3, o3).to(dt))


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "counts the latent and RoPE key twice, once for keys and once for values, but MLA "
          "recomputes both from the same cached latent (no factor 2)", mla_bytes_factor_two),
    Entry("mla_kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "multiplies by a hard-coded 2 bytes (bf16) instead of bytes_per_element",
          mla_bytes_hardcoded_bf16),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so only the RoPE "
          "key is multiplied by tokens and bytes: (kv_lora_rank + rope_head_dim) needs "
          "parentheses", mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_counted_once",
          "reads 'shared' as shared across layers and adds the RoPE key once per token "
          "instead of once per layer and token (it is shared by the heads, not the layers)",
          mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_batch",
          "never multiplies by batch_size, counting one sequence only", mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int",
          "computes the product with np.prod and returns a numpy.int64, not the plain Python "
          "int the lesson asks for", mla_bytes_numpy_prod),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_right_loop),
    Entry("mla_kv_cache_bytes", "right", "reduce_mul", None, mla_bytes_right_reduce),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "mask_hides_diagonal",
          "blocks torch.triu(ones) including the diagonal, so a query cannot see its own key "
          "(triu(..., 1) belongs there) and the first row gets no key at all",
          mla_masks_diagonal),
    Entry("mla_attention", "wrong", "heads_reshaped_without_transpose",
          "reshapes (B, N, H*d_head) straight to (B, H, N, d_head) (and back) without the "
          "transpose, which mixes tokens and heads", mla_reshape_without_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "makes the values with w_uk (copied from the keys line) instead of w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "masked_fill_zero",
          "fills the masked scores with 0 instead of -inf, so future keys still get weight "
          "exp(0) in the softmax", mla_mask_fill_zero),
    Entry("mla_attention", "right", "sdpa_float64", None, mla_right_sdpa_float64),
    Entry("mla_attention", "right", "head_loop_einsum", None, mla_right_head_loop_einsum),

    Entry("absorb_mla_weights", "wrong", "w_uk_not_transposed",
          "multiplies w_q_h @ w_uk_h without the .T: a shape error unless d_head == d_c, and "
          "then the wrong product", absorb_missing_transpose),
    Entry("absorb_mla_weights", "wrong", "head_index_fastest",
          "splits the columns with reshape(..., d_head, num_heads), so head h gets every "
          "num_heads-th column instead of the block h*d_head:(h+1)*d_head",
          absorb_head_fastest_split),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "divides w_q_latent by sqrt(d_head), although the contract keeps the scale out of "
          "the absorbed weights", absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w_uk_in_output",
          "builds w_o_latent from w_uk_h @ w_o_h (the key up-projection) instead of "
          "w_uv_h @ w_o_h", absorb_w_uk_in_output),
    Entry("absorb_mla_weights", "wrong", "einsum_output_transposed",
          "writes the einsum outputs as 'hcm', giving w_q_latent (H, d_c, d_model), the "
          "transpose of (H, d_model, d_c)", absorb_einsum_output_order),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads instead of w_q.shape[1] // num_heads, wrong "
          "whenever num_heads * d_head != d_model", absorb_d_head_from_d_model),
    Entry("absorb_mla_weights", "right", "list_comprehension", None, absorb_right_loop),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_right_einsum64),
]
