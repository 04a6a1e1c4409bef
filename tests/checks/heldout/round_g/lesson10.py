"""Lesson 10 (multi-head latent attention, torch)."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- mla_kv_cache_bytes
def mkv_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def mkv_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mkv_rope_twice(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    per_token = kv_lora_rank + 2 * rope_head_dim  # rope key and rope query
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mkv_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mkv_bits_over_8(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    bits = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element * 8
    return bits / 8


def mkv_fixed_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 2


def mkv_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mkv_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod((num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element))


# ----------------------------------------------------------------------------- mla_attention
def _split(t, h):
    B, N, W = t.shape
    return t.reshape(B, N, h, W // h).permute(0, 2, 1, 3)


def _merge(t):
    B, H, N, d = t.shape
    return t.permute(0, 2, 1, 3).reshape(B, N, H * d)


def _softmax(s, causal):
    s = s.float() if s.dtype in (torch.float16, torch.bfloat16) else s
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, dim=-1)


def mla_scale_dc(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    p = _softmax(q @ k.transpose(-2, -1) / math.sqrt(c.shape[-1]), causal)
    return _merge((p @ v.to(p.dtype)).to(x.dtype)) @ w_o


def mla_scale_dmodel_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    d_model = x.shape[-1]
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    p = _softmax(q @ k.transpose(-2, -1) / math.sqrt(d_model // num_heads), causal)
    return _merge((p @ v.to(p.dtype)).to(x.dtype)) @ w_o


def mla_values_from_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    latent = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q = _split(x @ w_q, num_heads)
    k = _split(latent @ w_uk, num_heads)
    v = _split(latent @ w_uk, num_heads)
    p = _softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), causal)
    return _merge((p @ v.to(p.dtype)).to(x.dtype)) @ w_o


def mla_split_no_permute(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    c = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q = (x @ w_q).reshape(B, num_heads, N, d_head)
    k = (c @ w_uk).reshape(B, num_heads, N, d_head)
    v = (c @ w_uv).reshape(B, num_heads, N, d_head)
    p = _softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), causal)
    return ((p @ v.to(p.dtype)).to(x.dtype)).reshape(B, N, num_heads * d_head) @ w_o


def mla_mask_after_softmax(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    p = _softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), False)
    if causal:
        n = p.shape[-1]
        p = p * torch.ones(n, n, dtype=p.dtype).tril()
    return _merge((p @ v.to(p.dtype)).to(x.dtype)) @ w_o


def mla_wo_transposed_split(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    c = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    p = _softmax(q @ k.transpose(-2, -1) / math.sqrt(d_head), causal)
    ctx = (p @ v.to(p.dtype)).to(x.dtype)  # (B, H, N, d_head)
    w_o_heads = w_o.reshape(d_head, num_heads, -1).permute(1, 0, 2)  # rows split strided
    return torch.einsum("bhnd,hdm->bnm", ctx, w_o_heads)


def mla_absorbed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, D = x.shape
    d_c = w_dkv.shape[1]
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    xd = x.double()
    c = xd @ w_dkv.double()  # (B, N, d_c)
    out = torch.zeros(B, N, w_o.shape[1], dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q.double()[:, cols] @ w_uk.double()[:, cols].T  # (D, d_c)
        wo_lat = w_uv.double()[:, cols] @ w_o.double()[cols, :]  # (d_c, D)
        s = (xd @ wq_lat) @ c.transpose(1, 2) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
        out += torch.softmax(s, -1) @ c @ wo_lat
    return out.to(x.dtype)


def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    if width % num_heads != 0:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    c = x @ w_dkv
    q = _split(x @ w_q, num_heads)
    k = _split(c @ w_uk, num_heads)
    v = _split(c @ w_uv, num_heads)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx) @ w_o


# ----------------------------------------------------------------------------- absorb_mla_weights
def _heads_cols(w, h):
    rows, width = w.shape
    return w.reshape(rows, h, width // h).permute(1, 0, 2)  # (H, rows, d_head)


def amw_reshape_uk(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq, wuv = _heads_cols(w_q, num_heads), _heads_cols(w_uv, num_heads)
    wuk = w_uk.reshape(num_heads, d_c, dh)  # reshaped, not split by columns
    wo = w_o.reshape(num_heads, dh, w_o.shape[1])
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def amw_uk_for_output(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wq @ wuk.transpose(-2, -1), wuk @ wo


def amw_strided_columns(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    def cols(w):
        return w.reshape(w.shape[0], dh, num_heads).permute(2, 0, 1)  # head h: columns h::H
    wo = w_o.reshape(num_heads, dh, -1)
    return cols(w_q) @ cols(w_uk).transpose(-2, -1), cols(w_uv) @ wo


def amw_wo_strided_rows(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq, wuk, wuv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), _heads_cols(w_uv, num_heads)
    wo = w_o.reshape(dh, num_heads, w_o.shape[1]).transpose(0, 1)
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def amw_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    wq, wuk, wuv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), _heads_cols(w_uv, num_heads)
    wo = w_o.reshape(num_heads, dh, w_o.shape[1])
    return (wq @ wuk.transpose(-2, -1)) / math.sqrt(dh), wuv @ wo


def amw_all_heads_mixed(w_uk, w_uv, w_q, w_o, num_heads):
    q_lat = (w_q @ w_uk.T).expand(num_heads, -1, -1)  # every head gets the full product
    o_lat = (w_uv @ w_o).expand(num_heads, -1, -1)
    return q_lat, o_lat


def amw_loop(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_uk.shape[1]
    if width % num_heads:
        raise ValueError(f"w_uk.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        ql.append(w_q[:, s] @ w_uk[:, s].T)
        ol.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(ql), torch.stack(ol)


def amw_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    if width % num_heads:
        raise ValueError(f"w_uk.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    d_model = w_q.shape[0]
    q = w_q.double().view(d_model, num_heads, dh)
    uk = w_uk.double().view(d_c, num_heads, dh)
    uv = w_uv.double().view(d_c, num_heads, dh)
    o = w_o.double().view(num_heads, dh, d_model)
    q_lat = torch.einsum("mhd,chd->hmc", q, uk)
    o_lat = torch.einsum("chd,hdm->hcm", uv, o)
    return q_lat.to(w_q.dtype), o_lat.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor-two", "Multiplies by 2 for keys and values, although MLA caches one latent from which both are recomputed.", mkv_factor_two),
    Entry("mla_kv_cache_bytes", "wrong", "no-rope-key", "Counts only the latent vector and forgets the shared RoPE key of rope_head_dim values.", mkv_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "rope-twice", "Counts the RoPE part twice per token (as if a RoPE query were cached too).", mkv_rope_twice),
    Entry("mla_kv_cache_bytes", "wrong", "ignores-batch", "Leaves batch_size out of the product.", mkv_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "bits-over-8-float", "Counts bits and divides by 8 with true division, returning a float instead of an int.", mkv_bits_over_8),
    Entry("mla_kv_cache_bytes", "wrong", "hard-coded-bf16", "Hard-codes 2 bytes per element instead of using bytes_per_element.", mkv_fixed_bf16),
    Entry("mla_kv_cache_bytes", "right", "layer-loop", None, mkv_loop),
    Entry("mla_kv_cache_bytes", "right", "math-prod", None, mkv_prod),
    Entry("mla_attention", "wrong", "scale-by-latent", "Scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head).", mla_scale_dc),
    Entry("mla_attention", "wrong", "scale-dmodel-over-heads", "Takes d_head as d_model // num_heads, which is wrong when num_heads * d_head != d_model.", mla_scale_dmodel_heads),
    Entry("mla_attention", "wrong", "values-from-w-uk", "Copy-paste slip: expands the values with w_uk instead of w_uv.", mla_values_from_uk),
    Entry("mla_attention", "wrong", "split-without-permute", "Splits heads by reshaping straight to (B, H, N, d_head), mixing positions and features.", mla_split_no_permute),
    Entry("mla_attention", "wrong", "mask-after-softmax", "Applies the causal mask by zeroing weights after the softmax, without renormalising.", mla_mask_after_softmax),
    Entry("mla_attention", "wrong", "w-o-strided-rows", "Splits w_o's rows per head as if the heads were interleaved (reshape (d_head, H, d_model)) instead of contiguous row blocks.", mla_wo_transposed_split),
    Entry("mla_attention", "right", "absorbed-per-head", None, mla_absorbed),
    Entry("mla_attention", "right", "sdpa", None, mla_sdpa),
    Entry("absorb_mla_weights", "wrong", "reshape-w-uk", "Reshapes w_uk straight to (H, d_c, d_head) instead of splitting its columns into heads, so each head's block mixes rows of the latent.", amw_reshape_uk),
    Entry("absorb_mla_weights", "wrong", "uk-for-output", "Copy-paste slip: builds w_o_latent from w_uk instead of w_uv.", amw_uk_for_output),
    Entry("absorb_mla_weights", "wrong", "strided-columns", "Takes every H-th column as a head (reshape (rows, d_head, H)) instead of contiguous column blocks.", amw_strided_columns),
    Entry("absorb_mla_weights", "wrong", "w-o-strided-rows", "Splits w_o's rows per head as interleaved rows instead of contiguous blocks of d_head rows.", amw_wo_strided_rows),
    Entry("absorb_mla_weights", "wrong", "folds-scale", "Folds 1/sqrt(d_head) into w_q_latent, although the contract keeps that scale in the scores.", amw_folds_scale),
    Entry("absorb_mla_weights", "wrong", "all-heads-mixed", "Multiplies the full matrices (w_q @ w_uk.T) without splitting into heads, so every head gets the sum over all heads.", amw_all_heads_mixed),
    Entry("absorb_mla_weights", "right", "head-loop", None, amw_loop),
    Entry("absorb_mla_weights", "right", "einsum-float64", None, amw_einsum),
]
