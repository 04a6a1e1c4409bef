"""Round m catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ==================================================================== mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # K and V
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_counts_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    values_per_token = kv_lora_rank + rope_head_dim
    return num_layers * batch_size * seq_len * values_per_token


def mla_bytes_numpy_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    # the RoPE key is shared, so it is stored once per sequence and layer
    latents = seq_len * kv_lora_rank
    return num_layers * batch_size * (latents + rope_head_dim) * bytes_per_element


def mla_bytes_ignores_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    per_layer = seq_len * (kv_lora_rank + rope_head_dim) * bytes_per_element
    return per_layer * num_layers


# ==================================================================== mla_kv_cache_bytes: right
def mla_bytes_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        per_layer_token = (kv_lora_rank + rope_head_dim) * bytes_per_element
        total += per_layer_token * seq_len * batch_size
    return total


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = 8 * bytes_per_element * num_layers * batch_size * seq_len * (kv_lora_rank
                                                                       + rope_head_dim)
    return int(bits // 8)


# ========================================================================= mla_attention: wrong
def _heads(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


def mla_dhead_from_dmodel(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv
    q = x @ w_q
    k = c @ w_uk
    v = c @ w_uv
    q, k, v = (t.reshape(b, n, num_heads, -1).transpose(1, 2).float() for t in (q, k, v))
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(b, n, -1).to(x.dtype) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).float()
    k = _heads(c @ w_uk, num_heads).float()
    v = _heads(c @ w_uk, num_heads).float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
    ctx = torch.softmax(scores, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(b, n, -1).to(x.dtype) @ w_o


def mla_mask_excludes_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3).float()
    k = (c @ w_uk).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3).float()
    v = (c @ w_uv).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3).float()
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)  # strictly past keys
        s = s.masked_fill(~keep, -math.inf)
    w = torch.softmax(s, dim=-1)
    o = torch.einsum("bhqk,bhkd->bqhd", w, v).reshape(B, N, width)
    return o.to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(b, num_heads, n, d_head).float()
    k = (c @ w_uk).reshape(b, num_heads, n, d_head).float()
    v = (c @ w_uv).reshape(b, num_heads, n, d_head).float()
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    ctx = torch.softmax(s, -1) @ v  # (b, H, n, d_head)
    return ctx.reshape(b, n, width).to(x.dtype) @ w_o


def mla_always_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    latent = x @ w_dkv

    def split(t):
        return t.view(b, n, num_heads, d_head).transpose(1, 2).float()

    q, k, v = split(x @ w_q), split(latent @ w_uk), split(latent @ w_uv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    ctx = scores.softmax(dim=-1) @ v
    return ctx.transpose(1, 2).reshape(b, n, num_heads * d_head).to(x.dtype) @ w_o


def mla_float_mask_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = _heads(x @ w_q, num_heads).float()
    k = _heads(c @ w_uk, num_heads).float()
    v = _heads(c @ w_uv, num_heads).float()
    mask = torch.tril(torch.ones(n, n)) if causal else None  # 1 = may attend
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return ctx.transpose(1, 2).reshape(b, n, -1).to(x.dtype) @ w_o


# ========================================================================= mla_attention: right
def mla_per_head_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    b, n, d_model = x.shape
    dh = w_q.shape[1] // num_heads
    c = xd @ w_dkv.double()
    out = torch.zeros((b, n, d_model), dtype=torch.float64)
    hidden = torch.arange(n)[None, :] > torch.arange(n)[:, None]
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q_h = xd @ w_q[:, cols].double()
        k_h = c @ w_uk[:, cols].double()
        v_h = c @ w_uv[:, cols].double()
        s = torch.einsum("bqd,bkd->bqk", q_h, k_h) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(hidden, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += (p @ v_h) @ w_o[cols, :].double()
    return out.to(x.dtype)


def mla_absorbed_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    """Attention from the latents alone: fold w_uk into the queries and w_uv into w_o."""
    b, n, d_model = x.shape
    d_c = w_dkv.shape[1]
    dh = w_q.shape[1] // num_heads
    f = torch.float64
    c = x.to(f) @ w_dkv.to(f)  # (b, n, d_c)
    wq = w_q.to(f).reshape(d_model, num_heads, dh)
    wuk = w_uk.to(f).reshape(d_c, num_heads, dh)
    wuv = w_uv.to(f).reshape(d_c, num_heads, dh)
    wo = w_o.to(f).reshape(num_heads, dh, d_model)
    q_lat = torch.einsum("bnm,mhd,chd->bhnc", x.to(f), wq, wuk)  # (b, H, n, d_c)
    s = torch.einsum("bhnc,bkc->bhnk", q_lat, c) / math.sqrt(dh)
    if causal:
        s = torch.where(torch.ones(n, n, dtype=torch.bool).tril(), s,
                        torch.tensor(-math.inf, dtype=f))
    p = torch.softmax(s, dim=-1)
    mixed = torch.einsum("bhnk,bkc->bhnc", p, c)
    w_o_lat = torch.einsum("chd,hdm->hcm", wuv, wo)
    return torch.einsum("bhnc,hcm->bnm", mixed, w_o_lat).to(x.dtype)


# ==================================================================== absorb_mla_weights: wrong
def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    w_q_latent = wq @ wk.transpose(-2, -1) / math.sqrt(dh)  # scale folded in
    return w_q_latent, wv @ wo


def absorb_transposed_q_latent(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_uk[:, sl] @ w_q[:, sl].T)
        o_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_reshape_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)  # (H, d_model, dh)
    wk = w_uk.reshape(num_heads, d_c, dh)  # heads of w_uk
    wv = w_uv.reshape(num_heads, d_c, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    return wq @ wk.transpose(1, 2), wv @ wo


def absorb_w_uk_for_values(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq = w_q.unflatten(1, (num_heads, dh))  # (d_model, H, dh)
    wk = w_uk.unflatten(1, (num_heads, dh))  # (d_c, H, dh)
    wv = w_uv.unflatten(1, (num_heads, dh))
    wo = w_o.unflatten(0, (num_heads, dh))  # (H, dh, d_model)
    q_lat = torch.einsum("mhd,chd->hmc", wq, wk)
    o_lat = torch.einsum("chd,hdm->hcm", wk, wo)
    return q_lat, o_lat


def absorb_summed_over_heads(w_uk, w_uv, w_q, w_o, num_heads):
    # absorb the up-projections into the query and output projections
    w_q_latent = w_q @ w_uk.T  # (d_model, d_c)
    w_o_latent = w_uv @ w_o  # (d_c, d_model)
    return w_q_latent, w_o_latent


def absorb_loop_skips_last_head(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    w_q_latent = torch.zeros((num_heads, d_model, d_c), dtype=w_q.dtype)
    w_o_latent = torch.zeros((num_heads, d_c, d_model), dtype=w_q.dtype)
    for h in range(num_heads - 1):
        lo, hi = h * dh, (h + 1) * dh
        w_q_latent[h] = w_q[:, lo:hi] @ w_uk[:, lo:hi].T
        w_o_latent[h] = w_uv[:, lo:hi] @ w_o[lo:hi]
    if num_heads == 1:
        w_q_latent[0] = w_q @ w_uk.T
        w_o_latent[0] = w_uv @ w_o
    return w_q_latent, w_o_latent


# ==================================================================== absorb_mla_weights: right
def absorb_einsum_direct(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    q_lat = torch.einsum("mhd,chd->hmc", w_q.reshape(-1, num_heads, dh),
                         w_uk.reshape(d_c, num_heads, dh))
    o_lat = torch.einsum("chd,hdm->hcm", w_uv.reshape(d_c, num_heads, dh),
                         w_o.reshape(num_heads, dh, -1))
    return q_lat, o_lat


def absorb_numpy_loop(w_uk, w_uv, w_q, w_o, num_heads):
    a_uk, a_uv, a_q, a_o = (t.detach().cpu().double().numpy() for t in (w_uk, w_uv, w_q, w_o))
    dh = a_q.shape[1] // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        idx = np.arange(h * dh, (h + 1) * dh)
        ql.append(a_q[:, idx] @ a_uk[:, idx].T)
        ol.append(a_uv[:, idx] @ a_o[idx, :])
    return (torch.from_numpy(np.stack(ql)).to(w_q.dtype),
            torch.from_numpy(np.stack(ol)).to(w_q.dtype))


ENTRIES = [
    # mla_kv_cache_bytes
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "It doubles the per-token size as if keys and values were cached separately, but MLA "
          "caches one latent (plus one RoPE key) from which both are reconstructed.",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "counts_elements",
          "It never multiplies by bytes_per_element, so it returns the number of cached values, "
          "not bytes.",
          mla_bytes_counts_elements),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_integer",
          "np.prod returns a numpy.int64, not the plain Python int the exercise asks for.",
          mla_bytes_numpy_prod),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "Without parentheses around kv_lora_rank + rope_head_dim, multiplication binds first: "
          "it returns num_layers * kv_lora_rank + rope_head_dim * seq_len * batch * bytes.",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once_per_sequence",
          "It stores the shared RoPE key once per sequence and layer instead of once per token: "
          "the key is shared across heads, but every token has its own.",
          mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "wrong", "ignores_batch_size",
          "It never multiplies by batch_size, so the result is the cache of one sequence "
          "whatever the batch.",
          mla_bytes_ignores_batch),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_loop),
    Entry("mla_kv_cache_bytes", "right", "via_bits", None, mla_bytes_via_bits),
    # mla_attention
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "It scales the scores by 1/sqrt(d_model // num_heads), assuming num_heads * d_head == "
          "d_model, instead of using d_head = w_q.shape[1] // num_heads.",
          mla_dhead_from_dmodel),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "The values are computed as c @ w_uk (the key up-projection) instead of c @ w_uv, so "
          "the heads mix the keys rather than the values.",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "mask_excludes_diagonal",
          "The causal mask is tril(diagonal=-1), which hides each token's own key: outputs mix "
          "only strictly earlier tokens and the first query, with no key left, comes out NaN.",
          mla_mask_excludes_diagonal),
    Entry("mla_attention", "wrong", "split_without_transpose",
          "It splits heads with reshape(B, H, N, d_head) straight from (B, N, H * d_head) and "
          "merges with reshape(B, N, width), which scrambles tokens and features instead of "
          "reshaping to (B, N, H, d_head) and transposing.",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "always_causal",
          "It applies the causal mask unconditionally, so causal=False still gives causal "
          "attention.",
          mla_always_causal),
    Entry("mla_attention", "wrong", "float_mask_to_sdpa",
          "It passes tril(ones) as a float attn_mask to scaled_dot_product_attention, which adds "
          "a float mask to the scores (0 or +1) instead of masking, so future keys stay visible.",
          mla_float_mask_sdpa),
    Entry("mla_attention", "right", "per_head_loop_float64", None, mla_per_head_float64),
    Entry("mla_attention", "right", "absorbed_latent_einsum", None, mla_absorbed_latent),
    # absorb_mla_weights
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "It divides w_q_latent by sqrt(d_head), folding the score scale into the weights, "
          "though the contract keeps the scale out.",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "transposed_q_latent",
          "Each head's query latent is computed as w_uk_h @ w_q_h.T, the transpose of "
          "w_q_h @ w_uk_h.T, giving (H, d_c, d_model) instead of (H, d_model, d_c).",
          absorb_transposed_q_latent),
    Entry("absorb_mla_weights", "wrong", "reshape_rows_not_columns",
          "w_uk.reshape(num_heads, d_c, d_head) cuts the flat memory into row blocks instead of "
          "giving head h the columns h*d_head:(h+1)*d_head (which needs reshape(d_c, H, d_head) "
          "then a permute); the same for w_uv.",
          absorb_reshape_rows),
    Entry("absorb_mla_weights", "wrong", "w_uk_for_values",
          "The output latent is built from w_uk (w_uk_h @ w_o_h) instead of the value "
          "up-projection w_uv.",
          absorb_w_uk_for_values),
    Entry("absorb_mla_weights", "wrong", "summed_over_heads",
          "It multiplies the full matrices (w_q @ w_uk.T and w_uv @ w_o), which sums over all "
          "heads and drops the head axis, instead of one product per head.",
          absorb_summed_over_heads),
    Entry("absorb_mla_weights", "wrong", "loop_skips_last_head",
          "The loop runs over range(num_heads - 1), so (with more than one head) the last head's "
          "latents stay zero.",
          absorb_loop_skips_last_head),
    Entry("absorb_mla_weights", "right", "einsum_direct", None, absorb_einsum_direct),
    Entry("absorb_mla_weights", "right", "numpy_loop_float64", None, absorb_numpy_loop),
]
