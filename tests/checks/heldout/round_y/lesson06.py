"""Held-out catalogue (round y), lesson 06: repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache (torch)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_view(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_kv_modulo(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) % groups
    return x[:, index]


def repeat_kv_divide_by_groups(x, n_rep):
    G = x.shape[1]
    heads = torch.arange(G * n_rep, device=x.device)
    return x.index_select(1, heads // G)


def repeat_kv_cat_indexed(x, n_rep):
    pieces = []
    for g in range(x.shape[1]):
        for _ in range(n_rep):
            pieces.append(x[:, g])
    return torch.cat(pieces, dim=1)


def repeat_kv_index_select(x, n_rep):
    idx = torch.div(torch.arange(x.shape[1] * n_rep, device=x.device), n_rep,
                    rounding_mode="floor")
    return torch.index_select(x, 1, idx)


def repeat_kv_einsum_ones(x, n_rep):
    ones = torch.ones(n_rep, dtype=x.dtype, device=x.device)
    b, g, n, d = x.shape
    return torch.einsum("bgnd,r->bgrnd", x, ones).reshape(b, g * n_rep, n, d)


# ============================================================================ grouped_query_attention
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, hd).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat(1, rep, 1, 1)
    v = v.repeat(1, rep, 1, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(hd)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scale = 1.0 / math.sqrt(k.shape[-1])
    q = q.reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = k.reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = v.reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = (q.float() @ k.float().transpose(-2, -1)) * scale
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    out = (w @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_tril_as_blocked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    Q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    K = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2).repeat_interleave(rep, dim=1)
    V = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2).repeat_interleave(rep, dim=1)
    att = torch.matmul(Q.float(), K.float().transpose(2, 3)) / math.sqrt(dh)
    if causal:
        mask = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))
        att = att.masked_fill(mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    ctx = torch.matmul(att, V.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    batch, n, d_model = x.shape
    head_dim = d_model // num_heads
    groups = num_heads // num_kv_heads
    q = (x @ w_q).reshape(batch, n, num_heads, head_dim).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, head_dim).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, head_dim).transpose(1, 2)
    k = torch.repeat_interleave(k, groups, dim=1)
    v = torch.repeat_interleave(v, groups, dim=1)
    scores = q.float() @ k.float().transpose(-1, -2) / head_dim ** 0.5
    if causal:
        allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~allowed, -math.inf)
    probs = scores.softmax(-1)
    ctx = (probs @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_masked_fill_unassigned(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    k = k[:, :, None].expand(B, num_kv_heads, n_rep, N, hd).reshape(B, num_heads, N, hd)
    v = v[:, :, None].expand(B, num_kv_heads, n_rep, N, hd).reshape(B, num_heads, N, hd)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(hd)
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))
        scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1).to(x.dtype)
    return (weights @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2).repeat_interleave(n_rep, 1)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2).repeat_interleave(n_rep, 1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool, device=x.device).tril(),
                          float("-inf"))
    ctx = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)  # (B, H, N, hd)
    return ctx.reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).to(work)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(work)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(work)
    rep = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, rep, dim=1)
    v = torch.repeat_interleave(v, rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    r = num_heads // num_kv_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(B, N, num_kv_heads, r, hd)
    k = (x64 @ w_k.double()).reshape(B, N, num_kv_heads, hd)
    v = (x64 @ w_v.double()).reshape(B, N, num_kv_heads, hd)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(hd)
    if causal:
        i = torch.arange(N, device=x.device)
        s = torch.where(i[None, :] <= i[:, None], s, torch.tensor(-math.inf, dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element / 2**30


def kv_bytes_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element
    per_layer = per_token * seq_len
    return per_layer * num_layers


def kv_bytes_numpy(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    dims = [2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element]
    return np.prod(dims, dtype=np.int64)


def kv_bytes_last_token_uncached(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    cached = seq_len - 1  # the newest token's K/V is used directly, not read from the cache
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


def kv_bytes_guard_dtype(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    if bytes_per_element not in (1, 2):
        raise ValueError(f"bytes_per_element={bytes_per_element} must be 1 (int8) or 2 (fp16/bf16)")
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    tensors_per_layer = 2  # K and V
    return math.prod((tensors_per_layer, num_layers, num_kv_heads, head_dim, seq_len,
                      batch_size, bytes_per_element))


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    token_bytes = num_kv_heads * head_dim * bytes_per_element
    total = 0
    for _layer in range(num_layers):
        k_cache = token_bytes * seq_len * batch_size
        v_cache = token_bytes * seq_len * batch_size
        total += k_cache + v_cache
    return total


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, : t + 1]
        q = (x[:, t] @ w_q).view(B, num_heads, 1, hd)
        k = (prefix @ w_k).view(B, t + 1, num_kv_heads, hd).transpose(1, 2)
        v = (prefix @ w_v).view(B, t + 1, num_kv_heads, hd).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(hd)
        ctx = (s.softmax(-1) @ v.float()).to(x.dtype)
        outs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_append_after_attend(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, hd)
    v_cache = x.new_zeros(B, num_kv_heads, 0, hd)
    outs = []
    for t in range(N):
        x_t = x[:, t]
        q = (x_t @ w_q).view(B, num_heads, 1, hd)
        k_new = (x_t @ w_k).view(B, num_kv_heads, 1, hd)
        v_new = (x_t @ w_v).view(B, num_kv_heads, 1, hd)
        k_all = k_cache.repeat_interleave(rep, dim=1)
        v_all = v_cache.repeat_interleave(rep, dim=1)
        s = (q.float() @ k_all.float().transpose(-2, -1)) / math.sqrt(hd)
        if s.shape[-1] == 0:
            ctx = torch.zeros(B, num_heads, 1, hd, dtype=x.dtype)
        else:
            ctx = (torch.softmax(s, -1) @ v_all.float()).to(x.dtype)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
        outs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_full_preallocated_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    v_cache = torch.zeros(batch, num_kv_heads, n, d_head, dtype=x.dtype)
    result = torch.empty_like(x)
    for t in range(n):
        tok = x[:, t, :]
        q_t = (tok @ w_q).reshape(batch, num_heads, 1, d_head)
        k_cache[:, :, t] = (tok @ w_k).reshape(batch, num_kv_heads, d_head)
        v_cache[:, :, t] = (tok @ w_v).reshape(batch, num_kv_heads, d_head)
        keys = torch.repeat_interleave(k_cache, n_rep, dim=1)
        vals = torch.repeat_interleave(v_cache, n_rep, dim=1)
        att = (q_t.float() @ keys.float().transpose(-1, -2)) / math.sqrt(d_head)
        att = torch.softmax(att, dim=-1)
        ctx = (att @ vals.float()).to(x.dtype)
        result[:, t] = ctx.reshape(batch, d_model) @ w_o
    return result


def decode_scale_by_cache_len(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).reshape(B, num_heads, 1, hd)
        keys.append((xt @ w_k).reshape(B, num_kv_heads, 1, hd))
        values.append((xt @ w_v).reshape(B, num_kv_heads, 1, hd))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        scores = q.float() @ K.float().transpose(-2, -1) / math.sqrt(K.shape[-2])
        ctx = (scores.softmax(dim=-1) @ V.float()).to(x.dtype)
        outputs.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(outputs, dim=1)


def decode_returns_last_token(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, N, hd, dtype=x.dtype)
    v_cache = torch.empty(B, num_kv_heads, N, hd, dtype=x.dtype)
    out = None
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, hd)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, hd)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, hd)
        k = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        w = torch.softmax(q.float() @ k.float().transpose(-2, -1) / math.sqrt(hd), dim=-1)
        ctx = (w @ v.float()).to(x.dtype)
        out = ctx.reshape(B, 1, D) @ w_o
    return out


def decode_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, hd)
    v_cache = torch.zeros(B, num_kv_heads, N, hd)
    steps = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, hd)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, hd)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, hd)
        k = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        ctx = torch.softmax(s, dim=-1) @ v
        steps.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(steps, dim=1)


def decode_list_cache_float32(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    work = torch.promote_types(x.dtype, torch.float32)
    k_seen = None
    v_seen = None
    outs = []
    for t in range(N):
        x_t = x[:, t]  # (B, D): only the new token is projected
        q = (x_t @ w_q).to(work).reshape(B, num_heads, 1, hd)
        k_new = (x_t @ w_k).to(work).reshape(B, num_kv_heads, 1, hd)
        v_new = (x_t @ w_v).to(work).reshape(B, num_kv_heads, 1, hd)
        k_seen = k_new if k_seen is None else torch.cat((k_seen, k_new), dim=2)
        v_seen = v_new if v_seen is None else torch.cat((v_seen, v_new), dim=2)
        kk = torch.repeat_interleave(k_seen, rep, dim=1)
        vv = torch.repeat_interleave(v_seen, rep, dim=1)
        ctx = F.scaled_dot_product_attention(q, kk, vv)  # every cached key is in the past
        outs.append(ctx.to(x.dtype).reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_grouped_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    hd = d_model // num_heads
    r = num_heads // num_kv_heads
    k_cache = torch.zeros(batch, n, num_kv_heads, hd, dtype=torch.float64)
    v_cache = torch.zeros(batch, n, num_kv_heads, hd, dtype=torch.float64)
    out = torch.zeros(batch, n, d_model, dtype=torch.float64)
    w_o64 = w_o.double()
    for t in range(n):
        tok = x[:, t]
        q = (tok @ w_q).double().reshape(batch, num_kv_heads, r, hd)
        k_cache[:, t] = (tok @ w_k).double().reshape(batch, num_kv_heads, hd)
        v_cache[:, t] = (tok @ w_v).double().reshape(batch, num_kv_heads, hd)
        s = torch.einsum("bgrd,bjgd->bgrj", q, k_cache[:, : t + 1]) / math.sqrt(hd)
        p = torch.exp(s - s.amax(dim=-1, keepdim=True))
        p = p / p.sum(dim=-1, keepdim=True)
        ctx = torch.einsum("bgrj,bjgd->bgrd", p, v_cache[:, : t + 1]).reshape(batch, d_model)
        out[:, t] = ctx @ w_o64
    return out.to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor-repeat-tiles",
          "x.repeat tiles the groups (0, 1, 2, 0, 1, 2, ...) instead of repeating each group "
          "n_rep times in a row, so head h reads group h % G instead of h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave-along-tokens",
          "repeat_interleave runs along dim=2 (the tokens) instead of dim=1 (the groups), giving "
          "(B, G, N*n_rep, d)", repeat_kv_wrong_dim),
    Entry("repeat_kv", "wrong", "view-after-expand",
          "view cannot merge the expanded (stride 0) axis with the group axis, so it raises a "
          "RuntimeError whenever n_rep > 1 (reshape, which copies, is needed)", repeat_kv_view),
    Entry("repeat_kv", "wrong", "index-modulo",
          "the group of head h is computed as h % G instead of h // n_rep, which tiles the groups",
          repeat_kv_modulo),
    Entry("repeat_kv", "wrong", "index-divided-by-groups",
          "the group index is h // G (number of groups) instead of h // n_rep, so heads are "
          "assigned to the wrong groups whenever G != n_rep", repeat_kv_divide_by_groups),
    Entry("repeat_kv", "wrong", "indexing-drops-head-axis",
          "x[:, g] drops the group axis, so torch.cat(dim=1) joins along the tokens and the result "
          "is 3-D (B, G*n_rep*N, d) instead of (B, G*n_rep, N, d)", repeat_kv_cat_indexed),
    Entry("repeat_kv", "right", "index-select-floor", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "einsum-with-ones", None, repeat_kv_einsum_ones),

    Entry("grouped_query_attention", "wrong", "kv-heads-tiled",
          "the K/V heads are repeated with Tensor.repeat, which tiles the groups, so query head h "
          "reads group h % num_kv_heads instead of h // n_rep", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "scale-from-kv-width",
          "the scale is computed from k before the split, 1/sqrt(num_kv_heads * d_head), instead "
          "of 1/sqrt(d_head) (right only for MQA)", gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "tril-used-as-blocked",
          "masked_fill is given the lower triangle itself, so it blocks the past and the diagonal "
          "and lets queries see the future (the last row is fully masked and becomes NaN)",
          gqa_tril_as_blocked),
    Entry("grouped_query_attention", "wrong", "no-multiple-check",
          "there is no check that num_kv_heads divides num_heads, so num_heads=4, num_kv_heads=3 "
          "fails later with a RuntimeError from the matmul instead of a ValueError",
          gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "masked-fill-not-assigned",
          "scores.masked_fill(...) returns a new tensor that is thrown away (not assigned, and not "
          "the in-place masked_fill_), so causal=True applies no mask", gqa_masked_fill_unassigned),
    Entry("grouped_query_attention", "wrong", "merge-without-transpose",
          "the heads' outputs (B, H, N, d_head) are reshaped to (B, N, d_model) without transposing "
          "back, scrambling tokens and heads before w_o", gqa_merge_no_transpose),
    Entry("grouped_query_attention", "right", "sdpa-float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped-einsum-float64", None, gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "keys-only",
          "the factor 2 for keys and values is missing: it counts only the K cache",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "returns-gib",
          "the bytes are divided by 2**30, so it returns GiB as a float instead of bytes as an int",
          kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "batch-ignored",
          "batch_size is never used, so the cache of a batch is counted as that of one sequence",
          kv_bytes_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "numpy-int64",
          "np.prod returns a numpy int64, not the plain Python int the contract asks for",
          kv_bytes_numpy),
    Entry("kv_cache_bytes", "wrong", "seq-len-minus-one",
          "only seq_len - 1 tokens are counted, on the idea that the newest token is not cached",
          kv_bytes_last_token_uncached),
    Entry("kv_cache_bytes", "wrong", "rejects-fp32",
          "the guard accepts only bytes_per_element 1 or 2, so a float32 cache "
          "(bytes_per_element=4) raises ValueError", kv_bytes_guard_dtype),
    Entry("kv_cache_bytes", "right", "math-prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "layer-loop", None, kv_bytes_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects-prefix",
          "each step projects the whole prefix x[:, :t+1] with w_k and w_v again instead of only "
          "the new token, so the values are right but the projection work is quadratic in N",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "append-after-attending",
          "the new token's key and value are appended to the cache after attending, so each token "
          "does not see itself (the first token sees nothing and gives zeros)",
          decode_append_after_attend),
    Entry("decode_with_cache", "wrong", "attends-whole-preallocated-cache",
          "attention runs over the whole preallocated cache instead of [:t+1], so the zero slots "
          "of future tokens take part in the softmax", decode_full_preallocated_cache),
    Entry("decode_with_cache", "wrong", "scale-by-cache-length",
          "the scores are divided by sqrt of the number of cached keys (K.shape[-2]) instead of "
          "sqrt(d_head)", decode_scale_by_cache_len),
    Entry("decode_with_cache", "wrong", "returns-last-step-only",
          "only the last step's output (B, 1, d_model) is returned instead of every step's output "
          "(B, N, d_model)", decode_returns_last_token),
    Entry("decode_with_cache", "wrong", "cache-default-float32",
          "the cache is allocated with torch.zeros' default float32 dtype, not x's dtype, so the "
          "product with float64/float16/bfloat16 queries raises a dtype error",
          decode_cache_default_dtype),
    Entry("decode_with_cache", "right", "list-cache-sdpa", None, decode_list_cache_float32),
    Entry("decode_with_cache", "right", "grouped-einsum-float64", None, decode_grouped_float64),
]
