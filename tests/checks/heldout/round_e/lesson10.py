"""Lesson 10 (torch): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ mla_kv_cache_bytes
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mla_bytes_rank_times_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    per_token = num_layers * kv_lora_rank * rope_head_dim * bytes_per_element
    return per_token * seq_len * batch_size


def mla_bytes_rejects_zero_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    for name, value in (("num_layers", num_layers), ("kv_lora_rank", kv_lora_rank),
                        ("rope_head_dim", rope_head_dim), ("seq_len", seq_len),
                        ("batch_size", batch_size), ("bytes_per_element", bytes_per_element)):
        if value <= 0:
            raise ValueError(f"{name}={value} must be positive")
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_per_kv(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return num_layers * (kv_lora_rank + 2 * rope_head_dim) * seq_len * batch_size \
        * bytes_per_element


def mla_bytes_per_token(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = sum(kv_lora_rank + rope_head_dim for _ in range(num_layers)) * bytes_per_element
    return per_token * seq_len * batch_size


def mla_bytes_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return math.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                      bytes_per_element])


# ------------------------------------------------------------------ mla_attention
def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_attend(q, k, v, scale, mask):
    c = torch.promote_types(q.dtype, torch.float32)
    s = (q.to(c) @ k.to(c).transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    return (torch.softmax(s, -1) @ v.to(c)).to(q.dtype)


def _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, *, scale_dc=False, v_from_uk=False,
         dhead_from_dmodel=False, ignore_causal=False, merge_plain=False, diag_plus_one=False):
    b, n, d_model = x.shape
    width = w_q.shape[1]
    d_head = (d_model if dhead_from_dmodel else width) // num_heads
    c = x @ w_dkv
    q = x @ w_q
    k = c @ w_uk
    v = c @ (w_uk if v_from_uk else w_uv)
    q, k, v = (t.reshape(b, n, num_heads, d_head).transpose(1, 2) for t in (q, k, v))
    mask = None
    if causal and not ignore_causal:
        mask = torch.ones(n, n, dtype=torch.bool).tril(1 if diag_plus_one else 0)
    scale = 1.0 / math.sqrt(w_dkv.shape[1] if scale_dc else d_head)
    ctx = _softmax_attend(q, k, v, scale, mask)
    merged = ctx.reshape(b, n, width) if merge_plain else _merge(ctx)
    return merged @ w_o


def mla_scale_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, scale_dc=True)


def mla_values_from_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, v_from_uk=True)


def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, dhead_from_dmodel=True)


def mla_never_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, ignore_causal=True)


def mla_merge_plain(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, merge_plain=True)


def mla_sees_next_token(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    return _mla(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal, diag_plus_one=True)


# ------------------------------------------------------------------ mla_attention, right
def mla_per_head_loop(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    out = 0
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x64 @ w_q.double()[:, cols]
        k = c @ w_uk.double()[:, cols]
        v = c @ w_uv.double()[:, cols]
        s = q @ k.transpose(1, 2) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
        out = out + torch.softmax(s, -1) @ v @ w_o.double()[cols]
    return out.to(x.dtype)


def mla_absorbed_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention over the latent directly (weights absorbed), float32/64 internally."""
    ct = torch.promote_types(x.dtype, torch.float32)
    b, n, d_model = x.shape
    d_c = w_dkv.shape[1]
    width = w_q.shape[1]
    dh = width // num_heads
    wq = w_q.to(ct).reshape(d_model, num_heads, dh)
    wuk = w_uk.to(ct).reshape(d_c, num_heads, dh)
    wuv = w_uv.to(ct).reshape(d_c, num_heads, dh)
    wo = w_o.to(ct).reshape(num_heads, dh, d_model)
    c = x.to(ct) @ w_dkv.to(ct)  # (B, N, d_c)
    q_lat = torch.einsum("bnd,dhe,che->bhnc", x.to(ct), wq, wuk)  # (B, H, N, d_c)
    s = torch.einsum("bhnc,bmc->bhnm", q_lat, c) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    mixed = torch.einsum("bhnm,bmc->bhnc", torch.softmax(s, -1), c)
    out = torch.einsum("bhnc,che,hef->bnf", mixed, wuv, wo)
    return out.to(x.dtype)


