"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import torch
import torch.nn.functional as F

from entry import Entry


# =============================================================================================
# mla_kv_cache_bytes
# =============================================================================================

def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # keys and values
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_missing_parens(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element * 8
    return bits / 8


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    elements = num_layers * seq_len * (kv_lora_rank + rope_head_dim)
    return elements * bytes_per_element


def mla_bytes_latent_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element  # one latent vector per token and layer
    return latent * num_layers * seq_len * batch_size


def mla_bytes_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    total = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element
    return total // 1024


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = [bytes_per_element, kv_lora_rank + rope_head_dim, seq_len, batch_size, num_layers]
    return functools.reduce(operator.mul, factors, 1)


def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent_bytes = kv_lora_rank * bytes_per_element
        rope_bytes = rope_head_dim * bytes_per_element
        total += (latent_bytes + rope_bytes) * seq_len * batch_size
    return int(total)


# =============================================================================================
# mla_attention
# =============================================================================================

def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = (s.softmax(-1) @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o


def mla_scale_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, d_model = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    latent = x @ w_dkv
    f = torch.promote_types(x.dtype, torch.float32)

    def heads(t):
        return t.reshape(batch, n, num_heads, d_head).permute(0, 2, 1, 3).to(f)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_model)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    att = torch.softmax(scores, dim=-1) @ v
    return att.permute(0, 2, 1, 3).reshape(batch, n, width).to(x.dtype) @ w_o


def mla_reshape_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (c @ w_uk).reshape(B, num_heads, N, dh)
    v = (c @ w_uv).reshape(B, num_heads, N, dh)
    wt = torch.promote_types(x.dtype, torch.float32)
    s = q.to(wt) @ k.to(wt).transpose(-2, -1) * dh ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).tril().logical_not(), -math.inf)
    o = torch.softmax(s, -1) @ v.to(wt)
    return o.reshape(B, N, width).to(x.dtype) @ w_o


def mla_mask_excludes_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv

    def to_heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)

    q, k, v = to_heads(x @ w_q), to_heads(c @ w_uk), to_heads(c @ w_uv)
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)  # j < i
        s = s.masked_fill(~allowed, -math.inf)
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bhij,bhjd->bhid", p, v)
    return o.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_always_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    hd = w_q.shape[1] // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).view(b, n, num_heads, hd).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(b, n, num_heads, hd).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(b, n, num_heads, hd).transpose(1, 2).to(ct)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # decoder attention
    return out.transpose(1, 2).reshape(b, n, num_heads * hd).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    w = torch.softmax(s, dim=-2)
    return (w @ v).transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_sdpa_float32(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    hd = width // num_heads
    up = torch.promote_types(x.dtype, torch.float32)
    lat = (x @ w_dkv).to(up)

    def split(t):
        return t.unflatten(-1, (num_heads, hd)).transpose(1, 2)

    q = split(x.to(up) @ w_q.to(up))
    k = split(lat @ w_uk.to(up))
    v = split(lat @ w_uv.to(up))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


def mla_head_loop_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = w_q.shape[1] // num_heads
    xd = x.double()
    c = xd @ w_dkv.double()
    acc = torch.zeros(B, N, d_model, dtype=torch.float64)
    blocked = torch.arange(N)[None, :] > torch.arange(N)[:, None]
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qh = xd @ w_q[:, cols].double()
        kh = c @ w_uk[:, cols].double()
        vh = c @ w_uv[:, cols].double()
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(d_head)
        if causal:
            s = s.masked_fill(blocked, -math.inf)
        p = torch.exp(s - s.amax(-1, keepdim=True))
        p = p / p.sum(-1, keepdim=True)
        acc += (p @ vh) @ w_o[cols, :].double()  # head h's rows of w_o
    return acc.to(x.dtype)


# =============================================================================================
# absorb_mla_weights
# =============================================================================================

def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    uk_h = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    uv_h = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_uses_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.view(d_model, num_heads, dh).transpose(0, 1)
    wuk = w_uk.view(d_c, num_heads, dh).transpose(0, 1)
    wo = w_o.view(num_heads, dh, d_model)
    return wq @ wuk.transpose(-1, -2), wuk @ wo


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, sl] @ w_uk[:, sl].T / math.sqrt(dh))
        o_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_product_order(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = []
    o_lat = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_uk[:, cols] @ w_q[:, cols].T)
        o_lat.append(w_uv[:, cols] @ w_o[cols])
    return torch.stack(q_lat, 0), torch.stack(o_lat, 0)


def absorb_stack_last_axis(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql = [w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].t() for h in range(num_heads)]
    ol = [w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh] for h in range(num_heads)]
    return torch.stack(ql, dim=-1), torch.stack(ol, dim=-1)


def absorb_whole_matrix_per_head(w_uk, w_uv, w_q, w_o, num_heads):
    full_q = w_q @ w_uk.T  # (d_model, d_c)
    full_o = w_uv @ w_o  # (d_c, d_model)
    return (full_q.unsqueeze(0).repeat(num_heads, 1, 1),
            full_o.unsqueeze(0).repeat(num_heads, 1, 1))


def absorb_einsum_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q4 = w_q.double().unflatten(1, (num_heads, dh))  # (d_model, H, dh)
    k4 = w_uk.double().unflatten(1, (num_heads, dh))  # (d_c, H, dh)
    v4 = w_uv.double().unflatten(1, (num_heads, dh))  # (d_c, H, dh)
    o4 = w_o.double().unflatten(0, (num_heads, dh))  # (H, dh, d_model)
    wq_lat = torch.einsum("mhe,che->hmc", q4, k4)
    wo_lat = torch.einsum("che,hem->hcm", v4, o4)
    return wq_lat.to(w_q.dtype), wo_lat.to(w_o.dtype)


