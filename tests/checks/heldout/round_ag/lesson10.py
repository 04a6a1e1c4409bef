"""Held-out learners' answers, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention,
absorb_mla_weights."""

import functools
import math
import operator

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes — wrong
def mkb_keys_and_values(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mkb_no_rope_key(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return num_layers * seq_len * batch_size * latent


def mkb_bits_over_eight(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 8 * bytes_per_element
    return bits / 8


def mkb_ignores_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    values_per_layer = (kv_lora_rank + rope_head_dim) * seq_len
    return num_layers * values_per_layer * bytes_per_element


def mkb_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mkb_counts_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    tokens = seq_len * batch_size
    per_layer = tokens * (kv_lora_rank + rope_head_dim)
    return per_layer * num_layers


# ============================================================ mla_kv_cache_bytes — right
def mkb_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return math.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element])


def mkb_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for width in (kv_lora_rank, rope_head_dim):
            total += functools.reduce(operator.mul, (width, seq_len, batch_size,
                                                     bytes_per_element), 1)
    return int(total)


# ============================================================ mla_attention — wrong
def mla_scale_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, -1).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, -1).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, -1).transpose(1, 2)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, N, -1)
    return ctx @ w_o


def mla_assumes_d_model_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv

    def heads(t):
        return t.reshape(B, N, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    sc = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))
        sc = sc.masked_fill(~allowed, float("-inf"))
    w = sc.softmax(-1)
    o = (w @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, num_heads * d_head) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    latent = x @ w_dkv
    queries = (x @ w_q).view(b, n, num_heads, dh).permute(0, 2, 1, 3)
    keys = (latent @ w_uk).view(b, n, num_heads, dh).permute(0, 2, 1, 3)
    values = (latent @ w_uk).view(b, n, num_heads, dh).permute(0, 2, 1, 3)
    scores = torch.matmul(queries.float(), keys.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                    float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    mixed = torch.matmul(weights, values.float()).to(x.dtype)
    return mixed.permute(0, 2, 1, 3).reshape(b, n, width) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    hd = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, hd)
    k = (c @ w_uk).reshape(B, num_heads, N, hd)
    v = (c @ w_uv).reshape(B, num_heads, N, hd)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    out = (torch.softmax(s, -1) @ v.float()).to(x.dtype)
    return out.reshape(B, N, num_heads * hd) @ w_o


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, d_head).transpose(1, 2)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        mask = torch.tril(torch.ones(N, N, dtype=torch.bool))  # True = may attend
        scores = scores.masked_fill(mask, float("-inf"))
    att = torch.softmax(scores, dim=-1)
    ctx = (att @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-2)
    o = (p @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, -1) @ w_o


# ============================================================ mla_attention — right
def mla_einsum_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    X = x.double()
    c = X @ w_dkv.double()
    H = num_heads
    d_head = w_q.shape[1] // H
    n = x.shape[1]
    q = torch.einsum("bnm,mhe->bhne", X, w_q.double().view(-1, H, d_head))
    k = torch.einsum("bnc,che->bhne", c, w_uk.double().view(-1, H, d_head))
    v = torch.einsum("bnc,che->bhne", c, w_uv.double().view(-1, H, d_head))
    s = torch.einsum("bhie,bhje->bhij", q, k) / math.sqrt(d_head)
    if causal:
        i = torch.arange(n).view(n, 1)
        j = torch.arange(n).view(1, n)
        s = torch.where(j <= i, s, torch.full_like(s, -math.inf))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bhij,bhje->bhie", p, v)
    y = torch.einsum("bhie,hem->bim", ctx, w_o.double().view(H, d_head, -1))
    return y.to(x.dtype)


def mla_sdpa_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    x32 = x.float()
    latent = x32 @ w_dkv.float()
    dh = w_q.shape[1] // num_heads
    out = torch.zeros(x.shape[0], x.shape[1], w_o.shape[1], dtype=torch.float32)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x32 @ w_q[:, cols].float()
        kh = latent @ w_uk[:, cols].float()
        vh = latent @ w_uv[:, cols].float()
        ctx = F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
        out = out + ctx @ w_o[cols, :].float()
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights — wrong
def amw_q_latent_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        ql.append(w_uk[:, sl] @ w_q[:, sl].T)
        ol.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(ql), torch.stack(ol)


def amw_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, d_head)
    wk = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wv = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)  # (H, d_head, d_model)
    return wq @ wk.transpose(1, 2), wv @ wo


def amw_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = w_q.reshape(-1, num_heads, dh).transpose(0, 1)
    wk = w_uk.reshape(d_c, num_heads, dh).transpose(0, 1)
    wv = w_uv.reshape(d_c, num_heads, dh).transpose(0, 1)
    wo = w_o.reshape(num_heads, dh, -1)
    q_lat = wq @ wk.transpose(-2, -1) / math.sqrt(dh)  # the score scale goes in here
    return q_lat, wv @ wo


