"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ================================================================== mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # keys and values
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * bytes_per_element


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits_per_value = 8 * bytes_per_element
    values = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return values * bits_per_value / 8


def mla_bytes_rope_once(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return num_layers * (kv_lora_rank * seq_len + rope_head_dim) * batch_size * bytes_per_element


def mla_bytes_in_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return total * bytes_per_element // 1024


def mla_bytes_latent_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    tokens = seq_len * batch_size
    return num_layers * tokens * kv_lora_rank * bytes_per_element


# ================================================================== mla_kv_cache_bytes: right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mla_bytes_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return int(math.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                          bytes_per_element]))


# ======================================================================= mla_attention: wrong
def mla_scale_by_latent(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q @ k.transpose(-2, -1)).to(ct) / math.sqrt(w_dkv.shape[1])
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, width) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.view(b, n, num_heads, d_head).permute(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uk)
    f = torch.promote_types(x.dtype, torch.float32)
    scores = (q.to(f) @ k.to(f).transpose(-1, -2)) / math.sqrt(d_head)
    if causal:
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~mask, -math.inf)
    out = torch.softmax(scores, -1) @ v.to(f)
    return out.to(x.dtype).permute(0, 2, 1, 3).reshape(b, n, -1) @ w_o


def mla_triu_as_allowed(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        allowed = torch.triu(torch.ones(N, N, dtype=torch.bool))
        s = s.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o


def mla_reshape_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (c @ w_uk).reshape(B, num_heads, N, dh)
    v = (c @ w_uv).reshape(B, num_heads, N, dh)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = (torch.softmax(s, dim=-1) @ v.to(ct)).to(x.dtype)
    return ctx.reshape(B, N, width) @ w_o


def mla_head_dim_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = d_model // num_heads
    c = x @ w_dkv
    split = lambda t: t.reshape(B, N, num_heads, d_head).transpose(1, 2)  # noqa: E731
    q, k, v = split(x @ w_q), split(c @ w_uk), split(c @ w_uv)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = (torch.softmax(s, -1) @ v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, num_heads * d_head) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, dh).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    s = torch.einsum("bhid,bhjd->bhij", q.to(ct), k.to(ct)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(s, dim=-2)
    ctx = torch.einsum("bhij,bhjd->bhid", w, v.to(ct)).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, -1) @ w_o


