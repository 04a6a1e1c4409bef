"""Held-out catalogue, lesson 06 (GQA and KV cache): repeat_kv, grouped_query_attention,
kv_cache_bytes, decode_with_cache. torch in, torch out (kv_cache_bytes: plain ints)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- repeat_kv, wrong
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_token_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_expand_no_axis(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_numpy(x, n_rep):
    return np.repeat(x.numpy(), n_rep, axis=1)


def repeat_kv_index_by_groups(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep) // groups
    return x.index_select(1, idx)


def repeat_kv_range_from_one(x, n_rep):
    B, G, N, D = x.shape
    copies = [x for _ in range(1, n_rep)]
    return torch.stack(copies, dim=2).reshape(B, G * (n_rep - 1), N, D)


# ----------------------------------------------------------------------------- repeat_kv, right
def repeat_kv_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def repeat_kv_index_list(x, n_rep):
    source = [h // n_rep for h in range(x.shape[1] * n_rep)]
    return x[:, torch.tensor(source, dtype=torch.long)]


# ----------------------------------------------------------------------------- GQA, wrong
def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_causal_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(hd)
    if causal is not None:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))
        scores = scores.masked_fill(~allowed, float("-inf"))
    w = scores.softmax(dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_kv(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat(1, n_rep, 1, 1)
    v = v.repeat(1, n_rep, 1, 1)
    scores = (q @ k.transpose(2, 3)).float() / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                    float("-inf"))
    attn = torch.softmax(scores, dim=-1).to(x.dtype)
    return (attn @ v).transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_tril_offset_one(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).permute(0, 2, 1, 3)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).permute(0, 2, 1, 3)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).permute(0, 2, 1, 3)
    g = num_heads // num_kv_heads
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * dh ** -0.5
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=1)
        s = s.masked_fill(~keep, -math.inf)
    p = torch.softmax(s, -1)
    out = torch.matmul(p, v.float()).to(x.dtype)
    return out.permute(0, 2, 1, 3).reshape(B, N, D) @ w_o


def gqa_kv_split_by_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape

    def heads(t):
        return t.reshape(B, N, num_heads, -1).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    ctx = (s.softmax(-1) @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    r = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, r, N, dh).reshape(B, num_heads, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, r, N, dh).reshape(B, num_heads, N, dh)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), float("-inf"))
    ctx = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


# ----------------------------------------------------------------------------- GQA, right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    xs = x.to(work)
    q = (xs @ w_q.to(work)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (xs @ w_k.to(work)).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (xs @ w_v.to(work)).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (ctx.transpose(1, 2).flatten(2) @ w_o.to(work)).to(x.dtype)


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    H, G = num_heads, num_kv_heads
    if H % G != 0:
        raise ValueError(f"num_heads={H} is not a multiple of num_kv_heads={G}")
    B, N, D = x.shape
    dh, R = D // H, H // G
    x64 = x.double()
    q = torch.einsum("bnd,de->bne", x64, w_q.double()).reshape(B, N, G, R, dh)
    k = torch.einsum("bnd,de->bne", x64, w_k.double()).reshape(B, N, G, dh)
    v = torch.einsum("bnd,de->bne", x64, w_v.double()).reshape(B, N, G, dh)
    s = torch.einsum("bqgre,bkge->bgrqk", q, k) / math.sqrt(dh)
    if causal:
        future = torch.arange(N)[None, :] > torch.arange(N)[:, None]
        s = s.masked_fill(future, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrqk,bkge->bqgre", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ----------------------------------------------------------------------------- kv bytes, wrong
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_layer_loop_from_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    total = 0
    for _layer in range(1, num_layers):
        total += 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_assumes_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16 = 2 bytes


# ----------------------------------------------------------------------------- kv bytes, right
def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token_per_layer = 2 * num_kv_heads * head_dim * bytes_per_element
    return per_token_per_layer * num_layers * (seq_len * batch_size)


def kv_bytes_tensor_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        for _tensor in ("k", "v"):
            shape = (batch_size, num_kv_heads, seq_len, head_dim)
            total += math.prod(shape) * bytes_per_element
    return total


# ----------------------------------------------------------------------------- decode, wrong
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
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
        p = torch.softmax((q.float() @ k.float().transpose(-1, -2)) / math.sqrt(dh), dim=-1)
        ctx = (p @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
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
        p = torch.softmax(q.float() @ ks.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        ctx = (p @ vs).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        k = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1).float()
        v = torch.cat(values, dim=2).repeat_interleave(rep, dim=1).float()
        s = q.float() @ k.transpose(-1, -2) / math.sqrt(dh)
        step_mask = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))
        s = s.masked_fill(~step_mask, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_stack_outputs(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        ctx = (p @ v).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.stack(outs, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
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
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(B, num_kv_heads, dh)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        outs.append((p @ v).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_scale_by_cache_length(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
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
        n_cached = k.shape[2]
        p = torch.softmax(q.float() @ k.transpose(-1, -2) / math.sqrt(n_cached), dim=-1)
        outs.append((p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


# ----------------------------------------------------------------------------- decode, right
def decode_sdpa_list_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    k_list, v_list, rows = [], [], []
    for t in range(N):
        tok = x[:, t, :]  # (B, D)
        q = (tok @ w_q).reshape(B, num_heads, 1, dh).to(work)
        k_list.append((tok @ w_k).reshape(B, num_kv_heads, 1, dh))
        v_list.append((tok @ w_v).reshape(B, num_kv_heads, 1, dh))
        k = torch.cat(k_list, dim=2).to(work).repeat_interleave(num_heads // num_kv_heads, 1)
        v = torch.cat(v_list, dim=2).to(work).repeat_interleave(num_heads // num_kv_heads, 1)
        ctx = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, dh)
        rows.append(ctx.reshape(B, D).to(x.dtype) @ w_o)
    return torch.stack(rows, dim=1)


def decode_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    H, G = num_heads, num_kv_heads
    if H % G:
        raise ValueError(f"num_heads={H} is not a multiple of num_kv_heads={G}")
    B, N, D = x.shape
    dh, R = D // H, H // G
    k_cache = torch.zeros(B, N, G, dh, dtype=torch.float64)
    v_cache = torch.zeros(B, N, G, dh, dtype=torch.float64)
    out = torch.empty(B, N, D, dtype=x.dtype)
    for t in range(N):
        tok = x[:, t]
        q = torch.einsum("bd,de->be", tok, w_q).double().reshape(B, G, R, dh)
        k_cache[:, t] = torch.einsum("bd,de->be", tok, w_k).double().reshape(B, G, dh)
        v_cache[:, t] = torch.einsum("bd,de->be", tok, w_v).double().reshape(B, G, dh)
        s = torch.einsum("bgre,bkge->bgrk", q, k_cache[:, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrk,bkge->bgre", p, v_cache[:, :t + 1]).reshape(B, D)
        out[:, t] = (ctx @ w_o.double()).to(x.dtype)
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) instead "
          "of giving head h the group h // n_rep", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_token_axis",
          "repeat_interleaves along dim=2, duplicating the tokens instead of the K/V heads",
          repeat_kv_token_axis),
    Entry("repeat_kv", "wrong", "expand_without_new_axis",
          "expands the group axis itself to G*n_rep, which expand only allows for a "
          "size-1 axis, so it raises whenever G > 1 (no new axis was inserted first)",
          repeat_kv_expand_no_axis),
    Entry("repeat_kv", "wrong", "returns_numpy_array",
          "does the repeat with np.repeat on x.numpy() and returns a numpy array, not a "
          "torch.Tensor", repeat_kv_numpy),
    Entry("repeat_kv", "wrong", "index_divided_by_groups",
          "builds the source index as arange(G*n_rep) // G instead of // n_rep, so heads "
          "read the wrong groups whenever G != n_rep", repeat_kv_index_by_groups),
    Entry("repeat_kv", "wrong", "copies_range_from_one",
          "makes the copies with range(1, n_rep), one copy too few, so the result has "
          "G*(n_rep-1) heads (and fails for n_rep = 1)", repeat_kv_range_from_one),
    Entry("repeat_kv", "right", "repeat_interleave_dim1", None, repeat_kv_interleave),
    Entry("repeat_kv", "right", "advanced_index_list", None, repeat_kv_index_list),
    Entry("grouped_query_attention", "wrong", "no_group_divisibility_check",
          "never checks that num_kv_heads divides num_heads, so a bad pair fails later in "
          "a matmul with a RuntimeError instead of a ValueError naming both numbers",
          gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "tests `causal is not None`, which is true for causal=False too, so the causal "
          "mask is always applied", gqa_causal_not_none),
    Entry("grouped_query_attention", "wrong", "tiled_kv_heads",
          "repeats K and V with .repeat(1, n_rep, 1, 1), which tiles the groups, so query "
          "head h reads group h % G instead of h // n_rep", gqa_tiled_kv),
    Entry("grouped_query_attention", "wrong", "tril_diagonal_one",
          "builds the causal mask with tril(diagonal=1), so each query also sees the next "
          "token", gqa_tril_offset_one),
    Entry("grouped_query_attention", "wrong", "kv_split_into_num_heads",
          "splits the keys and values into num_heads heads like the queries instead of "
          "num_kv_heads, so with fewer K/V heads the head widths no longer match and the "
          "score matmul raises", gqa_kv_split_by_num_heads),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges the heads with ctx.reshape(B, N, d_model) straight from (B, H, N, d_head), "
          "without moving the head axis back after the tokens", gqa_merge_without_transpose),
    Entry("grouped_query_attention", "right", "sdpa_upcast", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_no_repeat", None,
          gqa_grouped_einsum),
    Entry("kv_cache_bytes", "wrong", "keys_only",
          "counts only the K cache: the factor 2 for keys and values is missing",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "divides by 2**30 and returns GiB (a float) instead of bytes",
          kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "leaves batch_size out of the product, so it counts one sequence only",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "layer_loop_from_one",
          "loops over range(1, num_layers), so one layer is left out of the total",
          kv_bytes_layer_loop_from_one),
    Entry("kv_cache_bytes", "wrong", "numpy_int64",
          "returns np.prod of the factors, a numpy int64, instead of a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "hardcoded_fp16",
          "multiplies by a hard-coded 2 bytes (fp16) and ignores bytes_per_element",
          kv_bytes_assumes_fp16),
    Entry("kv_cache_bytes", "right", "per_token_times_tokens", None, kv_bytes_per_token),
    Entry("kv_cache_bytes", "right", "loop_over_layers_and_tensors", None,
          kv_bytes_tensor_loop),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching: the values are right but the projection work is quadratic in N",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends_before_appending",
          "attends over the cache before appending the new token's key and value, so each "
          "token never sees itself (and the first step sees nothing, giving zeros)",
          decode_attend_before_append),
    Entry("decode_with_cache", "wrong", "top_left_step_mask",
          "masks the single new query with tril(ones(1, t+1)), a top-left causal mask, so "
          "every step attends only to the first token instead of the whole cache",
          decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "stack_instead_of_cat",
          "joins the (B, 1, d_model) step outputs with torch.stack(dim=1), giving "
          "(B, N, 1, d_model) instead of concatenating to (B, N, d_model)",
          decode_stack_outputs),
    Entry("decode_with_cache", "wrong", "float32_cache_buffer",
          "allocates the caches with torch.zeros(...) in the default float32, so with "
          "float64 (or half) inputs the score matmul mixes dtypes and raises",
          decode_float32_cache),
    Entry("decode_with_cache", "wrong", "scale_by_cache_length",
          "scales the scores by 1/sqrt(number of cached keys) instead of 1/sqrt(d_head)",
          decode_scale_by_cache_length),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, decode_sdpa_list_cache),
    Entry("decode_with_cache", "right", "grouped_einsum_float64", None,
          decode_grouped_einsum_float64),
]
