"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

EX_B = "mla_kv_cache_bytes"
EX_A = "mla_attention"
EX_W = "absorb_mla_weights"


# ============================================================ mla_kv_cache_bytes: wrong
def bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # keys and values
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    per_layer_token = (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * seq_len * per_layer_token


def bytes_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    # the RoPE key is shared, so it is stored once per sequence
    values = kv_lora_rank * seq_len + rope_head_dim
    return num_layers * values * batch_size * bytes_per_element


def bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def bytes_rejects_zero_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    for name, val in (("num_layers", num_layers), ("kv_lora_rank", kv_lora_rank),
                      ("rope_head_dim", rope_head_dim), ("seq_len", seq_len),
                      ("batch_size", batch_size), ("bytes_per_element", bytes_per_element)):
        if not isinstance(val, int) or val <= 0:
            raise ValueError(f"{name}={val!r} must be a positive int")
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def bytes_reduce_mul(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return functools.reduce(operator.mul, factors, 1)


def bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return int(total)


# ============================================================ mla_attention: helpers
def _softmax_masked(s, mask):
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    return torch.softmax(s, dim=-1)


# ============================================================ mla_attention: wrong
def mla_scale_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, -1).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, -1).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, -1).transpose(1, 2).to(ct)
    d_head = d_model // num_heads
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    mask = torch.ones(N, N, dtype=torch.bool).tril() if causal else None
    ctx = _softmax_masked(s, mask) @ v
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2).to(ct)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uk)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(scores, -1) @ v
    return ctx.transpose(1, 2).reshape(b, n, num_heads * d_head).to(x.dtype) @ w_o


def mla_split_no_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh).to(ct)
    k = (c @ w_uk).reshape(B, num_heads, N, dh).to(ct)
    v = (c @ w_uv).reshape(B, num_heads, N, dh).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    o = torch.softmax(s, dim=-1) @ v
    return o.transpose(1, 2).reshape(B, N, width).to(x.dtype) @ w_o


def mla_strict_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, H, dh).permute(0, 2, 1, 3).to(ct)
    k = (c @ w_uk).view(B, N, H, dh).permute(0, 2, 1, 3).to(ct)
    v = (c @ w_uv).view(B, N, H, dh).permute(0, 2, 1, 3).to(ct)
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)
        s = s.masked_fill(~allowed, -math.inf)
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bhij,bhjd->bhid", p, v)
    return o.permute(0, 2, 1, 3).reshape(B, N, H * dh).to(x.dtype) @ w_o


