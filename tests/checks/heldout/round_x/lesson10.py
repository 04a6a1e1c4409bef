"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mla_bytes_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_forgets_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    values_per_layer = (kv_lora_rank + rope_head_dim) * seq_len
    return num_layers * values_per_layer * bytes_per_element


def mla_bytes_numpy_int(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_ignores_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return num_layers * latent * seq_len * batch_size


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_once_for_all_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len,
                                       batch_size=1, bytes_per_element=2):
    per_token = num_layers * kv_lora_rank + rope_head_dim  # the RoPE key is shared
    return per_token * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _seq in range(batch_size):
            total += seq_len * (kv_lora_rank * bytes_per_element + rope_head_dim * bytes_per_element)
    return total


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1))


# ============================================================ mla_attention: wrong
def mla_scale_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, -1).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, -1).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, -1).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = (s.softmax(-1) @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    lat = x @ w_dkv

    def heads(t):
        return t.view(B, N, num_heads, dh).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(lat @ w_uk), heads(lat @ w_uk)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(f) @ k.to(f).transpose(-1, -2) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    attn = torch.softmax(scores, dim=-1)
    out = (attn @ v.to(f)).to(x.dtype).transpose(1, 2).reshape(B, N, num_heads * dh)
    return out @ w_o


def mla_reshape_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, d_head)
    k = (c @ w_uk).reshape(B, num_heads, N, d_head)
    v = (c @ w_uv).reshape(B, num_heads, N, d_head)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = torch.einsum("bhid,bhjd->bhij", q.to(ct), k.to(ct)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), float("-inf"))
    ctx = torch.einsum("bhij,bhjd->bhid", s.softmax(dim=-1), v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, width) @ w_o


def mla_strict_causal_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(batch, n, num_heads, dh).permute(0, 2, 1, 3)
    k = (c @ w_uk).reshape(batch, n, num_heads, dh).permute(0, 2, 1, 3)
    v = (c @ w_uv).reshape(batch, n, num_heads, dh).permute(0, 2, 1, 3)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(f) @ k.to(f).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1)
        scores = scores.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    ctx = (w @ v.to(f)).to(x.dtype)
    return ctx.permute(0, 2, 1, 3).reshape(batch, n, width) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (c @ w_uk).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    v = (c @ w_uv).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) * dh ** -0.5
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    p = torch.softmax(s, dim=-2)
    p = torch.nan_to_num(p, nan=0.0)
    ctx = (p @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).flatten(2) @ w_o


def mla_sdpa_double_scale(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).view(B, N, num_heads, d_head).transpose(1, 2).to(ct) / math.sqrt(d_head)
    k = (c @ w_uk).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, d_head).transpose(1, 2).to(ct)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.to(x.dtype).transpose(1, 2).reshape(B, N, width) @ w_o


