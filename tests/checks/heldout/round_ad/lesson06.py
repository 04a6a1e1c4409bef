"""Held-out catalogue, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache): torch."""

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


def repeat_kv_sequence_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_kv_expand_direct(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_skip_single_group(x, n_rep):
    B, G, N, D = x.shape
    if G == 1 or n_rep == 1:  # one group is shared by every head already
        return x
    return x[:, :, None].expand(B, G, n_rep, N, D).reshape(B, G * n_rep, N, D)


def repeat_kv_divide_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_kv_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def repeat_kv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


# ============================================================================ grouped_query_attention
def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~allowed, float("-inf"))
    p = s.softmax(dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat(1, n_rep, 1, 1)
    v = v.repeat(1, n_rep, 1, 1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    out = (attn @ v.float()).to(x.dtype).transpose(1, 2).reshape(b, n, d_model)
    return out @ w_o


def gqa_mask_fill_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, d_model = x.shape
    hd = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(hd)
    if causal:
        may_attend = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))
        s = s.masked_fill(may_attend, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    y = torch.matmul(w, v.float()).to(x.dtype)
    return y.transpose(1, 2).reshape(B, N, d_model) @ w_o


def gqa_masked_fill_dropped(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, d_head).permute(0, 2, 1, 3)
    k = (x @ w_k).view(B, N, num_kv_heads, d_head).permute(0, 2, 1, 3)
    v = (x @ w_v).view(B, N, num_kv_heads, d_head).permute(0, 2, 1, 3)
    rep = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, rep, N, d_head).reshape(B, num_heads, N, d_head)
    v = v[:, :, None].expand(B, num_kv_heads, rep, N, d_head).reshape(B, num_heads, N, d_head)
    scores = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
        scores.masked_fill(future, float("-inf"))
    probs = scores.softmax(-1)
    ctx = torch.einsum("bhqk,bhkd->bhqd", probs, v.float()).to(x.dtype)
    return ctx.permute(0, 2, 1, 3).reshape(B, N, D) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(d_head)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    ctx = (scores.softmax(dim=-1) @ v.float()).to(x.dtype)  # (B, H, N, d_head)
    return ctx.reshape(B, N, D) @ w_o


def gqa_diagonal_excluded(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, seq, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, seq, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, seq, num_kv_heads, d_head).transpose(1, 2)
    group = num_heads // num_kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) * (1.0 / math.sqrt(d_head))
    if causal:
        allowed = torch.tril(torch.ones(seq, seq, dtype=torch.bool), diagonal=-1)
        s = s.masked_fill(~allowed, float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    p = e / torch.where(tot > 0, tot, torch.ones_like(tot))
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, seq, d_model) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).float()
    k = (x @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).float()
    v = (x @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).float()
    rep = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, rep, dim=1)
    v = torch.repeat_interleave(v, rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    hd = D // num_heads
    xd = x.double()
    q = (xd @ w_q.double()).reshape(B, N, G, R, hd)  # head h = g * R + r
    k = (xd @ w_k.double()).reshape(B, N, G, hd)
    v = (xd @ w_v.double()).reshape(B, N, G, hd)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(hd)
    if causal:
        ii = torch.arange(N)[:, None]
        jj = torch.arange(N)[None, :]
        s = s.masked_fill(jj > ii, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return 2 * np.prod([num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                        bytes_per_element])


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_hardcoded_half(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    # K and V, 2 bytes each in fp16
    return 2 * 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size


def kv_bytes_next_slot(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    slots = seq_len + 1  # room for the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * slots * batch_size * bytes_per_element


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_bytes_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    tensor_shape = (batch_size, num_kv_heads, seq_len, head_dim)
    one_tensor = functools.reduce(operator.mul, tensor_shape, 1) * bytes_per_element
    total = 0
    for _layer in range(num_layers):
        for _kind in ("k", "v"):
            total += one_tensor
    return total


# ============================================================================ decode_with_cache
def decode_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t:t + 1] @ w_q).view(B, 1, num_heads, hd).transpose(1, 2)
        prefix = x[:, :t + 1]
        k = (prefix @ w_k).view(B, t + 1, num_kv_heads, hd).transpose(1, 2)
        v = (prefix @ w_v).view(B, t + 1, num_kv_heads, hd).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1).float()
        v = v.repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        ctx = (p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        outs.append(ctx @ w_o)
    return torch.cat(outs, dim=1)


def decode_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, hd, dtype=x.dtype)
    v_cache = torch.zeros(B, num_kv_heads, N, hd, dtype=x.dtype)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, hd).transpose(1, 2).float()
        k_cache[:, :, t:t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, hd).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, hd).transpose(1, 2)
        keys = k_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        vals = v_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        s = q @ keys.transpose(-2, -1) / math.sqrt(hd)
        if t == 0:
            ctx = torch.zeros(B, num_heads, 1, hd)
        else:
            ctx = torch.softmax(s, dim=-1) @ vals
        outs.append(ctx.to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    cache = {"k": None, "v": None}
    result = []
    for t in range(n):
        tok = x[:, t]  # (B, d_model)
        q = (tok @ w_q).view(batch, num_heads, 1, d_head)
        k_new = (tok @ w_k).view(batch, num_kv_heads, 1, d_head)
        v_new = (tok @ w_v).view(batch, num_kv_heads, 1, d_head)
        cache["k"] = k_new
        cache["v"] = v_new
        k_all = cache["k"].repeat_interleave(rep, dim=1).float()
        v_all = cache["v"].repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q.float() @ k_all.transpose(-1, -2) / math.sqrt(d_head), dim=-1)
        ctx = (w @ v_all).to(x.dtype).reshape(batch, d_model)
        result.append(ctx @ w_o)
    return torch.stack(result, dim=1)


