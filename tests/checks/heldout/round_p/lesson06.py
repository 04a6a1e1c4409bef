"""Held-out catalogue, lesson 06 (torch): repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

# ============================================================================ repeat_kv


def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_view_expanded(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_kv_axis_after_n(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, :, None, :].expand(b, g, n, n_rep, d).reshape(b, g * n_rep, n, d)


def repeat_kv_n_rep_as_heads(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(n_rep // groups, dim=1)


def repeat_kv_numpy_roundtrip(x, n_rep):
    return torch.from_numpy(np.repeat(x.numpy(), n_rep, axis=1))


def repeat_kv_index_select(x, n_rep):
    heads = x.shape[1] * n_rep
    src = torch.arange(heads, device=x.device) // n_rep
    return x.index_select(1, src)


def repeat_kv_one_hot_einsum(x, n_rep):
    g = x.shape[1]
    h = torch.arange(g * n_rep, device=x.device)
    assign = (h[None, :] // n_rep == torch.arange(g, device=x.device)[:, None])  # (G, H)
    out = torch.einsum("bgnd,gh->bhnd", x.double(), assign.double())
    return out.to(x.dtype)


# ============================================================================ grouped_query_attention


def _up(t):
    return t.to(torch.promote_types(t.dtype, torch.float32))


def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_rows(s):
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    z = e.sum(dim=-1, keepdim=True)
    return e / torch.where(z == 0, torch.ones_like(z), z)


def _check(num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    s = _up(q) @ _up(k).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        allowed = torch.ones(n, n, dtype=torch.bool).tril()
        s = s.masked_fill(~allowed, float("-inf"))
    out = (_softmax_rows(s) @ _up(v)).to(x.dtype)
    return _unheads(out) @ w_o


def gqa_masked_fill_discarded(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
        scores.masked_fill(future, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_kv_split_by_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_heads).repeat_interleave(rep, dim=1)
    s = _up(q) @ _up(k).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return _unheads((_softmax_rows(s) @ _up(v)).to(x.dtype)) @ w_o


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1)
    s = torch.matmul(_up(q), _up(k).transpose(-2, -1)) * q.shape[-1] ** -0.5
    if causal:
        n = x.shape[1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.matmul(_softmax_rows(s), _up(v)).to(x.dtype)
    return _unheads(ctx) @ w_o


def gqa_f_linear(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(F.linear(x, w_q), num_heads)
    k = _heads(F.linear(x, w_k), num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(F.linear(x, w_v), num_kv_heads).repeat_interleave(rep, dim=1)
    s = _up(q) @ _up(k).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return F.linear(_unheads((_softmax_rows(s) @ _up(v)).to(x.dtype)), w_o)


def gqa_mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    s = _up(q) @ _up(k).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        causal_keep = torch.ones(n, n, dtype=torch.bool).tril()  # True = may attend
        s = s.masked_fill(causal_keep, float("-inf"))
    return _unheads((_softmax_rows(s) @ _up(v)).to(x.dtype)) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G, dh = num_kv_heads, D // num_heads
    R = num_heads // G
    x64 = x.double()
    q = (x64 @ w_q.double()).view(B, N, G, R, dh)
    k = (x64 @ w_k.double()).view(B, N, G, dh)
    v = (x64 @ w_v.double()).view(B, N, G, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(N)[:, None]
        j = torch.arange(N)[None, :]
        s = torch.where(j <= i, s, torch.tensor(-math.inf, dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    rep = num_heads // num_kv_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute)
    q = _heads(xc @ w_q.to(compute), num_heads)
    k = _heads(xc @ w_k.to(compute), num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(xc @ w_v.to(compute), num_kv_heads).repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (_unheads(ctx) @ w_o.to(compute)).to(x.dtype)


# ============================================================================ kv_cache_bytes


def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    bits = 8 * bytes_per_element
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bits


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_plus_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    positions = seq_len + 1  # the prompt plus the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * positions * batch_size * bytes_per_element


def kv_bytes_qkv(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    tensors = 3  # q, k and v of every past token
    return tensors * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_meta_tensor(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    cache = torch.empty((num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim),
                        device="meta")
    return cache.numel() * bytes_per_element


def kv_bytes_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    factors = (num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    per_tensor = functools.reduce(operator.mul, factors, 1)
    return per_tensor + per_tensor  # one K cache, one V cache


# ============================================================================ decode_with_cache


def _step_attend(q, keys, values):
    """q (B, H, 1, d), keys/values (B, H, T, d) -> (B, H, 1, d), computed in >= float32."""
    s = _up(q) @ _up(keys).transpose(-2, -1) / math.sqrt(q.shape[-1])
    return (_softmax_rows(s) @ _up(values)).to(q.dtype)


def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, rep = D // num_heads, num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t] @ w_q).view(B, num_heads, 1, dh)
        prefix = x[:, : t + 1]
        keys = _heads(prefix @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
        vals = _heads(prefix @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
        outs.append(_step_attend(q, keys, vals).reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, rep = D // num_heads, num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, N, dh)
    v_cache = x.new_zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, dh)
        keys = k_cache[:, :, :t].repeat_interleave(rep, dim=1)
        vals = v_cache[:, :, :t].repeat_interleave(rep, dim=1)
        ctx = _step_attend(q, keys, vals)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, dh)
        outs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, rep = D // num_heads, num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, N, dh)
    v_cache = x.new_zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, dh)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        keys = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        vals = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        outs.append(_step_attend(q, keys, vals).reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_cat_wrong_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, rep = D // num_heads, num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(N):
        xt = x[:, t : t + 1]  # (B, 1, D)
        q = _heads(xt @ w_q, num_heads)
        k_new = _heads(xt @ w_k, num_kv_heads)
        v_new = _heads(xt @ w_v, num_kv_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=1)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=1)
        ctx = _step_attend(q, k_cache.repeat_interleave(rep, dim=1),
                           v_cache.repeat_interleave(rep, dim=1))
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, rep = D // num_heads, num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, dh)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, dh)
        keys = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        vals = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        s = _up(q) @ keys.transpose(-2, -1) / math.sqrt(dh)
        ctx = (_softmax_rows(s) @ vals).to(x.dtype)
        outs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, rep = D // num_heads, num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, N, dh)
    v_cache = x.new_zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, dh)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, dh)
        keys = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        vals = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        s = _up(q) @ _up(keys).transpose(-2, -1) / math.sqrt(dh)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()  # (1 query, t+1 keys)
        s = s.masked_fill(~causal, float("-inf"))
        ctx = (_softmax_rows(s) @ _up(vals)).to(x.dtype)
        outs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G, dh = num_kv_heads, D // num_heads
    R = num_heads // G
    keys = torch.empty(B, N, G, dh, dtype=torch.float64)
    vals = torch.empty(B, N, G, dh, dtype=torch.float64)
    out = torch.empty(B, N, D, dtype=torch.float64)
    wq, wk, wv, wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    for t in range(N):
        tok = x[:, t].double()  # (B, D)
        keys[:, t] = torch.einsum("bd,de->be", tok, wk).view(B, G, dh)
        vals[:, t] = torch.einsum("bd,de->be", tok, wv).view(B, G, dh)
        qt = torch.einsum("bd,de->be", tok, wq).view(B, G, R, dh)
        s = torch.einsum("bgrd,bjgd->bgrj", qt, keys[:, : t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrj,bjgd->bgrd", p, vals[:, : t + 1]).reshape(B, D)
        out[:, t] = ctx @ wo
    return out.to(x.dtype)


def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    compute = torch.promote_types(x.dtype, torch.float32)
    rep = num_heads // num_kv_heads
    ks, vs, ys = [], [], []
    for t in range(x.shape[1]):
        token = x[:, t : t + 1]  # (B, 1, D)
        ks.append(_heads(token @ w_k, num_kv_heads).to(compute))
        vs.append(_heads(token @ w_v, num_kv_heads).to(compute))
        q = _heads(token @ w_q, num_heads).to(compute)
        k_all = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v_all = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q, k_all, v_all)  # one query sees the whole past
        ys.append(_unheads(ctx).to(x.dtype) @ w_o)
    return torch.cat(ys, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) instead of "
          "repeating each group n_rep times in a row (0, 0, 1, 1, ...)",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_dim2",
          "repeat_interleave along dim=2 repeats the tokens, (B, G, N*n_rep, d), instead of the "
          "groups along dim=1",
          repeat_kv_wrong_dim),
    Entry("repeat_kv", "wrong", "view_of_expanded",
          "calls .view on the expanded tensor; expand makes a stride-0 axis that view cannot "
          "merge, so it raises a RuntimeError whenever n_rep > 1 (reshape was needed)",
          repeat_kv_view_expanded),
    Entry("repeat_kv", "wrong", "new_axis_after_tokens",
          "inserts the copy axis after the token axis, (B, G, N, n_rep, d), so the reshape mixes "
          "tokens into the head axis",
          repeat_kv_axis_after_n),
    Entry("repeat_kv", "wrong", "n_rep_as_head_count",
          "treats n_rep as the total number of query heads and repeats each group "
          "n_rep // G times instead of n_rep times",
          repeat_kv_n_rep_as_heads),
    Entry("repeat_kv", "wrong", "numpy_roundtrip",
          "goes through numpy (x.numpy(), np.repeat), which cannot hold bfloat16, so an allowed "
          "bfloat16 input raises a TypeError",
          repeat_kv_numpy_roundtrip),
    Entry("repeat_kv", "right", "index_select", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "one_hot_einsum", None, repeat_kv_one_hot_einsum),

    Entry("grouped_query_attention", "wrong", "tiled_repeat",
          "repeats the K/V heads with .repeat (tiled), so query head h reads group h % G instead "
          "of h // n_rep",
          gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "masked_fill_discarded",
          "calls scores.masked_fill(...) without assigning the result (it is not in place), so "
          "causal=True applies no mask",
          gqa_masked_fill_discarded),
    Entry("grouped_query_attention", "wrong", "kv_split_by_num_heads",
          "splits keys and values into num_heads heads instead of num_kv_heads, so their head "
          "size is wrong and the score product fails unless num_kv_heads == num_heads",
          gqa_kv_split_by_num_heads),
    Entry("grouped_query_attention", "wrong", "no_divisibility_guard",
          "never checks that num_heads is a multiple of num_kv_heads, so a bad pair fails later "
          "with a RuntimeError in the matmul instead of a ValueError",
          gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "f_linear_transposes",
          "projects with F.linear(x, W), which computes x @ W.T (nn.Linear's layout) instead of "
          "x @ W: the non-square w_k, w_v then fail to multiply and square weights act transposed",
          gqa_f_linear),
    Entry("grouped_query_attention", "wrong", "mask_inverted",
          "fills -inf where the lower-triangular mask is True, blocking the allowed keys and "
          "keeping the future ones",
          gqa_mask_inverted),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None, gqa_grouped_einsum),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "counts only the key cache: the factor 2 for keys and values is missing",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8 * bytes_per_element, giving bits instead of bytes",
          kv_bytes_bits),
    Entry("kv_cache_bytes", "wrong", "np_prod_int64",
          "returns np.prod(...), a numpy int64, instead of a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "batch_ignored",
          "never multiplies by batch_size, so the result is the cache of one sequence",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "seq_len_plus_one",
          "counts seq_len + 1 positions (the prompt plus the token being generated) instead of "
          "seq_len",
          kv_bytes_plus_one),
    Entry("kv_cache_bytes", "wrong", "queries_cached_too",
          "caches queries as well as keys and values (factor 3 instead of 2); past queries are "
          "never needed again",
          kv_bytes_qkv),
    Entry("kv_cache_bytes", "right", "meta_tensor_numel", None, kv_bytes_meta_tensor),
    Entry("kv_cache_bytes", "right", "reduce_mul_twice", None, kv_bytes_reduce),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of only "
          "the new token, so the projection work grows quadratically (the values are right)",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attend_before_append",
          "attends over the cache before appending the new token's key and value, so token t "
          "never sees itself and the first token has no key at all (its empty softmax raises)",
          decode_attend_before_append),
    Entry("decode_with_cache", "wrong", "values_from_w_k",
          "fills the value cache with x_t @ w_k (a copy-paste slip) instead of x_t @ w_v",
          decode_values_from_w_k),
    Entry("decode_with_cache", "wrong", "cat_heads_dim",
          "appends the new key and value with torch.cat along dim=1 (the head axis) instead of "
          "dim=2 (the token axis), so the cache grows in heads and the product fails from the "
          "second token on",
          decode_cat_wrong_dim),
    Entry("decode_with_cache", "wrong", "cache_default_dtype",
          "allocates the caches with torch.zeros(...) in the default float32 instead of x's "
          "dtype, so float64 inputs meet a float32 cache and the matmul raises",
          decode_cache_default_dtype),
    Entry("decode_with_cache", "wrong", "top_left_mask_on_step",
          "applies a top-left causal mask tril(ones(1, t+1)) to the single new query, so it only "
          "sees key 0 instead of the whole cache (lesson 04's bottom-right alignment)",
          decode_top_left_mask),
    Entry("decode_with_cache", "right", "einsum_float64_cache", None, decode_einsum_float64),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, decode_list_cache_sdpa),
]
