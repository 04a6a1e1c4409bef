"""Held-out catalogue, lesson 06 (GQA and KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math
import operator
from functools import reduce

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_interleave_token_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_interleave_no_dim(x, n_rep):
    if n_rep == 1:
        return x
    return x.repeat_interleave(n_rep)


def repeat_kv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_kv_axis_after_tokens(x, n_rep):
    b, g, n, d = x.shape
    y = x.unsqueeze(3).expand(b, g, n, n_rep, d)
    return y.reshape(b, g * n_rep, n, d)


def repeat_kv_copies_off_by_one(x, n_rep):
    heads = []
    for g in range(x.shape[1]):
        for _ in range(1, n_rep):
            heads.append(x[:, g])
    return torch.stack(heads, dim=1)


def repeat_kv_right_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


def repeat_kv_right_stack_heads(x, n_rep):
    total = x.size(1) * n_rep
    return torch.stack([x[:, h // n_rep] for h in range(total)], dim=1) if total else x


# ============================================================================ grouped_query_attention
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if D % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat(1, rep, 1, 1)
    v = v.repeat(1, rep, 1, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_head_dim_from_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = w_k.shape[1] // num_heads
    q = (x @ w_q).view(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).view(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).view(b, n, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1),
                                    float("-inf"))
    w = scores.softmax(dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads

    def heads(t, h):
        return t.reshape(batch, seq, h, d_head).transpose(1, 2)

    q = heads(x @ w_q, num_heads)
    k = heads(x @ w_k, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = heads(x @ w_v, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    att = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~keep, float("-inf"))
    att = torch.softmax(att, dim=-1)
    ctx = torch.einsum("bhqk,bhkd->bhqd", att, v.float()).to(x.dtype)
    return ctx.reshape(batch, seq, d_model) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).view(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, hd).transpose(1, 2)
    k = k[:, :, None].expand(B, num_kv_heads, n_rep, N, hd).reshape(B, num_heads, N, hd)
    v = v[:, :, None].expand(B, num_kv_heads, n_rep, N, hd).reshape(B, num_heads, N, hd)
    scores = (q.float() @ k.float().transpose(2, 3)) / math.sqrt(hd)
    if causal is not None:
        future = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = (probs @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D)
    return out @ w_o


def gqa_sdpa_float_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, n, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).reshape(b, n, num_kv_heads, dh).transpose(1, 2).float()
    v = (x @ w_v).reshape(b, n, num_kv_heads, dh).transpose(1, 2).float()
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    mask = torch.ones(n, n, dtype=q.dtype).tril() if causal else None
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return ctx.to(x.dtype).transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    d_head = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    k = torch.repeat_interleave(k, n_rep, dim=1)
    v = torch.repeat_interleave(v, n_rep, dim=1)
    s = torch.matmul(q.float(), k.float().transpose(-2, -1)) * (1.0 / math.sqrt(d_head))
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), -math.inf)
    a = torch.softmax(s, dim=-1)
    out = torch.matmul(a, v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_right_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    g = num_kv_heads
    r = num_heads // g
    dh = d_model // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    # query head h = group (h // r), slot (h % r)
    q = (x @ w_q).to(work).reshape(b, n, g, r, dh)
    k = (x @ w_k).to(work).reshape(b, n, g, dh)
    v = (x @ w_v).to(work).reshape(b, n, g, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(n, device=x.device)
        s = s.masked_fill(i[None, :] > i[:, None], float("-inf"))
    p = torch.exp(s - s.amax(dim=-1, keepdim=True))
    p = p / p.sum(dim=-1, keepdim=True)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(b, n, d_model)
    return ctx.to(x.dtype) @ w_o


def gqa_right_sdpa_enable_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    dt = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).to(dt)
    k = (x @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(dt)
    v = (x @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(dt)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=True)
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


# ============================================================================ kv_cache_bytes
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element / 2 ** 30


def kv_bytes_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_hardcoded_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    # K and V, fp16 = 2 bytes
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def kv_bytes_extra_slot(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    tokens = seq_len + 1  # room for the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_element


def kv_bytes_right_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    k_cache = math.prod((num_layers, batch_size, num_kv_heads, seq_len, head_dim))
    v_cache = k_cache
    return (k_cache + v_cache) * bytes_per_element


def kv_bytes_right_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_layer = reduce(operator.mul, (2, num_kv_heads, head_dim, bytes_per_element), 1)
    total = 0
    for _ in range(num_layers):
        total += per_layer * seq_len * batch_size
    return int(total)


# ============================================================================ decode_with_cache
def decode_attends_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, hd)
    v_cache = x.new_zeros(B, num_kv_heads, 0, hd)
    outs = []
    for t in range(N):
        xt = x[:, t]
        q = (xt @ w_q).view(B, num_heads, 1, hd)
        k_new = (xt @ w_k).view(B, num_kv_heads, 1, hd)
        v_new = (xt @ w_v).view(B, num_kv_heads, 1, hd)
        k = k_cache.repeat_interleave(rep, dim=1).float()
        v = v_cache.repeat_interleave(rep, dim=1).float()
        s = q.float() @ k.transpose(-1, -2) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        ctx = (p @ v).to(x.dtype)
        outs.append(ctx.reshape(B, D) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.stack(outs, dim=1)


def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    dh = d // num_heads
    r = num_heads // num_kv_heads
    results = []
    for t in range(n):
        q = (x[:, t:t + 1] @ w_q).reshape(b, 1, num_heads, dh).transpose(1, 2)
        prefix = x[:, :t + 1]
        k = (prefix @ w_k).reshape(b, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).reshape(b, t + 1, num_kv_heads, dh).transpose(1, 2)
        k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
        w = torch.softmax(q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (w @ v.float()).to(x.dtype).transpose(1, 2).reshape(b, 1, d)
        results.append(ctx @ w_o)
    return torch.cat(results, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    steps = []
    for t in range(N):
        tok = x[:, t:t + 1]
        q_t = (tok @ w_q).reshape(B, 1, num_heads, d_head).transpose(1, 2)
        k_t = (tok @ w_k).reshape(B, 1, num_kv_heads, d_head).transpose(1, 2)
        v_t = (tok @ w_v).reshape(B, 1, num_kv_heads, d_head).transpose(1, 2)
        k_cache = k_t
        v_cache = v_t
        keys = k_cache.repeat_interleave(n_rep, dim=1)
        vals = v_cache.repeat_interleave(n_rep, dim=1)
        sc = (q_t.float() @ keys.float().transpose(-2, -1)) / math.sqrt(d_head)
        ctx = (torch.softmax(sc, dim=-1) @ vals.float()).to(x.dtype)
        steps.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def decode_stack_not_cat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1, :]
        q_t = (x_t @ w_q).view(batch, 1, num_heads, d_head).transpose(1, 2)
        keys.append((x_t @ w_k).view(batch, 1, num_kv_heads, d_head).transpose(1, 2))
        values.append((x_t @ w_v).view(batch, 1, num_kv_heads, d_head).transpose(1, 2))
        k = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1).float()
        v = torch.cat(values, dim=2).repeat_interleave(rep, dim=1).float()
        att = torch.softmax(q_t.float() @ k.transpose(-2, -1) / math.sqrt(d_head), dim=-1)
        o = (att @ v).to(x.dtype).transpose(1, 2).reshape(batch, 1, d_model)
        outputs.append(o @ w_o)
    return torch.stack(outputs, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, N, hd, dtype=x.dtype)
    v_cache = torch.empty(B, num_kv_heads, N, hd, dtype=x.dtype)
    out = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        s = q.float() @ k.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
        out.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_reads_unfilled_slots(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    pieces = []
    for t in range(n):
        xt = x[:, t]
        q = (xt @ w_q).view(b, num_heads, 1, dh)
        k_cache[:, :, t] = (xt @ w_k).view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(b, num_kv_heads, dh)
        k = k_cache.repeat_interleave(rep, dim=1).float()
        v = v_cache.repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        pieces.append((p @ v).to(x.dtype).view(b, d) @ w_o)
    return torch.stack(pieces, dim=1)


def decode_right_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    g, r = num_kv_heads, num_heads // num_kv_heads
    dh = d_model // num_heads
    acc = torch.promote_types(x.dtype, torch.float32)
    keys = torch.empty(b, n, g, dh, dtype=acc)
    vals = torch.empty(b, n, g, dh, dtype=acc)
    out = torch.empty(b, n, d_model, dtype=x.dtype)
    for t in range(n):
        tok = x[:, t]  # (b, d_model): the new token only
        keys[:, t] = (tok @ w_k).to(acc).view(b, g, dh)
        vals[:, t] = (tok @ w_v).to(acc).view(b, g, dh)
        q = (tok @ w_q).to(acc).view(b, g, r, dh)
        s = torch.einsum("bgrd,bjgd->bgrj", q, keys[:, :t + 1]) / math.sqrt(dh)
        s = s - s.max(dim=-1, keepdim=True).values
        e = s.exp()
        p = e / e.sum(dim=-1, keepdim=True)
        ctx = torch.einsum("bgrj,bjgd->bgrd", p, vals[:, :t + 1]).reshape(b, d_model)
        out[:, t] = ctx.to(x.dtype) @ w_o
    return out


def decode_right_sdpa_list_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    dt = torch.promote_types(x.dtype, torch.float32)
    cache_k, cache_v, ys = [], [], []
    for t in range(N):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).to(dt)
        cache_k.append((x_t @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(dt))
        cache_v.append((x_t @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).to(dt))
        k_all = torch.cat(cache_k, dim=2)
        v_all = torch.cat(cache_v, dim=2)
        ctx = F.scaled_dot_product_attention(q_t, k_all, v_all, enable_gqa=True)
        ys.append(ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o)
    return torch.cat(ys, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor_repeat_tiles",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) so head h "
          "reads group h % G instead of h // n_rep", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_token_dim",
          "repeat_interleave along dim=2, the token axis, instead of dim=1, so it repeats tokens "
          "and returns (B, G, N*n_rep, d)", repeat_kv_interleave_token_dim),
    Entry("repeat_kv", "wrong", "interleave_without_dim",
          "calls repeat_interleave without dim, which flattens the tensor and returns a 1-D "
          "result", repeat_kv_interleave_no_dim),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "calls .view on the expanded tensor, which is not contiguous, so merging the group "
          "and copy axes raises RuntimeError instead of copying as .reshape would",
          repeat_kv_view_after_expand),
    Entry("repeat_kv", "wrong", "copy_axis_after_tokens",
          "inserts the copy axis after the token axis (B, G, N, n_rep, d) instead of after the "
          "group axis, so the final reshape mixes tokens into the heads",
          repeat_kv_axis_after_tokens),
    Entry("repeat_kv", "wrong", "copies_range_off_by_one",
          "its copy loop runs over range(1, n_rep), making n_rep - 1 copies of each group "
          "(none at all for n_rep=1, which then raises)", repeat_kv_copies_off_by_one),
    Entry("repeat_kv", "right", "index_select_h_div_n_rep", None, repeat_kv_right_index_select),
    Entry("repeat_kv", "right", "stack_head_by_head", None, repeat_kv_right_stack_heads),

    Entry("grouped_query_attention", "wrong", "repeat_tiles_groups",
          "repeats the K/V heads with .repeat, which tiles them, so query head h uses group "
          "h % num_kv_heads instead of h // n_rep", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "head_dim_from_w_k",
          "takes d_head from w_k.shape[1] // num_heads, but w_k is only num_kv_heads * d_head "
          "wide, so d_head is wrong (and the reshapes fail) whenever num_kv_heads < num_heads",
          gqa_head_dim_from_w_k),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges the heads with a plain reshape of (B, H, N, d_head) to (B, N, d_model), "
          "without transposing the head axis back next to d_head first",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "tests `causal is not None`, which is true for causal=False as well, so the causal "
          "mask is always applied", gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "sdpa_float_tril_mask",
          "passes a float tril of ones as SDPA's attn_mask; a float mask is added to the "
          "scores, so the future keys get +0 instead of -inf and causal attention is not "
          "causal", gqa_sdpa_float_mask),
    Entry("grouped_query_attention", "wrong", "no_group_divisibility_check",
          "never checks that num_kv_heads divides num_heads, so an invalid pair fails later "
          "with a RuntimeError from the head shapes instead of a ValueError naming both",
          gqa_no_group_check),
    Entry("grouped_query_attention", "right", "grouped_einsum_no_repeat", None,
          gqa_right_grouped_einsum),
    Entry("grouped_query_attention", "right", "sdpa_enable_gqa", None, gqa_right_sdpa_enable_gqa),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "counts one cache tensor only: the factor 2 for keys and values is missing",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "divides by 2**30 and returns GiB (a float) instead of bytes", kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "leaves batch_size out of the product, so the cache of a batch is counted as one "
          "sequence", kv_bytes_batch_ignored),
    Entry("kv_cache_bytes", "wrong", "np_prod_integer",
          "multiplies with np.prod, which returns a numpy int64 instead of a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "hard-codes 2 bytes per element (fp16) instead of using bytes_per_element",
          kv_bytes_hardcoded_fp16),
    Entry("kv_cache_bytes", "wrong", "extra_token_slot",
          "counts seq_len + 1 tokens, reserving a slot for the next token, instead of seq_len",
          kv_bytes_extra_slot),
    Entry("kv_cache_bytes", "right", "math_prod_k_plus_v", None, kv_bytes_right_math_prod),
    Entry("kv_cache_bytes", "right", "per_layer_loop", None, kv_bytes_right_loop),

    Entry("decode_with_cache", "wrong", "attends_before_appending",
          "attends over the cache before appending the new token's key and value, so each "
          "token never sees itself and the first token sees nothing (a zero row)",
          decode_attends_before_append),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "re-projects the keys and values of the whole prefix at every step instead of "
          "projecting only the new token and caching it: right values, quadratic projection "
          "work", decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key and value to the cache instead of appending them, so each token "
          "attends only to itself", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "stack_instead_of_cat",
          "collects the (B, 1, d_model) step outputs with torch.stack(dim=1), which adds an axis "
          "and returns (B, N, 1, d_model) instead of concatenating to (B, N, d_model)",
          decode_stack_not_cat),
    Entry("decode_with_cache", "wrong", "top_left_mask_on_one_query",
          "applies a top-left tril mask of shape (1, t+1) to the single new query, which lets "
          "it see only key 0 instead of all cached keys", decode_top_left_mask),
    Entry("decode_with_cache", "wrong", "attends_unfilled_cache_slots",
          "attends over the whole preallocated zero cache of N slots instead of the t+1 filled "
          "ones, so the empty slots (score 0) take weight", decode_reads_unfilled_slots),
    Entry("decode_with_cache", "right", "preallocated_grouped_einsum", None,
          decode_right_grouped_einsum),
    Entry("decode_with_cache", "right", "list_cache_sdpa_gqa", None,
          decode_right_sdpa_list_cache),
]
