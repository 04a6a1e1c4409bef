"""Held-out learners' answers, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_token_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_no_new_axis(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_by_groups(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(groups, dim=1)


def repeat_kv_view(x, n_rep):
    B, G, N, D = x.shape
    return x[:, :, None, :, :].expand(B, G, n_rep, N, D).view(B, G * n_rep, N, D)


def repeat_kv_single_group_shortcut(x, n_rep):
    B, G, N, D = x.shape
    if G == 1:
        return x  # one shared K/V head broadcasts against every query head
    y = x.unsqueeze(2).expand(B, G, n_rep, N, D)
    return y.reshape(B, G * n_rep, N, D)


def repeat_kv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_kv_cat_slices(x, n_rep):
    parts = []
    for g in range(x.shape[1]):
        parts.extend([x[:, g:g + 1]] * n_rep)
    return torch.cat(parts, dim=1)


# ============================================================================ grouped_query_attention
def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    hd = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, hd).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    scores = q.float() @ k.float().transpose(2, 3) / hd ** 0.5
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                    float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v.float()
    return out.to(x.dtype).transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_mask_polarity(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2).float()
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2).float()
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2).float()
    group = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, group, dim=1)
    v = torch.repeat_interleave(v, group, dim=1)
    att = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        causal_m = torch.tril(torch.ones(N, N, device=x.device)).bool()
        att = att.masked_fill(causal_m, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v).to(x.dtype).transpose(1, 2).contiguous().view(B, N, D)
    return y @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    kv_dim = w_k.shape[1]
    q = (x @ w_q).view(B, N, num_heads, d_head).permute(0, 2, 1, 3)
    k = (x @ w_k).view(B, N, num_kv_heads, d_head).permute(0, 2, 1, 3)
    v = (x @ w_v).view(B, N, num_kv_heads, d_head).permute(0, 2, 1, 3)
    r = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, r, N, d_head).reshape(B, num_heads, N, d_head)
    v = v[:, :, None].expand(B, num_kv_heads, r, N, d_head).reshape(B, num_heads, N, d_head)
    s = torch.matmul(q.float(), k.float().transpose(-2, -1)) / math.sqrt(kv_dim)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(dim=-1)
    ctx = torch.matmul(p, v.float()).to(x.dtype)
    return ctx.permute(0, 2, 1, 3).reshape(B, N, D) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    hd = dm // num_heads
    q = (x @ w_q).reshape(bsz, seq, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = (q.float() @ k.float().transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    if causal is not None:
        keep = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    ctx = (probs @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(bsz, seq, dm) @ w_o


def gqa_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    out = torch.softmax(s, dim=-1) @ v.float()  # (B, H, N, hd)
    return out.to(x.dtype).reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    q = (x @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).to(work)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(work)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(work)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    H, G = num_heads, num_kv_heads
    hd = D // H
    x64 = x.double()
    q = torch.einsum("bnd,dgre->bgrne", x64,
                     w_q.double().reshape(D, G, H // G, hd))  # (B, G, rep, N, hd)
    k = torch.einsum("bnd,dge->bgne", x64, w_k.double().reshape(D, G, hd))
    v = torch.einsum("bnd,dge->bgne", x64, w_v.double().reshape(D, G, hd))
    s = torch.einsum("bgrie,bgje->bgrij", q, k) / math.sqrt(hd)
    if causal:
        i = torch.arange(N)
        s = torch.where(i[None, :] <= i[:, None], s, torch.tensor(-math.inf, dtype=s.dtype))
    p = torch.exp(s - s.amax(dim=-1, keepdim=True))
    p = p / p.sum(dim=-1, keepdim=True)
    ctx = torch.einsum("bgrij,bgje->bgrie", p, v)  # head h = g * rep + r
    merged = ctx.permute(0, 3, 1, 2, 4).reshape(B, N, D)
    return (merged @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    bits = bytes_per_element * 8
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bits


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len * num_layers


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_caches_queries(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    tensors = 3  # q, k and v for every cached token
    return tensors * num_layers * num_kv_heads * head_dim * seq_len * batch_size \
        * bytes_per_element


def kv_bytes_rejects_int8(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    if bytes_per_element not in (2, 4):
        raise ValueError(f"bytes_per_element={bytes_per_element} must be 2 (fp16/bf16) "
                         "or 4 (fp32)")
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_bytes_shapes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    cache_shape = (batch_size, num_kv_heads, seq_len, head_dim)
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            elems = 1
            for size in cache_shape:
                elems *= size
            total += elems * bytes_per_element
    return total


# ============================================================================ decode_with_cache
def decode_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, N, hd)
    v_cache = x.new_zeros(B, num_kv_heads, N, hd)
    outs = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, hd)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, hd)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, hd)
        keys = k_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        vals = v_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        s = q.float() @ keys.transpose(-2, -1) / math.sqrt(hd)
        w = torch.softmax(s, dim=-1)
        ctx = (w @ vals).to(x.dtype)
        outs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    steps = []
    for t in range(N):
        prefix = x[:, : t + 1]
        q = (x[:, t] @ w_q).reshape(B, num_heads, 1, hd)
        k = (prefix @ w_k).reshape(B, t + 1, num_kv_heads, hd).transpose(1, 2)
        v = (prefix @ w_v).reshape(B, t + 1, num_kv_heads, hd).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1).float()
        v = v.repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        steps.append((p @ v).to(x.dtype).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    group = num_heads // num_kv_heads
    k_cache = v_cache = None
    results = []
    for t in range(n):
        tok = x[:, t:t + 1]
        q_t = (tok @ w_q).reshape(batch, 1, num_heads, d_head).transpose(1, 2)
        k_cache = (tok @ w_k).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        v_cache = (tok @ w_v).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2)
        k_all = torch.repeat_interleave(k_cache, group, dim=1).float()
        v_all = torch.repeat_interleave(v_cache, group, dim=1).float()
        att = torch.softmax(q_t.float() @ k_all.transpose(2, 3) / math.sqrt(d_head), dim=-1)
        ctx = (att @ v_all).to(x.dtype).transpose(1, 2).reshape(batch, 1, d_model)
        results.append(ctx @ w_o)
    return torch.cat(results, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, out = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        ks.append((xt @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2))
        vs.append((xt @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        s = q.float() @ K.transpose(-2, -1) / math.sqrt(hd)  # (B, H, 1, t+1)
        mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal, as in the full pass
        s = s.masked_fill(~mask, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ V).to(x.dtype)
        out.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_cat_heads_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outputs = []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).view(B, 1, num_heads, hd).transpose(1, 2)
        k_t = (x_t @ w_k).view(B, 1, num_kv_heads, hd).transpose(1, 2)
        v_t = (x_t @ w_v).view(B, 1, num_kv_heads, hd).transpose(1, 2)
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=1)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=1)
        k_r = k_cache.repeat_interleave(rep, dim=1).float()
        v_r = v_cache.repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q_t.float() @ k_r.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        outputs.append((w @ v_r).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_last_step_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, hd, dtype=x.dtype)
    v_cache = torch.zeros(B, num_kv_heads, N, hd, dtype=x.dtype)
    y = None
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, hd)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, hd)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, hd)
        K = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1).float()
        V = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1).float()
        a = torch.softmax(q.float() @ K.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        y = (a @ V).to(x.dtype).view(B, 1, D) @ w_o
    return y


def decode_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    hd = D // num_heads
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    keys = torch.empty(B, G, N, hd, dtype=acc)
    values = torch.empty(B, G, N, hd, dtype=acc)
    result = torch.empty(B, N, D, dtype=x.dtype)
    for pos in range(N):
        tok = x[:, pos]  # (B, D)
        q = (tok @ w_q).to(acc).view(B, G, R, hd)
        keys[:, :, pos] = (tok @ w_k).to(acc).view(B, G, hd)
        values[:, :, pos] = (tok @ w_v).to(acc).view(B, G, hd)
        s = torch.einsum("bgrd,bgtd->bgrt", q, keys[:, :, : pos + 1]) / math.sqrt(hd)
        p = torch.exp(s - s.max(dim=-1, keepdim=True).values)
        p = p / p.sum(dim=-1, keepdim=True)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, values[:, :, : pos + 1])
        result[:, pos] = ctx.reshape(B, D).to(x.dtype) @ w_o
    return result


def decode_lists_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    batch, seq, width = x.shape
    head = width // num_heads
    reps = num_heads // num_kv_heads
    cached_k, cached_v, pieces = [], [], []
    for step in range(seq):
        new = x[:, step:step + 1, :]
        q = (new @ w_q).unflatten(-1, (num_heads, head)).transpose(1, 2)
        cached_k.append((new @ w_k).unflatten(-1, (num_kv_heads, head)).transpose(1, 2))
        cached_v.append((new @ w_v).unflatten(-1, (num_kv_heads, head)).transpose(1, 2))
        k_all = torch.cat(cached_k, dim=2).repeat_interleave(reps, dim=1)
        v_all = torch.cat(cached_v, dim=2).repeat_interleave(reps, dim=1)
        hi = torch.float64 if x.dtype == torch.float64 else torch.float32
        ctx = F.scaled_dot_product_attention(q.to(hi), k_all.to(hi), v_all.to(hi))
        pieces.append(ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o)
    return torch.cat(pieces, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled-repeat",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 0, 1, ...) instead of repeating "
          "each group n_rep times in a row, so head h does not read group h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave-token-axis",
          "repeat_interleave runs along dim=2 (the tokens) instead of dim=1 (the KV heads), "
          "returning (B, G, N*n_rep, d)", repeat_kv_token_axis),
    Entry("repeat_kv", "wrong", "expand-without-new-axis",
          "expand can only stretch axes of size 1, so expanding the group axis to G*n_rep "
          "without first adding a new axis raises whenever G > 1",
          repeat_kv_expand_no_new_axis),
    Entry("repeat_kv", "wrong", "repeats-by-group-count",
          "each group is repeated G = x.shape[1] times instead of n_rep times",
          repeat_kv_by_groups),
    Entry("repeat_kv", "wrong", "view-on-expanded",
          ".view on the expanded (non-contiguous, stride-0) tensor raises a RuntimeError; "
          "the copy needs reshape", repeat_kv_view),
    Entry("repeat_kv", "wrong", "single-group-shortcut",
          "with a single K/V group (G = 1, multi-query) it returns x unchanged, counting on "
          "broadcasting, so the head axis stays 1 instead of n_rep",
          repeat_kv_single_group_shortcut),
    Entry("repeat_kv", "right", "index-select-floor-div", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "cat-group-slices", None, repeat_kv_cat_slices),

    Entry("grouped_query_attention", "wrong", "no-divisibility-guard",
          "there is no check that num_kv_heads divides num_heads, so num_heads=4, "
          "num_kv_heads=3 fails later with a RuntimeError from the matmul instead of a "
          "ValueError naming both numbers", gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "tiled-kv-heads",
          "k.repeat(1, rep, 1, 1) tiles the KV heads (0, 1, 0, 1) instead of repeating each "
          "one rep times, so query head h reads the wrong group", gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "causal-fill-polarity",
          "masked_fill is given the tril mask itself (the allowed positions), so it blanks "
          "the past and keeps the future; the last query row is fully blanked and gives NaN",
          gqa_mask_polarity),
    Entry("grouped_query_attention", "wrong", "scale-by-kv-width",
          "the scores are divided by sqrt(w_k.shape[1]) = sqrt(num_kv_heads * d_head) "
          "instead of sqrt(d_head)", gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "causal-is-not-none",
          "the test `causal is not None` is also true for causal=False, so the causal mask "
          "is always applied", gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "merge-without-transpose",
          "the heads' output (B, H, N, d_head) is reshaped to (B, N, d_model) without "
          "transposing back, mixing tokens and heads before w_o", gqa_merge_no_transpose),
    Entry("grouped_query_attention", "right", "sdpa-is-causal", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped-einsum-no-repeat", None,
          gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no-factor-two",
          "it counts one cache instead of two: the factor 2 for keys and values is missing",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "counts-bits",
          "it multiplies bytes_per_element by 8, so it returns bits instead of bytes",
          kv_bytes_in_bits),
    Entry("kv_cache_bytes", "wrong", "batch-ignored",
          "batch_size is never multiplied in, so the size is for one sequence whatever the "
          "batch", kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "np-prod-int64",
          "np.prod returns a numpy.int64, not the plain Python int the contract asks for",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "caches-queries-too",
          "it caches queries as well as keys and values (factor 3), although only K and V "
          "are kept: past queries are never needed again", kv_bytes_caches_queries),
    Entry("kv_cache_bytes", "wrong", "rejects-8-bit",
          "its argument check only accepts bytes_per_element 2 or 4 and raises ValueError "
          "for an 8-bit cache (bytes_per_element=1), which the contract allows",
          kv_bytes_rejects_int8),
    Entry("kv_cache_bytes", "right", "math-prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "per-layer-shape-loop", None, kv_bytes_shapes),

    Entry("decode_with_cache", "wrong", "cache-slice-excludes-current",
          "each step attends to cache[:, :, :t], the previous tokens only, leaving out the "
          "token just added (off by one), so the first step has no key at all (its output row "
          "is zeros) and every later step misses its own key", decode_excludes_current),
    Entry("decode_with_cache", "wrong", "reprojects-prefix",
          "every step projects the whole prefix x[:, :t+1] with w_k and w_v again instead "
          "of caching the keys and values, so projection work grows quadratically in N "
          "(the values are right, the work is not)", decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "cache-overwritten",
          "the cache variables are overwritten with the new token's key and value at every "
          "step instead of appended to, so each token attends only to itself",
          decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "top-left-step-mask",
          "each step applies a (1, t+1) causal mask built top-left aligned (tril), which for "
          "the single new query allows only key 0 instead of all cached keys",
          decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "cat-on-heads-axis",
          "new keys and values are concatenated onto the cache along dim=1 (the KV-head "
          "axis) instead of dim=2 (the token axis), so the shapes break from the second step "
          "on (it raises)", decode_cat_heads_axis),
    Entry("decode_with_cache", "wrong", "returns-last-step",
          "it returns only the last step's output (B, 1, d_model), as generation would, "
          "instead of the outputs of all N steps", decode_last_step_only),
    Entry("decode_with_cache", "right", "grouped-einsum-prealloc", None, decode_grouped_einsum),
    Entry("decode_with_cache", "right", "list-cache-sdpa", None, decode_lists_sdpa),
]
