"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================== mla_kv_cache_bytes
def mla_bytes_times_two_for_kv(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * per_token * seq_len * batch_size


def mla_bytes_no_rope_key(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 8 * bytes_per_element
    return bits / 8


def mla_bytes_forgets_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    values_per_layer = (kv_lora_rank + rope_head_dim) * seq_len
    return num_layers * values_per_layer * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_in_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element
    return total // 1024


def mla_bytes_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mla_bytes_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return math.prod((int(num_layers), int(kv_lora_rank) + int(rope_head_dim), int(seq_len),
                      int(batch_size), int(bytes_per_element)))


# ============================================================== mla_attention


def mla_scale_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    dh = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_mask_fills_allowed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv

    def heads(t):
        return t.view(b, n, num_heads, dh).permute(0, 2, 1, 3).to(ct)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))  # True = may attend
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    out = (w @ v).permute(0, 2, 1, 3).reshape(b, n, width)
    return out.to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh).to(ct)
    k = (c @ w_uk).reshape(B, num_heads, N, dh).to(ct)
    v = (c @ w_uv).reshape(B, num_heads, N, dh).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
    k = (c @ w_uk).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
    v = (c @ w_uv).unflatten(-1, (num_heads, dh)).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-2)
    ctx = torch.nan_to_num(p, nan=0.0) @ v
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    hd = w_q.shape[1] // num_heads
    up = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(up)
    lat = xf @ w_dkv.to(up)
    q = (xf @ w_q.to(up)).view(b, n, num_heads, hd).transpose(1, 2)
    k = (lat @ w_uk.to(up)).view(b, n, num_heads, hd).transpose(1, 2)
    v = (lat @ w_uv.to(up)).view(b, n, num_heads, hd).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    merged = ctx.transpose(1, 2).reshape(b, n, num_heads * hd)
    return (merged @ w_o.to(up)).to(x.dtype)


def mla_per_head_einsum(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    result = torch.zeros(x.shape, dtype=torch.float64)
    qi = torch.arange(n)[:, None]
    kj = torch.arange(n)[None, :]
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x64 @ w_q.double()[:, cols]
        kh = c @ w_uk.double()[:, cols]
        vh = c @ w_uv.double()[:, cols]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            s = torch.where(kj <= qi, s, torch.full_like(s, -math.inf))
        p = torch.softmax(s, dim=-1)
        result += torch.einsum("bij,bjd->bid", p, vh) @ w_o.double()[cols, :]
    return result.to(x.dtype)


# ============================================================== absorb_mla_weights
def absorb_product_order_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        qs.append(w_uk[:, sl] @ w_q[:, sl].T)
        os_.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_reshape_without_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(num_heads, d_model, dh)
    wuk = w_uk.reshape(num_heads, d_c, dh)
    wuv = w_uv.reshape(num_heads, d_c, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_stack_wrong_axis(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        a, b = h * dh, (h + 1) * dh
        ql.append(w_q[:, a:b] @ w_uk[:, a:b].T)
        ol.append(w_uv[:, a:b] @ w_o[a:b])
    return torch.stack(ql, dim=1), torch.stack(ol, dim=1)


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return (wq @ wuk.transpose(-2, -1)) / math.sqrt(dh), wuv @ wo


def absorb_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(-2, -1), wuk @ wo


def absorb_dhead_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[0] // num_heads
    wql = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                       for h in range(num_heads)])
    wol = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :]
                       for h in range(num_heads)])
    return wql, wol


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    e = width // num_heads
    q3 = w_q.view(d_model, num_heads, e)
    k3 = w_uk.view(d_c, num_heads, e)
    v3 = w_uv.view(d_c, num_heads, e)
    o3 = w_o.view(num_heads, e, d_model)
    return torch.einsum("mhe,che->hmc", q3, k3), torch.einsum("che,hem->hcm", v3, o3)


