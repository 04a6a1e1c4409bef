"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- mla_kv_cache_bytes
def cache_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * per_token * seq_len * batch_size


def cache_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def cache_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 8 * bytes_per_element
    return bits / 8


def cache_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def cache_latent_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent_bytes = kv_lora_rank * bytes_per_element
    return num_layers * latent_bytes * seq_len * batch_size


def cache_bits_per_element(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    width = kv_lora_rank + rope_head_dim
    return num_layers * width * seq_len * batch_size * (8 * bytes_per_element)


def cache_sum_over_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    per_layer = (kv_lora_rank + rope_head_dim) * bytes_per_element * seq_len * batch_size
    return sum(per_layer for _ in range(num_layers))


def cache_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return math.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element])


# ----------------------------------------------------------------------------- mla_attention

def mla_scale_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, D = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(D)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, dim=-1) @ v.to(ct)
    return o.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)

    q = heads(x @ w_q).float() if x.dtype != torch.float64 else heads(x @ w_q)
    k = heads(latent @ w_uk).to(q.dtype)
    v = heads(latent @ w_uk).to(q.dtype)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    ctx = scores.softmax(-1) @ v
    return ctx.transpose(1, 2).reshape(b, n, -1).to(x.dtype) @ w_o


def mla_always_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    hd = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = (x @ w_dkv).to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(B, N, num_heads, hd).permute(0, 2, 1, 3)
    k = (c @ w_uk.to(ct)).reshape(B, N, num_heads, hd).permute(0, 2, 1, 3)
    v = (c @ w_uv.to(ct)).reshape(B, N, num_heads, hd).permute(0, 2, 1, 3)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return ctx.permute(0, 2, 1, 3).reshape(B, N, width).to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh).to(ct)
    k = (c @ w_uk).reshape(B, num_heads, N, dh).to(ct)
    v = (c @ w_uv).reshape(B, num_heads, N, dh).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    o = torch.softmax(s, -1) @ v
    return o.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


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
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-2)
    p = torch.nan_to_num(p)
    o = p @ v
    return o.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, -1) @ v
    return o.transpose(1, 2).reshape(B, N, d_model).to(x.dtype) @ w_o


def mla_sdpa_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    hd = width // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()

    def split(t):
        return t.unflatten(-1, (num_heads, hd)).transpose(1, 2)

    q, k, v = split(x64 @ w_q.double()), split(c @ w_uk.double()), split(c @ w_uv.double())
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return (ctx.transpose(1, 2).flatten(2) @ w_o.double()).to(x.dtype)


def mla_absorbed_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    # attention from the latents alone, head by head, with folded weights
    B, N, d_model = x.shape
    hd = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    out = torch.zeros((B, N, d_model), dtype=torch.float64)
    allowed = torch.tril(torch.ones(N, N, dtype=torch.bool)) if causal else None
    for h in range(num_heads):
        cols = slice(h * hd, (h + 1) * hd)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        s = torch.einsum("bqc,bkc->bqk", x64 @ wq_lat, c) / math.sqrt(hd)
        if allowed is not None:
            s = s.masked_fill(~allowed, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += p @ c @ wo_lat
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- absorb_mla_weights
def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)
    uk_h = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    uv_h = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_transposed_product(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_uk[:, sl] @ w_q[:, sl].T)
        wo_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, num_heads, dh).transpose(0, 1)
    uk_h = w_uk.reshape(d_c, num_heads, dh).transpose(0, 1)
    uv_h = w_uv.reshape(d_c, num_heads, dh).transpose(0, 1)
    o_h = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = q_h @ uk_h.transpose(-1, -2) / math.sqrt(dh)
    return w_q_latent, uv_h @ o_h


