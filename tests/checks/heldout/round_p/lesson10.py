"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math
from functools import reduce
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
        bytes_per_element


def bytes_no_rope_key(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token_layer = kv_lora_rank * bytes_per_element
    return num_layers * per_token_layer * seq_len * batch_size


def bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def bytes_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def bytes_rank_times_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    width = kv_lora_rank * rope_head_dim
    return num_layers * width * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def bytes_loop_over_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        latents = kv_lora_rank * seq_len * batch_size
        shared_rope_keys = rope_head_dim * seq_len * batch_size
        total += (latents + shared_rope_keys) * bytes_per_element
    return total


def bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    factors = (num_layers, seq_len, batch_size, bytes_per_element)
    return int(reduce(operator.mul, factors, 1) * kv_lora_rank
               + reduce(operator.mul, factors, 1) * rope_head_dim)


# ============================================================ mla_attention: helpers
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _masked_softmax(s, causal):
    if causal:
        n = s.shape[-1]
        keep = torch.ones(n, n, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, dim=-1)


# ============================================================ mla_attention: wrong
def mla_scale_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(c @ w_uk, num_heads).to(ct)
    v = _heads(c @ w_uv, num_heads).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(w_dkv.shape[1])
    ctx = (_masked_softmax(s, causal) @ v).to(x.dtype)
    b, h, n, dh = ctx.shape
    return ctx.transpose(1, 2).reshape(b, n, h * dh) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, D = x.shape
    dh = D // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    w = _masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), causal)
    return (w @ v).to(x.dtype).transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(latent @ w_uk, num_heads).to(ct)
    v = _heads(latent @ w_uk, num_heads).to(ct)
    dh = q.shape[-1]
    att = _masked_softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh), causal)
    out = torch.einsum("bhqk,bhkd->bqhd", att, v).to(x.dtype)
    return out.flatten(2) @ w_o


def mla_mask_hides_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(c @ w_uk, num_heads).to(ct)
    v = _heads(c @ w_uv, num_heads).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=0)
        s = s.masked_fill(future, float("-inf"))
    ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
    b, h, n, dh = ctx.shape
    return ctx.transpose(1, 2).reshape(b, n, h * dh) @ w_o


def mla_merge_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(c @ w_uk, num_heads).to(ct)
    v = _heads(c @ w_uv, num_heads).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    ctx = (_masked_softmax(s, causal) @ v).to(x.dtype)  # (B, H, N, d_head)
    b, h, n, dh = ctx.shape
    return ctx.reshape(b, n, h * dh) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(c @ w_uk, num_heads).to(ct)
    v = _heads(c @ w_uv, num_heads).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, dim=-2)
    ctx = (w @ v).to(x.dtype)
    b, h, n, dh = ctx.shape
    return ctx.transpose(1, 2).reshape(b, n, h * dh) @ w_o


# ============================================================ mla_attention: right
def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q, k, v = (_heads(t, num_heads).to(ct) for t in (x @ w_q, c @ w_uk, c @ w_uv))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # scale 1/sqrt(d_head)
    b, h, n, dh = ctx.shape
    return ctx.to(x.dtype).transpose(1, 2).reshape(b, n, h * dh) @ w_o


