"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- mla_kv_cache_bytes
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    tokens = seq_len * batch_size
    return num_layers * kv_lora_rank + rope_head_dim * tokens * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_layer = (kv_lora_rank + rope_head_dim) * bytes_per_element * seq_len
    return per_layer * num_layers


def mla_bytes_rope_in_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len,
                               batch_size=1, bytes_per_element=2):
    latent_bytes = kv_lora_rank * bytes_per_element
    per_token_layer = latent_bytes + rope_head_dim
    return per_token_layer * num_layers * seq_len * batch_size


def mla_bytes_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return int(math.prod(factors))


def mla_bytes_loops(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element * seq_len
        shared_key = rope_head_dim * bytes_per_element * seq_len
        total += (latent + shared_key) * batch_size
    return total


# ----------------------------------------------------------------------------- mla_attention

def mla_scale_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, D = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(D)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    ctx = ctx.transpose(1, 2).reshape(B, N, num_heads * dh).to(x.dtype)
    return ctx @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    lat = x @ w_dkv

    def heads(t):
        return t.reshape(batch, n, num_heads, d_head).transpose(1, 2).to(work)

    q, k, v = heads(x @ w_q), heads(lat @ w_uk), heads(lat @ w_uv)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                    -math.inf)
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, n, -1).to(x.dtype)
    return out @ w_o


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    hd = width // num_heads
    cd = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, hd).permute(0, 2, 1, 3).to(cd)
    k = (c @ w_uk).view(B, N, num_heads, hd).permute(0, 2, 1, 3).to(cd)
    v = (c @ w_uv).view(B, N, num_heads, hd).permute(0, 2, 1, 3).to(cd)
    att = (q @ k.transpose(-2, -1)) * hd ** -0.5
    if causal:
        mask = torch.tril(torch.ones(N, N)).bool()  # True = may attend
        att = att.masked_fill(mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v).permute(0, 2, 1, 3).reshape(B, N, width).to(x.dtype)
    return y @ w_o


def mla_reshape_no_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh).to(ct)
    k = (c @ w_uk).reshape(B, num_heads, N, dh).to(ct)
    v = (c @ w_uv).reshape(B, num_heads, N, dh).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, -1) @ v
    o = o.reshape(B, N, num_heads * dh).to(x.dtype)
    return o @ w_o


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
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, N, -1).to(x.dtype)
    return o @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    h = num_heads
    dh = w_q.shape[1] // h
    ct = torch.promote_types(x.dtype, torch.float32)
    latent = x @ w_dkv
    q = (x @ w_q).view(b, n, h, dh).transpose(1, 2).to(ct)
    k = (latent @ w_uk).view(b, n, h, dh).transpose(1, 2).to(ct)
    v = (latent @ w_uv).view(b, n, h, dh).transpose(1, 2).to(ct)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    w = torch.softmax(scores, dim=-2)
    ctx = torch.einsum("bhqk,bhkd->bhqd", w, v).transpose(1, 2).reshape(b, n, h * dh)
    return ctx.to(x.dtype) @ w_o


def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)

    def split(t):
        return t.unflatten(-1, (num_heads, dh)).transpose(1, 2)

    q, k, v = split(xc @ w_q.to(ct)), split(c @ w_uk.to(ct)), split(c @ w_uv.to(ct))
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return (ctx.transpose(1, 2).flatten(2) @ w_o.to(ct)).to(x.dtype)


def mla_per_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    lat = xd @ w_dkv.double()  # (B, N, d_c)
    allowed = torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal else None
    out = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = xd @ w_q.double()[:, cols]
        kh = lat @ w_uk.double()[:, cols]
        vh = lat @ w_uv.double()[:, cols]
        sc = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if allowed is not None:
            sc = torch.where(allowed, sc, torch.tensor(-math.inf, dtype=torch.float64))
        p = torch.softmax(sc, dim=-1)
        out = out + (p @ vh) @ w_o.double()[cols, :]  # heads add up through w_o's rows
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- absorb_mla_weights
def absorb_transposed_q(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_lat, wo_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        wq_lat.append(w_uk[:, sl] @ w_q[:, sl].T)  # (d_c, d_model)
        wo_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(wq_lat), torch.stack(wo_lat)


def absorb_strided_w_o(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    dh = width // num_heads
    q_h = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    uk_h = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    uv_h = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    o_h = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)  # rows h::H
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    wq = torch.einsum("mhe,che->hmc", w_q.unflatten(1, (num_heads, d_head)),
                      w_uk.unflatten(1, (num_heads, d_head))) / math.sqrt(d_head)
    wo = torch.einsum("che,hem->hcm", w_uv.unflatten(1, (num_heads, d_head)),
                      w_o.unflatten(0, (num_heads, d_head)))
    return wq, wo


def absorb_inclusive_end(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        a, b = h * d_head, (h + 1) * d_head - 1  # last column of head h
        qs.append(w_q[:, a:b] @ w_uk[:, a:b].transpose(0, 1))
        os_.append(w_uv[:, a:b] @ w_o[a:b, :])
    return torch.stack(qs, 0), torch.stack(os_, 0)


def absorb_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[0] // num_heads
    q_lat = torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @ w_uk[:, h * d_head:(h + 1) * d_head].T
                         for h in range(num_heads)])
    o_lat = torch.stack([w_uv[:, h * d_head:(h + 1) * d_head] @ w_o[h * d_head:(h + 1) * d_head]
                         for h in range(num_heads)])
    return q_lat, o_lat


