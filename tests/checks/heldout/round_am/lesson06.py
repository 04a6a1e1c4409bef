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


def repeat_kv_token_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_no_axis(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_none_for_one(x, n_rep):
    if n_rep > 1:
        b, g, n, d = x.shape
        x = x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)
        return x


def repeat_kv_divides_by_groups(x, n_rep):
    B, G, N, D = x.shape
    out = x.new_empty((B, G * n_rep, N, D))
    for h in range(G * n_rep):
        out[:, h] = x[:, h // G]
    return out


def repeat_kv_view_expanded(x, n_rep):
    if n_rep == 1:
        return x
    bsz, groups, seq, dim = x.shape
    y = x.unsqueeze(2).expand(bsz, groups, n_rep, seq, dim)
    return y.view(bsz, groups * n_rep, seq, dim)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_kv_cat_blocks(x, n_rep):
    blocks = []
    for g in range(x.shape[1]):
        blocks.extend([x[:, g:g + 1]] * n_rep)
    return torch.cat(blocks, dim=1)


# ============================================================================ grouped_query_attention
def gqa_no_head_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_diag_excluded(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1)
        scores = scores.masked_fill(~allowed, float("-inf"))
    w = scores.softmax(dim=-1)
    out = (w @ v.float()).transpose(1, 2).reshape(B, N, D).to(x.dtype)
    return out @ w_o


def gqa_kv_split_by_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t, h):
        return t.reshape(b, n, h, -1).transpose(1, 2)

    q = heads(x @ w_q, num_heads)
    k = heads(x @ w_k, num_heads)
    v = heads(x @ w_v, num_heads)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    att = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        att = att.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v.float()).to(x.dtype)
    return y.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_ratio_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    groups = num_kv_heads // num_heads
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    s = torch.einsum("bhid,bhjd->bhij", q.float(), k.float()) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), -math.inf)
    p = s.softmax(-1)
    o = torch.einsum("bhij,bhjd->bhid", p, v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    r = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, r, N, dh).reshape(B, num_heads, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, r, N, dh).reshape(B, num_heads, N, dh)
    scores = (q @ k.transpose(-2, -1)).float() * (dh ** -0.5)
    if causal is not None:
        future = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = scores.softmax(dim=-1).to(x.dtype)
    return (weights @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_values_not_repeated(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(bsz, seq, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(bsz, seq, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(bsz, seq, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    logits = q.float() @ k.float().transpose(2, 3) / math.sqrt(d_head)
    if causal:
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        logits = logits.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    ctx = (probs @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(bsz, seq, d_model) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).float()
    k = (x @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2).float()
    v = (x @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2).float()
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


def gqa_float64_head_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    xd = x.double()
    n = x.shape[1]
    d_head = x.shape[-1] // num_heads
    group_size = num_heads // num_kv_heads
    q_all = xd @ w_q.double()
    k_all = xd @ w_k.double()
    v_all = xd @ w_v.double()
    allowed = torch.ones(n, n, dtype=torch.bool)
    if causal:
        allowed = torch.tril(allowed)
    pieces = []
    for h in range(num_heads):
        g = h // group_size
        qh = q_all[..., h * d_head:(h + 1) * d_head]
        kh = k_all[..., g * d_head:(g + 1) * d_head]
        vh = v_all[..., g * d_head:(g + 1) * d_head]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(d_head)
        s = s.masked_fill(~allowed, -math.inf)
        s = s - s.amax(dim=-1, keepdim=True)
        e = s.exp()
        pieces.append((e / e.sum(dim=-1, keepdim=True)) @ vh)
    return (torch.cat(pieces, dim=-1) @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element * 8
    return per_token * seq_len * batch_size


def kvb_numpy_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len
    return elements * bytes_per_element


def kvb_extra_slot(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    tokens = seq_len + 1  # the cached tokens plus the one being generated
    return 2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_element


def kvb_half_counted_twice(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    k_and_v = 2
    fp16 = 2
    return (k_and_v * fp16 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
            * bytes_per_element)


def kvb_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kvb_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    dims = (2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    return functools.reduce(operator.mul, (int(v) for v in dims), 1)


# ============================================================================ decode_with_cache
def dec_project_all_upfront(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    Q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    K = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    V = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    outs = []
    for t in range(N):
        k = K[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = V[:, :, :t + 1].repeat_interleave(rep, dim=1)
        s = (Q[:, :, t:t + 1].float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        p = s.softmax(dim=-1)
        ctx = (p @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dec_append_after_attending(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros((B, num_kv_heads, 0, dh))
    v_cache = x.new_zeros((B, num_kv_heads, 0, dh))
    outs = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).reshape(B, num_heads, 1, dh)
        k_new = (xt @ w_k).reshape(B, num_kv_heads, 1, dh)
        v_new = (xt @ w_v).reshape(B, num_kv_heads, 1, dh)
        ks = k_cache.repeat_interleave(rep, dim=1).float()
        vs = v_cache.repeat_interleave(rep, dim=1).float()
        s = q.float() @ ks.transpose(-2, -1) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.nan_to_num(p @ vs).to(x.dtype) if ks.shape[2] else q.new_zeros(q.shape)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
        outs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def dec_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(N):
        tok = x[:, t:t + 1]
        q = (tok @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((tok @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((tok @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        k = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(dh)
        causal = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))  # the step's causal mask
        scores = scores.masked_fill(~causal, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        ctx = (attn @ v.float()).to(x.dtype)
        outputs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def dec_scale_by_cache_length(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    hd = d // num_heads
    rep = num_heads // num_kv_heads
    kc = torch.empty(b, num_kv_heads, n, hd, dtype=x.dtype, device=x.device)
    vc = torch.empty_like(kc)
    result = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(b, 1, num_heads, hd).transpose(1, 2)
        kc[:, :, t:t + 1] = (xt @ w_k).reshape(b, 1, num_kv_heads, hd).transpose(1, 2)
        vc[:, :, t:t + 1] = (xt @ w_v).reshape(b, 1, num_kv_heads, hd).transpose(1, 2)
        k_all = kc[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        v_all = vc[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        s = q.float() @ k_all.transpose(-2, -1) / math.sqrt(k_all.shape[-2])
        w = s.softmax(-1)
        result.append(((w @ v_all).to(x.dtype)).transpose(1, 2).reshape(b, 1, d) @ w_o)
    return torch.cat(result, 1)


def dec_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype, device=x.device)
    v_cache = torch.zeros_like(k_cache)
    steps = []
    for t in range(N):
        xt = x[:, t:t + 1, :]
        q_t = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t] = (xt @ w_k).reshape(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).reshape(B, num_kv_heads, dh)
        k = k_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        v = v_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        s = torch.matmul(q_t.float(), k.float().transpose(-2, -1)) / math.sqrt(dh)
        a = torch.softmax(s, dim=-1)
        o = torch.matmul(a, v.float()).to(x.dtype)
        steps.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def dec_default_dtype_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        ks = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        vs = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        s = (q @ ks.transpose(-2, -1)) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        outs.append((p @ vs).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dec_list_cache_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    per_group = num_heads // num_kv_heads
    cache_k, cache_v = [], []
    rows = []
    for t in range(N):
        tok = x[:, t]  # (B, D)
        q = (tok @ w_q).double().view(B, num_heads, dh)
        cache_k.append((tok @ w_k).double().view(B, num_kv_heads, dh))
        cache_v.append((tok @ w_v).double().view(B, num_kv_heads, dh))
        K = torch.stack(cache_k, dim=2)  # (B, G, t+1, dh)
        V = torch.stack(cache_v, dim=2)
        qg = q.view(B, num_kv_heads, per_group, dh)  # heads grouped by their K/V head
        s = torch.einsum("bgrd,bgtd->bgrt", qg, K) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, V).reshape(B, D)
        rows.append(ctx.to(x.dtype) @ w_o)
    return torch.stack(rows, dim=1)


def dec_sdpa_preallocated(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, n, d_model = x.shape
    d_head = d_model // num_heads
    k_cache = x.new_empty(bsz, num_kv_heads, n, d_head, dtype=torch.float32)
    v_cache = torch.empty_like(k_cache)
    pieces = []
    for pos in range(n):
        step = x[:, pos:pos + 1]
        q = (step @ w_q).float().unflatten(-1, (num_heads, d_head)).transpose(1, 2)
        k_cache[:, :, pos] = (step @ w_k).float().reshape(bsz, num_kv_heads, d_head)
        v_cache[:, :, pos] = (step @ w_v).float().reshape(bsz, num_kv_heads, d_head)
        k = k_cache[:, :, :pos + 1].repeat_interleave(num_heads // num_kv_heads, dim=1)
        v = v_cache[:, :, :pos + 1].repeat_interleave(num_heads // num_kv_heads, dim=1)
        ctx = F.scaled_dot_product_attention(q, k, v)  # one query: every cached key allowed
        pieces.append(ctx.transpose(1, 2).reshape(bsz, 1, d_model).to(x.dtype) @ w_o)
    return torch.cat(pieces, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 0, 1, ...) instead of repeating each "
          "one in place (0, 0, 1, 1, ...), so head h does not read group h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "repeats_tokens",
          "repeat_interleave along dim=2 repeats the tokens instead of the heads (dim=1)",
          repeat_kv_token_axis),
    Entry("repeat_kv", "wrong", "expand_without_new_axis",
          "expands the group axis directly to G*n_rep, which expand only allows for an axis of "
          "size 1: it raises whenever G > 1", repeat_kv_expand_no_axis),
    Entry("repeat_kv", "wrong", "returns_none_for_n_rep_1",
          "the return sits inside `if n_rep > 1`, so n_rep == 1 returns None instead of x",
          repeat_kv_none_for_one),
    Entry("repeat_kv", "wrong", "index_divided_by_groups",
          "copies group h // G (the number of groups) instead of h // n_rep into head h",
          repeat_kv_divides_by_groups),
    Entry("repeat_kv", "wrong", "view_of_expanded",
          "calls .view on the expanded tensor, which cannot merge the broadcast axis, so it "
          "raises; reshape (which copies) is needed", repeat_kv_view_expanded),
    Entry("repeat_kv", "right", "index_select_h_div_n_rep", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "cat_of_group_slices", None, repeat_kv_cat_blocks),

    Entry("grouped_query_attention", "wrong", "no_head_count_check",
          "never checks that num_heads is a multiple of num_kv_heads, so a bad pair fails later "
          "with a RuntimeError instead of a ValueError naming both numbers",
          gqa_no_head_check),
    Entry("grouped_query_attention", "wrong", "causal_mask_excludes_diagonal",
          "tril(..., diagonal=-1) leaves out the diagonal, so no query may attend itself and the "
          "first row (no key left) becomes NaN", gqa_diag_excluded),
    Entry("grouped_query_attention", "wrong", "kv_split_into_num_heads",
          "splits keys and values into num_heads heads instead of num_kv_heads, so their head "
          "width is wrong and the products fail (or are wrong) whenever num_kv_heads < num_heads",
          gqa_kv_split_by_num_heads),
    Entry("grouped_query_attention", "wrong", "repeat_ratio_inverted",
          "computes the repeat factor upside down, num_kv_heads // num_heads, which is 0 unless "
          "num_kv_heads == num_heads, so the K/V heads vanish and GQA/MQA fail",
          gqa_ratio_inverted),
    Entry("grouped_query_attention", "wrong", "causal_tested_with_is_not_none",
          "tests `causal is not None`, which is true for causal=False too, so the mask is "
          "always applied", gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "values_not_repeated",
          "repeats the keys but forgets to repeat the values, so the weighted sum fails to "
          "broadcast whenever 1 < num_kv_heads < num_heads", gqa_values_not_repeated),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "float64_per_head_loop", None,
          gqa_float64_head_loop),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "forgets the factor 2: counts the key cache but not the value cache", kvb_keys_only),
    Entry("kv_cache_bytes", "wrong", "counts_bits",
          "multiplies by 8, returning bits instead of bytes", kvb_bits),
    Entry("kv_cache_bytes", "wrong", "numpy_integer",
          "np.prod returns a numpy integer, not the plain Python int the contract asks for",
          kvb_numpy_prod),
    Entry("kv_cache_bytes", "wrong", "batch_size_left_out",
          "leaves batch_size out of the product, so it sizes the cache of one sequence",
          kvb_no_batch),
    Entry("kv_cache_bytes", "wrong", "extra_token_slot",
          "counts seq_len + 1 tokens (an extra slot for the token being generated), one token "
          "too many", kvb_extra_slot),
    Entry("kv_cache_bytes", "wrong", "half_precision_counted_twice",
          "multiplies by 2 for half precision on top of bytes_per_element, so the result is "
          "twice too large", kvb_half_counted_twice),
    Entry("kv_cache_bytes", "right", "per_layer_per_tensor_loop", None, kvb_layer_loop),
    Entry("kv_cache_bytes", "right", "reduce_mul", None, kvb_reduce),

    Entry("decode_with_cache", "wrong", "projects_all_tokens_up_front",
          "projects every token's q, k and v once before the loop, so it does not decode "
          "token by token: each step should project only the new token", dec_project_all_upfront),
    Entry("decode_with_cache", "wrong", "appends_after_attending",
          "appends the new key and value to the cache after the attention step, so each token "
          "attends only to the earlier tokens (token 0 to nothing) and never to itself",
          dec_append_after_attending),
    Entry("decode_with_cache", "wrong", "top_left_step_mask",
          "masks each step with tril(ones(1, t+1)), a top-left aligned mask, so the new query "
          "sees only the first cached key instead of all of them", dec_top_left_mask),
    Entry("decode_with_cache", "wrong", "scale_by_cache_length",
          "scales the scores by 1/sqrt(k.shape[-2]), the number of cached keys, instead of "
          "1/sqrt(d_head)", dec_scale_by_cache_length),
    Entry("decode_with_cache", "wrong", "tiled_kv_repeat",
          "expands the cached K/V heads with .repeat (tiled order), so with 1 < num_kv_heads < "
          "num_heads query head h reads group h % num_kv_heads instead of h // n_rep",
          dec_tiled_repeat),
    Entry("decode_with_cache", "wrong", "cache_default_dtype",
          "allocates the caches with torch.zeros without dtype=x.dtype, so they are float32 and "
          "the matmul with a float64/half query raises a dtype mismatch",
          dec_default_dtype_cache),
    Entry("decode_with_cache", "right", "list_cache_grouped_einsum_float64", None,
          dec_list_cache_float64),
    Entry("decode_with_cache", "right", "preallocated_float32_cache_sdpa", None,
          dec_sdpa_preallocated),
]
