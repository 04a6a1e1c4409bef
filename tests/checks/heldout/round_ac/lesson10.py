"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def cache_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # keys and values
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def cache_forgets_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    latent_bytes = kv_lora_rank * bytes_per_element
    return num_layers * seq_len * batch_size * latent_bytes


def cache_ignores_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    values_per_layer = (kv_lora_rank + rope_head_dim) * seq_len
    return num_layers * values_per_layer * bytes_per_element


def cache_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def cache_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def cache_hardcoded_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    tokens = seq_len * batch_size
    per_layer_token = (kv_lora_rank + rope_head_dim) * 2  # bf16
    return num_layers * tokens * per_layer_token


# ============================================================ mla_kv_cache_bytes: right
def cache_sum_over_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def cache_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    bits = math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      8 * bytes_per_element))
    return bits // 8


# ============================================================ mla_attention: wrong
def mla_scale_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x.to(ct) @ w_dkv.to(ct)
    q = (x.to(ct) @ w_q.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv.to(ct)).view(B, N, num_heads, d_head).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    out = ctx.transpose(1, 2).reshape(B, N, num_heads * d_head) @ w_o.to(ct)
    return out.to(x.dtype)


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)
    latent = xc @ w_dkv.to(compute)
    q = (xc @ w_q.to(compute)).reshape(b, num_heads, n, dh)
    k = (latent @ w_uk.to(compute)).reshape(b, num_heads, n, dh)
    v = (latent @ w_uv.to(compute)).reshape(b, num_heads, n, dh)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    merged = (attn @ v).reshape(b, n, width)
    return (merged @ w_o.to(compute)).to(x.dtype)


def mla_mask_excludes_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, D = x.shape
    hd = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)

    def heads(t):
        return t.reshape(B, N, num_heads, hd).permute(0, 2, 1, 3)

    c = x.to(ct) @ w_dkv.to(ct)
    q, k, v = heads(x.to(ct) @ w_q.to(ct)), heads(c @ w_uk.to(ct)), heads(c @ w_uv.to(ct))
    sc = torch.matmul(q, k.transpose(-1, -2)) / hd ** 0.5
    if causal:
        future = torch.ones(N, N, dtype=torch.bool).triu()  # keys j >= i are the future
        sc = sc.masked_fill(future, -math.inf)
    top = sc.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), 0.0, top)
    e = torch.exp(sc - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, 1.0, tot)
    o = (w @ v).permute(0, 2, 1, 3).reshape(B, N, num_heads * hd)
    return (o @ w_o.to(ct)).to(x.dtype)


def mla_always_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x

    def split(t):
        return t.view(batch, n, num_heads, d_head).transpose(1, 2)

    c = xf @ w_dkv.to(xf.dtype)
    q = split(xf @ w_q.to(xf.dtype))
    k = split(c @ w_uk.to(xf.dtype))
    v = split(c @ w_uv.to(xf.dtype))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ctx = ctx.transpose(1, 2).reshape(batch, n, num_heads * d_head)
    return (ctx @ w_o.to(xf.dtype)).to(x.dtype)


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    ct = torch.promote_types(x.dtype, torch.float32)
    c = torch.einsum("bnd,dc->bnc", x.to(ct), w_dkv.to(ct))
    q = torch.einsum("bnd,dw->bnw", x.to(ct), w_q.to(ct)).reshape(B, N, H, dh)
    k = torch.einsum("bnc,cw->bnw", c, w_uk.to(ct)).reshape(B, N, H, dh)
    v = torch.einsum("bnc,cw->bnw", c, w_uv.to(ct)).reshape(B, N, H, dh)
    s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, dim=-2), nan=0.0)
    o = torch.einsum("bhij,bjhd->bihd", p, v).reshape(B, N, H * dh)
    return (o @ w_o.to(ct)).to(x.dtype)


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    c = x.to(compute) @ w_dkv.to(compute)
    q = (x.to(compute) @ w_q.to(compute)).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk.to(compute)).reshape(b, n, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uk.to(compute)).reshape(b, n, num_heads, d_head).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(scores, dim=-1) @ v
    return (ctx.transpose(1, 2).reshape(b, n, -1) @ w_o.to(compute)).to(x.dtype)


