"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def rkv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_interleave_seq_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_expand_no_new_axis(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def rkv_view_after_expand(x, n_rep):
    B, G, N, D = x.shape
    return x[:, :, None, :, :].expand(B, G, n_rep, N, D).view(B, G * n_rep, N, D)


def rkv_index_by_g(x, n_rep):
    groups = x.shape[1]
    idx = [h // groups for h in range(groups * n_rep)]
    return x[:, idx]


def rkv_loop_off_by_one(x, n_rep):
    heads = []
    for g in range(x.shape[1]):
        for _ in range(1, n_rep):
            heads.append(x[:, g])
    return torch.stack(heads, dim=1)


def rkv_einsum_ones(x, n_rep):
    b, g, n, d = x.shape
    ones = torch.ones(n_rep, dtype=x.dtype, device=x.device)
    return torch.einsum("bgnd,r->bgrnd", x, ones).reshape(b, g * n_rep, n, d)


def rkv_index_select(x, n_rep):
    src = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, src)


# ============================================================================ grouped_query_attention
def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2).repeat(1, rep, 1, 1)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2).repeat(1, rep, 1, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_kv_split_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    batch, n, d_model = x.shape
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).view(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).view(batch, n, num_heads, -1).transpose(1, 2)
    v = (x @ w_v).view(batch, n, num_heads, -1).transpose(1, 2)
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    ctx = (attn @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    hd = D // num_heads
    groups = num_heads // num_kv_heads
    Q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    K = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    V = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    K = torch.repeat_interleave(K, groups, dim=1)
    V = torch.repeat_interleave(V, groups, dim=1)
    S = torch.matmul(Q.float(), K.float().transpose(2, 3)) / hd ** 0.5
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool))
        S = S.masked_fill(~keep, -torch.inf)
    A = torch.softmax(S, dim=-1)
    O = torch.matmul(A, V.float()).to(x.dtype)
    return O.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_causal_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2).repeat_interleave(rep, 1)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2).repeat_interleave(rep, 1)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        blocked = torch.triu(torch.ones(N, N, dtype=torch.bool))
        scores = scores.masked_fill(blocked, float("-inf"))
    w = scores.softmax(-1)
    out = (w @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d // num_heads
    r = num_heads // num_kv_heads
    q = (x @ w_q).view(b, n, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(b, n, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(b, n, num_kv_heads, dh).transpose(1, 2)
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    att = (q.float() @ k.float().transpose(-1, -2)) * (1.0 / math.sqrt(dh))
    if causal is not None:
        allowed = torch.ones(n, n, dtype=torch.bool).tril()
        att = att.masked_fill(~allowed, float("-inf"))
    att = att.softmax(dim=-1)
    y = (att @ v.float()).to(x.dtype)
    return y.transpose(1, 2).reshape(b, n, d) @ w_o


def gqa_transpose_wrong_axes(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = torch.repeat_interleave(k, rep, dim=1)
    v = torch.repeat_interleave(v, rep, dim=1)
    s = q.float() @ k.float().transpose(1, 2) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    hd = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    E = D // num_heads
    xd = x.double()
    q = (xd @ w_q.double()).reshape(B, N, G, R, E)
    k = (xd @ w_k.double()).reshape(B, N, G, E)
    v = (xd @ w_v.double()).reshape(B, N, G, E)
    s = torch.einsum("bigre,bjge->bgrij", q, k) / math.sqrt(E)
    if causal:
        ok = torch.arange(N)[None, :] <= torch.arange(N)[:, None]
        s = torch.where(ok, s, torch.tensor(float("-inf"), dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjge->bigre", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim
    return per_token * seq_len * batch_size * bytes_per_element * 8


def kvb_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len
    return elements * bytes_per_element


def kvb_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kvb_seq_minus_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    cached = seq_len - 1  # the current token is not in the cache yet
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


def kvb_hardcoded_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    k_bytes = num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2  # fp16
    v_bytes = k_bytes
    return k_bytes + v_bytes


def kvb_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    factors = (2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    return functools.reduce(operator.mul, factors, 1)


def kvb_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    one_layer_one_token = {"k": num_kv_heads * head_dim, "v": num_kv_heads * head_dim}
    per_token = sum(one_layer_one_token.values()) * num_layers * bytes_per_element
    tokens = seq_len * batch_size
    return int(per_token * tokens)


# ============================================================================ decode_with_cache
def dwc_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        prefix = x[:, :t + 1]
        K = (prefix @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        V = (prefix @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        K = K.repeat_interleave(rep, dim=1)
        V = V.repeat_interleave(rep, dim=1)
        s = q.float() @ K.float().transpose(-2, -1) / math.sqrt(dh)
        o = (s.softmax(-1) @ V.float()).to(x.dtype)
        outs.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    outs = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_new = (x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_new = (x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        K = k_cache.repeat_interleave(rep, dim=1)
        V = v_cache.repeat_interleave(rep, dim=1)
        s = q.float() @ K.float().transpose(-2, -1) / math.sqrt(dh)
        o = (s.softmax(-1) @ V.float()).to(x.dtype)
        outs.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1)


def dwc_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    results = []
    for t in range(n):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(batch, 1, num_heads, d_head).transpose(1, 2)
        k = (tok @ w_k).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        v = (tok @ w_v).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        k_cache = k  # update the cache with the new key
        v_cache = v
        kk = k_cache.repeat_interleave(n_rep, dim=1).float()
        vv = v_cache.repeat_interleave(n_rep, dim=1).float()
        w = torch.softmax(q.float() @ kk.transpose(-2, -1) / math.sqrt(d_head), dim=-1)
        ctx = (w @ vv).to(x.dtype).transpose(1, 2).reshape(batch, 1, d_model)
        results.append(ctx @ w_o)
    return torch.cat(results, dim=1)


def dwc_cat_heads_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    keys = values = None
    out = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, hd).transpose(1, 2)
        k = (xt @ w_k).view(B, 1, num_kv_heads, hd).transpose(1, 2)
        v = (xt @ w_v).view(B, 1, num_kv_heads, hd).transpose(1, 2)
        keys = k if keys is None else torch.cat([keys, k], dim=1)
        values = v if values is None else torch.cat([values, v], dim=1)
        K = keys.repeat_interleave(rep, dim=1)
        V = values.repeat_interleave(rep, dim=1)
        a = torch.softmax(q.float() @ K.float().transpose(-2, -1) / math.sqrt(hd), dim=-1)
        out.append((a @ V.float()).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def dwc_step_causal_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        ks.append((x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        vs.append((x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        s = q.float() @ K.float().transpose(-2, -1) / math.sqrt(dh)  # (B, H, 1, t+1)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        o = (s.softmax(-1) @ V.float()).to(x.dtype)
        outs.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        K = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        V = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        w = torch.softmax(q @ K.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append((w @ V).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    cache_k, cache_v, steps = [], [], []
    for t in range(N):
        tok = x[:, t:t + 1]
        q = (tok @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        cache_k.append((tok @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2))
        cache_v.append((tok @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2))
        K = torch.cat(cache_k, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(cache_v, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q.float(), K.float(), V.float())
        steps.append(ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o)
    return torch.cat(steps, dim=1)


def dwc_grouped_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    E = D // num_heads
    kc = torch.zeros(B, N, G, E, dtype=torch.float64)
    vc = torch.zeros(B, N, G, E, dtype=torch.float64)
    ctx = torch.zeros(B, N, D, dtype=torch.float64)
    for t in range(N):
        row = x[:, t]  # (B, D)
        q = (row @ w_q).double().reshape(B, G, R, E)
        kc[:, t] = (row @ w_k).double().reshape(B, G, E)
        vc[:, t] = (row @ w_v).double().reshape(B, G, E)
        s = torch.einsum("bgre,bjge->bgrj", q, kc[:, :t + 1]) / math.sqrt(E)
        p = torch.softmax(s, dim=-1)
        ctx[:, t] = torch.einsum("bgrj,bjge->bgre", p, vc[:, :t + 1]).reshape(B, D)
    return ctx.to(x.dtype) @ w_o


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) instead of "
          "repeating each group n_rep times in a row, so head h does not read group h // n_rep",
          rkv_tiled),
    Entry("repeat_kv", "wrong", "interleave_sequence_dim",
          "repeats along dim=2 (the token axis) instead of dim=1 (the K/V head axis)",
          rkv_interleave_seq_dim),
    Entry("repeat_kv", "wrong", "expand_without_new_axis",
          "calls x.expand(B, G * n_rep, N, d) directly, but expand can only broadcast axes of "
          "size 1, so it raises as soon as G > 1",
          rkv_expand_no_new_axis),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "flattens the expanded (B, G, n_rep, N, d) tensor with .view, which cannot merge the "
          "stride-0 axis of an expand and raises; reshape (which copies) is needed",
          rkv_view_after_expand),
    Entry("repeat_kv", "wrong", "index_divides_by_groups",
          "indexes group h // G instead of h // n_rep, so the heads read the wrong groups "
          "whenever G != n_rep",
          rkv_index_by_g),
    Entry("repeat_kv", "wrong", "loop_range_off_by_one",
          "loops `for _ in range(1, n_rep)`, making n_rep - 1 copies of each group (none at "
          "all, and an error, when n_rep == 1)",
          rkv_loop_off_by_one),
    Entry("repeat_kv", "right", "einsum_ones", None, rkv_einsum_ones),
    Entry("repeat_kv", "right", "index_select", None, rkv_index_select),

    Entry("grouped_query_attention", "wrong", "tiled_kv_repeat",
          "repeats the K/V heads with .repeat (tiled order), so query head h reads group "
          "h % num_kv_heads instead of h // n_rep",
          gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "kv_split_into_num_heads",
          "splits the keys and values into num_heads heads instead of num_kv_heads, so with "
          "fewer K/V heads their head size is wrong and the score product raises",
          gqa_kv_split_num_heads),
    Entry("grouped_query_attention", "wrong", "missing_head_count_guard",
          "never checks that num_heads is a multiple of num_kv_heads, so a bad pair fails "
          "later with a RuntimeError from matmul instead of a ValueError naming both numbers",
          gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "causal_masks_diagonal",
          "masks with triu(diagonal=0), which also hides each query's own key, so the first "
          "row has no key left and becomes NaN",
          gqa_causal_diagonal),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "tests `causal is not None`, which is also true for causal=False, so the causal mask "
          "is always applied",
          gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "transpose_wrong_axes",
          "transposes k with .transpose(1, 2) (heads and tokens) instead of the last two axes, "
          "so the score product q @ k^T fails",
          gqa_transpose_wrong_axes),
    Entry("grouped_query_attention", "right", "sdpa", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None, gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no_factor_two",
          "counts only one tensor per layer: the cache holds keys AND values, so the factor 2 "
          "is missing",
          kvb_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8, returning the size in bits instead of bytes",
          kvb_bits),
    Entry("kv_cache_bytes", "wrong", "ignores_batch_size",
          "leaves batch_size out of the product, so a batch of sequences is counted as one",
          kvb_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "np_prod_int64",
          "computes the product with np.prod, which returns a numpy int64 instead of a plain "
          "Python int",
          kvb_np_prod),
    Entry("kv_cache_bytes", "wrong", "seq_len_minus_one",
          "counts seq_len - 1 tokens, thinking the current token is not cached; the cache "
          "holds all seq_len tokens",
          kvb_seq_minus_one),
    Entry("kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "hard-codes 2 bytes per element (fp16) instead of using bytes_per_element",
          kvb_hardcoded_fp16),
    Entry("kv_cache_bytes", "right", "reduce_mul", None, kvb_reduce),
    Entry("kv_cache_bytes", "right", "per_token_times_tokens", None, kvb_per_token),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "re-projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching the keys and values, so projection work grows quadratically in N",
          dwc_reproject_prefix),
    Entry("decode_with_cache", "wrong", "attends_before_appending",
          "attends over the cache before appending the new token's key and value, so each "
          "token misses itself (and token 0 sees no key at all)",
          dwc_attend_before_append),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key and value to the cache instead of appending them, so each token "
          "attends only to itself",
          dwc_cache_overwritten),
    Entry("decode_with_cache", "wrong", "cat_on_head_axis",
          "appends to the cache with torch.cat along dim=1 (the head axis) instead of dim=2 "
          "(the token axis), so the cached K/V no longer line up with the query heads and the "
          "second step raises",
          dwc_cat_heads_dim),
    Entry("decode_with_cache", "wrong", "causal_mask_per_step",
          "applies a causal tril mask to each step's (1, t+1) scores; aligned top-left, it "
          "leaves only key 0 visible, although the new token may attend every cached key",
          dwc_step_causal_mask),
    Entry("decode_with_cache", "wrong", "float32_cache",
          "allocates the cache with torch.zeros' default float32 dtype, so the score product "
          "with a float64 or float16 query raises a dtype mismatch",
          dwc_float32_cache),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, dwc_list_cache_sdpa),
    Entry("decode_with_cache", "right", "grouped_float64_cache", None, dwc_grouped_float64),
]
