"""Lesson 10 (torch): mla_kv_cache_bytes, mla_attention and absorb_mla_weights, as learners write
them."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------- mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
        bytes_per_element


def mla_bytes_forgets_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_forgets_layers(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    return (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def mla_bytes_elements(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size


def mla_bytes_forgets_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mla_bytes_in_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * \
        bytes_per_element / 1024


def mla_bytes_rope_per_layer_only(num_layers, kv_lora_rank, rope_head_dim, seq_len,
                                  batch_size=1, bytes_per_element=2):
    latents = kv_lora_rank * seq_len * batch_size
    return num_layers * (latents + rope_head_dim) * bytes_per_element  # one RoPE key per layer


# ----------------------------------------------------------------- mla_kv_cache_bytes: right
def mla_bytes_two_caches(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    tokens = seq_len * batch_size
    latent_cache = num_layers * tokens * kv_lora_rank * bytes_per_element
    rope_cache = num_layers * tokens * rope_head_dim * bytes_per_element
    return latent_cache + rope_cache


def mla_bytes_per_token(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = sum([kv_lora_rank, rope_head_dim]) * bytes_per_element * num_layers
    return int(per_token) * seq_len * batch_size


# ----------------------------------------------------------------- mla_attention helpers
def _split(t, heads):
    b, n, width = t.shape
    return t.reshape(b, n, heads, width // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_attend(q, k, v, causal, scale):
    scores = (q @ k.transpose(-2, -1)).float() * scale
    if causal:
        n = q.shape[-2]
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1).to(v.dtype) @ v


# ----------------------------------------------------------------- mla_attention: wrong
def mla_scale_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    d_c = w_dkv.shape[1]
    return _merge(_softmax_attend(q, k, v, causal, 1 / math.sqrt(d_c))) @ w_o


def mla_head_width_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads

    def split(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)

    c = x @ w_dkv
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    ctx = _softmax_attend(q, k, v, causal, 1 / math.sqrt(d_head))
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q = _split(x @ w_q, num_heads)
    k = _split(c @ w_uk, num_heads)
    v = _split(c @ w_uk, num_heads)
    return _merge(_softmax_attend(q, k, v, causal, q.shape[-1] ** -0.5)) @ w_o


def mla_mask_hides_past(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        hidden = torch.ones(n, n, dtype=torch.bool, device=x.device).tril(-1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return _merge(torch.softmax(scores, dim=-1).to(x.dtype) @ v) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads

    def split(t):
        return t.reshape(b, num_heads, n, d_head)

    c = x @ w_dkv
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    ctx = _softmax_attend(q, k, v, causal, d_head ** -0.5)
    return ctx.reshape(b, n, num_heads * d_head) @ w_o


def mla_merge_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    ctx = _softmax_attend(q, k, v, causal, q.shape[-1] ** -0.5)  # (B, H, N, d_head)
    return ctx.reshape(b, n, -1) @ w_o


def mla_never_masks(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_softmax_attend(q, k, v, False, q.shape[-1] ** -0.5)) @ w_o


# ----------------------------------------------------------------- mla_attention: right
def mla_expanded_weights_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    w_k = w_dkv @ w_uk  # MLA is MHA with low-rank key and value weights
    w_v = w_dkv @ w_uv
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx) @ w_o


def mla_absorbed_per_head(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = w_q.shape[1] // num_heads
    c = (x @ w_dkv).double()  # (B, N, d_c): only the latents are used below
    xd = x.double()
    out = torch.zeros(b, n, d_model, dtype=torch.float64, device=x.device)
    allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        wq_lat = w_q[:, cols].double() @ w_uk[:, cols].double().T  # (d_model, d_c)
        wo_lat = w_uv[:, cols].double() @ w_o[cols, :].double()  # (d_c, d_model)
        scores = (xd @ wq_lat) @ c.transpose(1, 2) / math.sqrt(d_head)  # (B, N, N)
        if causal:
            scores = scores.masked_fill(~allowed, -math.inf)
        out += torch.softmax(scores, dim=-1) @ c @ wo_lat
    return out.to(x.dtype)


# ----------------------------------------------------------------- absorb_mla_weights: wrong
def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    qs, os_ = [], []
    for h in range(num_heads):
        qs.append(w_q[:, h::num_heads] @ w_uk[:, h::num_heads].T)
        os_.append(w_uv[:, h::num_heads] @ w_o[h::num_heads, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_w_o_rows_strided(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    q_heads = w_q.reshape(d_model, num_heads, d_head).permute(1, 0, 2)
    uk_heads = w_uk.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    uv_heads = w_uv.reshape(d_c, num_heads, d_head).permute(1, 0, 2)
    o_heads = w_o.reshape(d_head, num_heads, d_model).permute(1, 0, 2)  # rows i*H + h
    return q_heads @ uk_heads.transpose(-2, -1), uv_heads @ o_heads


def absorb_includes_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qs.append(w_q[:, cols] @ w_uk[:, cols].T / math.sqrt(d_head))  # scale folded in
        os_.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_sums_heads(w_uk, w_uv, w_q, w_o, num_heads):
    return w_q @ w_uk.T, w_uv @ w_o  # all heads at once


def absorb_w_o_latent_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qs.append(w_q[:, cols] @ w_uk[:, cols].T)
        os_.append(w_o[cols, :].T @ w_uv[:, cols].T)  # (d_model, d_c)
    return torch.stack(qs), torch.stack(os_)


def absorb_swapped_outputs(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qs.append(w_q[:, cols] @ w_uk[:, cols].T)
        os_.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(os_), torch.stack(qs)


def absorb_reshape_without_permute(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    d_head = width // num_heads
    q_heads = w_q.reshape(num_heads, d_model, d_head)
    uk_heads = w_uk.reshape(num_heads, d_c, d_head)
    uv_heads = w_uv.reshape(num_heads, d_c, d_head)
    o_heads = w_o.reshape(num_heads, d_head, d_model)
    return q_heads @ uk_heads.transpose(-2, -1), uv_heads @ o_heads


# ----------------------------------------------------------------- absorb_mla_weights: right
def absorb_loop_stack(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    w_q_latent = torch.stack([
        torch.mm(w_q[:, h * d_head:(h + 1) * d_head], w_uk[:, h * d_head:(h + 1) * d_head].t())
        for h in range(num_heads)])
    w_o_latent = torch.stack([
        torch.mm(w_uv[:, h * d_head:(h + 1) * d_head], w_o[h * d_head:(h + 1) * d_head])
        for h in range(num_heads)])
    return w_q_latent, w_o_latent


def absorb_unflatten_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    q = w_q.unflatten(1, (num_heads, -1))  # (d_model, H, d_head)
    uk = w_uk.unflatten(1, (num_heads, -1))  # (d_c, H, d_head)
    uv = w_uv.unflatten(1, (num_heads, -1))
    o = w_o.unflatten(0, (num_heads, -1))  # (H, d_head, d_model)
    return torch.einsum("mhi,chi->hmc", q, uk), torch.einsum("chi,him->hcm", uv, o)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "counts_k_and_v",
          "Multiplies by 2 for keys and values as in lesson 06, although MLA caches one latent "
          "from which both are read.", mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "Counts only the latent and forgets the shared RoPE key of rope_head_dim values.",
          mla_bytes_forgets_rope),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_layers",
          "Counts one layer's cache, never multiplying by num_layers.", mla_bytes_forgets_layers),
    Entry("mla_kv_cache_bytes", "wrong", "elements_not_bytes",
          "Returns the number of cached values without multiplying by bytes_per_element.",
          mla_bytes_elements),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_batch",
          "Ignores batch_size.", mla_bytes_forgets_batch),
    Entry("mla_kv_cache_bytes", "wrong", "returns_kib",
          "Divides by 1024, returning KiB as a float instead of bytes.", mla_bytes_in_kib),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once_per_layer",
          "Counts the RoPE key once per layer instead of once per token and sequence.",
          mla_bytes_rope_per_layer_only),
    Entry("mla_kv_cache_bytes", "right", "two_caches", None, mla_bytes_two_caches),
    Entry("mla_kv_cache_bytes", "right", "per_token", None, mla_bytes_per_token),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "Scales the scores by 1/sqrt(d_c), the latent width, instead of 1/sqrt(d_head).",
          mla_scale_latent_width),
    Entry("mla_attention", "wrong", "head_width_from_d_model",
          "Takes d_head = d_model // num_heads, which is only right when num_heads * d_head "
          "equals d_model; it should come from w_q.shape[1].", mla_head_width_from_d_model),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "Copy-paste slip: makes the values with w_uk instead of w_uv.", mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "mask_hides_past",
          "Builds the mask with tril(-1), hiding the past keys instead of the future ones.",
          mla_mask_hides_past),
    Entry("mla_attention", "wrong", "split_without_transpose",
          "Splits the heads by reshaping straight to (B, H, N, d_head) without the transpose.",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "merge_without_transpose",
          "Merges the heads with a plain reshape, without moving the token axis back in front.",
          mla_merge_without_transpose),
    Entry("mla_attention", "wrong", "never_masks",
          "Never applies the causal mask, although causal defaults to True here.",
          mla_never_masks),
    Entry("mla_attention", "right", "expanded_weights_sdpa", None, mla_expanded_weights_sdpa),
    Entry("mla_attention", "right", "absorbed_per_head_float64", None, mla_absorbed_per_head),

    Entry("absorb_mla_weights", "wrong", "strided_head_columns",
          "Takes every num_heads-th column (h::H) as head h's block instead of the contiguous "
          "columns h*d_head:(h+1)*d_head.", absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "w_o_rows_strided",
          "Reshapes w_o as (d_head, H, d_model), so head h gets rows i*H + h of w_o instead "
          "of its contiguous block of rows.", absorb_w_o_rows_strided),
    Entry("absorb_mla_weights", "wrong", "folds_in_scale",
          "Divides w_q_latent by sqrt(d_head), folding in the scale the exercise keeps out.",
          absorb_includes_scale),
    Entry("absorb_mla_weights", "wrong", "sums_over_heads",
          "Multiplies the full matrices (w_q @ w_uk.T, w_uv @ w_o), which sums the heads into "
          "one matrix instead of keeping one per head.", absorb_sums_heads),
    Entry("absorb_mla_weights", "wrong", "w_o_latent_transposed",
          "Builds w_o_latent[h] as (w_uv_h @ w_o_h).T, shape (d_model, d_c), instead of "
          "(d_c, d_model).", absorb_w_o_latent_transposed),
    Entry("absorb_mla_weights", "wrong", "swapped_outputs",
          "Returns (w_o_latent, w_q_latent) instead of (w_q_latent, w_o_latent).",
          absorb_swapped_outputs),
    Entry("absorb_mla_weights", "wrong", "reshape_without_permute",
          "Reshapes w_q, w_uk and w_uv straight to (H, rows, d_head) without permuting, which "
          "cuts the matrices into row blocks instead of column blocks.",
          absorb_reshape_without_permute),
    Entry("absorb_mla_weights", "right", "loop_stack", None, absorb_loop_stack),
    Entry("absorb_mla_weights", "right", "unflatten_einsum", None, absorb_unflatten_einsum),
]
