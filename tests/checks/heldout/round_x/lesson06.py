"""Held-out catalogue, lesson 06 (GQA, MQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

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


def repeat_kv_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_directly(x, n_rep):
    B, G, N, d = x.shape
    return x.expand(B, G * n_rep, N, d)


def repeat_kv_guard_wrong_variable(x, n_rep):
    if x.shape[1] == 1:  # nothing to repeat
        return x
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)


def repeat_kv_reshape_minus_one(x, n_rep):
    b, g, n, d = x.shape
    y = x.unsqueeze(2).expand(-1, -1, n_rep, -1, -1)
    return y.reshape(b, -1, n, d)


def repeat_kv_no_reshape(x, n_rep):
    B, G, N, d = x.shape
    return x[:, :, None, :, :].expand(B, G, n_rep, N, d)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_kv_stack_loop(x, n_rep):
    heads = [x[:, h // n_rep] for h in range(x.shape[1] * n_rep)]
    return torch.stack(heads, dim=1)


# ============================================================================ grouped_query_attention
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat(1, rep, 1, 1)
    v = v.repeat(1, rep, 1, 1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).view(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).view(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).view(b, n, num_kv_heads, d_head).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
        s = s.masked_fill(~future, float("-inf"))
    p = s.softmax(dim=-1)
    p = torch.nan_to_num(p, nan=0.0)
    out = torch.matmul(p, v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, hd).permute(0, 2, 1, 3)
    K = (x @ w_k).reshape(B, N, num_kv_heads, hd).permute(0, 2, 1, 3)
    V = (x @ w_v).reshape(B, N, num_kv_heads, hd).permute(0, 2, 1, 3)
    g = num_heads // num_kv_heads
    K = K[:, :, None].expand(B, num_kv_heads, g, N, hd).reshape(B, num_heads, N, hd)
    V = V[:, :, None].expand(B, num_kv_heads, g, N, hd).reshape(B, num_heads, N, hd)
    S = torch.einsum("bhqd,bhkd->bhqk", Q.float(), K.float()) / math.sqrt(D)
    if causal:
        S = S.masked_fill(torch.ones(N, N, dtype=torch.bool).tril().logical_not(), -math.inf)
    A = torch.softmax(S, dim=-1)
    O = torch.einsum("bhqk,bhkd->bhqd", A, V.float()).to(x.dtype)
    return O.permute(0, 2, 1, 3).reshape(B, N, D) @ w_o


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, seq, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, seq, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, seq, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) * (1.0 / math.sqrt(d_head))
    if causal:
        mask = torch.tril(torch.ones(seq, seq, device=x.device)).bool()
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    ctx = (weights @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, seq, d_model) @ w_o


def gqa_softmax_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32)  # accurate for half inputs
    ctx = weights @ v
    return ctx.transpose(1, 2).reshape(B, N, D).to(x.dtype) @ w_o


def gqa_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype)  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def gqa_sdpa_float32(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    work = torch.promote_types(x.dtype, torch.float32)
    ctx = F.scaled_dot_product_attention(q.to(work), k.to(work), v.to(work), is_causal=causal)
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


def gqa_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    xd = x.double()
    B, N, D = x.shape
    dh = D // num_heads
    per_group = num_heads // num_kv_heads
    q_all = xd @ w_q.double()
    k_all = xd @ w_k.double()
    v_all = xd @ w_v.double()
    heads = []
    for h in range(num_heads):
        g = h // per_group
        qh = q_all[..., h * dh:(h + 1) * dh]
        kh = k_all[..., g * dh:(g + 1) * dh]
        vh = v_all[..., g * dh:(g + 1) * dh]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            i = torch.arange(N)[:, None]
            j = torch.arange(N)[None, :]
            s = torch.where(j <= i, s, torch.tensor(float("-inf"), dtype=s.dtype))
        heads.append(torch.softmax(s, dim=-1) @ vh)
    merged = torch.cat(heads, dim=-1)
    return (merged @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_hardcoded_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16: 2 bytes per element


def kv_bytes_seq_minus_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    cached = seq_len - 1  # the newest token's K and V are not in the cache yet
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


def kv_bytes_mib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total // 2 ** 20


def kv_bytes_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    factors = (2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    return functools.reduce(operator.mul, factors, 1)


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("keys", "values"):
            total += torch.Size([batch_size, num_kv_heads, seq_len, head_dim]).numel() \
                * bytes_per_element
    return total


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t:t + 1] @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k = (x[:, :t + 1] @ w_k).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (x[:, :t + 1] @ w_v).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_whole_preallocated_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    out = torch.empty_like(x)
    for t in range(N):
        xt = x[:, t]  # (B, D)
        q = (xt @ w_q).view(B, num_heads, 1, dh)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, dh)
        k = k_cache.repeat_interleave(rep, dim=1)
        v = v_cache.repeat_interleave(rep, dim=1)
        s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(dh)
        ctx = torch.softmax(s, dim=-1) @ v.float()
        out[:, t] = ctx.reshape(B, D).to(x.dtype) @ w_o
    return out


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.empty(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    v_cache = torch.empty(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    steps = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).reshape(batch, 1, num_heads, d_head).transpose(1, 2)
        k_seen = k_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        v_seen = v_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        scores = q_t.float() @ k_seen.float().transpose(-2, -1) / math.sqrt(d_head)
        ctx = (torch.softmax(scores, dim=-1) @ v_seen.float()).to(x.dtype)
        steps.append(ctx.transpose(1, 2).reshape(batch, 1, d_model) @ w_o)
        k_cache[:, :, t:t + 1] = (x_t @ w_k).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (x_t @ w_v).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
    return torch.cat(steps, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    g = num_heads // num_kv_heads
    keys, values, result = [], [], []
    for t in range(N):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((tok @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((tok @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(g, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(g, dim=1)
        s = (q.float() @ K.float().transpose(-2, -1)) / math.sqrt(dh)  # (B, H, 1, t+1)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        a = torch.softmax(s, dim=-1)
        o = (a @ V.float()).to(x.dtype)
        result.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(result, dim=1)


def decode_fp16_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    H, G = num_heads, num_kv_heads
    dh = D // H
    k_cache = torch.zeros(B, G, N, dh, dtype=torch.float16)  # KV caches are kept in fp16
    v_cache = torch.zeros(B, G, N, dh, dtype=torch.float16)
    outs = []
    for t in range(N):
        xt = x[:, t, :]
        q = (xt @ w_q).reshape(B, H, 1, dh)
        k_cache[:, :, t, :] = (xt @ w_k).reshape(B, G, dh)
        v_cache[:, :, t, :] = (xt @ w_v).reshape(B, G, dh)
        k = k_cache[:, :, :t + 1].repeat_interleave(H // G, dim=1).float()
        v = v_cache[:, :, :t + 1].repeat_interleave(H // G, dim=1).float()
        s = q.float() @ k.transpose(-2, -1) / math.sqrt(dh)
        ctx = torch.softmax(s, dim=-1) @ v
        outs.append(ctx.reshape(B, 1, D).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


def decode_softmax_wrong_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(bsz, num_kv_heads, n, d_head, dtype=x.dtype)
    v_cache = torch.empty(bsz, num_kv_heads, n, d_head, dtype=x.dtype)
    pieces = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(bsz, 1, num_heads, d_head).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).reshape(bsz, 1, num_kv_heads, d_head).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(bsz, 1, num_kv_heads, d_head).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        att = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(d_head)  # (B, H, 1, t+1)
        att = torch.softmax(att, dim=-2)
        ctx = (att @ v.float()).to(x.dtype)
        pieces.append(ctx.transpose(1, 2).reshape(bsz, 1, d_model) @ w_o)
    return torch.cat(pieces, dim=1)


def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    k_cache = None
    v_cache = None
    outs = []
    for t in range(N):
        xt = x[:, t]  # (B, D): only the new token
        q = (xt @ w_q).view(B, num_heads, 1, dh)
        k_new = (xt @ w_k).view(B, num_kv_heads, 1, dh)
        v_new = (xt @ w_v).view(B, num_kv_heads, 1, dh)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=2)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=2)
        rep = num_heads // num_kv_heads
        ctx = F.scaled_dot_product_attention(
            q.to(work),
            k_cache.repeat_interleave(rep, dim=1).to(work),
            v_cache.repeat_interleave(rep, dim=1).to(work),
        )
        outs.append(ctx.reshape(B, D).to(x.dtype) @ w_o)
    return torch.stack(outs, dim=1)


def decode_head_loops_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    per_group = num_heads // num_kv_heads
    wq, wk, wv, wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    cache_k = torch.zeros(B, N, num_kv_heads * dh, dtype=torch.float64)
    cache_v = torch.zeros(B, N, num_kv_heads * dh, dtype=torch.float64)
    out = torch.zeros(B, N, D, dtype=torch.float64)
    for t in range(N):
        xt = x[:, t].double()
        qt = xt @ wq
        cache_k[:, t] = xt @ wk
        cache_v[:, t] = xt @ wv
        ctx = torch.zeros(B, D, dtype=torch.float64)
        for h in range(num_heads):
            g = h // per_group
            qh = qt[:, h * dh:(h + 1) * dh]  # (B, dh)
            kh = cache_k[:, :t + 1, g * dh:(g + 1) * dh]  # (B, t+1, dh)
            vh = cache_v[:, :t + 1, g * dh:(g + 1) * dh]
            s = torch.einsum("bd,btd->bt", qh, kh) / math.sqrt(dh)
            p = torch.exp(s - s.max(dim=-1, keepdim=True).values)
            p = p / p.sum(dim=-1, keepdim=True)
            ctx[:, h * dh:(h + 1) * dh] = torch.einsum("bt,btd->bd", p, vh)
        out[:, t] = ctx @ wo
    return out.to(x.dtype)


ENTRIES = [
    # repeat_kv
    Entry("repeat_kv", "wrong", "repeat_tiles",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 0, 1, ...), so head h reads group "
          "h % G instead of h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_on_tokens",
          "repeat_interleave on dim=2 repeats the tokens instead of the K/V heads (dim=1), "
          "giving (B, G, N*n_rep, d)",
          repeat_kv_interleave_tokens),
    Entry("repeat_kv", "wrong", "expand_non_singleton",
          "calls x.expand(B, G*n_rep, N, d) directly, but expand can only grow axes of size 1, "
          "so it raises whenever G > 1",
          repeat_kv_expand_directly),
    Entry("repeat_kv", "wrong", "shortcut_tests_groups",
          "the early return tests x.shape[1] == 1 (one group) instead of n_rep == 1, so with a "
          "single K/V head nothing is repeated",
          repeat_kv_guard_wrong_variable),
    Entry("repeat_kv", "wrong", "reshape_minus_one_empty",
          "reshapes with -1 for the head axis, which torch cannot infer when the tensor is "
          "empty (N = 0), so a zero-length sequence raises",
          repeat_kv_reshape_minus_one),
    Entry("repeat_kv", "wrong", "expand_without_reshape",
          "returns the expanded (B, G, n_rep, N, d) view without merging G and n_rep into one "
          "head axis",
          repeat_kv_no_reshape),
    Entry("repeat_kv", "right", "index_select_floor_div", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "stack_loop", None, repeat_kv_stack_loop),
    # grouped_query_attention
    Entry("grouped_query_attention", "wrong", "groups_tiled_with_repeat",
          "repeats the K/V heads with .repeat (tiling), so query head h uses group h % G "
          "instead of h // (H / G)",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "mask_fills_the_past",
          "builds the 'future' mask with triu(diagonal=1) and then fills ~future with -inf, so "
          "each query sees only the keys after it (and the last row is empty)",
          gqa_mask_inverted),
    Entry("grouped_query_attention", "wrong", "scale_by_d_model",
          "divides the scores by sqrt(d_model) instead of sqrt(d_head)",
          gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "no_head_count_check",
          "does not check that num_heads is a multiple of num_kv_heads, so a bad pair fails "
          "later with a RuntimeError from the matmul instead of a ValueError naming both numbers",
          gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "softmax_float32_not_cast_back",
          "softmax(..., dtype=torch.float32) returns float32 weights, and multiplying them by "
          "float64 (or half) values raises a dtype mismatch: the weights must be cast back (or v "
          "cast up) first",
          gqa_softmax_dtype),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "transpose(1, 2), scrambling heads and tokens",
          gqa_merge_no_transpose),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa_float32),
    Entry("grouped_query_attention", "right", "head_loop_float64", None, gqa_head_loop_float64),
    # kv_cache_bytes
    Entry("kv_cache_bytes", "wrong", "forgets_values",
          "counts only one cache tensor: the factor 2 for keys and values is missing",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "numpy_integer",
          "np.prod returns a numpy int64, not the plain Python int the contract asks for",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "ignores_batch_size",
          "never multiplies by batch_size, so it gives the cache of one sequence",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "hardcodes_two_bytes",
          "multiplies by a hard-coded 2 (fp16) instead of bytes_per_element",
          kv_bytes_hardcoded_fp16),
    Entry("kv_cache_bytes", "wrong", "seq_len_minus_one",
          "counts seq_len - 1 cached tokens, but the cache holds K and V for all seq_len "
          "tokens",
          kv_bytes_seq_minus_one),
    Entry("kv_cache_bytes", "wrong", "returns_mib",
          "divides by 2**20 and returns MiB instead of bytes",
          kv_bytes_mib),
    Entry("kv_cache_bytes", "right", "functools_reduce", None, kv_bytes_reduce),
    Entry("kv_cache_bytes", "right", "per_layer_tensor_sizes", None, kv_bytes_layer_loop),
    # decode_with_cache
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects keys and values of the whole prefix x[:, :t+1] again at every step instead "
          "of only the new token, so the projection work is quadratic in N (the values are "
          "right)",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends_whole_preallocated_cache",
          "attends over the whole preallocated cache at every step, including the slots not "
          "written yet (zeros), instead of the first t+1 entries",
          decode_whole_preallocated_cache),
    Entry("decode_with_cache", "wrong", "cache_updated_after_attention",
          "attends over cache[:t] before storing the new token's key and value, so a token "
          "never sees itself and the first token attends to nothing",
          decode_cache_excludes_current),
    Entry("decode_with_cache", "wrong", "top_left_mask_per_step",
          "applies a (1, t+1) causal mask built with tril, which is aligned top-left and keeps "
          "only key 0; a single new query may see the whole cache",
          decode_top_left_mask),
    Entry("decode_with_cache", "wrong", "fp16_cache",
          "allocates the K/V cache in float16 whatever the input dtype, so float32/float64 keys "
          "and values are rounded to half precision",
          decode_fp16_cache),
    Entry("decode_with_cache", "wrong", "softmax_over_query_axis",
          "the step's softmax runs over dim=-2, the single query, instead of dim=-1 (the cached "
          "keys), so every weight is 1",
          decode_softmax_wrong_dim),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, decode_list_cache_sdpa),
    Entry("decode_with_cache", "right", "head_loops_float64", None, decode_head_loops_float64),
]
