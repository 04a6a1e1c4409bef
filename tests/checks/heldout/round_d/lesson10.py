"""Round d, lesson 10 (torch): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch

from entry import Entry


# ----------------------------------------------------------------------------- mla_kv_cache_bytes
def mla_bytes_factor_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return 2 * num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * kv_lora_rank * seq_len * batch_size * bytes_per_element


def mla_bytes_rope_times_rank(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                              bytes_per_element=2):
    return num_layers * kv_lora_rank * rope_head_dim * seq_len * batch_size \
        * bytes_per_element


def mla_bytes_one_layer(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mla_bytes_float_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size \
        * bytes_per_element / 1024


def mla_bytes_per_token_sum(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    per_token = sum((kv_lora_rank + rope_head_dim) * bytes_per_element
                    for _ in range(num_layers))
    return per_token * seq_len * batch_size


def mla_bytes_separate_terms(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    tokens = seq_len * batch_size
    latent = num_layers * tokens * kv_lora_rank * bytes_per_element
    rope = num_layers * tokens * rope_head_dim * bytes_per_element
    return int(latent + rope)


# ----------------------------------------------------------------------------- mla_attention
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attn(q, k, v, causal, scale):
    dt = q.dtype
    c = torch.promote_types(dt, torch.float32)
    s = (q.to(c) @ k.to(c).transpose(-2, -1)) * scale
    if causal:
        n_q, n_k = s.shape[-2], s.shape[-1]
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
        s = s.masked_fill(~allowed, -math.inf)
    w = torch.softmax(s, dim=-1)
    return (w @ v.to(c)).to(dt)


def mla_values_from_x(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(x @ w_uv, num_heads)
    return _merge(_attn(q, k, v, causal, 1 / math.sqrt(d_head))) @ w_o


def mla_scale_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_attn(q, k, v, causal, 1 / math.sqrt(w_dkv.shape[1]))) @ w_o


def mla_ignores_causal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_attn(q, k, v, False, 1 / math.sqrt(d_head))) @ w_o


def mla_no_output_projection(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_attn(q, k, v, causal, 1 / math.sqrt(d_head)))


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    c = x @ w_dkv
    d_head = x.shape[-1] // num_heads
    q, k, v = _split(x @ w_q, num_heads), _split(c @ w_uk, num_heads), _split(c @ w_uv, num_heads)
    return _merge(_attn(q, k, v, causal, 1 / math.sqrt(d_head))) @ w_o


def mla_reshape_heads_no_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    c = x @ w_dkv
    d_head = w_q.shape[1] // num_heads
    q, k, v = ((t).reshape(b, num_heads, n, d_head) for t in (x @ w_q, c @ w_uk, c @ w_uv))
    ctx = _attn(q, k, v, causal, 1 / math.sqrt(d_head))
    return ctx.reshape(b, n, num_heads * d_head) @ w_o


def mla_absorbed_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    d_c = w_dkv.shape[1]
    x64 = x.double()
    c = x64 @ w_dkv.double()  # (B, N, d_c)
    out = torch.zeros((b, n, d_model), dtype=torch.float64, device=x.device)
    allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        wq_lat = w_q.double()[:, cols] @ w_uk.double()[:, cols].T  # (d_model, d_c)
        wo_lat = w_uv.double()[:, cols] @ w_o.double()[cols, :]  # (d_c, d_model)
        s = (x64 @ wq_lat) @ c.transpose(-2, -1) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(~allowed, -math.inf)
        out += torch.softmax(s, dim=-1) @ c @ wo_lat
    return out.to(x.dtype)


def mla_einsum(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    cdt = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(cdt)
    lat = torch.einsum("bnd,dc->bnc", xc, w_dkv.to(cdt))
    q = torch.einsum("bnd,dhe->bhne", xc, w_q.to(cdt).reshape(d_model, num_heads, dh))
    k = torch.einsum("bnc,che->bhne", lat, w_uk.to(cdt).reshape(-1, num_heads, dh))
    v = torch.einsum("bnc,che->bhne", lat, w_uv.to(cdt).reshape(-1, num_heads, dh))
    s = torch.einsum("bhie,bhje->bhij", q, k) * dh ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1), -math.inf)
    ctx = torch.einsum("bhij,bhje->bhie", torch.softmax(s, -1), v)
    out = torch.einsum("bhie,hef->bif", ctx, w_o.to(cdt).reshape(num_heads, dh, d_model))
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- absorb_mla_weights
def _heads(w, num_heads):  # (rows, H * d_head) -> (H, rows, d_head)
    rows, width = w.shape
    return w.reshape(rows, num_heads, width // num_heads).permute(1, 0, 2)


def absorb_transposed_query(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv = _heads(w_q, num_heads), _heads(w_uk, num_heads), _heads(w_uv, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wuk @ wq.transpose(-2, -1), wuv @ wo


def absorb_w_o_columns(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv = _heads(w_q, num_heads), _heads(w_uk, num_heads), _heads(w_uv, num_heads)
    dh = w_q.shape[1] // num_heads
    wo = torch.stack([w_o[:, h * dh:(h + 1) * dh] for h in range(num_heads)])
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def absorb_interleaved_heads(w_uk, w_uv, w_q, w_o, num_heads):
    def heads(w):
        rows, width = w.shape
        return w.reshape(rows, width // num_heads, num_heads).permute(2, 0, 1)
    wq, wuk, wuv = heads(w_q), heads(w_uk), heads(w_uv)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    return wq @ wuk.transpose(-2, -1), wuv @ wo


def absorb_folds_scale(w_uk, w_uv, w_q, w_o, num_heads):
    wq, wuk, wuv = _heads(w_q, num_heads), _heads(w_uk, num_heads), _heads(w_uv, num_heads)
    wo = w_o.reshape(num_heads, -1, w_o.shape[1])
    dh = wq.shape[-1]
    return wq @ wuk.transpose(-2, -1) / math.sqrt(dh), wuv @ wo


def absorb_all_heads_together(w_uk, w_uv, w_q, w_o, num_heads):
    wq_lat = w_q @ w_uk.T
    wo_lat = w_uv @ w_o
    return (wq_lat.unsqueeze(0).expand(num_heads, -1, -1).clone(),
            wo_lat.unsqueeze(0).expand(num_heads, -1, -1).clone())


def absorb_loop(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_q.shape[1]
    if width % num_heads:
        raise ValueError(f"w_q.shape[1]={width} is not divisible by num_heads={num_heads}")
    dh = width // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qs.append(w_q[:, cols] @ w_uk[:, cols].T)
        os_.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_einsum_float64(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    d_model = w_q.shape[0]
    wq = w_q.double().reshape(d_model, num_heads, dh)
    wuk = w_uk.double().reshape(d_c, num_heads, dh)
    wuv = w_uv.double().reshape(d_c, num_heads, dh)
    wo = w_o.double().reshape(num_heads, dh, d_model)
    q_lat = torch.einsum("mhe,che->hmc", wq, wuk)
    o_lat = torch.einsum("che,hem->hcm", wuv, wo)
    return q_lat.to(w_q.dtype), o_lat.to(w_o.dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "Multiplies by 2 for keys and values as in a normal KV cache, although one latent serves both.",
          mla_bytes_factor_two),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_rope_key",
          "Counts only the latent vector and forgets the shared RoPE key of rope_head_dim values.",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "multiplies_rank_by_rope_dim",
          "Multiplies kv_lora_rank by rope_head_dim instead of adding them.",
          mla_bytes_rope_times_rank),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_layers",
          "Counts one layer, forgetting num_layers.",
          mla_bytes_one_layer),
    Entry("mla_kv_cache_bytes", "wrong", "forgets_batch",
          "Leaves batch_size out of the product.",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "returns_kib_float",
          "Divides by 1024 and returns a float in KiB instead of an int in bytes.",
          mla_bytes_float_kib),
    Entry("mla_kv_cache_bytes", "right", "per_token_layer_sum", None, mla_bytes_per_token_sum),
    Entry("mla_kv_cache_bytes", "right", "latent_plus_rope_terms", None, mla_bytes_separate_terms),

    Entry("mla_attention", "wrong", "values_from_x",
          "Computes the values from x @ w_uv instead of from the latent c @ w_uv.",
          mla_values_from_x),
    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "Scales the scores by sqrt(d_c), the latent width, instead of sqrt(d_head).",
          mla_scale_latent_width),
    Entry("mla_attention", "wrong", "ignores_causal",
          "Never applies the causal mask, although causal defaults to True.",
          mla_ignores_causal),
    Entry("mla_attention", "wrong", "no_output_projection",
          "Forgets the output projection w_o and returns the merged heads.",
          mla_no_output_projection),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "Computes d_head as d_model // num_heads, although num_heads * d_head need not equal d_model.",
          mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "reshape_heads_without_transpose",
          "Splits heads by reshaping (B, N, H*d_head) straight to (B, H, N, d_head) without a transpose.",
          mla_reshape_heads_no_transpose),
    Entry("mla_attention", "right", "absorbed_per_head_float64", None, mla_absorbed_float64),
    Entry("mla_attention", "right", "einsum", None, mla_einsum),

    Entry("absorb_mla_weights", "wrong", "query_product_transposed",
          "Multiplies w_uk_h @ w_q_h.T, giving (H, d_c, d_model) instead of w_q_h @ w_uk_h.T.",
          absorb_transposed_query),
    Entry("absorb_mla_weights", "wrong", "w_o_sliced_by_columns",
          "Slices w_o by columns like the other weights instead of taking head h's rows.",
          absorb_w_o_columns),
    Entry("absorb_mla_weights", "wrong", "interleaved_head_columns",
          "Reshapes the columns as (d_head, H), so head h gets every H-th column instead of a contiguous block.",
          absorb_interleaved_heads),
    Entry("absorb_mla_weights", "wrong", "folds_in_score_scale",
          "Folds 1/sqrt(d_head) into w_q_latent, although the contract keeps that scale in the scores.",
          absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "all_heads_together",
          "Multiplies the full matrices w_q @ w_uk.T and w_uv @ w_o (summing over all heads) and copies the result to every head.",
          absorb_all_heads_together),
    Entry("absorb_mla_weights", "right", "head_loop", None, absorb_loop),
    Entry("absorb_mla_weights", "right", "einsum_float64", None, absorb_einsum_float64),
]
