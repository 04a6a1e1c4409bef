"""Held-out learners' answers, lesson 10 (mla): mla_kv_cache_bytes, mla_attention,
absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ mla_kv_cache_bytes
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * per_token * seq_len * batch_size


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return latent * num_layers * seq_len * batch_size


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    width = kv_lora_rank + rope_head_dim
    tokens = seq_len
    return num_layers * width * tokens * bytes_per_element


def mla_bytes_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_hardcoded_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    BF16 = 2
    values = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return values * BF16


def mla_bytes_right_loops(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        per_layer = (kv_lora_rank * bytes_per_element) + (rope_head_dim * bytes_per_element)
        total += per_layer * seq_len * batch_size
    return total


def mla_bytes_right_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    bits = math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      8 * bytes_per_element))
    return bits // 8


# ============================================================================ mla_attention
def mla_scaled_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    att = torch.softmax(s, dim=-1) @ v.to(ct)
    return att.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = (q.to(f) @ k.to(f).transpose(-1, -2)) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    ctx = torch.softmax(scores, -1) @ v.to(f)
    return ctx.transpose(1, 2).reshape(b, n, num_heads * d_head).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)  # noqa: E731
    q = split(x @ w_q).float() if x.dtype != torch.float64 else split(x @ w_q)
    k = split(c @ w_uk).to(q.dtype)
    v = split(c @ w_uk).to(q.dtype)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    o = torch.softmax(s, dim=-1) @ v
    return o.permute(0, 2, 1, 3).reshape(B, N, width).to(x.dtype) @ w_o


def mla_heads_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = (x @ w_dkv).to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(B, num_heads, N, dh)
    k = (c @ w_uk.to(ct)).reshape(B, num_heads, N, dh)
    v = (c @ w_uv.to(ct)).reshape(B, num_heads, N, dh)
    s = q @ k.transpose(-2, -1) * dh ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    o = torch.softmax(s, -1) @ v
    return o.reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_future_triangle_upside_down(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        future = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)
        s = s.masked_fill(future, float("-inf"))
    p = torch.softmax(s, dim=-1)
    out = (p @ v.to(ct)).transpose(1, 2).reshape(B, N, -1)
    return out.to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    w = torch.softmax(s, dim=-2)
    out = (w @ v.to(ct)).transpose(1, 2).reshape(B, N, -1)
    return out.to(x.dtype) @ w_o


def mla_right_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    c = xf @ w_dkv.to(xf.dtype)
    q = (xf @ w_q.to(xf.dtype)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (c @ w_uk.to(xf.dtype)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    v = (c @ w_uv.to(xf.dtype)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return (o.transpose(1, 2).flatten(2) @ w_o.to(xf.dtype)).to(x.dtype)


def mla_right_absorbed_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Per head, the scores straight from the latents: x W_q_h W_uk_h^T c^T (float64)."""
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    N = x.shape[1]
    dh = w_q.shape[1] // num_heads
    total = torch.zeros(x.shape, dtype=torch.float64)
    visible = torch.ones(N, N, dtype=torch.bool).tril() if causal else None
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        s = (x64 @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)  # (B, N, N)
        if visible is not None:
            s = torch.where(visible, s, torch.tensor(-math.inf, dtype=torch.float64))
        p = torch.softmax(s, dim=-1)
        total += p @ c @ (w_uv[:, cols].double() @ w_o[cols].double())
    return total.to(x.dtype)