def absorb_w_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_model, width = w_q.shape
    d_c = w_uk.shape[0]
    hd = width // num_heads
    wq = w_q.view(d_model, num_heads, hd).transpose(0, 1)  # (H, d_model, hd)
    wk = w_uk.view(d_c, num_heads, hd).transpose(0, 1)  # (H, d_c, hd)
    wv = w_uk.view(d_c, num_heads, hd).transpose(0, 1)
    wo = w_o.view(num_heads, hd, d_model)
    return torch.bmm(wq, wk.transpose(1, 2)), torch.bmm(wv, wo)


def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    out_q, out_o = [], []
    for h in range(num_heads):
        c0, c1 = h * dh, h * dh + dh
        out_q.append(w_q[:, c0:c1].double() @ w_uk[:, c0:c1].double().T)
        out_o.append(w_uv[:, c0:c1].double() @ w_o[c0:c1, :].double())
    return torch.stack(out_q).to(w_q.dtype), torch.stack(out_o).to(w_q.dtype)


def absorb_einsum_views(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_c = w_uk.shape[0]
    dh = w_q.shape[1] // num_heads
    q3 = w_q.reshape(d_model, num_heads, dh)
    k3 = w_uk.reshape(d_c, num_heads, dh)
    v3 = w_uv.reshape(d_c, num_heads, dh)
    o3 = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = torch.einsum("mhe,che->hmc", q3, k3)
    w_o_latent = torch.einsum("che,hem->hcm", v3, o3)
    return w_q_latent, w_o_latent


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "doubles the cache for keys and values as in ordinary attention, but MLA stores one "
          "latent per token from which both are recomputed: no factor 2", mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_left_out",
          "counts only the kv_lora_rank latent and leaves out the shared RoPE key of "
          "rope_head_dim values per token and layer", mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int_returned",
          "multiplies with np.prod, which returns a numpy.int64, not the plain Python int the "
          "contract asks for", mla_bytes_np_prod),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * tokens * bytes without "
          "parentheses around kv_lora_rank + rope_head_dim, so only the RoPE key is "
          "multiplied by the tokens and bytes", mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "batch_ignored",
          "never multiplies by batch_size: the cache of one sequence is returned whatever "
          "the batch", mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "rope_in_elements",
          "converts the latent to bytes but adds the RoPE key as a count of elements, "
          "forgetting to multiply rope_head_dim by bytes_per_element", mla_bytes_rope_in_elements),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_math_prod),
    Entry("mla_kv_cache_bytes", "right", "layer_loop", None, mla_bytes_loops),

    Entry("mla_attention", "wrong", "scaled_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head); the two differ "
          "because num_heads * d_head need not equal d_model", mla_scale_d_model),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads instead of w_q.shape[1] // num_heads, so the "
          "head split fails (raises on reshape) whenever num_heads * d_head != d_model",
          mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "mask_convention_inverted",
          "fills -inf where the lower-triangular mask is True, i.e. hides the keys that may be "
          "attended (True = may attend) and keeps the future ones; the last query sees nothing "
          "and gives NaN", mla_mask_inverted),
    Entry("mla_attention", "wrong", "reshape_without_transpose",
          "splits the heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head) (and "
          "merges back the same way) instead of reshape(B, N, H, d_head).transpose(1, 2), "
          "mixing tokens and heads", mla_reshape_no_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "copy-paste slip: the values are computed as c @ w_uk (the key up-projection) "
          "instead of c @ w_uv", mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "applies the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa),
    Entry("mla_attention", "right", "per_head_loop_float64", None, mla_per_head_loop_f64),

    Entry("absorb_mla_weights", "wrong", "q_latent_transposed",
          "multiplies in the wrong order, w_uk_h @ w_q_h.T, so each w_q_latent[h] comes out "
          "transposed, (d_c, d_model) instead of (d_model, d_c)", absorb_transposed_q),
    Entry("absorb_mla_weights", "wrong", "w_o_rows_strided",
          "reshapes w_o as (d_head, H, d_model), so head h gets the strided rows h::H instead "
          "of the contiguous rows h*d_head:(h+1)*d_head", absorb_strided_w_o),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "folds the 1/sqrt(d_head) score scale into w_q_latent, although the contract keeps "
          "the scale out (scores are (x @ w_q_latent[h]) @ c.T / sqrt(d_head))",
          absorb_scale_folded),
    Entry("absorb_mla_weights", "wrong", "slice_end_inclusive",
          "ends each head's slice at (h+1)*d_head - 1 as if slices were inclusive, so the last "
          "column of every head is left out of both products", absorb_inclusive_end),
    Entry("absorb_mla_weights", "wrong", "d_head_from_rows",
          "takes d_head from w_q.shape[0] (d_model) instead of w_q.shape[1], so the heads are "
          "cut at the wrong columns whenever num_heads * d_head != d_model",
          absorb_d_head_from_rows),
    Entry("absorb_mla_weights", "wrong", "w_uk_in_output",
          "copy-paste slip: w_o_latent is built from w_uk instead of w_uv", absorb_w_uk_for_output),
    Entry("absorb_mla_weights", "right", "loop_float64", None, absorb_loop_float64),
    Entry("absorb_mla_weights", "right", "einsum_views", None, absorb_einsum_views),
]