# ------------------------------------------------------------------ absorb_mla_weights
def _heads_cols(w, h):
    rows, width = w.shape
    return w.reshape(rows, h, width // h).permute(1, 0, 2)  # (H, rows, d_head)


def absorb_transposed_q(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), \
        _heads_cols(w_uv, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wuk @ wq.transpose(-2, -1), wuv @ wo


def absorb_strided_wo_rows(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), \
        _heads_cols(w_uv, num_heads)
    d_head = w_o.shape[0] // num_heads
    wo = w_o.reshape(d_head, num_heads, w_o.shape[1]).permute(1, 0, 2)
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def absorb_strided_q_columns(w_uk, w_uv, w_q, w_o, num_heads):
    def strided(w):
        rows, width = w.shape
        return w.reshape(rows, width // num_heads, num_heads).permute(2, 0, 1)
    wq, wuk = strided(w_q), strided(w_uk)
    wuv = _heads_cols(w_uv, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def absorb_full_output_product(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads)
    full = w_uv @ w_o  # (d_c, d_model), all heads at once
    return wq @ wuk.transpose(-2, -1), full.unsqueeze(0).expand(num_heads, -1, -1).clone()


def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv = _heads_cols(w_q, num_heads), _heads_cols(w_uk, num_heads), \
        _heads_cols(w_uv, num_heads)
    d_head = wq.shape[-1]
    wo = w_o.reshape(num_heads, d_head, w_o.shape[1])
    return (wq @ wuk.transpose(-2, -1)) / math.sqrt(d_head), wuv @ wo


def absorb_stack_wrong_axis(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, cols] @ w_uk[:, cols].T)
        o_lat.append(w_uv[:, cols] @ w_o[cols])
    return torch.stack(q_lat, dim=1), torch.stack(o_lat, dim=1)


# ------------------------------------------------------------------ absorb, right
def absorb_loop(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, cols] @ w_uk[:, cols].T)
        o_lat.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_einsum64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q = w_q.double().view(d_model, num_heads, dh)
    uk = w_uk.double().view(d_c, num_heads, dh)
    uv = w_uv.double().view(d_c, num_heads, dh)
    o = w_o.double().view(num_heads, dh, d_model)
    q_lat = torch.einsum("mhe,che->hmc", q, uk)
    o_lat = torch.einsum("che,hem->hcm", uv, o)
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v", "Multiplies by 2 for keys "
          "and values as in a normal KV cache, although MLA caches one latent from which both "
          "are rebuilt.", mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key", "Counts only the kv_lora_rank "
          "latent, leaving out the shared RoPE key of rope_head_dim values.", mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch", "Leaves batch_size out of the "
          "product.", mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "rank_times_rope_dim", "Multiplies kv_lora_rank by "
          "rope_head_dim per token instead of adding the two widths.",
          mla_bytes_rank_times_rope),
    Entry("mla_kv_cache_bytes", "wrong", "rejects_zero_rope_dim", "Requires every argument to "
          "be positive, so rope_head_dim=0 (no RoPE part) raises instead of counting the "
          "latent alone.", mla_bytes_rejects_zero_rope),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_counted_twice", "Counts the RoPE part twice "
          "(as if it had a key and a value), kv_lora_rank + 2 * rope_head_dim.",
          mla_bytes_rope_per_kv),
    Entry("mla_kv_cache_bytes", "right", "per_token_loop", None, mla_bytes_per_token),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_prod),

    Entry("mla_attention", "wrong", "scale_by_latent_dim", "Scales the scores by "
          "1/sqrt(d_c) (the latent width) instead of 1/sqrt(d_head).", mla_scale_latent),
    Entry("mla_attention", "wrong", "values_from_w_uk", "Copy-paste slip: up-projects the "
          "values with w_uk instead of w_uv.", mla_values_from_uk),
    Entry("mla_attention", "wrong", "d_head_from_d_model", "Computes d_head as d_model // "
          "num_heads, which is wrong when num_heads * d_head != d_model.",
          mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "never_causal", "Never applies the causal mask, although "
          "causal defaults to True.", mla_never_causal),
    Entry("mla_attention", "wrong", "merge_without_transpose", "Merges the heads with a plain "
          "reshape of (B, H, N, d_head) to (B, N, H*d_head), without swapping heads and "
          "tokens.", mla_merge_plain),
    Entry("mla_attention", "wrong", "mask_sees_next_token", "Builds the causal mask with "
          "tril(1), letting each token see the next one.", mla_sees_next_token),
    Entry("mla_attention", "right", "per_head_loop_float64", None, mla_per_head_loop),
    Entry("mla_attention", "right", "absorbed_einsum_latent", None, mla_absorbed_sdpa),

    Entry("absorb_mla_weights", "wrong", "w_q_latent_transposed", "Computes w_uk_h @ w_q_h.T, "
          "the transpose of w_q_h @ w_uk_h.T, giving (H, d_c, d_model).", absorb_transposed_q),
    Entry("absorb_mla_weights", "wrong", "w_o_rows_strided", "Reshapes w_o as (d_head, H, "
          "d_model), so head h gets every H-th row instead of rows h*d_head:(h+1)*d_head.",
          absorb_strided_wo_rows),
    Entry("absorb_mla_weights", "wrong", "q_columns_strided", "Splits the columns of w_q and "
          "w_uk with head as the fastest index (every H-th column) instead of contiguous "
          "blocks.", absorb_strided_q_columns),
    Entry("absorb_mla_weights", "wrong", "output_product_not_per_head", "Uses the full "
          "w_uv @ w_o (summed over all heads) as every head's w_o_latent.",
          absorb_full_output_product),
    Entry("absorb_mla_weights", "wrong", "folds_in_softmax_scale", "Divides w_q_latent by "
          "sqrt(d_head), folding in the score scale the contract applies separately.",
          absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "stacked_on_axis_one", "Stacks the per-head matrices "
          "on axis 1 instead of axis 0.", absorb_stack_wrong_axis),
    Entry("absorb_mla_weights", "right", "column_slice_loop", None, absorb_loop),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_einsum64),
]
