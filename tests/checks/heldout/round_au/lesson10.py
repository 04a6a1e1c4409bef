"""Lesson 10 (MLA): held-out learners' answers for mla_kv_cache_bytes, mla_attention and
absorb_mla_weights."""

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
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_latent_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_seq = num_layers * (kv_lora_rank + rope_head_dim) * seq_len
    return per_seq * bytes_per_element


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    # the RoPE key is shared, so it is stored once per token
    per_token = num_layers * kv_lora_rank + rope_head_dim
    return per_token * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
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
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1))


# ============================================================ mla_attention: wrong
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    c = (x @ w_dkv).to(ct)
    q = (x.to(ct) @ w_q.to(ct)).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk.to(ct)).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv.to(ct)).view(B, N, num_heads, dh).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, -1) @ v
    return (ctx.transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o.to(ct)).to(x.dtype)


def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    d_head = d_model // num_heads
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)

    def heads(t):
        return t.reshape(B, N, num_heads, -1).transpose(1, 2)

    q, k, v = heads(xc @ w_q.to(ct)), heads(c @ w_uk.to(ct)), heads(c @ w_uv.to(ct))
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), float("-inf"))
    out = torch.softmax(s, dim=-1) @ v
    return (out.transpose(1, 2).reshape(B, N, -1) @ w_o.to(ct)).to(x.dtype)


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    width = w_q.shape[1]
    dh = width // num_heads
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)
    q = (xc @ w_q.to(ct)).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = (c @ w_uk.to(ct)).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    v = (c @ w_uv.to(ct)).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        future = torch.ones(N, N, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(~future, float("-inf"))
    m = scores.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), 0.0, m)
    e = torch.exp(scores - m)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, 1.0, tot)
    ctx = (w @ v).permute(0, 2, 1, 3).reshape(B, N, width)
    return (ctx @ w_o.to(ct)).to(x.dtype)


def mla_reshape_no_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    width = w_q.shape[1]
    dh = width // num_heads
    xc = x.to(ct)
    lat = xc @ w_dkv.to(ct)
    q = (xc @ w_q.to(ct)).reshape(B, num_heads, N, dh)
    k = (lat @ w_uk.to(ct)).reshape(B, num_heads, N, dh)
    v = (lat @ w_uv.to(ct)).reshape(B, num_heads, N, dh)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return (ctx.reshape(B, N, width) @ w_o.to(ct)).to(x.dtype)


def mla_values_from_wuk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    width = w_q.shape[1]
    dh = width // num_heads
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)
    split = lambda t: t.view(B, N, num_heads, dh).transpose(1, 2)  # noqa: E731
    q = split(xc @ w_q.to(ct))
    k = split(c @ w_uk.to(ct))
    v = split(c @ w_uk.to(ct))
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, -1) @ v
    return (ctx.transpose(1, 2).reshape(B, N, width) @ w_o.to(ct)).to(x.dtype)


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    ct = torch.promote_types(x.dtype, torch.float32)
    width = w_q.shape[1]
    dh = width // num_heads
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)
    q = (xc @ w_q.to(ct)).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk.to(ct)).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv.to(ct)).view(B, N, num_heads, dh).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    p = torch.softmax(s, dim=-2)
    ctx = p @ v
    return (ctx.transpose(1, 2).reshape(B, N, width) @ w_o.to(ct)).to(x.dtype)


# ============================================================ mla_attention: right
def mla_head_loop_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    x64 = x.double()
    B, N, d_model = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x64 @ w_dkv.double()
    out = torch.zeros(B, N, d_model, dtype=torch.float64)
    allowed = torch.ones(N, N, dtype=torch.bool).tril() if causal else torch.ones(N, N, dtype=torch.bool)
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q_h = x64 @ w_q.double()[:, cols]
        k_h = c @ w_uk.double()[:, cols]
        v_h = c @ w_uv.double()[:, cols]
        s = q_h @ k_h.transpose(1, 2) / math.sqrt(d_head)
        s = s.masked_fill(~allowed, -math.inf)
        out += torch.softmax(s, dim=-1) @ v_h @ w_o.double()[cols, :]
    return out.to(x.dtype)


