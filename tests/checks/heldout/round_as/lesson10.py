"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# =============================================================================================
# mla_kv_cache_bytes
# =============================================================================================

def cache_key_and_value(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = 2 * kv_lora_rank + rope_head_dim  # a key latent and a value latent
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def cache_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def cache_counts_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    numbers_per_layer = (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return num_layers * numbers_per_layer


def cache_numpy_int(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def cache_ignores_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token_bytes = num_layers * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_token_bytes * seq_len


def cache_no_rope_key(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return num_layers * latent * seq_len * batch_size


def cache_right_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        per_token = (kv_lora_rank + rope_head_dim) * bytes_per_element
        total += per_token * seq_len * batch_size
    return total


def cache_right_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    tokens = seq_len * batch_size
    return int(math.prod((num_layers, tokens, bytes_per_element))) * (kv_lora_rank +
                                                                      rope_head_dim)


# =============================================================================================
# mla_attention
# =============================================================================================

def mla_scale_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(w_dkv.shape[1])
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    a = torch.softmax(s, dim=-1)
    ctx = (a @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_mask_after_softmax(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.view(b, n, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    ct = torch.promote_types(x.dtype, torch.float32)
    scores = q.to(ct) @ k.to(ct).transpose(-1, -2) / math.sqrt(d_head)
    weights = torch.softmax(scores, dim=-1)
    if causal:
        weights = weights * torch.tril(torch.ones(n, n, dtype=ct))
    out = (weights @ v.to(ct)).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, num_heads * d_head) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    ctx = torch.softmax(s, -1) @ v
    return ctx.transpose(1, 2).reshape(B, N, width).to(x.dtype) @ w_o


def mla_mask_hides_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    split = lambda t: t.reshape(B, N, num_heads, dh).permute(0, 2, 1, 3).to(ct)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).permute(0, 2, 1, 3).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).reshape(B, num_heads, N, dh).to(ct)
    k = (c @ w_uk).reshape(B, num_heads, N, dh).to(ct)
    v = (c @ w_uv).reshape(B, num_heads, N, dh).to(ct)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, dim=-1) @ v
    return o.reshape(B, N, num_heads * dh).to(x.dtype) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    ct = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2).to(ct)
    s = torch.matmul(q, k.transpose(2, 3)) / dh ** 0.5
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    w = torch.softmax(s, dim=-2)
    o = torch.matmul(w, v)
    return o.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_right_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(ct)
    c = xc @ w_dkv.to(ct)
    q = (xc @ w_q.to(ct)).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    k = (c @ w_uk.to(ct)).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    v = (c @ w_uv.to(ct)).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))  # scale 1/sqrt(d_head)
    o = o.transpose(1, 2).flatten(-2)
    return (o @ w_o.to(ct)).to(x.dtype)