def mla_softmax_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    s = (q @ k.transpose(-2, -1)) / dh ** 0.5
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, dim=-2)
    return (w @ v).transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_masked_fill_allowed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        mask = torch.ones(N, N, dtype=torch.bool).tril()  # True = may attend
        s = s.masked_fill(mask, -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


# ============================================================ mla_attention: right
def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x.to(ct) @ w_dkv.to(ct)

    def split(t):
        return t.unflatten(-1, (num_heads, width // num_heads)).transpose(1, 2)

    q, k, v = split(x.to(ct) @ w_q.to(ct)), split(c @ w_uk.to(ct)), split(c @ w_uv.to(ct))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = ctx.transpose(1, 2).flatten(2) @ w_o.to(ct)
    return out.to(x.dtype)


def mla_head_loop_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    x64 = x.double()
    B, N, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    c = x64 @ w_dkv.double()
    out = torch.zeros(B, N, d_model, dtype=torch.float64)
    visible = torch.ones(N, N, dtype=torch.bool)
    if causal:
        visible = torch.tril(visible)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_h = x64 @ w_q.double()[:, cols]
        k_h = c @ w_uk.double()[:, cols]
        v_h = c @ w_uv.double()[:, cols]
        s = torch.einsum("bid,bjd->bij", q_h, k_h) / math.sqrt(dh)
        s = torch.where(visible, s, torch.tensor(-math.inf, dtype=torch.float64))
        p = torch.softmax(s, dim=-1)
        out += (p @ v_h) @ w_o.double()[cols, :]  # heads add up through their rows of w_o
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_transposed_q(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_uk[:, cols] @ w_q[:, cols].T)
        wo_lat.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_reshape_no_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_heads = w_q.reshape(num_heads, d_model, dh)
    uk_heads = w_uk.reshape(num_heads, d_c, dh)
    uv_heads = w_uv.reshape(num_heads, d_c, dh)
    o_heads = w_o.reshape(num_heads, dh, d_model)
    return q_heads @ uk_heads.transpose(1, 2), uv_heads @ o_heads


def absorb_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    uk_h = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    uv_h = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    o_h = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = q_h @ uk_h.transpose(-2, -1) / math.sqrt(dh)  # the score scale folded in
    return w_q_latent, uv_h @ o_h


def absorb_dhead_from_dmodel(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    wq_l = torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @ w_uk[:, h * d_head:(h + 1) * d_head].T
                        for h in range(num_heads)])
    wo_l = torch.stack([w_uv[:, h * d_head:(h + 1) * d_head] @ w_o[h * d_head:(h + 1) * d_head]
                        for h in range(num_heads)])
    return wq_l, wo_l


def absorb_stack_last(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs = [w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T for h in range(num_heads)]
    os_ = [w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :] for h in range(num_heads)]
    return torch.stack(qs, dim=-1), torch.stack(os_, dim=-1)


def absorb_wo_uses_w_uk(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.view(d_model, num_heads, dh).transpose(0, 1)
    k_h = w_uk.view(d_c, num_heads, dh).transpose(0, 1)
    v_h = w_uk.view(d_c, num_heads, dh).transpose(0, 1)
    o_h = w_o.view(num_heads, dh, d_model)
    return torch.bmm(q_h, k_h.transpose(1, 2)), torch.bmm(v_h, o_h)


# ============================================================ absorb_mla_weights: right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    wq = w_q.reshape(d_model, num_heads, e)
    uk = w_uk.reshape(d_c, num_heads, e)
    uv = w_uv.reshape(d_c, num_heads, e)
    wo = w_o.reshape(num_heads, e, d_model)
    return torch.einsum("mhe,che->hmc", wq, uk), torch.einsum("che,hem->hcm", uv, wo)


def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dtype = w_q.dtype
    uk, uv, q, o = (w.to(torch.float64) for w in (w_uk, w_uv, w_q, w_o))
    d_head = q.shape[1] // num_heads
    first, second = [], []
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        first.append(q[:, lo:hi].mm(uk[:, lo:hi].t()))
        second.append(uv[:, lo:hi].mm(o[lo:hi]))
    return torch.stack(first).to(dtype), torch.stack(second).to(dtype)


ENTRIES = [
    Entry(EX_B, "wrong", "factor_two_k_and_v", "It multiplies by 2 for keys and values as in "
          "kv_cache_bytes, but MLA caches one latent from which both are rebuilt: no factor "
          "2.", bytes_k_and_v),
    Entry(EX_B, "wrong", "batch_ignored", "batch_size is never multiplied in: the result is "
          "the cache of one sequence whatever the batch.", bytes_no_batch),
    Entry(EX_B, "wrong", "numpy_int", "np.prod returns a numpy.int64, not the plain Python "
          "int the exercise asks for.", bytes_np_prod),
    Entry(EX_B, "wrong", "rope_key_once_per_sequence", "The shared RoPE key is counted once "
          "per sequence instead of once per token: it is shared by the heads, not by the "
          "tokens.", bytes_rope_once),
    Entry(EX_B, "wrong", "missing_parentheses", "Operator precedence: num_layers * "
          "kv_lora_rank + rope_head_dim * ... multiplies only the RoPE part by the tokens and "
          "bytes; (kv_lora_rank + rope_head_dim) needs parentheses.", bytes_precedence),
    Entry(EX_B, "wrong", "rejects_zero_rope", "The guard requires every argument to be "
          "positive and raises ValueError for rope_head_dim=0 (no RoPE part), which is "
          "allowed and costs 0 bytes.", bytes_rejects_zero_rope),
    Entry(EX_B, "right", "reduce_mul", None, bytes_reduce_mul),
    Entry(EX_B, "right", "per_layer_loop", None, bytes_layer_loop),
    Entry(EX_A, "wrong", "scale_d_model_over_heads", "The scale uses d_model // num_heads "
          "instead of d_head = w_q.shape[1] // num_heads; the two differ when num_heads * "
          "d_head != d_model.", mla_scale_d_model),
    Entry(EX_A, "wrong", "values_from_w_uk", "The values are computed with w_uk (copied from "
          "the keys line) instead of w_uv, so v equals k.", mla_values_from_w_uk),
    Entry(EX_A, "wrong", "split_without_transpose", "The heads are split by reshaping "
          "straight to (B, H, N, d_head) without going through (B, N, H, d_head) and "
          "transposing, which mixes tokens and heads.", mla_split_no_transpose),
    Entry(EX_A, "wrong", "mask_excludes_diagonal", "The causal mask is tril(diagonal=-1): a "
          "query may not see its own key (the first query sees nothing and gives NaN).",
          mla_strict_mask),
    Entry(EX_A, "wrong", "softmax_over_queries", "The softmax is taken over dim=-2 (the "
          "queries) instead of over the keys.", mla_softmax_queries),
    Entry(EX_A, "wrong", "masked_fill_on_allowed", "masked_fill fills where the mask is True, "
          "and the mask is True where attention is allowed: the allowed scores become -inf "
          "and only the future keys stay (the last row is all -inf, NaN).",
          mla_masked_fill_allowed),
    Entry(EX_A, "right", "sdpa_float32", None, mla_sdpa),
    Entry(EX_A, "right", "head_loop_float64", None, mla_head_loop_float64),
    Entry(EX_W, "wrong", "q_latent_transposed", "w_q_latent[h] is computed as w_uk_h @ "
          "w_q_h.T, the transpose (d_c, d_model) of w_q_h @ w_uk_h.T.", absorb_transposed_q),
    Entry(EX_W, "wrong", "reshape_heads_first", "The weights are reshaped straight to "
          "(num_heads, d_in, d_head) without permuting, so a head's slice is not its "
          "columns h*d_head:(h+1)*d_head.", absorb_reshape_no_permute),
    Entry(EX_W, "wrong", "scale_folded_in", "The 1/sqrt(d_head) score scale is folded into "
          "w_q_latent, which the exercise keeps out (the scores divide by sqrt(d_head) "
          "later).", absorb_scale_folded),
    Entry(EX_W, "wrong", "d_head_from_d_model", "d_head is taken as d_model // num_heads "
          "instead of w_q.shape[1] // num_heads, so the head slices are wrong when num_heads "
          "* d_head != d_model.", absorb_dhead_from_dmodel),
    Entry(EX_W, "wrong", "stacked_on_last_axis", "The per-head matrices are stacked on the "
          "last axis, giving (d_model, d_c, H) and (d_c, d_model, H) instead of a leading head "
          "axis.", absorb_stack_last),
    Entry(EX_W, "wrong", "w_o_latent_from_w_uk", "w_o_latent is built from w_uk (the keys' "
          "up-projection, reused by copy) instead of w_uv.", absorb_wo_uses_w_uk),
    Entry(EX_W, "right", "einsum_views", None, absorb_einsum),
    Entry(EX_W, "right", "head_loop_float64", None, absorb_loop_float64),
]
