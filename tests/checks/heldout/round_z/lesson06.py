"""Held-out catalogue, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache): PyTorch."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------------------ repeat_kv (wrong)
def rep_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rep_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rep_n_rep_as_heads(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(n_rep // groups, dim=1)


def rep_skip_single_group(x, n_rep):
    b, g, n, d = x.shape
    if g == 1 or n_rep == 1:
        return x
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)


def rep_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rep_index_by_groups(x, n_rep):
    g = x.shape[1]
    idx = torch.arange(g * n_rep, device=x.device) // g
    return x[:, idx]


# ------------------------------------------------------------------------------ repeat_kv (right)
def rep_index_select(x, n_rep):
    heads = torch.arange(x.shape[1] * n_rep, device=x.device)
    return torch.index_select(x, 1, heads // n_rep)


def rep_stack_loop(x, n_rep):
    copies = []
    for g in range(x.shape[1]):
        for _ in range(n_rep):
            copies.append(x[:, g])
    return torch.stack(copies, dim=1)


# ----------------------------------------------------------------- grouped_query_attention (wrong)
def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
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
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_mask_hides_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2).float()
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2).float()
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2).float()
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    att = q @ k.transpose(-1, -2) / hd ** 0.5
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))
        att = att.masked_fill(allowed, float("-inf"))
    att = torch.softmax(att, dim=-1)
    return ((att @ v).transpose(1, 2).reshape(B, N, D)).to(x.dtype) @ w_o


def gqa_kv_split_by_query_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape

    def split(t, heads):
        return t.reshape(b, n, heads, t.shape[-1] // heads).transpose(1, 2)

    q = split(x @ w_q, num_heads)
    k = split(x @ w_k, num_heads)
    v = split(x @ w_v, num_heads)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    o = torch.softmax(s, -1) @ v.float()
    return o.transpose(1, 2).reshape(b, n, d).to(x.dtype) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).permute(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).permute(0, 2, 1, 3)
    rep = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, rep, N, dh).reshape(B, num_heads, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, rep, N, dh).reshape(B, num_heads, N, dh)
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / math.sqrt(dh)
    if causal:
        s = s + torch.full((N, N), float("-inf")).triu(1)
    p = s.softmax(dim=-1)
    ctx = torch.einsum("bhqk,bhkd->bhqd", p, v.float()).to(x.dtype)
    return ctx.reshape(B, N, D) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, dm = x.shape
    dh = dm // num_heads
    q = (x @ w_q).view(b, n, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(b, n, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(b, n, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat(1, num_heads // num_kv_heads, 1, 1)
    v = v.repeat(1, num_heads // num_kv_heads, 1, 1)
    s = (q.float() @ k.float().transpose(2, 3)) * (1.0 / math.sqrt(dh))
    if causal:
        keep = torch.ones(n, n, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    out = (s.softmax(-1) @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, dm) @ w_o


# ----------------------------------------------------------------- grouped_query_attention (right)
def gqa_sdpa_float32(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    xf = x.float()
    q = (xf @ w_q.float()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (xf @ w_k.float()).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (xf @ w_v.float()).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (ctx.transpose(1, 2).flatten(2) @ w_o.float()).to(x.dtype)


def gqa_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    G = num_kv_heads
    if num_heads % G:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={G}")
    R = num_heads // G
    B, N, D = x.shape
    dh = D // num_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(B, N, G, R, dh)  # query head h = g * R + r
    k = (x64 @ w_k.double()).reshape(B, N, G, dh)
    v = (x64 @ w_v.double()).reshape(B, N, G, dh)
    s = torch.einsum("bigre,bjge->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(N, device=x.device)
        s = s.masked_fill(i[None, :] > i[:, None], -math.inf)
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjge->bigre", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ------------------------------------------------------------------------- kv_cache_bytes (wrong)
def kv_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element / 2 ** 30


def kv_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len * num_layers


def kv_fixed_two_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def kv_numpy_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_one_layer(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    k_bytes = num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    v_bytes = k_bytes
    return k_bytes + v_bytes


# ------------------------------------------------------------------------- kv_cache_bytes (right)
def kv_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_meta_tensor(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    dtype = {1: torch.uint8, 2: torch.float16, 4: torch.float32, 8: torch.float64}
    cache = torch.empty((num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim),
                        dtype=dtype[bytes_per_element], device="meta")
    return cache.numel() * cache.element_size()


# ---------------------------------------------------------------------- decode_with_cache (wrong)
def decode_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t:t + 1] @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (x[:, :t + 1] @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (x[:, :t + 1] @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        p = torch.softmax(q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (p @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        outs.append(ctx @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    dh = d // num_heads
    r = num_heads // num_kv_heads
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    result = torch.zeros_like(x)
    for t in range(n):
        xt = x[:, t]
        q = (xt @ w_q).view(b, num_heads, 1, dh)
        k_cache[:, :, t] = (xt @ w_k).view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(b, num_kv_heads, dh)
        ks = k_cache[:, :, :t].repeat_interleave(r, dim=1)
        vs = v_cache[:, :, :t].repeat_interleave(r, dim=1)
        s = q.float() @ ks.float().transpose(-1, -2) / math.sqrt(dh)
        w = torch.softmax(s, dim=-1)
        ctx = (w @ vs.float()).to(x.dtype)
        result[:, t] = ctx.reshape(b, d) @ w_o
    return result


def decode_values_with_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    n_rep = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(N):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        keys.append((tok @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2))
        values.append((tok @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        att = torch.softmax((q.float() @ K.float().transpose(-2, -1)) / math.sqrt(hd), -1)
        o = (att @ V.float()).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        outputs.append(o @ w_o)
    return torch.cat(outputs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    steps = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache.repeat_interleave(rep, dim=1)
        v = v_cache.repeat_interleave(rep, dim=1)
        p = torch.softmax(q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh), dim=-1)
        steps.append(((p @ v.float()).to(x.dtype)).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def decode_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    group = num_heads // num_kv_heads
    k_cache = torch.empty(b, num_kv_heads, 0, d_head, dtype=x.dtype)
    v_cache = torch.empty(b, num_kv_heads, 0, d_head, dtype=x.dtype)
    out = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).reshape(b, 1, num_heads, d_head).transpose(1, 2)
        k_t = (x_t @ w_k).reshape(b, 1, num_kv_heads, d_head).transpose(1, 2)
        v_t = (x_t @ w_v).reshape(b, 1, num_kv_heads, d_head).transpose(1, 2)
        k_cache = torch.cat([k_cache, k_t], dim=2)
        v_cache = torch.cat([v_cache, v_t], dim=2)
        k_all = k_cache.repeat(1, group, 1, 1)
        v_all = v_cache.repeat(1, group, 1, 1)
        s = (q_t.float() @ k_all.float().transpose(-1, -2)) / math.sqrt(d_head)
        ctx = (torch.softmax(s, dim=-1) @ v_all.float()).to(x.dtype)
        out.append(ctx.transpose(1, 2).reshape(b, 1, d_model) @ w_o)
    return torch.cat(out, dim=1)


def decode_stack_steps(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1, :]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        ks.append((xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        vs.append((xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(ks, 2).repeat_interleave(rep, 1)
        V = torch.cat(vs, 2).repeat_interleave(rep, 1)
        p = torch.softmax(q.float() @ K.float().transpose(-2, -1) / math.sqrt(dh), dim=-1)
        o = (p @ V.float()).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o
        outs.append(o)
    return torch.stack(outs, dim=1)


# ---------------------------------------------------------------------- decode_with_cache (right)
def decode_preallocated_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    H, G = num_heads, num_kv_heads
    dh = D // H
    k_cache = torch.zeros(B, G, N, dh, dtype=torch.float64)
    v_cache = torch.zeros(B, G, N, dh, dtype=torch.float64)
    out = torch.empty(B, N, D, dtype=torch.float64)
    wo = w_o.double()
    for t in range(N):
        row = x[:, t, :]  # (B, D): only the new token is projected
        q = (row @ w_q).double().view(B, H, dh)
        k_cache[:, :, t] = (row @ w_k).double().view(B, G, dh)
        v_cache[:, :, t] = (row @ w_v).double().view(B, G, dh)
        ctx = torch.empty(B, H, dh, dtype=torch.float64)
        for h in range(H):
            g = h // (H // G)
            s = torch.einsum("bd,bjd->bj", q[:, h], k_cache[:, g, :t + 1]) / math.sqrt(dh)
            ctx[:, h] = torch.einsum("bj,bjd->bd", torch.softmax(s, dim=-1),
                                     v_cache[:, g, :t + 1])
        out[:, t] = ctx.reshape(B, D) @ wo
    return out.to(x.dtype)


def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    G, R = num_kv_heads, num_heads // num_kv_heads
    dh = D // num_heads
    keys, vals, steps = [], [], []
    for t in range(N):
        tok = x[:, t]
        q = (tok @ w_q).float().view(B, G, R, dh)  # R queries per K/V group
        keys.append((tok @ w_k).float().view(B, G, 1, dh))
        vals.append((tok @ w_v).float().view(B, G, 1, dh))
        ctx = F.scaled_dot_product_attention(q, torch.cat(keys, 2), torch.cat(vals, 2))
        steps.append(ctx.reshape(B, 1, D).to(x.dtype) @ w_o)
    return torch.cat(steps, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat", "uses x.repeat(1, n_rep, 1, 1), which tiles the "
          "groups (g0, g1, g0, g1) instead of repeating each group in place (g0, g0, g1, g1)",
          rep_tiled),
    Entry("repeat_kv", "wrong", "interleave_tokens", "repeats along dim=2, the tokens, instead "
          "of dim=1, the K/V heads", rep_interleave_tokens),
    Entry("repeat_kv", "wrong", "n_rep_as_head_count", "treats n_rep as the number of query "
          "heads and repeats each group n_rep // G times", rep_n_rep_as_heads),
    Entry("repeat_kv", "wrong", "skips_single_group", "returns x unchanged when G == 1, as if "
          "multi-query attention needed no copies, so the head axis stays 1 instead of n_rep",
          rep_skip_single_group),
    Entry("repeat_kv", "wrong", "view_after_expand", "calls .view on the expanded tensor; the "
          "expanded axis has stride 0, so view raises where reshape would copy",
          rep_view_after_expand),
    Entry("repeat_kv", "wrong", "index_divides_by_groups", "builds the head index as h // G "
          "instead of h // n_rep", rep_index_by_groups),
    Entry("repeat_kv", "right", "index_select", None, rep_index_select),
    Entry("repeat_kv", "right", "stack_loop", None, rep_stack_loop),
    Entry("grouped_query_attention", "wrong", "no_divisibility_guard", "never checks that "
          "num_kv_heads divides num_heads, so a bad pair fails later inside the matmul with a "
          "RuntimeError instead of a ValueError naming both numbers", gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "mask_hides_diagonal", "builds the causal mask "
          "with triu(diagonal=0), which also hides the diagonal, so a query cannot see its own "
          "key (and the first row is all -inf, giving NaN)", gqa_mask_hides_diagonal),
    Entry("grouped_query_attention", "wrong", "mask_inverted", "masked_fill's the tril mask "
          "(the allowed keys) with -inf, blocking the past instead of the future (the last "
          "query's row is then all -inf, giving NaN)",
          gqa_mask_inverted),
    Entry("grouped_query_attention", "wrong", "kv_split_into_query_heads", "splits K and V into "
          "num_heads heads instead of num_kv_heads, so their head width is wrong unless "
          "G == H (fails in the score product)", gqa_kv_split_by_query_heads),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose", "reshapes the "
          "(B, H, N, d_head) context straight to (B, N, d_model) without moving the head axis "
          "back, scrambling tokens and heads", gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "tiled_kv_repeat", "repeats K and V with "
          ".repeat, which tiles the groups, so query head h reads group h % G instead of "
          "h // (H / G)", gqa_tiled_repeat),
    Entry("grouped_query_attention", "right", "sdpa_in_float32", None, gqa_sdpa_float32),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None,
          gqa_grouped_einsum_float64),
    Entry("kv_cache_bytes", "wrong", "keys_only", "forgets the factor 2: counts the K cache "
          "but not the V cache", kv_keys_only),
    Entry("kv_cache_bytes", "wrong", "returns_gib", "divides by 2**30, returning GiB as a float "
          "instead of bytes as an int", kv_in_gib),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored", "leaves batch_size out of the "
          "product, so every batch is counted as one sequence", kv_batch_ignored),
    Entry("kv_cache_bytes", "wrong", "hard_coded_two_bytes", "multiplies by a hard-coded 2 "
          "bytes instead of bytes_per_element", kv_fixed_two_bytes),
    Entry("kv_cache_bytes", "wrong", "numpy_int", "returns np.prod's numpy.int64 instead of a "
          "plain Python int", kv_numpy_prod),
    Entry("kv_cache_bytes", "wrong", "one_layer", "counts the K and V of one layer only, "
          "leaving num_layers out", kv_one_layer),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_math_prod),
    Entry("kv_cache_bytes", "right", "meta_tensor_nbytes", None, kv_meta_tensor),
    Entry("decode_with_cache", "wrong", "reprojects_prefix", "projects the keys and values of "
          "the whole prefix x[:, :t+1] at every step instead of caching them, so projection "
          "work grows quadratically (right values, wrong work)", decode_reproject_prefix),
    Entry("decode_with_cache", "wrong", "attends_cache_before_current", "attends over "
          "cache[:t] instead of cache[:t+1], leaving out the current token (step 0 sees no "
          "key at all)", decode_cache_excludes_current),
    Entry("decode_with_cache", "wrong", "values_from_w_k", "projects the cached values with "
          "w_k (copy-paste) instead of w_v", decode_values_with_w_k),
    Entry("decode_with_cache", "wrong", "cache_overwritten", "assigns the new key and value to "
          "the cache instead of appending, so each token attends only to itself",
          decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "tiled_kv_repeat", "expands the cache to the query "
          "heads with .repeat, which tiles the groups, so query head h reads group h % G",
          decode_tiled_repeat),
    Entry("decode_with_cache", "wrong", "stack_steps", "joins the per-step (B, 1, d_model) "
          "outputs with torch.stack(dim=1), giving (B, N, 1, d_model) instead of torch.cat",
          decode_stack_steps),
    Entry("decode_with_cache", "right", "preallocated_float64_head_loop", None,
          decode_preallocated_float64),
    Entry("decode_with_cache", "right", "list_cache_grouped_sdpa", None, decode_list_cache_sdpa),
]
