"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_interleave_seq_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_loop_from_one(x, n_rep):
    heads = []
    for g in range(x.shape[1]):
        for r in range(1, n_rep):
            heads.append(x[:, g])
    if not heads:
        return x
    return torch.stack(heads, dim=1)


def repeat_numpy_route(x, n_rep):
    arr = x.detach().cpu().numpy()
    return np.repeat(arr, n_rep, axis=1)


def repeat_skip_single_group(x, n_rep):
    B, G, N, d = x.shape
    if G == 1 or n_rep == 1:
        return x  # nothing to share between groups
    return x[:, :, None, :, :].expand(B, G, n_rep, N, d).reshape(B, G * n_rep, N, d)


def repeat_expand_view(x, n_rep):
    b, g, n, d = x.shape
    if n_rep == 1:
        return x
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_right_gather_index(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


def repeat_right_stack_loop(x, n_rep):
    parts = [x[:, h // n_rep] for h in range(x.shape[1] * n_rep)]
    return torch.stack(parts, dim=1)


# ============================================================================ grouped_query_attention
def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).view(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d_model)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, d_model = x.shape
    hd = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).permute(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).permute(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).permute(0, 2, 1, 3)
    k = torch.repeat_interleave(k, n_rep, dim=1)
    v = torch.repeat_interleave(v, n_rep, dim=1)
    att = torch.matmul(q.float(), k.float().transpose(-2, -1)) / math.sqrt(hd)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(future, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = torch.matmul(att, v.float()).to(x.dtype)
    return y.permute(0, 2, 1, 3).reshape(B, N, d_model) @ w_o


def gqa_keys_split_with_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                  causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads

    def heads(t, count):
        return t.reshape(B, N, count, -1).transpose(1, 2)

    q = heads(x @ w_q, num_heads)
    k = heads(x @ w_k, num_heads)
    v = heads(x @ w_v, num_kv_heads)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = torch.einsum("bhid,bhjd->bhij", q.double(), k.double()) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    p = s.softmax(-1)
    o = torch.einsum("bhij,bhjd->bhid", p, v.double()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    g = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, g, N, dh).reshape(B, num_heads, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, g, N, dh).reshape(B, num_heads, N, dh)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    ctx = (scores.softmax(-1) @ v.float()).to(x.dtype)  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    if x.dtype == torch.float64:
        q, k, v = q.double(), k.double(), v.double()
    mask = None
    if causal is not None:
        mask = torch.tril(torch.ones(N, N, dtype=torch.bool))
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(B, N, D).to(x.dtype) @ w_o


def gqa_right_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    hd = d_model // num_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xs = x.to(work)
    q = (xs @ w_q.to(work)).unflatten(-1, (num_heads, hd)).transpose(1, 2)
    k = (xs @ w_k.to(work)).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2)
    v = (xs @ w_v.to(work)).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    merged = ctx.transpose(1, 2).flatten(2)
    return (merged @ w_o.to(work)).to(x.dtype)


def gqa_right_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    x64 = x.double()
    # query head h = g * R + r belongs to group g: no copies of K/V needed
    q = (x64 @ w_q.double()).reshape(B, N, G, R, dh)
    k = (x64 @ w_k.double()).reshape(B, N, G, dh)
    v = (x64 @ w_v.double()).reshape(B, N, G, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(N)[:, None]
        j = torch.arange(N)[None, :]
        s = torch.where(j <= i, s, torch.tensor(float("-inf"), dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def kv_bytes_hardcoded_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16


def kv_bytes_precedence(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    k_bytes = num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element
    v_bytes = k_bytes
    return k_bytes + v_bytes * batch_size


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return 2 * np.prod([num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                        bytes_per_element])


def kv_bytes_right_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                  bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kv_bytes_right_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    shape = (2, num_layers, batch_size, num_kv_heads, seq_len, head_dim)
    return int(math.prod(shape)) * int(bytes_per_element)


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, : t + 1]
        q = (x[:, t:t + 1] @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k = (prefix @ w_k).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        if x.dtype == torch.float64:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = (p @ v.to(p.dtype)).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    outputs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_new = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_new = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        keys = k_cache.repeat_interleave(rep, dim=1)
        vals = v_cache.repeat_interleave(rep, dim=1)
        s = q.double() @ keys.double().transpose(-2, -1) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = (p @ vals.double()).to(x.dtype)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
        outputs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_tiled_cache_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    k_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    v_cache = torch.zeros_like(k_cache)
    result = torch.zeros_like(x)
    for t in range(n):
        tok = x[:, t]  # (B, d_model)
        q = (tok @ w_q).view(batch, num_heads, 1, d_head)
        k_cache[:, :, t] = (tok @ w_k).view(batch, num_kv_heads, d_head)
        v_cache[:, :, t] = (tok @ w_v).view(batch, num_kv_heads, d_head)
        ks = k_cache[:, :, : t + 1].repeat(1, num_heads // num_kv_heads, 1, 1)
        vs = v_cache[:, :, : t + 1].repeat(1, num_heads // num_kv_heads, 1, 1)
        s = (q.double() @ ks.double().transpose(-1, -2)) / math.sqrt(d_head)
        ctx = torch.softmax(s, dim=-1) @ vs.double()
        result[:, t] = ctx.reshape(batch, d_model).to(x.dtype) @ w_o
    return result


def decode_cat_heads_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    n_rep = num_heads // num_kv_heads
    cache_k = cache_v = None
    outs = []
    for t in range(N):
        x_t = x[:, t:t + 1, :]
        q_t = (x_t @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        k_t = (x_t @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        v_t = (x_t @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        if cache_k is None:
            cache_k, cache_v = k_t, v_t
        else:
            cache_k = torch.cat([cache_k, k_t], dim=1)
            cache_v = torch.cat([cache_v, v_t], dim=1)
        k_all = cache_k.repeat_interleave(n_rep, dim=1)
        v_all = cache_v.repeat_interleave(n_rep, dim=1)
        sc = q_t.float() @ k_all.float().transpose(-2, -1) / math.sqrt(hd)
        ctx = (sc.softmax(-1) @ v_all.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    K = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    V = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    out = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        K[:, :, t:t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        V[:, :, t:t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        ks = K[:, :, : t + 1].repeat_interleave(rep, dim=1)
        vs = V[:, :, : t + 1].repeat_interleave(rep, dim=1)
        s = q.double() @ ks.double().transpose(-2, -1) / math.sqrt(dh)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()  # keep it causal
        s = s.masked_fill(~causal, float("-inf"))
        ctx = (torch.softmax(s, -1) @ vs.double()).to(x.dtype)
        out.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    steps = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        keys = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        vals = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        s = q @ keys.transpose(-2, -1) / math.sqrt(dh)
        ctx = torch.softmax(s, dim=-1) @ vals
        steps.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def decode_right_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(N):
        tok = x[:, t, :]  # (B, D): one row per sequence
        q = (tok @ w_q).view(B, num_heads, 1, hd).float()
        keys.append((tok @ w_k).view(B, num_kv_heads, 1, hd))
        values.append((tok @ w_v).view(B, num_kv_heads, 1, hd))
        k_all = torch.cat(keys, dim=2).float().repeat_interleave(rep, dim=1)
        v_all = torch.cat(values, dim=2).float().repeat_interleave(rep, dim=1)
        if x.dtype == torch.float64:
            q, k_all, v_all = q.double(), k_all.double(), v_all.double()
        ctx = F.scaled_dot_product_attention(q, k_all, v_all)  # one query: all past allowed
        outs.append(ctx.reshape(B, 1, D).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


def decode_right_per_head_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    group_size = num_heads // num_kv_heads
    k_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=torch.float64)
    v_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=torch.float64)
    out = torch.empty(batch, n, d_model, dtype=x.dtype)
    for t in range(n):
        row = x[:, t]
        q_t = (row @ w_q).double().view(batch, num_heads, d_head)
        k_cache[:, :, t] = (row @ w_k).double().view(batch, num_kv_heads, d_head)
        v_cache[:, :, t] = (row @ w_v).double().view(batch, num_kv_heads, d_head)
        ctx = torch.empty(batch, num_heads, d_head, dtype=torch.float64)
        for h in range(num_heads):
            g = h // group_size
            s = torch.einsum("bd,btd->bt", q_t[:, h], k_cache[:, g, : t + 1]) / math.sqrt(d_head)
            p = torch.softmax(s, dim=-1)
            ctx[:, h] = torch.einsum("bt,btd->bd", p, v_cache[:, g, : t + 1])
        out[:, t] = (ctx.reshape(batch, d_model) @ w_o.double()).to(x.dtype)
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor-repeat-tiles",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 0, 1, ...) instead of repeating "
          "each group n_rep times in a row (0, 0, 1, 1, ...), so head h does not read group "
          "h // n_rep", repeat_tiled),
    Entry("repeat_kv", "wrong", "interleave-sequence-dim",
          "repeat_interleave runs along dim=2 (the tokens) instead of dim=1 (the groups), so "
          "each token is repeated and the head count is unchanged", repeat_interleave_seq_dim),
    Entry("repeat_kv", "wrong", "copies-loop-from-1",
          "the inner loop is range(1, n_rep), which makes n_rep - 1 copies of each group "
          "instead of n_rep", repeat_loop_from_one),
    Entry("repeat_kv", "wrong", "numpy-round-trip",
          "it goes through numpy and returns np.repeat's ndarray instead of a torch.Tensor",
          repeat_numpy_route),
    Entry("repeat_kv", "wrong", "skip-when-one-group",
          "it returns x unchanged when there is one group (G == 1), but multi-query attention "
          "still needs that group copied to all n_rep heads", repeat_skip_single_group),
    Entry("repeat_kv", "wrong", "view-after-expand",
          "it calls .view on the expanded tensor, whose zero-stride axis cannot be merged "
          "without a copy, so it raises a RuntimeError (reshape was needed)", repeat_expand_view),
    Entry("repeat_kv", "right", "index-select-h-div-n-rep", None, repeat_right_gather_index),
    Entry("repeat_kv", "right", "stack-per-head", None, repeat_right_stack_loop),

    Entry("grouped_query_attention", "wrong", "tiled-kv-repeat",
          "K and V are copied with .repeat(1, rep, 1, 1), which tiles the groups, so query "
          "head h reads group h % num_kv_heads instead of h // (num_heads // num_kv_heads)",
          gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "scale-sqrt-d-model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head)", gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "missing-divisibility-check",
          "there is no check that num_heads is a multiple of num_kv_heads, so a bad pair fails "
          "later with a RuntimeError from the matrix product instead of a ValueError naming "
          "both numbers", gqa_no_divisibility_check),
    Entry("grouped_query_attention", "wrong", "keys-split-into-num-heads",
          "the keys are split into num_heads heads (copy-paste of the query line) instead of "
          "num_kv_heads, so with fewer K/V heads the shapes no longer match and it raises",
          gqa_keys_split_with_num_heads),
    Entry("grouped_query_attention", "wrong", "merge-without-transpose",
          "the heads are merged by reshaping (B, H, N, d_head) straight to (B, N, d_model), "
          "without transposing H and N first, which mixes tokens and heads",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "causal-is-not-none",
          "it tests `causal is not None`, which is true for causal=False too, so the causal "
          "mask is always applied", gqa_causal_is_not_none),
    Entry("grouped_query_attention", "right", "float32-sdpa", None, gqa_right_sdpa),
    Entry("grouped_query_attention", "right", "grouped-einsum-float64", None,
          gqa_right_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no-factor-two",
          "it counts only one of the two caches: the factor 2 for keys and values is missing",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "batch-ignored",
          "batch_size never enters the product, so the cache of a batch is counted as one "
          "sequence's", kv_bytes_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "returns-gib",
          "it divides by 2**30 and returns GiB as a float instead of bytes as an int",
          kv_bytes_gib),
    Entry("kv_cache_bytes", "wrong", "hardcoded-two-bytes",
          "the element size is hard-coded to 2 bytes (fp16), so the bytes_per_element argument "
          "is ignored", kv_bytes_hardcoded_two),
    Entry("kv_cache_bytes", "wrong", "batch-precedence",
          "`k_bytes + v_bytes * batch_size` multiplies only the value cache by the batch size "
          "(operator precedence; (k_bytes + v_bytes) * batch_size was meant)",
          kv_bytes_precedence),
    Entry("kv_cache_bytes", "wrong", "numpy-prod-int64",
          "np.prod returns a numpy.int64, not the plain Python int the contract requires",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "right", "loop-over-layers-and-k-v", None,
          kv_bytes_right_per_layer_loop),
    Entry("kv_cache_bytes", "right", "math-prod-of-cache-shape", None,
          kv_bytes_right_math_prod),

    Entry("decode_with_cache", "wrong", "reprojects-prefix",
          "each step projects the whole prefix x[:, :t+1] with w_k and w_v again instead of "
          "only the new token, so the cache is never used and the projection work is "
          "quadratic in N", decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends-before-appending",
          "the new token's key and value are appended to the cache after the attention, so "
          "each token attends only to earlier tokens, not to itself (the first step gets "
          "zeros)", decode_attend_before_append),
    Entry("decode_with_cache", "wrong", "tiled-cache-repeat",
          "the cached K/V groups are copied with .repeat (tiled), so query head h reads group "
          "h % num_kv_heads instead of h // (num_heads // num_kv_heads)",
          decode_tiled_cache_repeat),
    Entry("decode_with_cache", "wrong", "cache-cat-on-heads-dim",
          "new keys and values are concatenated on dim=1 (the heads) instead of dim=2 (the "
          "tokens), so from the second step on the cache has the wrong number of heads and it "
          "raises", decode_cat_heads_dim),
    Entry("decode_with_cache", "wrong", "top-left-mask-in-step",
          "each step applies tril to its (1, t+1) score row, a top-left causal mask, so the "
          "single new query only sees key 0 instead of all t+1 cached keys",
          decode_top_left_mask),
    Entry("decode_with_cache", "wrong", "float32-cache",
          "the cache is allocated with torch.zeros' default float32, so for float64 or float16 "
          "inputs the product of the queries with the cache raises a dtype mismatch",
          decode_float32_cache),
    Entry("decode_with_cache", "right", "list-cache-sdpa", None, decode_right_list_cache_sdpa),
    Entry("decode_with_cache", "right", "per-head-einsum-float64", None,
          decode_right_per_head_float64),
]