# ============================================================================ absorb_mla_weights
def absorb_transpose_order(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        qs.append(w_uk[:, sl] @ w_q[:, sl].T)
        os_.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_heads_strided(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    uk3 = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    uv3 = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o3 = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)  # (H, dh, d_model)
    return q3 @ uk3.transpose(1, 2), uv3 @ o3


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    wq = w_q.reshape(d_model, num_heads, d_head).transpose(0, 1)
    wk = w_uk.reshape(d_c, num_heads, d_head).transpose(0, 1)
    wv = w_uv.reshape(d_c, num_heads, d_head).transpose(0, 1)
    wo = w_o.reshape(num_heads, d_head, d_model)
    w_q_latent = wq @ wk.transpose(-1, -2) / math.sqrt(d_head)
    return w_q_latent, wv @ wo


def absorb_heads_summed(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_lat = torch.einsum("mhd,chd->mc", w_q.view(d_model, num_heads, dh),
                         w_uk.view(d_c, num_heads, dh))
    o_lat = torch.einsum("chd,hdm->cm", w_uv.view(d_c, num_heads, dh),
                         w_o.view(num_heads, dh, d_model))
    return q_lat, o_lat


def absorb_w_uk_reused(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        a, b = h * dh, (h + 1) * dh
        ql.append(w_q[:, a:b] @ w_uk[:, a:b].transpose(0, 1))
        ol.append(w_uk[:, a:b] @ w_o[a:b])
    return torch.stack(ql, 0), torch.stack(ol, 0)


def absorb_d_head_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    wq_l = torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @ w_uk[:, h * d_head:(h + 1) * d_head].T
                        for h in range(num_heads)])
    wo_l = torch.stack([w_uv[:, h * d_head:(h + 1) * d_head] @ w_o[h * d_head:(h + 1) * d_head]
                        for h in range(num_heads)])
    return wq_l, wo_l


def absorb_right_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_lat = torch.einsum("mhd,chd->hmc", w_q.reshape(d_model, num_heads, dh),
                         w_uk.reshape(d_c, num_heads, dh))
    o_lat = torch.einsum("chd,hdm->hcm", w_uv.reshape(d_c, num_heads, dh),
                         w_o.reshape(num_heads, dh, d_model))
    return q_lat, o_lat


def absorb_right_chunk_float64(w_uk, w_uv, w_q, w_o, num_heads):
    q_parts = torch.chunk(w_q.double(), num_heads, dim=1)
    uk_parts = torch.chunk(w_uk.double(), num_heads, dim=1)
    uv_parts = torch.chunk(w_uv.double(), num_heads, dim=1)
    o_parts = torch.chunk(w_o.double(), num_heads, dim=0)
    w_q_latent = torch.stack([torch.mm(a, b.t()) for a, b in zip(q_parts, uk_parts)])
    w_o_latent = torch.stack([torch.mm(a, b) for a, b in zip(uv_parts, o_parts)])
    return w_q_latent.to(w_q.dtype), w_o_latent.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "multiplies by 2 for keys and values as in an ordinary KV cache, but MLA caches one "
          "latent from which both are recomputed (plus one shared RoPE key): no factor 2",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_left_out",
          "counts only the kv_lora_rank latent and forgets the shared RoPE key of "
          "rope_head_dim values per token and layer",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_dropped",
          "multiplies by seq_len but never by batch_size: the cache of one sequence, not of "
          "the batch",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_integer_returned",
          "returns np.prod(...), a numpy.int64, where the contract asks for a plain Python int",
          mla_bytes_numpy_prod),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so only the RoPE "
          "part is multiplied by the tokens and bytes: (kv_lora_rank + rope_head_dim) needs "
          "parentheses",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "bytes_hardcoded_to_bf16",
          "multiplies by a hard-coded 2 bytes (bf16) and ignores bytes_per_element",
          mla_bytes_hardcoded_bf16),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_right_loops),
    Entry("mla_kv_cache_bytes", "right", "count_bits_then_divide", None, mla_bytes_right_bits),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scaled_by_latent_width),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads, which only works when num_heads * d_head == "
          "d_model; otherwise the head split raises (the width is w_q.shape[1])",
          mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "expands the values with w_uk (c @ w_uk) instead of w_uv: the keys' up-projection "
          "reused for the values",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "head_split_without_transpose",
          "splits heads with reshape(B, num_heads, N, d_head) straight from (B, N, width) "
          "instead of reshape(B, N, num_heads, d_head).transpose(1, 2), mixing tokens and "
          "heads",
          mla_heads_without_transpose),
    Entry("mla_attention", "wrong", "future_triangle_upside_down",
          "takes the keys below the diagonal for the future: it fills -inf on "
          "tril(diagonal=-1), the past, instead of triu(diagonal=1), so each query sees "
          "itself and the later keys but not the earlier ones",
          mla_future_triangle_upside_down),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "normalises the scores with softmax(dim=-2), over the queries, instead of over the "
          "keys (dim=-1)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_right_sdpa),
    Entry("mla_attention", "right", "absorbed_per_head_float64", None, mla_right_absorbed_loop),

    Entry("absorb_mla_weights", "wrong", "product_order_transposed",
          "computes w_uk_h @ w_q_h.T instead of w_q_h @ w_uk_h.T, so w_q_latent comes out "
          "(num_heads, d_c, d_model), the transpose of what it should be",
          absorb_transpose_order),
    Entry("absorb_mla_weights", "wrong", "heads_as_strided_columns",
          "splits the width with reshape(d, d_head, num_heads), so head h gets every "
          "num_heads-th column instead of the contiguous block h*d_head:(h+1)*d_head",
          absorb_heads_strided),
    Entry("absorb_mla_weights", "wrong", "scale_folded_into_w_q_latent",
          "divides w_q_latent by sqrt(d_head); the contract keeps the scale out of the "
          "absorbed weights (the scores still divide by sqrt(d_head))",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "heads_summed",
          "sums the per-head products over h in the einsum, returning one (d_model, d_c) and "
          "one (d_c, d_model) matrix instead of stacking num_heads of them",
          absorb_heads_summed),
    Entry("absorb_mla_weights", "wrong", "w_uk_reused_for_output",
          "builds w_o_latent[h] from w_uk_h @ w_o_h: the key up-projection reused where the "
          "value up-projection w_uv_h belongs",
          absorb_w_uk_reused),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads (w_q.shape[0]) instead of w_q.shape[1] // "
          "num_heads, so the head slices are the wrong width when num_heads * d_head != "
          "d_model",
          absorb_d_head_from_d_model),
    Entry("absorb_mla_weights", "right", "einsum_reshape", None, absorb_right_einsum),
    Entry("absorb_mla_weights", "right", "chunk_and_mm_float64", None,
          absorb_right_chunk_float64),
]
