"""Held-out catalogue, lesson 10 (MLA): mla_kv_cache_bytes, mla_attention, absorb_mla_weights."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ================================================================= mla_kv_cache_bytes: wrong
def mla_bytes_times_two(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_token = 2 * (kv_lora_rank + rope_head_dim)  # keys and values
    return num_layers * per_token * seq_len * batch_size * bytes_per_element


def mla_bytes_no_rope(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    latent = kv_lora_rank * bytes_per_element
    return num_layers * latent * seq_len * batch_size


def mla_bytes_np_prod(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return np.prod([num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size,
                    bytes_per_element])


def mla_bytes_no_batch(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    values_per_token = num_layers * (kv_lora_rank + rope_head_dim)
    return values_per_token * seq_len * bytes_per_element


def mla_bytes_precedence(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return num_layers * kv_lora_rank + rope_head_dim * seq_len * batch_size * bytes_per_element


def mla_bytes_strict_guard(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    for name, val in (("num_layers", num_layers), ("kv_lora_rank", kv_lora_rank),
                      ("rope_head_dim", rope_head_dim), ("seq_len", seq_len),
                      ("batch_size", batch_size), ("bytes_per_element", bytes_per_element)):
        if val <= 0:
            raise ValueError(f"{name}={val} must be positive")
    return num_layers * (kv_lora_rank + rope_head_dim) * seq_len * batch_size * bytes_per_element


# ================================================================= mla_kv_cache_bytes: right
def mla_bytes_layer_sum(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_layer = (kv_lora_rank * bytes_per_element + rope_head_dim * bytes_per_element)
    return sum(per_layer * seq_len * batch_size for _ in range(num_layers))


def mla_bytes_reduce(num_layers, kv_lora_rank, rope_head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    factors = (num_layers, kv_lora_rank + rope_head_dim, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1))


# ====================================================================== mla_attention: wrong
def mla_scale_from_d_model(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, d_model = x.shape
    d_head = w_q.shape[1] // num_heads
    c = x @ w_dkv
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (c @ w_uk).reshape(B, N, num_heads, d_head).transpose(1, 2)
    v = (c @ w_uv).reshape(B, N, num_heads, d_head).transpose(1, 2)
    ct = torch.promote_types(x.dtype, torch.float32)
    d_k = d_model // num_heads
    s = (q.to(ct) @ k.to(ct).transpose(-2, -1)) / math.sqrt(d_k)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    ctx = torch.softmax(s, dim=-1) @ v.to(ct)
    return ctx.transpose(1, 2).reshape(B, N, -1).to(x.dtype) @ w_o


def mla_mask_inverted(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    b, n, _ = x.shape
    width = w_q.shape[1]
    dh = width // num_heads
    dt = torch.promote_types(x.dtype, torch.float32)
    latent = (x @ w_dkv).to(dt)
    qh = (x.to(dt) @ w_q.to(dt)).view(b, n, num_heads, dh).permute(0, 2, 1, 3)
    kh = (latent @ w_uk.to(dt)).view(b, n, num_heads, dh).permute(0, 2, 1, 3)
    vh = (latent @ w_uv.to(dt)).view(b, n, num_heads, dh).permute(0, 2, 1, 3)
    scores = qh @ kh.transpose(-1, -2) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))  # True = may attend
        scores = scores.masked_fill(allowed, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    out = (w @ vh).permute(0, 2, 1, 3).reshape(b, n, width)
    return out.to(x.dtype) @ w_o


def mla_split_without_transpose(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    hd = w_q.shape[-1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c = x.to(ct) @ w_dkv.to(ct)
    q = (x.to(ct) @ w_q.to(ct)).reshape(B, num_heads, N, hd)
    k = (c @ w_uk.to(ct)).reshape(B, num_heads, N, hd)
    v = (c @ w_uv.to(ct)).reshape(B, num_heads, N, hd)
    att = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if causal:
        att = att.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
    y = att.softmax(-1) @ v
    return (y.transpose(1, 2).reshape(B, N, num_heads * hd) @ w_o.to(ct)).to(x.dtype)


def mla_values_from_w_uk(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    batch, n, _ = x.shape
    d_head = w_q.shape[1] // num_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)
    c = xc @ w_dkv.to(compute)

    def split(t):
        return t.reshape(batch, n, num_heads, d_head).transpose(1, 2)

    q = split(xc @ w_q.to(compute))
    k = split(c @ w_uk.to(compute))
    v = split(c @ w_uk.to(compute))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, -math.inf)
    ctx = torch.softmax(scores, dim=-1) @ v
    merged = ctx.transpose(1, 2).reshape(batch, n, num_heads * d_head)
    return (merged @ w_o.to(compute)).to(x.dtype)


def mla_softmax_over_queries(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, D = x.shape
    Hd = w_q.shape[1]
    d = Hd // num_heads
    f = torch.promote_types(x.dtype, torch.float32)
    lat = x.to(f) @ w_dkv.to(f)
    Q = torch.einsum("bnm,mw->bnw", x.to(f), w_q.to(f)).view(B, N, num_heads, d)
    K = (lat @ w_uk.to(f)).view(B, N, num_heads, d)
    V = (lat @ w_uv.to(f)).view(B, N, num_heads, d)
    S = torch.einsum("bqhd,bkhd->bhqk", Q, K) / math.sqrt(d)
    if causal:
        S = S.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    P = torch.softmax(S, dim=-2)
    O = torch.einsum("bhqk,bkhd->bqhd", P, V).reshape(B, N, Hd)
    return (O @ w_o.to(f)).to(x.dtype)


def mla_mask_hides_diagonal(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    bsz, n, _ = x.shape
    head_dim = w_q.shape[1] // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    c_kv = x.to(ct) @ w_dkv.to(ct)
    qs = (x.to(ct) @ w_q.to(ct)).reshape(bsz, n, num_heads, head_dim).transpose(1, 2)
    ks = (c_kv @ w_uk.to(ct)).reshape(bsz, n, num_heads, head_dim).transpose(1, 2)
    vs = (c_kv @ w_uv.to(ct)).reshape(bsz, n, num_heads, head_dim).transpose(1, 2)
    logits = qs @ ks.transpose(-2, -1) * head_dim ** -0.5
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool))  # the keys after the query
        logits = logits.masked_fill(future, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    probs = torch.nan_to_num(probs, nan=0.0)
    ctx = (probs @ vs).transpose(1, 2).reshape(bsz, n, num_heads * head_dim)
    return (ctx @ w_o.to(ct)).to(x.dtype)


# ====================================================================== mla_attention: right
def mla_sdpa_float32(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    B, N, _ = x.shape
    width = w_q.shape[1]
    d_head = width // num_heads
    xf = x.float()
    c = xf @ w_dkv.float()

    def heads(t):
        return t.unflatten(-1, (num_heads, d_head)).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(heads(xf @ w_q.float()), heads(c @ w_uk.float()),
                                         heads(c @ w_uv.float()), is_causal=causal)
    out = ctx.transpose(1, 2).flatten(2) @ w_o.float()
    return out.to(x.dtype)


def mla_head_loop_f64(x, w_dkv, w_uk, w_uv, w_q, w_o, num_heads, causal=True):
    xd = x.double()
    n = x.shape[1]
    dh = w_q.shape[1] // num_heads
    latent = xd @ w_dkv.double()  # (B, N, d_c)
    total = torch.zeros(x.shape, dtype=torch.float64)
    keep = torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal else torch.ones(
        n, n, dtype=torch.bool)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = xd @ w_q.double()[:, cols]
        kh = latent @ w_uk.double()[:, cols]
        vh = latent @ w_uv.double()[:, cols]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s = torch.where(keep, s, torch.tensor(-math.inf, dtype=torch.float64))
        p = torch.exp(s - s.max(dim=-1, keepdim=True).values)
        p = p / p.sum(dim=-1, keepdim=True)
        total = total + torch.einsum("bij,bjd->bid", p, vh) @ w_o.double()[cols, :]
    return total.to(x.dtype)


# ================================================================= absorb_mla_weights: wrong
def absorb_strided_heads(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    d_head = width // num_heads
    d_model = w_q.shape[0]
    q_h = w_q.reshape(d_model, d_head, num_heads).permute(2, 0, 1)
    uk_h = w_uk.reshape(d_c, d_head, num_heads).permute(2, 0, 1)
    uv_h = w_uv.reshape(d_c, d_head, num_heads).permute(2, 0, 1)
    o_h = w_o.reshape(d_head, num_heads, d_model).permute(1, 0, 2)
    return q_h @ uk_h.transpose(1, 2), uv_h @ o_h


def absorb_scale_folded_in(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    q_lat, o_lat = [], []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        q_lat.append(w_q[:, sl] @ w_uk[:, sl].T / math.sqrt(dh))
        o_lat.append(w_uv[:, sl] @ w_o[sl, :])
    return torch.stack(q_lat), torch.stack(o_lat)


def absorb_pair_swapped(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_q.shape[1] // num_heads
    wq = w_q.unflatten(1, (num_heads, d_head))  # (d_model, H, d_head)
    wk = w_uk.unflatten(1, (num_heads, d_head))  # (d_c, H, d_head)
    wv = w_uv.unflatten(1, (num_heads, d_head))
    wo = w_o.unflatten(0, (num_heads, d_head))  # (H, d_head, d_model)
    w_o_latent = torch.einsum("chd,hdm->hcm", wv, wo)
    w_q_latent = torch.einsum("mhd,chd->hmc", wq, wk)
    return w_o_latent, w_q_latent


def absorb_query_transposed(w_uk, w_uv, w_q, w_o, num_heads):
    width = w_q.shape[1]
    d_head = width // num_heads
    wq_lat = torch.stack([w_uk[:, i:i + d_head] @ w_q[:, i:i + d_head].T
                          for i in range(0, width, d_head)])
    wo_lat = torch.stack([w_uv[:, i:i + d_head] @ w_o[i:i + d_head]
                          for i in range(0, width, d_head)])
    return wq_lat, wo_lat


def absorb_summed_over_heads(w_uk, w_uv, w_q, w_o, num_heads):
    dh = w_q.shape[1] // num_heads
    wq = w_q.reshape(w_q.shape[0], num_heads, dh)
    wk = w_uk.reshape(w_uk.shape[0], num_heads, dh)
    wv = w_uv.reshape(w_uv.shape[0], num_heads, dh)
    wo = w_o.reshape(num_heads, dh, w_o.shape[1])
    return torch.einsum("mhd,chd->mc", wq, wk), torch.einsum("chd,hdm->cm", wv, wo)


def absorb_d_head_from_d_model(w_uk, w_uv, w_q, w_o, num_heads):
    d_model = w_q.shape[0]
    d_head = d_model // num_heads
    ql, ol = [], []
    for h in range(num_heads):
        a, b = h * d_head, (h + 1) * d_head
        ql.append(w_q[:, a:b] @ w_uk[:, a:b].t())
        ol.append(w_uv[:, a:b] @ w_o[a:b, :])
    return torch.stack(ql, 0), torch.stack(ol, 0)


# ================================================================= absorb_mla_weights: right
def absorb_loop_f64(w_uk, w_uv, w_q, w_o, num_heads):
    d_head = w_uk.shape[1] // num_heads
    qs, os_ = [], []
    for h in range(num_heads):
        cols = torch.arange(h * d_head, (h + 1) * d_head)
        qs.append(w_q.double().index_select(1, cols) @ w_uk.double().index_select(1, cols).T)
        os_.append(w_uv.double().index_select(1, cols) @ w_o.double().index_select(0, cols))
    return torch.stack(qs).to(w_q.dtype), torch.stack(os_).to(w_o.dtype)


def absorb_block_diag_bmm(w_uk, w_uv, w_q, w_o, num_heads):
    d_c, width = w_uk.shape
    dh = width // num_heads
    qh = torch.stack(torch.split(w_q, dh, dim=1))  # (H, d_model, d_head)
    kh = torch.stack(torch.split(w_uk, dh, dim=1))  # (H, d_c, d_head)
    vh = torch.stack(torch.split(w_uv, dh, dim=1))  # (H, d_c, d_head)
    oh = torch.stack(torch.split(w_o, dh, dim=0))  # (H, d_head, d_model)
    return torch.bmm(qh, kh.transpose(1, 2)), torch.bmm(vh, oh)


ENTRIES = [
    Entry("mla_kv_cache_bytes", "wrong", "times_two_for_k_and_v",
          "it multiplies by 2 for keys and values as in kv_cache_bytes, but MLA's one latent "
          "serves both, so the cache is counted twice",
          mla_bytes_times_two),
    Entry("mla_kv_cache_bytes", "wrong", "rope_key_left_out",
          "it counts only the kv_lora_rank latent per token and layer and leaves out the "
          "shared RoPE key of rope_head_dim values",
          mla_bytes_no_rope),
    Entry("mla_kv_cache_bytes", "wrong", "numpy_int",
          "np.prod returns a numpy.int64, not the plain Python int the contract asks for",
          mla_bytes_np_prod),
    Entry("mla_kv_cache_bytes", "wrong", "batch_size_ignored",
          "batch_size never enters the product, so a batch of sequences is counted as one",
          mla_bytes_no_batch),
    Entry("mla_kv_cache_bytes", "wrong", "precedence_no_parentheses",
          "`num_layers * kv_lora_rank + rope_head_dim * seq_len * ...` lacks the parentheses "
          "around (kv_lora_rank + rope_head_dim), so only the RoPE part is scaled by tokens "
          "and bytes",
          mla_bytes_precedence),
    Entry("mla_kv_cache_bytes", "wrong", "rejects_rope_zero",
          "its guard requires every argument to be positive, so rope_head_dim=0 (an MLA "
          "without the decoupled RoPE key, which the contract allows) raises ValueError",
          mla_bytes_strict_guard),
    Entry("mla_kv_cache_bytes", "right", "sum_over_layers", None, mla_bytes_layer_sum),
    Entry("mla_kv_cache_bytes", "right", "functools_reduce", None, mla_bytes_reduce),

    Entry("mla_attention", "wrong", "scale_d_model_over_heads",
          "the scores are scaled by 1/sqrt(d_model // num_heads), but here d_head = "
          "w_q.shape[1] // num_heads and num_heads * d_head need not equal d_model",
          mla_scale_from_d_model),
    Entry("mla_attention", "wrong", "mask_convention_inverted",
          "masked_fill is given the True-may-attend mask itself, so it hides the allowed keys "
          "and keeps the future ones (the last row is all -inf, NaN)",
          mla_mask_inverted),
    Entry("mla_attention", "wrong", "split_without_transpose",
          "the heads are split with reshape(B, H, N, d_head) straight from (B, N, H*d_head), "
          "which scrambles tokens and heads instead of reshape(B, N, H, d_head).transpose(1, 2)",
          mla_split_without_transpose),
    Entry("mla_attention", "wrong", "values_from_w_uk",
          "the values are computed as c @ w_uk (copy-paste of the keys) instead of c @ w_uv",
          mla_values_from_w_uk),
    Entry("mla_attention", "wrong", "softmax_over_queries",
          "the softmax runs over dim=-2 (the queries) instead of the keys, so the rows of "
          "weights do not sum to 1",
          mla_softmax_over_queries),
    Entry("mla_attention", "wrong", "mask_hides_diagonal",
          "the future mask is torch.triu(ones) with the diagonal included, so each query also "
          "hides its own key (and query 0 sees nothing)",
          mla_mask_hides_diagonal),
    Entry("mla_attention", "right", "sdpa_float32", None, mla_sdpa_float32),
    Entry("mla_attention", "right", "head_loop_float64", None, mla_head_loop_f64),

    Entry("absorb_mla_weights", "wrong", "strided_head_columns",
          "the heads are split with reshape(..., d_head, num_heads), so head h gets every "
          "num_heads-th column instead of the contiguous columns h*d_head:(h+1)*d_head",
          absorb_strided_heads),
    Entry("absorb_mla_weights", "wrong", "scale_folded_in",
          "it folds 1/sqrt(d_head) into w_q_latent, but the contract keeps the scale out: the "
          "scores divide by sqrt(d_head) afterwards",
          absorb_scale_folded_in),
    Entry("absorb_mla_weights", "wrong", "pair_swapped",
          "it returns (w_o_latent, w_q_latent) instead of (w_q_latent, w_o_latent)",
          absorb_pair_swapped),
    Entry("absorb_mla_weights", "wrong", "query_latent_transposed",
          "w_q_latent[h] is built as w_uk_h @ w_q_h.T, the transpose (d_c, d_model) of "
          "w_q_h @ w_uk_h.T",
          absorb_query_transposed),
    Entry("absorb_mla_weights", "wrong", "summed_over_heads",
          "the einsum sums over the head index, returning one (d_model, d_c) and one "
          "(d_c, d_model) matrix instead of one per head",
          absorb_summed_over_heads),
    Entry("absorb_mla_weights", "wrong", "d_head_from_d_model",
          "d_head is computed as d_model // num_heads instead of w_q.shape[1] // num_heads, "
          "so the head slices are wrong whenever num_heads * d_head != d_model",
          absorb_d_head_from_d_model),
    Entry("absorb_mla_weights", "right", "index_select_loop_float64", None, absorb_loop_f64),
    Entry("absorb_mla_weights", "right", "split_stack_bmm", None, absorb_block_diag_bmm),
]