def absorb_output_from_w_uk(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                      for h in range(num_heads)])
    os_ = torch.stack([w_uk[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
                       for h in range(num_heads)])
    return qs, os_


def absorb_stack_wrong_dim(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    a, b = [], []
    for h in range(num_heads):
        c0, c1 = h * dh, (h + 1) * dh
        a.append(w_q[:, c0:c1] @ w_uk[:, c0:c1].T)
        b.append(w_uv[:, c0:c1] @ w_o[c0:c1, :])
    return torch.stack(a, dim=1), torch.stack(b, dim=1)


def absorb_whole_matrices(w_uk, w_uv, w_q, w_o, num_heads):
    full_q = w_q @ w_uk.T  # (d_model, d_c)
    full_o = w_uv @ w_o  # (d_c, d_model)
    return (full_q.unsqueeze(0).expand(num_heads, -1, -1).clone(),
            full_o.unsqueeze(0).expand(num_heads, -1, -1).clone())


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.reshape(d_model, num_heads, dh)
    uk3 = w_uk.reshape(d_c, num_heads, dh)
    uv3 = w_uv.reshape(d_c, num_heads, dh)
    o3 = w_o.reshape(num_heads, dh, d_model)
    return (torch.einsum("mhe,che->hmc", q3, uk3), torch.einsum("che,hem->hcm", uv3, o3))


def absorb_loops_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    wq_lat = torch.zeros((num_heads, d_model, d_c), dtype=torch.float64)
    wo_lat = torch.zeros((num_heads, d_c, d_model), dtype=torch.float64)
    for h in range(num_heads):
        for e in range(h * dh, (h + 1) * dh):
            wq_lat[h] += torch.outer(w_q[:, e].double(), w_uk[:, e].double())
            wo_lat[h] += torch.outer(w_uv[:, e].double(), w_o[e, :].double())
    return wq_lat.to(w_q.dtype), wo_lat.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "multiplies by 2 for keys and values as in the ordinary KV cache, but MLA's latent "
          "already gives both: one latent plus one RoPE key per token and layer",
          cache_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_batch",
          "leaves batch_size out of the product", cache_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "float_from_division",
          "counts bits and divides by 8 with /, so it returns a float instead of a plain int",
          cache_via_bits),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so only the RoPE "
          "part is multiplied by tokens, batch and bytes: (kv_lora_rank + rope_head_dim) needs "
          "parentheses", cache_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "latent_only",
          "counts only the latent of kv_lora_rank values and forgets the shared RoPE key of "
          "rope_head_dim values per token and layer", cache_latent_only),
    Entry("mla_kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8 * bytes_per_element, returning bits instead of bytes",
          cache_bits_per_element),
    Entry("mla_kv_cache_bytes", "right", "sum_over_layers", None, cache_sum_over_layers),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, cache_math_prod),

    Entry("mla_attention", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head); here num_heads * "
          "d_head need not equal d_model and d_head is what the dot products sum over",
          mla_scale_d_model),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "up-projects the values with w_uk (copied from the keys' line) instead of w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "always_causal",
          "passes is_causal=True to scaled_dot_product_attention whatever causal says, so "
          "causal=False still masks the future", mla_always_causal),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits the heads with reshape(B, H, N, d_head) straight from (B, N, H * d_head), "
          "which mixes tokens and heads; it needs reshape(B, N, H, d_head).transpose(1, 2)",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads, but in MLA num_heads * d_head need not equal "
          "d_model: d_head is w_q.shape[1] // num_heads (a reshape error or wrong heads)",
          mla_d_head_from_d_model),
    Entry("mla_attention", "right", "sdpa_float64", None, mla_sdpa_float64),
    Entry("mla_attention", "right", "absorbed_per_head", None, mla_absorbed_per_head),

    Entry("absorb_mla_weights", "wrong", "strided_head_columns",
          "splits the heads with reshape(d, d_head, H), so head h gets the strided columns "
          "h, h + H, ... instead of the contiguous block h*d_head:(h+1)*d_head",
          absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "product_order_swapped",
          "computes w_uk_h @ w_q_h.T, the transpose (d_c, d_model) of w_q_latent[h] instead of "
          "w_q_h @ w_uk_h.T", absorb_transposed_product),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "divides w_q_latent by sqrt(d_head), but the scale stays out of the absorbed weights: "
          "the scores apply it afterwards", absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "output_from_w_uk",
          "builds w_o_latent from w_uk_h @ w_o_h instead of w_uv_h @ w_o_h (keys' weight reused "
          "for the values)", absorb_output_from_w_uk),
    Entry("absorb_mla_weights", "wrong", "stacked_on_dim_1",
          "stacks the per-head matrices with torch.stack(..., dim=1), giving (d_model, H, d_c) "
          "and (d_c, H, d_model) instead of a leading head axis", absorb_stack_wrong_dim),
    Entry("absorb_mla_weights", "wrong", "whole_matrices_per_head",
          "uses the whole products w_q @ w_uk.T and w_uv @ w_o for every head, which adds the "
          "cross-head terms instead of keeping head h's columns only", absorb_whole_matrices),
    Entry("absorb_mla_weights", "right", "einsum", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "outer_product_loops", None, absorb_loops_float64),
]
