"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * kv_lora_rank + rope_head_dim  # a latent for K and one for V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = 8 * bytes_per_element
    values = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return values * bits / 8


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_layer = (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element
    return per_layer * num_layers


def mla_bytes_in_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return total * bytes_per_element // 1024


# ============================================================ mla_kv_cache_bytes: right
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
    return math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element))


# ============================================================ mla_attention: wrong
def mla_scale_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v.to(ct)
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(f) @ k.to(f).transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~keep, -torch.inf)
    out = torch.softmax(scores, -1) @ v.to(f)
    return out.transpose(1, 2).reshape(b, n, num_heads * d_head).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    latent = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (latent @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (latent @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    att = q.to(ct) @ k.to(ct).transpose(-2, -1) * dh ** -0.5
    if causal:
        att = att.masked_fill(torch.ones(N, N).triu(1).bool(), float("-inf"))
    o = att.softmax(dim=-1) @ v.to(ct)
    return o.transpose(1, 2).reshape(B, N, width).to(x.dtype) @ w_o


def mla_mask_convention_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))  # True = may attend
        s = s.masked_fill(allowed, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    o = (w @ v.to(ct)).permute(0, 2, 1, 3).reshape(B, N, width)
    return o.to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (c @ w_uk).reshape(B, num_heads, N, dh)
    v = (c @ w_uv).reshape(B, num_heads, N, dh)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v.to(ct)
    return o.reshape(B, N, width).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (c @ w_uk).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    v = (c @ w_uv).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-2), nan=0.0)
    o = p @ v.to(ct)
    return o.transpose(1, 2).flatten(-2).to(x.dtype) @ w_o


# ============================================================ mla_attention: right
def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    c = xf @ w_dkv.to(ct)

    def split(t):
        return t.view(b, n, num_heads, dh).transpose(1, 2)

    q, k, v = split(xf @ w_q.to(ct)), split(c @ w_uk.to(ct)), split(c @ w_uv.to(ct))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    merged = ctx.transpose(1, 2).reshape(b, n, width)
    return (merged @ w_o.to(ct)).to(x.dtype)


def mla_per_head_sum_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    c = torch.einsum("bnm,mc->bnc", xd, w_dkv.double())
    out = torch.zeros(x.shape, dtype=torch.float64)
    keep = torch.arange(n)[None, :] <= torch.arange(n)[:, None]
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = torch.einsum("bnm,md->bnd", xd, w_q[:, cols].double())
        kh = torch.einsum("bnc,cd->bnd", c, w_uk[:, cols].double())
        vh = torch.einsum("bnc,cd->bnd", c, w_uv[:, cols].double())
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            s = torch.where(keep, s, torch.full_like(s, -math.inf))
        p = torch.exp(s - s.max(dim=-1, keepdim=True).values)
        p = p / p.sum(dim=-1, keepdim=True)
        ctx = torch.einsum("bij,bjd->bid", p, vh)
        out = out + torch.einsum("bid,dm->bim", ctx, w_o[cols, :].double())
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_q_latent_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_uk[:, s] @ w_q[:, s].T)
        o_lat.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_interleaved_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)
    wk = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wv = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return wq @ wk.transpose(-2, -1), wv @ wo


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = wq @ wk.transpose(1, 2) / math.sqrt(dh)
    return w_q_latent, wv @ wo


def absorb_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_parts, o_parts = [], []
    for h in range(num_heads):
        lo, hi = h * dh, (h + 1) * dh
        q_parts.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].T)
        o_parts.append(w_uk[:, lo:hi] @ w_o[lo:hi, :])
    return torch.stack(q_parts, 0), torch.stack(o_parts, 0)


def absorb_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[0] // num_heads
    wq_lat = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                          for h in range(num_heads)])
    wo_lat = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
                          for h in range(num_heads)])
    return wq_lat, wo_lat


def absorb_stack_last_dim(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    a = [w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].transpose(0, 1)
         for h in range(num_heads)]
    b = [w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :] for h in range(num_heads)]
    return torch.stack(a, dim=-1), torch.stack(b, dim=-1)