def mla_right_absorbed_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention from the latents alone, head by head: W_q,h W_uk,h^T and W_uv,h W_o,h."""
    B, N, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    out = torch.zeros((B, N, d_model), dtype=torch.float64)
    visible = torch.ones(N, N, dtype=torch.bool).tril() if causal else None
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        a_q = w_q.double()[:, cols] @ w_uk.double()[:, cols].T  # (d_model, d_c)
        a_o = w_uv.double()[:, cols] @ w_o.double()[cols, :]  # (d_c, d_model)
        s = torch.einsum("bnm,mc,bkc->bnk", x64, a_q, c) / math.sqrt(dh)
        if visible is not None:
            s = s.masked_fill(~visible, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += torch.einsum("bnk,bkc,cm->bnm", p, c, a_o)
    return out.to(x.dtype)


# =============================================================================================
# absorb_mla_weights
# =============================================================================================

def absorb_interleaved_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    qh = w_q.reshape(d_model, dh, num_heads).permute(2, 0, 1)  # (H, d_model, dh)
    kh = w_uk.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    vh = w_uv.reshape(d_c, dh, num_heads).permute(2, 0, 1)
    oh = w_o.reshape(dh, num_heads, d_model).permute(1, 0, 2)  # (H, dh, d_model)
    return qh @ kh.transpose(1, 2), vh @ oh


def absorb_q_latent_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_uk[:, s] @ w_q[:, s].T)
        o_lat.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_head = width // num_heads
    q_heads = w_q.reshape(-1, num_heads, d_head).transpose(0, 1)
    k_heads = w_uk.reshape(d_c, num_heads, d_head).transpose(0, 1)
    v_heads = w_uv.reshape(d_c, num_heads, d_head).transpose(0, 1)
    o_heads = w_o.reshape(num_heads, d_head, -1)
    w_q_latent = q_heads @ k_heads.transpose(-1, -2) / math.sqrt(d_head)
    return w_q_latent, v_heads @ o_heads


def absorb_d_head_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[0] // num_heads
    wq_lat = torch.stack([w_q[:, h * d_head:(h + 1) * d_head] @
                          w_uk[:, h * d_head:(h + 1) * d_head].T for h in range(num_heads)])
    wo_lat = torch.stack([w_uv[:, h * d_head:(h + 1) * d_head] @
                          w_o[h * d_head:(h + 1) * d_head, :] for h in range(num_heads)])
    return wq_lat, wo_lat


def absorb_w_uk_for_values(w_uk, w_uv, w_q, w_o, num_heads):
    H = num_heads
    dh = w_uk.shape[1] // H
    wq = torch.einsum("mhd,chd->hmc", w_q.unflatten(1, (H, dh)), w_uk.unflatten(1, (H, dh)))
    wo = torch.einsum("chd,hdm->hcm", w_uk.unflatten(1, (H, dh)), w_o.unflatten(0, (H, dh)))
    return wq, wo


def absorb_summed_over_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq = torch.zeros(w_q.shape[0], d_c, dtype=w_q.dtype)
    wo = torch.zeros(d_c, w_o.shape[1], dtype=w_o.dtype)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq = wq + w_q[:, cols] @ w_uk[:, cols].T
        wo = wo + w_uv[:, cols] @ w_o[cols]
    return wq, wo


def absorb_right_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    q4 = w_q.view(w_q.shape[0], num_heads, dh)
    k4 = w_uk.view(d_c, num_heads, dh)
    v4 = w_uv.view(d_c, num_heads, dh)
    o4 = w_o.view(num_heads, dh, w_o.shape[1])
    return (torch.einsum("mhe,che->hmc", q4, k4), torch.einsum("che,hem->hcm", v4, o4))


def absorb_right_loop_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    d_model, d_c = w_q.shape[0], w_uk.shape[0]
    wq_lat = torch.empty((num_heads, d_model, d_c), dtype=torch.float64)
    wo_lat = torch.empty((num_heads, d_c, d_model), dtype=torch.float64)
    for h in range(num_heads):
        lo, hi = h * d_head, (h + 1) * d_head
        wq_lat[h] = torch.mm(w_q[:, lo:hi].double(), w_uk[:, lo:hi].double().t())
        wo_lat[h] = torch.mm(w_uv[:, lo:hi].double(), w_o[lo:hi, :].double())
    return wq_lat.to(w_q.dtype), wo_lat.to(w_q.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_key_and_value_latents",
          "counts the latent twice, as if keys and values each had their own latent: MLA "
          "caches one latent from which both are read, so there is no factor 2",
          cache_key_and_value),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ... without "
          "parentheses, so only the RoPE key is multiplied by the tokens and bytes",
          cache_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "counts_elements_not_bytes",
          "counts the cached numbers and never multiplies by bytes_per_element, so the answer "
          "is in elements, not bytes",
          cache_counts_elements),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_integer",
          "returns np.prod(...), a numpy int64, where the contract asks for a plain Python int",
          cache_numpy_int),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch_size",
          "never multiplies by batch_size: the bytes of one sequence are returned for the whole "
          "batch",
          cache_ignores_batch),
    Entry("mla_kv_cache_bytes", "wrong", "leaves_out_rope_key",
          "counts only the latent (kv_lora_rank) and leaves out the shared RoPE key of "
          "rope_head_dim numbers that MLA also caches per token and layer",
          cache_no_rope_key),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, cache_right_loop),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, cache_right_math_prod),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width (w_dkv.shape[1]), instead of "
          "1/sqrt(d_head)",
          mla_scale_by_latent_width),
    Entry("mla_attention", "wrong", "mask_after_softmax",
          "applies the causal mask by multiplying the weights after the softmax, so the "
          "visible weights of a row no longer sum to 1 (the future keys took their share)",
          mla_mask_after_softmax),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "copies the key line for the values and keeps w_uk: the values are c @ w_uk instead "
          "of c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "mask_hides_diagonal",
          "builds the causal mask with tril(diagonal=-1), which hides each query's own key: "
          "every row loses its diagonal and query 0, left with no key, becomes NaN",
          mla_mask_hides_diagonal),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits the heads with reshape(B, H, N, d_head) directly instead of reshaping to "
          "(B, N, H, d_head) and transposing, which mixes tokens and heads",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "takes the softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_right_sdpa),
    Entry("mla_attention", "right", "absorbed_per_head_float64", None,
          mla_right_absorbed_float64),

    Entry("absorb_mla_weights", "wrong", "interleaved_head_columns",
          "splits the columns with reshape(d, d_head, H), so head h gets every H-th column "
          "instead of the contiguous block h*d_head:(h+1)*d_head (and the same for w_o's rows)",
          absorb_interleaved_heads),
    Entry("absorb_mla_weights", "wrong", "q_latent_transposed",
          "multiplies in the wrong order, w_uk_h @ w_q_h.T: w_q_latent[h] is the transpose, "
          "(d_c, d_model) instead of (d_model, d_c)",
          absorb_q_latent_transposed),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "folds 1/sqrt(d_head) into w_q_latent, but the contract keeps the scale out (the "
          "scores divide by sqrt(d_head) afterwards)",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "computes d_head as w_q.shape[0] // num_heads, from d_model instead of from the "
          "width num_heads * d_head, so the head slices are wrong when the two differ",
          absorb_d_head_from_d_model),
    Entry("absorb_mla_weights", "wrong", "w_uk_used_for_values",
          "uses w_uk instead of w_uv in w_o_latent (the einsum line was copied from the query "
          "side)",
          absorb_w_uk_for_values),
    Entry("absorb_mla_weights", "wrong", "summed_over_heads",
          "adds the heads' products into one (d_model, d_c) and one (d_c, d_model) matrix "
          "instead of stacking them on a head axis: the softmax is per head, so they must "
          "stay apart",
          absorb_summed_over_heads),
    Entry("absorb_mla_weights", "right", "einsum_views", None, absorb_right_einsum),
    Entry("absorb_mla_weights", "right", "loop_float64_mm", None, absorb_right_loop_float64),
]
