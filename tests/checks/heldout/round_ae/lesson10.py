"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ mla_kv_cache_bytes
# ---------------------------------------------------------------------------- wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element  # keys and values
    return num_layers * per_token * seq_len * batch_size


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return num_layers * latent * seq_len * batch_size


def mla_bytes_numpy_int(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    width = kv_lora_rank + rope_head_dim
    tokens = seq_len
    return num_layers * width * tokens * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    bits_per_value = 8 * bytes_per_element
    values = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return values * bits_per_value


# ---------------------------------------------------------------------------- right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        total += (kv_lora_rank + rope_head_dim) * bytes_per_element
    return total * seq_len * batch_size


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    tokens = seq_len * batch_size
    per_token_all_layers = (kv_lora_rank + rope_head_dim) * num_layers
    return int(functools.reduce(operator.mul, (tokens, per_token_all_layers,
                                               bytes_per_element), 1))


# ============================================================================ mla_attention
# ---------------------------------------------------------------------------- wrong
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
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


def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv

    def heads(t):
        return t.view(batch, n, num_heads, d_head).permute(0, 2, 1, 3).to(f)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    scores = q @ k.transpose(-1, -2) * d_head ** -0.5
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                    float("-inf"))
    out = torch.softmax(scores, -1) @ v
    return out.permute(0, 2, 1, 3).reshape(batch, n, -1).to(x.dtype) @ w_o


def mla_mask_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    split = lambda t: t.reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool))  # keys j >= i
        scores = scores.masked_fill(future, -math.inf)
    m = scores.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(scores - m)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    ctx = torch.einsum("bhqk,bhkd->bhqd", w, v)
    return ctx.transpose(1, 2).reshape(B, N, width).to(x.dtype) @ w_o


def mla_reshape_no_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(b, num_heads, n, dh).to(ct)
    k = (c @ w_uk).reshape(b, num_heads, n, dh).to(ct)
    v = (c @ w_uv).reshape(b, num_heads, n, dh).to(ct)
    att = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        att = att.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), -math.inf)
    o = torch.softmax(att, dim=-1) @ v
    return o.reshape(b, n, num_heads * dh).to(x.dtype) @ w_o


def mla_values_from_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uk).view(B, N, num_heads, d_head).transpose(1, 2)
    out = F.scaled_dot_product_attention(q.to(ct), k.to(ct), v.to(ct), is_causal=causal)
    return out.transpose(1, 2).reshape(B, N, num_heads * d_head).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, H, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, H, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, H, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    p = torch.softmax(s, dim=-2)
    return (p @ v).transpose(1, 2).reshape(B, N, H * dh).to(x.dtype) @ w_o


# ---------------------------------------------------------------------------- right
def mla_sdpa_f32(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(f)
    c = xf @ w_dkv.to(f)

    def split(t):
        return t.unflatten(-1, (num_heads, dh)).transpose(1, 2)

    q, k, v = split(xf @ w_q.to(f)), split(c @ w_uk.to(f)), split(c @ w_uv.to(f))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # scale 1/sqrt(dh)
    return (ctx.transpose(1, 2).flatten(-2) @ w_o.to(f)).to(x.dtype)


def mla_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    c = xd @ w_dkv.double()
    allowed = torch.arange(n)[None, :] <= torch.arange(n)[:, None]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_h = xd @ w_q.double()[:, cols]
        k_h = c @ w_uk.double()[:, cols]
        v_h = c @ w_uv.double()[:, cols]
        s = torch.einsum("bid,bjd->bij", q_h, k_h) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(~allowed, float("-inf"))
        ctx = torch.einsum("bij,bjd->bid", torch.softmax(s, dim=-1), v_h)
        out += ctx @ w_o.double()[cols, :]  # each head's slice of the output projection
    return out.to(x.dtype)


# ============================================================================ absorb_mla_weights
# ---------------------------------------------------------------------------- wrong
def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    wuk = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wuv = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def absorb_q_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_uk[:, sl] @ w_q[:, sl].T)
        o_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    q_h = w_q.view(d_model, num_heads, d_head).transpose(0, 1)
    uk_h = w_uk.view(d_c, num_heads, d_head).transpose(0, 1)
    uv_h = w_uv.view(d_c, num_heads, d_head).transpose(0, 1)
    o_h = w_o.view(num_heads, d_head, d_model)
    w_q_latent = q_h @ uk_h.transpose(1, 2) / math.sqrt(d_head)
    return w_q_latent, uv_h @ o_h


def absorb_dhead_from_dmodel(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    wq_l = torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @ w_uk[:, h * d_head:(h + 1)
                                                                   * d_head].T
                        for h in range(num_heads)])
    wo_l = torch.stack([w_uv[:, h * d_head:(h + 1) * d_head] @ w_o[h * d_head:(h + 1) * d_head]
                        for h in range(num_heads)])
    return wq_l, wo_l


