"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mkc_factor_two_kv(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token_layer = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token_layer * seq_len * batch_size * bytes_per_element


def mkc_rope_left_out(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent = num_layers * kv_lora_rank
    return latent * seq_len * batch_size * bytes_per_element


def mkc_bits_over_eight(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
        bytes_per_element * 8
    return bits / 8


def mkc_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_token = num_layers * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_token * seq_len


def mkc_kibibytes(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    total = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
        bytes_per_element
    return total // 1024


def mkc_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def mkc_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mkc_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
               bytes_per_element=2):
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1))


# ============================================================ mla_attention: wrong
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def mla_sdpa_double_scale(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct) / math.sqrt(d_head)
    k = _heads(c @ w_uk, num_heads).to(ct)
    v = _heads(c @ w_uv, num_heads).to(ct)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _unheads(ctx).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(latent @ w_uk, num_heads).to(ct)
    v = _heads(latent @ w_uk, num_heads).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return _unheads(ctx).to(x.dtype) @ w_o


def mla_view_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, d_head).to(ct)
    k = (c @ w_uk).reshape(B, num_heads, N, d_head).to(ct)
    v = (c @ w_uv).reshape(B, num_heads, N, d_head).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(B, N, width).to(x.dtype) @ w_o


def mla_softmax_query_axis(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    n = x.shape[1]
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q, k, v = (_heads(t, num_heads).to(ct) for t in (x @ w_q, c @ w_uk, c @ w_uv))
    scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d_head)
    if causal:
        future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
        scores = scores.masked_fill(future, float("-inf"))
    p = torch.softmax(scores, dim=-2)
    p = torch.nan_to_num(p, nan=0.0)
    ctx = torch.einsum("bhij,bhjd->bhid", p, v)
    return _unheads(ctx).to(x.dtype) @ w_o


