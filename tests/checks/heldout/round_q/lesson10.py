"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================== mla_kv_cache_bytes
def mla_bytes_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # keys and values
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return (num_layers * kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def mla_bytes_counts_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    elements = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return elements


def mla_bytes_numpy_int(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_forgets_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    per_token = num_layers * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_token * seq_len


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
    width = kv_lora_rank + rope_head_dim
    return functools.reduce(operator.mul,
                            (num_layers, width, seq_len, batch_size, bytes_per_element), 1)


# ============================================================== mla_attention
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _soft(scores, causal):
    ct = torch.promote_types(scores.dtype, torch.float32)
    s = scores.to(ct)
    if causal:
        n = s.shape[-1]
        allowed = torch.ones(n, n, dtype=torch.bool).tril()
        s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1)


def mla_scale_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    d_c = w_dkv.shape[1]
    p = _soft(q @ k.transpose(-2, -1) / math.sqrt(d_c), causal)
    ctx = (p @ v.to(p.dtype)).to(x.dtype)
    b, h, n, dh = ctx.shape
    return ctx.transpose(1, 2).reshape(b, n, h * dh) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (c @ w_uk).reshape(B, num_heads, N, dh)
    v = (c @ w_uv).reshape(B, num_heads, N, dh)
    p = _soft(q @ k.transpose(-2, -1) / math.sqrt(dh), causal)
    ctx = (p @ v.to(p.dtype)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, width) @ w_o


def mla_mask_hides_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q @ k.transpose(-2, -1)).to(ct) / math.sqrt(dh)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=0)
        s = s.masked_fill(future, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads)
    k = _heads(c @ w_uk, num_heads)
    v = _heads(c @ w_uk, num_heads)
    p = _soft(q @ k.transpose(-2, -1) / math.sqrt(dh), causal)
    ctx = (p @ v.to(p.dtype)).to(x.dtype)
    b, h, n, _ = ctx.shape
    return ctx.transpose(1, 2).reshape(b, n, h * dh) @ w_o


def mla_w_o_transposed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    p = _soft(q @ k.transpose(-2, -1) / math.sqrt(dh), causal)
    ctx = (p @ v.to(p.dtype)).to(x.dtype)
    b, h, n, _ = ctx.shape
    return ctx.transpose(1, 2).reshape(b, n, h * dh) @ w_o.T  # (out, in) habit of nn.Linear


