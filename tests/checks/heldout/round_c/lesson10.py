"""Round c, lesson 10: mla_kv_cache_bytes, mla_attention, absorb_mla_weights (torch)."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ mla_kv_cache_bytes
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return (2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
            * bytes_per_element)


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_ignores_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mla_bytes_hardcoded(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 2


def mla_bytes_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return (num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
            * bytes_per_element) / 1024


def mla_bytes_rope_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return (num_layers * (kv_lora_rank + 2 * rope_head_dim) * seq_len * batch_size
            * bytes_per_element)


def mla_bytes_per_token(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = sum([kv_lora_rank, rope_head_dim]) * bytes_per_element * num_layers
    return per_token * seq_len * batch_size


def mla_bytes_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        total += kv_lora_rank * seq_len * batch_size * bytes_per_element  # latent c
        total += rope_head_dim * seq_len * batch_size * bytes_per_element  # shared RoPE key
    return total


# ------------------------------------------------------------------ mla_attention
def _split(t, heads, interleaved=False):
    b, n, w = t.shape
    if interleaved:
        return t.reshape(b, n, w // heads, heads).permute(0, 3, 1, 2)
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True, *, scale_width=None,
         v_weight=None, d_head=None, q_from_latent=False, interleaved=False):
    c = x @ w_dkv
    q = _split((c if q_from_latent else x) @ w_q, num_heads, interleaved)
    k = _split(c @ w_uk, num_heads, interleaved)
    v = _split(c @ (w_uv if v_weight is None else v_weight), num_heads, interleaved)
    dh = q.shape[-1] if d_head is None else d_head
    comp = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(comp) @ k.to(comp).transpose(-2, -1)) / math.sqrt(scale_width or dh)
    n = x.shape[1]
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v.to(comp)).to(x.dtype)
    if interleaved:
        b, h, nn_, dd = ctx.shape
        merged = ctx.permute(0, 2, 3, 1).reshape(b, nn_, h * dd)
    else:
        merged = _merge(ctx)
    return merged @ w_o


def mla_scale_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, scale_width=w_dkv.shape[1])


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, v_weight=w_uk)


def mla_ignores_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, False)


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    d_head = x.shape[-1] // num_heads
    q = (x @ w_q).reshape(x.shape[0], x.shape[1], num_heads, d_head)
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, d_head=q.shape[-1])


def mla_queries_from_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, q_from_latent=True)


def mla_interleaved_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, interleaved=True)


def mla_absorbed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    d_c = w_dkv.shape[1]
    f = torch.float64
    c = (x @ w_dkv).to(f)  # (B, N, d_c)
    wq = w_q.to(f).reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.to(f).reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.to(f).reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.to(f).reshape(num_heads, dh, d_model)
    q_lat = x.to(f).unsqueeze(1) @ (wq @ wuk.transpose(-2, -1))  # (B, H, N, d_c)
    s = q_lat @ c.unsqueeze(1).transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    out = ((w @ c.unsqueeze(1)) @ (wuv @ wo)).sum(dim=1)
    return out.to(x.dtype)


def mla_sdpa_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    dh = w_q.shape[1] // num_heads
    comp = torch.promote_types(x.dtype, torch.float32)
    c = x @ w_dkv
    out = None
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = (x @ w_q[:, cols]).to(comp)
        k = (c @ w_uk[:, cols]).to(comp)
        v = (c @ w_uv[:, cols]).to(comp)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal).to(x.dtype)
        part = ctx @ w_o[cols, :]
        out = part if out is None else out + part
    return out


# ------------------------------------------------------------------ absorb_mla_weights
def _heads(w, num_heads, axis, interleaved=False):
    width = w.shape[axis]
    dh = width // num_heads
    if interleaved:
        return [w.index_select(axis, torch.arange(h, width, num_heads)) for h in range(num_heads)]
    return [w.narrow(axis, h * dh, dh) for h in range(num_heads)]


def absorb_no_transpose(w_uk, w_uv, w_q, w_o, num_heads):
    q = _heads(w_q, num_heads, 1)
    uk = _heads(w_uk, num_heads, 1)
    uv = _heads(w_uv, num_heads, 1)
    o = _heads(w_o, num_heads, 0)
    return (torch.stack([qh @ ukh for qh, ukh in zip(q, uk)]),
            torch.stack([a @ b for a, b in zip(uv, o)]))


def absorb_swapped_order(w_uk, w_uv, w_q, w_o, num_heads):
    q = _heads(w_q, num_heads, 1)
    uk = _heads(w_uk, num_heads, 1)
    uv = _heads(w_uv, num_heads, 1)
    o = _heads(w_o, num_heads, 0)
    return (torch.stack([ukh @ qh.T for qh, ukh in zip(q, uk)]),
            torch.stack([a @ b for a, b in zip(uv, o)]))


def absorb_interleaved_heads(w_uk, w_uv, w_q, w_o, num_heads):
    q = _heads(w_q, num_heads, 1, True)
    uk = _heads(w_uk, num_heads, 1, True)
    uv = _heads(w_uv, num_heads, 1, True)
    o = _heads(w_o, num_heads, 0, True)
    return (torch.stack([qh @ ukh.T for qh, ukh in zip(q, uk)]),
            torch.stack([a @ b for a, b in zip(uv, o)]))


def absorb_w_o_columns(w_uk, w_uv, w_q, w_o, num_heads):
    q = _heads(w_q, num_heads, 1)
    uk = _heads(w_uk, num_heads, 1)
    uv = _heads(w_uv, num_heads, 1)
    dh = w_q.shape[1] // num_heads
    o = [w_o[:, h * dh:(h + 1) * dh] for h in range(num_heads)]
    return (torch.stack([qh @ ukh.T for qh, ukh in zip(q, uk)]),
            torch.stack([a @ b for a, b in zip(uv, o)]))


def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    q = _heads(w_q, num_heads, 1)
    uk = _heads(w_uk, num_heads, 1)
    uv = _heads(w_uv, num_heads, 1)
    o = _heads(w_o, num_heads, 0)
    dh = w_q.shape[1] // num_heads
    return (torch.stack([qh @ ukh.T for qh, ukh in zip(q, uk)]) / math.sqrt(dh),
            torch.stack([a @ b for a, b in zip(uv, o)]))


def absorb_all_heads_at_once(w_uk, w_uv, w_q, w_o, num_heads):
    return w_q @ w_uk.T, w_uv @ w_o


def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh)
    wuk = w_uk.reshape(d_c, num_heads, dh)
    wuv = w_uv.reshape(d_c, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return (torch.einsum("mhe,che->hmc", wq, wuk), torch.einsum("che,hem->hcm", wuv, wo))


def absorb_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, cols].double() @ w_uk[:, cols].double().T)
        o_lat.append(w_uv[:, cols].double() @ w_o[cols, :].double())
    return torch.stack(q_lat).to(w_q.dtype), torch.stack(o_lat).to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v", "Multiplies by 2 for keys and values as in a standard KV cache, although MLA caches one shared latent.", mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key", "Counts only the latent vector and forgets the shared RoPE key of rope_head_dim values.", mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch", "Ignores batch_size.", mla_bytes_ignores_batch),
    Entry("mla_kv_cache_bytes", "wrong", "hardcoded_bf16", "Hard-codes 2 bytes per element instead of using bytes_per_element.", mla_bytes_hardcoded),
    Entry("mla_kv_cache_bytes", "wrong", "kibibytes", "Divides by 1024, returning a float in KiB instead of an int number of bytes.", mla_bytes_kib),
    Entry("mla_kv_cache_bytes", "wrong", "rope_counted_twice", "Counts the RoPE part twice (a RoPE key and a RoPE value), although only the key is cached.", mla_bytes_rope_k_and_v),
    Entry("mla_kv_cache_bytes", "right", "per_token_then_scale", None, mla_bytes_per_token),
    Entry("mla_kv_cache_bytes", "right", "layer_loop", None, mla_bytes_loop),
    Entry("mla_attention", "wrong", "scale_by_latent_width", "Scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head).", mla_scale_latent),
    Entry("mla_attention", "wrong", "values_from_w_uk", "Up-projects the values with w_uk instead of w_uv.", mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "ignores_causal", "Never applies the causal mask, although causal defaults to True.", mla_ignores_causal),
    Entry("mla_attention", "wrong", "d_head_from_d_model", "Takes d_head = d_model // num_heads, which is wrong when num_heads * d_head != d_model.", mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "queries_from_latent", "Projects the queries from the latent c instead of from x.", mla_queries_from_latent),
    Entry("mla_attention", "wrong", "interleaved_heads", "Splits the head width as (d_head, H), so head h takes every H-th column instead of the contiguous block h*d_head:(h+1)*d_head.", mla_interleaved_heads),
    Entry("mla_attention", "right", "absorbed_form", None, mla_absorbed),
    Entry("mla_attention", "right", "sdpa_per_head", None, mla_sdpa_per_head),
    Entry("absorb_mla_weights", "wrong", "no_transpose", "Multiplies w_q_h @ w_uk_h without transposing w_uk_h.", absorb_no_transpose),
    Entry("absorb_mla_weights", "wrong", "swapped_order", "Computes w_uk_h @ w_q_h.T, the transpose of the wanted (d_model, d_c) matrix.", absorb_swapped_order),
    Entry("absorb_mla_weights", "wrong", "interleaved_heads", "Takes every H-th column for head h instead of the contiguous block h*d_head:(h+1)*d_head.", absorb_interleaved_heads),
    Entry("absorb_mla_weights", "wrong", "w_o_columns", "Slices head h's block from the columns of w_o instead of its rows.", absorb_w_o_columns),
    Entry("absorb_mla_weights", "wrong", "folds_in_scale", "Folds 1/sqrt(d_head) into w_q_latent, although the contract keeps the scaling in the score formula.", absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "not_per_head", "Multiplies the full matrices (w_q @ w_uk.T, w_uv @ w_o), summing over heads, instead of one product per head.", absorb_all_heads_at_once),
    Entry("absorb_mla_weights", "right", "einsum", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "loop_float64", None, absorb_loop_float64),
]
