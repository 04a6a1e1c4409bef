"""Round l, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math
from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

C = "mla_kv_cache_bytes"
M = "mla_attention"
W = "absorb_mla_weights"


# ============================================================ mla_kv_cache_bytes: wrong
def cache_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    per_token = 2 * num_layers * (kv_lora_rank + rope_head_dim)
    return per_token * seq_len * batch_size * bytes_per_element


def cache_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def cache_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    values_per_token = num_layers * (kv_lora_rank + rope_head_dim)
    return values_per_token * seq_len * batch_size


def cache_rejects_zero_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    args = dict(num_layers=num_layers, kv_lora_rank=kv_lora_rank, rope_head_dim=rope_head_dim,
                seq_len=seq_len, batch_size=batch_size, bytes_per_element=bytes_per_element)
    for name, value in args.items():
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}={value!r} must be a positive int")
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def cache_forgets_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_layer = (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * per_layer * seq_len


def cache_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    per_token = num_layers * kv_lora_rank + rope_head_dim
    return per_token * seq_len * batch_size * bytes_per_element


# ============================================================ mla_kv_cache_bytes: right
def cache_fraction(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    per_token_layer = Fraction(kv_lora_rank) + Fraction(rope_head_dim)
    total = per_token_layer * num_layers * seq_len * batch_size * bytes_per_element
    assert total.denominator == 1
    return int(total.numerator)


def cache_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


# ============================================================ mla_attention helpers
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _masked_softmax(s, mask):
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    z = e.sum(-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


# ============================================================ mla_attention: wrong
def mla_scale_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(d_head)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    ctx = (_masked_softmax(s, mask) @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, -1) @ w_o


def mla_inverted_mask(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    d_head = q.shape[-1]
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(d_head)
    if causal:
        future = torch.tril(torch.ones(n, n, dtype=torch.bool))
        s = s.masked_fill(future, float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, -1) @ w_o


def mla_reshape_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(b, num_heads, n, d_head)
    k = (c @ w_uk).reshape(b, num_heads, n, d_head)
    v = (c @ w_uv).reshape(b, num_heads, n, d_head)
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(d_head)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    ctx = (_masked_softmax(s, mask) @ v.float()).to(x.dtype)
    return ctx.reshape(b, n, width) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads)
    k = _heads(c @ w_uk, num_heads)
    v = _heads(c @ w_uk, num_heads)
    d_head = q.shape[-1]
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(d_head)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    ctx = (_masked_softmax(s, mask) @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, -1) @ w_o


def mla_averages_heads(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    out = 0
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = (x @ w_q[:, cols]).float()
        k = (c @ w_uk[:, cols]).float()
        v = (c @ w_uv[:, cols]).float()
        s = q @ k.transpose(-1, -2) / math.sqrt(dh)
        mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
        out = out + (_masked_softmax(s, mask) @ v).to(x.dtype) @ w_o[cols]
    return out / num_heads


def mla_causal_guard(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    c = x @ w_dkv
    q, k, v = _heads(x @ w_q, num_heads), _heads(c @ w_uk, num_heads), _heads(c @ w_uv, num_heads)
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    mask = None
    if causal is not None:
        mask = torch.ones(n, n, dtype=torch.bool).tril()
    ctx = (_masked_softmax(s, mask) @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, -1) @ w_o


# ============================================================ mla_attention: right
def mla_sdpa_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    f = torch.float64
    xd = x.to(f)
    c = xd @ w_dkv.to(f)
    q = _heads(xd @ w_q.to(f), num_heads)
    k = _heads(c @ w_uk.to(f), num_heads)
    v = _heads(c @ w_uv.to(f), num_heads)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # N_q == N_k here
    out = ctx.transpose(1, 2).reshape(b, n, -1) @ w_o.to(f)
    return out.to(x.dtype)


def mla_absorbed_einsum(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    f = torch.float64
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = w_q.to(f).reshape(d_model, num_heads, dh)
    wuk = w_uk.to(f).reshape(d_c, num_heads, dh)
    wuv = w_uv.to(f).reshape(d_c, num_heads, dh)
    wo = w_o.to(f).reshape(num_heads, dh, d_model)
    wq_lat = torch.einsum("mhe,che->hmc", wq, wuk)  # (H, d_model, d_c)
    wo_lat = torch.einsum("che,hem->hcm", wuv, wo)  # (H, d_c, d_model)
    c = x.to(f) @ w_dkv.to(f)  # (B, N, d_c)
    ql = torch.einsum("bnm,hmc->bhnc", x.to(f), wq_lat)
    s = torch.einsum("bhnc,bkc->bhnk", ql, c) / math.sqrt(dh)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    p = _masked_softmax(s, mask)
    mixed = torch.einsum("bhnk,bkc->bhnc", p, c)
    out = torch.einsum("bhnc,hcm->bnm", mixed, wo_lat)
    return out.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def _per_head(w, h, num_heads):
    dh = w.shape[1] // num_heads
    return w[:, h * dh:(h + 1) * dh]


def absorb_transposed_product(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        wq_h, wuk_h, wuv_h = (_per_head(w, h, num_heads) for w in (w_q, w_uk, w_uv))
        wo_h = w_o[h * dh:(h + 1) * dh]
        wq_l.append(wuk_h @ wq_h.T)
        wo_l.append(wuv_h @ wo_h)
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_interleaved_w_o(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)
    return wq @ wuk.transpose(-1, -2), wuv @ wo


def absorb_all_heads_at_once(w_uk, w_uv, w_q, w_o, num_heads):
    full_q = w_q @ w_uk.T  # (d_model, d_c)
    full_o = w_uv @ w_o  # (d_c, d_model)
    return (full_q.unsqueeze(0).expand(num_heads, -1, -1).clone(),
            full_o.unsqueeze(0).expand(num_heads, -1, -1).clone())


def absorb_w_uk_in_output(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(-1, -2), wuk @ wo


def absorb_d_head_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    dh = d_model // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_q[:, cols] @ w_uk[:, cols].T)
        wo_l.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_stack_dim1(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_q[:, cols] @ w_uk[:, cols].T)
        wo_l.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(wq_l, dim=1), torch.stack(wo_l, dim=1)


# ============================================================ absorb_mla_weights: right
def absorb_einsum_float64(w_uk, w_uv, w_q, w_o, num_heads):
    f = torch.float64
    d_model = w_q.shape[0]
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = w_q.to(f).view(d_model, num_heads, dh)
    wuk = w_uk.to(f).view(d_c, num_heads, dh)
    wuv = w_uv.to(f).view(d_c, num_heads, dh)
    wo = w_o.to(f).view(num_heads, dh, d_model)
    wq_lat = torch.einsum("mhe,che->hmc", wq, wuk)
    wo_lat = torch.einsum("che,hem->hcm", wuv, wo)
    return wq_lat.to(w_q.dtype), wo_lat.to(w_o.dtype)


def absorb_numpy_loop(w_uk, w_uv, w_q, w_o, num_heads):
    to_np = lambda t: t.detach().cpu().to(torch.float64).numpy()  # noqa: E731
    uk, uv, q, o = map(to_np, (w_uk, w_uv, w_q, w_o))
    dh = q.shape[1] // num_heads
    q_lat = np.empty((num_heads, q.shape[0], uk.shape[0]))
    o_lat = np.empty((num_heads, uv.shape[0], o.shape[1]))
    for h in range(num_heads):
        lo, hi = h * dh, (h + 1) * dh
        q_lat[h] = np.dot(q[:, lo:hi], uk[:, lo:hi].T)
        o_lat[h] = np.dot(uv[:, lo:hi], o[lo:hi, :])
    return (torch.from_numpy(q_lat).to(w_q.dtype), torch.from_numpy(o_lat).to(w_o.dtype))


ENTRIES = [
    Entry(C, "wrong", "factor_two_for_k_and_v",
          "Multiplies by 2 for separate keys and values as in an ordinary KV cache, although "
          "MLA's single latent vector serves as both.",
          cache_k_and_v),
    Entry(C, "wrong", "missing_parentheses",
          "Writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ..., so by operator "
          "precedence only the RoPE part is multiplied by tokens, batch and bytes.",
          cache_precedence),
    Entry(C, "wrong", "counts_elements_not_bytes",
          "Counts the cached values but never multiplies by bytes_per_element, so it returns "
          "elements rather than bytes.",
          cache_elements),
    Entry(C, "wrong", "rejects_zero_rope_dim",
          "Requires every argument to be positive, so rope_head_dim=0 (a cache without the "
          "decoupled RoPE key) raises ValueError instead of returning the latent-only size.",
          cache_rejects_zero_rope),
    Entry(C, "wrong", "forgets_batch_size",
          "Leaves batch_size out of the product, giving the bytes of one sequence whatever "
          "the batch.",
          cache_forgets_batch),
    Entry(C, "wrong", "rope_key_once_for_all_layers",
          "Counts the shared RoPE key once per token for the whole model instead of once per "
          "token in every layer.",
          cache_rope_once),
    Entry(C, "right", "fraction_arithmetic", None, cache_fraction),
    Entry(C, "right", "sum_over_layers", None, cache_layer_loop),

    Entry(M, "wrong", "d_head_from_d_model",
          "Scales the scores by 1/sqrt(d_model // num_heads), copied from ordinary MHA, "
          "although here d_head = w_q.shape[1] // num_heads need not equal it.",
          mla_scale_from_d_model),
    Entry(M, "wrong", "inverted_causal_mask",
          "Fills the lower triangle (the allowed keys) with -inf, treating the True = may "
          "attend mask as if True meant masked out (the last query row is left with no key "
          "and turns into NaN).",
          mla_inverted_mask),
    Entry(M, "wrong", "reshape_without_transpose",
          "Splits heads with reshape(B, H, N, d_head) directly instead of reshape(B, N, H, "
          "d_head) followed by a transpose, scrambling tokens and heads.",
          mla_reshape_without_transpose),
    Entry(M, "wrong", "values_from_w_uk",
          "Computes the values as c @ w_uk instead of c @ w_uv, reusing the key "
          "up-projection.",
          mla_values_from_w_uk),
    Entry(M, "wrong", "averages_heads",
          "Divides the sum of the heads' output projections by num_heads, although the "
          "heads' contributions add up.",
          mla_averages_heads),
    Entry(M, "wrong", "causal_flag_tested_against_none",
          "Tests `causal is not None`, which is also true for causal=False, so the causal "
          "mask is applied even when it was turned off.",
          mla_causal_guard),
    Entry(M, "right", "sdpa_float64", None, mla_sdpa_float64),
    Entry(M, "right", "absorbed_latent_einsum", None, mla_absorbed_einsum),

    Entry(W, "wrong", "product_order_transposed",
          "Computes w_uk_h @ w_q_h.T, the transpose of w_q_h @ w_uk_h.T, so w_q_latent comes "
          "out (H, d_c, d_model) instead of (H, d_model, d_c).",
          absorb_transposed_product),
    Entry(W, "wrong", "w_o_rows_interleaved",
          "Reshapes w_o to (d_head, H, d_model), so head h gets the interleaved rows h, h+H, "
          "... of w_o instead of the contiguous rows h*d_head:(h+1)*d_head.",
          absorb_interleaved_w_o),
    Entry(W, "wrong", "absorbs_all_heads_together",
          "Absorbs the full matrices (w_q @ w_uk.T and w_uv @ w_o) and copies them to every "
          "head, which sums all heads' products instead of keeping each head's own slice.",
          absorb_all_heads_at_once),
    Entry(W, "wrong", "w_uk_in_output",
          "Builds w_o_latent from w_uk_h @ w_o_h, reusing the key up-projection where the "
          "value up-projection w_uv_h belongs.",
          absorb_w_uk_in_output),
    Entry(W, "wrong", "d_head_from_d_model",
          "Takes d_head = d_model // num_heads (w_q.shape[0]) instead of w_q.shape[1] // "
          "num_heads, so the head slices are wrong when H * d_head != d_model.",
          absorb_d_head_from_d_model),
    Entry(W, "wrong", "stacked_on_wrong_axis",
          "Stacks the per-head matrices with dim=1, giving (d_model, H, d_c) and "
          "(d_c, H, d_model) instead of putting the head axis first.",
          absorb_stack_dim1),
    Entry(W, "right", "einsum_views_float64", None, absorb_einsum_float64),
    Entry(W, "right", "numpy_per_head_loop", None, absorb_numpy_loop),
]