def amw_w_uk_in_o_latent(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_q.shape[1]
    d = width // num_heads
    q_lat = torch.einsum("mhe,che->hmc", w_q.view(-1, num_heads, d), w_uk.view(-1, num_heads, d))
    o_lat = torch.einsum("che,hem->hcm", w_uk.view(-1, num_heads, d), w_o.view(num_heads, d, -1))
    return q_lat, o_lat


def amw_stack_last_axis(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        a, b = h * dh, (h + 1) * dh
        qs.append(w_q[:, a:b] @ w_uk[:, a:b].transpose(0, 1))
        os_.append(w_uv[:, a:b] @ w_o[a:b])
    return torch.stack(qs, dim=-1), torch.stack(os_, dim=-1)


def amw_loop_misses_last_head(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    wq_lat = torch.zeros(num_heads, d_model, d_c, dtype=w_q.dtype)
    wo_lat = torch.zeros(num_heads, d_c, d_model, dtype=w_q.dtype)
    for h in range(num_heads - 1):
        s = slice(h * dh, (h + 1) * dh)
        wq_lat[h] = w_q[:, s] @ w_uk[:, s].T
        wo_lat[h] = w_uv[:, s] @ w_o[s]
    return wq_lat, wo_lat


# ============================================================ absorb_mla_weights — right
def amw_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    q4 = w_q.reshape(w_q.shape[0], num_heads, dh)
    k4 = w_uk.reshape(d_c, num_heads, dh)
    v4 = w_uv.reshape(d_c, num_heads, dh)
    o4 = w_o.reshape(num_heads, dh, w_o.shape[1])
    w_q_latent = torch.einsum("mhe,che->hmc", q4.double(), k4.double())
    w_o_latent = torch.einsum("che,hem->hcm", v4.double(), o4.double())
    return w_q_latent.to(w_q.dtype), w_o_latent.to(w_q.dtype)


def amw_column_sums(w_uk, w_uv, w_q, w_o, num_heads):
    """Each latent matrix as a sum of outer products over the d_head features of the head."""
    dh = w_q.shape[1] // num_heads
    out_q, out_o = [], []
    for h in range(num_heads):
        acc_q = torch.zeros(w_q.shape[0], w_uk.shape[0], dtype=torch.float64)
        acc_o = torch.zeros(w_uv.shape[0], w_o.shape[1], dtype=torch.float64)
        for e in range(h * dh, (h + 1) * dh):
            acc_q += torch.outer(w_q[:, e].double(), w_uk[:, e].double())
            acc_o += torch.outer(w_uv[:, e].double(), w_o[e, :].double())
        out_q.append(acc_q)
        out_o.append(acc_o)
    return torch.stack(out_q), torch.stack(out_o)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "keys_and_values_twice",
          "multiplies by 2 for keys and values as in a standard KV cache, but MLA caches one "
          "latent from which both are recomputed: no factor 2",
          mkb_keys_and_values),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "counts only the kv_lora_rank latent per token and layer and leaves out the shared "
          "RoPE key of rope_head_dim values",
          mkb_no_rope_key),
    Entry("mla_kv_cache_bytes", "wrong", "float_from_bits",
          "counts bits and divides by 8 with /, so it returns a float instead of a plain int",
          mkb_bits_over_eight),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch_size",
          "never multiplies by batch_size: the cache of one sequence, not of the whole batch",
          mkb_ignores_batch),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ...: without parentheses "
          "around (kv_lora_rank + rope_head_dim) only the RoPE part is scaled by tokens and bytes",
          mkb_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "counts_elements_not_bytes",
          "counts the cached values but never multiplies by bytes_per_element: elements, not "
          "bytes",
          mkb_counts_elements),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mkb_math_prod),
    Entry("mla_kv_cache_bytes", "right", "layer_loop_reduce", None, mkb_layer_loop),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width w_dkv.shape[1], instead of "
          "1/sqrt(d_head)",
          mla_scale_by_latent_width),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model; when the "
          "head width differs the reshape into heads raises (or splits wrongly)",
          mla_assumes_d_model_heads),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "computes the values with w_uk (copy of the key line) instead of w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "split_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head), without "
          "the transpose, so each 'head' mixes tokens and features of several heads",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "mask_inverted",
          "masked_fill(mask, -inf) with the True = may-attend mask: it blanks out the allowed "
          "keys and keeps the future ones (the last query sees nothing: NaN)",
          mla_mask_inverted),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "applies the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "einsum_float64", None, mla_einsum_float64),
    Entry("mla_attention", "right", "sdpa_per_head_sum", None, mla_sdpa_per_head),

    Entry("absorb_mla_weights", "wrong", "q_latent_transposed",
          "builds w_uk_h @ w_q_h.T, the transpose of w_q_h @ w_uk_h.T, so w_q_latent comes out "
          "(H, d_c, d_model)",
          amw_q_latent_transposed),
    Entry("absorb_mla_weights", "wrong", "strided_heads",
          "reshapes the width axis as (d_head, H) instead of (H, d_head), so head h gets the "
          "strided columns h, h+H, ... instead of the block h*d_head:(h+1)*d_head",
          amw_strided_heads),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "divides w_q_latent by sqrt(d_head): the scale belongs to the scores, not to the "
          "absorbed weight",
          amw_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "w_uk_in_o_latent",
          "builds w_o_latent from w_uk (copied from the query line) instead of w_uv",
          amw_w_uk_in_o_latent),
    Entry("absorb_mla_weights", "wrong", "stacked_on_last_axis",
          "stacks the per-head matrices with dim=-1, giving (d_model, d_c, H) and "
          "(d_c, d_model, H) instead of a leading head axis",
          amw_stack_last_axis),
    Entry("absorb_mla_weights", "wrong", "loop_misses_last_head",
          "loops over range(num_heads - 1), so the last head's matrices stay zero",
          amw_loop_misses_last_head),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, amw_einsum),
    Entry("absorb_mla_weights", "right", "outer_product_sums", None, amw_column_sums),
]
