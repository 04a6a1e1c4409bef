"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ================================================================== mla_kv_cache_bytes: wrong
def cache_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # keys and values
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def cache_bytes_latent_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    elements = num_layers * kv_lora_rank * seq_len * batch_size
    return elements * bytes_per_element


def cache_bytes_bf16_hardcoded(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    bf16 = 2
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bf16


def cache_bytes_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def cache_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def cache_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_layer_token = (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_layer_token * num_layers * seq_len


# ================================================================== mla_kv_cache_bytes: right
def cache_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = batch_size * seq_len * kv_lora_rank * bytes_per_element
        rope_key = batch_size * seq_len * rope_head_dim * bytes_per_element
        total += latent + rope_key
    return total


def cache_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    bits = 8 * bytes_per_element
    tokens = seq_len * batch_size
    return int(math.prod((num_layers, tokens, kv_lora_rank + rope_head_dim, bits)) // 8)


# ======================================================================= mla_attention: wrong
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_head_dim_from_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv

    def heads(t):
        return t.reshape(batch, n, num_heads, d_head).transpose(1, 2).to(compute)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    out = (w @ v).to(x.dtype).transpose(1, 2).reshape(batch, n, num_heads * d_head)
    return out @ w_o


def mla_mask_hides_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    ct = torch.promote_types(x.dtype, torch.float32)
    lat = x @ w_dkv
    q = (x @ w_q).reshape(B, N, H, dh).permute(0, 2, 1, 3).to(ct)
    k = (lat @ w_uk).reshape(B, N, H, dh).permute(0, 2, 1, 3).to(ct)
    v = (lat @ w_uv).reshape(B, N, H, dh).permute(0, 2, 1, 3).to(ct)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool))
        s = s.masked_fill(future, -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # query 0 may see no key
    e = torch.exp(s - m)
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    o = torch.matmul(p, v).to(x.dtype).permute(0, 2, 1, 3).reshape(B, N, H * dh)
    return o @ w_o


def mla_reshape_no_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(b, num_heads, n, d_head).to(compute)
    k = (c @ w_uk).reshape(b, num_heads, n, d_head).to(compute)
    v = (c @ w_uv).reshape(b, num_heads, n, d_head).to(compute)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    ctx = (torch.softmax(scores, dim=-1) @ v).to(x.dtype)
    return ctx.reshape(b, n, num_heads * d_head) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)  # noqa: E731
    q = split(x @ w_q)
    k = split(c @ w_uk)
    v = split(c @ w_uk)
    s = q @ k.transpose(-2, -1) * d_head ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, width) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    p = torch.softmax(s, dim=-2)
    ctx = (p @ v).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


