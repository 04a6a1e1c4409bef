"""Held-out learners' answers, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- repeat_kv, wrong
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_index_modulo(x, n_rep):
    G = x.shape[1]
    idx = torch.arange(G * n_rep, device=x.device) % G
    return x[:, idx]


def repeat_kv_index_div_groups(x, n_rep):
    G = x.shape[1]
    idx = torch.arange(G * n_rep, device=x.device) // G
    return x.index_select(1, idx)


def repeat_kv_stack_last(x, n_rep):
    B, G, N, d = x.shape
    return torch.stack([x] * n_rep, dim=-1).reshape(B, G * n_rep, N, d)


def repeat_kv_loop_off_by_one(x, n_rep):
    groups = x.shape[1]
    heads = []
    for g in range(groups - 1):
        for _ in range(n_rep):
            heads.append(x[:, g])
    return torch.stack(heads, dim=1)


# ----------------------------------------------------------------------------- repeat_kv, right
def repeat_kv_index_select(x, n_rep):
    g = x.shape[1]
    which = torch.div(torch.arange(g * n_rep, device=x.device), n_rep, rounding_mode="floor")
    return torch.index_select(x, 1, which)


def repeat_kv_loop_cat(x, n_rep):
    parts = []
    for g in range(x.shape[1]):
        parts.extend([x[:, g:g + 1]] * n_rep)
    return torch.cat(parts, dim=1)


# ----------------------------------------------------------------------------- GQA, wrong
def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
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
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(D)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = (p @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2).float()
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2).float()
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2).float()
    k = k.repeat(1, num_heads // num_kv_heads, 1, 1)
    v = v.repeat(1, num_heads // num_kv_heads, 1, 1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~allowed, float("-inf"))
    att = scores.softmax(dim=-1)
    ctx = (att @ v).transpose(1, 2).reshape(b, n, d_model).to(x.dtype)
    return ctx @ w_o


def gqa_triu_diag0(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2).to(torch.float32)
    K = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2).to(torch.float32)
    V = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2).to(torch.float32)
    r = num_heads // num_kv_heads
    K = K[:, :, None].expand(B, num_kv_heads, r, N, hd).reshape(B, num_heads, N, hd)
    V = V[:, :, None].expand(B, num_kv_heads, r, N, hd).reshape(B, num_heads, N, hd)
    S = Q @ K.transpose(-2, -1) / math.sqrt(hd)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=0)
        S = S.masked_fill(future, float("-inf"))
    m = S.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    P = torch.exp(S - m)
    Z = P.sum(dim=-1, keepdim=True)
    P = P / torch.where(Z == 0, torch.ones_like(Z), Z)
    return (P @ V).transpose(1, 2).reshape(B, N, D).to(x.dtype) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, n_rep, dim=1)
    v = torch.repeat_interleave(v, n_rep, dim=1)
    scores = torch.einsum("bhid,bhjd->bhij", q.float(), k.float()) / math.sqrt(dh)
    if causal is not None:
        scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhij,bhjd->bhid", weights, v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, dh).transpose(1, 2)
    groups = num_heads // num_kv_heads
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    a = torch.softmax(s, dim=-1)
    return (a @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_kv_split_by_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads

    def heads(t, h):
        return t.reshape(B, N, h, -1).transpose(1, 2)

    q = heads(x @ w_q, num_heads).float()
    k = heads(x @ w_k, num_heads).float()
    v = heads(x @ w_v, num_heads).float()
    s = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    p = s.softmax(-1)
    return (p @ v).transpose(1, 2).reshape(B, N, D).to(x.dtype) @ w_o


# ----------------------------------------------------------------------------- GQA, right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    xf = x.float()
    q = (xf @ w_q.float()).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (xf @ w_k.float()).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (xf @ w_v.float()).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    r = num_heads // num_kv_heads
    k = k.repeat_interleave(r, dim=1)
    v = v.repeat_interleave(r, dim=1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (o.transpose(1, 2).flatten(2) @ w_o.float()).to(x.dtype)


def gqa_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    X = x.double()
    B, N, D = X.shape
    dh = D // num_heads
    per_group = num_heads // num_kv_heads
    out = torch.zeros(B, N, D, dtype=torch.float64, device=x.device)
    visible = torch.arange(N)[None, :] <= torch.arange(N)[:, None]
    for h in range(num_heads):
        g = h // per_group
        qh = X @ w_q.double()[:, h * dh:(h + 1) * dh]
        kh = X @ w_k.double()[:, g * dh:(g + 1) * dh]
        vh = X @ w_v.double()[:, g * dh:(g + 1) * dh]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            s = torch.where(visible.to(x.device), s, torch.tensor(float("-inf"), dtype=s.dtype))
        p = torch.softmax(s, dim=-1)
        out += (p @ vh) @ w_o.double()[h * dh:(h + 1) * dh, :]
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- kv_cache_bytes, wrong
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element
    return per_token * num_layers * seq_len


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def kv_bytes_numpy_int(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_fp16_hardcoded(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16: 2 bytes


def kv_bytes_last_token_uncached(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                 bytes_per_element=2):
    cached = seq_len - 1  # the newest token is being computed, not yet in the cache
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


# ----------------------------------------------------------------------------- kv_cache_bytes, right
def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    keys_and_values = 2
    return math.prod((keys_and_values, num_layers, num_kv_heads, head_dim, seq_len,
                      batch_size, bytes_per_element))


def kv_bytes_meta_tensor(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    cache = torch.empty((num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim),
                        device="meta")
    return cache.numel() * bytes_per_element


# ----------------------------------------------------------------------------- decode, wrong
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, :t + 1]
        q = (x[:, t:t + 1] @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (prefix @ w_k).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k = k.repeat_interleave(rep, dim=1).float()
        v = v.repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        o = (w @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        outs.append(o @ w_o)
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
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2).float()
        k_all = k_cache.repeat_interleave(rep, dim=1).float()
        v_all = v_cache.repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q @ k_all.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        o = (w @ v_all).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o
        outs.append(o)
        k_cache = torch.cat([k_cache, (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)], 2)
        v_cache = torch.cat([v_cache, (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)], 2)
    return torch.cat(outs, dim=1)


def decode_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    hd = d // num_heads
    keys, values, outputs = [], [], []
    for t in range(n):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(b, 1, num_heads, hd).transpose(1, 2)
        keys.append((tok @ w_k).reshape(b, 1, num_kv_heads, hd).transpose(1, 2))
        values.append((tok @ w_v).reshape(b, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat(1, num_heads // num_kv_heads, 1, 1)
        V = torch.cat(values, dim=2).repeat(1, num_heads // num_kv_heads, 1, 1)
        s = q.float() @ K.float().transpose(-1, -2) / math.sqrt(hd)
        ctx = (s.softmax(-1) @ V.float()).to(x.dtype)
        outputs.append(ctx.transpose(1, 2).reshape(b, 1, d) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_cat_wrong_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    kc = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    vc = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    steps = []
    for t in range(N):
        xt = x[:, t:t + 1]
        qt = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        kc[:, :, t:t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        vc[:, :, t:t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = kc[:, :, :t + 1].repeat_interleave(n_rep, dim=1).float()
        v = vc[:, :, :t + 1].repeat_interleave(n_rep, dim=1).float()
        a = torch.softmax(qt.float() @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        steps.append((a @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=0)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    out = []
    k_cache = v_cache = None
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache.repeat_interleave(n_rep, dim=1).float()
        v = v_cache.repeat_interleave(n_rep, dim=1).float()
        p = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        out.append((p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_attends_whole_buffer(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    K = torch.zeros(B, num_kv_heads, N, dh, dtype=torch.float32)
    V = torch.zeros(B, num_kv_heads, N, dh, dtype=torch.float32)
    res = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2).float()
        K[:, :, t] = (xt @ w_k).view(B, num_kv_heads, dh).float()
        V[:, :, t] = (xt @ w_v).view(B, num_kv_heads, dh).float()
        k = K.repeat_interleave(n_rep, dim=1)
        v = V.repeat_interleave(n_rep, dim=1)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        res.append((a @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(res, dim=1)


# ----------------------------------------------------------------------------- decode, right
def decode_growing_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    r = num_heads // num_kv_heads
    ks, vs, outs = None, None, []
    for t in range(N):
        tok = x[:, t:t + 1]
        q = (tok @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2)
        k = (tok @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
        v = (tok @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
        ks = k if ks is None else torch.cat([ks, k], dim=2)
        vs = v if vs is None else torch.cat([vs, v], dim=2)
        o = F.scaled_dot_product_attention(q.float(), ks.float().repeat_interleave(r, dim=1),
                                           vs.float().repeat_interleave(r, dim=1))
        outs.append(o.to(x.dtype).transpose(1, 2).flatten(2) @ w_o)
    return torch.cat(outs, dim=1)


def decode_loops_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    per = num_heads // num_kv_heads
    Wq, Wk, Wv, Wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    result = torch.zeros(B, N, D, dtype=torch.float64)
    for b in range(B):
        k_cache = torch.zeros(N, num_kv_heads * dh, dtype=torch.float64)
        v_cache = torch.zeros(N, num_kv_heads * dh, dtype=torch.float64)
        for t in range(N):
            xt = x[b, t].double()  # (D,): only this token is projected
            k_cache[t] = xt @ Wk
            v_cache[t] = xt @ Wv
            qt = xt @ Wq
            ctx = torch.zeros(D, dtype=torch.float64)
            for h in range(num_heads):
                g = h // per
                qh = qt[h * dh:(h + 1) * dh]
                kh = k_cache[:t + 1, g * dh:(g + 1) * dh]
                vh = v_cache[:t + 1, g * dh:(g + 1) * dh]
                p = torch.softmax(kh @ qh / math.sqrt(dh), dim=0)
                ctx[h * dh:(h + 1) * dh] = p @ vh
            result[b, t] = ctx @ Wo
    return result.to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor_repeat_tiles",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 2, 0, 1, 2) instead of repeating "
          "each group in place (0, 0, 1, 1, 2, 2), so head h does not read group h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_token_axis",
          "repeat_interleave is applied on dim=2 (the tokens) instead of dim=1 (the groups)",
          repeat_kv_interleave_tokens),
    Entry("repeat_kv", "wrong", "index_h_mod_G",
          "the group index is h % G instead of h // n_rep, which gives the tiled order",
          repeat_kv_index_modulo),
    Entry("repeat_kv", "wrong", "index_h_div_G",
          "the group index is h // G (number of groups) instead of h // n_rep", repeat_kv_index_div_groups),
    Entry("repeat_kv", "wrong", "stack_on_last_axis",
          "the copies are stacked on the last axis and then reshaped, which interleaves copies "
          "with features and scrambles the values instead of adding heads",
          repeat_kv_stack_last),
    Entry("repeat_kv", "wrong", "loop_skips_last_group",
          "the loop runs over range(G - 1), so the last group is never copied (and with G = 1 "
          "there is nothing to stack, which raises)", repeat_kv_loop_off_by_one),
    Entry("repeat_kv", "right", "index_select_floor_div", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "loop_cat_slices", None, repeat_kv_loop_cat),
    Entry("grouped_query_attention", "wrong", "scale_by_d_model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head)", gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "kv_heads_tiled",
          "K and V heads are expanded with .repeat, which tiles the groups, so query head h "
          "reads group h % G instead of h // n_rep", gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "mask_hides_diagonal",
          "the causal mask hides torch.triu(..., diagonal=0), which includes the diagonal, so "
          "no query sees its own token (and the first row is empty)", gqa_triu_diag0),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "the mask is applied when `causal is not None`, which is also true for causal=False, "
          "so the non-causal layer is masked too", gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "no_group_check",
          "it never checks that num_heads is a multiple of num_kv_heads, so num_heads=4, "
          "num_kv_heads=3 fails later with a torch shape error instead of a ValueError",
          gqa_no_divisibility_check),
    Entry("grouped_query_attention", "wrong", "kv_split_into_num_heads",
          "keys and values are split into num_heads heads instead of num_kv_heads, so with fewer "
          "K/V heads their head size no longer matches the queries' and the score product "
          "raises a shape error", gqa_kv_split_by_num_heads),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per_head_loop_float64", None, gqa_head_loop_float64),
    Entry("kv_cache_bytes", "wrong", "no_factor_two",
          "it counts only one tensor per layer: the factor 2 for keys and values is missing",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "batch_ignored",
          "batch_size is never multiplied in, so the cache of a batch is counted as one "
          "sequence", kv_bytes_batch_ignored),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "it converts to GiB (/ 2**30) and returns a float instead of the number of bytes as an "
          "int", kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "numpy_int",
          "np.prod returns a numpy int64, not the plain Python int the contract asks for",
          kv_bytes_numpy_int),
    Entry("kv_cache_bytes", "wrong", "two_bytes_hardcoded",
          "it always multiplies by 2 bytes (fp16) and ignores bytes_per_element",
          kv_bytes_fp16_hardcoded),
    Entry("kv_cache_bytes", "wrong", "seq_len_minus_one",
          "it caches seq_len - 1 tokens, as if the newest token were not stored, instead of "
          "seq_len", kv_bytes_last_token_uncached),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "meta_tensor_numel", None, kv_bytes_meta_tensor),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "every step projects the whole prefix x[:, :t+1] with w_k and w_v again instead of "
          "only the new token, so the projection work is quadratic in N (no real cache)",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "appends_after_attending",
          "the new token's key and value are appended to the cache only after attending, so "
          "each query misses its own token (and the first one sees no key at all)",
          decode_append_after_attending),
    Entry("decode_with_cache", "wrong", "kv_heads_tiled",
          "the cached K/V heads are expanded with .repeat, which tiles the groups, so query head "
          "h reads group h % G instead of h // n_rep", decode_tiled_repeat),
    Entry("decode_with_cache", "wrong", "steps_cat_on_batch",
          "the per-step outputs are concatenated on dim 0 (the batch) instead of dim 1 (the "
          "tokens), giving (N*B, 1, d_model)", decode_cat_wrong_dim),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "the cache is overwritten with the newest key and value each step instead of "
          "appended, so each query attends only to its own token", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "attends_zero_slots",
          "each step attends over the whole preallocated cache, including the zero rows of "
          "future positions, instead of the first t+1 slots", decode_attends_whole_buffer),
    Entry("decode_with_cache", "right", "growing_cache_sdpa", None, decode_growing_cache_sdpa),
    Entry("decode_with_cache", "right", "per_token_loops_float64", None, decode_loops_float64),
]