# ======================================================================= mla_attention: right
def mla_sdpa(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    H = num_heads
    dh = w_q.shape[1] // H
    ct = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(ct)
    latent = xc @ w_dkv.to(ct)
    q = (xc @ w_q.to(ct)).unflatten(-1, (H, dh)).transpose(1, 2)
    k = (latent @ w_uk.to(ct)).unflatten(-1, (H, dh)).transpose(1, 2)
    v = (latent @ w_uv.to(ct)).unflatten(-1, (H, dh)).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (o.transpose(1, 2).flatten(-2) @ w_o.to(ct)).to(x.dtype)


def mla_per_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    x64 = x.double()
    c = x64 @ w_dkv.double()
    dh = w_q.shape[1] // num_heads
    n = x.shape[1]
    result = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x64 @ w_q[:, cols].double()
        kh = c @ w_uk[:, cols].double()
        vh = c @ w_uv[:, cols].double()
        s = torch.einsum("bid,bjd->bij", qh, kh) / dh ** 0.5
        if causal:
            future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
            s = s.masked_fill(future, -math.inf)
        p = torch.softmax(s, dim=-1)
        result += (p @ vh) @ w_o[cols, :].double()
    return result.to(x.dtype)


# ================================================================== absorb_mla_weights: wrong
def absorb_interleaved_heads(w_uk, w_uv, w_q, w_o, num_heads):
    qs, os_ = [], []
    for h in range(num_heads):
        qs.append(w_q[:, h::num_heads] @ w_uk[:, h::num_heads].T)
        os_.append(w_uv[:, h::num_heads] @ w_o[h::num_heads, :])
    return torch.stack(qs), torch.stack(os_)


def absorb_with_scale(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    wq = w_q.reshape(d_model, num_heads, dh).permute(1, 0, 2)
    wk = w_uk.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wv = w_uv.reshape(d_c, num_heads, dh).permute(1, 0, 2)
    wo = w_o.reshape(num_heads, dh, d_model)
    return (wq @ wk.transpose(1, 2)) / math.sqrt(dh), wv @ wo


def absorb_w_uk_for_values(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, sl] @ w_uk[:, sl].transpose(0, 1))
        o_lat.append(w_uk[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat, dim=0), torch.stack(o_lat, dim=0)


def absorb_stack_dim_one(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    a, b = [], []
    for h in range(num_heads):
        lo, hi = h * dh, (h + 1) * dh
        a.append(w_q[:, lo:hi] @ w_uk[:, lo:hi].T)
        b.append(w_uv[:, lo:hi] @ w_o[lo:hi])
    return torch.stack(a, dim=1), torch.stack(b, dim=1)


def absorb_heads_mixed(w_uk, w_uv, w_q, w_o, num_heads):
    w_q_latent = (w_q @ w_uk.T).unsqueeze(0).expand(num_heads, -1, -1)
    w_o_latent = (w_uv @ w_o).unsqueeze(0).expand(num_heads, -1, -1)
    return w_q_latent, w_o_latent


def absorb_head_dim_from_latent(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_uk.shape[0] // num_heads
    qq, oo = [], []
    for h in range(num_heads):
        s = slice(h * d_head, (h + 1) * d_head)
        qq.append(w_q[:, s] @ w_uk[:, s].T)
        oo.append(w_uv[:, s] @ w_o[s, :])
    return torch.stack(qq), torch.stack(oo)


# ================================================================== absorb_mla_weights: right
def absorb_einsum(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    dh = width // num_heads
    q3 = w_q.view(d_model, num_heads, dh)
    k3 = w_uk.view(d_c, num_heads, dh)
    v3 = w_uv.view(d_c, num_heads, dh)
    o3 = w_o.view(num_heads, dh, d_model)
    return (torch.einsum("mhd,chd->hmc", q3, k3), torch.einsum("chd,hdm->hcm", v3, o3))


def absorb_chunk_loop_f64(w_uk, w_uv, w_q, w_o, num_heads):
    dtype = w_q.dtype
    q_parts = torch.chunk(w_q.double(), num_heads, dim=1)
    k_parts = torch.chunk(w_uk.double(), num_heads, dim=1)
    v_parts = torch.chunk(w_uv.double(), num_heads, dim=1)
    o_parts = torch.chunk(w_o.double(), num_heads, dim=0)
    wq_lat = torch.stack([qp @ kp.t() for qp, kp in zip(q_parts, k_parts)])
    wo_lat = torch.stack([vp @ op for vp, op in zip(v_parts, o_parts)])
    return wq_lat.to(dtype), wo_lat.to(dtype)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "k_and_v_factor_two",
          "multiplies by 2 for keys and values as in an ordinary KV cache, although MLA "
          "caches one latent from which both are rebuilt",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "no_batch",
          "leaves batch_size out of the product, counting one sequence only",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "float_via_bits",
          "converts to bits and back with a true division by 8, so it returns a float "
          "instead of a plain int",
          mla_bytes_via_bits),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_once",
          "multiplies only the latent by seq_len, counting the shared RoPE key once per "
          "layer instead of once per token",
          mla_bytes_rope_once),
    Entry("mla_kv_cache_bytes", "wrong", "kib_not_bytes",
          "floor-divides by 1024 at the end, returning KiB instead of bytes",
          mla_bytes_in_kib),
    Entry("mla_kv_cache_bytes", "wrong", "latent_only",
          "counts only the kv_lora_rank latent and forgets the shared rope_head_dim key",
          mla_bytes_latent_only),
    Entry("mla_kv_cache_bytes", "right", "layer_loop", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_math_prod),

    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "scales the scores by 1/sqrt(d_c), the latent width w_dkv.shape[1], instead of "
          "1/sqrt(d_head)",
          mla_scale_by_latent),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "builds the values with c @ w_uk (the key up-projection reused) instead of "
          "c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "triu_as_allowed",
          "uses torch.triu as the mask of allowed keys, so each query attends to itself and "
          "the future instead of itself and the past",
          mla_triu_as_allowed),
    Entry("mla_attention", "wrong", "reshape_without_transpose",
          "splits heads with reshape(B, H, N, d_head) straight from (B, N, H * d_head) (and "
          "merges back the same way) instead of reshaping to (B, N, H, d_head) and "
          "transposing, which scrambles tokens and features",
          mla_reshape_without_transpose),
    Entry("mla_attention", "wrong", "head_dim_from_d_model",
          "takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model; when "
          "the projections are wider the reshape raises a RuntimeError",
          mla_head_dim_from_d_model),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "applies the softmax over dim=-2 (the queries) instead of over the keys",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa),
    Entry("mla_attention", "right", "per_head_loop_float64", None, mla_per_head_loop_f64),

    Entry("absorb_mla_weights", "wrong", "interleaved_head_columns",
          "gives head h the strided columns h::num_heads instead of the contiguous block "
          "h*d_head:(h+1)*d_head",
          absorb_interleaved_heads),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "divides w_q_latent by sqrt(d_head), folding the score scale into the weights the "
          "contract keeps unscaled",
          absorb_with_scale),
    Entry("absorb_mla_weights", "wrong", "w_uk_for_output",
          "builds w_o_latent from w_uk (copy-pasted from the query line) instead of w_uv",
          absorb_w_uk_for_values),
    Entry("absorb_mla_weights", "wrong", "stack_on_dim_one",
          "stacks the per-head matrices on dim=1, returning (d_model, H, d_c) and "
          "(d_c, H, d_model) instead of a leading head axis",
          absorb_stack_dim_one),
    Entry("absorb_mla_weights", "wrong", "heads_mixed",
          "multiplies the full matrices (w_q @ w_uk.T, w_uv @ w_o), which sums over all heads, "
          "and repeats that sum for every head instead of keeping each head's own product",
          absorb_heads_mixed),
    Entry("absorb_mla_weights", "wrong", "head_dim_from_latent",
          "takes d_head = w_uk.shape[0] // num_heads, dividing the latent width d_c instead "
          "of the projection width w_uk.shape[1]",
          absorb_head_dim_from_latent),
    Entry("absorb_mla_weights", "right", "einsum_views", None, absorb_einsum),
    Entry("absorb_mla_weights", "right", "chunk_loop_float64", None, absorb_chunk_loop_f64),
]
