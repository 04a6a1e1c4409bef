"""Held-out catalogue, lesson 10 (mla): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ================================================================== mla_kv_cache_bytes: wrong
def mla_bytes_k_and_v(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # a K and a V, as in lesson 06
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_latent_only(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    elements = num_layers * kv_lora_rank * seq_len * batch_size
    return elements * bytes_per_element


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    width = kv_lora_rank + rope_head_dim
    return num_layers * width * seq_len * bytes_per_element


def mla_bytes_in_kib(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size
    return total * bytes_per_element // 1024


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_via_bits(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    bits = num_layers * seq_len * batch_size * (kv_lora_rank + rope_head_dim) * 8 * bytes_per_element
    return bits / 8


# ================================================================== mla_kv_cache_bytes: right
def mla_bytes_layer_loop(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        latent = kv_lora_rank * bytes_per_element
        rope_key = rope_head_dim * bytes_per_element
        total += (latent + rope_key) * seq_len * batch_size
    return total


def mla_bytes_math_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return int(math.prod([num_layers, seq_len, batch_size, bytes_per_element])
               * sum((kv_lora_rank, rope_head_dim)))


# ======================================================================= mla_attention: wrong
def mla_scale_by_latent_width(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    dh = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (c @ w_uk).view(B, N, num_heads, dh).transpose(1, 2)
    v = (c @ w_uv).view(B, N, num_heads, dh).transpose(1, 2)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(w_dkv.shape[1])
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, num_heads * dh) @ w_o


def mla_d_head_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    latent = x @ w_dkv

    def heads(t):
        return t.reshape(b, n, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(latent @ w_uk), heads(latent @ w_uv)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
    w = scores.softmax(-1)
    out = (w @ v.float()).to(x.dtype).transpose(1, 2).reshape(b, n, -1)
    return out @ w_o


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).permute(0, 2, 1, 3).float()
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).permute(0, 2, 1, 3).float()
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).permute(0, 2, 1, 3).float()
    sc = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))  # True = may attend
        sc = sc.masked_fill(allowed, float("-inf"))
    m = sc.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(sc - m)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    y = (p @ v).to(x.dtype).permute(0, 2, 1, 3).reshape(B, N, width)
    return y @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    hd = width // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, num_heads, N, hd).float()
    k = (c @ w_uk).reshape(B, num_heads, N, hd).float()
    v = (c @ w_uv).reshape(B, num_heads, N, hd).float()
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    o = torch.softmax(s, -1) @ v
    return o.to(x.dtype).reshape(B, N, width) @ w_o


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    split = lambda t: t.view(B, N, num_heads, d_head).transpose(1, 2)  # noqa: E731
    q = split(x @ w_q).float()
    k = split(c @ w_uk).float()
    v = split(c @ w_uk).float()
    att = q @ k.transpose(-2, -1) * d_head ** -0.5
    if causal:
        att = att.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    ctx = att.softmax(dim=-1) @ v
    return ctx.to(x.dtype).transpose(1, 2).reshape(B, N, -1) @ w_o


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    dh = w_q.shape[1] // num_heads
    lat = x @ w_dkv
    q = (x @ w_q).view(b, n, num_heads, dh).transpose(1, 2).float()
    k = (lat @ w_uk).view(b, n, num_heads, dh).transpose(1, 2).float()
    v = (lat @ w_uv).view(b, n, num_heads, dh).transpose(1, 2).float()
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
    p = torch.softmax(s, dim=-2)
    p = torch.nan_to_num(p, nan=0.0)
    o = torch.einsum("bhqk,bhkd->bhqd", p, v)
    return o.to(x.dtype).transpose(1, 2).reshape(b, n, num_heads * dh) @ w_o


# ======================================================================= mla_attention: right
def mla_per_head_einsum_float64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    n = x.shape[1]
    d_head = w_q.shape[1] // num_heads
    x64 = x.double()
    c = x64 @ w_dkv.double()
    out = torch.zeros(x.shape, dtype=torch.float64)
    visible = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q_h = x64 @ w_q.double()[:, cols]
        k_h = c @ w_uk.double()[:, cols]
        v_h = c @ w_uv.double()[:, cols]
        s = torch.einsum("bid,bjd->bij", q_h, k_h) / math.sqrt(d_head)
        if visible is not None:
            s = s.masked_fill(~visible, -math.inf)
        p = torch.softmax(s, dim=-1)
        out += torch.einsum("bij,bjd->bid", p, v_h) @ w_o.double()[cols, :]
    return out.to(x.dtype)


def mla_sdpa_float32(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(work)
    c = xf @ w_dkv.to(work)
    q = (xf @ w_q.to(work)).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    k = (c @ w_uk.to(work)).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    v = (c @ w_uv.to(work)).unflatten(-1, (num_heads, d_head)).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return (ctx.transpose(1, 2).flatten(-2) @ w_o.to(work)).to(x.dtype)


# ================================================================== absorb_mla_weights: wrong
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
    d_head = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * d_head, (h + 1) * d_head)
        q_lat.append(w_q[:, sl] @ w_uk[:, sl].T / math.sqrt(d_head))
        o_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_w_uk_in_output(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq_l = torch.stack([w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].T
                        for h in range(num_heads)])
    wo_l = torch.stack([w_uk[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh]
                        for h in range(num_heads)])
    return wq_l, wo_l


def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    Q, O = [], []
    for h in range(num_heads):
        cols = slice(h, None, num_heads)  # every num_heads-th column
        Q.append(w_q[:, cols] @ w_uk[:, cols].transpose(0, 1))
        O.append(w_uv[:, cols] @ w_o[cols, :])
    return torch.stack(Q, 0), torch.stack(O, 0)


def absorb_d_head_from_rows(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[0] // num_heads
    a = torch.stack([w_q[:, i * d_head:(i + 1) * d_head] @ w_uk[:, i * d_head:(i + 1) * d_head].T
                     for i in range(num_heads)])
    b = torch.stack([w_uv[:, i * d_head:(i + 1) * d_head] @ w_o[i * d_head:(i + 1) * d_head, :]
                     for i in range(num_heads)])
    return a, b


def absorb_stack_axis_one(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_uk.shape[1] // num_heads
    ql = [w_q[:, h * dh:(h + 1) * dh] @ w_uk[:, h * dh:(h + 1) * dh].t() for h in range(num_heads)]
    ol = [w_uv[:, h * dh:(h + 1) * dh] @ w_o[h * dh:(h + 1) * dh, :] for h in range(num_heads)]
    return torch.stack(ql, dim=1), torch.stack(ol, dim=1)


# ================================================================== absorb_mla_weights: right
def absorb_einsum_views(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_model = w_q.shape[0]
    e = width // num_heads
    q3 = w_q.double().view(d_model, num_heads, e)
    k3 = w_uk.double().view(d_c, num_heads, e)
    v3 = w_uv.double().view(d_c, num_heads, e)
    o3 = w_o.double().view(num_heads, e, d_model)
    w_q_latent = torch.einsum("mhe,che->hmc", q3, k3)
    w_o_latent = torch.einsum("che,hem->hcm", v3, o3)
    return w_q_latent.to(w_q.dtype), w_o_latent.to(w_q.dtype)


def absorb_block_diagonal_trick(w_uk, w_uv, w_q, w_o, num_heads):
    """Full product with a head mask on the shared axis, summed per head in float64."""
    d_c, width = w_uk.shape
    dh = width // num_heads
    head_of_col = torch.arange(width) // dh  # (width,)
    q_parts, o_parts = [], []
    for h in range(num_heads):
        keep = (head_of_col == h).double()  # zero the other heads' columns
        q_parts.append((w_q.double() * keep) @ w_uk.double().T)
        o_parts.append((w_uv.double() * keep) @ w_o.double())
    return (torch.stack(q_parts).to(w_q.dtype), torch.stack(o_parts).to(w_q.dtype))


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "factor_two_for_k_and_v",
          "Multiplies by 2 for a K and a V cache as in lesson 06, but MLA caches one latent "
          "from which both are rebuilt (and one shared RoPE key).",
          mla_bytes_k_and_v),
    Entry("mla_kv_cache_bytes", "wrong", "latent_only",
          "Counts only the kv_lora_rank latent per token and layer and leaves out the shared "
          "RoPE key of rope_head_dim values.",
          mla_bytes_latent_only),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_ignored",
          "Never multiplies by batch_size: the cache of one sequence only.",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "kib_not_bytes",
          "Divides the total by 1024, returning KiB instead of bytes.",
          mla_bytes_in_kib),
    Entry("mla_kv_cache_bytes", "wrong", "missing_parentheses",
          "Writes num_layers * kv_lora_rank + rope_head_dim * seq_len * ... without "
          "parentheses, so only the RoPE key is multiplied by tokens, batch and bytes.",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "float_from_true_division",
          "Counts in bits and converts back with / 8, which returns a float, not the plain "
          "int the contract fixes.",
          mla_bytes_via_bits),
    Entry("mla_kv_cache_bytes", "right", "loop_over_layers", None, mla_bytes_layer_loop),
    Entry("mla_kv_cache_bytes", "right", "math_prod", None, mla_bytes_math_prod),
    Entry("mla_attention", "wrong", "scale_by_latent_width",
          "Scales the scores by 1/sqrt(d_c), the latent width w_dkv.shape[1], instead of "
          "1/sqrt(d_head).",
          mla_scale_by_latent_width),
    Entry("mla_attention", "wrong", "d_head_from_d_model",
          "Takes d_head = d_model // num_heads, assuming num_heads * d_head == d_model; when "
          "the widths differ the head reshape raises a RuntimeError.",
          mla_d_head_from_d_model),
    Entry("mla_attention", "wrong", "mask_fills_allowed_keys",
          "masked_fill is given the mask of allowed keys (True = may attend) instead of its "
          "negation, so each query sees only the future keys (the last row sees none).",
          mla_mask_inverted),
    Entry("mla_attention", "wrong", "heads_split_without_transpose",
          "Splits heads with reshape(B, H, N, d_head) straight from (B, N, H*d_head) instead of "
          "reshape(B, N, H, d_head).transpose(1, 2), mixing tokens and heads.",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "Builds the values as c @ w_uk (the key up-projection) instead of c @ w_uv.",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "Takes the softmax over dim=-2 (the queries) instead of over the keys (dim=-1).",
          mla_softmax_over_queries),
    Entry("mla_attention", "right", "per_head_loop_einsum_float64", None,
          mla_per_head_einsum_float64),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa_float32),
    Entry("absorb_mla_weights", "wrong", "reshape_heads_first_without_permute",
          "Reshapes w_q to (H, d_model, d_head) (and w_uk, w_uv to (H, d_c, d_head)) directly, "
          "which does not pick head h's columns; it needs reshape(d_model, H, d_head) then a "
          "permute.",
          absorb_reshape_without_permute),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "Divides w_q_latent by sqrt(d_head); the scale must stay out of the absorbed weight.",
          absorb_folds_scale),
    Entry("absorb_mla_weights", "wrong", "w_uk_in_output_weight",
          "Builds w_o_latent[h] from w_uk_h @ w_o_h (the key up-projection) instead of "
          "w_uv_h @ w_o_h.",
          absorb_w_uk_in_output),
    Entry("absorb_mla_weights", "wrong", "strided_head_columns",
          "Gives head h the columns h, h + H, h + 2H, ... (stride num_heads) instead of the "
          "contiguous block h*d_head:(h+1)*d_head.",
          absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "d_head_from_w_q_rows",
          "Computes d_head from w_q.shape[0] (d_model) instead of w_q.shape[1] "
          "(num_heads * d_head), so the head slices have the wrong width.",
          absorb_d_head_from_rows),
    Entry("absorb_mla_weights", "wrong", "stacked_on_axis_1",
          "Stacks the per-head matrices with torch.stack(..., dim=1), giving (d_model, H, d_c) "
          "and (d_c, H, d_model) instead of a leading head axis.",
          absorb_stack_axis_one),
    Entry("absorb_mla_weights", "right", "einsum_on_views_float64", None, absorb_einsum_views),
    Entry("absorb_mla_weights", "right", "column_mask_full_products", None,
          absorb_block_diagonal_trick),
]
