"""Lesson 10 (MLA, torch): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ mla_kv_cache_bytes: wrong
def mkv_latent_twice(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * (2 * kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element


def mkv_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mkv_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_token = num_layers * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_token * seq_len


def mkv_rope_twice(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    per_layer = kv_lora_rank + 2 * rope_head_dim  # rope key and its value
    return num_layers * per_layer * seq_len * batch_size * bytes_per_element


def mkv_bf16_hardcoded(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 2


# ------------------------------------------------------------------ mla_kv_cache_bytes: right
def mkv_per_token_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token = 0
    for _ in range(num_layers):
        per_token += (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_token * seq_len * batch_size


def mkv_split_terms(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    tokens = seq_len * batch_size
    latent = num_layers * tokens * kv_lora_rank * bytes_per_element
    rope = num_layers * tokens * rope_head_dim * bytes_per_element
    return latent + rope


# ------------------------------------------------------------------ mla_attention helpers
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).permute(0, 2, 1, 3)


def _merge(t):
    b, h, n, d = t.shape
    return t.permute(0, 2, 1, 3).reshape(b, n, h * d)


def _attend(q, k, v, scale, causal):
    s = (q.double() @ k.double().transpose(-2, -1)) * scale
    if causal:
        n_q, n_k = s.shape[-2], s.shape[-1]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    return (torch.softmax(s, dim=-1) @ v.double()).to(q.dtype)


# ------------------------------------------------------------------ mla_attention: wrong
def mla_causal_ignored(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    ctx = _attend(q, k, v, 1 / math.sqrt(q.shape[-1]), False)
    return _merge(ctx) @ w_o


def mla_scale_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    ctx = _attend(q, k, v, 1 / math.sqrt(w_dkv.shape[1]), causal)
    return _merge(ctx) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, -1, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(c @ w_uk), heads(c @ w_uv)
    ctx = _attend(q, k, v, 1 / math.sqrt(d_head), causal)
    return ctx.transpose(1, 2).reshape(b, n, -1) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads)
    k = _heads(c @ w_uk, num_heads)
    v = _heads(c @ w_uk, num_heads)
    ctx = _attend(q, k, v, 1 / math.sqrt(q.shape[-1]), causal)
    return _merge(ctx) @ w_o


def mla_merge_no_permute(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    ctx = _attend(q, k, v, 1 / math.sqrt(q.shape[-1]), causal)
    return ctx.reshape(b, n, -1) @ w_o


def mla_triu_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    s = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        allowed = torch.ones(n, n, dtype=torch.bool).triu()
        s = s.masked_fill(~allowed, -math.inf)
    ctx = (torch.softmax(s, -1) @ v.double()).to(x.dtype)
    return _merge(ctx) @ w_o


# ------------------------------------------------------------------ mla_attention: right
def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).float()
    k = _heads(c @ w_uk, num_heads).float()
    v = _heads(c @ w_uv, num_heads).float()
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx.to(x.dtype)) @ w_o


def mla_head_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    out = torch.zeros(b, n, d_model, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x64 @ w_q.double()[:, cols]
        k = c @ w_uk.double()[:, cols]
        v = c @ w_uv.double()[:, cols]
        s = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(dh)
        if causal:
            future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
            s = s.masked_fill(future, float("-inf"))
        out = out + torch.softmax(s, -1) @ v @ w_o.double()[cols, :]
    return out.to(x.dtype)


# ------------------------------------------------------------------ absorb_mla_weights: wrong
def _split_cols(w, h):
    rows, width = w.shape
    return w.reshape(rows, h, width // h).permute(1, 0, 2)  # (H, rows, d_head)


def amw_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads

    def strided(w):
        return w.reshape(w.shape[0], dh, num_heads).permute(2, 0, 1)

    wq_lat = strided(w_q) @ strided(w_uk).transpose(-2, -1)
    wo_lat = strided(w_uv) @ w_o.reshape(dh, num_heads, -1).permute(1, 0, 2)
    return wq_lat, wo_lat


def amw_w_o_rows_strided(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq_lat = _split_cols(w_q, num_heads) @ _split_cols(w_uk, num_heads).transpose(-2, -1)
    w_o_heads = torch.stack([w_o[h::num_heads] for h in range(num_heads)])
    wo_lat = _split_cols(w_uv, num_heads) @ w_o_heads
    return wq_lat, wo_lat


def amw_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq_lat = _split_cols(w_q, num_heads) @ _split_cols(w_uk, num_heads).transpose(-2, -1)
    wq_lat = wq_lat / math.sqrt(dh)
    wo_lat = _split_cols(w_uv, num_heads) @ w_o.reshape(num_heads, dh, -1)
    return wq_lat, wo_lat


def amw_query_uses_w_uv(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq_lat = _split_cols(w_q, num_heads) @ _split_cols(w_uv, num_heads).transpose(-2, -1)
    wo_lat = _split_cols(w_uv, num_heads) @ w_o.reshape(num_heads, dh, -1)
    return wq_lat, wo_lat


def amw_query_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq_lat = _split_cols(w_uk, num_heads) @ _split_cols(w_q, num_heads).transpose(-2, -1)
    wo_lat = _split_cols(w_uv, num_heads) @ w_o.reshape(num_heads, dh, -1)
    return wq_lat, wo_lat


def amw_heads_summed(w_uk, w_uv, w_q, w_o, num_heads):
    wq_lat = w_q @ w_uk.T
    wo_lat = w_uv @ w_o
    return (wq_lat.unsqueeze(0).expand(num_heads, -1, -1),
            wo_lat.unsqueeze(0).expand(num_heads, -1, -1))


# ------------------------------------------------------------------ absorb_mla_weights: right
def amw_loop(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq, wo = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq.append(w_q[:, cols].double() @ w_uk[:, cols].double().T)
        wo.append(w_uv[:, cols].double() @ w_o[cols, :].double())
    return torch.stack(wq).to(w_q.dtype), torch.stack(wo).to(w_q.dtype)


def amw_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq_lat = torch.einsum("mhe,che->hmc", w_q.reshape(d_model, num_heads, dh),
                          w_uk.reshape(d_c, num_heads, dh))
    wo_lat = torch.einsum("che,hem->hcm", w_uv.reshape(d_c, num_heads, dh),
                          w_o.reshape(num_heads, dh, d_model))
    return wq_lat, wo_lat


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "latent-counted-twice",
          "Counts the latent twice (once for keys, once for values), although one latent "
          "gives both.", mkv_latent_twice),
    Entry("mla_kv_cache_bytes", "wrong", "rope-key-forgotten",
          "Leaves out the shared RoPE key of rope_head_dim values per token and layer.",
          mkv_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "batch-ignored",
          "Leaves batch_size out of the product.", mkv_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "rope-counted-twice",
          "Counts the decoupled RoPE part twice, as if a RoPE value were cached next to the "
          "RoPE key.", mkv_rope_twice),
    Entry("mla_kv_cache_bytes", "wrong", "bf16-hardcoded",
          "Hard-codes 2 bytes per element instead of using bytes_per_element.",
          mkv_bf16_hardcoded),
    Entry("mla_kv_cache_bytes", "right", "per-layer-loop", None, mkv_per_token_loop),
    Entry("mla_kv_cache_bytes", "right", "latent-plus-rope", None, mkv_split_terms),

    Entry("mla_attention", "wrong", "causal-ignored",
          "Never applies the causal mask, although causal defaults to True.",
          mla_causal_ignored),
    Entry("mla_attention", "wrong", "scale-by-latent-width",
          "Scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head).",
          mla_scale_latent),
    Entry("mla_attention", "wrong", "d_head-from-d_model",
          "Computes d_head as d_model // num_heads, wrong when num_heads * d_head != "
          "d_model.", mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "values-from-w_uk",
          "Copy-paste slip: up-projects the values with w_uk instead of w_uv.",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "merge-without-permute",
          "Merges the heads with a plain reshape of (B, H, N, d_head), without moving the "
          "head axis after the sequence axis.", mla_merge_no_permute),
    Entry("mla_attention", "wrong", "triu-mask",
          "Builds the allowed-mask with triu, letting each query see the future instead of "
          "the past.", mla_triu_mask),
    Entry("mla_attention", "right", "sdpa-is-causal", None, mla_sdpa),
    Entry("mla_attention", "right", "per-head-float64-loop", None, mla_head_loop),

    Entry("absorb_mla_weights", "wrong", "strided-head-columns",
          "Splits the columns into heads with a stride (head h gets columns h, h + H, ...) "
          "instead of the contiguous block h*d_head:(h+1)*d_head.", amw_strided_heads),
    Entry("absorb_mla_weights", "wrong", "w_o-rows-strided",
          "Takes head h's rows of w_o with a stride (w_o[h::H]) instead of the block "
          "h*d_head:(h+1)*d_head.", amw_w_o_rows_strided),
    Entry("absorb_mla_weights", "wrong", "score-scale-folded",
          "Folds 1/sqrt(d_head) into w_q_latent, although the contract keeps that scale in "
          "the scores.", amw_scale_folded),
    Entry("absorb_mla_weights", "wrong", "query-absorbs-w_uv",
          "Absorbs w_uv instead of w_uk into the query weights.", amw_query_uses_w_uv),
    Entry("absorb_mla_weights", "wrong", "query-product-reversed",
          "Multiplies w_uk_h @ w_q_h.T, returning each head's query matrix transposed, "
          "(d_c, d_model).", amw_query_transposed),
    Entry("absorb_mla_weights", "wrong", "heads-not-separated",
          "Multiplies the full matrices (w_q @ w_uk.T, w_uv @ w_o), mixing all heads, and "
          "repeats that for every head.", amw_heads_summed),
    Entry("absorb_mla_weights", "right", "per-head-loop", None, amw_loop),
    Entry("absorb_mla_weights", "right", "einsum", None, amw_einsum),
]