# ============================================================ mla_attention: right
def mla_sdpa_float32(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    c = xf @ w_dkv.to(ct)
    q = (xf @ w_q.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    merged = ctx.transpose(1, 2).reshape(B, N, width)
    return (merged @ w_o.to(ct)).to(x.dtype)


def mla_absorbed_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Absorbed form: scores and outputs straight from the latents, head by head, float64."""
    B, N, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    out = torch.zeros(B, N, d_model, dtype=torch.float64)
    allowed = torch.ones(N, N, dtype=torch.bool).tril() if causal else torch.ones(N, N, dtype=torch.bool)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        scores = (x64 @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)  # (B, N, N)
        scores = scores.masked_fill(~allowed, -math.inf)
        out += torch.softmax(scores, dim=-1) @ c @ wo_lat
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_reshape_order(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)
    uk_h = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    uv_h = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        ql.append(w_q[:, sl] @ w_uk[:, sl].T / math.sqrt(dh))
        ol.append(w_uv[:, sl] @ w_o[sl])
    return torch.stack(ql), torch.stack(ol)


def absorb_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    w_q_latent, w_o_latent = [], []
    for h in range(num_heads):
        a, b = h * d_head, (h + 1) * d_head
        w_q_latent.append(w_q[:, a:b] @ w_uk[:, a:b].transpose(0, 1))
        w_o_latent.append(w_uk[:, a:b] @ w_o[a:b, :])
    return torch.stack(w_q_latent, dim=0), torch.stack(w_o_latent, dim=0)


def absorb_stack_dim1(w_uk, w_uv, w_q, w_o, num_heads):
    d = w_q.shape[1] // num_heads
    qs = [w_q[:, i * d:(i + 1) * d] @ w_uk[:, i * d:(i + 1) * d].T for i in range(num_heads)]
    os_ = [w_uv[:, i * d:(i + 1) * d] @ w_o[i * d:(i + 1) * d] for i in range(num_heads)]
    return torch.stack(qs, dim=1), torch.stack(os_, dim=1)


def absorb_heads_from_one(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(1, num_heads + 1):
        lo, hi = h * d_head, (h + 1) * d_head
        q_lat.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].T)
        o_lat.append(w_uv[:, lo:hi] @ w_o[lo:hi, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_summed_over_heads(w_uk, w_uv, w_q, w_o, num_heads):
    q_all = w_q @ w_uk.T  # (d_model, d_c)
    o_all = w_uv @ w_o  # (d_c, d_model)
    return (q_all.unsqueeze(0).expand(num_heads, -1, -1).contiguous(),
            o_all.unsqueeze(0).expand(num_heads, -1, -1).contiguous())


# ============================================================ absorb_mla_weights: right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.view(d_model, num_heads, dh)
    uk3 = w_uk.view(d_c, num_heads, dh)
    uv3 = w_uv.view(d_c, num_heads, dh)
    o3 = w_o.view(num_heads, dh, d_model)
    return (torch.einsum("mhd,chd->hmc", q3, uk3), torch.einsum("chd,hde->hce", uv3, o3))


def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    wq_lat = torch.empty(num_heads, d_model, d_c, dtype=torch.float64)
    wo_lat = torch.empty(num_heads, d_c, d_model, dtype=torch.float64)
    for h in range(num_heads):
        cols = torch.arange(h * dh, (h + 1) * dh)
        wq_lat[h] = torch.mm(w_q.double().index_select(1, cols), w_uk.double().index_select(1, cols).t())
        wo_lat[h] = torch.mm(w_uv.double().index_select(1, cols), w_o.double().index_select(0, cols))
    return wq_lat.to(w_q.dtype), wo_lat.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "multiplies by 2 for keys and values as in an ordinary KV cache, but MLA caches one "
          "latent from which both are recomputed",
          mla_bytes_factor_two),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_batch",
          "never multiplies by batch_size, so it counts one sequence only",
          mla_bytes_forgets_batch),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int",
          "multiplies with np.prod, which returns a numpy int64 instead of a plain Python int",
          mla_bytes_numpy_int),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_rope_key",
          "counts only the latent of kv_lora_rank values and forgets the shared RoPE key of "
          "rope_head_dim values per token and layer",
          mla_bytes_ignores_rope),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without "
          "parentheses around (kv_lora_rank + rope_head_dim) only the RoPE part is multiplied "
          "by the tokens and bytes",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "rope_once_for_all_layers",
          "counts the RoPE key once for all layers (num_layers * kv_lora_rank + rope_head_dim): "
          "it is shared by the heads, but every layer keeps its own",
          mla_bytes_rope_once_for_all_layers),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers_and_batch", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "functools_reduce", None, mla_bytes_reduce),

    Entry("mla_attention", "wrong", "scale_from_d_model",
          "scales the scores by 1/sqrt(d_model // num_heads), the lesson-02 head width, instead "
          "of 1/sqrt(d_head) with d_head = w_q.shape[1] // num_heads",
          mla_scale_from_d_model),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "builds the values with c @ w_uk, the keys' up-projection, instead of c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "reshape_without_transpose",
          "splits the heads with reshape(B, H, N, d_head) directly instead of reshape(B, N, H, "
          "d_head).transpose(1, 2), which scrambles tokens and heads",
          mla_reshape_without_transpose),
    Entry("mla_attention", "wrong", "strict_causal_mask",
          "builds the causal mask with tril(diagonal=-1), which also hides each query's own key, "
          "so the first query sees no key at all (NaN)",
          mla_strict_causal_mask),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of over the keys",
          mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "sdpa_double_scale",
          "divides q by sqrt(d_head) and then calls F.scaled_dot_product_attention, which "
          "scales by 1/sqrt(d_head) again by default: scores scaled by 1/d_head",
          mla_sdpa_double_scale),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa_float32),
    Entry("mla_attention", "right", "absorbed_per_head_float64", None, mla_absorbed_per_head),

    Entry("absorb_mla_weights", "wrong", "reshape_order_d_head_first",
          "splits the columns with reshape(d_in, d_head, H), so head h gets every H-th column "
          "instead of the contiguous block h*d_head:(h+1)*d_head",
          absorb_reshape_order),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "folds 1/sqrt(d_head) into w_q_latent, which should stay unscaled (the scores divide "
          "by sqrt(d_head) afterwards)",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w_uk_for_output",
          "builds w_o_latent from w_uk_h @ w_o_h instead of w_uv_h @ w_o_h (copy-paste of the "
          "key up-projection)",
          absorb_w_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "stack_on_dim1",
          "stacks the per-head matrices on dim=1, giving (d_model, H, d_c) and (d_c, H, d_model) "
          "instead of a leading head axis",
          absorb_stack_dim1),
    Entry("absorb_mla_weights", "wrong", "heads_numbered_from_one",
          "loops h = 1 .. num_heads, so every head takes the next head's columns and the last "
          "one an empty slice (a zero matrix)",
          absorb_heads_from_one),
    Entry("absorb_mla_weights", "wrong", "summed_over_heads",
          "multiplies the full matrices w_q @ w_uk.T and w_uv @ w_o, which sums over all heads, "
          "and gives that same matrix to every head",
          absorb_summed_over_heads),
    Entry("absorb_mla_weights", "right", "einsum_views", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "index_select_loop_float64", None, absorb_loop_float64),
]