def absorb_across_heads(w_uk, w_uv, w_q, w_o, num_heads):
    w_q_latent = w_q @ w_uk.T  # (d_model, d_c)
    w_o_latent = w_uv @ w_o  # (d_c, d_model)
    return w_q_latent, w_o_latent


def absorb_stack_last(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    qs = [a @ b.T for a, b in zip(w_q.split(dh, dim=1), w_uk.split(dh, dim=1))]
    os_ = [a @ b for a, b in zip(w_uv.split(dh, dim=1), w_o.split(dh, dim=0))]
    return torch.stack(qs, dim=-1), torch.stack(os_, dim=-1)


# ---------------------------------------------------------------------------- right
def absorb_einsum_f64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    wq = w_q.double().reshape(d_model, num_heads, e)
    wuk = w_uk.double().reshape(d_c, num_heads, e)
    wuv = w_uv.double().reshape(d_c, num_heads, e)
    wo = w_o.double().reshape(num_heads, e, d_model)
    q_lat = torch.einsum("mhe,che->hmc", wq, wuk)
    o_lat = torch.einsum("che,hem->hcm", wuv, wo)
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


def absorb_chunk_loop(w_uk, w_uv, w_q, w_o, num_heads):
    ct = torch.promote_types(w_q.dtype, torch.float32)
    pieces = zip(torch.chunk(w_q.to(ct), num_heads, dim=1), torch.chunk(w_uk.to(ct), num_heads, 1),
                 torch.chunk(w_uv.to(ct), num_heads, 1), torch.chunk(w_o.to(ct), num_heads, 0))
    q_lat, o_lat = [], []
    for wq_h, wuk_h, wuv_h, wo_h in pieces:
        q_lat.append(torch.mm(wq_h, wuk_h.t()))
        o_lat.append(torch.mm(wuv_h, wo_h))
    return torch.stack(q_lat).to(w_q.dtype), torch.stack(o_lat).to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "multiplies by 2 for keys and values as in a standard KV cache, but MLA caches one "
          "latent from which both are rebuilt: the count is doubled",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "counts only the kv_lora_rank latent and leaves out the shared RoPE key of "
          "rope_head_dim values per token and layer",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int",
          "returns np.prod(...), a numpy.int64, where the contract asks for a plain Python int",
          mla_bytes_numpy_int),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch_size",
          "never multiplies by batch_size, so it counts one sequence whatever the batch",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so without "
          "parentheses only the RoPE term is scaled by tokens and bytes",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "counts_bits",
          "multiplies by 8 * bytes_per_element, counting bits instead of bytes",
          mla_bytes_bits),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "reduce_mul", None, mla_bytes_reduce),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads as in plain multi-head attention, but here "
          "num_heads * d_head need not equal d_model: the head split fails (raises) or uses the "
          "wrong width and scale",
          mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "mask_hides_diagonal",
          "masks torch.triu(ones) including the diagonal, so a query may not attend to its own "
          "key (j < i instead of j <= i) and the first query sees nothing",
          mla_mask_diagonal),
    Entry("mla_attention", "wrong", "split_without_transpose",
          "splits heads with reshape(B, num_heads, N, d_head) straight from (B, N, width) "
          "instead of reshape(B, N, num_heads, d_head).transpose(1, 2), mixing tokens and heads",
          mla_reshape_no_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "builds the values with c @ w_uk (copied from the keys line) instead of c @ w_uv",
          mla_values_from_uk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "applies the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa_f32),
    Entry("mla_attention", "right", "head_loop_float64", None, mla_head_loop_f64),

    Entry("absorb_mla_weights", "wrong", "strided_head_columns",
          "reshapes the width as (d_head, num_heads), so head h gets every num_heads-th column "
          "instead of the contiguous block h*d_head:(h+1)*d_head",
          absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "q_latent_transposed",
          "computes w_uk_h @ w_q_h.T instead of w_q_h @ w_uk_h.T, so w_q_latent comes out "
          "(num_heads, d_c, d_model)",
          absorb_q_transposed),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "folds 1/sqrt(d_head) into w_q_latent, but the contract keeps the scale out (the "
          "scores divide by sqrt(d_head) later)",
          absorb_scale_folded),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads instead of w_q.shape[1] // num_heads, so when "
          "num_heads * d_head != d_model the head slices are the wrong width",
          absorb_dhead_from_dmodel),
    Entry("absorb_mla_weights", "wrong", "absorbed_across_heads",
          "multiplies the whole matrices w_q @ w_uk.T and w_uv @ w_o, summing over all heads' "
          "columns, and returns 2-D matrices instead of one per head",
          absorb_across_heads),
    Entry("absorb_mla_weights", "wrong", "stacked_on_last_axis",
          "stacks the per-head products on the last axis (dim=-1), giving (d_model, d_c, H) "
          "instead of a leading head axis",
          absorb_stack_last),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_einsum_f64),
    Entry("absorb_mla_weights", "right", "chunk_loop_mm", None, absorb_chunk_loop),
]
