"""Held-out learners' answers, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention,
absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes -- wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # a K and a V entry
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return num_layers * seq_len * batch_size * latent


def mla_bytes_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    values_per_token = num_layers * (kv_lora_rank + rope_head_dim)
    return values_per_token * seq_len * bytes_per_element


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    # the RoPE key is shared, so it is stored once per token
    per_token = num_layers * kv_lora_rank + rope_head_dim
    return per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes -- right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * seq_len * batch_size * bytes_per_element
        rope_key = rope_head_dim * seq_len * batch_size * bytes_per_element
        total += latent + rope_key
    return total


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1))


# ============================================================ mla_attention -- wrong
def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    scores = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_model // num_heads)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    ctx = (scores.softmax(dim=-1) @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, width) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    hd = w_q.shape[1]
    d_head = hd // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(b, num_heads, n, d_head)
    k = (c @ w_uk).reshape(b, num_heads, n, d_head)
    v = (c @ w_uv).reshape(b, num_heads, n, d_head)
    f = torch.promote_types(x.dtype, torch.float32)
    s = q.to(f) @ k.to(f).transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    o = torch.softmax(s, dim=-1) @ v.to(f)
    return o.reshape(b, n, hd).to(x.dtype) @ w_o


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    W = w_q.shape[1]
    dh = W // num_heads
    c = x @ w_dkv

    def heads(t):
        return t.view(B, N, num_heads, dh).permute(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    comp = torch.promote_types(x.dtype, torch.float32)
    sc = torch.matmul(q.to(comp), k.to(comp).transpose(-1, -2)) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))
        sc = sc.masked_fill(allowed, float("-inf"))
    w = torch.softmax(sc, dim=-1)
    out = torch.matmul(w, v.to(comp)).permute(0, 2, 1, 3).reshape(B, N, W).to(x.dtype)
    return out @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    latent = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (latent @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2)
    v = (latent @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) * d_head ** -0.5
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    y = torch.softmax(s, -1) @ v.to(ct)
    return y.transpose(1, 2).reshape(B, N, width).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    bsz, seq, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    split = lambda t: t.reshape(bsz, seq, num_heads, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    ct = torch.promote_types(x.dtype, torch.float32)
    scores = torch.einsum("bhid,bhjd->bhij", q.to(ct), k.to(ct)) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), -math.inf)
    probs = torch.softmax(scores, dim=-2)
    ctx = torch.einsum("bhij,bhjd->bhid", probs, v.to(ct))
    return ctx.transpose(1, 2).reshape(bsz, seq, width).to(x.dtype) @ w_o


def mla_sdpa_scaled_twice(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).view(B, N, num_heads, d_head).transpose(1, 2).to(ct) / math.sqrt(d_head)
    k = (c @ w_uk).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return o.transpose(1, 2).reshape(B, N, width).to(x.dtype) @ w_o


# ============================================================ mla_attention -- right
def mla_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    xd = x.double()
    c = xd @ w_dkv.double()
    out = torch.zeros(B, N, w_o.shape[1], dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = xd @ w_q.double()[:, cols]
        k = c @ w_uk.double()[:, cols]
        v = c @ w_uv.double()[:, cols]
        s = q @ k.transpose(1, 2) / math.sqrt(dh)
        if causal:
            future = torch.arange(N)[None, :] > torch.arange(N)[:, None]
            s = s.masked_fill(future, -math.inf)
        p = torch.exp(s - s.max(dim=-1, keepdim=True).values)
        p = p / p.sum(dim=-1, keepdim=True)
        out += (p @ v) @ w_o.double()[cols, :]
    return out.to(x.dtype)


def mla_absorbed_route(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention from the latents alone: queries folded into latent space per head."""
    B, N, d_model = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    f = torch.float64
    c = x.to(f) @ w_dkv.to(f)  # (B, N, d_c)
    wq = w_q.to(f).reshape(d_model, num_heads, dh)
    wuk = w_uk.to(f).reshape(d_c, num_heads, dh)
    wuv = w_uv.to(f).reshape(d_c, num_heads, dh)
    wo = w_o.to(f).reshape(num_heads, dh, d_model)
    q_lat = torch.einsum("bnm,mhe,che->bhnc", x.to(f), wq, wuk)  # (B, H, N, d_c)
    s = torch.einsum("bhnc,bjc->bhnj", q_lat, c) / math.sqrt(dh)
    if causal:
        s = s + torch.full((N, N), -math.inf, dtype=f).triu(1)
    p = F.softmax(s, dim=-1)
    mixed = torch.einsum("bhnj,bjc->bhnc", p, c)
    out = torch.einsum("bhnc,che,hem->bnm", mixed, wuv, wo)
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights -- wrong
def absorb_reshape_no_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(num_heads, d_model, dh)
    uk_h = w_uk.reshape(num_heads, d_c, dh)
    uv_h = w_uv.reshape(num_heads, d_c, dh)
    o_h = w_o.reshape(num_heads, dh, d_model)
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_keeps_scale(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_q[:, sl] @ w_uk[:, sl].T / math.sqrt(dh))
        wo_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_d_head_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    a, b = [], []
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        a.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].t())
        b.append(w_uv[:, lo:hi] @ w_o[lo:hi, :])
    return torch.stack(a, 0), torch.stack(b, 0)