def mla_diagonal_masked(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    n = x.shape[1]
    d_head = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).to(ct)
    k = _heads(c @ w_uk, num_heads).to(ct)
    v = _heads(c @ w_uv, num_heads).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        blocked = torch.triu(torch.ones(n, n), diagonal=0).bool()
        s = s.masked_fill(blocked, -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return _unheads(ctx).to(x.dtype) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(b, n, num_heads, -1).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(b, n, num_heads, -1).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(b, n, num_heads, -1).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(b, n, -1).to(x.dtype) @ w_o


# ============================================================ mla_attention: right
def mla_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    c = xd @ w_dkv.double()
    out = torch.zeros(x.shape, dtype=torch.float64)
    allowed = torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal else \
        torch.ones(n, n, dtype=torch.bool)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = xd @ w_q.double()[:, cols]
        kh = c @ w_uk.double()[:, cols]
        vh = c @ w_uv.double()[:, cols]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s = torch.where(allowed, s, torch.tensor(-math.inf, dtype=torch.float64))
        p = torch.softmax(s, dim=-1)
        out = out + (p @ vh) @ w_o.double()[cols, :]
    return out.to(x.dtype)


def mla_absorbed_route(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention from the latents alone: fold w_uk into the queries and w_uv into w_o."""
    dt = torch.float64
    n, d_model = x.shape[1], x.shape[2]
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    wq = w_q.to(dt).reshape(d_model, num_heads, dh)
    wuk = w_uk.to(dt).reshape(d_c, num_heads, dh)
    wuv = w_uv.to(dt).reshape(d_c, num_heads, dh)
    wo = w_o.to(dt).reshape(num_heads, dh, d_model)
    wq_lat = torch.einsum("mhe,che->hmc", wq, wuk)  # (H, d_model, d_c)
    wo_lat = torch.einsum("che,hem->hcm", wuv, wo)  # (H, d_c, d_model)
    c = x.to(dt) @ w_dkv.to(dt)  # (B, N, d_c)
    q_lat = torch.einsum("bnm,hmc->bhnc", x.to(dt), wq_lat)
    s = torch.einsum("bhnc,bjc->bhnj", q_lat, c) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.arange(n)[None, :] > torch.arange(n)[:, None], -math.inf)
    p = torch.softmax(s, dim=-1)
    mixed = torch.einsum("bhnj,bjc->bhnc", p, c)
    return torch.einsum("bhnc,hcm->bnm", mixed, wo_lat).to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def amw_reshape_no_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(num_heads, d_model, dh)
    wuk = w_uk.reshape(num_heads, d_c, dh)
    wuv = w_uv.reshape(num_heads, d_c, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def amw_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, sl] @ w_uk[:, sl].T)
        o_lat.append(w_uk[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def amw_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                         for h in range(num_heads)]) / math.sqrt(dh)
    o_lat = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
                         for h in range(num_heads)])
    return q_lat, o_lat


def amw_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[0] // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        a, b = h * d_head, (h + 1) * d_head
        wq_l.append(w_q[:, a:b] @ w_uk[:, a:b].transpose(0, 1))
        wo_l.append(w_uv[:, a:b] @ w_o[a:b, :])
    return torch.stack(wq_l, 0), torch.stack(wo_l, 0)


def amw_swapped_outputs(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.view(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.view(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.view(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.view(num_heads, dh, d_model)
    w_q_latent = torch.bmm(wq, wuk.transpose(1, 2))
    w_o_latent = torch.bmm(wuv, wo)
    return w_o_latent, w_q_latent


def amw_einsum_drops_head(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh)
    wuk = w_uk.reshape(d_c, num_heads, dh)
    wuv = w_uv.reshape(d_c, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    q_lat = torch.einsum("mhe,che->mc", wq, wuk)
    o_lat = torch.einsum("che,hem->cm", wuv, wo)
    return q_lat, o_lat


# ============================================================ absorb_mla_weights: right
def amw_loop_stack(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_chunks = torch.split(w_q, dh, dim=1)
    k_chunks = torch.split(w_uk, dh, dim=1)
    v_chunks = torch.split(w_uv, dh, dim=1)
    o_chunks = torch.split(w_o, dh, dim=0)
    w_q_latent = torch.stack([torch.mm(a, b.t()) for a, b in zip(q_chunks, k_chunks)])
    w_o_latent = torch.stack([torch.mm(a, b) for a, b in zip(v_chunks, o_chunks)])
    return w_q_latent, w_o_latent


def amw_einsum_f64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.double().reshape(d_model, num_heads, dh)
    wuk = w_uk.double().reshape(d_c, num_heads, dh)
    wuv = w_uv.double().reshape(d_c, num_heads, dh)
    wo = w_o.double().reshape(num_heads, dh, d_model)
    q_lat = torch.einsum("mhe,che->hmc", wq, wuk)
    o_lat = torch.einsum("che,hem->hcm", wuv, wo)
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


E = Entry
ENTRIES = [
    E("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
      "multiplies by 2 for keys and values as in an ordinary KV cache, but MLA caches one "
      "latent from which both are recomputed", mkc_factor_two_kv),
    E("mla_kv_cache_bytes", "wrong", "rope_key_left_out",
      "counts only the latent of kv_lora_rank values and leaves out the shared RoPE key of "
      "rope_head_dim values", mkc_rope_left_out),
    E("mla_kv_cache_bytes", "wrong", "bits_divided_returns_float",
      "counts bits and divides by 8 with /, so it returns a float where the contract wants a "
      "plain int", mkc_bits_over_eight),
    E("mla_kv_cache_bytes", "wrong", "batch_size_ignored",
      "never multiplies by batch_size: the cache of one sequence only", mkc_no_batch),
    E("mla_kv_cache_bytes", "wrong", "returns_kibibytes",
      "divides the total by 1024 and returns KiB instead of bytes", mkc_kibibytes),
    E("mla_kv_cache_bytes", "wrong", "missing_parentheses",
      "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ... without parentheses "
      "around (kv_lora_rank + rope_head_dim), so only the RoPE part is scaled by tokens, batch "
      "and bytes", mkc_precedence),
    E("mla_kv_cache_bytes", "right", "loop_over_layers", None, mkc_layer_loop),
    E("mla_kv_cache_bytes", "right", "reduce_product", None, mkc_reduce),

    E("mla_attention", "wrong", "sdpa_scaled_twice",
      "divides q by sqrt(d_head) and then calls F.scaled_dot_product_attention, which scales "
      "by 1/sqrt(d_head) again: the scores are divided by d_head", mla_sdpa_double_scale),
    E("mla_attention", "wrong", "values_from_w_uk",
      "computes the values with c @ w_uk (the key up-projection) instead of c @ w_uv",
      mla_values_from_w_uk),
    E("mla_attention", "wrong", "heads_reshaped_without_transpose",
      "splits the heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head), which "
      "scrambles tokens and heads instead of reshaping to (B, N, H, d_head) and transposing",
      mla_view_without_transpose),
    E("mla_attention", "wrong", "softmax_over_queries",
      "takes the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
      mla_softmax_query_axis),
    E("mla_attention", "wrong", "causal_mask_blocks_diagonal",
      "masks triu(diagonal=0), which also hides the diagonal: a query cannot see its own key, "
      "and the first query sees nothing (NaN)", mla_diagonal_masked),
    E("mla_attention", "wrong", "scale_from_d_model",
      "scales the scores by 1/sqrt(d_model // num_heads), assuming H * d_head == d_model, "
      "where d_head is w_q.shape[1] // num_heads", mla_d_head_from_d_model),
    E("mla_attention", "right", "per_head_loop_float64", None, mla_head_loop_f64),
    E("mla_attention", "right", "absorbed_latent_route", None, mla_absorbed_route),

    E("absorb_mla_weights", "wrong", "reshape_without_permute",
      "reshapes w_q, w_uk, w_uv straight to (H, d_in, d_head) without moving the head axis "
      "first, so each 'head' gets the wrong rows and columns", amw_reshape_no_permute),
    E("absorb_mla_weights", "wrong", "w_uk_reused_for_output",
      "builds w_o_latent[h] from w_uk_h @ w_o_h (the key up-projection) instead of "
      "w_uv_h @ w_o_h", amw_w_uk_for_output),
    E("absorb_mla_weights", "wrong", "scale_folded_into_queries",
      "folds 1/sqrt(d_head) into w_q_latent although the contract keeps the scale out "
      "(it is applied to the scores)", amw_scale_folded_in),
    E("absorb_mla_weights", "wrong", "d_head_from_d_model",
      "takes d_head = w_q.shape[0] // num_heads (d_model) instead of w_q.shape[1] // "
      "num_heads, so the head slices are the wrong width", amw_d_head_from_rows),
    E("absorb_mla_weights", "wrong", "outputs_swapped",
      "returns (w_o_latent, w_q_latent), the pair in the wrong order", amw_swapped_outputs),
    E("absorb_mla_weights", "wrong", "einsum_sums_heads",
      "leaves h out of the einsum output ('mhe,che->mc'), so the heads are summed into one "
      "(d_model, d_c) matrix instead of stacked on a head axis", amw_einsum_drops_head),
    E("absorb_mla_weights", "right", "split_and_stack", None, amw_loop_stack),
    E("absorb_mla_weights", "right", "einsum_float64", None, amw_einsum_f64),
]