# ============================================================ absorb_mla_weights: right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.reshape(d_model, num_heads, dh)
    k3 = w_uk.reshape(d_c, num_heads, dh)
    v3 = w_uv.reshape(d_c, num_heads, dh)
    o3 = w_o.reshape(num_heads, dh, d_model)
    return (torch.einsum("mhd,chd->hmc", q3, k3), torch.einsum("chd,hdm->hcm", v3, o3))


def absorb_outer_products_f64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_lat = torch.zeros((num_heads, d_model, d_c), dtype=torch.float64)
    o_lat = torch.zeros((num_heads, d_c, d_model), dtype=torch.float64)
    for h in range(num_heads):
        for j in range(dh):
            col = h * dh + j
            q_lat[h] += torch.outer(w_q[:, col].double(), w_uk[:, col].double())
            o_lat[h] += torch.outer(w_uv[:, col].double(), w_o[col, :].double())
    return q_lat.to(w_q.dtype), o_lat.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "k_and_v_latents",
          "counts the latent twice, once for keys and once for values, as in an ordinary K/V "
          "cache: MLA recomputes both from one latent",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "no_rope_key",
          "counts only the latent and leaves out the shared RoPE key of rope_head_dim values",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "float_from_bits",
          "works in bits and divides by 8 with /, so it returns a float instead of a plain int",
          mla_bytes_via_bits),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without "
          "parentheses around (kv_lora_rank + rope_head_dim) only the RoPE key is multiplied "
          "by tokens, batch and bytes",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch",
          "never multiplies by batch_size: the bytes of one sequence only",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "kib_not_bytes",
          "divides by 1024 at the end, reporting KiB instead of bytes",
          mla_bytes_in_kib),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_loop),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_prod),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent_width),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model: when "
          "it is not, the head reshape raises a RuntimeError",
          mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "copy-paste slip: the values are c @ w_uk (the key up-projection) instead of "
          "c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "mask_convention_inverted",
          "fills -inf where the causal mask is True, but True means may attend: it hides the "
          "past and the diagonal and keeps only future keys (rows with none get zeros)",
          mla_mask_convention_inverted),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits heads with reshape(B, num_heads, N, d_head) directly instead of "
          "(B, N, num_heads, d_head) then transpose, and merges back the same way, mixing "
          "tokens and heads",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa),
    Entry("mla_attention", "right", "per_head_sum_float64", None, mla_per_head_sum_f64),

    Entry("absorb_mla_weights", "wrong", "q_latent_transposed",
          "multiplies in the wrong order, w_uk_h @ w_q_h.T, so w_q_latent[h] is the "
          "(d_c, d_model) transpose of w_q_h @ w_uk_h.T",
          absorb_q_latent_transposed),
    Entry("absorb_mla_weights", "wrong", "interleaved_head_columns",
          "reshapes the width as (d_head, num_heads), so head h gets every num_heads-th "
          "column instead of the contiguous block h*d_head:(h+1)*d_head",
          absorb_interleaved_heads),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "folds 1/sqrt(d_head) into w_q_latent although the scores apply it separately "
          "(the scale must stay out)",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w_uk_in_output",
          "copy-paste slip: w_o_latent[h] is built from w_uk_h @ w_o_h instead of "
          "w_uv_h @ w_o_h",
          absorb_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "d_head_from_rows",
          "computes d_head from w_q.shape[0] (d_model) instead of w_q.shape[1] "
          "(num_heads * d_head), so the head slices are the wrong width when the two differ",
          absorb_d_head_from_rows),
    Entry("absorb_mla_weights", "wrong", "stack_on_last_dim",
          "stacks the per-head products with dim=-1, giving (d_model, d_c, H) and "
          "(d_c, d_model, H) instead of a leading head axis",
          absorb_stack_last_dim),
    Entry("absorb_mla_weights", "right", "einsum_reshaped", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "outer_products_float64", None,
          absorb_outer_products_f64),
]
