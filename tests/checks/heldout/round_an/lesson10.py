"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # a K and a V entry per token
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token_layer = kv_lora_rank + rope_head_dim * bytes_per_element
    return num_layers * seq_len * batch_size * per_token_layer


def mla_bytes_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    values = num_layers * (kv_lora_rank + rope_head_dim) * seq_len
    return values * bytes_per_element


def mla_bytes_hardcoded_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    elements = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return elements * 2  # bf16


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = num_layers * kv_lora_rank + rope_head_dim  # one shared rope key
    return per_token * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def mla_bytes_loops(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        per_layer = 0
        for _seq in range(batch_size):
            per_layer += seq_len * (kv_lora_rank * bytes_per_element
                                    + rope_head_dim * bytes_per_element)
        total += per_layer
    return total


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = (num_layers, seq_len, batch_size, bytes_per_element, kv_lora_rank + rope_head_dim)
    return int(functools.reduce(operator.mul, factors, 1))


# ============================================================ mla_attention: wrong
def mla_scale_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(w_dkv.shape[1])
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v.float()
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~allowed, -math.inf)
    out = torch.softmax(scores, -1) @ v.float()
    return out.transpose(1, 2).reshape(b, n, -1).to(x.dtype) @ w_o


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    latent = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2).float()
    k = (latent @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2).float()
    v = (latent @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2).float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        mask = torch.tril(torch.ones(N, N, dtype=torch.bool))  # True = may attend
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    ctx = (w @ v).transpose(1, 2).reshape(B, N, width)
    return ctx.to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (c @ w_uk).reshape(B, num_heads, N, dh)
    v = (c @ w_uv).reshape(B, num_heads, N, dh)
    s = torch.einsum("bhid,bhjd->bhij", q.float(), k.float()) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    p = s.softmax(-1)
    o = torch.einsum("bhij,bhjd->bhid", p, v.float())
    return o.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_swapped_up_projections(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(batch, n, num_heads, d_head).permute(0, 2, 1, 3)
    k = (c @ w_uv).view(batch, n, num_heads, d_head).permute(0, 2, 1, 3)
    v = (c @ w_uk).view(batch, n, num_heads, d_head).permute(0, 2, 1, 3)
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * d_head ** -0.5
    if causal:
        scores = scores.masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
    ctx = torch.matmul(torch.softmax(scores, dim=-1), v.float())
    return ctx.permute(0, 2, 1, 3).reshape(batch, n, -1).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, d_head).transpose(1, 2).float()  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    a = torch.softmax(s, dim=-2)
    y = (a @ v).transpose(1, 2).reshape(B, N, -1)
    return y.to(x.dtype) @ w_o


