"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # a key and a value, as in lesson 06
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_layer = (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element
    return num_layers * per_layer


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * (
        8 * bytes_per_element)
    return bits / 8


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    numbers = num_layers * kv_lora_rank + rope_head_dim
    return numbers * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_pairs(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    rope_pairs = rope_head_dim // 2  # RoPE rotates pairs of features
    return num_layers * (kv_lora_rank + rope_pairs) * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = [num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
               bytes_per_element]
    return int(functools.reduce(operator.mul, factors, 1))


# ============================================================ mla_attention: wrong
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-1, -2)) / math.sqrt(w_dkv.shape[1])
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool).tril()
        s = s.masked_fill(~allowed, float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v.to(ct)
    return ctx.to(x.dtype).transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o


def mla_values_from_wuk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uk)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(f) @ k.to(f).transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    out = (scores.softmax(-1) @ v.to(f)).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, width) @ w_o


def mla_mask_polarity(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    D = w_q.shape[1] // H
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, H, D).permute(0, 2, 1, 3)
    k = (c @ w_uk).reshape(B, N, H, D).permute(0, 2, 1, 3)
    v = (c @ w_uv).reshape(B, N, H, D).permute(0, 2, 1, 3)
    wd = torch.promote_types(x.dtype, torch.float32)
    att = torch.matmul(q.to(wd), k.to(wd).transpose(-2, -1)) / math.sqrt(D)
    if causal:
        mask = torch.tril(torch.ones(N, N, dtype=torch.bool))  # True = may attend
        att = att.masked_fill(mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = torch.matmul(att, v.to(wd)).to(x.dtype)
    return y.permute(0, 2, 1, 3).reshape(B, N, H * D) @ w_o


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
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = (torch.softmax(s, -1) @ v.to(ct)).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, width) @ w_o


def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = (s.softmax(-1) @ v.to(ct)).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, num_heads * d_head) @ w_o


def mla_always_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    bsz, seq, _ = x.shape
    hd = w_q.shape[1] // num_heads
    lat = x @ w_dkv
    split = lambda t: t.view(bsz, seq, num_heads, hd).transpose(1, 2)  # noqa: E731
    q, k, v = split(x @ w_q), split(lat @ w_uk), split(lat @ w_uv)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = q.to(ct) @ k.to(ct).transpose(-2, -1) / math.sqrt(hd)
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    s = s.masked_fill(future, -math.inf)  # a decoder never looks ahead
    o = (torch.softmax(s, dim=-1) @ v.to(ct)).to(x.dtype)
    return o.transpose(1, 2).reshape(bsz, seq, num_heads * hd) @ w_o