def absorb_output_uses_w_uk(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    q3 = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    k3 = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    v3 = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    o3 = w_o.reshape(num_heads, dh, d_model)
    return torch.bmm(q3, k3.transpose(1, 2)), torch.bmm(v3, o3)


def absorb_einsum_output_order(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.reshape(d_model, num_heads, dh)
    wuk = w_uk.reshape(d_c, num_heads, dh)
    wuv = w_uv.reshape(d_c, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = torch.einsum("mhe,che->hcm", wq, wuk)
    w_o_latent = torch.einsum("che,hem->hcm", wuv, wo)
    return w_q_latent, w_o_latent


def absorb_whole_matrices(w_uk, w_uv, w_q, w_o, num_heads):
    full_q = w_q @ w_uk.T  # (d_model, d_c)
    full_o = w_uv @ w_o  # (d_c, d_model)
    return (full_q.unsqueeze(0).repeat(num_heads, 1, 1),
            full_o.unsqueeze(0).repeat(num_heads, 1, 1))


# ============================================================ absorb_mla_weights -- right
def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    wq_l = torch.empty(num_heads, d_model, d_c, dtype=torch.float64)
    wo_l = torch.empty(num_heads, d_c, d_model, dtype=torch.float64)
    for h in range(num_heads):
        idx = torch.arange(h * dh, (h + 1) * dh)
        wq_l[h] = w_q.double().index_select(1, idx) @ w_uk.double().index_select(1, idx).T
        wo_l[h] = w_uv.double().index_select(1, idx) @ w_o.double().index_select(0, idx)
    return wq_l.to(w_q.dtype), wo_l.to(w_q.dtype)


def absorb_einsum_chunks(w_uk, w_uv, w_q, w_o, num_heads):
    q_parts = torch.stack(torch.chunk(w_q, num_heads, dim=1))  # (H, d_model, dh)
    uk_parts = torch.stack(torch.chunk(w_uk, num_heads, dim=1))  # (H, d_c, dh)
    uv_parts = torch.stack(torch.chunk(w_uv, num_heads, dim=1))  # (H, d_c, dh)
    o_parts = torch.stack(torch.chunk(w_o, num_heads, dim=0))  # (H, dh, d_model)
    return (torch.einsum("hme,hce->hmc", q_parts, uk_parts),
            torch.einsum("hce,hem->hcm", uv_parts, o_parts))


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "multiplies by 2 for keys and values as in the GQA cache, but MLA stores one latent "
          "from which both are recomputed (and one RoPE key): no factor 2",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "counts only the latent of kv_lora_rank values per token and layer, leaving out the "
          "shared RoPE key of rope_head_dim values",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_integer",
          "multiplies with np.prod, which returns a numpy integer instead of the plain Python "
          "int the contract asks for",
          mla_bytes_np_prod),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch_size",
          "never multiplies by batch_size, so it gives the bytes of one sequence only",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once_for_all_layers",
          "reads 'shared RoPE key' as shared across layers and counts it once per token, "
          "instead of once per token and layer (it is shared across heads)",
          mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without parentheses "
          "around (kv_lora_rank + rope_head_dim) only the RoPE part is multiplied by the tokens "
          "and bytes",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "right", "layer_loop_sum", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "reduce_mul", None, mla_bytes_reduce),

    Entry("mla_attention", "wrong", "scale_uses_d_model_over_heads",
          "scales the scores by 1/sqrt(d_model // num_heads), assuming H * d_head == d_model, "
          "instead of 1/sqrt(d_head) with d_head = w_q.shape[1] // num_heads",
          mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head) instead of "
          "reshape(B, N, H, d_head).transpose(1, 2), scrambling tokens and heads (and merges the "
          "same way)",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "mask_meaning_inverted",
          "fills -inf where the causal mask is True, but True means 'may attend': it hides the "
          "past and the diagonal and keeps the future (the last query sees no key: NaN)",
          mla_mask_inverted),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "builds the values with c @ w_uk (copy of the key line) instead of c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of the last axis (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "sdpa_scales_twice",
          "divides q by sqrt(d_head) and then calls F.scaled_dot_product_attention, which "
          "applies 1/sqrt(d_head) again: scores scaled by 1/d_head",
          mla_sdpa_scaled_twice),
    Entry("mla_attention", "right", "head_loop_float64", None, mla_head_loop_f64),
    Entry("mla_attention", "right", "absorbed_latent_einsum", None, mla_absorbed_route),

    Entry("absorb_mla_weights", "wrong", "reshape_without_permute",
          "reshapes w_q (d_model, H*d_head) straight to (H, d_model, d_head) instead of "
          "reshape(d_model, H, d_head).permute(1, 0, 2), so 'head h' is a block of rows, not "
          "its columns",
          absorb_reshape_no_permute),
    Entry("absorb_mla_weights", "wrong", "folds_in_scale",
          "divides w_q_latent by sqrt(d_head), but the scale stays out of the absorbed weights "
          "(the scores divide by sqrt(d_head) afterwards)",
          absorb_keeps_scale),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads (w_q.shape[0]) instead of w_q.shape[1] // "
          "num_heads, slicing the wrong columns whenever H * d_head != d_model",
          absorb_d_head_from_d_model),
    Entry("absorb_mla_weights", "wrong", "output_uses_w_uk",
          "builds w_o_latent from the heads of w_uk instead of w_uv (copied the key line)",
          absorb_output_uses_w_uk),
    Entry("absorb_mla_weights", "wrong", "einsum_output_transposed",
          "writes the einsum output of w_q_latent as 'hcm' (H, d_c, d_model) instead of "
          "'hmc' (H, d_model, d_c)",
          absorb_einsum_output_order),
    Entry("absorb_mla_weights", "wrong", "whole_matrix_per_head",
          "absorbs the full matrices (w_q @ w_uk.T, w_uv @ w_o) and repeats them for every "
          "head, which sums over all heads instead of pairing head h's slices only",
          absorb_whole_matrices),
    Entry("absorb_mla_weights", "right", "index_select_loop_float64", None, absorb_loop_float64),
    Entry("absorb_mla_weights", "right", "chunk_stack_einsum", None, absorb_einsum_chunks),
]