# ============================================================ mla_attention: right
def mla_absorbed_route(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Scores and output straight from the latent: per head q_lat = x W_q,h W_uk,h^T."""
    d_c = w_dkv.shape[1]
    d_model = x.shape[-1]
    dh = w_q.shape[1] // num_heads
    n = x.shape[1]
    X = x.double()
    C = X @ w_dkv.double()  # (B, N, d_c)
    wq = w_q.double().reshape(d_model, num_heads, dh)
    wuk = w_uk.double().reshape(d_c, num_heads, dh)
    wuv = w_uv.double().reshape(d_c, num_heads, dh)
    wo = w_o.double().reshape(num_heads, dh, d_model)
    q_lat = torch.einsum("bnm,mhe,che->bhnc", X, wq, wuk)  # (B, H, N, d_c)
    s = torch.einsum("bhnc,bkc->bhnk", q_lat, C) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    p = torch.softmax(s, dim=-1)
    mixed = torch.einsum("bhnk,bkc->bhnc", p, C)
    out = torch.einsum("bhnc,che,hem->bnm", mixed, wuv, wo)
    return out.to(x.dtype)


def mla_head_loop_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    d_head = w_q.shape[1] // num_heads
    X = x.double()
    c = X @ w_dkv.double()
    out = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q_h = X @ w_q.double()[:, cols]
        k_h = c @ w_uk.double()[:, cols]
        v_h = c @ w_uv.double()[:, cols]
        ctx = F.scaled_dot_product_attention(q_h, k_h, v_h, is_causal=causal)
        out = out + ctx @ w_o.double()[cols, :]
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_interleaved_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    wuk = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wuv = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * d_head, (h + 1) * d_head)
        q_lat.append(w_q[:, sl] @ w_uk[:, sl].T / math.sqrt(d_head))
        o_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_uk_for_values(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    wq_h = w_q.reshape(d_model, num_heads, d_head).transpose(0, 1)
    wuk_h = w_uk.reshape(d_c, num_heads, d_head).transpose(0, 1)
    wo_h = w_o.reshape(num_heads, d_head, d_model)
    w_q_latent = wq_h @ wuk_h.transpose(1, 2)
    w_o_latent = wuk_h @ wo_h
    return w_q_latent, w_o_latent


def absorb_head_dim_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_c = w_uk.shape[0]
    d_head = d_model // num_heads
    q_heads = w_q.reshape(d_model, num_heads, d_head).permute(1, 0, 2)
    uk_heads = w_uk.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    uv_heads = w_uv.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    o_heads = w_o.reshape(num_heads, d_head, d_model)
    return q_heads @ uk_heads.transpose(-1, -2), uv_heads @ o_heads


def absorb_reversed_product(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_list, wo_list = [], []
    for h in range(num_heads):
        a, b = h * dh, (h + 1) * dh
        wq_list.append(w_uk[:, a:b] @ w_q[:, a:b].T)  # (d_c, d_model)
        wo_list.append(w_uv[:, a:b] @ w_o[a:b])
    return torch.stack(wq_list, 0), torch.stack(wo_list, 0)


def absorb_output_whole_matrix(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    w_q_latent = torch.einsum("mhe,che->hmc", w_q.reshape(d_model, num_heads, dh),
                              w_uk.reshape(d_c, num_heads, dh))
    w_o_latent = w_uv @ w_o  # the heads add up anyway
    return w_q_latent, w_o_latent


# ============================================================ absorb_mla_weights: right
def absorb_einsum_f64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    q = w_q.double().reshape(d_model, num_heads, e)
    uk = w_uk.double().reshape(d_c, num_heads, e)
    uv = w_uv.double().reshape(d_c, num_heads, e)
    o = w_o.double().reshape(num_heads, e, d_model)
    wql = torch.einsum("mhe,che->hmc", q, uk)
    wol = torch.einsum("che,hem->hcm", uv, o)
    return wql.to(w_q.dtype), wol.to(w_o.dtype)


def absorb_chunk_loop(w_uk, w_uv, w_q, w_o, num_heads):
    q_parts = torch.chunk(w_q, num_heads, dim=1)
    uk_parts = torch.chunk(w_uk, num_heads, dim=1)
    uv_parts = torch.chunk(w_uv, num_heads, dim=1)
    o_parts = torch.chunk(w_o, num_heads, dim=0)
    q_lat = torch.stack([torch.mm(a.double(), b.double().t()) for a, b in zip(q_parts, uk_parts)])
    o_lat = torch.stack([torch.mm(a.double(), b.double()) for a, b in zip(uv_parts, o_parts)])
    return q_lat.to(w_q.dtype), o_lat.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts-k-and-v",
          "multiplies by 2 for keys and values as in an ordinary KV cache, but MLA caches one "
          "latent from which both are recomputed: the count is twice too large", cache_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets-rope-key",
          "counts only the kv_lora_rank latent and leaves out the shared RoPE key of "
          "rope_head_dim values per token and layer", cache_forgets_rope),
    Entry("mla_kv_cache_bytes", "wrong", "ignores-batch",
          "never multiplies by batch_size, so it counts one sequence whatever the batch",
          cache_ignores_batch),
    Entry("mla_kv_cache_bytes", "wrong", "numpy-int",
          "returns np.prod(...), a numpy int64, where the contract fixes a plain Python int",
          cache_numpy_prod),
    Entry("mla_kv_cache_bytes", "wrong", "missing-parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without "
          "parentheses around (kv_lora_rank + rope_head_dim) only the RoPE key is multiplied "
          "by tokens and bytes", cache_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "hardcoded-two-bytes",
          "hard-codes 2 bytes per value (bf16) instead of using bytes_per_element",
          cache_hardcoded_bf16),
    Entry("mla_kv_cache_bytes", "right", "sum-over-layers", None, cache_sum_over_layers),
    Entry("mla_kv_cache_bytes", "right", "math-prod-bits", None, cache_math_prod),

    Entry("mla_attention", "wrong", "scale-by-latent-width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head), the "
          "width of the dot products", mla_scale_latent_width),
    Entry("mla_attention", "wrong", "split-heads-without-transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head) instead "
          "of reshape(B, N, H, d_head).transpose(1, 2), which scrambles tokens and heads",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "mask-hides-diagonal",
          "masks triu() (keys j >= i) instead of triu(1) (keys j > i), so a query cannot see "
          "its own token and query 0 sees nothing", mla_mask_excludes_diagonal),
    Entry("mla_attention", "wrong", "ignores-causal-flag",
          "always calls scaled_dot_product_attention with is_causal=True, ignoring "
          "causal=False", mla_always_causal),
    Entry("mla_attention", "wrong", "softmax-over-queries",
          "normalises the scores over the query axis (dim=-2) instead of over the keys "
          "(dim=-1)", mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "values-from-w-uk",
          "expands the values with w_uk (copy of the key line) instead of w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "right", "absorbed-latent-einsum", None, mla_absorbed_route),
    Entry("mla_attention", "right", "head-loop-sdpa-float64", None, mla_head_loop_sdpa),

    Entry("absorb_mla_weights", "wrong", "interleaved-head-columns",
          "splits the width as reshape(..., d_head, H), so head h gets the strided columns "
          "h, h + H, ... instead of the contiguous block h*d_head:(h+1)*d_head",
          absorb_interleaved_heads),
    Entry("absorb_mla_weights", "wrong", "scale-folded-in",
          "folds the 1/sqrt(d_head) score scale into w_q_latent, though the contract keeps "
          "the scale out of it", absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w-uk-for-output",
          "builds w_o_latent from w_uk_h @ w_o_h (the key up-projection reused) instead of "
          "w_uv_h @ w_o_h", absorb_uk_for_values),
    Entry("absorb_mla_weights", "wrong", "d-head-from-d-model",
          "takes d_head = d_model // num_heads (w_q.shape[0]) instead of "
          "w_q.shape[1] // num_heads; when H * d_head != d_model the reshape fails (raises) or "
          "cuts the wrong columns", absorb_head_dim_from_rows),
    Entry("absorb_mla_weights", "wrong", "product-order-reversed",
          "computes w_uk_h @ w_q_h.T, the transpose of the required w_q_h @ w_uk_h.T, giving "
          "(H, d_c, d_model) instead of (H, d_model, d_c)", absorb_reversed_product),
    Entry("absorb_mla_weights", "wrong", "output-heads-summed",
          "returns w_uv @ w_o as one (d_c, d_model) matrix, the sum over heads, instead of "
          "stacking each head's w_uv_h @ w_o_h on a leading head axis", absorb_output_whole_matrix),
    Entry("absorb_mla_weights", "right", "einsum-float64", None, absorb_einsum_f64),
    Entry("absorb_mla_weights", "right", "chunk-and-mm", None, absorb_chunk_loop),
]