def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    dh = width // num_heads
    out_q = torch.empty(num_heads, d_model, d_c, dtype=torch.float64)
    out_o = torch.empty(num_heads, d_c, d_model, dtype=torch.float64)
    for h in range(num_heads):
        cols = torch.arange(h * dh, (h + 1) * dh)
        out_q[h] = w_q.double().index_select(1, cols) @ w_uk.double().index_select(1, cols).t()
        out_o[h] = w_uv.double().index_select(1, cols) @ w_o.double().index_select(0, cols)
    return out_q.to(w_q.dtype), out_o.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_keys_and_values",
          "multiplies by 2 for keys and values as in kv_cache_bytes, but MLA caches one latent "
          "from which both are recomputed",
          mla_bytes_times_two_for_kv),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_left_out",
          "counts only the latent of kv_lora_rank values and forgets the shared RoPE key of "
          "rope_head_dim values per token and layer",
          mla_bytes_no_rope_key),
    Entry("mla_kv_cache_bytes", "wrong", "float_from_bits",
          "counts bits and divides by 8 with /, so it returns a float instead of a plain int",
          mla_bytes_via_bits),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_ignored",
          "never multiplies by batch_size: the cache of one sequence, not of the batch",
          mla_bytes_forgets_batch),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without "
          "parentheses round (kv_lora_rank + rope_head_dim) the latent is multiplied only by "
          "num_layers and the RoPE key only by seq_len, batch_size and bytes_per_element",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "reports_kib",
          "divides the total by 1024 and returns KiB instead of bytes",
          mla_bytes_in_kib),
    Entry("mla_kv_cache_bytes", "right", "per_layer_loop", None, mla_bytes_loop),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_prod),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent_width),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model, instead "
          "of w_q.shape[1] // num_heads (the head split raises a reshape error when they differ)",
          mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "mask_fills_allowed_keys",
          "fills -inf where the tril mask is True, but True means 'may attend': it blocks the "
          "allowed keys and keeps the future ones",
          mla_mask_fills_allowed),
    Entry("mla_attention", "wrong", "heads_reshaped_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head) instead "
          "of reshape(B, N, H, d_head).transpose(1, 2), mixing tokens and heads",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "computes the values with w_uk (c @ w_uk) instead of w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa),
    Entry("mla_attention", "right", "per_head_einsum_float64", None, mla_per_head_einsum),

    Entry("absorb_mla_weights", "wrong", "product_order_swapped",
          "computes w_uk_h @ w_q_h.T, the transpose (d_c, d_model) of w_q_h @ w_uk_h.T",
          absorb_product_order_swapped),
    Entry("absorb_mla_weights", "wrong", "reshape_without_permute",
          "splits the heads with w_q.reshape(H, d_model, d_head) (and the same for w_uk, w_uv) "
          "instead of reshape(d_model, H, d_head).permute(1, 0, 2), so the head slices are not "
          "the column blocks",
          absorb_reshape_without_permute),
    Entry("absorb_mla_weights", "wrong", "stacked_on_axis_1",
          "stacks the per-head products with dim=1, giving (d_model, H, d_c) and (d_c, H, "
          "d_model) instead of a leading head axis",
          absorb_stack_wrong_axis),
    Entry("absorb_mla_weights", "wrong", "scale_folded_into_w_q",
          "divides w_q_latent by sqrt(d_head), but the contract keeps the scale out of the "
          "absorbed weights (it is applied to the scores)",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w_uk_in_output",
          "builds w_o_latent from w_uk_h @ w_o_h instead of w_uv_h @ w_o_h",
          absorb_w_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "d_head_from_rows_of_w_q",
          "takes d_head = w_q.shape[0] // num_heads (d_model) instead of w_q.shape[1] // "
          "num_heads, wrong whenever num_heads * d_head != d_model",
          absorb_dhead_from_rows),
    Entry("absorb_mla_weights", "right", "einsum_views", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "index_select_loop_float64", None, absorb_loop_float64),
]
