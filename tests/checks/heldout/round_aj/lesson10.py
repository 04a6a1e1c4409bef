"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * per_token * seq_len * batch_size


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    values_per_token = num_layers * (kv_lora_rank + rope_head_dim)
    return values_per_token * seq_len * bytes_per_element


def mla_bytes_float(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * (
        8 * bytes_per_element)
    return bits / 8


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    # the RoPE key is "shared", so it is stored once, not per layer
    per_token = num_layers * kv_lora_rank + rope_head_dim
    return per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    total = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element
    return total // 1024


# ============================================================ mla_kv_cache_bytes: right
def mla_bytes_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element))


def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return int(total)


# ============================================================ mla_attention: wrong
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
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
    return (ctx.transpose(1, 2).reshape(B, N, -1) @ w_o.to(ct)).to(x.dtype)


def mla_head_width_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(ct)
    c = xf @ w_dkv.to(ct)

    def heads(t):
        return t.view(B, N, -1, d_head).transpose(1, 2)

    q, k, v = heads(xf @ w_q.to(ct)), heads(c @ w_uk.to(ct)), heads(c @ w_uv.to(ct))
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    out = torch.softmax(scores, -1) @ v
    return (out.transpose(1, 2).reshape(B, N, -1) @ w_o.to(ct)).to(x.dtype)


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x.to(ct) @ w_dkv.to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(b, n, num_heads, dh).transpose(1, 2)
    k = (latent @ w_uk.to(ct)).reshape(b, n, num_heads, dh).transpose(1, 2)
    v = (latent @ w_uk.to(ct)).reshape(b, n, num_heads, dh).transpose(1, 2)
    att = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        att = att.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
    y = torch.softmax(att, dim=-1) @ v
    return (y.transpose(1, 2).reshape(b, n, width) @ w_o.to(ct)).to(x.dtype)


def mla_reshape_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x.to(ct) @ w_dkv.to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(B, num_heads, N, dh)
    k = (c @ w_uk.to(ct)).reshape(B, num_heads, N, dh)
    v = (c @ w_uv.to(ct)).reshape(B, num_heads, N, dh)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, dim=-1) @ v
    return (o.reshape(B, N, width) @ w_o.to(ct)).to(x.dtype)


def mla_mask_convention_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x.to(ct) @ w_dkv.to(ct)
    q = (x.to(ct) @ w_q.to(ct)).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = (c @ w_uk.to(ct)).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    v = (c @ w_uv.to(ct)).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool))  # True = may attend
        s = s.masked_fill(keep, float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    o = (p @ v).permute(0, 2, 1, 3).reshape(B, N, width)
    return (o @ w_o.to(ct)).to(x.dtype)


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x.to(ct) @ w_dkv.to(ct)
    split = lambda t: t.view(B, N, num_heads, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(x.to(ct) @ w_q.to(ct)), split(c @ w_uk.to(ct)), split(c @ w_uv.to(ct))
    s = q @ k.transpose(-2, -1) * dh ** -0.5
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    w = torch.softmax(s, dim=-2)
    return ((w @ v).transpose(1, 2).reshape(B, N, width) @ w_o.to(ct)).to(x.dtype)


# ============================================================ mla_attention: right
def mla_sdpa_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()

    def to_heads(t):
        return t.unflatten(-1, (num_heads, dh)).transpose(1, 2)

    q = to_heads(x64 @ w_q.double())
    k = to_heads(c @ w_uk.double())
    v = to_heads(c @ w_uv.double())
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    merged = ctx.transpose(1, 2).flatten(2)
    return (merged @ w_o.double()).to(x.dtype)


def mla_per_head_einsum(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    n = x.shape[1]
    width = w_q.shape[1]
    dh = width // num_heads
    x64 = x.to(torch.float64)
    latent = torch.einsum("bnm,mc->bnc", x64, w_dkv.to(torch.float64))
    result = torch.zeros(x.shape, dtype=torch.float64)
    future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = torch.einsum("bnm,md->bnd", x64, w_q[:, cols].double())
        kh = torch.einsum("bnc,cd->bnd", latent, w_uk[:, cols].double())
        vh = torch.einsum("bnc,cd->bnd", latent, w_uv[:, cols].double())
        sc = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            sc = sc.masked_fill(future, -math.inf)
        sc = sc - sc.max(dim=-1, keepdim=True).values
        e = sc.exp()
        wts = e / e.sum(dim=-1, keepdim=True)
        ctx = torch.einsum("bij,bjd->bid", wts, vh)
        result = result + ctx @ w_o[cols, :].double()
    return result.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    uk_h = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    uv_h = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(num_heads, dh, d_model)
    return q_h @ uk_h.transpose(-2, -1), uv_h @ o_h


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_q[:, s] @ w_uk[:, s].T / math.sqrt(dh))
        wo_lat.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qs.append(w_q[:, cols] @ w_uk[:, cols].T)
        os_.append(w_uk[:, cols] @ w_o[cols])
    return torch.stack(qs, 0), torch.stack(os_, 0)


def absorb_product_order_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat = torch.stack([w_uk[:, h * dh:(h + 1) * dh] @ w_q[:, h * dh:(h + 1) * dh].T
                         for h in range(num_heads)])
    o_lat = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
                         for h in range(num_heads)])
    return q_lat, o_lat