def absorb_block_diagonal_trick(w_uk, w_uv, w_q, w_o, num_heads):
    """Mask the full products' inner dimension head by head with an indicator vector."""
    width = w_q.shape[1]
    dh = width // num_heads
    owner = torch.arange(width) // dh  # which head owns each column
    wq_list, wo_list = [], []
    for h in range(num_heads):
        sel = (owner == h).to(w_q.dtype)  # (width,) 1 on head h's columns
        wq_list.append((w_q * sel) @ w_uk.T)
        wo_list.append((w_uv * sel) @ w_o)
    return torch.stack(wq_list), torch.stack(wo_list)


ENTRIES = [
    # ---- mla_kv_cache_bytes
    Entry("mla_kv_cache_bytes", "wrong", "k-and-v-factor-2",
          "It counts the latent and the RoPE key twice, once for keys and once for values; MLA "
          "rebuilds both keys and values from one cached latent, so there is no factor 2.",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "missing-parentheses",
          "Missing parentheses: num_layers * kv_lora_rank + rope_head_dim * seq_len * ... only "
          "multiplies the RoPE part by tokens, batch and bytes.",
          mla_bytes_missing_parens),
    Entry("mla_kv_cache_bytes", "wrong", "float-from-bits",
          "It counts bits and divides by 8 with /, so the result is a float instead of a plain "
          "int.",
          mla_bytes_via_bits),
    Entry("mla_kv_cache_bytes", "wrong", "batch-ignored",
          "batch_size is never used: it returns the cache of one sequence whatever the batch.",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "rope-key-left-out",
          "Only the latent of kv_lora_rank values is counted; the shared RoPE key of "
          "rope_head_dim values per token and layer is left out.",
          mla_bytes_latent_only),
    Entry("mla_kv_cache_bytes", "wrong", "kib-not-bytes",
          "It divides by 1024 and returns KiB (rounded down) instead of bytes.",
          mla_bytes_kib),
    Entry("mla_kv_cache_bytes", "right", "reduce-mul", None, mla_bytes_reduce),
    Entry("mla_kv_cache_bytes", "right", "per-layer-loop", None, mla_bytes_layer_loop),
    # ---- mla_attention
    Entry("mla_attention", "wrong", "values-from-w_uk",
          "Copy-paste slip: the values are c @ w_uk, the key up-projection, instead of c @ w_uv.",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "scale-d-model",
          "The scores are scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head), with "
          "d_head = w_q.shape[1] // num_heads.",
          mla_scale_d_model),
    Entry("mla_attention", "wrong", "reshape-without-transpose",
          "Heads are split with reshape(B, H, N, d_head) directly instead of reshape(B, N, H, "
          "d_head).transpose(1, 2), so each 'head' mixes tokens and features (and the merge "
          "repeats the mistake).",
          mla_reshape_without_transpose),
    Entry("mla_attention", "wrong", "mask-excludes-diagonal",
          "The causal mask is tril(diagonal=-1): a query may not attend to itself, and the "
          "first query has no key at all (NaN row).",
          mla_mask_excludes_diagonal),
    Entry("mla_attention", "wrong", "always-causal",
          "The causal argument is ignored: SDPA is always called with is_causal=True, so "
          "causal=False still masks the future.",
          mla_always_causal),
    Entry("mla_attention", "wrong", "softmax-over-queries",
          "The softmax runs over dim=-2 (the queries) instead of over the keys (dim=-1).",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa-float32", None, mla_sdpa_float32),
    Entry("mla_attention", "right", "head-loop-float64", None, mla_head_loop_float64),
    # ---- absorb_mla_weights
    Entry("absorb_mla_weights", "wrong", "strided-heads",
          "Heads are split with reshape(..., d_head, num_heads), so head h gets every H-th "
          "column (h, h + H, ...) instead of the contiguous block h*d_head:(h+1)*d_head.",
          absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "w_uk-in-output",
          "Wrong variable reused: w_o_latent is built from w_uk's head slices instead of "
          "w_uv's.",
          absorb_uses_w_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "scale-folded-in",
          "It folds 1/sqrt(d_head) into w_q_latent, although the contract keeps the scale out "
          "(the scores divide by sqrt(d_head) afterwards), so the scale is applied twice.",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "product-order",
          "The product is in the wrong order: w_uk_h @ w_q_h.T gives (d_c, d_model), the "
          "transpose of w_q_h @ w_uk_h.T.",
          absorb_product_order),
    Entry("absorb_mla_weights", "wrong", "stack-last-axis",
          "The per-head matrices are stacked with dim=-1, so the head axis comes last "
          "((d_model, d_c, H)) instead of first.",
          absorb_stack_last_axis),
    Entry("absorb_mla_weights", "wrong", "full-product-each-head",
          "It absorbs the whole matrices (w_q @ w_uk.T, w_uv @ w_o), which sum over all heads, "
          "and copies that to every head instead of using each head's own slices.",
          absorb_whole_matrix_per_head),
    Entry("absorb_mla_weights", "right", "einsum-float64", None, absorb_einsum_float64),
    Entry("absorb_mla_weights", "right", "indicator-mask", None, absorb_block_diagonal_trick),
]
