"""Lesson 10 (MLA, torch): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ mla_kv_cache_bytes
def mk_w_times_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return (2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
            * bytes_per_element)


def mk_w_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mk_w_rope_twice(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return (num_layers * (kv_lora_rank + 2 * rope_head_dim) * seq_len * batch_size
            * bytes_per_element)


def mk_w_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mk_w_no_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def mk_w_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
             bytes_per_element=2):
    return (num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
            * bytes_per_element) / 1024


def mk_w_bytes_on_rank_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    # operator precedence: only the rope part is multiplied by the element size
    return num_layers * seq_len * batch_size * (kv_lora_rank + rope_head_dim * bytes_per_element)


def mk_r_per_token(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    per_token = num_layers * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_token * seq_len * batch_size


def mk_r_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        total += batch_size * seq_len * kv_lora_rank * bytes_per_element
        total += batch_size * seq_len * rope_head_dim * bytes_per_element
    return total


# ============================================================================ mla_attention
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_av(q, k, v, width, causal, mask_left=True):
    c = torch.promote_types(q.dtype, torch.float32)
    s = (q.to(c) @ k.to(c).transpose(-2, -1)) / math.sqrt(width)
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    w = torch.softmax(s, -1)
    return (w @ v.to(c)).to(q.dtype)


def _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, *, scale=None, v_weight=None,
         split=_split, keys_from="c"):
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    d_head = width // num_heads
    c = x @ w_dkv
    q = split(x @ w_q, num_heads)
    k = split((c if keys_from == "c" else x) @ w_uk, num_heads)
    v = split(c @ (w_uv if v_weight is None else v_weight), num_heads)
    ctx = _softmax_av(q, k, v, d_head if scale is None else scale, causal)
    return _merge(ctx) @ w_o


def ml_w_scale_d_c(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, scale=w_dkv.shape[1])


def ml_w_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                scale=x.shape[-1] // num_heads)


def ml_w_causal_ignored(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, False)


def ml_w_keys_from_x(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, keys_from="x")


def ml_w_values_with_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, v_weight=w_uk)


def ml_w_interleaved_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    def split(t, heads):
        b, n, w = t.shape
        return t.reshape(b, n, w // heads, heads).permute(0, 3, 1, 2)

    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, split=split)


def ml_w_adds_residual(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    width = w_q.shape[1]
    d_head = width // num_heads
    c = x @ w_dkv
    q = _split(x @ w_q, num_heads)
    k = _split(c @ w_uk, num_heads)
    v = _split(c @ w_uv, num_heads)
    ctx = _softmax_av(q, k, v, d_head, causal)
    return _merge(ctx) @ w_o + x  # adds a residual connection inside the layer


def ml_r_absorbed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    width = w_q.shape[1]
    d_head = width // num_heads
    d_model, d_c = w_dkv.shape
    X, Wd = x.double(), w_dkv.double()
    c = X @ Wd  # (B, N, d_c)
    wq = w_q.double().reshape(d_model, num_heads, d_head)
    wuk = w_uk.double().reshape(d_c, num_heads, d_head)
    wuv = w_uv.double().reshape(d_c, num_heads, d_head)
    wo = w_o.double().reshape(num_heads, d_head, d_model)
    q_lat = torch.einsum("bnm,mhe,che->bhnc", X, wq, wuk)  # queries in latent space
    s = torch.einsum("bhnc,bjc->bhnj", q_lat, c) / math.sqrt(d_head)
    if causal:
        n = x.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    w = s.softmax(-1)
    mixed = torch.einsum("bhnj,bjc->bhnc", w, c)
    out = torch.einsum("bhnc,che,hem->bnm", mixed, wuv, wo)
    return out.to(x.dtype)


def ml_r_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    cdt = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    q = _split(x @ w_q, num_heads).to(cdt)
    k = _split(c @ w_uk, num_heads).to(cdt)
    v = _split(c @ w_uv, num_heads).to(cdt)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx.to(x.dtype)) @ w_o


def ml_r_head_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    out = 0
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        ctx = _softmax_av(x @ w_q[:, cols], c @ w_uk[:, cols], c @ w_uv[:, cols], dh, causal)
        out = out + ctx @ w_o[cols]
    return out


# ============================================================================ absorb_mla_weights
def _heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    q = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    uk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    uv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    o = w_o.reshape(num_heads, dh, d_model)
    return q, uk, uv, o, dh


def ab_w_no_transpose(w_uk, w_uv, w_q, w_o, num_heads):
    q, uk, uv, o, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return q @ uk, uv @ o


def ab_w_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    q, uk, uv, o, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return q @ uk.transpose(-2, -1) / math.sqrt(dh), uv @ o


def ab_w_order_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    q, uk, uv, o, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return uv @ o, q @ uk.transpose(-2, -1)


def ab_w_interleaved(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h, width, num_heads)  # every H-th column
        qs.append(w_q[:, cols] @ w_uk[:, cols].T)
        os_.append(w_uv[:, cols] @ w_o[cols])
    return torch.stack(qs), torch.stack(os_)


def ab_w_w_o_columns(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qs.append(w_q[:, cols] @ w_uk[:, cols].T)
        os_.append(w_uv[:, cols] @ w_o[:, cols].T)  # w_o's columns instead of its rows
    return torch.stack(qs), torch.stack(os_)


def ab_w_output_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    q, uk, uv, o, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return q @ uk.transpose(-2, -1), o.transpose(-2, -1) @ uv.transpose(-2, -1)


def ab_w_summed_heads(w_uk, w_uv, w_q, w_o, num_heads):
    q, uk, uv, o, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return w_q @ w_uk.T, w_uv @ w_o  # all heads folded at once


def ab_r_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.reshape(d_model, num_heads, dh)
    wuk = w_uk.reshape(d_c, num_heads, dh)
    wuv = w_uv.reshape(d_c, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return (torch.einsum("mhe,che->hmc", wq, wuk), torch.einsum("che,hem->hcm", wuv, wo))


def ab_r_loop(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        q_lat.append(torch.mm(w_q[:, s].double(), w_uk[:, s].double().t()))
        o_lat.append(torch.mm(w_uv[:, s].double(), w_o[s, :].double()))
    return torch.stack(q_lat).to(w_q.dtype), torch.stack(o_lat).to(w_o.dtype)


E = Entry
ENTRIES = [
    E("mla_kv_cache_bytes", "wrong", "k_and_v_factor",
      "Multiplies by 2 for K and V as in a standard cache, though MLA caches one latent.",
      mk_w_times_two),
    E("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
      "Counts only the latent, leaving out the shared RoPE key.", mk_w_no_rope),
    E("mla_kv_cache_bytes", "wrong", "rope_key_and_value",
      "Counts the RoPE part twice, as if a RoPE value were cached too.", mk_w_rope_twice),
    E("mla_kv_cache_bytes", "wrong", "ignores_batch",
      "Leaves out the batch size.", mk_w_no_batch),
    E("mla_kv_cache_bytes", "wrong", "ignores_layers",
      "Counts one layer only.", mk_w_no_layers),
    E("mla_kv_cache_bytes", "wrong", "returns_kib",
      "Divides by 1024 and returns KiB as a float.", mk_w_kib),
    E("mla_kv_cache_bytes", "wrong", "precedence_bytes_on_rope",
      "Writes rank + rope * bytes without parentheses, so only the RoPE part is in bytes.",
      mk_w_bytes_on_rank_only),
    E("mla_kv_cache_bytes", "right", "per_token_times_tokens", None, mk_r_per_token),
    E("mla_kv_cache_bytes", "right", "layer_loop", None, mk_r_layer_loop),
    E("mla_attention", "wrong", "scale_by_latent_width",
      "Scales scores by 1/sqrt(d_c) instead of 1/sqrt(d_head).", ml_w_scale_d_c),
    E("mla_attention", "wrong", "d_head_from_d_model",
      "Takes d_head = d_model // num_heads for the scale, wrong when H * d_head != d_model.",
      ml_w_d_head_from_d_model),
    E("mla_attention", "wrong", "causal_ignored",
      "Never applies the causal mask (the default is causal=True).", ml_w_causal_ignored),
    E("mla_attention", "wrong", "keys_from_x",
      "Up-projects x instead of the latent c to get the keys.", ml_w_keys_from_x),
    E("mla_attention", "wrong", "values_with_w_uk",
      "Computes the values with w_uk (a copy-paste slip) instead of w_uv.",
      ml_w_values_with_w_uk),
    E("mla_attention", "wrong", "heads_interleaved",
      "Splits heads with a (w/H, H) reshape, so head h gets every H-th column.",
      ml_w_interleaved_heads),
    E("mla_attention", "wrong", "adds_residual",
      "Adds x back to the output (a residual connection that belongs outside the layer).",
      ml_w_adds_residual),
    E("mla_attention", "right", "absorbed_float64_einsum", None, ml_r_absorbed),
    E("mla_attention", "right", "sdpa", None, ml_r_sdpa),
    E("mla_attention", "right", "per_head_loop", None, ml_r_head_loop),
    E("absorb_mla_weights", "wrong", "w_uk_not_transposed",
      "Multiplies w_q_h @ w_uk_h without transposing w_uk_h.", ab_w_no_transpose),
    E("absorb_mla_weights", "wrong", "scale_folded_in",
      "Folds 1/sqrt(d_head) into w_q_latent, though the contract keeps it in the scores.",
      ab_w_scale_folded),
    E("absorb_mla_weights", "wrong", "outputs_swapped",
      "Returns (w_o_latent, w_q_latent) in the wrong order.", ab_w_order_swapped),
    E("absorb_mla_weights", "wrong", "interleaved_head_columns",
      "Takes head h's columns as every H-th column instead of a contiguous block.",
      ab_w_interleaved),
    E("absorb_mla_weights", "wrong", "w_o_columns",
      "Slices w_o's columns (and transposes) instead of its rows for head h.",
      ab_w_w_o_columns),
    E("absorb_mla_weights", "wrong", "w_o_latent_transposed",
      "Computes w_o_h^T @ w_uv_h^T, the transpose of w_o_latent[h].", ab_w_output_transposed),
    E("absorb_mla_weights", "wrong", "heads_summed",
      "Folds all heads at once (w_q @ w_uk^T), losing the head axis.", ab_w_summed_heads),
    E("absorb_mla_weights", "right", "einsum", None, ab_r_einsum),
    E("absorb_mla_weights", "right", "loop_mm_float64", None, ab_r_loop),
]
