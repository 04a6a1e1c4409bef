"""Lesson 10 (torch): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ---------------------------------------------------------------- mla_kv_cache_bytes, wrong
def mla_bytes_kv_factor(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element * 8


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mla_bytes_megabytes(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element / 1e6


def mla_bytes_fixed_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * 2


# ---------------------------------------------------------------- mla_kv_cache_bytes, right
def mla_bytes_per_token(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = sum((kv_lora_rank + rope_head_dim) * bytes_per_element
                    for _ in range(num_layers))
    return per_token * seq_len * batch_size


def mla_bytes_numpy(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    dims = np.array([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                     bytes_per_element], dtype=object)
    return int(np.prod(dims))


# ---------------------------------------------------------------- mla_attention
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, allowed, scale, mask_after=False):
    c = torch.promote_types(q.dtype, torch.float32)
    s = (q.to(c) @ k.to(c).transpose(-2, -1)) * scale
    if allowed is not None and not mask_after:
        s = s.masked_fill(~allowed, float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    if allowed is not None and mask_after:
        w = w * allowed
    return (w @ v.to(c)).to(q.dtype)


def _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, *, scale_width=None,
         v_weight=None, diag=0, d_head=None, w_o_t=False, mask_after=False):
    n = x.shape[1]
    d_head = w_q.shape[1] // num_heads if d_head is None else d_head
    heads = w_q.shape[1] // d_head
    c = x @ w_dkv
    q = _split(x @ w_q, heads)
    k = _split(c @ w_uk, heads)
    v = _split(c @ (w_uv if v_weight is None else v_weight), heads)
    allowed = torch.ones(n, n, dtype=torch.bool).tril(diag) if causal else None
    scale = 1.0 / math.sqrt(d_head if scale_width is None else scale_width)
    ctx = _merge(_attend(q, k, v, allowed, scale, mask_after))
    return ctx @ (w_o.T if w_o_t else w_o)


def mla_scale_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, scale_width=w_dkv.shape[1])


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, v_weight=w_uk)


def mla_strict_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, diag=-1)


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal,
                d_head=x.shape[-1] // num_heads)


def mla_w_o_transposed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, w_o_t=True)


def mla_mask_after_softmax(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, mask_after=True)


# ---------------------------------------------------------------- mla_attention, right
def mla_head_loop64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    out = torch.zeros((b, n, d_model), dtype=torch.float64)
    keep = torch.ones(n, n, dtype=torch.bool).tril()
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x64 @ w_q.double()[:, cols]
        k = c @ w_uk.double()[:, cols]
        v = c @ w_uv.double()[:, cols]
        s = torch.einsum("bie,bje->bij", q, k) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(~keep, -math.inf)
        out += torch.softmax(s, dim=-1) @ v @ w_o.double()[cols, :]
    return out.to(x.dtype)


def mla_absorbed_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    # attention computed in latent space: keys are c, queries x @ w_q_h @ w_uk_h^T
    b, n, d_model = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(f)
    c = xf @ w_dkv.to(f)  # (B, N, d_c)
    wq = w_q.to(f).reshape(d_model, num_heads, dh).permute(1, 0, 2)  # (H, d_model, dh)
    wuk = w_uk.to(f).reshape(-1, num_heads, dh).permute(1, 0, 2)  # (H, d_c, dh)
    wuv = w_uv.to(f).reshape(-1, num_heads, dh).permute(1, 0, 2)
    wo = w_o.to(f).reshape(num_heads, dh, d_model)
    q_lat = xf[:, None] @ (wq @ wuk.transpose(1, 2))  # (B, H, N, d_c)
    c_h = c[:, None].expand(b, num_heads, n, c.shape[-1])
    mixed = F.scaled_dot_product_attention(q_lat, c_h, c_h, is_causal=causal,
                                           scale=1.0 / math.sqrt(dh))  # (B, H, N, d_c)
    out = (mixed @ (wuv @ wo)).sum(dim=1)
    return out.to(x.dtype)


# ---------------------------------------------------------------- absorb_mla_weights
def _heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq, wuk, wuv, wo, dh


def absorb_q_latent_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv, wo, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return wuk @ wq.transpose(1, 2), wuv @ wo


def absorb_reshape_without_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.reshape(num_heads, d_model, dh)
    wuk = w_uk.reshape(num_heads, d_c, dh)
    wuv = w_uv.reshape(num_heads, d_c, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_w_o_rows_interleaved(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv, _, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    wo = w_o.reshape(dh, num_heads, w_o.shape[1]).permute(1, 0, 2)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_w_uv_for_queries(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv, wo, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return wq @ wuv.transpose(1, 2), wuv @ wo


def absorb_scale_folded(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv, wo, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    return wq @ wuk.transpose(1, 2) / math.sqrt(dh), wuv @ wo


def absorb_lists(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv, wo, dh = _heads(w_uk, w_uv, w_q, w_o, num_heads)
    q_lat = [wq[h] @ wuk[h].T for h in range(num_heads)]
    o_lat = [wuv[h] @ wo[h] for h in range(num_heads)]
    return q_lat, o_lat


# ---------------------------------------------------------------- absorb_mla_weights, right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    q3 = w_q.reshape(d_model, num_heads, dh)
    k3 = w_uk.reshape(d_c, num_heads, dh)
    v3 = w_uv.reshape(d_c, num_heads, dh)
    o3 = w_o.reshape(num_heads, dh, d_model)
    return torch.einsum("mhe,che->hmc", q3, k3), torch.einsum("che,hem->hcm", v3, o3)


def absorb_slice_loop64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, cols].double() @ w_uk[:, cols].double().T)
        o_lat.append(w_uv[:, cols].double() @ w_o[cols, :].double())
    return torch.stack(q_lat).to(w_q.dtype), torch.stack(o_lat).to(w_o.dtype)


E = Entry
ENTRIES = [
    E("mla_kv_cache_bytes", "wrong", "separate_k_and_v",
      "Multiplies by 2 for keys and values as in a GQA cache, though the one latent yields "
      "both.", mla_bytes_kv_factor),
    E("mla_kv_cache_bytes", "wrong", "rope_key_forgotten",
      "Counts only the latent (kv_lora_rank) and forgets the shared RoPE key of "
      "rope_head_dim values.", mla_bytes_no_rope),
    E("mla_kv_cache_bytes", "wrong", "bits_not_bytes",
      "Multiplies by 8, giving bits instead of bytes.", mla_bytes_bits),
    E("mla_kv_cache_bytes", "wrong", "batch_size_dropped",
      "Leaves batch_size out of the product.", mla_bytes_no_batch),
    E("mla_kv_cache_bytes", "wrong", "returns_megabytes",
      "Divides by 1e6 and returns megabytes (a float) instead of bytes.",
      mla_bytes_megabytes),
    E("mla_kv_cache_bytes", "wrong", "bytes_per_element_hardcoded",
      "Hard-codes 2 bytes per element (bf16) instead of using bytes_per_element.",
      mla_bytes_fixed_bf16),
    E("mla_kv_cache_bytes", "right", "per_token_layer_sum", None, mla_bytes_per_token),
    E("mla_kv_cache_bytes", "right", "numpy_object_product", None, mla_bytes_numpy),

    E("mla_attention", "wrong", "scaled_by_latent_width",
      "Scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head).",
      mla_scale_latent),
    E("mla_attention", "wrong", "values_from_w_uk",
      "Copy-paste slip: up-projects the values with w_uk instead of w_uv.",
      mla_values_from_w_uk),
    E("mla_attention", "wrong", "diagonal_masked",
      "Builds the causal mask with tril(-1), so a token may not attend to itself.",
      mla_strict_causal),
    E("mla_attention", "wrong", "d_head_from_d_model",
      "Takes d_head = d_model // num_heads, though here num_heads * d_head need not equal "
      "d_model.", mla_d_head_from_d_model),
    E("mla_attention", "wrong", "w_o_transposed",
      "Applies the output projection as ctx @ w_o.T (nn.Linear habit) instead of ctx @ w_o.",
      mla_w_o_transposed),
    E("mla_attention", "wrong", "causal_mask_after_softmax",
      "Zeroes the future positions after the softmax instead of before it, so the rows no "
      "longer sum to 1.", mla_mask_after_softmax),
    E("mla_attention", "right", "per_head_loop_float64", None, mla_head_loop64),
    E("mla_attention", "right", "latent_space_sdpa", None, mla_absorbed_sdpa),

    E("absorb_mla_weights", "wrong", "q_latent_transposed",
      "Computes w_uk_h @ w_q_h.T, returning each w_q_latent[h] as (d_c, d_model) instead of "
      "(d_model, d_c).", absorb_q_latent_transposed),
    E("absorb_mla_weights", "wrong", "reshape_without_permute",
      "Reshapes the (d_in, H*d_head) weights straight to (H, d_in, d_head) without permuting, "
      "so the heads do not get their own column blocks.", absorb_reshape_without_permute),
    E("absorb_mla_weights", "wrong", "w_o_rows_interleaved",
      "Splits w_o's rows as (d_head, H) instead of (H, d_head), so head h gets every H-th "
      "row instead of its block.", absorb_w_o_rows_interleaved),
    E("absorb_mla_weights", "wrong", "w_uv_in_query_absorption",
      "Copy-paste slip: folds w_uv instead of w_uk into the query weights.",
      absorb_w_uv_for_queries),
    E("absorb_mla_weights", "wrong", "softmax_scale_folded_in",
      "Folds 1/sqrt(d_head) into w_q_latent, although the scores are still divided by "
      "sqrt(d_head) afterwards.", absorb_scale_folded),
    E("absorb_mla_weights", "wrong", "lists_not_stacked",
      "Returns Python lists of per-head matrices instead of stacked (H, ...) tensors.",
      absorb_lists),
    E("absorb_mla_weights", "right", "einsum_heads", None, absorb_einsum),
    E("absorb_mla_weights", "right", "column_slice_loop_float64", None, absorb_slice_loop64),
]
