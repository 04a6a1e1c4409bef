"""Held-out catalogue, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache): torch."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def rkv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_group_index_by_G(x, n_rep):
    B, G, N, d = x.shape
    out = torch.empty(B, G * n_rep, N, d, dtype=x.dtype)
    for h in range(G * n_rep):
        out[:, h] = x[:, h // G]
    return out


def rkv_n_rep_as_total(x, n_rep):
    groups = x.shape[1]
    copies = n_rep // groups  # "n_rep heads in total, shared by the groups"
    return x.repeat_interleave(copies, dim=1)


def rkv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rkv_no_reshape(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d)


def rkv_interleave_right(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def rkv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


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
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    p = s.softmax(dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_triu_diagonal0(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    batch, n, d_model = x.shape
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).view(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).view(batch, n, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = (q.double() @ k.double().transpose(2, 3)) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v.double()).transpose(1, 2).reshape(batch, n, d_model)
    return out.to(x.dtype) @ w_o


def gqa_dk_before_split(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    q_all, k_all, v_all = x @ w_q, x @ w_k, x @ w_v
    d_k = k_all.shape[-1]
    dh = D // num_heads
    q = q_all.reshape(B, N, num_heads, dh).transpose(1, 2).float()
    k = k_all.reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    v = v_all.reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(d_k)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))
        s = s.masked_fill(~allowed, float("-inf"))
    ctx = torch.softmax(s, -1) @ v
    return ctx.to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k[:, :, None].expand(B, num_kv_heads, n_rep, N, dh).reshape(B, -1, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, n_rep, N, dh).reshape(B, -1, N, dh)
    s = (q.float() / math.sqrt(dh)) @ k.float().transpose(-2, -1)
    if causal:
        s = s + torch.full((N, N), float("-inf")).triu(1)
    w = torch.softmax(s, dim=-1)
    return (w @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    r = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float().repeat_interleave(r, 1)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float().repeat_interleave(r, 1)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = torch.softmax(s, dim=-1) @ v  # (B, H, N, dh)
    return ctx.to(x.dtype).reshape(B, N, D) @ w_o


def gqa_sum_without_keepdim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    k, v = torch.repeat_interleave(k, rep, dim=1), torch.repeat_interleave(v, rep, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), float("-inf"))
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    p = e / e.sum(dim=-1)
    return (p @ v).to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(work)
    q = (xf @ w_q.to(work)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (xf @ w_k.to(work)).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (xf @ w_v.to(work)).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (ctx.transpose(1, 2).flatten(2) @ w_o.to(work)).to(x.dtype)


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    x64 = x.double()
    q = torch.einsum("bnd,de->bne", x64, w_q.double()).reshape(B, N, G, R, dh)
    k = torch.einsum("bnd,de->bne", x64, w_k.double()).reshape(B, N, G, dh)
    v = torch.einsum("bnd,de->bne", x64, w_v.double()).reshape(B, N, G, dh)
    s = torch.einsum("bigre,bjge->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(N)[:, None]
        j = torch.arange(N)[None, :]
        s = torch.where(j <= i, s, torch.tensor(float("-inf"), dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjge->bigre", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element / 2 ** 30


def kvb_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return 2 * np.prod([num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                        bytes_per_element])


def kvb_extra_slot(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    slots = seq_len + 1  # room for the next token
    return 2 * num_layers * num_kv_heads * head_dim * slots * batch_size * bytes_per_element


def kvb_fixed_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * 2  # fp16
    return per_token * seq_len * batch_size


def kvb_caches_q_too(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    tensors = 3  # q, k, v
    return tensors * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    per_token_per_layer = math.prod((2, num_kv_heads, head_dim, bytes_per_element))
    return per_token_per_layer * num_layers * seq_len * batch_size


def kvb_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
        v_bytes = k_bytes
        total += k_bytes + v_bytes
    return total


# ============================================================================ decode_with_cache
def dec_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    G = num_kv_heads
    dh = D // num_heads
    rep = num_heads // G
    outs = []
    for t in range(N):
        q = (x[:, t] @ w_q).view(B, num_heads, 1, dh)
        k = (x[:, :t + 1] @ w_k).view(B, t + 1, G, dh).transpose(1, 2)
        v = (x[:, :t + 1] @ w_v).view(B, t + 1, G, dh).transpose(1, 2)
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = q.double() @ k.double().transpose(-2, -1) / math.sqrt(dh)
        o = (torch.softmax(s, -1) @ v.double()).to(x.dtype)
        outs.append(o.reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def dec_cache_slice_off_by_one(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    result = torch.zeros(B, N, D, dtype=x.dtype)
    for t in range(N):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t] = (x_t @ w_k).reshape(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).reshape(B, num_kv_heads, dh)
        keys = k_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        vals = v_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        s = q_t.float() @ keys.float().transpose(-2, -1) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = (p @ vals.float()).to(x.dtype)
        result[:, t] = ctx.transpose(1, 2).reshape(B, D) @ w_o
    return result


def dec_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    steps = []
    for t in range(N):
        tok = x[:, t]
        q = (tok @ w_q).view(B, num_heads, 1, dh)
        k_new = (tok @ w_k).view(B, num_kv_heads, 1, dh)
        v_new = (tok @ w_v).view(B, num_kv_heads, 1, dh)
        k_cache = k_new
        v_cache = v_new
        K = k_cache.repeat_interleave(rep, dim=1)
        V = v_cache.repeat_interleave(rep, dim=1)
        s = q.double() @ K.double().transpose(-2, -1) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ V.double()).to(x.dtype)
        steps.append(ctx.reshape(B, D) @ w_o)
    return torch.stack(steps, dim=1)


def dec_top_left_mask_in_step(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, dh).float()
        ks.append((xt @ w_k).view(B, num_kv_heads, 1, dh))
        vs.append((xt @ w_v).view(B, num_kv_heads, 1, dh))
        K = torch.cat(ks, dim=2).repeat_interleave(rep, 1).float()
        V = torch.cat(vs, dim=2).repeat_interleave(rep, 1).float()
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)
        causal = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))
        s = s.masked_fill(~causal, float("-inf"))
        o = (torch.softmax(s, -1) @ V).to(x.dtype)
        outs.append(o.reshape(B, D) @ w_o)
    return torch.stack(outs, 1)


def dec_softmax_query_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, dh).double()
        keys.append((xt @ w_k).view(B, num_kv_heads, 1, dh))
        values.append((xt @ w_v).view(B, num_kv_heads, 1, dh))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1).double()
        V = torch.cat(values, dim=2).repeat_interleave(rep, dim=1).double()
        w = torch.softmax(q @ K.transpose(-2, -1) / math.sqrt(dh), dim=-2)
        outs.append((w @ V).to(x.dtype).reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def dec_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        x_t = x[:, t]
        q_t = (x_t @ w_q).view(B, num_heads, 1, dh)
        k_cache[:, :, t] = (x_t @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).view(B, num_kv_heads, dh)
        K = k_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        V = v_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        s = q_t @ K.transpose(-2, -1) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        outs.append((p @ V).reshape(B, D) @ w_o)
    return torch.stack(outs, dim=1)


def dec_list_cache_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    k_list, v_list, rows = [], [], []
    for t in range(N):
        tok = x[:, t]  # (B, D): only the new token is projected
        q = (tok @ w_q).double().reshape(B, G, R, dh)
        k_list.append((tok @ w_k).double().reshape(B, G, dh))
        v_list.append((tok @ w_v).double().reshape(B, G, dh))
        K = torch.stack(k_list, dim=2)  # (B, G, t+1, dh)
        V = torch.stack(v_list, dim=2)
        s = torch.einsum("bgre,bgje->bgrj", q, K) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrj,bgje->bgre", p, V).reshape(B, D)
        rows.append((ctx @ w_o.double()).to(x.dtype))
    return torch.stack(rows, dim=1)


def dec_prealloc_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    work = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=work)
    v_cache = torch.empty(B, num_kv_heads, N, dh, dtype=work)
    out = torch.empty(B, N, D, dtype=x.dtype)
    for t in range(N):
        x_t = x[:, t, :]
        q_t = (x_t @ w_q).to(work).view(B, num_heads, dh).unsqueeze(2)
        k_cache[:, :, t] = (x_t @ w_k).to(work).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).to(work).view(B, num_kv_heads, dh)
        K = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        V = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q_t, K, V)  # (B, H, 1, dh)
        out[:, t] = (ctx.reshape(B, D) @ w_o.to(work)).to(x.dtype)
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) instead of "
          "interleaving them, so head h does not read group h // n_rep", rkv_tiled),
    Entry("repeat_kv", "wrong", "interleave_token_axis",
          "repeat_interleave along dim=2 (the tokens) instead of dim=1 (the groups)",
          rkv_interleave_tokens),
    Entry("repeat_kv", "wrong", "group_index_h_div_G",
          "copies group h // G (the number of groups) into head h instead of group h // n_rep",
          rkv_group_index_by_G),
    Entry("repeat_kv", "wrong", "n_rep_read_as_total_heads",
          "reads n_rep as the total number of query heads and repeats each group n_rep // G "
          "times (0 times when n_rep < G), instead of n_rep times", rkv_n_rep_as_total),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "calls .view on the expanded tensor; expand makes a zero-stride view that .view cannot "
          "merge, so it raises where .reshape (which copies) was needed", rkv_view_after_expand),
    Entry("repeat_kv", "wrong", "missing_reshape",
          "expands to (B, G, n_rep, N, d) but never reshapes, returning a 5-D tensor instead of "
          "(B, G*n_rep, N, d)", rkv_no_reshape),
    Entry("repeat_kv", "right", "repeat_interleave_dim1", None, rkv_interleave_right),
    Entry("repeat_kv", "right", "index_select", None, rkv_index_select),
    Entry("grouped_query_attention", "wrong", "tiled_kv_repeat",
          "repeats the K/V heads with .repeat (tiled: groups 0, 1, 0, 1), so query head h reads "
          "group h % G instead of h // (H / G)", gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "causal_triu_diagonal0",
          "builds the causal mask with triu(diagonal=0), which also masks the diagonal: each "
          "query loses its own key and the first row is fully masked (NaN)", gqa_triu_diagonal0),
    Entry("grouped_query_attention", "wrong", "d_k_from_unsplit_keys",
          "takes d_k from the projected keys before splitting (num_kv_heads * d_head) and "
          "scales by its square root instead of sqrt(d_head)", gqa_dk_before_split),
    Entry("grouped_query_attention", "wrong", "no_divisibility_guard",
          "never checks that num_heads is a multiple of num_kv_heads, so a bad pair fails "
          "later with a RuntimeError from the matmul instead of the ValueError the contract asks "
          "for", gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "transposing back first, scrambling tokens and heads", gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "softmax_sum_without_keepdim",
          "normalises with e / e.sum(dim=-1) without keepdim, so the row sums line up with the "
          "key axis: a size-mismatch RuntimeError, or (when N equals the head count) division "
          "by other rows' sums", gqa_sum_without_keepdim),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_no_repeat", None, gqa_grouped_einsum),
    Entry("kv_cache_bytes", "wrong", "k_only",
          "counts only one cache (K) and forgets the factor 2 for V", kvb_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "divides by 2**30 and returns GiB as a float instead of a number of bytes (an int)",
          kvb_gib),
    Entry("kv_cache_bytes", "wrong", "numpy_int",
          "multiplies with np.prod, returning a numpy integer instead of a plain Python int",
          kvb_np_prod),
    Entry("kv_cache_bytes", "wrong", "extra_slot",
          "counts seq_len + 1 token slots (room for the next token) instead of seq_len",
          kvb_extra_slot),
    Entry("kv_cache_bytes", "wrong", "hard_coded_fp16",
          "hard-codes 2 bytes per element (fp16) and ignores the bytes_per_element argument",
          kvb_fixed_fp16),
    Entry("kv_cache_bytes", "wrong", "caches_queries_too",
          "counts three cached tensors (Q, K and V) instead of two: queries are never cached",
          kvb_caches_q_too),
    Entry("kv_cache_bytes", "right", "per_token_math_prod", None, kvb_math_prod),
    Entry("kv_cache_bytes", "right", "loop_over_layers", None, kvb_layer_loop),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "re-projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching: same numbers, but quadratic projection work", dec_reproject_prefix),
    Entry("decode_with_cache", "wrong", "cache_slice_excludes_current",
          "writes token t into the cache but attends over k_cache[:, :, :t], leaving the "
          "current token out (the first step has no key at all and gives a zero row)",
          dec_cache_slice_off_by_one),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key and value to the cache instead of appending them, so every "
          "step attends only to its own token", dec_cache_overwritten),
    Entry("decode_with_cache", "wrong", "top_left_mask_in_step",
          "applies tril(ones(1, t+1)) inside each step, a top-left causal mask that lets the "
          "single new query see only key 0 instead of the whole cache", dec_top_left_mask_in_step),
    Entry("decode_with_cache", "wrong", "softmax_over_query_dim",
          "takes the softmax over dim=-2, the length-1 query axis, so every weight is 1 and "
          "the step sums the cached values instead of averaging them", dec_softmax_query_dim),
    Entry("decode_with_cache", "wrong", "cache_default_dtype",
          "allocates the caches with torch.zeros without dtype (float32), so for float64 or "
          "half inputs the query-key product mixes dtypes and raises", dec_cache_default_dtype),
    Entry("decode_with_cache", "right", "list_cache_grouped_einsum", None, dec_list_cache_einsum),
    Entry("decode_with_cache", "right", "prealloc_cache_sdpa", None, dec_prealloc_sdpa),
]