def mla_absorbed_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention over the latents: queries and outputs carry the absorbed up-projections."""
    ct = torch.promote_types(x.dtype, torch.float32)
    d_c = w_dkv.shape[1]
    width = w_q.shape[1]
    d_head = width // num_heads
    d_model = x.shape[-1]
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)  # (B, N, d_c)
    wq_h = w_q.to(ct).reshape(d_model, num_heads, d_head)
    wuk_h = w_uk.to(ct).reshape(d_c, num_heads, d_head)
    wuv_h = w_uv.to(ct).reshape(d_c, num_heads, d_head)
    wo_h = w_o.to(ct).reshape(num_heads, d_head, d_model)
    q_lat = torch.einsum("bnm,mhe,che->bhnc", xc, wq_h, wuk_h)  # (B, H, N, d_c)
    kv = c.unsqueeze(1).expand(-1, num_heads, -1, -1)
    mixed = F.scaled_dot_product_attention(q_lat, kv, kv, is_causal=causal,
                                           scale=1.0 / math.sqrt(d_head))  # (B, H, N, d_c)
    out = torch.einsum("bhnc,che,hem->bnm", mixed, wuv_h, wo_h)
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_q[:, sl] @ w_uk[:, sl].T / math.sqrt(dh))  # fold the scale in too
        wo_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_wq_reshape_no_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(num_heads, d_model, dh)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_dhead_from_dmodel(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    q_parts, o_parts = [], []
    for h in range(num_heads):
        a, b = h * d_head, (h + 1) * d_head
        q_parts.append(w_q[:, a:b] @ w_uk[:, a:b].transpose(0, 1))
        o_parts.append(w_uv[:, a:b] @ w_o[a:b])
    return torch.stack(q_parts, 0), torch.stack(o_parts, 0)


def absorb_output_uses_wuk(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    uk = w_uk.view(d_c, num_heads, dh).transpose(0, 1)
    q = w_q.view(d_model, num_heads, dh).transpose(0, 1)
    o = w_o.view(num_heads, dh, d_model)
    return q @ uk.transpose(-1, -2), uk @ o


def absorb_stack_wrong_dim(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq_l = []
    wo_l = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_q[:, cols] @ w_uk[:, cols].T)
        wo_l.append(w_uv[:, cols] @ w_o[cols])
    return torch.stack(wq_l, dim=1), torch.stack(wo_l, dim=1)


def absorb_query_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq_l = []
    wo_l = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_uk[:, cols] @ w_q[:, cols].T)  # (d_c, d_model)
        wo_l.append(w_uv[:, cols] @ w_o[cols])
    return torch.stack(wq_l), torch.stack(wo_l)


# ============================================================ absorb_mla_weights: right
def absorb_einsum_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    wq = w_q.double().reshape(d_model, num_heads, e)
    uk = w_uk.double().reshape(d_c, num_heads, e)
    uv = w_uv.double().reshape(d_c, num_heads, e)
    wo = w_o.double().reshape(num_heads, e, d_model)
    q_lat = torch.einsum("mhe,che->hmc", wq, uk)
    o_lat = torch.einsum("che,hem->hcm", uv, wo)
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


def absorb_chunk_loop(w_uk, w_uv, w_q, w_o, num_heads):
    q_heads = torch.chunk(w_q, num_heads, dim=1)
    k_heads = torch.chunk(w_uk, num_heads, dim=1)
    v_heads = torch.chunk(w_uv, num_heads, dim=1)
    o_heads = torch.chunk(w_o, num_heads, dim=0)
    q_lat = torch.stack([torch.matmul(a.float(), b.float().t()) for a, b in zip(q_heads, k_heads)])
    o_lat = torch.stack([torch.matmul(a.float(), b.float()) for a, b in zip(v_heads, o_heads)])
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "multiplies by 2 for keys and values as in an ordinary KV cache, but MLA caches one "
          "latent from which both are rebuilt", mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "counts only the latent of kv_lora_rank values and leaves out the shared RoPE key "
          "of rope_head_dim values", mla_bytes_latent_only),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int",
          "np.prod returns a numpy.int64, not the plain Python int the contract asks for",
          mla_bytes_np_prod),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without parentheses "
          "only the RoPE part is multiplied by tokens, batch and bytes", mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch",
          "batch_size is never used: the bytes of one sequence are returned", mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once_for_all_layers",
          "takes 'shared' to mean shared across layers and stores the RoPE key once per token "
          "instead of once per token and layer", mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "right", "layer_loop", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "reduce_mul", None, mla_bytes_reduce),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads for the scale, which is wrong when "
          "num_heads * d_head != d_model", mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "mask_inverted",
          "masks with ~triu(1), i.e. keeps only the future keys: the boolean convention "
          "(True = may attend) is used backwards", mla_mask_inverted),
    Entry("mla_attention", "wrong", "reshape_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head), mixing "
          "tokens and heads, and merges back the same way", mla_reshape_no_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "builds the values with c @ w_uk (the key up-projection) instead of c @ w_uv",
          mla_values_from_wuk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "the softmax runs over dim=-2 (the queries) instead of over the keys",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "head_loop_float64", None, mla_head_loop_float64),
    Entry("mla_attention", "right", "absorbed_latent_sdpa", None, mla_absorbed_sdpa),

    Entry("absorb_mla_weights", "wrong", "folds_in_scale",
          "divides w_q_latent by sqrt(d_head), folding the score scale into the weights, "
          "although the contract applies 1/sqrt(d_head) to the scores afterwards",
          absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "w_q_reshape_without_permute",
          "w_q.reshape(H, d_model, d_head) cuts w_q's memory into blocks of rows instead of "
          "taking each head's columns (reshape to (d_model, H, d_head), then permute)",
          absorb_wq_reshape_no_permute),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads (w_q.shape[0]) instead of w_uk.shape[1] // "
          "num_heads, so the head slices are wrong when num_heads * d_head != d_model",
          absorb_dhead_from_dmodel),
    Entry("absorb_mla_weights", "wrong", "output_uses_w_uk",
          "w_o_latent is built from w_uk (the key up-projection) instead of w_uv",
          absorb_output_uses_wuk),
    Entry("absorb_mla_weights", "wrong", "stack_on_dim_1",
          "stacks the per-head matrices on dim 1, giving (d_model, H, d_c) and (d_c, H, "
          "d_model) instead of heads first", absorb_stack_wrong_dim),
    Entry("absorb_mla_weights", "wrong", "query_latent_transposed",
          "computes w_uk_h @ w_q_h.T, the transpose (d_c, d_model) of w_q_h @ w_uk_h.T",
          absorb_query_transposed),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_einsum_float64),
    Entry("absorb_mla_weights", "right", "chunk_loop_float32", None, absorb_chunk_loop),
]