def absorb_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    dh = d_model // num_heads
    out_q = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].t()
                         for h in range(num_heads)])
    out_o = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :]
                         for h in range(num_heads)])
    return out_q, out_o


def absorb_einsum_letters(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.reshape(d_model, num_heads, dh)
    uk3 = w_uk.reshape(d_c, num_heads, dh)
    uv3 = w_uv.reshape(d_c, num_heads, dh)
    o3 = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = torch.einsum("mhk,chj->hmc", q3, uk3)
    w_o_latent = torch.einsum("chk,hkm->hcm", uv3, o3)
    return w_q_latent, w_o_latent


# ============================================================ absorb_mla_weights: right
def absorb_einsum_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.double().reshape(d_model, num_heads, dh)
    uk3 = w_uk.double().reshape(d_c, num_heads, dh)
    uv3 = w_uv.double().reshape(d_c, num_heads, dh)
    o3 = w_o.double().reshape(num_heads, dh, d_model)
    wq = torch.einsum("mhk,chk->hmc", q3, uk3)
    wo = torch.einsum("chk,hkm->hcm", uv3, o3)
    return wq.to(w_q.dtype), wo.to(w_o.dtype)


def absorb_block_diagonal(w_uk, w_uv, w_q, w_o, num_heads):
    """Masks every head but one to zero and lets a full product do the slicing."""
    width = w_q.shape[1]
    dh = width // num_heads
    q64, uk64, uv64, o64 = (w.to(torch.float64) for w in (w_q, w_uk, w_uv, w_o))
    qs, os_ = [], []
    for h in range(num_heads):
        sel = torch.zeros(width, dtype=torch.float64)
        sel[h * dh:(h + 1) * dh] = 1.0
        qs.append((q64 * sel) @ uk64.T)  # (d_model, d_c): only head h's columns survive
        os_.append(uv64 @ (o64 * sel[:, None]))  # (d_c, d_model)
    return torch.stack(qs).to(w_q.dtype), torch.stack(os_).to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "multiplies by 2 for keys and values as in a plain KV cache, but MLA's one latent "
          "already gives both", mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_dropped",
          "never multiplies by batch_size, so a batch counts as one sequence",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "float_from_bits",
          "counts bits and divides by 8 with /, returning a float instead of a plain int",
          mla_bytes_float),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so only the RoPE "
          "part is multiplied by tokens, batch and bytes: (kv_lora_rank + rope_head_dim) "
          "needs parentheses", mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once_for_all_layers",
          "reads 'shared RoPE key' as shared across layers and stores it once, when it is "
          "shared across heads and still kept in every layer", mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "wrong", "returns_kib",
          "divides the total by 1024 and returns KiB instead of bytes", mla_bytes_kib),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_prod),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_layer_loop),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads and splits with view(B, N, -1, d_head), which "
          "only works when num_heads * d_head == d_model; otherwise it builds the wrong number "
          "of heads of the wrong width (or fails to reshape)", mla_head_width_from_d_model),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "copy-paste slip: the values are computed as c @ w_uk, the key up-projection, "
          "instead of c @ w_uv", mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H * d_head) "
          "instead of reshape(B, N, H, d_head).transpose(1, 2), mixing tokens and heads",
          mla_reshape_without_transpose),
    Entry("mla_attention", "wrong", "mask_convention_inverted",
          "passes the 'may attend' tril mask to masked_fill as if True meant 'hide', so each "
          "query sees only future keys (and the last row nothing)", mla_mask_convention_inverted),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "normalises the scores with softmax over dim=-2 (the queries) instead of over the "
          "keys", mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float64", None, mla_sdpa_float64),
    Entry("mla_attention", "right", "per_head_einsum_loop", None, mla_per_head_einsum),

    Entry("absorb_mla_weights", "wrong", "heads_strided_columns",
          "reshapes the columns as (d_head, H) instead of (H, d_head), so head h gets every "
          "H-th column instead of the block h*d_head:(h+1)*d_head", absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "divides w_q_latent by sqrt(d_head), although the scale must stay out of the "
          "absorbed weights (the scores still divide by sqrt(d_head))", absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w_o_latent_from_w_uk",
          "copy-paste slip: w_o_latent[h] is built from w_uk_h @ w_o_h instead of "
          "w_uv_h @ w_o_h", absorb_w_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "q_product_order_swapped",
          "computes w_uk_h @ w_q_h.T instead of w_q_h @ w_uk_h.T, giving the (d_c, d_model) "
          "transpose of each head's absorbed query weight", absorb_product_order_swapped),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "takes d_head from w_q.shape[0] (d_model) instead of w_q.shape[1], so the head "
          "slices have the wrong width", absorb_d_head_from_rows),
    Entry("absorb_mla_weights", "wrong", "einsum_separate_letters",
          "writes the einsum as 'mhk,chj->hmc' with two different letters for the d_head "
          "axis, so it sums each factor separately (a product of sums) instead of contracting "
          "them", absorb_einsum_letters),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_einsum_float64),
    Entry("absorb_mla_weights", "right", "column_masks_full_products", None,
          absorb_block_diagonal),
]