# ======================================================================= mla_attention: right
def mla_absorbed_per_head_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Loop over heads, scores straight from the latents: (x W_q,h W_uk,h^T) c^T."""
    xd = x.double()
    c = xd @ w_dkv.double()  # (B, N, d_c)
    width = w_q.shape[1]
    dh = width // num_heads
    n = x.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q.double()[:, cols] @ w_uk.double()[:, cols].T  # (d_model, d_c)
        wo_lat = w_uv.double()[:, cols] @ w_o.double()[cols, :]  # (d_c, d_model)
        s = (xd @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)  # (B, N, N)
        if causal:
            s = s + torch.full((n, n), -math.inf, dtype=torch.float64).triu(1)
        p = torch.softmax(s, dim=-1)
        out += p @ c @ wo_lat
    return out.to(x.dtype)


def mla_sdpa_float32(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    xf = x.float()
    c = xf @ w_dkv.float()
    q = torch.einsum("bnm,mhd->bhnd", xf, w_q.float().view(-1, num_heads, d_head))
    k = torch.einsum("bnc,chd->bhnd", c, w_uk.float().view(-1, num_heads, d_head))
    v = torch.einsum("bnc,chd->bhnd", c, w_uv.float().view(-1, num_heads, d_head))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # scale 1/sqrt(d_head)
    out = torch.einsum("bhnd,hdm->bnm", ctx, w_o.float().view(num_heads, d_head, -1))
    return out.to(x.dtype)


# ================================================================== absorb_mla_weights: wrong
def absorb_q_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_uk[:, sl] @ w_q[:, sl].T)  # (d_c, d_model)
        o_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_wo_heads_interleaved(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_head = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.reshape(d_model, num_heads, d_head).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    wo = w_o.reshape(d_head, num_heads, d_model).permute(1, 0, 2)  # mirrors the column split
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_head = width // num_heads
    d_model = w_q.shape[0]
    q_heads = w_q.view(d_model, num_heads, d_head)
    k_heads = w_uk.view(d_c, num_heads, d_head)
    v_heads = w_uv.view(d_c, num_heads, d_head)
    o_heads = w_o.view(num_heads, d_head, d_model)
    w_q_latent = torch.einsum("mhd,chd->hmc", q_heads, k_heads) / math.sqrt(d_head)
    w_o_latent = torch.einsum("chd,hdm->hcm", v_heads, o_heads)
    return w_q_latent, w_o_latent


def absorb_whole_matrices(w_uk, w_uv, w_q, w_o, num_heads):
    # every head's query with every head's key: the up-projections folded in once
    w_q_latent = w_q @ w_uk.T  # (d_model, d_c)
    w_o_latent = w_uv @ w_o  # (d_c, d_model)
    return w_q_latent, w_o_latent


def absorb_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq_h = w_q.reshape(d_model, num_heads, dh).transpose(0, 1)
    wuk_h = w_uk.reshape(d_c, num_heads, dh).transpose(0, 1)
    wo_h = w_o.reshape(num_heads, dh, d_model)
    return torch.bmm(wq_h, wuk_h.transpose(1, 2)), torch.bmm(wuk_h, wo_h)


def absorb_head_width_from_wo(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_o.shape[1]
    d_head = d_model // num_heads
    wq_list, wo_list = [], []
    for h in range(num_heads):
        a, b = h * d_head, (h + 1) * d_head
        wq_list.append(w_q[:, a:b] @ w_uk[:, a:b].T)
        wo_list.append(w_uv[:, a:b] @ w_o[a:b, :])
    return torch.stack(wq_list), torch.stack(wo_list)


# ================================================================== absorb_mla_weights: right
def absorb_einsum_views(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    q4 = w_q.double().unflatten(1, (num_heads, dh))  # (d_model, H, dh)
    k4 = w_uk.double().unflatten(1, (num_heads, dh))  # (d_c, H, dh)
    v4 = w_uv.double().unflatten(1, (num_heads, dh))  # (d_c, H, dh)
    o4 = w_o.double().unflatten(0, (num_heads, dh))  # (H, dh, d_model)
    wq_lat = torch.einsum("mhe,che->hmc", q4, k4)
    wo_lat = torch.einsum("che,hem->hcm", v4, o4)
    return wq_lat.to(w_q.dtype), wo_lat.to(w_q.dtype)


def absorb_chunk_loop(w_uk, w_uv, w_q, w_o, num_heads):
    q_parts = torch.chunk(w_q.double(), num_heads, dim=1)
    k_parts = torch.chunk(w_uk.double(), num_heads, dim=1)
    v_parts = torch.chunk(w_uv.double(), num_heads, dim=1)
    o_parts = torch.chunk(w_o.double(), num_heads, dim=0)
    wq_lat = torch.stack([qp @ kp.t() for qp, kp in zip(q_parts, k_parts)])
    wo_lat = torch.stack([vp @ op for vp, op in zip(v_parts, o_parts)])
    return (wq_lat.to(w_q.dtype), wo_lat.to(w_o.dtype))


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "keys-and-values-twice",
          "counts the latent and RoPE key twice, once for keys and once for values, as for a "
          "plain KV cache; MLA rebuilds both from the one latent",
          cache_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "latent-only",
          "counts only the kv_lora_rank latent and leaves out the shared RoPE key of "
          "rope_head_dim values",
          cache_bytes_latent_only),
    Entry("mla_kv_cache_bytes", "wrong", "bf16-hardcoded",
          "hard-codes 2 bytes per value (bf16) and ignores bytes_per_element",
          cache_bytes_bf16_hardcoded),
    Entry("mla_kv_cache_bytes", "wrong", "np-prod-type",
          "multiplies with np.prod, which returns a numpy integer, not the plain Python int "
          "the contract fixes",
          cache_bytes_np_prod),
    Entry("mla_kv_cache_bytes", "wrong", "missing-parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so only the RoPE "
          "key is multiplied by tokens and bytes: (kv_lora_rank + rope_head_dim) needs "
          "parentheses",
          cache_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "batch-ignored",
          "never multiplies by batch_size: the cache of one sequence only",
          cache_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "right", "layer-loop", None, cache_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "via-bits", None, cache_bytes_via_bits),

    Entry("mla_attention", "wrong", "scale-by-latent-width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "head-dim-from-d-model",
          "takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model; here "
          "the head width is w_q.shape[1] // num_heads (reshape error when they differ)",
          mla_head_dim_from_model),
    Entry("mla_attention", "wrong", "mask-hides-diagonal",
          "masks torch.triu(ones) with diagonal 0, so each query is also hidden from its own "
          "key (query 0 sees nothing): triu(..., 1) belongs there",
          mla_mask_hides_diagonal),
    Entry("mla_attention", "wrong", "reshape-without-transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H * d_head) (and "
          "merges back the same way), which scrambles tokens and heads instead of "
          "reshape(B, N, H, d_head).transpose(1, 2)",
          mla_reshape_no_transpose),
    Entry("mla_attention", "wrong", "values-from-w-uk",
          "copy-paste slip: the values are c @ w_uk (the key up-projection) instead of "
          "c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax-over-queries",
          "takes the softmax over dim -2 (the queries) instead of over the keys (dim -1)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "absorbed-per-head-f64", None, mla_absorbed_per_head_f64),
    Entry("mla_attention", "right", "einsum-sdpa-f32", None, mla_sdpa_float32),

    Entry("absorb_mla_weights", "wrong", "q-latent-transposed",
          "multiplies in the wrong order, w_uk_h @ w_q_h.T, giving (d_c, d_model) per head "
          "instead of w_q_h @ w_uk_h.T of shape (d_model, d_c)",
          absorb_q_transposed),
    Entry("absorb_mla_weights", "wrong", "wo-rows-interleaved",
          "splits w_o's rows with reshape(d_head, H, d_model) like the column split of the "
          "other weights, so head h gets rows h, h + H, ... instead of rows h*d_head:"
          "(h+1)*d_head",
          absorb_wo_heads_interleaved),
    Entry("absorb_mla_weights", "wrong", "scale-folded-in",
          "divides w_q_latent by sqrt(d_head): the scale must stay out of the absorbed weight "
          "(it is applied to the scores)",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "whole-matrices",
          "absorbs the full matrices (w_q @ w_uk.T, w_uv @ w_o), mixing every head's query with "
          "every head's key and summing over heads, instead of one product per head stacked "
          "to (H, ...)",
          absorb_whole_matrices),
    Entry("absorb_mla_weights", "wrong", "uk-in-output",
          "copy-paste slip: w_o_latent uses w_uk_h @ w_o_h instead of the value "
          "up-projection w_uv_h @ w_o_h",
          absorb_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "head-width-from-d-model",
          "takes d_head = d_model // num_heads from w_o.shape[1] instead of "
          "w_q.shape[1] // num_heads, so the head slices are wrong when H * d_head != d_model",
          absorb_head_width_from_wo),
    Entry("absorb_mla_weights", "right", "einsum-unflatten-f64", None, absorb_einsum_views),
    Entry("absorb_mla_weights", "right", "chunk-loop", None, absorb_chunk_loop),
]
