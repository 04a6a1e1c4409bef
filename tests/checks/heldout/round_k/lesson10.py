"""Round k, lesson 10 (torch): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


# ============================================================================ mla_kv_cache_bytes
@add("mla_kv_cache_bytes", "wrong", "latent_counted_twice",
     "It doubles the latent as if keys and values were cached separately, but MLA caches one "
     "latent from which both are recomputed.")
def mla_bytes_double(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    per_token = 2 * kv_lora_rank + rope_head_dim
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


@add("mla_kv_cache_bytes", "wrong", "missing_parentheses",
     "Without parentheses around (kv_lora_rank + rope_head_dim), only the RoPE part is "
     "multiplied by seq_len, batch and bytes, and the latent only by the layers.")
def mla_bytes_parens(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


@add("mla_kv_cache_bytes", "wrong", "ignores_batch",
     "It leaves out batch_size, counting the cache of a single sequence.")
def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


@add("mla_kv_cache_bytes", "wrong", "hardcoded_bf16",
     "It hard-codes 2 bytes per element (bf16) instead of using bytes_per_element.")
def mla_bytes_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    values = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return values * 2


@add("mla_kv_cache_bytes", "wrong", "layer_loop_starts_at_one",
     "The loop over layers runs range(1, num_layers), so it counts one layer too few (and a "
     "one-layer model gets 0 bytes).")
def mla_bytes_loop_off(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    total = 0
    for _ in range(1, num_layers):
        total += (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element
    return total


@add("mla_kv_cache_bytes", "wrong", "rope_key_once_per_model",
     "Because the RoPE key is 'shared', it adds it once for the whole model instead of once per "
     "layer (it is shared across heads, not across layers).")
def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = num_layers * kv_lora_rank + rope_head_dim
    return per_token * seq_len * batch_size * bytes_per_element


@add("mla_kv_cache_bytes", "right", "fraction_per_token")
def mla_bytes_fraction(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token = Fraction(num_layers * (kv_lora_rank + rope_head_dim) * bytes_per_element)
    return int(per_token * seq_len * batch_size)


@add("mla_kv_cache_bytes", "right", "sum_over_layers")
def mla_bytes_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


# ============================================================================ mla_attention
def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _weights(s, causal, scale):
    s = s.float() * scale if s.dtype in (torch.float16, torch.bfloat16) else s * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, dim=-1)


@add("mla_attention", "wrong", "d_head_from_d_model",
     "It takes d_head as d_model // num_heads for the scale, which is wrong when "
     "num_heads * d_head != d_model (d_head is w_q.shape[1] // num_heads).")
def mla_dhead_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    d_head = x.shape[-1] // num_heads
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    w = _weights(q @ k.transpose(-2, -1), causal, 1 / math.sqrt(d_head))
    return _merge((w @ v.to(w.dtype)).to(x.dtype)) @ w_o


@add("mla_attention", "wrong", "values_from_w_uk",
     "The values are up-projected with w_uk (a copy-paste of the key line) instead of w_uv.")
def mla_values_wuk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q = _split(x @ w_q, num_heads)
    k = _split(c @ w_uk, num_heads)
    v = _split(c @ w_uk, num_heads)
    w = _weights(q @ k.transpose(-2, -1), causal, q.shape[-1] ** -0.5)
    return _merge((w @ v.to(w.dtype)).to(x.dtype)) @ w_o


@add("mla_attention", "wrong", "merge_head_axis_last",
     "It merges the heads as (B, N, d_head, H) before flattening, so the features are "
     "interleaved and no longer line up with head h's rows of w_o.")
def mla_merge_interleaved(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    w = _weights(q @ k.transpose(-2, -1), causal, q.shape[-1] ** -0.5)
    ctx = (w @ v.to(w.dtype)).to(x.dtype)
    b, h, n, d = ctx.shape
    return ctx.permute(0, 2, 3, 1).reshape(b, n, h * d) @ w_o


@add("mla_attention", "wrong", "masked_fill_with_allowed_mask",
     "It passes the allowed-positions mask (tril, True = may attend) straight to masked_fill, "
     "which fills where the mask is True, so it blocks the past and keeps the future (the last "
     "query, which has no future key, comes out NaN).")
def mla_fill_allowed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    s = (q @ k.transpose(-2, -1)).double() / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
        s = s.masked_fill(allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return _merge((w @ v.double()).to(x.dtype)) @ w_o


@add("mla_attention", "wrong", "causal_flag_inverted",
     "The mask is applied under `if not causal`, so the default causal call runs unmasked and "
     "causal=False runs masked.")
def mla_flag_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    w = _weights(q @ k.transpose(-2, -1), not causal, q.shape[-1] ** -0.5)
    return _merge((w @ v.to(w.dtype)).to(x.dtype)) @ w_o


@add("mla_attention", "wrong", "softmax_over_heads",
     "It applies the softmax over dim=1, the head axis of (B, H, N, N), instead of over the "
     "keys.")
def mla_softmax_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, dim=1).nan_to_num(0.0)
    return _merge((w @ v.float()).to(x.dtype)) @ w_o


@add("mla_attention", "right", "sdpa_float32")
def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    xc = x.to(compute)
    latent = xc @ w_dkv.to(compute)
    q = (xc @ w_q.to(compute)).unflatten(-1, (num_heads, -1)).transpose(1, 2)
    k = (latent @ w_uk.to(compute)).unflatten(-1, (num_heads, -1)).transpose(1, 2)
    v = (latent @ w_uv.to(compute)).unflatten(-1, (num_heads, -1)).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (ctx.transpose(1, 2).flatten(2) @ w_o.to(compute)).to(x.dtype)


@add("mla_attention", "right", "absorbed_per_head_float64")
def mla_absorbed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    out = torch.zeros(b, n, d_model, dtype=torch.float64)
    keep = torch.ones(n, n, dtype=torch.bool)
    if causal:
        keep = keep.tril()
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat = x64 @ (w_q.double()[:, cols] @ w_uk.double()[:, cols].T)
        s = torch.einsum("bic,bjc->bij", q_lat, c) / math.sqrt(dh)
        p = torch.softmax(s.masked_fill(~keep, -math.inf), dim=-1)
        out += torch.einsum("bij,bjc->bic", p, c) @ (w_uv.double()[:, cols] @ w_o.double()[cols])
    return out.to(x.dtype)


# ============================================================================ absorb_mla_weights
def _heads_cols(w, h, num_heads):
    d_head = w.shape[1] // num_heads
    return w[:, h * d_head:(h + 1) * d_head]


@add("absorb_mla_weights", "wrong", "interleaved_head_columns",
     "It reshapes the columns as (d_head, num_heads), so head h gets every num_heads-th column "
     "instead of the block h*d_head:(h+1)*d_head.")
def absorb_interleaved(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)
    wuk = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wuv = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return wq @ wuk.transpose(1, 2), wuv @ wo


@add("absorb_mla_weights", "wrong", "query_product_reversed",
     "It computes w_uk_h @ w_q_h.T, the transpose of w_q_h @ w_uk_h.T, so w_q_latent is "
     "(H, d_c, d_model) instead of (H, d_model, d_c).")
def absorb_reversed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        q_lat.append(_heads_cols(w_uk, h, num_heads) @ _heads_cols(w_q, h, num_heads).T)
        o_lat.append(_heads_cols(w_uv, h, num_heads) @ w_o[h * dh:(h + 1) * dh])
    return torch.stack(q_lat), torch.stack(o_lat)


@add("absorb_mla_weights", "wrong", "query_paired_with_w_uv",
     "It folds w_uv into the query side (w_q_h @ w_uv_h.T) instead of w_uk, mixing up the key "
     "and value up-projections.")
def absorb_wrong_partner(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_h = w_q.view(d_model, num_heads, dh)
    uv_h = w_uv.view(d_c, num_heads, dh)
    o_h = w_o.view(num_heads, dh, d_model)
    w_q_latent = torch.einsum("mhe,che->hmc", q_h, uv_h)
    w_o_latent = torch.einsum("che,hem->hcm", uv_h, o_h)
    return w_q_latent, w_o_latent


@add("absorb_mla_weights", "wrong", "stacked_on_dim1",
     "It stacks the per-head matrices on dim 1, returning (d_model, H, d_c) and (d_c, H, "
     "d_model) instead of putting the head axis first.")
def absorb_stack_dim1(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat = [_heads_cols(w_q, h, num_heads) @ _heads_cols(w_uk, h, num_heads).T
             for h in range(num_heads)]
    o_lat = [_heads_cols(w_uv, h, num_heads) @ w_o[h * dh:(h + 1) * dh]
             for h in range(num_heads)]
    return torch.stack(q_lat, dim=1), torch.stack(o_lat, dim=1)


@add("absorb_mla_weights", "wrong", "scale_folded_in",
     "It folds the 1/sqrt(d_head) softmax scale into w_q_latent, but the contract keeps the "
     "scale in the score, so the absorbed weights come out too small.")
def absorb_scaled(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return (wq @ wuk.transpose(-2, -1)) / math.sqrt(dh), wuv @ wo


@add("absorb_mla_weights", "wrong", "heads_summed",
     "It sums the per-head products into one (d_model, d_c) and one (d_c, d_model) matrix, "
     "but the softmax is per head, so the head axis must be kept.")
def absorb_summed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat = sum(_heads_cols(w_q, h, num_heads) @ _heads_cols(w_uk, h, num_heads).T
                for h in range(num_heads))
    o_lat = sum(_heads_cols(w_uv, h, num_heads) @ w_o[h * dh:(h + 1) * dh]
                for h in range(num_heads))
    return q_lat, o_lat


@add("absorb_mla_weights", "right", "loop_float64")
def absorb_loop(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_uk.shape[1]
    if width % num_heads:
        raise ValueError(f"w_uk.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, cols].double() @ w_uk[:, cols].double().T)
        o_lat.append(w_uv[:, cols].double() @ w_o[cols, :].double())
    return torch.stack(q_lat).to(w_q.dtype), torch.stack(o_lat).to(w_o.dtype)


@add("absorb_mla_weights", "right", "einsum_one_shot")
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    if width % num_heads:
        raise ValueError(f"w_uk.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    q_h = w_q.unflatten(1, (num_heads, dh))
    uk_h = w_uk.unflatten(1, (num_heads, dh))
    uv_h = w_uv.unflatten(1, (num_heads, dh))
    o_h = w_o.unflatten(0, (num_heads, dh))
    return torch.einsum("mhe,che->hmc", q_h, uk_h), torch.einsum("che,hem->hcm", uv_h, o_h)
