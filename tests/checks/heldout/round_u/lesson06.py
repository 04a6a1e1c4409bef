"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# --------------------------------------------------------------------------- repeat_kv, wrong
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_new_axis_first(x, n_rep):
    b, g, n, d = x.shape
    return x[:, None].expand(b, n_rep, g, n, d).reshape(b, g * n_rep, n, d)


def repeat_kv_expand_directly(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_interleave_no_dim(x, n_rep):
    b, g, n, d = x.shape
    return x.repeat_interleave(n_rep).reshape(b, g * n_rep, n, d)


def repeat_kv_divides_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


# --------------------------------------------------------------------------- repeat_kv, right
def repeat_kv_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def repeat_kv_index_select(x, n_rep):
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


# -------------------------------------------------------------- grouped_query_attention, wrong
def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    r = num_heads // num_kv_heads
    k, v = k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_mask_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    hd = dm // num_heads
    q = (x @ w_q).reshape(bsz, seq, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(2, 3)) / hd ** 0.5
    if causal:
        blocked = torch.triu(torch.ones(seq, seq, dtype=torch.bool))
        scores = scores.masked_fill(blocked, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(attn, v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(bsz, seq, dm) @ w_o


def gqa_d_head_from_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = w_k.shape[1] // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, n_rep, N, d_head).reshape(B, num_heads, N, d_head)
    v = v[:, :, None].expand(B, num_kv_heads, n_rep, N, d_head).reshape(B, num_heads, N, d_head)
    s = q.float() @ k.float().transpose(-1, -2) * (1.0 / math.sqrt(d_head))
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), -math.inf)
    p = torch.softmax(s, dim=-1)
    return (p @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, dm = x.shape
    dh = dm // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).reshape(b, n, num_kv_heads, dh).transpose(1, 2).float()
    v = (x @ w_v).reshape(b, n, num_kv_heads, dh).transpose(1, 2).float()
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal is not None:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    ctx = torch.softmax(scores, dim=-1) @ v
    return ctx.to(x.dtype).transpose(1, 2).reshape(b, n, dm) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, hd).transpose(1, 2)
    group = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, group, dim=1)
    v = torch.repeat_interleave(v, group, dim=1)
    scores = torch.einsum("bhid,bhjd->bhij", q.float(), k.float()) / math.sqrt(hd)
    if causal:
        scores = scores.masked_fill(
            torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    w = scores.softmax(-1)
    ctx = torch.einsum("bhij,bhjd->bhid", w, v.float()).to(x.dtype)
    return ctx.reshape(B, N, D) @ w_o


# -------------------------------------------------------------- grouped_query_attention, right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    work = torch.promote_types(x.dtype, torch.float32)

    def heads(t, count):
        return t.to(work).reshape(b, n, count, d_head).permute(0, 2, 1, 3)

    q = heads(x @ w_q, num_heads)
    k = heads(x @ w_k, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = heads(x @ w_v, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    merged = ctx.permute(0, 2, 1, 3).reshape(b, n, d_model).to(x.dtype)
    return merged @ w_o


def gqa_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    r = num_heads // num_kv_heads
    x64 = x.double()
    # queries grouped as (B, G, R, N, d): head h = g * R + i reads group g
    q = (x64 @ w_q.double()).reshape(b, n, num_kv_heads, r, d_head).permute(0, 2, 3, 1, 4)
    k = (x64 @ w_k.double()).reshape(b, n, num_kv_heads, d_head).permute(0, 2, 1, 3)
    v = (x64 @ w_v.double()).reshape(b, n, num_kv_heads, d_head).permute(0, 2, 1, 3)
    s = torch.einsum("bgrid,bgjd->bgrij", q, k) / math.sqrt(d_head)
    if causal:
        i = torch.arange(n)
        s = s.masked_fill(i[None, :] > i[:, None], -math.inf)
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bgjd->bgrid", p, v)  # (B, G, R, N, d)
    merged = ctx.permute(0, 3, 1, 2, 4).reshape(b, n, d_model)
    return (merged @ w_o.double()).to(x.dtype)


# ---------------------------------------------------------------------- kv_cache_bytes, wrong
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 1024 ** 3


def kv_bytes_fp16_hardcoded(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_next_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    cached = seq_len + 1  # the prompt plus the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


# ---------------------------------------------------------------------- kv_cache_bytes, right
def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kv_bytes_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    shape = (2, num_layers, batch_size, num_kv_heads, seq_len, head_dim)
    return functools.reduce(operator.mul, shape, 1) * bytes_per_element


# ------------------------------------------------------------------- decode_with_cache, wrong
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(b, 1, num_heads, dh).transpose(1, 2).float()
        prefix = x[:, :t + 1]
        k = (prefix @ w_k).view(b, t + 1, num_kv_heads, dh).transpose(1, 2).float()
        v = (prefix @ w_v).view(b, t + 1, num_kv_heads, dh).transpose(1, 2).float()
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (p @ v).to(x.dtype).transpose(1, 2).reshape(b, 1, d_model)
        outs.append(ctx @ w_o)
    return torch.cat(outs, dim=1)


def decode_attends_empty_slots(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    G = num_kv_heads
    k_cache = torch.zeros(B, G, N, hd, dtype=torch.float32)
    v_cache = torch.zeros(B, G, N, hd, dtype=torch.float32)
    result = torch.empty(B, N, D, dtype=x.dtype)
    for t in range(N):
        xt = x[:, t]  # (B, D)
        q = (xt @ w_q).view(B, num_heads, 1, hd).float()
        k_cache[:, :, t] = (xt @ w_k).view(B, G, hd).float()
        v_cache[:, :, t] = (xt @ w_v).view(B, G, hd).float()
        k_all = k_cache.repeat_interleave(num_heads // G, dim=1)
        v_all = v_cache.repeat_interleave(num_heads // G, dim=1)
        w = torch.softmax(q @ k_all.transpose(2, 3) / math.sqrt(hd), dim=-1)
        ctx = (w @ v_all).view(B, D).to(x.dtype)
        result[:, t] = ctx @ w_o
    return result


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(b, num_kv_heads, n, d_head)
    v_cache = x.new_zeros(b, num_kv_heads, n, d_head)
    steps = []
    for t in range(n):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(b, 1, num_heads, d_head).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (tok @ w_k).reshape(b, 1, num_kv_heads, d_head).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (tok @ w_v).reshape(b, 1, num_kv_heads, d_head).transpose(1, 2)
        keys = k_cache[:, :, :t].repeat_interleave(n_rep, dim=1).float()
        vals = v_cache[:, :, :t].repeat_interleave(n_rep, dim=1).float()
        att = torch.softmax(q.float() @ keys.transpose(-2, -1) / math.sqrt(d_head), dim=-1)
        ctx = (att @ vals).to(x.dtype)
        steps.append(ctx.transpose(1, 2).reshape(b, 1, d_model) @ w_o)
    return torch.cat(steps, dim=1)


def decode_value_cache_gets_keys(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    bsz, seq, dm = x.shape
    hd = dm // num_heads
    k_cache, v_cache = [], []
    outputs = []
    for t in range(seq):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).view(bsz, 1, num_heads, hd).transpose(1, 2)
        k_t = (x_t @ w_k).view(bsz, 1, num_kv_heads, hd).transpose(1, 2)
        v_t = (x_t @ w_v).view(bsz, 1, num_kv_heads, hd).transpose(1, 2)
        k_cache.append(k_t)
        v_cache.append(k_t)
        keys = torch.cat(k_cache, dim=2).repeat_interleave(num_heads // num_kv_heads, 1)
        values = torch.cat(v_cache, dim=2).repeat_interleave(num_heads // num_kv_heads, 1)
        scores = q_t.float() @ keys.float().transpose(-1, -2) / math.sqrt(hd)
        ctx = (scores.softmax(-1) @ values.float()).to(x.dtype)
        outputs.append(ctx.transpose(1, 2).reshape(bsz, 1, dm) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_cat_on_head_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    out = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        k_new = (xt @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        v_new = (xt @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=1)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=1)
        k = k_cache.repeat_interleave(rep, dim=1).float()
        v = v_cache.repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        out.append((p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).view(b, 1, num_heads, d_head).transpose(1, 2).float()
        ks.append((x_t @ w_k).view(b, 1, num_kv_heads, d_head).transpose(1, 2).float())
        vs.append((x_t @ w_v).view(b, 1, num_kv_heads, d_head).transpose(1, 2).float())
        k = torch.cat(ks, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(vs, dim=2).repeat_interleave(n_rep, dim=1)
        s = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (b, H, 1, t + 1)
        causal = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))
        s = s.masked_fill(~causal, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(b, 1, d_model) @ w_o)
    return torch.cat(outs, dim=1)


# ------------------------------------------------------------------- decode_with_cache, right
def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t, :]  # (B, d_model): the new token only
        q = (x_t @ w_q).to(work).view(b, num_heads, 1, d_head)
        keys.append((x_t @ w_k).to(work).view(b, num_kv_heads, 1, d_head))
        values.append((x_t @ w_v).to(work).view(b, num_kv_heads, 1, d_head))
        k = torch.cat(keys, dim=2).repeat_interleave(num_heads // num_kv_heads, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(num_heads // num_kv_heads, dim=1)
        ctx = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, d_head)
        outs.append(ctx.reshape(b, d_model).to(x.dtype) @ w_o)
    return torch.stack(outs, dim=1)


def decode_prealloc_grouped_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    bsz, seq, dm = x.shape
    hd = dm // num_heads
    g = num_kv_heads
    r = num_heads // g
    k_cache = torch.zeros(bsz, g, seq, hd, dtype=torch.float64)
    v_cache = torch.zeros(bsz, g, seq, hd, dtype=torch.float64)
    out = torch.zeros(bsz, seq, dm, dtype=torch.float64)
    for t in range(seq):
        tok = x[:, t]
        q = torch.einsum("bd,de->be", tok, w_q).double().reshape(bsz, g, r, hd)
        k_cache[:, :, t] = torch.einsum("bd,de->be", tok, w_k).double().reshape(bsz, g, hd)
        v_cache[:, :, t] = torch.einsum("bd,de->be", tok, w_v).double().reshape(bsz, g, hd)
        s = torch.einsum("bgrd,bgjd->bgrj", q, k_cache[:, :, :t + 1]) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrj,bgjd->bgrd", p, v_cache[:, :, :t + 1]).reshape(bsz, dm)
        out[:, t] = ctx @ w_o.double()
    return out.to(x.dtype)


E = Entry
ENTRIES = [
    E(exercise="repeat_kv", kind="wrong", label="tensor_repeat_tiles",
      mistake="Uses `x.repeat(1, n_rep, 1, 1)`, which tiles the groups (0, 1, 0, 1, ...) "
              "instead of interleaving them, so head h reads group h % G rather than "
              "h // n_rep.",
      func=repeat_kv_tiled),
    E(exercise="repeat_kv", kind="wrong", label="interleave_token_axis",
      mistake="Calls `repeat_interleave` on dim=2 (the tokens) instead of dim=1 (the "
              "groups), repeating every token instead of every K/V head.",
      func=repeat_kv_wrong_dim),
    E(exercise="repeat_kv", kind="wrong", label="new_axis_before_groups",
      mistake="Inserts the copy axis before the group axis (`x[:, None]`), so the reshape "
              "lays the copies out tiled (group 0, 1, ..., 0, 1, ...) instead of each group's "
              "copies side by side.",
      func=repeat_kv_new_axis_first),
    E(exercise="repeat_kv", kind="wrong", label="expand_without_new_axis",
      mistake="Calls `x.expand(B, G*n_rep, N, d)` directly; expand can only grow axes of "
              "size 1, so it raises whenever G > 1 and n_rep > 1.",
      func=repeat_kv_expand_directly),
    E(exercise="repeat_kv", kind="wrong", label="repeat_interleave_without_dim",
      mistake="Calls `x.repeat_interleave(n_rep)` without `dim`: torch then flattens x and "
              "repeats every single element, so the reshape interleaves feature values "
              "instead of copying whole K/V heads.",
      func=repeat_kv_interleave_no_dim),
    E(exercise="repeat_kv", kind="wrong", label="index_divides_by_groups",
      mistake="Maps head h to group h // G (the number of groups) instead of h // n_rep, so "
              "heads read the wrong group (or index past the last one and raise).",
      func=repeat_kv_divides_by_groups),
    E(exercise="repeat_kv", kind="right", label="repeat_interleave_dim1", mistake=None,
      func=repeat_kv_interleave),
    E(exercise="repeat_kv", kind="right", label="index_select_floor_div", mistake=None,
      func=repeat_kv_index_select),

    E(exercise="grouped_query_attention", kind="wrong", label="no_multiple_guard",
      mistake="Never checks that num_heads is a multiple of num_kv_heads, so num_heads=4, "
              "num_kv_heads=3 fails later with a RuntimeError from the matmul instead of a "
              "ValueError naming both numbers.",
      func=gqa_no_guard),
    E(exercise="grouped_query_attention", kind="wrong", label="tiled_kv_heads",
      mistake="Repeats the K/V heads with `.repeat(1, r, 1, 1)` (tiled), so query head h "
              "reads group h % G instead of h // (H/G).",
      func=gqa_tiled_groups),
    E(exercise="grouped_query_attention", kind="wrong", label="causal_masks_diagonal",
      mistake="Builds the blocked positions with `torch.triu(..., diagonal=0)`, which also "
              "blocks the diagonal: each query loses itself and the first row is fully "
              "masked (NaN).",
      func=gqa_mask_diagonal),
    E(exercise="grouped_query_attention", kind="wrong", label="d_head_from_kv_width",
      mistake="Computes d_head as `w_k.shape[1] // num_heads`, dividing the K/V width by the "
              "number of query heads, which is wrong whenever num_kv_heads < num_heads (the "
              "reshapes then fail).",
      func=gqa_d_head_from_w_k),
    E(exercise="grouped_query_attention", kind="wrong", label="causal_is_not_none",
      mistake="Tests `if causal is not None:`, which is true for causal=False too, so the "
              "causal mask is always applied.",
      func=gqa_causal_is_not_none),
    E(exercise="grouped_query_attention", kind="wrong", label="merge_without_transpose",
      mistake="Merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) "
              "without transposing back, scrambling tokens and heads.",
      func=gqa_merge_without_transpose),
    E(exercise="grouped_query_attention", kind="right", label="sdpa_float32", mistake=None,
      func=gqa_sdpa),
    E(exercise="grouped_query_attention", kind="right", label="grouped_einsum_no_repeat",
      mistake=None, func=gqa_grouped_einsum_float64),

    E(exercise="kv_cache_bytes", kind="wrong", label="keys_only",
      mistake="Forgets the factor 2: counts the key cache but not the value cache.",
      func=kv_bytes_keys_only),
    E(exercise="kv_cache_bytes", kind="wrong", label="ignores_batch_size",
      mistake="Leaves batch_size out of the product, counting the cache of one sequence "
              "whatever the batch.",
      func=kv_bytes_no_batch),
    E(exercise="kv_cache_bytes", kind="wrong", label="returns_gib",
      mistake="Divides by 1024**3 and returns GiB (a float) instead of the number of bytes "
              "as a plain int.",
      func=kv_bytes_gib),
    E(exercise="kv_cache_bytes", kind="wrong", label="hardcoded_two_bytes",
      mistake="Hard-codes 2 bytes per element (fp16) instead of using bytes_per_element.",
      func=kv_bytes_fp16_hardcoded),
    E(exercise="kv_cache_bytes", kind="wrong", label="numpy_prod_int64",
      mistake="Returns `np.prod(...)`, a numpy int64, instead of a plain Python int.",
      func=kv_bytes_np_prod),
    E(exercise="kv_cache_bytes", kind="wrong", label="seq_len_plus_one",
      mistake="Counts seq_len + 1 cached positions (adding the token being generated) "
              "instead of seq_len.",
      func=kv_bytes_next_token),
    E(exercise="kv_cache_bytes", kind="right", label="layer_loop", mistake=None,
      func=kv_bytes_layer_loop),
    E(exercise="kv_cache_bytes", kind="right", label="reduce_over_shape", mistake=None,
      func=kv_bytes_reduce),

    E(exercise="decode_with_cache", kind="wrong", label="reprojects_prefix",
      mistake="Projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead "
              "of caching: the values are right but the projection work is quadratic in N.",
      func=decode_reprojects_prefix),
    E(exercise="decode_with_cache", kind="wrong", label="attends_unfilled_slots",
      mistake="Attends over the whole preallocated cache, including the zero slots of "
              "future tokens, instead of only the first t+1 entries.",
      func=decode_attends_empty_slots),
    E(exercise="decode_with_cache", kind="wrong", label="cache_slice_excludes_current",
      mistake="Reads the cache up to `:t` instead of `:t+1`, so each token does not attend "
              "itself and the first token attends nothing (a zero output).",
      func=decode_cache_excludes_current),
    E(exercise="decode_with_cache", kind="wrong", label="value_cache_gets_keys",
      mistake="Appends the new key `k_t` to the value cache too (copy-paste), so the "
              "weighted sum averages keys instead of values.",
      func=decode_value_cache_gets_keys),
    E(exercise="decode_with_cache", kind="wrong", label="cache_cat_head_axis",
      mistake="Concatenates new keys and values along dim=1 (the head axis) instead of "
              "dim=2 (the tokens), so from the second step the cache has too many heads and "
              "it raises.",
      func=decode_cat_on_head_axis),
    E(exercise="decode_with_cache", kind="wrong", label="top_left_mask_per_step",
      mistake="Applies a top-left causal mask `tril(ones(1, t+1))` to the single new query, "
              "so it may only attend key 0 instead of the whole cache (the query sits at the "
              "last position).",
      func=decode_top_left_step_mask),
    E(exercise="decode_with_cache", kind="right", label="list_cache_sdpa", mistake=None,
      func=decode_list_cache_sdpa),
    E(exercise="decode_with_cache", kind="right", label="prealloc_grouped_einsum_float64",
      mistake=None, func=decode_prealloc_grouped_float64),
]
