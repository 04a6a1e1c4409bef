"""Held-out catalogue, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache): learners' answers in PyTorch, written blind."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ---------------------------------------------------------------------------- repeat_kv, wrong
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_plain_expand(x, n_rep):
    B, G, N, d = x.shape
    return x.expand(B, G * n_rep, N, d)


def repeat_kv_numpy(x, n_rep):
    return np.repeat(x.detach().cpu().numpy(), n_rep, axis=1)


def repeat_kv_divide_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_kv_flatten_minus_one(x, n_rep):
    b, g, n, d = x.shape
    per_group = x.reshape(-1, n, d)  # (B*G, N, d): one row per (sequence, group)
    copies = per_group.repeat_interleave(n_rep, dim=0)  # (B*G*n_rep, N, d)
    return copies.reshape(b, g * n_rep, n, d)


# ---------------------------------------------------------------------------- repeat_kv, right
def repeat_kv_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


# -------------------------------------------------------------- grouped_query_attention, wrong
def gqa_keys_split_by_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    kv_d = (x @ w_k).shape[-1] // num_heads
    k = (x @ w_k).view(B, N, num_heads, kv_d).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_heads, kv_d).transpose(1, 2)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        keep = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2).repeat(1, rep, 1, 1)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2).repeat(1, rep, 1, 1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(hd)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    att = scores.softmax(dim=-1).to(x.dtype)
    return (att @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_masked_fill_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        mask = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))  # True = may attend
        s = s.masked_fill(mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    out = (w @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(2, 3)) / math.sqrt(d_head)
    if causal:
        allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(probs, v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    r = num_heads // num_kv_heads
    k = k[:, :, None].expand(B, num_kv_heads, r, N, dh).reshape(B, num_heads, N, dh)
    v = v[:, :, None].expand(B, num_kv_heads, r, N, dh).reshape(B, num_heads, N, dh)
    s = (q.float() @ k.float().transpose(-1, -2)) * dh ** -0.5
    if causal:
        s = s + torch.full((N, N), float("-inf"), device=x.device).triu(1)
    a = s.softmax(-1)
    ctx = (a @ v.float()).to(x.dtype)  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def gqa_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = torch.repeat_interleave((x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2),
                                num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave((x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2),
                                num_heads // num_kv_heads, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-2)
    p = torch.nan_to_num(p)
    return (p @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


# -------------------------------------------------------------- grouped_query_attention, right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2).float()
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2).float()
    if x.dtype == torch.float64:
        q, k, v = q.double(), k.double(), v.double()
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_kv_heads <= 0 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    g = num_kv_heads
    r = num_heads // g
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(b, n, g, r, dh)  # head h = group h // r, member h % r
    k = (x64 @ w_k.double()).reshape(b, n, g, dh)
    v = (x64 @ w_v.double()).reshape(b, n, g, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(n, device=x.device)
        s = s.masked_fill(i[None, :] > i[:, None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ----------------------------------------------------------------------- kv_cache_bytes, wrong
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element / 2 ** 30


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_fixed_bf16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    bf16 = 2
    k = num_layers * num_kv_heads * head_dim * seq_len * batch_size * bf16
    v = num_layers * num_kv_heads * head_dim * seq_len * batch_size * bf16
    return k + v


def kv_bytes_plus_new_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    tokens = seq_len + 1  # the prompt plus the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_element


# ----------------------------------------------------------------------- kv_cache_bytes, right
def kv_bytes_tensor_sizes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    one_tensor = torch.Size([batch_size, num_kv_heads, seq_len, head_dim]).numel()
    return int(num_layers * 2 * one_tensor * bytes_per_element)


def kv_bytes_per_token_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += num_kv_heads * head_dim * bytes_per_element
    return total * seq_len * batch_size


# -------------------------------------------------------------------- decode_with_cache, wrong
def decode_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, : t + 1]
        q = (x[:, t : t + 1] @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (prefix @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_append_after_attend(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    outs = []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_new = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_new = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        ks = k_cache.repeat_interleave(rep, dim=1)
        vs = v_cache.repeat_interleave(rep, dim=1)
        s = q.float() @ ks.float().transpose(-2, -1) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ vs.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    hd = d // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    out = []
    for t in range(n):
        tok = x[:, t : t + 1, :]
        q = (tok @ w_q).reshape(b, 1, num_heads, hd).transpose(1, 2)
        k_cache = (tok @ w_k).reshape(b, 1, num_kv_heads, hd).transpose(1, 2)
        v_cache = (tok @ w_v).reshape(b, 1, num_kv_heads, hd).transpose(1, 2)
        k = torch.repeat_interleave(k_cache, rep, dim=1).float()
        v = torch.repeat_interleave(v_cache, rep, dim=1).float()
        w = torch.softmax(q.float() @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
        out.append((w @ v).to(x.dtype).transpose(1, 2).reshape(b, 1, d) @ w_o)
    return torch.cat(out, dim=1)


def decode_values_from_key_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values = [], []
    result = []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q_t = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1).float()
        att = torch.softmax(q_t.float() @ K.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        result.append((att @ V).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(result, dim=1)


def decode_cat_feature_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = None
    v_cache = None
    outs = []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (x_t @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v = (x_t @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k_cache = k if k_cache is None else torch.cat([k_cache, k], dim=-1)
        v_cache = v if v_cache is None else torch.cat([v_cache, v], dim=-1)
        K = k_cache.repeat_interleave(rep, dim=1).float()
        V = v_cache.repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ K.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append((p @ V).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        x_t = x[:, t : t + 1]
        q = (x_t @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t] = (x_t @ w_k).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).view(B, num_kv_heads, dh)
        K = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        V = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        s = q @ K.transpose(-2, -1) / math.sqrt(dh)
        ctx = torch.softmax(s, dim=-1) @ V
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


# -------------------------------------------------------------------- decode_with_cache, right
def decode_prealloc_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=work, device=x.device)
    v_cache = torch.empty(B, num_kv_heads, N, dh, dtype=work, device=x.device)
    steps = []
    for t in range(N):
        x_t = x[:, t, :]  # (B, D): one new token per sequence
        q_t = (x_t @ w_q).to(work).view(B, num_heads, 1, dh)
        k_cache[:, :, t] = (x_t @ w_k).to(work).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).to(work).view(B, num_kv_heads, dh)
        k_seen = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        v_seen = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q_t, k_seen, v_seen)  # (B, H, 1, dh)
        steps.append(ctx.reshape(B, D).to(x.dtype) @ w_o)
    return torch.stack(steps, dim=1)


def decode_growing_lists_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    g = num_kv_heads
    r = num_heads // g
    cache_k, cache_v = [], []
    rows = []
    for pos in range(n):
        token = x[:, pos]  # (b, d_model)
        q = (token @ w_q).double().reshape(b, g, r, dh)
        cache_k.append((token @ w_k).double().reshape(b, g, dh))
        cache_v.append((token @ w_v).double().reshape(b, g, dh))
        K = torch.stack(cache_k, dim=1)  # (b, pos+1, g, dh)
        V = torch.stack(cache_v, dim=1)
        scores = torch.einsum("bgrd,btgd->bgrt", q, K) / math.sqrt(dh)
        probs = scores.softmax(dim=-1)
        ctx = torch.einsum("bgrt,btgd->bgrd", probs, V).reshape(b, d_model)
        rows.append(ctx.to(x.dtype) @ w_o)
    return torch.stack(rows, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor-repeat-tiled",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) so head h "
          "reads group h % G instead of h // n_rep", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave-dim-2",
          "repeat_interleave along dim=2 repeats the tokens (N axis) instead of the groups",
          repeat_kv_wrong_dim),
    Entry("repeat_kv", "wrong", "expand-non-singleton",
          "calls x.expand(B, G*n_rep, N, d) directly: expand only stretches size-1 axes, so it "
          "fails whenever G > 1 (it is right only for G = 1)", repeat_kv_plain_expand),
    Entry("repeat_kv", "wrong", "returns-numpy",
          "goes through np.repeat and returns a numpy array, where the torch lesson requires a "
          "torch.Tensor", repeat_kv_numpy),
    Entry("repeat_kv", "wrong", "index-by-groups",
          "head h takes group h // G (the number of groups) instead of h // n_rep: wrong groups, "
          "or an index error when G = 1", repeat_kv_divide_by_groups),
    Entry("repeat_kv", "wrong", "reshape-minus-one-empty",
          "merges batch and groups with reshape(-1, N, d): correct in general, but for a "
          "zero-length sequence (N = 0) the -1 is ambiguous and reshape raises",
          repeat_kv_flatten_minus_one),
    Entry("repeat_kv", "right", "repeat-interleave", None, repeat_kv_interleave),
    Entry("repeat_kv", "right", "index-select", None, repeat_kv_index_select),
    Entry("grouped_query_attention", "wrong", "keys-split-into-num_heads",
          "splits the keys and values into num_heads heads instead of num_kv_heads, so the "
          "key head size is wrong (a shape error unless num_kv_heads == num_heads)",
          gqa_keys_split_by_num_heads),
    Entry("grouped_query_attention", "wrong", "tiled-kv-repeat",
          "repeats the K/V heads with .repeat(1, n_rep, 1, 1), the tiled order: query head h "
          "gets group h % G instead of h // n_rep", gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "masked-fill-on-allowed",
          "passes the True = may attend mask straight to masked_fill, which fills where the "
          "mask is True, so it blanks the allowed keys and keeps the future ones",
          gqa_masked_fill_allowed),
    Entry("grouped_query_attention", "wrong", "no-group-divisibility-check",
          "never checks that num_kv_heads divides num_heads: the mismatch surfaces as a torch "
          "RuntimeError in the matmul instead of a ValueError naming both numbers",
          gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "merge-without-transpose",
          "merges the heads by reshaping (B, H, N, d_head) to (B, N, d_model) without "
          "transposing back, which scrambles tokens and heads", gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "softmax-over-queries",
          "softmax over dim=-2 (the queries) instead of dim=-1 (the keys)",
          gqa_softmax_over_queries),
    Entry("grouped_query_attention", "right", "repeat-then-sdpa", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped-einsum-float64", None, gqa_grouped_einsum),
    Entry("kv_cache_bytes", "wrong", "keys-only",
          "counts only the key cache: the factor 2 for keys and values is missing",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "converted-to-gib",
          "divides by 2**30 and returns GiB (a float) instead of bytes", kv_bytes_gib),
    Entry("kv_cache_bytes", "wrong", "ignores-batch-size",
          "returns the size for one sequence: batch_size never enters the product",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "np-prod-int64",
          "multiplies with np.prod, which returns a numpy integer instead of a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "hard-coded-bf16",
          "hard-codes 2 bytes per element (bf16) instead of using bytes_per_element",
          kv_bytes_fixed_bf16),
    Entry("kv_cache_bytes", "wrong", "seq-len-plus-one",
          "counts seq_len + 1 positions (adding the token being generated), one token too many",
          kv_bytes_plus_new_token),
    Entry("kv_cache_bytes", "right", "torch-size-numel", None, kv_bytes_tensor_sizes),
    Entry("kv_cache_bytes", "right", "per-layer-loop", None, kv_bytes_per_token_loop),
    Entry("decode_with_cache", "wrong", "reprojects-prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching: same numbers, but quadratic projection work, which the exercise forbids",
          decode_reproject_prefix),
    Entry("decode_with_cache", "wrong", "append-after-attending",
          "appends the new key and value to the cache after attending, so each token sees only "
          "the earlier ones, not itself (the first token sees nothing and gives 0)",
          decode_append_after_attend),
    Entry("decode_with_cache", "wrong", "cache-overwritten",
          "assigns the new key/value to the cache variable instead of appending, so every "
          "token attends to itself only", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "values-from-key-cache",
          "builds V from the key list (copy-paste) instead of the value list",
          decode_values_from_key_cache),
    Entry("decode_with_cache", "wrong", "cat-on-feature-dim",
          "concatenates the cache along dim=-1 (features) instead of dim=2 (tokens), so from the "
          "second token on the shapes no longer match and the matmul raises",
          decode_cat_feature_dim),
    Entry("decode_with_cache", "wrong", "float32-cache",
          "allocates the cache with torch.zeros' default dtype float32, not x's dtype, so "
          "float64 and half-precision inputs fail on the mixed-dtype matmul",
          decode_float32_cache),
    Entry("decode_with_cache", "right", "prealloc-cache-sdpa", None, decode_prealloc_sdpa),
    Entry("decode_with_cache", "right", "growing-lists-einsum", None, decode_growing_lists_einsum),
]
