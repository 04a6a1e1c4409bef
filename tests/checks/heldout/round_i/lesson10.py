"""Lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights, torch."""

import math

import torch

from entry import Entry


# ---------------------------------------------------------------- mla_kv_cache_bytes
def mkv_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element


def mkv_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mkv_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    per_token = num_layers * kv_lora_rank + rope_head_dim
    return per_token * seq_len * batch_size * bytes_per_element


def mkv_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mkv_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
             bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element * 8


def mkv_bf16_hard_coded(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 2


def mkv_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mkv_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
             bytes_per_element=2):
    return math.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element])


# ---------------------------------------------------------------- mla_attention
def _work(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, *, scale_width=None,
         v_weight=None, d_head=None, merge_plain=False, strided=False, honour_causal=True):
    b, n, _ = x.shape
    h = num_heads
    wd = _work(x.dtype)
    c = x.to(wd) @ w_dkv.to(wd)
    dh = d_head if d_head is not None else w_q.shape[1] // h
    q, k = x.to(wd) @ w_q.to(wd), c @ w_uk.to(wd)
    v = c @ (w_uv if v_weight is None else v_weight).to(wd)

    def split(t):
        if strided:
            return t.reshape(b, n, -1, h).permute(0, 3, 1, 2)
        return t.reshape(b, n, -1, dh).transpose(1, 2)

    q, k, v = split(q), split(k), split(v)
    s = q @ k.transpose(-2, -1) / math.sqrt(scale_width or dh)
    if causal and honour_causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v
    merged = ctx.reshape(b, n, -1) if merge_plain else ctx.transpose(1, 2).reshape(b, n, -1)
    return (merged @ w_o.to(wd)).to(x.dtype)


def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, scale_width=w_dkv.shape[1])


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, v_weight=w_uk)


def mla_ignores_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, honour_causal=False)


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                d_head=x.shape[-1] // num_heads)


def mla_merge_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, merge_plain=True)


def mla_strided_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, strided=True)


def mla_per_head_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    out = torch.zeros(b, n, d_model, dtype=torch.float64)
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x64 @ w_q[:, cols].double()
        k = c @ w_uk[:, cols].double()
        v = c @ w_uv[:, cols].double()
        s = q @ k.transpose(1, 2) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(future, float("-inf"))
        out += torch.softmax(s, dim=-1) @ v @ w_o[cols, :].double()
    return out.to(x.dtype)


