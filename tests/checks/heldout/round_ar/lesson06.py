"""Held-out learners' answers, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache). PyTorch; no mhalib."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

# ============================================================================ repeat_kv


def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_sequence_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_n_rep_as_heads(x, n_rep):
    groups = x.shape[1]
    per_group = n_rep // groups  # copies of each group so that there are n_rep heads
    return x.repeat_interleave(per_group, dim=1)


def repeat_kv_skip_single_group(x, n_rep):
    if n_rep == 1 or x.shape[1] == 1:
        return x
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)


def repeat_kv_group_range_short(x, n_rep):
    G = x.shape[1]
    blocks = [x[:, g:g + 1].expand(-1, n_rep, -1, -1) for g in range(G - 1)]
    if not blocks:
        return x[:, :0]
    return torch.cat(blocks, dim=1)


def repeat_kv_interleave_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_kv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_kv_one_hot_einsum(x, n_rep):
    g = x.shape[1]
    heads = torch.arange(g * n_rep, device=x.device)
    assign = (heads[:, None] // n_rep == torch.arange(g, device=x.device)[None, :])
    return torch.einsum("hg,bgnd->bhnd", assign.to(x.dtype), x)


# ============================================================================ grouped_query_attention


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
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
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = scores.softmax(dim=-1)
    ctx = (weights @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, d_model = x.shape
    head_dim = d_model // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, head_dim).transpose(1, 2)
    K = (x @ w_k).reshape(B, N, num_kv_heads, head_dim).transpose(1, 2)
    V = (x @ w_v).reshape(B, N, num_kv_heads, head_dim).transpose(1, 2)
    K = torch.repeat_interleave(K, num_heads // num_kv_heads, dim=1)
    V = torch.repeat_interleave(V, num_heads // num_kv_heads, dim=1)
    S = Q.float() @ K.float().transpose(2, 3) / math.sqrt(w_k.shape[1])
    if causal:
        S = S.masked_fill(~torch.tril(torch.ones(N, N, dtype=torch.bool)), float("-inf"))
    A = torch.softmax(S, dim=-1)
    O = (A @ V.float()).to(x.dtype)
    return O.transpose(1, 2).reshape(B, N, d_model) @ w_o


def gqa_masked_fill_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    hd = dm // num_heads
    q = (x @ w_q).reshape(bsz, seq, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    g = num_heads // num_kv_heads
    k = k[:, :, None].expand(bsz, num_kv_heads, g, seq, hd).reshape(bsz, num_heads, seq, hd)
    v = v[:, :, None].expand(bsz, num_kv_heads, g, seq, hd).reshape(bsz, num_heads, seq, hd)
    att = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(hd)
    if causal:
        allowed = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        att = att.masked_fill(allowed, float("-inf"))
    m = att.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(att - m)
    z = e.sum(dim=-1, keepdim=True)
    att = e / torch.where(z == 0, torch.ones_like(z), z)
    y = (att @ v.float()).to(x.dtype)
    return y.transpose(1, 2).reshape(bsz, seq, dm) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    scores = (q @ k.transpose(-2, -1)).float() * dh ** -0.5
    if causal:
        scores = scores + torch.full((N, N), float("-inf")).triu(1)
    probs = scores.softmax(-1).to(x.dtype)
    out = probs @ v  # (B, H, N, dh)
    return out.reshape(B, N, D) @ w_o


def gqa_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads

    def split(t, h):
        return t.reshape(B, N, h, dh).transpose(1, 2)

    q = split(x @ w_q, num_heads)
    k = split(x @ w_k, num_kv_heads)
    v = split(x @ w_k, num_kv_heads)
    rep = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, rep, dim=1)
    v = torch.repeat_interleave(v, rep, dim=1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        i = torch.arange(N)
        s = s.masked_fill(i[None, :] > i[:, None], float("-inf"))
    o = (torch.softmax(s, -1) @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_sdpa_enable_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).unflatten(-1, (num_heads, dh)).transpose(1, 2).float()
    k = (x @ w_k).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2).float()
    v = (x @ w_v).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2).float()
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


def gqa_per_group_loops_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    x64 = x.double()
    B, N, D = x.shape
    dh = D // num_heads
    per_group = num_heads // num_kv_heads
    q_all, k_all, v_all = x64 @ w_q.double(), x64 @ w_k.double(), x64 @ w_v.double()
    wo = w_o.double()
    y = torch.zeros(B, N, D, dtype=torch.float64)
    for g in range(num_kv_heads):
        kg = k_all[..., g * dh:(g + 1) * dh]
        vg = v_all[..., g * dh:(g + 1) * dh]
        for h in range(g * per_group, (g + 1) * per_group):
            qh = q_all[..., h * dh:(h + 1) * dh]
            s = torch.einsum("bqd,bkd->bqk", qh, kg) / math.sqrt(dh)
            if causal:
                s = s + torch.triu(torch.full((N, N), -math.inf, dtype=torch.float64), 1)
            p = torch.softmax(s, dim=-1)
            y = y + torch.einsum("bqk,bkd->bqd", p, vg) @ wo[h * dh:(h + 1) * dh]
    return y.to(x.dtype)


# ============================================================================ kv_cache_bytes


def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def kv_bytes_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_fp16_hardcoded(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_seq_squared(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * seq_len * batch_size \
        * bytes_per_element


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token_per_seq = math.prod((num_layers, 2, num_kv_heads, head_dim, bytes_per_element))
    return per_token_per_seq * math.prod((seq_len, batch_size))


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return int(total)


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
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        o = (s.softmax(-1) @ v.float()).to(x.dtype)
        outs.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(b, num_kv_heads, 0, d_head)
    v_cache = x.new_zeros(b, num_kv_heads, 0, d_head)
    ys = []
    for t in range(n):
        xt = x[:, t]
        q = (xt @ w_q).view(b, num_heads, 1, d_head)
        k_new = (xt @ w_k).view(b, num_kv_heads, 1, d_head)
        v_new = (xt @ w_v).view(b, num_kv_heads, 1, d_head)
        keys = k_cache.repeat_interleave(n_rep, dim=1)
        vals = v_cache.repeat_interleave(n_rep, dim=1)
        s = q.float() @ keys.float().transpose(-1, -2) / math.sqrt(d_head)
        p = torch.softmax(s, dim=-1)
        ctx = (p @ vals.float()).to(x.dtype)
        ys.append(ctx.reshape(b, d_model) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.stack(ys, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    g = num_heads // num_kv_heads
    cache_k = cache_v = None
    result = []
    for t in range(N):
        tok = x[:, t:t + 1, :]
        q_t = (tok @ w_q).reshape(B, 1, num_heads, hd).permute(0, 2, 1, 3)
        cache_k = (tok @ w_k).reshape(B, 1, num_kv_heads, hd).permute(0, 2, 1, 3)
        cache_v = (tok @ w_v).reshape(B, 1, num_kv_heads, hd).permute(0, 2, 1, 3)
        kk = cache_k.repeat_interleave(g, dim=1).float()
        vv = cache_v.repeat_interleave(g, dim=1).float()
        a = torch.softmax(q_t.float() @ kk.transpose(2, 3) / math.sqrt(hd), dim=-1)
        o = (a @ vv).to(x.dtype).permute(0, 2, 1, 3).reshape(B, 1, D)
        result.append(o @ w_o)
    return torch.cat(result, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    K = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    V = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    out = torch.empty(B, N, D, dtype=x.dtype)
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        K[:, :, t:t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        V[:, :, t:t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        keys = K[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        vals = V[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        s = q.float() @ keys.transpose(-2, -1) / math.sqrt(dh)
        step_mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal mask for this step
        s = s.masked_fill(~step_mask, float("-inf"))
        ctx = torch.softmax(s, dim=-1) @ vals
        out[:, t:t + 1] = ctx.to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o
    return out


def decode_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = (x_t @ w_q).reshape(batch, 1, num_heads, d_head).transpose(1, 2)
        keys.append((x_t @ w_k).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2))
        values.append((x_t @ w_v).reshape(batch, 1, num_kv_heads, d_head).transpose(1, 2))
        k_all = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        v_all = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        scores = q.float() @ k_all.float().transpose(-2, -1) / math.sqrt(d_model)
        ctx = (scores.softmax(dim=-1) @ v_all.float()).to(x.dtype)
        outputs.append(ctx.transpose(1, 2).reshape(batch, 1, d_model) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_concat_batch_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    steps = []
    for t in range(N):
        x_t = x[:, t:t + 1, :]
        q_t = (x_t @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (x_t @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (x_t @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        ks = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        vs = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1).float()
        w = torch.softmax(q_t.float() @ ks.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        steps.append((w @ vs).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=0)


def decode_einsum_group_index(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    group_of = torch.arange(num_heads) // (num_heads // num_kv_heads)
    K = torch.zeros(B, N, num_kv_heads, dh, dtype=torch.float64)
    V = torch.zeros(B, N, num_kv_heads, dh, dtype=torch.float64)
    ys = []
    for t in range(N):
        xt = x[:, t]  # (B, D): the new token only
        q = (xt @ w_q).double().view(B, num_heads, dh)
        K[:, t] = (xt @ w_k).double().view(B, num_kv_heads, dh)
        V[:, t] = (xt @ w_v).double().view(B, num_kv_heads, dh)
        k_seen = K[:, :t + 1].index_select(2, group_of)  # (B, t+1, H, dh)
        v_seen = V[:, :t + 1].index_select(2, group_of)
        s = torch.einsum("bhd,bshd->bhs", q, k_seen) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bhs,bshd->bhd", p, v_seen).reshape(B, D)
        ys.append(ctx.to(x.dtype) @ w_o)
    return torch.stack(ys, dim=1)


def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    dh = d // num_heads
    k_list, v_list, out = [], [], []
    for t in range(n):
        tok = x[:, t:t + 1]
        q = (tok @ w_q).view(b, 1, num_heads, dh).transpose(1, 2).float()
        k_list.append((tok @ w_k).view(b, 1, num_kv_heads, dh).transpose(1, 2).float())
        v_list.append((tok @ w_v).view(b, 1, num_kv_heads, dh).transpose(1, 2).float())
        ks, vs = torch.cat(k_list, dim=2), torch.cat(v_list, dim=2)
        ctx = F.scaled_dot_product_attention(q, ks, vs, enable_gqa=True)  # all past visible
        out.append(ctx.transpose(1, 2).reshape(b, 1, d).to(x.dtype) @ w_o)
    return torch.cat(out, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "x.repeat tiles the groups (0, 1, 2, 0, 1, 2, ...), so head h reads group "
          "h % G instead of h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "repeats_sequence_axis",
          "repeat_interleave runs along dim=2 (the tokens) instead of dim=1 (the K/V heads)",
          repeat_kv_sequence_dim),
    Entry("repeat_kv", "wrong", "n_rep_read_as_num_heads",
          "treats n_rep as the total number of query heads and repeats each group "
          "n_rep // G times instead of n_rep times",
          repeat_kv_n_rep_as_heads),
    Entry("repeat_kv", "wrong", "single_group_not_repeated",
          "returns x unchanged when there is one K/V group (G = 1), as if MQA needed no "
          "copies, so the result has 1 head instead of n_rep",
          repeat_kv_skip_single_group),
    Entry("repeat_kv", "wrong", "last_group_dropped",
          "loops over range(G - 1), so the last K/V group is never copied",
          repeat_kv_group_range_short),
    Entry("repeat_kv", "wrong", "repeat_interleave_without_dim",
          "repeat_interleave without dim flattens the tensor and repeats every element, "
          "returning a 1-D tensor",
          repeat_kv_interleave_no_dim),
    Entry("repeat_kv", "right", "index_select_group_index", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "one_hot_einsum", None, repeat_kv_one_hot_einsum),

    Entry("grouped_query_attention", "wrong", "tiled_kv_heads",
          "repeats the K/V heads with .repeat (tiled), so query head h uses group h % G "
          "instead of h // (num_heads // num_kv_heads)",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "no_group_divisibility_check",
          "no check that num_heads is a multiple of num_kv_heads: 4 heads over 3 K/V heads "
          "fails inside the matmul with a RuntimeError instead of a ValueError naming both",
          gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "scale_by_kv_width",
          "scales the scores by 1/sqrt(w_k.shape[1]) (num_kv_heads * d_head) instead of "
          "1/sqrt(d_head)",
          gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "masked_fill_with_allowed_mask",
          "masked_fill fills where the mask is True, and it is given the allowed (tril) mask, "
          "so the past is blanked and the future kept",
          gqa_masked_fill_allowed),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "reshapes the heads (B, H, N, d_head) straight to (B, N, d_model) without "
          "transposing back, which scrambles tokens and heads before w_o",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "values_from_w_k",
          "the values are projected with w_k (copy-paste) instead of w_v",
          gqa_values_from_w_k),
    Entry("grouped_query_attention", "right", "sdpa_enable_gqa", None, gqa_sdpa_enable_gqa),
    Entry("grouped_query_attention", "right", "per_group_loops_float64", None,
          gqa_per_group_loops_float64),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "forgets the factor 2: counts the key cache but not the value cache",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "gibibytes_float",
          "divides by 2**30 and returns GiB as a float instead of the number of bytes as an "
          "int",
          kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "never multiplies by batch_size, so it gives the cache of one sequence",
          kv_bytes_batch_ignored),
    Entry("kv_cache_bytes", "wrong", "two_bytes_hardcoded",
          "hard-codes 2 bytes per element (fp16) instead of using bytes_per_element",
          kv_bytes_fp16_hardcoded),
    Entry("kv_cache_bytes", "wrong", "numpy_prod_int64",
          "np.prod returns a numpy int64, not the plain Python int the contract asks for",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "seq_len_squared",
          "multiplies by seq_len twice, as if the cache stored the N x N scores rather than "
          "one key and one value vector per token",
          kv_bytes_seq_squared),
    Entry("kv_cache_bytes", "right", "math_prod_per_token", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "layer_loop", None, kv_bytes_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching the keys and values: right numbers, but quadratic projection work",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends_before_appending",
          "attends over the cache before appending the new token's key and value, so a token "
          "never sees itself (the first step has no key at all and gives a zero row)",
          decode_attend_before_append),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key and value to the cache instead of appending them, so each "
          "token attends only to itself",
          decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "top_left_mask_per_step",
          "applies a top-left tril mask of shape (1, t+1) at each step, which lets the new "
          "query see only key 0 instead of all cached keys (the one query sits at the last "
          "position)",
          decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          decode_scale_d_model),
    Entry("decode_with_cache", "wrong", "concat_on_batch_dim",
          "concatenates the per-step outputs along dim 0 (the batch) instead of dim 1 (the "
          "tokens), giving (N*B, 1, d_model)",
          decode_concat_batch_dim),
    Entry("decode_with_cache", "right", "einsum_group_index_float64", None,
          decode_einsum_group_index),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, decode_list_cache_sdpa),
]
