"""Held-out learners' answers, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache). PyTorch lesson."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_view_expanded(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_empty_shortcut(x, n_rep):
    if x.numel() == 0:
        return x  # nothing to copy
    return x.repeat_interleave(n_rep, dim=1)


def repeat_divide_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_index_from_one(x, n_rep):
    G = x.shape[1]
    idx = torch.arange(1, G * n_rep + 1, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_builtin(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def repeat_gather_index(x, n_rep):
    B, G, N, D = x.shape
    group_of_head = torch.div(torch.arange(G * n_rep, device=x.device), n_rep,
                              rounding_mode="floor")
    return x[:, group_of_head].reshape(B, G * n_rep, N, D)


# ============================================================================ grouped_query_attention
def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(w_k.shape[1])
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    attn = torch.softmax(scores, dim=-1).to(v.dtype)
    return (attn @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_masked_fill_keep(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    group = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, group, dim=1)
    v = torch.repeat_interleave(v, group, dim=1)
    s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
        s = s.masked_fill(allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    p = torch.nan_to_num(p)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    K = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    V = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    K = K[:, :, None].expand(B, num_kv_heads, n_rep, N, hd).reshape(B, num_heads, N, hd)
    V = V[:, :, None].expand(B, num_kv_heads, n_rep, N, hd).reshape(B, num_heads, N, hd)
    scores = torch.matmul(Q, K.transpose(2, 3)).float() / math.sqrt(hd)
    if causal is not None:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(future, -math.inf)
    weights = scores.softmax(dim=-1).to(x.dtype)
    return torch.matmul(weights, V).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    bsz, seq, d_model = x.shape
    head_dim = d_model // num_heads
    q = (x @ w_q).view(bsz, seq, num_heads, head_dim).transpose(1, 2)
    k = (x @ w_k).view(bsz, seq, num_kv_heads, head_dim).transpose(1, 2)
    v = (x @ w_v).view(bsz, seq, num_kv_heads, head_dim).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    att = (q @ k.transpose(-2, -1)).float() * (1.0 / math.sqrt(head_dim))
    if causal:
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
    att = att.softmax(dim=-1).to(v.dtype)
    y = (att @ v).transpose(1, 2).contiguous().view(bsz, seq, d_model)
    return y @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    reps = num_heads // num_kv_heads
    k = torch.cat([k] * reps, dim=1)
    v = torch.cat([v] * reps, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    out = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_half_weights_mismatch(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, dm = x.shape
    hd = dm // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, hd).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(hd)
    if causal:
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = weights @ v
    return out.transpose(1, 2).reshape(b, n, dm) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    return out.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    heads, groups = num_heads, num_kv_heads
    if heads % groups != 0:
        raise ValueError(f"num_heads={heads} is not a multiple of num_kv_heads={groups}")
    b, n, d_model = x.shape
    d = d_model // heads
    r = heads // groups
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(b, n, groups, r, d)  # head h = g * r + j
    k = (x64 @ w_k.double()).reshape(b, n, groups, d)
    v = (x64 @ w_v.double()).reshape(b, n, groups, d)
    s = torch.einsum("bigjd,bkgd->bgjik", q, k) / math.sqrt(d)
    if causal:
        pos = torch.arange(n)
        s = s.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgjik,bkgd->bigjd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def kvb_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kvb_numpy_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kvb_extra_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    positions = seq_len + 1  # the prompt plus the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * positions * batch_size * bytes_per_element


def kvb_heads_twice(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    kv_width = num_kv_heads * head_dim
    elements = 2 * num_layers * num_kv_heads * kv_width * seq_len * batch_size
    return elements * bytes_per_element


def kvb_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    factors = (2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    return math.prod(factors)


def kvb_meta_tensors(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _which in ("k", "v"):
            t = torch.empty(batch_size, num_kv_heads, seq_len, head_dim, device="meta")
            total += t.numel() * bytes_per_element
    return int(total)


# ============================================================================ decode_with_cache
def decode_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        prefix = x[:, :t + 1]
        k = (prefix @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
        a = torch.softmax(s, dim=-1).to(x.dtype)
        outs.append((a @ v).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    v_cache = torch.zeros_like(k_cache)
    results = []
    for t in range(n):
        tok = x[:, t, :]
        q = (tok @ w_q).view(batch, num_heads, 1, d_head)
        k_cache[:, :, t] = (tok @ w_k).view(batch, num_kv_heads, d_head)
        v_cache[:, :, t] = (tok @ w_v).view(batch, num_kv_heads, d_head)
        keys = k_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        vals = v_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        scores = (q.float() @ keys.float().transpose(-1, -2)) / math.sqrt(d_head)
        w = torch.softmax(scores, dim=-1)
        w = torch.nan_to_num(w)
        ctx = (w @ vals.float()).to(x.dtype)
        results.append(ctx.reshape(batch, 1, d_model) @ w_o)
    return torch.cat(results, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    group = num_heads // num_kv_heads
    k_cache = v_cache = None
    ys = []
    for t in range(N):
        x_t = x[:, t:t + 1, :]
        q_t = (x_t @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        k_t = (x_t @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        v_t = (x_t @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        k_cache = k_t
        v_cache = v_t
        k_all = k_cache.repeat_interleave(group, dim=1)
        v_all = v_cache.repeat_interleave(group, dim=1)
        att = (q_t.float() @ k_all.float().transpose(2, 3)) / math.sqrt(hd)
        att = att.softmax(-1)
        y = (att @ v_all.float()).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        ys.append(y @ w_o)
    return torch.cat(ys, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    reps = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(reps, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(reps, dim=1)
        scores = (q @ K.transpose(-2, -1)).float() / math.sqrt(dh)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal, as in training
        scores = scores.masked_fill(~causal, float("-inf"))
        p = scores.softmax(dim=-1).to(x.dtype)
        outputs.append((p @ V).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(batch, num_kv_heads, n, head)
    v_cache = torch.zeros(batch, num_kv_heads, n, head)
    out = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).view(batch, 1, num_heads, head).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (x_t @ w_k).view(batch, 1, num_kv_heads, head).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (x_t @ w_v).view(batch, 1, num_kv_heads, head).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(n_rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(n_rep, dim=1)
        s = q_t @ k.transpose(-1, -2) / math.sqrt(head)
        p = torch.softmax(s.float(), dim=-1).to(x.dtype)
        out.append((p @ v).transpose(1, 2).reshape(batch, 1, d_model) @ w_o)
    return torch.cat(out, dim=1)


def decode_stack_outputs(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dm = x.shape
    hd = dm // num_heads
    r = num_heads // num_kv_heads
    kc = torch.empty(b, num_kv_heads, n, hd, dtype=x.dtype)
    vc = torch.empty(b, num_kv_heads, n, hd, dtype=x.dtype)
    steps = []
    for t in range(n):
        xt = x[:, t:t + 1]
        qt = (xt @ w_q).view(b, 1, num_heads, hd).transpose(1, 2)
        kc[:, :, t:t + 1] = (xt @ w_k).view(b, 1, num_kv_heads, hd).transpose(1, 2)
        vc[:, :, t:t + 1] = (xt @ w_v).view(b, 1, num_kv_heads, hd).transpose(1, 2)
        kk = torch.repeat_interleave(kc[:, :, :t + 1], r, dim=1)
        vv = torch.repeat_interleave(vc[:, :, :t + 1], r, dim=1)
        sc = (qt.float() @ kk.float().transpose(-2, -1)) / math.sqrt(hd)
        ctx = (sc.softmax(-1) @ vv.float()).to(x.dtype)
        steps.append(ctx.transpose(1, 2).reshape(b, 1, dm) @ w_o)
    return torch.stack(steps, dim=1)


def decode_list_cache_grouped(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    d = D // num_heads
    G = num_kv_heads
    r = num_heads // G
    k_seen = x.new_zeros(B, 0, G, d, dtype=torch.float64)
    v_seen = x.new_zeros(B, 0, G, d, dtype=torch.float64)
    rows = []
    for t in range(N):
        tok = x[:, t]  # (B, D): only the new token is projected
        q = (tok @ w_q).double().reshape(B, G, r, d)
        k_seen = torch.cat([k_seen, (tok @ w_k).double().reshape(B, 1, G, d)], dim=1)
        v_seen = torch.cat([v_seen, (tok @ w_v).double().reshape(B, 1, G, d)], dim=1)
        s = torch.einsum("bgrd,btgd->bgrt", q, k_seen) / math.sqrt(d)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,btgd->bgrd", p, v_seen).reshape(B, D)
        rows.append((ctx @ w_o.double()).to(x.dtype))
    return torch.stack(rows, dim=1)


def decode_sdpa_per_step(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    hd = d_model // num_heads
    cache_k = torch.empty(batch, num_kv_heads, n, hd, dtype=torch.float32)
    cache_v = torch.empty(batch, num_kv_heads, n, hd, dtype=torch.float32)
    pieces = []
    t = 0
    while t < n:
        new = x[:, t]
        cache_k[:, :, t] = (new @ w_k).float().view(batch, num_kv_heads, hd)
        cache_v[:, :, t] = (new @ w_v).float().view(batch, num_kv_heads, hd)
        q = (new @ w_q).float().view(batch, num_heads, 1, hd)
        k = cache_k[:, :, :t + 1].repeat_interleave(num_heads // num_kv_heads, dim=1)
        v = cache_v[:, :, :t + 1].repeat_interleave(num_heads // num_kv_heads, dim=1)
        o = F.scaled_dot_product_attention(q, k, v)  # one query sees every cached key
        pieces.append(o.to(x.dtype).reshape(batch, 1, d_model) @ w_o)
        t += 1
    return torch.cat(pieces, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) "
          "instead of repeating each group n_rep times in a row, so head h reads group "
          "h % G instead of h // n_rep",
          repeat_tiled),
    Entry("repeat_kv", "wrong", "interleave_token_axis",
          "repeat_interleaves along dim=2, the token axis, instead of dim=1, the group "
          "axis",
          repeat_interleave_tokens),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "merges the expanded axes with .view, which cannot merge an expanded (stride-0) "
          "axis with the group axis and raises; reshape (one copy) is needed",
          repeat_view_expanded),
    Entry("repeat_kv", "wrong", "empty_shortcut",
          "returns x unchanged when it is empty (N = 0), so the group axis is not "
          "multiplied by n_rep for an empty sequence",
          repeat_empty_shortcut),
    Entry("repeat_kv", "wrong", "divides_by_groups",
          "picks group h // G (the number of groups) for head h instead of h // n_rep",
          repeat_divide_by_groups),
    Entry("repeat_kv", "wrong", "index_from_one",
          "builds the head indices from torch.arange(1, G*n_rep + 1) // n_rep, one past "
          "the right ones: shifted groups and an out-of-range index",
          repeat_index_from_one),
    Entry("repeat_kv", "right", "repeat_interleave_keywords", None, repeat_builtin),
    Entry("repeat_kv", "right", "gather_with_floor_div", None, repeat_gather_index),

    Entry("grouped_query_attention", "wrong", "scale_by_kv_width",
          "scales the scores by 1/sqrt(w_k.shape[1]), the width of all K heads together "
          "(num_kv_heads * d_head), instead of 1/sqrt(d_head)",
          gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "masked_fill_keep_mask",
          "passes the keep-mask (tril, True = may attend) to masked_fill, which fills "
          "where the mask is True, so with causal=True it hides the allowed keys instead of "
          "the future ones",
          gqa_masked_fill_keep),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "tests 'if causal is not None', which is also true for causal=False, so the "
          "causal mask is always applied",
          gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "no_divisibility_check",
          "never checks that num_heads is a multiple of num_kv_heads, so a bad pair fails "
          "later with a RuntimeError from the matmul instead of a ValueError naming both",
          gqa_no_divisibility_check),
    Entry("grouped_query_attention", "wrong", "tiled_groups",
          "repeats the K/V heads with torch.cat([k] * reps, dim=1), which tiles the groups, "
          "so query head h reads group h % G instead of h // n_rep",
          gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "float32_weights_times_half_values",
          "runs the softmax in float32 but multiplies the float32 weights with the values "
          "without casting them back to the input dtype, so every input that is not "
          "float32 (float64, float16, bfloat16) raises a dtype mismatch",
          gqa_half_weights_mismatch),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None, gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no_factor_two",
          "forgets the factor 2 for keys and values: counts only one of the two caches",
          kvb_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "divides by 2**30 and returns GiB as a float instead of the number of bytes as "
          "an int",
          kvb_gib),
    Entry("kv_cache_bytes", "wrong", "ignores_batch_size",
          "never multiplies by batch_size, so it counts one sequence whatever the batch",
          kvb_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "numpy_integer",
          "multiplies the factors with np.prod, which returns a numpy integer instead of a "
          "plain Python int",
          kvb_numpy_prod),
    Entry("kv_cache_bytes", "wrong", "extra_token",
          "counts seq_len + 1 positions (the token being generated too) instead of seq_len",
          kvb_extra_token),
    Entry("kv_cache_bytes", "wrong", "heads_counted_twice",
          "multiplies by num_kv_heads and again by kv_width = num_kv_heads * head_dim, "
          "counting the heads twice",
          kvb_heads_twice),
    Entry("kv_cache_bytes", "right", "math_prod", None, kvb_math_prod),
    Entry("kv_cache_bytes", "right", "meta_tensor_loop", None, kvb_meta_tensors),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "keeping a cache and projecting only the new token (quadratic projection work)",
          decode_reproject_prefix),
    Entry("decode_with_cache", "wrong", "cache_slice_excludes_current",
          "attends over k_cache[:, :, :t], which leaves out the token just added: the "
          "first step sees no key and every step misses itself",
          decode_cache_excludes_current),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns k_cache = k_t at each step instead of appending, so each token attends "
          "only to itself",
          decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "top_left_step_mask",
          "applies a (1, t+1) tril mask to the single new query, which aligns it top-left "
          "and leaves only key 0 visible; the newest query may see every cached key",
          decode_top_left_mask),
    Entry("decode_with_cache", "wrong", "cache_default_dtype",
          "allocates the caches with torch.zeros without dtype=x.dtype, so they are "
          "float32 and the query @ keys product fails for float64 or half inputs",
          decode_cache_default_dtype),
    Entry("decode_with_cache", "wrong", "stack_outputs",
          "joins the (B, 1, d_model) step outputs with torch.stack(dim=1), which adds an "
          "axis: (B, N, 1, d_model) instead of (B, N, d_model)",
          decode_stack_outputs),
    Entry("decode_with_cache", "right", "list_cache_grouped_einsum", None,
          decode_list_cache_grouped),
    Entry("decode_with_cache", "right", "sdpa_per_step", None, decode_sdpa_per_step),
]
