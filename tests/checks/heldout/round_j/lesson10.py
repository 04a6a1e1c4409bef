"""Lesson 10 (torch): mla_kv_cache_bytes, mla_attention, absorb_mla_weights; round j."""

import math

import torch

from entry import Entry

# ------------------------------------------------------------------------ mla_kv_cache_bytes


def mla_b_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
        bytes_per_element


def mla_b_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_b_batch_ignored(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mla_b_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_b_rope_once_per_layer(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    latent = num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element
    shared_rope = num_layers * rope_head_dim * bytes_per_element
    return latent + shared_rope


def mla_b_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
              bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
        bytes_per_element // 1024


def mla_b_per_token(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    per_token = sum(bytes_per_element * width for width in (kv_lora_rank, rope_head_dim))
    return per_token * num_layers * seq_len * batch_size


def mla_b_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        total += (kv_lora_rank * seq_len * batch_size + rope_head_dim * seq_len * batch_size) \
            * bytes_per_element
    return total


# ----------------------------------------------------------------------------- mla_attention


def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, width, causal, dim=-1):
    c = torch.promote_types(q.dtype, torch.float32)
    s = (q.to(c) @ k.to(c).transpose(-2, -1)) / math.sqrt(width)
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return (torch.softmax(s, dim=dim) @ v.to(c)).to(q.dtype)


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uk, num_heads)
    return _merge(_attend(q, k, v, q.shape[-1], causal)) @ w_o


def mla_scaled_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_attend(q, k, v, w_dkv.shape[1], causal)) @ w_o


def mla_queries_from_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(c @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_attend(q, k, v, q.shape[-1], causal)) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    d_head = x.shape[-1] // num_heads
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_attend(q, k, v, d_head, causal)) @ w_o


def mla_heads_averaged(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    ctx = _attend(q, k, v, q.shape[-1], causal)  # (B, H, N, d_head)
    d_head = q.shape[-1]
    per_head = torch.stack([ctx[:, h] @ w_o[h * d_head:(h + 1) * d_head]
                            for h in range(num_heads)])
    return per_head.mean(0)


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    c32 = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(c32) @ k.to(c32).transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-2))
    return _merge((w @ v.to(c32)).to(x.dtype)) @ w_o