# ============================================================ mla_attention: right
def mla_sdpa_float32(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    xf = x.float()
    c = xf @ w_dkv.float()

    def heads(t):
        return t.unflatten(-1, (num_heads, d_head)).transpose(1, 2)

    q, k, v = heads(xf @ w_q.float()), heads(c @ w_uk.float()), heads(c @ w_uv.float())
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    merged = ctx.transpose(1, 2).flatten(2)
    return (merged @ w_o.float()).to(x.dtype)


def mla_absorbed_per_head_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Per head in the latent space: scores (x W_q,h W_uk,h^T) c^T, output p c W_uv,h W_o,h."""
    xd = x.double()
    c = xd @ w_dkv.double()  # (B, N, d_c)
    d_head = w_q.shape[1] // num_heads
    n = x.shape[1]
    out = torch.zeros(x.shape, dtype=torch.float64)
    allowed = torch.ones(n, n, dtype=torch.bool)
    if causal:
        allowed = allowed.tril()
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        s = (xd @ wq_lat) @ c.transpose(1, 2) / math.sqrt(d_head)
        s = s.masked_fill(~allowed, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += p @ c @ wo_lat
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_product_order(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        ql.append(w_uk[:, sl] @ w_q[:, sl].T)
        ol.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(ql), torch.stack(ol)


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    wq = w_q.reshape(d_model, num_heads, d_head).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, d_head, d_model)
    q_lat = wq @ wuk.transpose(1, 2) / math.sqrt(d_head)
    o_lat = wuv @ wo
    return q_lat, o_lat


def absorb_w_o_rows_interleaved(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    q_h = w_q.reshape(d_model, num_heads, d_head).permute(1, 0, 2)
    k_h = w_uk.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    v_h = w_uv.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    o_h = w_o.reshape(d_head, num_heads, d_model).permute(1, 0, 2)
    return q_h @ k_h.transpose(-2, -1), v_h @ o_h


def absorb_dhead_from_dmodel(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[0] // num_heads
    q_parts, o_parts = [], []
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        q_parts.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].T)
        o_parts.append(w_uv[:, lo:hi] @ w_o[lo:hi, :])
    return torch.stack(q_parts), torch.stack(o_parts)


def absorb_stack_last_dim(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_uk.shape[1] // num_heads
    wq_lat = []
    wo_lat = []
    for h in range(num_heads):
        c = slice(h * d_head, (h + 1) * d_head)
        wq_lat.append(torch.mm(w_q[:, c], w_uk[:, c].t()))
        wo_lat.append(torch.mm(w_uv[:, c], w_o[c]))
    return torch.stack(wq_lat, dim=-1), torch.stack(wo_lat, dim=-1)


def absorb_all_heads_at_once(w_uk, w_uv, w_q, w_o, num_heads):
    w_q_latent = w_q @ w_uk.T  # (d_model, d_c)
    w_o_latent = w_uv @ w_o  # (d_c, d_model)
    return w_q_latent, w_o_latent


# ============================================================ absorb_mla_weights: right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    q3 = w_q.reshape(d_model, num_heads, e)
    k3 = w_uk.reshape(d_c, num_heads, e)
    v3 = w_uv.reshape(d_c, num_heads, e)
    o3 = w_o.reshape(num_heads, e, d_model)
    return torch.einsum("mhe,che->hmc", q3, k3), torch.einsum("che,hem->hcm", v3, o3)


def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    q_lat = torch.zeros((num_heads, d_model, d_c), dtype=torch.float64)
    o_lat = torch.zeros((num_heads, d_c, d_model), dtype=torch.float64)
    for h in range(num_heads):
        for j in range(d_head):  # a product of slices is a sum of rank-one outer products
            col = h * d_head + j
            q_lat[h] += torch.outer(w_q[:, col].double(), w_uk[:, col].double())
            o_lat[h] += torch.outer(w_uv[:, col].double(), w_o[col].double())
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "k_and_v",
          "counts the latent (and RoPE key) twice, once for K and once for V, as in a standard "
          "KV cache; MLA recomputes both from one latent", mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "precedence",
          "writes kv_lora_rank + rope_head_dim * bytes_per_element without parentheses, so only "
          "the RoPE part is converted to bytes", mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_prod",
          "returns np.prod(...), a numpy int64, where the contract wants a plain Python int",
          mla_bytes_numpy_prod),
    Entry("mla_kv_cache_bytes", "wrong", "no_batch",
          "leaves batch_size out: the cache of one sequence, not of the batch",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "hardcoded_bf16",
          "multiplies by 2 (bf16) instead of bytes_per_element, ignoring the argument",
          mla_bytes_hardcoded_bf16),
    Entry("mla_kv_cache_bytes", "wrong", "rope_once",
          "counts the shared RoPE key once per token for the whole model instead of once per "
          "layer: (layers * rank + rope) instead of layers * (rank + rope)", mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "right", "nested_loops", None, mla_bytes_loops),
    Entry("mla_kv_cache_bytes", "right", "functools_reduce", None, mla_bytes_reduce),
    Entry("mla_attention", "wrong", "scale_latent_width",
          "scales the scores by 1/sqrt(d_c) (the latent width, w_dkv.shape[1]) instead of "
          "1/sqrt(d_head)", mla_scale_latent_width),
    Entry("mla_attention", "wrong", "dhead_from_dmodel",
          "takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model; the "
          "head split then raises when the projection width differs", mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "mask_inverted",
          "fills -inf where the tril mask is True, so with True = may attend it hides the past "
          "and the diagonal instead of the future (the last row is all -inf: NaN)",
          mla_mask_inverted),
    Entry("mla_attention", "wrong", "split_without_transpose",
          "splits the heads with reshape(B, H, N, d_head) directly, without the "
          "reshape(B, N, H, d_head).transpose(1, 2), so tokens and heads are mixed up",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "swapped_up_projections",
          "builds the keys with w_uv and the values with w_uk: the two up-projections are "
          "swapped", mla_swapped_up_projections),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "normalises with softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa_float32),
    Entry("mla_attention", "right", "absorbed_per_head_float64", None,
          mla_absorbed_per_head_float64),
    Entry("absorb_mla_weights", "wrong", "product_order",
          "multiplies w_uk_h @ w_q_h.T, the transpose of w_q_h @ w_uk_h.T: w_q_latent comes out "
          "(H, d_c, d_model)", absorb_product_order),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "folds 1/sqrt(d_head) into w_q_latent, although the scale stays outside (the scores "
          "divide by sqrt(d_head) afterwards)", absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w_o_rows_interleaved",
          "reshapes w_o as (d_head, H, d_model), so head h gets every H-th row instead of rows "
          "h*d_head:(h+1)*d_head", absorb_w_o_rows_interleaved),
    Entry("absorb_mla_weights", "wrong", "dhead_from_dmodel",
          "takes d_head = w_q.shape[0] // num_heads (d_model) instead of w_q.shape[1] // "
          "num_heads, so the per-head column slices are wrong", absorb_dhead_from_dmodel),
    Entry("absorb_mla_weights", "wrong", "stack_last_dim",
          "stacks the per-head matrices with dim=-1, giving (d_model, d_c, H) instead of a "
          "leading head axis", absorb_stack_last_dim),
    Entry("absorb_mla_weights", "wrong", "all_heads_at_once",
          "absorbs w_q @ w_uk.T for all heads at once, which sums the heads together; the "
          "per-head softmax needs one matrix per head", absorb_all_heads_at_once),
    Entry("absorb_mla_weights", "right", "einsum", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "rank_one_outer_products_float64", None,
          absorb_loop_float64),
]