def mla_absorbed_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention straight from the latents: per head, fold w_uk into the query and w_uv into
    the output projection (float64)."""
    X = x.double()
    c = X @ w_dkv.double()  # (B, N, d_c)
    width = w_q.shape[1]
    dh = width // num_heads
    n = x.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        s = (X @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)  # (B, N, N)
        if causal:
            s = s + torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
        p = torch.softmax(s, dim=-1)
        out += p @ c @ wo_lat
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def _per_head(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    return [(w_q[:, h * dh:(h + 1) * dh], w_uk[:, h * dh:(h + 1) * dh],
             w_uv[:, h * dh:(h + 1) * dh], w_o[h * dh:(h + 1) * dh, :])
            for h in range(num_heads)]


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    parts = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    wq_lat = torch.stack([wq @ wk.T / math.sqrt(dh) for wq, wk, _, _ in parts])
    wo_lat = torch.stack([wv @ wo for _, _, wv, wo in parts])
    return wq_lat, wo_lat


def absorb_transposed_product(w_uk, w_uv, w_q, w_o, num_heads):
    parts = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    wq_lat = torch.stack([wk @ wq.T for wq, wk, _, _ in parts])
    wo_lat = torch.stack([wv @ wo for _, _, wv, wo in parts])
    return wq_lat, wo_lat


def absorb_interleaved_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, d_head)
    k_h = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)  # (H, d_c, d_head)
    v_h = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)  # (H, d_head, d_model)
    return q_h @ k_h.transpose(1, 2), v_h @ o_h


def absorb_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq_lat = torch.einsum("mhe,che->hmc", w_q.reshape(-1, num_heads, dh),
                          w_uk.reshape(d_c, num_heads, dh))
    wo_lat = torch.einsum("che,hem->hcm", w_uk.reshape(d_c, num_heads, dh),
                          w_o.reshape(num_heads, dh, -1))
    return wq_lat, wo_lat


def absorb_all_heads_at_once(w_uk, w_uv, w_q, w_o, num_heads):
    return w_q @ w_uk.T, w_uv @ w_o


def absorb_d_head_from_latent(w_uk, w_uv, w_q, w_o, num_heads):
    d_c = w_uk.shape[0]
    dh = d_c // num_heads
    q_list, o_list = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        q_list.append(w_q[:, s] @ w_uk[:, s].T)
        o_list.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(q_list), torch.stack(o_list)


# ============================================================ absorb_mla_weights: right
def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_q.shape[1]
    dh = width // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    wq_lat = torch.zeros(num_heads, d_model, d_c, dtype=torch.float64)
    wo_lat = torch.zeros(num_heads, d_c, d_model, dtype=torch.float64)
    for h in range(num_heads):
        for j in range(h * dh, (h + 1) * dh):  # one head column at a time: rank-one updates
            wq_lat[h] += torch.outer(w_q[:, j].double(), w_uk[:, j].double())
            wo_lat[h] += torch.outer(w_uv[:, j].double(), w_o[j, :].double())
    return wq_lat.to(w_q.dtype), wo_lat.to(w_o.dtype)


def absorb_block_diagonal_mask(w_uk, w_uv, w_q, w_o, num_heads):
    """Each head's product is the full product with the other heads' columns zeroed."""
    width = w_q.shape[1]
    dh = width // num_heads
    head_of_col = torch.arange(width) // dh
    q_out, o_out = [], []
    for h in range(num_heads):
        sel = (head_of_col == h).to(w_q.dtype)  # (width,)
        q_out.append((w_q * sel) @ w_uk.T)
        o_out.append((w_uv * sel) @ w_o)
    return torch.stack(q_out, 0), torch.stack(o_out, 0)


B = "mla_kv_cache_bytes"
M = "mla_attention"
A = "absorb_mla_weights"
ENTRIES = [
    Entry(B, "wrong", "factor_two_for_k_and_v", "It keeps the factor 2 of kv_cache_bytes "
          "(one tensor for keys, one for values), but MLA caches one latent from which both "
          "are rebuilt.", bytes_k_and_v),
    Entry(B, "wrong", "rope_key_left_out", "It counts only the latent of kv_lora_rank values "
          "per token and layer and leaves out the shared RoPE key of rope_head_dim values.",
          bytes_no_rope_key),
    Entry(B, "wrong", "batch_ignored", "batch_size never enters the product: it counts the "
          "cache of one sequence.", bytes_no_batch),
    Entry(B, "wrong", "numpy_prod_type", "np.prod returns a numpy int64, not the plain Python "
          "int the contract asks for.", bytes_numpy_prod),
    Entry(B, "wrong", "precedence_missing_parens", "num_layers * kv_lora_rank + rope_head_dim "
          "* seq_len * ... lacks parentheses around (kv_lora_rank + rope_head_dim), so the "
          "latent width is multiplied only by the layers.", bytes_precedence),
    Entry(B, "wrong", "rank_times_rope", "It multiplies kv_lora_rank by rope_head_dim where the "
          "two widths add: the latent and the RoPE key sit side by side in the cache.",
          bytes_rank_times_rope),
    Entry(B, "right", "loop_over_layers", None, bytes_loop_over_layers),
    Entry(B, "right", "functools_reduce", None, bytes_reduce),
    Entry(M, "wrong", "scale_by_latent_width", "The scores are divided by sqrt(d_c), the "
          "latent width w_dkv.shape[1], instead of sqrt(d_head).", mla_scale_by_latent_width),
    Entry(M, "wrong", "d_head_from_d_model", "d_head is taken as d_model // num_heads, but "
          "here num_heads * d_head need not equal d_model: the reshape into heads raises when "
          "the widths differ (d_head = w_q.shape[1] // num_heads).", mla_d_head_from_d_model),
    Entry(M, "wrong", "values_from_w_uk", "The values are made with w_uk (a copy of the keys) "
          "instead of w_uv.", mla_values_from_w_uk),
    Entry(M, "wrong", "mask_hides_diagonal", "The causal mask hides triu(diagonal=0), the "
          "diagonal included, so a query cannot see its own key and the first row, with no "
          "visible key, becomes NaN.", mla_mask_hides_diagonal),
    Entry(M, "wrong", "merge_without_transpose", "Heads are merged with a plain reshape of "
          "(B, H, N, d_head) to (B, N, H * d_head) without transposing H and N back first, so "
          "positions and heads get mixed.", mla_merge_without_transpose),
    Entry(M, "wrong", "softmax_over_queries", "The softmax runs over dim=-2 (the queries) "
          "instead of the keys (dim=-1).", mla_softmax_over_queries),
    Entry(M, "right", "sdpa", None, mla_sdpa),
    Entry(M, "right", "absorbed_per_head_float64", None, mla_absorbed_per_head),
    Entry(A, "wrong", "scale_folded_in", "It folds 1/sqrt(d_head) into w_q_latent, but the "
          "absorbed weights keep the scale out: the scores divide by sqrt(d_head) later.",
          absorb_scale_folded_in),
    Entry(A, "wrong", "transposed_query_product", "w_q_latent[h] is w_uk_h @ w_q_h.T, shape "
          "(d_c, d_model), the transpose of w_q_h @ w_uk_h.T.", absorb_transposed_product),
    Entry(A, "wrong", "interleaved_head_split", "The weights are reshaped to (..., d_head, H), "
          "so head h gets every H-th column instead of the contiguous columns "
          "h*d_head:(h+1)*d_head.", absorb_interleaved_heads),
    Entry(A, "wrong", "w_uk_for_output", "w_o_latent is built from w_uk instead of w_uv: the "
          "key up-projection is reused where the value one belongs.", absorb_w_uk_for_output),
    Entry(A, "wrong", "all_heads_at_once", "It absorbs across all heads at once (w_q @ w_uk.T, "
          "w_uv @ w_o), summing over the heads instead of one product per head, and returns "
          "2-D matrices without the head axis.", absorb_all_heads_at_once),
    Entry(A, "wrong", "d_head_from_latent", "d_head is computed as d_c // num_heads (the "
          "latent width) instead of w_q.shape[1] // num_heads, so the heads get the wrong "
          "columns.", absorb_d_head_from_latent),
    Entry(A, "right", "rank_one_loop_float64", None, absorb_loop_float64),
    Entry(A, "right", "block_diagonal_mask", None, absorb_block_diagonal_mask),
]