def mla_absorbed_route(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    x64, c64 = x.double(), (x.double() @ w_dkv.double())
    out = torch.zeros(b, n, d_model, dtype=torch.float64)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q.double()[:, cols] @ w_uk.double()[:, cols].T  # (d_model, d_c)
        wo_lat = w_uv.double()[:, cols] @ w_o.double()[cols, :]  # (d_c, d_model)
        s = (x64 @ wq_lat) @ c64.transpose(1, 2) / math.sqrt(dh)
        if allowed is not None:
            s = s.masked_fill(~allowed, -math.inf)
        out += torch.softmax(s, -1) @ c64 @ wo_lat
    return out.to(x.dtype)


def mla_einsum_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    if width % num_heads != 0:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    xd = x.double()
    lat = torch.einsum("bnm,mc->bnc", xd, w_dkv.double())
    q = torch.einsum("bnm,mhd->bhnd", xd, w_q.double().view(-1, num_heads, dh))
    k = torch.einsum("bnc,chd->bhnd", lat, w_uk.double().view(-1, num_heads, dh))
    v = torch.einsum("bnc,chd->bhnd", lat, w_uv.double().view(-1, num_heads, dh))
    s = torch.einsum("bhid,bhjd->bhij", q, k) * dh ** -0.5
    if causal:
        i = torch.arange(n)
        s = s.masked_fill(i[None, :] > i[:, None], -math.inf)
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bhij,bhjd->bhid", p, v)
    out = torch.einsum("bhnd,hdm->bnm", ctx, w_o.double().view(num_heads, dh, -1))
    return out.to(x.dtype)


# ------------------------------------------------------------------------ absorb_mla_weights


def _heads_cols(w, h):
    rows, width = w.shape
    return w.reshape(rows, h, width // h).permute(1, 0, 2)  # (H, rows, d_head)


def amw_interleaved_columns(w_uk, w_uv, w_q, w_o, num_heads):
    def cols(w):
        rows, width = w.shape
        return w.reshape(rows, width // num_heads, num_heads).permute(2, 0, 1)
    wq, wk, wv = cols(w_q), cols(w_uk), cols(w_uv)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wq @ wk.transpose(-2, -1), wv @ wo


def amw_w_o_columns(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wk, wv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), \
        _heads_cols(w_uv, num_heads)
    dh = wq.shape[-1]
    wo = torch.stack([w_o[:, h * dh:(h + 1) * dh] for h in range(num_heads)])
    return wq @ wk.transpose(-2, -1), wv @ wo


def amw_o_uses_w_uk(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wk = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wq @ wk.transpose(-2, -1), wk @ wo


def amw_q_latent_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wk, wv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), \
        _heads_cols(w_uv, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wk @ wq.transpose(-2, -1), wv @ wo


def amw_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wk, wv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), \
        _heads_cols(w_uv, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return (wq @ wk.transpose(-2, -1)) / math.sqrt(wq.shape[-1]), wv @ wo


def amw_stacked_last(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        ql.append(w_q[:, sl] @ w_uk[:, sl].T)
        ol.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(ql, dim=-1), torch.stack(ol, dim=-1)


def amw_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    if width % num_heads:
        raise ValueError(f"w_uk.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    q = w_q.view(w_q.shape[0], num_heads, dh)
    k = w_uk.view(d_c, num_heads, dh)
    v = w_uv.view(d_c, num_heads, dh)
    o = w_o.view(num_heads, dh, w_o.shape[1])
    return torch.einsum("mhe,che->hmc", q, k), torch.einsum("che,hem->hcm", v, o)


def amw_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        ql.append((w_q[:, sl].double() @ w_uk[:, sl].double().T).to(w_q.dtype))
        ol.append((w_uv[:, sl].double() @ w_o[sl, :].double()).to(w_o.dtype))
    return torch.stack(ql), torch.stack(ol)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "Multiplies by 2 for keys and values as in a standard KV cache, although MLA "
          "caches one latent from which both are rebuilt.", mla_b_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_not_counted",
          "Counts only the kv_lora_rank latent and leaves out the shared RoPE key of "
          "rope_head_dim values.", mla_b_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_ignored",
          "Leaves batch_size out of the product.", mla_b_batch_ignored),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "Writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ... without "
          "parentheses around kv_lora_rank + rope_head_dim, so only the RoPE term is scaled "
          "by tokens and bytes.", mla_b_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "shared_rope_key_counted_once",
          "Reads 'shared' as shared across tokens and counts the RoPE key once per layer "
          "instead of once per token and layer.", mla_b_rope_once_per_layer),
    Entry("mla_kv_cache_bytes", "wrong", "returned_in_kib",
          "Floor-divides the result by 1024, returning KiB instead of bytes.", mla_b_kib),
    Entry("mla_kv_cache_bytes", "right", "per_token_times_tokens", None, mla_b_per_token),
    Entry("mla_kv_cache_bytes", "right", "layer_loop", None, mla_b_layer_loop),

    Entry("mla_attention", "wrong", "values_from_w_uk",
          "Up-projects the values with w_uk instead of w_uv, so values equal keys.",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "scaled_by_latent_width",
          "Scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head).",
          mla_scaled_by_latent_width),
    Entry("mla_attention", "wrong", "queries_from_latent",
          "Computes the queries from the latent c @ w_q instead of x @ w_q, which fails "
          "whenever d_c differs from d_model.", mla_queries_from_latent),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "Takes d_head = d_model // num_heads for the scale, although H * d_head need not "
          "equal d_model.", mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "heads_averaged",
          "Projects each head with its rows of w_o and then averages over the heads instead "
          "of summing them.", mla_heads_averaged),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "Normalises the scores over the query axis (dim=-2) instead of the keys.",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "absorbed_latent_route", None, mla_absorbed_route),
    Entry("mla_attention", "right", "einsum_float64", None, mla_einsum_float64),

    Entry("absorb_mla_weights", "wrong", "head_columns_interleaved",
          "Reshapes the columns as (d_head, H) instead of (H, d_head), so head h takes every "
          "H-th column instead of the block h*d_head:(h+1)*d_head.", amw_interleaved_columns),
    Entry("absorb_mla_weights", "wrong", "w_o_sliced_by_columns",
          "Slices w_o's columns h*d_head:(h+1)*d_head instead of its rows for head h.",
          amw_w_o_columns),
    Entry("absorb_mla_weights", "wrong", "output_latent_uses_w_uk",
          "Builds w_o_latent from w_uk_h @ w_o_h instead of w_uv_h @ w_o_h.", amw_o_uses_w_uk),
    Entry("absorb_mla_weights", "wrong", "query_latent_transposed",
          "Returns w_uk_h @ w_q_h.T, (H, d_c, d_model), instead of w_q_h @ w_uk_h.T.",
          amw_q_latent_transposed),
    Entry("absorb_mla_weights", "wrong", "score_scale_folded_in",
          "Divides w_q_latent by sqrt(d_head), although the contract keeps the 1/sqrt(d_head) "
          "in the score formula.", amw_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "heads_stacked_last",
          "Stacks the per-head matrices along the last axis, (d_model, d_c, H), instead of "
          "putting the head axis first.", amw_stacked_last),
    Entry("absorb_mla_weights", "right", "einsum_views", None, amw_einsum),
    Entry("absorb_mla_weights", "right", "loop_float64", None, amw_loop_float64),
]