# ============================================================ mla_attention: right
def mla_sdpa_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    q = (x64 @ w_q.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (c @ w_uk.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    v = (c @ w_uv.double()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))  # square: N x N
    y = o.transpose(1, 2).flatten(2) @ w_o.double()
    return y.to(x.dtype)


def mla_absorbed_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Score each head against the latents directly, w_q_h @ w_uk_h.T, and sum the heads."""
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    x64 = x.to(torch.float64)
    c = x64 @ w_dkv.to(torch.float64)  # (B, N, d_c)
    out = torch.zeros(x.shape, dtype=torch.float64)
    keep = torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal else None
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        s = torch.einsum("bqc,bkc->bqk", x64 @ wq_lat, c) / math.sqrt(dh)
        if keep is not None:
            s = s.masked_fill(~keep, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += torch.einsum("bqk,bkc->bqc", p, c) @ wo_lat
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_product_reversed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_uk[:, s] @ w_q[:, s].T)  # (d_c, d_model)
        wo_l.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_reshape_no_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(num_heads, d_model, dh)
    uk_h = w_uk.reshape(num_heads, d_c, dh)
    uv_h = w_uv.reshape(num_heads, d_c, dh)
    o_h = w_o.reshape(num_heads, dh, d_model)
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_h = w_q.unflatten(1, (num_heads, dh)).permute(1, 0, 2)
    uk_h = w_uk.unflatten(1, (num_heads, dh)).permute(1, 0, 2)
    uv_h = w_uv.unflatten(1, (num_heads, dh)).permute(1, 0, 2)
    o_h = w_o.unflatten(0, (num_heads, dh))
    w_q_latent = q_h @ uk_h.transpose(-2, -1) / math.sqrt(dh)  # fold the score scale in
    return w_q_latent, uv_h @ o_h


def absorb_heads_summed(w_uk, w_uv, w_q, w_o, num_heads):
    # one product over all columns absorbs every head at once
    return w_q @ w_uk.T, w_uv @ w_o


def absorb_wuk_reused(w_uk, w_uv, w_q, w_o, num_heads):
    H = num_heads
    d = w_q.shape[1] // H
    wql = torch.stack([w_q[:, h * d:(h + 1) * d] @ w_uk[:, h * d:(h + 1) * d].T
                       for h in range(H)])
    wol = torch.stack([w_uk[:, h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d]
                       for h in range(H)])
    return wql, wol


def absorb_dhead_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[0] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        ql.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].transpose(0, 1))
        ol.append(w_uv[:, lo:hi] @ w_o[lo:hi, :])
    return torch.stack(ql, 0), torch.stack(ol, 0)


# ============================================================ absorb_mla_weights: right
def absorb_einsum_f64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q4 = w_q.double().reshape(w_q.shape[0], num_heads, dh)
    uk = w_uk.double().reshape(w_uk.shape[0], num_heads, dh)
    uv = w_uv.double().reshape(w_uv.shape[0], num_heads, dh)
    o4 = w_o.double().reshape(num_heads, dh, w_o.shape[1])
    wq_lat = torch.einsum("mhe,che->hmc", q4, uk)
    wo_lat = torch.einsum("che,hem->hcm", uv, o4)
    return wq_lat.to(w_q.dtype), wo_lat.to(w_o.dtype)


def absorb_chunk_loop(w_uk, w_uv, w_q, w_o, num_heads):
    q_parts = torch.chunk(w_q, num_heads, dim=1)
    uk_parts = torch.chunk(w_uk, num_heads, dim=1)
    uv_parts = torch.chunk(w_uv, num_heads, dim=1)
    o_parts = torch.chunk(w_o, num_heads, dim=0)
    wq_lat = torch.stack([torch.mm(a.float(), b.float().t()).to(w_q.dtype)
                          if a.dtype in (torch.float16, torch.bfloat16) else torch.mm(a, b.t())
                          for a, b in zip(q_parts, uk_parts)])
    wo_lat = torch.stack([torch.mm(a.float(), b.float()).to(w_o.dtype)
                          if a.dtype in (torch.float16, torch.bfloat16) else torch.mm(a, b)
                          for a, b in zip(uv_parts, o_parts)])
    return wq_lat, wo_lat


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor-two-k-and-v",
          "counts a key and a value per token (the factor 2 of the GQA cache) although MLA "
          "caches one latent from which both are recomputed",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "rope-key-left-out",
          "counts only the latent of kv_lora_rank numbers and leaves out the shared RoPE key "
          "of rope_head_dim numbers",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "batch-left-out",
          "multiplies by layers, numbers per token, seq_len and bytes but never by "
          "batch_size",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "float-from-bits",
          "goes through bits and divides by 8 with /, so it returns a float where the lesson "
          "returns a plain int",
          mla_bytes_via_bits),
    Entry("mla_kv_cache_bytes", "wrong", "precedence-rope-once",
          "writes num_layers * kv_lora_rank + rope_head_dim without parentheses, so the RoPE "
          "key is counted once instead of once per layer",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "rope-counted-in-pairs",
          "counts rope_head_dim // 2 numbers for the RoPE key (one per rotated pair) instead of "
          "all rope_head_dim features",
          mla_bytes_rope_pairs),
    Entry("mla_kv_cache_bytes", "right", "layer-loop", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "reduce-mul", None, mla_bytes_reduce),
    Entry("mla_attention", "wrong", "scaled-by-latent-width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "values-from-w_uk",
          "copy-paste slip: the values are made with c @ w_uk (the key up-projection) instead "
          "of c @ w_uv",
          mla_values_from_wuk),
    Entry("mla_attention", "wrong", "mask-polarity",
          "fills -inf where the tril mask is True, but True means may attend: the allowed "
          "keys are hidden (the last row entirely, giving NaN) and the future is kept",
          mla_mask_polarity),
    Entry("mla_attention", "wrong", "split-without-transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head) instead of "
          "reshape(B, N, H, d_head).transpose(1, 2), mixing tokens and heads",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "d_head-from-d_model",
          "takes d_head = d_model // num_heads, but in MLA num_heads * d_head need not equal "
          "d_model (here the reshape raises)",
          mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "always-causal",
          "applies the causal mask whatever the causal argument says, so causal=False still "
          "hides the future keys",
          mla_always_causal),
    Entry("mla_attention", "right", "sdpa-float64", None, mla_sdpa_float64),
    Entry("mla_attention", "right", "absorbed-per-head-loop", None, mla_absorbed_per_head),
    Entry("absorb_mla_weights", "wrong", "product-reversed",
          "computes w_uk_h @ w_q_h.T, the transpose of w_q_h @ w_uk_h.T, so w_q_latent comes "
          "out (H, d_c, d_model) instead of (H, d_model, d_c)",
          absorb_product_reversed),
    Entry("absorb_mla_weights", "wrong", "reshape-without-permute",
          "reshapes w_q, w_uk and w_uv straight to (H, rows, d_head) without permuting, which "
          "cuts the row-major memory into H consecutive pieces instead of taking the columns "
          "h*d_head:(h+1)*d_head",
          absorb_reshape_no_permute),
    Entry("absorb_mla_weights", "wrong", "scale-folded-in",
          "folds 1/sqrt(d_head) into w_q_latent, but the contract keeps the scale out (the "
          "scores divide by sqrt(d_head) afterwards)",
          absorb_scale_folded),
    Entry("absorb_mla_weights", "wrong", "heads-summed",
          "multiplies the full matrices, w_q @ w_uk.T and w_uv @ w_o, which sums over all heads "
          "and returns one (d_model, d_c) matrix instead of one per head",
          absorb_heads_summed),
    Entry("absorb_mla_weights", "wrong", "w_uk-for-output",
          "copy-paste slip: w_o_latent uses w_uk_h @ w_o_h where w_uv_h @ w_o_h belongs",
          absorb_wuk_reused),
    Entry("absorb_mla_weights", "wrong", "d_head-from-rows",
          "takes d_head = w_q.shape[0] // num_heads (d_model, the rows) instead of "
          "w_q.shape[1] // num_heads, so the head slices have the wrong width",
          absorb_dhead_from_rows),
    Entry("absorb_mla_weights", "right", "einsum-float64", None, absorb_einsum_f64),
    Entry("absorb_mla_weights", "right", "chunk-loop-mm", None, absorb_chunk_loop),
]
