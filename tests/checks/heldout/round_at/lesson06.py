"""Held-out catalogue, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache): learners' answers in PyTorch, wrong and right."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv, wrong
def rkv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rkv_guard_rejects_one(x, n_rep):
    if n_rep <= 1:
        raise ValueError(f"n_rep must be > 1, got n_rep={n_rep}")
    return x.repeat_interleave(n_rep, dim=1)


def rkv_index_by_groups(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep) // groups
    return x[:, idx]


def rkv_reshape_minus_one(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(-1, -1, n_rep, -1, -1).reshape(b, -1, n, d)


# ============================================================================ repeat_kv, right
def rkv_index_select(x, n_rep):
    heads = torch.arange(x.shape[1] * n_rep, device=x.device)
    return torch.index_select(x, 1, torch.div(heads, n_rep, rounding_mode="floor"))


def rkv_cat_loop(x, n_rep):
    copies = []
    for group in range(x.shape[1]):
        for _ in range(n_rep):
            copies.append(x[:, group:group + 1])
    return torch.cat(copies, dim=1)


# ============================================================================ GQA, wrong
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
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(D)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    groups = num_heads // num_kv_heads
    k, v = k.repeat(1, groups, 1, 1), v.repeat(1, groups, 1, 1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
        scores = scores.masked_fill(~keep, float("-inf"))
    attn = scores.softmax(dim=-1)
    out = (attn @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_strict_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    hd = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).transpose(1, 2).float()
    k = (x @ w_k).reshape(b, n, num_kv_heads, hd).transpose(1, 2).float()
    v = (x @ w_v).reshape(b, n, num_kv_heads, hd).transpose(1, 2).float()
    k = torch.repeat_interleave(k, num_heads // num_kv_heads, dim=1)
    v = torch.repeat_interleave(v, num_heads // num_kv_heads, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) / hd ** 0.5
    if causal:
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        scores = scores.masked_fill(j >= i, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(w, v).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_kv_split_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    dh = dm // num_heads

    def heads(t, count):
        return t.reshape(bsz, seq, count, dh).transpose(1, 2)

    q = heads(x @ w_q, num_heads)
    k = heads(x @ w_k, num_heads)
    v = heads(x @ w_v, num_heads)
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1), -math.inf)
    out = (s.softmax(-1) @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(bsz, seq, dm) @ w_o


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(d_head)
    if causal:
        scores = scores + torch.full((n, n), float("-inf")).triu(1)
    probs = torch.softmax(scores, dim=-1).to(x.dtype)
    return (probs @ v).transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) * (1.0 / math.sqrt(d_head))
    if causal:
        scores = scores.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), -torch.inf)
    ctx = (torch.softmax(scores, dim=-1) @ v.float()).to(x.dtype)  # (B, H, N, d_head)
    return ctx.reshape(b, n, d_model) @ w_o


# ============================================================================ GQA, right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    hd = d_model // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, hd)).transpose(1, 2).float()
    k = (x @ w_k).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).float()
    v = (x @ w_v).unflatten(-1, (num_kv_heads, hd)).transpose(1, 2).float()
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o


def gqa_head_loop_f64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    n = x.shape[1]
    d_head = x.shape[-1] // num_heads
    per_group = num_heads // num_kv_heads
    qa = (x @ w_q).double()
    ka = (x @ w_k).double()
    va = (x @ w_v).double()
    outs = []
    for h in range(num_heads):
        g = h // per_group
        qh = qa[..., h * d_head:(h + 1) * d_head]
        kh = ka[..., g * d_head:(g + 1) * d_head]
        vh = va[..., g * d_head:(g + 1) * d_head]
        sc = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(d_head)
        if causal:
            sc = torch.where(torch.arange(n)[None, :] <= torch.arange(n)[:, None], sc,
                             torch.tensor(-math.inf, dtype=sc.dtype))
        outs.append(torch.softmax(sc, dim=-1) @ vh)
    return torch.cat(outs, dim=-1).to(x.dtype) @ w_o


# ============================================================================ kv_cache_bytes, wrong
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 8 * bytes_per_element


def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_layer = 2 * num_kv_heads * head_dim * seq_len
    return num_layers * per_layer * bytes_per_element


def kvb_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kvb_double_counted(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    k_and_v = 2
    fp16 = 2
    return (k_and_v * fp16 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
            * bytes_per_element)


def kvb_extra_slot(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    slots = seq_len + 1  # room for the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * slots * batch_size * bytes_per_element


# ============================================================================ kv_cache_bytes, right
def kvb_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kvb_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
               bytes_per_element=2):
    factors = (2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    return int(functools.reduce(operator.mul, factors, 1))


# ============================================================================ decode, wrong
def dec_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
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
        p = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        outs.append(ctx @ w_o)
    return torch.cat(outs, dim=1)


def dec_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    hd = d // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(b, num_kv_heads, 0, hd)
    v_cache = x.new_zeros(b, num_kv_heads, 0, hd)
    result = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(b, 1, num_heads, hd).transpose(1, 2).float()
        kk = k_cache.repeat_interleave(rep, dim=1).float()
        vv = v_cache.repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q @ kk.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        ctx = (w @ vv).to(x.dtype)
        result.append(ctx.transpose(1, 2).reshape(b, 1, d) @ w_o)
        k_new = (xt @ w_k).reshape(b, 1, num_kv_heads, hd).transpose(1, 2)
        v_new = (xt @ w_v).reshape(b, 1, num_kv_heads, hd).transpose(1, 2)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(result, dim=1)


def dec_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    dh = dm // num_heads
    groups = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(seq):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(bsz, 1, num_heads, dh).transpose(1, 2)
        keys.append((tok @ w_k).reshape(bsz, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((tok @ w_v).reshape(bsz, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat(1, groups, 1, 1).float()
        V = torch.cat(values, dim=2).repeat(1, groups, 1, 1).float()
        att = torch.softmax((q.float() @ K.transpose(-2, -1)) / math.sqrt(dh), dim=-1)
        o = (att @ V).to(x.dtype).transpose(1, 2).reshape(bsz, 1, dm)
        outputs.append(o @ w_o)
    return torch.cat(outputs, dim=1)


def dec_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    steps = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).view(b, 1, num_heads, d_head).transpose(1, 2)
        k_cache = (x_t @ w_k).view(b, 1, num_kv_heads, d_head).transpose(1, 2)
        v_cache = (x_t @ w_v).view(b, 1, num_kv_heads, d_head).transpose(1, 2)
        k_all = k_cache.repeat_interleave(n_rep, dim=1).float()
        v_all = v_cache.repeat_interleave(n_rep, dim=1).float()
        s = q_t.float() @ k_all.transpose(-1, -2) / math.sqrt(d_head)
        ctx = (s.softmax(dim=-1) @ v_all).to(x.dtype)
        steps.append(ctx.transpose(1, 2).reshape(b, 1, d_model) @ w_o)
    return torch.cat(steps, dim=1)


def dec_cat_heads_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = (x_t @ w_q).view(b, 1, num_heads, d_head).transpose(1, 2)
        k_t = (x_t @ w_k).view(b, 1, num_kv_heads, d_head).transpose(1, 2)
        v_t = (x_t @ w_v).view(b, 1, num_kv_heads, d_head).transpose(1, 2)
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=1)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=1)
        k_all = k_cache.repeat_interleave(n_rep, dim=1).float()
        v_all = v_cache.repeat_interleave(n_rep, dim=1).float()
        s = q_t.float() @ k_all.transpose(-1, -2) / math.sqrt(d_head)
        ctx = (s.softmax(dim=-1) @ v_all).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(b, 1, d_model) @ w_o)
    return torch.cat(outs, dim=1)


def dec_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    rep = num_heads // num_kv_heads
    kc = torch.zeros(B, num_kv_heads, N, hd)
    vc = torch.zeros(B, num_kv_heads, N, hd)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        kc[:, :, t] = (xt @ w_k).reshape(B, num_kv_heads, hd)
        vc[:, :, t] = (xt @ w_v).reshape(B, num_kv_heads, hd)
        ks = kc[:, :, :t + 1].repeat_interleave(rep, dim=1)
        vs = vc[:, :, :t + 1].repeat_interleave(rep, dim=1)
        w = torch.softmax(q @ ks.transpose(-2, -1) / math.sqrt(hd), dim=-1)
        outs.append((w @ vs).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


# ============================================================================ decode, right
def dec_grouped_einsum_f64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    hd = d_model // num_heads
    r = num_heads // num_kv_heads
    keys = torch.zeros(b, num_kv_heads, n, hd, dtype=torch.float64)
    vals = torch.zeros(b, num_kv_heads, n, hd, dtype=torch.float64)
    rows = []
    for pos in range(n):
        tok = x[:, pos:pos + 1, :]
        q = (tok @ w_q).double().reshape(b, num_kv_heads, r, hd)  # heads grouped by K/V head
        keys[:, :, pos] = (tok @ w_k).double().reshape(b, num_kv_heads, hd)
        vals[:, :, pos] = (tok @ w_v).double().reshape(b, num_kv_heads, hd)
        s = torch.einsum("bgrd,bgtd->bgrt", q, keys[:, :, :pos + 1]) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, vals[:, :, :pos + 1])
        rows.append(ctx.reshape(b, 1, d_model).to(x.dtype) @ w_o)
    return torch.cat(rows, dim=1)


def dec_sdpa_lists(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, length, width = x.shape
    head = width // num_heads
    past_k, past_v = [], []
    out = torch.empty_like(x)
    for step in range(length):
        token = x[:, step:step + 1]
        q = (token @ w_q).unflatten(-1, (num_heads, head)).transpose(1, 2).float()
        past_k.append((token @ w_k).unflatten(-1, (num_kv_heads, head)).transpose(1, 2))
        past_v.append((token @ w_v).unflatten(-1, (num_kv_heads, head)).transpose(1, 2))
        k = torch.cat(past_k, 2).float().repeat_interleave(num_heads // num_kv_heads, 1)
        v = torch.cat(past_v, 2).float().repeat_interleave(num_heads // num_kv_heads, 1)
        ctx = F.scaled_dot_product_attention(q, k, v)  # the newest query sees every cached key
        out[:, step:step + 1] = ctx.to(x.dtype).transpose(1, 2).flatten(2) @ w_o
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor_repeat_tiles",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1) instead of "
          "repeating each group n_rep times in a row (0, 0, 1, 1)", rkv_tiled),
    Entry("repeat_kv", "wrong", "interleave_on_token_axis",
          "calls repeat_interleave on dim=2, repeating the tokens instead of the groups",
          rkv_wrong_dim),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "flattens the expanded tensor with .view, which raises because an expanded tensor is "
          "not contiguous (reshape makes the copy)", rkv_view_after_expand),
    Entry("repeat_kv", "wrong", "rejects_n_rep_one",
          "the guard raises for n_rep <= 1, so the valid n_rep = 1 (plain MHA) is refused",
          rkv_guard_rejects_one),
    Entry("repeat_kv", "wrong", "index_divides_by_groups",
          "builds the head-to-group index as h // G (the number of groups) instead of "
          "h // n_rep", rkv_index_by_groups),
    Entry("repeat_kv", "wrong", "reshape_minus_one_zero_tokens",
          "reshapes with -1 for the head axis, which cannot be inferred when N = 0, so an "
          "empty sequence raises", rkv_reshape_minus_one),
    Entry("repeat_kv", "right", "index_select_floor_div", None, rkv_index_select),
    Entry("repeat_kv", "right", "cat_of_slices", None, rkv_cat_loop),
    Entry("grouped_query_attention", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)", gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "tiled_kv_repeat",
          "repeats the K/V heads with .repeat, so query head h reads group h % G instead of "
          "h // n_rep", gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "causal_excludes_diagonal",
          "the causal mask hides j >= i instead of j > i, so a query cannot see itself and "
          "the first row has no key (NaN)", gqa_strict_causal),
    Entry("grouped_query_attention", "wrong", "kv_split_with_num_heads",
          "splits keys and values into num_heads heads instead of num_kv_heads, which fails "
          "as soon as num_kv_heads < num_heads", gqa_kv_split_num_heads),
    Entry("grouped_query_attention", "wrong", "no_multiple_check",
          "never checks that num_kv_heads divides num_heads, so a bad pair fails later with a "
          "RuntimeError instead of a ValueError", gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges (B, H, N, d_head) into (B, N, d_model) by reshape without transposing heads "
          "and tokens first", gqa_merge_no_transpose),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per_head_loop_float64", None, gqa_head_loop_f64),
    Entry("kv_cache_bytes", "wrong", "no_k_and_v_factor",
          "forgets the factor 2: counts only the keys (or only the values)",
          kvb_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8 bits per byte, returning bits instead of bytes", kvb_bits),
    Entry("kv_cache_bytes", "wrong", "ignores_batch_size",
          "leaves batch_size out, giving the cache of one sequence", kvb_no_batch),
    Entry("kv_cache_bytes", "wrong", "numpy_prod_int64",
          "multiplies with np.prod, which returns a numpy int64 instead of a plain Python int",
          kvb_np_prod),
    Entry("kv_cache_bytes", "wrong", "fp16_counted_twice",
          "multiplies by a hard-coded 2 bytes for fp16 and by bytes_per_element, counting the "
          "element size twice", kvb_double_counted),
    Entry("kv_cache_bytes", "wrong", "extra_token_slot",
          "counts seq_len + 1 positions (a slot for the next token) instead of seq_len",
          kvb_extra_slot),
    Entry("kv_cache_bytes", "right", "loop_over_layers", None, kvb_layer_loop),
    Entry("kv_cache_bytes", "right", "functools_reduce", None, kvb_reduce),
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "recomputes the keys and values of the whole prefix at every step instead of "
          "projecting only the new token and caching (quadratic projection work)",
          dec_reproject_prefix),
    Entry("decode_with_cache", "wrong", "attends_before_append",
          "attends over the cache before appending the new token's key and value, so each "
          "token misses itself (the first token gets zeros)", dec_attend_before_append),
    Entry("decode_with_cache", "wrong", "tiled_repeat",
          "expands the cached K/V heads with .repeat (tiled), so query head h reads group "
          "h % G instead of h // n_rep", dec_tiled_repeat),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key and value to the cache instead of appending, so each token "
          "attends only to itself", dec_cache_overwritten),
    Entry("decode_with_cache", "wrong", "cache_grows_on_heads_axis",
          "concatenates new keys and values on dim 1 (heads) instead of dim 2 (positions), "
          "which breaks the shapes from the second token on", dec_cat_heads_dim),
    Entry("decode_with_cache", "wrong", "float32_cache",
          "allocates the cache with torch.zeros without dtype (float32), so the product with a "
          "query of any other dtype raises", dec_float32_cache),
    Entry("decode_with_cache", "right", "grouped_einsum_float64", None, dec_grouped_einsum_f64),
    Entry("decode_with_cache", "right", "sdpa_with_lists", None, dec_sdpa_lists),
]
