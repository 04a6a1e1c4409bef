"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================ mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return num_layers * per_token * seq_len * batch_size


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_numpy_int(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return kv_lora_rank + rope_head_dim * num_layers * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_once_for_all_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len,
                                       batch_size=1, bytes_per_element=2):
    values_per_token = num_layers * kv_lora_rank + rope_head_dim
    return values_per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_hardcoded_bf16(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    bf16 = 2
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bf16


# ============================================================ mla_kv_cache_bytes: right
def mla_bytes_per_token_first(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    bytes_per_token = sum((kv_lora_rank + rope_head_dim) * bytes_per_element
                          for _ in range(num_layers))
    return bytes_per_token * seq_len * batch_size


def mla_bytes_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    latent = math.prod((num_layers, kv_lora_rank, seq_len, batch_size, bytes_per_element))
    rope = math.prod((num_layers, rope_head_dim, seq_len, batch_size, bytes_per_element))
    return int(latent + rope)


# ============================================================ mla_attention: wrong
def mla_scale_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    s = (q @ k.transpose(-1, -2)).float() / math.sqrt(d_c)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.view(b, n, num_heads, dh).permute(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uk)
    scores = torch.einsum("bhqd,bhkd->bhqk", q.double(), k.double()) / math.sqrt(dh)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                    float("-inf"))
    w = scores.softmax(-1)
    ctx = torch.einsum("bhqk,bhkd->bhqd", w, v.double()).to(x.dtype)
    return ctx.permute(0, 2, 1, 3).reshape(b, n, width) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (c @ w_uk).reshape(B, num_heads, N, dh)
    v = (c @ w_uv).reshape(B, num_heads, N, dh)
    s = (q @ k.transpose(-1, -2)).double() / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    ctx = (torch.softmax(s, -1) @ v.double()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o


def mla_mask_excludes_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).double()
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2).double()
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2).double()
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)
        s = s.masked_fill(~allowed, -math.inf)
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(-1, keepdim=True)
    p = e / torch.where(z == 0, torch.ones_like(z), z)
    ctx = (p @ v).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, dh).transpose(1, 2)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    p = torch.softmax(s, dim=-2)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).flatten(2) @ w_o


def mla_heads_averaged(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    keys = c @ w_uk
    vals = c @ w_uv
    qs = x @ w_q
    outs = []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        s = (qs[..., sl].double() @ keys[..., sl].double().transpose(1, 2)) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
        ctx = torch.softmax(s, -1) @ vals[..., sl].double()
        outs.append(ctx @ w_o[sl].double())
    return torch.stack(outs).mean(0).to(x.dtype)


# ============================================================ mla_attention: right
def mla_sdpa_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    xd = x.double()
    c = xd @ w_dkv.double()

    def split(t):
        return t.unflatten(-1, (num_heads, dh)).transpose(1, 2)

    q, k, v = split(xd @ w_q.double()), split(c @ w_uk.double()), split(c @ w_uv.double())
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal) and N > 0)
    return (ctx.transpose(1, 2).reshape(B, N, width) @ w_o.double()).to(x.dtype)