def mla_sdpa_inverted_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(c @ w_uk, num_heads).to(ct)
    v = _heads(c @ w_uv, num_heads).to(ct)
    mask = None
    if causal:
        mask = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)  # the future
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_absorbed_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention from the latents alone, with the absorbed weights built in the function."""
    x64 = x.double()
    d_c = w_dkv.shape[1]
    d_model = x.shape[-1]
    width = w_q.shape[1]
    dh = width // num_heads
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    wq = w_q.double().reshape(d_model, num_heads, dh)
    wk = w_uk.double().reshape(d_c, num_heads, dh)
    wv = w_uv.double().reshape(d_c, num_heads, dh)
    wo = w_o.double().reshape(num_heads, dh, d_model)
    wq_lat = torch.einsum("mhe,che->hmc", wq, wk)  # (H, d_model, d_c)
    wo_lat = torch.einsum("che,hem->hcm", wv, wo)  # (H, d_c, d_model)
    ql = torch.einsum("bnm,hmc->bhnc", x64, wq_lat)
    s = torch.einsum("bhnc,bkc->bhnk", ql, c) / math.sqrt(dh)
    if causal:
        n = x.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    mixed = torch.einsum("bhnk,bkc->bhnc", p, c)
    return torch.einsum("bhnc,hcm->bnm", mixed, wo_lat).to(x.dtype)


def mla_per_head_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    xx = x.to(ct)
    c = xx @ w_dkv.to(ct)
    dh = w_q.shape[1] // num_heads
    out = torch.zeros(x.shape, dtype=ct)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_h = xx @ w_q[:, cols].to(ct)
        k_h = c @ w_uk[:, cols].to(ct)
        v_h = c @ w_uv[:, cols].to(ct)
        ctx = F.scaled_dot_product_attention(q_h, k_h, v_h, is_causal=causal)
        out = out + ctx @ w_o[cols, :].to(ct)
    return out.to(x.dtype)


# ============================================================== absorb_mla_weights
def absorb_product_reversed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        qs.append(w_uk[:, sl] @ w_q[:, sl].T)  # (d_c, d_model)
        os_.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    H = num_heads
    qs = [w_q[:, h::H] @ w_uk[:, h::H].T for h in range(H)]
    os_ = [w_uv[:, h::H] @ w_o[h::H, :] for h in range(H)]
    return torch.stack(qs, dim=0), torch.stack(os_, dim=0)


def absorb_d_head_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        q_lat.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].transpose(0, 1))
        o_lat.append(w_uv[:, lo:hi] @ w_o[lo:hi])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_scale_baked_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return (wq @ wk.transpose(1, 2)) / math.sqrt(dh), wv @ wo


def absorb_o_uses_w_uk(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wk.transpose(1, 2), wk @ wo


def absorb_stack_last_axis(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = [w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
             for h in range(num_heads)]
    o_lat = [w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
             for h in range(num_heads)]
    return torch.stack(q_lat, dim=-1), torch.stack(o_lat, dim=-1)


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    H = num_heads
    dh = w_q.shape[1] // H
    q3 = w_q.unflatten(1, (H, dh))  # (d_model, H, dh)
    k3 = w_uk.unflatten(1, (H, dh))  # (d_c, H, dh)
    v3 = w_uv.unflatten(1, (H, dh))  # (d_c, H, dh)
    o3 = w_o.unflatten(0, (H, dh))  # (H, dh, d_model)
    return torch.einsum("mhe,che->hmc", q3, k3), torch.einsum("che,hem->hcm", v3, o3)


def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_q.shape[1]
    dh = width // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    q_lat = torch.empty(num_heads, d_model, d_c, dtype=torch.float64)
    o_lat = torch.empty(num_heads, d_c, d_model, dtype=torch.float64)
    for h in range(num_heads):
        idx = torch.arange(h * dh, (h + 1) * dh)
        q_lat[h] = torch.matmul(w_q.double()[:, idx], w_uk.double()[:, idx].t())
        o_lat[h] = torch.matmul(w_uv.double()[:, idx], w_o.double()[idx, :])
    return q_lat.to(w_q.dtype), o_lat.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "keeps kv_cache_bytes' factor 2 for keys and values, but MLA caches one latent from "
          "which both are recomputed (and one shared RoPE key), so the count is doubled",
          mla_bytes_factor_two),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_left_out",
          "counts only the kv_lora_rank latent per token and layer and leaves out the shared "
          "RoPE key of rope_head_dim values",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim without parentheses, so the RoPE "
          "key is counted once instead of once per layer",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "counts_elements_not_bytes",
          "counts the cached numbers but never multiplies by bytes_per_element, so it returns "
          "elements instead of bytes",
          mla_bytes_counts_elements),
    Entry("mla_kv_cache_bytes", "wrong", "returns_numpy_integer",
          "multiplies with np.prod and returns a numpy.int64 instead of a plain Python int",
          mla_bytes_numpy_int),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_ignored",
          "multiplies the per-token bytes by seq_len only and forgets batch_size",
          mla_bytes_forgets_batch),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "functools_reduce", None, mla_bytes_reduce),
    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the width of the latent, instead of "
          "1/sqrt(d_head)",
          mla_scale_by_latent_width),
    Entry("mla_attention", "wrong", "split_without_transpose",
          "splits the heads by reshaping (B, N, H*d_head) straight to (B, H, N, d_head) "
          "without the (B, N, H, d_head) step and transpose(1, 2), mixing tokens and heads",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "mask_hides_diagonal",
          "builds the causal mask with triu(diagonal=0), hiding each token from itself too; "
          "the first query has no key left and its output becomes NaN",
          mla_mask_hides_diagonal),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "copy-pastes the key line for the values: v = c @ w_uk instead of c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "w_o_transposed",
          "applies the output projection as merged @ w_o.T, nn.Linear's (out, in) habit, "
          "instead of merged @ w_o with w_o (H * d_head, d_model): it raises when "
          "H * d_head != d_model and gives wrong values when they are equal",
          mla_w_o_transposed),
    Entry("mla_attention", "wrong", "sdpa_mask_inverted",
          "passes a boolean mask that is True on the future keys to "
          "F.scaled_dot_product_attention, where True means 'may attend', so each query "
          "attends to the keys after it instead of the keys up to it",
          mla_sdpa_inverted_mask),
    Entry("mla_attention", "right", "absorbed_latent_float64", None, mla_absorbed_float64),
    Entry("mla_attention", "right", "per_head_sdpa_loop", None, mla_per_head_sdpa),
    Entry("absorb_mla_weights", "wrong", "product_order_reversed",
          "multiplies w_uk_h @ w_q_h.T instead of w_q_h @ w_uk_h.T, so w_q_latent is the "
          "transpose, (H, d_c, d_model) instead of (H, d_model, d_c)",
          absorb_product_reversed),
    Entry("absorb_mla_weights", "wrong", "strided_head_columns",
          "takes head h's features as every H-th column (w[:, h::H]) instead of the contiguous "
          "block h*d_head:(h+1)*d_head",
          absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "computes d_head = d_model // num_heads as in earlier lessons instead of "
          "w_q.shape[1] // num_heads, which is wrong when H * d_head != d_model",
          absorb_d_head_from_d_model),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "divides w_q_latent by sqrt(d_head); the contract keeps the scale out of the "
          "absorbed weights (it is applied to the scores)",
          absorb_scale_baked_in),
    Entry("absorb_mla_weights", "wrong", "w_o_latent_from_w_uk",
          "reuses the key up-projection for the output: w_o_latent[h] = w_uk_h @ w_o_h "
          "instead of w_uv_h @ w_o_h",
          absorb_o_uses_w_uk),
    Entry("absorb_mla_weights", "wrong", "heads_stacked_last",
          "stacks the per-head matrices on the last axis (torch.stack(..., dim=-1)) instead of "
          "a leading head axis, giving (d_model, d_c, H) and (d_c, d_model, H)",
          absorb_stack_last_axis),
    Entry("absorb_mla_weights", "right", "unflatten_einsum", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "index_loop_float64", None, absorb_loop_float64),
]