def mla_absorbed_route(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Scores straight from the latents: (x W_q^h W_uk^h^T) c^T, outputs via W_uv^h W_o^h."""
    b, n, d_model = x.shape
    h = num_heads
    dh = w_q.shape[1] // h
    d_c = w_dkv.shape[1]
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    wq = w_q.double().reshape(d_model, h, dh)
    wuk = w_uk.double().reshape(d_c, h, dh)
    wuv = w_uv.double().reshape(d_c, h, dh)
    wo = w_o.double().reshape(h, dh, d_model)
    q_lat = torch.einsum("bnm,mhe,che->bhnc", x64, wq, wuk)  # (B, H, N, d_c)
    s = torch.einsum("bhnc,bjc->bhnj", q_lat, c) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
    p = torch.softmax(s, dim=-1)
    mixed = torch.einsum("bhnj,bjc->bhnc", p, c)
    out = torch.einsum("bhnc,che,hem->bnm", mixed, wuv, wo)
    return out.to(x.dtype)


# ---------------------------------------------------------------- absorb_mla_weights
def _per_head(w_uk, w_uv, w_q, w_o, h):
    d_c, width = w_uk.shape
    dh = width // h
    return d_c, dh


def amw_wrong_order(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, dh = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    ql, ol = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        ql.append(w_uk[:, cols] @ w_q[:, cols].T)
        ol.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(ql), torch.stack(ol)


def amw_w_o_columns(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, dh = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    ql, ol = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        ql.append(w_q[:, cols] @ w_uk[:, cols].T)
        ol.append(w_uv[:, cols] @ w_o[:, cols].T)
    return torch.stack(ql), torch.stack(ol)


def amw_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, dh = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    ql, ol = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        ql.append(w_q[:, cols] @ w_uk[:, cols].T / math.sqrt(dh))
        ol.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(ql), torch.stack(ol)


def amw_uv_for_uk(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, dh = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    ql, ol = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        ql.append(w_q[:, cols] @ w_uv[:, cols].T)
        ol.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(ql), torch.stack(ol)


def amw_returns_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, dh = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    q_lat = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                         for h in range(num_heads)])
    o_lat = torch.stack([w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
                         for h in range(num_heads)])
    return o_lat, q_lat


def amw_w_o_rows_strided(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, dh = _per_head(w_uk, w_uv, w_q, w_o, num_heads)
    d_model = w_o.shape[1]
    wq = w_q.reshape(-1, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def amw_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    q_lat = torch.einsum("mhe,che->hmc", w_q.reshape(d_model, num_heads, dh),
                         w_uk.reshape(d_c, num_heads, dh))
    o_lat = torch.einsum("che,hem->hcm", w_uv.reshape(d_c, num_heads, dh),
                         w_o.reshape(num_heads, dh, d_model))
    return q_lat, o_lat


def amw_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        a, z = h * dh, (h + 1) * dh
        q_lat.append((w_q[:, a:z].double() @ w_uk[:, a:z].double().t()).to(w_q.dtype))
        o_lat.append((w_uv[:, a:z].double() @ w_o[a:z, :].double()).to(w_o.dtype))
    return torch.stack(q_lat, 0), torch.stack(o_lat, 0)


E = "mla_kv_cache_bytes"
ENTRIES = [
    Entry(E, "wrong", "factor_two_for_k_and_v", "It multiplies by 2 as for a K and V cache, "
          "but MLA caches one latent from which both are recomputed.", mkv_factor_two),
    Entry(E, "wrong", "forgets_rope_key", "It leaves out the shared RoPE key of rope_head_dim "
          "values per token and layer.", mkv_no_rope),
    Entry(E, "wrong", "rope_key_once_not_per_layer", "num_layers * kv_lora_rank + rope_head_dim "
          "adds the RoPE key once instead of once per layer (missing parentheses).",
          mkv_rope_once),
    Entry(E, "wrong", "ignores_batch", "batch_size is left out of the product.", mkv_no_batch),
    Entry(E, "wrong", "bits_not_bytes", "It multiplies by 8, giving bits instead of bytes.",
          mkv_bits),
    Entry(E, "wrong", "bf16_hard_coded", "It multiplies by a hard-coded 2 bytes instead of "
          "bytes_per_element.", mkv_bf16_hard_coded),
    Entry(E, "right", "layer_loop", None, mkv_layer_loop),
    Entry(E, "right", "math_prod", None, mkv_prod),
]

E = "mla_attention"
ENTRIES += [
    Entry(E, "wrong", "scale_by_latent_width", "The scores are divided by sqrt(d_c), the "
          "latent width, instead of sqrt(d_head).", mla_scale_by_latent),
    Entry(E, "wrong", "values_from_w_uk", "The values are expanded with w_uk (copy-paste) "
          "instead of w_uv.", mla_values_from_w_uk),
    Entry(E, "wrong", "ignores_causal", "The causal flag is never used, so the default "
          "causal=True call attends to future tokens.", mla_ignores_causal),
    Entry(E, "wrong", "d_head_from_d_model", "d_head is taken as d_model // num_heads, but here "
          "num_heads * d_head need not equal d_model.", mla_d_head_from_d_model),
    Entry(E, "wrong", "merge_without_transpose", "The heads are merged by reshaping "
          "(B, H, N, d_head) to (B, N, H*d_head) without transposing back.",
          mla_merge_without_transpose),
    Entry(E, "wrong", "strided_head_columns", "The columns are split as (..., d_head, H), so "
          "head h gets every H-th column instead of its block h*d_head:(h+1)*d_head.",
          mla_strided_heads),
    Entry(E, "right", "per_head_loop_float64", None, mla_per_head_loop),
    Entry(E, "right", "absorbed_latent_route", None, mla_absorbed_route),
]

E = "absorb_mla_weights"
ENTRIES += [
    Entry(E, "wrong", "product_order_reversed", "It computes w_uk_h @ w_q_h.T, the transpose "
          "(d_c, d_model) of w_q_h @ w_uk_h.T.", amw_wrong_order),
    Entry(E, "wrong", "w_o_columns_not_rows", "Head h's part of w_o is taken as columns "
          "(transposed) instead of rows h*d_head:(h+1)*d_head.", amw_w_o_columns),
    Entry(E, "wrong", "folds_in_scale", "It folds 1/sqrt(d_head) into w_q_latent, which the "
          "contract leaves to the score computation.", amw_folds_scale),
    Entry(E, "wrong", "w_uv_in_query_latent", "w_q_latent is built with w_uv where w_uk "
          "belongs.", amw_uv_for_uk),
    Entry(E, "wrong", "returns_swapped", "It returns (w_o_latent, w_q_latent) instead of "
          "(w_q_latent, w_o_latent).", amw_returns_swapped),
    Entry(E, "wrong", "w_o_rows_strided", "w_o is reshaped as (d_head, H, d_model), so head h "
          "gets every H-th row of w_o instead of its block of rows.", amw_w_o_rows_strided),
    Entry(E, "right", "einsum_reshaped", None, amw_einsum),
    Entry(E, "right", "loop_float64", None, amw_loop_float64),
]
