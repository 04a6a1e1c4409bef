"""Held-out learners' answers, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention,
absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element  # K and V
    return num_layers * per_token * seq_len * batch_size


def mla_bytes_forgets_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return num_layers * latent * seq_len * batch_size


def mla_bytes_in_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    bits = 8 * bytes_per_element
    total_bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bits
    return total_bits / 8


def mla_bytes_ignores_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    values_per_layer = (kv_lora_rank + rope_head_dim) * seq_len
    return num_layers * values_per_layer * bytes_per_element


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    # the RoPE key is shared, so it is stored once
    per_token = (num_layers * kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_token * seq_len * batch_size


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element))


def mla_bytes_per_layer_sum(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    tokens = batch_size * seq_len
    total = 0
    for _layer in range(num_layers):
        total += tokens * kv_lora_rank * bytes_per_element  # latents
        total += tokens * rope_head_dim * bytes_per_element  # shared rope keys
    return int(total)


# ============================================================ mla_attention
def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, D = x.shape
    d_head = D // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, -1).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, -1).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, -1).transpose(1, 2)
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    a = torch.softmax(s, dim=-1)
    o = (a @ v.float()).transpose(1, 2).reshape(B, N, -1).to(x.dtype)
    return o @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x.double() @ w_dkv.double()
    q = (x.double() @ w_q.double()).reshape(B, num_heads, N, dh)
    k = (c @ w_uk.double()).reshape(B, num_heads, N, dh)
    v = (c @ w_uv.double()).reshape(B, num_heads, N, dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    w = scores.softmax(-1)
    ctx = (w @ v).permute(0, 2, 1, 3).reshape(B, N, width)
    return (ctx @ w_o.double()).to(x.dtype)


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    latent = x @ w_dkv

    def heads(t):
        return t.view(B, N, H, dh).transpose(1, 2).double()

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uk)
    sc = q @ k.transpose(-1, -2) / dh ** 0.5
    if causal:
        sc = sc + torch.full((N, N), -math.inf, dtype=torch.float64).triu(1)
    p = torch.softmax(sc, dim=-1)
    out = (p @ v).transpose(1, 2).reshape(B, N, H * dh)
    return (out @ w_o.double()).to(x.dtype)


def mla_mask_hides_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = (x @ w_dkv).double()
    q = (x.double() @ w_q.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (c @ w_uk.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    v = (c @ w_uv.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool))  # future keys
        s = s.masked_fill(future, -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    out = (p @ v).transpose(1, 2).flatten(2)
    return (out @ w_o.double()).to(x.dtype)


def mla_softmax_wrong_dim(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    xd = x.double()
    c = xd @ w_dkv.double()
    q = torch.einsum("bnd,dhe->bhne", xd, w_q.double().view(-1, num_heads, dh))
    k = torch.einsum("bnc,che->bhne", c, w_uk.double().view(-1, num_heads, dh))
    v = torch.einsum("bnc,che->bhne", c, w_uv.double().view(-1, num_heads, dh))
    s = torch.einsum("bhqe,bhke->bhqk", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    p = torch.softmax(s, dim=-2)
    p = torch.nan_to_num(p, nan=0.0)
    ctx = torch.einsum("bhqk,bhke->bqhe", p, v).reshape(B, N, -1)
    return (ctx @ w_o.double()).to(x.dtype)


def mla_mask_after_softmax(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x.double() @ w_dkv.double()
    q = (x.double() @ w_q.double()).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk.double()).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv.double()).view(B, N, num_heads, dh).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
    if causal:
        weights = weights * torch.tril(torch.ones(N, N, dtype=torch.float64))
    ctx = (weights @ v).transpose(1, 2).reshape(B, N, -1)
    return (ctx @ w_o.double()).to(x.dtype)


def mla_einsum_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    xd = x.to(torch.float64)
    c = xd @ w_dkv.to(torch.float64)
    out = torch.zeros(B, N, d_model, dtype=torch.float64)
    allowed = torch.ones(N, N, dtype=torch.bool).tril() if causal else torch.ones(N, N, dtype=torch.bool)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = xd @ w_q[:, cols].double()
        kh = c @ w_uk[:, cols].double()
        vh = c @ w_uv[:, cols].double()
        s = torch.einsum("bie,bje->bij", qh, kh) / math.sqrt(dh)
        s = s.masked_fill(~allowed, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += torch.einsum("bij,bje->bie", p, vh) @ w_o[cols, :].double()
    return out.to(x.dtype)


def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    xd = x.double()
    lat = xd @ w_dkv.double()
    q = (xd @ w_q.double()).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = (lat @ w_uk.double()).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    v = (lat @ w_uv.double()).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    o = o.permute(0, 2, 1, 3).reshape(B, N, num_heads * dh)
    return (o @ w_o.double()).to(x.dtype)


# ============================================================ absorb_mla_weights
def absorb_transposed_q(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_uk[:, sl] @ w_q[:, sl].T)
        wo_l.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    H = num_heads
    wq_lat = torch.stack([w_q[:, h::H] @ w_uk[:, h::H].T for h in range(H)])
    wo_lat = torch.stack([w_uv[:, h::H] @ w_o[h::H, :] for h in range(H)])
    return wq_lat, wo_lat


def absorb_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wk.transpose(-1, -2), wk @ wo


def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    q_h = w_q.view(d_model, num_heads, dh).transpose(0, 1)
    k_h = w_uk.view(d_c, num_heads, dh).transpose(0, 1)
    v_h = w_uv.view(d_c, num_heads, dh).transpose(0, 1)
    o_h = w_o.view(num_heads, dh, d_model)
    # fold the softmax scale in once and for all
    w_q_latent = (q_h @ k_h.transpose(1, 2)) / math.sqrt(dh)
    return w_q_latent, v_h @ o_h


def absorb_wo_reshape_order(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return wq @ wk.transpose(-2, -1), wv @ wo


def absorb_stack_axis_one(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        c0, c1 = h * dh, (h + 1) * dh
        qs.append(w_q[:, c0:c1] @ w_uk[:, c0:c1].T)
        os_.append(w_uv[:, c0:c1] @ w_o[c0:c1])
    return torch.stack(qs, dim=1), torch.stack(os_, dim=1)


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    wq = torch.einsum("mhe,che->hmc", w_q.double().reshape(d_model, num_heads, e),
                      w_uk.double().reshape(d_c, num_heads, e))
    wo = torch.einsum("che,hem->hcm", w_uv.double().reshape(d_c, num_heads, e),
                      w_o.double().reshape(num_heads, e, d_model))
    return wq.to(w_q.dtype), wo.to(w_o.dtype)


def absorb_chunk_loops(w_uk, w_uv, w_q, w_o, num_heads):
    q_parts = torch.chunk(w_q.double(), num_heads, dim=1)
    k_parts = torch.chunk(w_uk.double(), num_heads, dim=1)
    v_parts = torch.chunk(w_uv.double(), num_heads, dim=1)
    o_parts = torch.chunk(w_o.double(), num_heads, dim=0)
    wq = torch.stack([torch.mm(qp, kp.mT) for qp, kp in zip(q_parts, k_parts)])
    wo = torch.stack([torch.mm(vp, op) for vp, op in zip(v_parts, o_parts)])
    return wq.to(w_q.dtype), wo.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "multiplies by 2 for keys and values as in a standard KV cache, but MLA caches one "
          "latent from which both are rebuilt",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "counts only the kv_lora_rank latent and leaves out the shared RoPE key of "
          "rope_head_dim values",
          mla_bytes_forgets_rope),
    Entry("mla_kv_cache_bytes", "wrong", "bits_then_true_division",
          "works in bits and divides by 8 with /, so it returns a float instead of a plain int",
          mla_bytes_in_bits),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch_size",
          "never multiplies by batch_size",
          mla_bytes_ignores_batch),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once_for_all_layers",
          "reads 'shared RoPE key' as shared by all layers and counts it once per token, not "
          "once per token and layer",
          mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "operator precedence: num_layers * kv_lora_rank + rope_head_dim * seq_len * ... "
          "without parentheses around (kv_lora_rank + rope_head_dim) and the rest",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_math_prod),
    Entry("mla_kv_cache_bytes", "right", "per_layer_sum", None, mla_bytes_per_layer_sum),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "scales the scores by 1/sqrt(d_model // num_heads), but here d_head is "
          "w_q.shape[1] // num_heads and H * d_head need not equal d_model",
          mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head) instead "
          "of reshape(B, N, H, d_head).transpose(1, 2): tokens and heads get mixed",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "copy-paste slip: the values are c @ w_uk instead of c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "mask_hides_diagonal",
          "the causal mask uses triu(diagonal=0), so each query is also kept from its own key "
          "(the first row is empty)",
          mla_mask_hides_diagonal),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_wrong_dim),
    Entry("mla_attention", "wrong", "mask_after_softmax",
          "applies the causal mask by zeroing weights after the softmax, so the kept weights "
          "no longer sum to 1",
          mla_mask_after_softmax),
    Entry("mla_attention", "right", "einsum_head_loop", None, mla_einsum_per_head),
    Entry("mla_attention", "right", "sdpa_float64", None, mla_sdpa),
    Entry("absorb_mla_weights", "wrong", "transposed_query_latent",
          "builds w_uk_h @ w_q_h.T, the transpose (d_c, d_model) of w_q_h @ w_uk_h.T",
          absorb_transposed_q),
    Entry("absorb_mla_weights", "wrong", "strided_heads",
          "takes head h's columns as every H-th column (h::H) instead of the contiguous block "
          "h*d_head:(h+1)*d_head",
          absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "w_uk_in_output",
          "copy-paste slip: w_o_latent is built from w_uk instead of w_uv",
          absorb_w_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "folds_scale",
          "folds 1/sqrt(d_head) into w_q_latent, although the contract divides the scores by "
          "sqrt(d_head) afterwards (scaled twice)",
          absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "w_o_reshape_order",
          "reshapes w_o as (d_head, H, d_model) and permutes, so head h gets every H-th row "
          "instead of rows h*d_head:(h+1)*d_head",
          absorb_wo_reshape_order),
    Entry("absorb_mla_weights", "wrong", "stacked_on_axis_one",
          "stacks the per-head matrices with dim=1, giving (d_model, H, d_c) and (d_c, H, "
          "d_model) instead of head-first shapes",
          absorb_stack_axis_one),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "chunk_and_mm", None, absorb_chunk_loops),
]