def decode_cat_heads_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = None
    v_cache = None
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1, :]
        q = (xt @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        k = (xt @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        v = (xt @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        k_cache = k if k_cache is None else torch.cat([k_cache, k], dim=1)
        v_cache = v if v_cache is None else torch.cat([v_cache, v], dim=1)
        kk = torch.repeat_interleave(k_cache, rep, dim=1).float()
        vv = torch.repeat_interleave(v_cache, rep, dim=1).float()
        att = torch.softmax(q.float() @ kk.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        ctx = (att @ vv).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        outs.append(ctx @ w_o)
    return torch.cat(outs, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, hd).transpose(1, 2).float()
        ks.append((xt @ w_k).view(B, 1, num_kv_heads, hd).transpose(1, 2))
        vs.append((xt @ w_v).view(B, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        s = q @ K.transpose(-2, -1) / math.sqrt(hd)  # (B, H, 1, t + 1)
        causal = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))
        s = s.masked_fill(~causal, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ V
        outs.append(ctx.to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_returns_last_step(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, 0, hd, dtype=x.dtype)
    v_cache = torch.empty(B, num_kv_heads, 0, hd, dtype=x.dtype)
    y = None
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, hd).transpose(1, 2)
        k_cache = torch.cat([k_cache, (xt @ w_k).view(B, 1, num_kv_heads, hd).transpose(1, 2)], 2)
        v_cache = torch.cat([v_cache, (xt @ w_v).view(B, 1, num_kv_heads, hd).transpose(1, 2)], 2)
        k = k_cache.repeat_interleave(rep, dim=1).float()
        v = v_cache.repeat_interleave(rep, dim=1).float()
        a = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        y = (a @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o
    return y


def decode_lists_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, steps = [], [], []
    for t in range(N):
        tok = x[:, t, :]  # (B, D): only the new token is projected
        q = (tok @ w_q).view(B, num_heads, 1, hd).float()
        keys.append((tok @ w_k).view(B, num_kv_heads, 1, hd))
        values.append((tok @ w_v).view(B, num_kv_heads, 1, hd))
        K = torch.repeat_interleave(torch.cat(keys, dim=2), rep, dim=1).float()
        V = torch.repeat_interleave(torch.cat(values, dim=2), rep, dim=1).float()
        ctx = F.scaled_dot_product_attention(q, K, V)  # the new query may see every cached key
        steps.append(ctx.to(x.dtype).reshape(B, D) @ w_o)
    return torch.stack(steps, dim=1)


def decode_preallocated_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    g = num_kv_heads
    r = num_heads // g
    hd = d // num_heads
    kc = torch.zeros(b, n, g, hd, dtype=torch.float64)
    vc = torch.zeros(b, n, g, hd, dtype=torch.float64)
    out = torch.zeros(b, n, d, dtype=x.dtype)
    for t in range(n):
        xt = x[:, t]  # (b, d)
        q = (xt @ w_q).double().reshape(b, g, r, hd)
        kc[:, t] = (xt @ w_k).double().reshape(b, g, hd)
        vc[:, t] = (xt @ w_v).double().reshape(b, g, hd)
        s = torch.einsum("bgrd,bjgd->bgrj", q, kc[:, :t + 1]) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrj,bjgd->bgrd", p, vc[:, :t + 1]).reshape(b, d)
        out[:, t] = ctx.to(x.dtype) @ w_o
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...), so head h "
          "reads group h % G instead of h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_sequence_dim",
          "repeats along dim=2 (the sequence axis) instead of dim=1 (the groups), so it repeats "
          "tokens, not heads",
          repeat_kv_sequence_dim),
    Entry("repeat_kv", "wrong", "interleave_without_dim",
          "calls repeat_interleave without dim, which flattens the tensor and returns a 1-D "
          "result",
          repeat_kv_no_dim),
    Entry("repeat_kv", "wrong", "expand_non_singleton",
          "expands the group axis directly to G*n_rep; expand only broadcasts length-1 axes, so "
          "it raises whenever G > 1",
          repeat_kv_expand_direct),
    Entry("repeat_kv", "wrong", "single_group_shortcut",
          "returns x unchanged when G == 1, thinking one shared group needs no copies, so MQA "
          "inputs keep 1 head instead of n_rep",
          repeat_kv_skip_single_group),
    Entry("repeat_kv", "wrong", "index_divides_by_groups",
          "picks group h // G for head h (divides by the number of groups instead of n_rep), so "
          "the heads read the wrong groups, or an index out of range raises",
          repeat_kv_divide_by_groups),
    Entry("repeat_kv", "right", "repeat_interleave_dim1", None, repeat_kv_interleave),
    Entry("repeat_kv", "right", "index_select", None, repeat_kv_index_select),

    Entry("grouped_query_attention", "wrong", "no_divisibility_check",
          "never checks that num_heads is a multiple of num_kv_heads, so num_heads=4, "
          "num_kv_heads=3 fails later with a RuntimeError instead of a ValueError naming both",
          gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "tiled_kv_heads",
          "repeats the K/V heads with .repeat (tiled), so query head h uses group h % G "
          "instead of h // n_rep",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "masked_fill_where_allowed",
          "fills -inf where the tril mask is True (the allowed keys), reading True as 'masked' "
          "although the mask says may attend",
          gqa_mask_fill_inverted),
    Entry("grouped_query_attention", "wrong", "masked_fill_result_dropped",
          "calls scores.masked_fill(...) (not in place) and discards its result, so causal=True "
          "has no effect",
          gqa_masked_fill_dropped),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges the heads with reshape(B, N, d_model) straight from (B, H, N, d_head) without "
          "transposing back, so tokens and heads get scrambled",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "causal_diagonal_excluded",
          "builds the causal mask with tril(diagonal=-1), so a query may not attend its own "
          "token (and the first query sees nothing)",
          gqa_diagonal_excluded),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None, gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "forgets the factor 2: counts the K cache only, not K and V",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8, giving bits instead of bytes",
          kv_bytes_bits),
    Entry("kv_cache_bytes", "wrong", "numpy_prod_int64",
          "multiplies with np.prod, so the result is a numpy int64, not a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "batch_ignored",
          "leaves batch_size out of the product, so the cache of a batch is counted as one "
          "sequence's",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "hard-codes 2 bytes per element (fp16) instead of using bytes_per_element",
          kv_bytes_hardcoded_half),
    Entry("kv_cache_bytes", "wrong", "extra_token_slot",
          "counts seq_len + 1 positions (a slot for the next token) instead of seq_len",
          kv_bytes_next_slot),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "loop_over_layers_k_v", None, kv_bytes_per_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects keys and values of the whole prefix x[:, :t+1] at every step instead of "
          "caching them: right values but quadratic projection work",
          decode_reproject_prefix),
    Entry("decode_with_cache", "wrong", "current_token_excluded",
          "attends over cache[:t] instead of cache[:t+1], so each token misses its own key and "
          "value and the first step outputs zeros",
          decode_excludes_current),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key/value to the cache instead of appending, so each token attends "
          "only to itself",
          decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "cache_grows_on_heads_axis",
          "concatenates the new key/value along dim=1 (the heads) instead of dim=2 (the "
          "sequence), so the cache grows in heads and from the second step on the head counts no "
          "longer match and it raises",
          decode_cat_heads_axis),
    Entry("decode_with_cache", "wrong", "top_left_step_mask",
          "applies a top-left causal mask tril(ones(1, t+1)) to the single new query, so it may "
          "only see key 0 instead of every cached key (the mask must be bottom-right aligned)",
          decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "returns_last_step_only",
          "returns only the last step's output (B, 1, d_model) instead of concatenating all N "
          "steps",
          decode_returns_last_step),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, decode_lists_sdpa),
    Entry("decode_with_cache", "right", "preallocated_float64_einsum", None,
          decode_preallocated_float64),
]