def mla_absorbed_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Scores straight from the latents: q_h k_h^T = x W_q,h W_uk,h^T c^T."""
    B, N, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    xd = x.double()
    c = xd @ w_dkv.double()  # (B, N, d_c)
    total = torch.zeros(B, N, d_model, dtype=torch.float64)
    visible = torch.tril(torch.ones(N, N, dtype=torch.bool))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        scores = torch.einsum("bqc,bkc->bqk", xd @ wq_lat, c) / math.sqrt(dh)
        if causal:
            scores = torch.where(visible, scores, torch.tensor(-math.inf, dtype=torch.float64))
        total += torch.softmax(scores, dim=-1) @ c @ wo_lat
    return total.to(x.dtype)


# ============================================================ absorb_mla_weights: wrong
def absorb_transposed_q(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_l, wo_l = [], []
    for h in range(num_heads):
        s = slice(h * dh, (h + 1) * dh)
        wq_l.append(w_uk[:, s] @ w_q[:, s].T)
        wo_l.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(wq_l), torch.stack(wo_l)


def absorb_reshape_without_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(num_heads, d_model, dh)
    wuk = w_uk.reshape(num_heads, d_c, dh)
    wuv = w_uv.reshape(num_heads, d_c, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wuk.transpose(1, 2), wuv @ wo


def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wuk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wuv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    q_lat = wq @ wuk.transpose(-1, -2) / math.sqrt(dh)  # fold the score scale in
    return q_lat, wuv @ wo


def absorb_uses_w_uk_for_values(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    q_parts = [w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].t()
               for h in range(num_heads)]
    o_parts = [w_uk[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
               for h in range(num_heads)]
    return torch.stack(q_parts, 0), torch.stack(o_parts, 0)


def absorb_sums_output_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    wq_lat = torch.einsum("mhe,che->hmc", w_q.unflatten(1, (num_heads, dh)),
                          w_uk.unflatten(1, (num_heads, dh)))
    wo_lat = w_uv @ w_o  # (d_c, d_model): all heads at once
    return wq_lat, wo_lat


def absorb_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_c = w_uk.shape[0]
    dh = d_model // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).transpose(0, 1)
    wuk = w_uk.reshape(d_c, num_heads, dh).transpose(0, 1)
    wuv = w_uv.reshape(d_c, num_heads, dh).transpose(0, 1)
    wo = w_o.reshape(num_heads, dh, d_model)
    return torch.bmm(wq, wuk.transpose(1, 2)), torch.bmm(wuv, wo)


# ============================================================ absorb_mla_weights: right
def absorb_einsum_f64(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    Q = w_q.double().unflatten(1, (num_heads, dh))  # (m, h, e)
    K = w_uk.double().unflatten(1, (num_heads, dh))  # (c, h, e)
    V = w_uv.double().unflatten(1, (num_heads, dh))  # (c, h, e)
    O = w_o.double().unflatten(0, (num_heads, dh))  # (h, e, m)
    q_lat = torch.einsum("mhe,che->hmc", Q, K)
    o_lat = torch.einsum("che,hem->hcm", V, O)
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


def absorb_block_diagonal_trick(w_uk, w_uv, w_q, w_o, num_heads):
    """Full products, then read off each head's block from a head-masked middle factor."""
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q_out = torch.empty(num_heads, d_model, d_c, dtype=torch.float64)
    o_out = torch.empty(num_heads, d_c, d_model, dtype=torch.float64)
    for h in range(num_heads):
        keep = torch.zeros(width, dtype=torch.float64)
        keep[h * dh:(h + 1) * dh] = 1.0
        q_out[h] = (w_q.double() * keep) @ w_uk.double().T
        o_out[h] = (w_uv.double() * keep) @ w_o.double()
    return q_out.to(w_q.dtype), o_out.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "multiplies by 2 for keys and values as in a normal KV cache, but MLA caches one "
          "latent from which both are recomputed",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "counts only the kv_lora_rank latent per token and layer and leaves out the shared "
          "RoPE key of rope_head_dim values",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int",
          "multiplies with np.prod, so it returns a numpy.int64 instead of a plain Python int",
          mla_bytes_numpy_int),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "writes kv_lora_rank + rope_head_dim * layers * ... without parentheses, so only "
          "the RoPE part is multiplied by layers, tokens, batch and bytes",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_shared_across_layers",
          "treats the RoPE key as shared by all layers (layers * rank + rope) when it is "
          "shared by the heads of one layer and stored in every layer",
          mla_bytes_rope_once_for_all_layers),
    Entry("mla_kv_cache_bytes", "wrong", "hardcoded_bf16",
          "hard-codes 2 bytes per value (bf16) instead of using bytes_per_element",
          mla_bytes_hardcoded_bf16),
    Entry("mla_kv_cache_bytes", "right", "per_layer_sum", None, mla_bytes_per_token_first),
    Entry("mla_kv_cache_bytes", "right", "latent_plus_rope_products", None,
          mla_bytes_math_prod),
    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head)",
          mla_scale_latent_width),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "copy-paste slip: the values are projected with w_uk instead of w_uv, so v equals k",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "split_heads_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head), which "
          "mixes tokens and heads instead of reshaping to (B, N, H, d_head) and transposing",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "mask_excludes_diagonal",
          "the causal mask is tril(diagonal=-1), so a token may not attend to itself and the "
          "first row is empty",
          mla_mask_excludes_diagonal),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "normalises with softmax(dim=-2), over the queries, instead of over the keys",
          mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "averages_heads",
          "projects each head's context through its rows of w_o and then averages the heads "
          "instead of summing them",
          mla_heads_averaged),
    Entry("mla_attention", "right", "sdpa_float64", None, mla_sdpa_float64),
    Entry("mla_attention", "right", "absorbed_per_head_loop", None, mla_absorbed_per_head),
    Entry("absorb_mla_weights", "wrong", "query_latent_transposed",
          "multiplies in the wrong order, w_uk_h @ w_q_h.T, giving each head a (d_c, d_model) "
          "matrix, the transpose of w_q_h @ w_uk_h.T",
          absorb_transposed_q),
    Entry("absorb_mla_weights", "wrong", "reshape_without_permute",
          "reshapes w_q, w_uk and w_uv straight to (H, rows, d_head), so a head gets rows of "
          "the matrix instead of its own d_head columns",
          absorb_reshape_without_permute),
    Entry("absorb_mla_weights", "wrong", "folds_score_scale",
          "folds 1/sqrt(d_head) into w_q_latent although the contract applies that scale to "
          "the scores afterwards, so it is applied twice",
          absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "w_uk_for_output",
          "copy-paste slip: w_o_latent is built from w_uk instead of w_uv",
          absorb_uses_w_uk_for_values),
    Entry("absorb_mla_weights", "wrong", "output_heads_summed",
          "computes w_uv @ w_o over all heads at once, one (d_c, d_model) matrix that sums "
          "the heads, instead of one matrix per head",
          absorb_sums_output_heads),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "takes d_head = d_model // num_heads from w_q's rows instead of its columns "
          "(H * d_head), which fails or mis-splits whenever H * d_head != d_model",
          absorb_d_head_from_rows),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_einsum_f64),
    Entry("absorb_mla_weights", "right", "head_masked_full_products", None,
          absorb_block_diagonal_trick),
]
