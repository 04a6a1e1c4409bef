"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_token_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_groups(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_interleave_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_kv_index_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_kv_numpy(x, n_rep):
    return np.repeat(x.numpy(), n_rep, axis=1)


def repeat_kv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_kv_cat_expanded(x, n_rep):
    parts = [x[:, g:g + 1].expand(-1, n_rep, -1, -1) for g in range(x.shape[1])]
    return torch.cat(parts, dim=1)


# ============================================================================ grouped_query_attention
def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat(1, rep, 1, 1)
    v = v.repeat(1, rep, 1, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_mask_excludes_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1)
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(dim=-1)
    ctx = (weights @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, n_rep, dim=1)
    v = torch.repeat_interleave(v, n_rep, dim=1)
    s = torch.matmul(q.float(), k.float().transpose(2, 3)) * (1.0 / math.sqrt(hd))
    if causal:
        causal_ok = torch.arange(N)[None, :] <= torch.arange(N)[:, None]
        s = s.masked_fill(~causal_ok, -math.inf)
    a = torch.softmax(s, dim=-1)
    out = torch.matmul(a, v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_kv_split_into_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    q = (x @ w_q).unflatten(-1, (num_heads, -1)).transpose(1, 2)
    k = (x @ w_k).unflatten(-1, (num_heads, -1)).transpose(1, 2)
    v = (x @ w_v).unflatten(-1, (num_heads, -1)).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores + torch.full((N, N), float("-inf")).triu(1)
    w = scores.softmax(-1)
    return (w @ v.float()).to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_linear_layout(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = F.linear(x, w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = F.linear(x, w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = F.linear(x, w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    o = (s.softmax(-1) @ v.float()).to(x.dtype)
    return F.linear(o.transpose(1, 2).reshape(B, N, D), w_o)


def gqa_values_not_repeated(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    cast = [w.to(xf.dtype) for w in (w_q, w_k, w_v, w_o)]
    q = (xf @ cast[0]).view(B, N, num_heads, dh).transpose(1, 2)
    k = (xf @ cast[1]).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (xf @ cast[2]).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, rep, N, dh).reshape(B, num_heads, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, rep, N, dh).reshape(B, num_heads, N, dh)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (ctx.transpose(1, 2).reshape(B, N, D) @ cast[3]).to(x.dtype)


def gqa_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    x64 = x.double()
    d_model = x.shape[-1]
    dh = d_model // num_heads
    group_size = num_heads // num_kv_heads
    n = x.shape[1]
    pos = torch.arange(n)
    visible = pos[None, :] <= pos[:, None]
    out = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        g = h // group_size
        qh = x64 @ w_q[:, h * dh:(h + 1) * dh].double()
        kh = x64 @ w_k[:, g * dh:(g + 1) * dh].double()
        vh = x64 @ w_v[:, g * dh:(g + 1) * dh].double()
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            s = torch.where(visible, s, torch.tensor(float("-inf"), dtype=torch.float64))
        p = torch.exp(s - s.logsumexp(dim=-1, keepdim=True))
        out += (p @ vh) @ w_o[h * dh:(h + 1) * dh, :].double()
    return out.to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element * 8
    return num_layers * per_token * seq_len * batch_size


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len
    return elements * bytes_per_element


def kv_bytes_hardcoded_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_layer = 2 * num_kv_heads * head_dim * seq_len * batch_size
    return per_layer * num_layers * 2  # fp16


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return 2 * np.prod([num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                        bytes_per_element])


def kv_bytes_previous_tokens(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    cached = seq_len - 1  # the newest token's K/V is used directly, not read from the cache
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    tensors = ("k", "v")
    return math.prod([len(tensors), num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element])


def kv_bytes_per_token_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    per_token_per_layer = 0
    for _ in range(num_kv_heads):
        per_token_per_layer += head_dim * bytes_per_element  # one key head
        per_token_per_layer += head_dim * bytes_per_element  # one value head
    return per_token_per_layer * num_layers * seq_len * batch_size


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q = (x[:, t:t + 1] @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (x[:, :t + 1] @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (x[:, :t + 1] @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        ctx = (s.softmax(-1) @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_append_after_attending(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_new = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_new = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        ks = k_cache.repeat_interleave(rep, dim=1).float()
        vs = v_cache.repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q.float() @ ks.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (w @ vs).to(x.dtype)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    cache_k = cache_v = None
    results = []
    for t in range(N):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        cache_k = (tok @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        cache_v = (tok @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        k = torch.repeat_interleave(cache_k, rep, dim=1)
        v = torch.repeat_interleave(cache_v, rep, dim=1)
        s = q.float() @ k.float().transpose(-1, -2) / math.sqrt(hd)
        o = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)
        results.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(results, dim=1)


def decode_cat_on_batch(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    vals = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        keys[:, :, t:t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        vals[:, :, t:t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = keys[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        v = vals[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (p @ v).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=0)


def decode_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    out = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        out.append((w @ v).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_softmax_over_query_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        ks.append((xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        vs.append((xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        s = q.float() @ k.transpose(-2, -1) / math.sqrt(dh)  # (B, H, 1, t+1)
        p = torch.softmax(s, dim=-2)
        outs.append((p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    group = num_heads // num_kv_heads
    k_list, v_list, steps = [], [], []
    for t in range(n):
        token = x[:, t]  # (B, d_model)
        q = (token @ w_q).float().view(batch, num_heads, 1, d_head)
        k_list.append((token @ w_k).float().view(batch, num_kv_heads, 1, d_head))
        v_list.append((token @ w_v).float().view(batch, num_kv_heads, 1, d_head))
        k = torch.cat(k_list, dim=2).repeat_interleave(group, dim=1)
        v = torch.cat(v_list, dim=2).repeat_interleave(group, dim=1)
        ctx = F.scaled_dot_product_attention(q, k, v)  # one query: every cached key allowed
        steps.append(ctx.reshape(batch, d_model).to(x.dtype) @ w_o)
    return torch.stack(steps, dim=1)


def decode_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=torch.float64)
    v_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=torch.float64)
    out = torch.zeros(B, N, D, dtype=torch.float64)
    w_o64 = w_o.double().view(num_kv_heads, rep, dh, D)
    for t in range(N):
        xt = x[:, t, :]
        q = (xt @ w_q).double().view(B, num_kv_heads, rep, dh)
        k_cache[:, :, t] = (xt @ w_k).double().view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).double().view(B, num_kv_heads, dh)
        s = torch.einsum("bgrd,bgtd->bgrt", q, k_cache[:, :, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, v_cache[:, :, :t + 1])
        out[:, t] = torch.einsum("bgrd,grde->be", ctx, w_o64)
    return out.to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor_repeat_tiles",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 0, 1, ...) instead of repeating each "
          "group in place (0, 0, 1, 1, ...), so head h does not read group h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_on_token_dim",
          "repeats along dim=2 (the tokens) instead of dim=1 (the groups)",
          repeat_kv_token_dim),
    Entry("repeat_kv", "wrong", "expand_non_singleton",
          "calls expand on the group axis, which can only stretch axes of size 1: it works for "
          "G=1 and raises a RuntimeError otherwise", repeat_kv_expand_groups),
    Entry("repeat_kv", "wrong", "repeat_interleave_without_dim",
          "calls repeat_interleave without dim=, which flattens the tensor and repeats every "
          "element: a 1-D result", repeat_kv_interleave_no_dim),
    Entry("repeat_kv", "wrong", "index_divides_by_groups",
          "picks group h // G (the number of groups) instead of h // n_rep for head h",
          repeat_kv_index_by_groups),
    Entry("repeat_kv", "wrong", "numpy_repeat",
          "uses np.repeat on x.numpy() and returns a numpy array instead of a torch.Tensor "
          "(and raises for bfloat16)", repeat_kv_numpy),
    Entry("repeat_kv", "right", "index_select_arange", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "cat_expanded_groups", None, repeat_kv_cat_expanded),

    Entry("grouped_query_attention", "wrong", "tiled_kv_repeat",
          "repeats the K/V heads with .repeat (tiled order 0, 1, 0, 1) instead of "
          "repeat_interleave, so query head h reads group h % G instead of h // n_rep",
          gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "causal_mask_without_diagonal",
          "builds the causal mask with tril(diagonal=-1), which also masks the diagonal: a "
          "token may not attend to itself and the first row has no key (NaN)",
          gqa_mask_excludes_diagonal),
    Entry("grouped_query_attention", "wrong", "no_divisibility_check",
          "never checks that num_heads is a multiple of num_kv_heads: 4 // 3 = 1 copy is used "
          "silently and the shapes clash later with a RuntimeError instead of a ValueError",
          gqa_no_divisibility_check),
    Entry("grouped_query_attention", "wrong", "kv_split_into_num_heads",
          "splits the keys and values into num_heads heads instead of num_kv_heads, so their "
          "head size is wrong whenever num_kv_heads < num_heads (the matmul with q raises)",
          gqa_kv_split_into_num_heads),
    Entry("grouped_query_attention", "wrong", "f_linear_layout",
          "applies the weights with F.linear, which computes x @ W.T (nn.Linear's (out, in) "
          "layout), although the course's weights are (d_in, d_out) and applied as x @ W: it "
          "raises for the non-square w_k, w_v of GQA/MQA and gives wrong values for square ones",
          gqa_linear_layout),
    Entry("grouped_query_attention", "wrong", "values_not_repeated",
          "repeats the keys but not the values, so the weighted sum fails (RuntimeError) when "
          "1 < num_kv_heads < num_heads", gqa_values_not_repeated),
    Entry("grouped_query_attention", "right", "sdpa_expand_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per_head_loop_float64", None,
          gqa_head_loop_float64),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "counts only the key cache: the factor 2 for keys and values is missing",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8 bits per byte: returns bits, not bytes", kv_bytes_in_bits),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "leaves batch_size out of the product (one sequence's cache)", kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "hard-codes 2 bytes per element (fp16) instead of using bytes_per_element",
          kv_bytes_hardcoded_two),
    Entry("kv_cache_bytes", "wrong", "numpy_integer",
          "np.prod returns a numpy int64, not the plain Python int the contract asks for",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "seq_len_minus_one",
          "caches only seq_len - 1 tokens, thinking the newest token is not stored; the cache "
          "holds the K and V of all seq_len tokens", kv_bytes_previous_tokens),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "per_head_loop", None, kv_bytes_per_token_loop),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the keys and values of every earlier token again at each step instead of "
          "caching them: right values, but quadratic projection work", decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "append_after_attending",
          "appends the new token's key and value to the cache only after attending, so each "
          "token attends to the earlier tokens only (the first to none, giving zeros)",
          decode_append_after_attending),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "overwrites the cache with the new token's key and value instead of appending, so each "
          "token attends only to itself", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "cat_on_batch_dim",
          "concatenates the per-step outputs along dim 0 (the batch) instead of dim 1 (the "
          "tokens): shape (N*B, 1, d_model)", decode_cat_on_batch),
    Entry("decode_with_cache", "wrong", "cache_default_dtype",
          "allocates the cache with torch.zeros(...) without dtype=x.dtype (float32 by default), "
          "so any input that is not float32 raises a dtype mismatch in q @ k^T",
          decode_cache_default_dtype),
    Entry("decode_with_cache", "wrong", "softmax_over_query_dim",
          "normalises over dim=-2, which has length 1 for the single new query, so every weight "
          "is 1 and the output is the sum of the cached values", decode_softmax_over_query_dim),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, decode_list_cache_sdpa),
    Entry("decode_with_cache", "right", "preallocated_einsum_float64", None,
          decode_einsum_float64),
]
