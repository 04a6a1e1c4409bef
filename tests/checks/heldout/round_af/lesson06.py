"""Held-out catalogue, lesson 06 (GQA and the KV cache): repeat_kv, grouped_query_attention,
kv_cache_bytes, decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_token_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_numpy(x, n_rep):
    return np.repeat(x.detach().cpu().numpy(), n_rep, axis=1)


def repeat_kv_div_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_kv_five_dims(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d)


def repeat_kv_expand_directly(x, n_rep):
    B, G, N, D = x.shape
    return x.expand(B, G * n_rep, N, D)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def repeat_kv_stack_flatten(x, n_rep):
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)


# ============================================================================ grouped_query_attention
def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        allowed = torch.ones(N, N, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    w = scores.softmax(dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_tril_diagonal_one(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_kv_heads, d_head).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1)
    out = (p @ v.float()).transpose(1, 2).reshape(b, n, d_model).to(x.dtype)
    return out @ w_o


def gqa_scale_by_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    Q = (x @ w_q).view(B, N, num_heads, hd).transpose(1, 2)
    K = (x @ w_k).view(B, N, num_kv_heads, hd).transpose(1, 2)
    V = (x @ w_v).view(B, N, num_kv_heads, hd).transpose(1, 2)
    g = num_heads // num_kv_heads
    K = torch.repeat_interleave(K, g, dim=1)
    V = torch.repeat_interleave(V, g, dim=1)
    att = (Q.float() @ K.float().transpose(2, 3)) / math.sqrt(w_k.shape[1])
    if causal:
        att = att.masked_fill(torch.ones(N, N).triu(1).bool(), float("-inf"))
    att = att.softmax(-1)
    y = (att @ V.float()).to(x.dtype).transpose(1, 2).reshape(B, N, D)
    return y @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    dh = dm // num_heads
    q = (x @ w_q).reshape(bsz, seq, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).reshape(bsz, seq, num_kv_heads, dh).transpose(1, 2).float()
    v = (x @ w_v).reshape(bsz, seq, num_kv_heads, dh).transpose(1, 2).float()
    reps = num_heads // num_kv_heads
    k = k.repeat_interleave(reps, dim=1)
    v = v.repeat_interleave(reps, dim=1)
    scores = q @ k.transpose(-1, -2) * dh ** -0.5
    if causal is not None:
        future = torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)
        scores = scores.masked_fill(future, -math.inf)
    weights = torch.softmax(scores, -1)
    merged = (weights @ v).transpose(1, 2).reshape(bsz, seq, dm)
    return merged.to(x.dtype) @ w_o


def gqa_view_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).view(B, num_heads, N, dh)
    k = (x @ w_k).view(B, num_kv_heads, N, dh)
    v = (x @ w_v).view(B, num_kv_heads, N, dh)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(dim=-1)
    ctx = (p @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_mask_fill_zero(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
    if causal:
        visible = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~visible, 0.0)
    w = torch.softmax(scores, dim=-1)
    return (w @ v.float()).transpose(1, 2).reshape(B, N, D).to(x.dtype) @ w_o


def gqa_sdpa_enable_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(work)
    q = (xf @ w_q.to(work)).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (xf @ w_k.to(work)).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (xf @ w_v.to(work)).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return (ctx.transpose(1, 2).flatten(2) @ w_o.to(work)).to(x.dtype)


def gqa_grouped_einsum64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    G = num_kv_heads
    R = num_heads // G
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(B, N, G, R, dh)  # head h = g * R + r
    k = (x64 @ w_k.double()).reshape(B, N, G, dh)
    v = (x64 @ w_v.double()).reshape(B, N, G, dh)
    s = torch.einsum("bqgrd,bkgd->bgrqk", q, k) / math.sqrt(dh)
    if causal:
        pos = torch.arange(N)
        s = s.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrqk,bkgd->bqgrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element * 8
    return per_token * seq_len * batch_size


def kv_bytes_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    k_bytes = num_layers * num_kv_heads * seq_len * head_dim * bytes_per_element
    v_bytes = num_layers * num_kv_heads * seq_len * head_dim * bytes_per_element
    return k_bytes + v_bytes


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_newest_not_cached(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                               bytes_per_element=2):
    cached = seq_len - 1
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


def kv_bytes_fixed_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return int(math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                          bytes_per_element)))


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            shape = (batch_size, num_kv_heads, seq_len, head_dim)
            total += math.prod(shape) * bytes_per_element
    return total


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, : t + 1]
        q = (prefix[:, -1:] @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k = (prefix @ w_k).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        v = (prefix @ w_v).reshape(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        s = q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)
        ctx = (s.softmax(-1) @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_append_after_attend(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    outs = []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_new = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_new = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache.repeat_interleave(n_rep, dim=1).float()
        v = v_cache.repeat_interleave(n_rep, dim=1).float()
        w = torch.softmax(q.float() @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (w @ v).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1)


def decode_scale_by_cache_len(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    hd = d // num_heads
    groups = num_heads // num_kv_heads
    keys, values, outputs = [], [], []
    for t in range(n):
        tok = x[:, t : t + 1, :]
        q = (tok @ w_q).view(b, 1, num_heads, hd).transpose(1, 2)
        keys.append((tok @ w_k).view(b, 1, num_kv_heads, hd).transpose(1, 2))
        values.append((tok @ w_v).view(b, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(groups, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(groups, dim=1)
        scores = q.float() @ K.float().transpose(-2, -1) / math.sqrt(K.shape[2])
        attn = scores.softmax(dim=-1)
        y = (attn @ V.float()).to(x.dtype).transpose(1, 2).reshape(b, 1, d)
        outputs.append(y @ w_o)
    return torch.cat(outputs, dim=1)


def decode_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    kc = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    vc = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    result = torch.empty_like(x)
    for t in range(N):
        xt = x[:, t : t + 1]
        qt = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2).float()
        kc[:, :, t] = (xt @ w_k).reshape(B, num_kv_heads, dh)
        vc[:, :, t] = (xt @ w_v).reshape(B, num_kv_heads, dh)
        k = kc[:, :, : t + 1].repeat(1, n_rep, 1, 1).float()
        v = vc[:, :, : t + 1].repeat(1, n_rep, 1, 1).float()
        p = torch.softmax(qt @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        ctx = (p @ v).to(x.dtype).transpose(1, 2).reshape(B, 1, D)
        result[:, t : t + 1] = ctx @ w_o
    return result


def decode_stacked_outputs(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    r = num_heads // num_kv_heads
    k_list, v_list, outs = [], [], []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_list.append((xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        v_list.append((xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        k = torch.cat(k_list, 2).repeat_interleave(r, 1)
        v = torch.cat(v_list, 2).repeat_interleave(r, 1)
        w = (q.float() @ k.float().transpose(-2, -1) / math.sqrt(dh)).softmax(-1)
        o = (w @ v.float()).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o
        outs.append(o)
    return torch.stack(outs, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        ks.append((xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        vs.append((xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        s = q.float() @ k.transpose(-2, -1) / math.sqrt(dh)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_prealloc_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.empty(B, num_kv_heads, N, dh, dtype=work)
    v_cache = torch.empty(B, num_kv_heads, N, dh, dtype=work)
    out = torch.empty(B, N, D, dtype=x.dtype)
    for t in range(N):
        x_t = x[:, t]  # (B, D): one row per sequence
        q_t = (x_t @ w_q).to(work).view(B, num_heads, 1, dh)
        k_cache[:, :, t] = (x_t @ w_k).to(work).view(B, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).to(work).view(B, num_kv_heads, dh)
        ctx = F.scaled_dot_product_attention(q_t, k_cache[:, :, : t + 1],
                                             v_cache[:, :, : t + 1], enable_gqa=True)
        out[:, t] = (ctx.reshape(B, D).to(x.dtype) @ w_o)
    return out


def decode_grouped_einsum64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    G = num_kv_heads
    R = num_heads // G
    dh = D // num_heads
    cache_k = torch.zeros(B, 0, G, dh, dtype=torch.float64)
    cache_v = torch.zeros(B, 0, G, dh, dtype=torch.float64)
    rows = []
    for t in range(N):
        tok = x[:, t, :]
        q = (tok @ w_q).double().reshape(B, G, R, dh)
        cache_k = torch.cat([cache_k, (tok @ w_k).double().reshape(B, 1, G, dh)], dim=1)
        cache_v = torch.cat([cache_v, (tok @ w_v).double().reshape(B, 1, G, dh)], dim=1)
        s = torch.einsum("bgrd,bkgd->bgrk", q, cache_k) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrk,bkgd->bgrd", p, cache_v).reshape(B, D)
        rows.append(ctx.to(x.dtype) @ w_o)
    return torch.stack(rows, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (head h gets group "
          "h % G) instead of interleaving them (h // n_rep)", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_token_axis",
          "repeats along dim=2 (the token axis) instead of dim=1 (the group axis)",
          repeat_kv_token_axis),
    Entry("repeat_kv", "wrong", "returns_numpy",
          "repeats with np.repeat on x.numpy() and returns a numpy array instead of a "
          "torch.Tensor (and fails on bfloat16)", repeat_kv_numpy),
    Entry("repeat_kv", "wrong", "index_by_num_groups",
          "picks group h // G (dividing by the number of groups) instead of h // n_rep, so "
          "heads read the wrong groups or index past the last one", repeat_kv_div_by_groups),
    Entry("repeat_kv", "wrong", "expand_without_reshape",
          "returns the expanded 5-D view (B, G, n_rep, N, d) without flattening the group "
          "and repeat axes into one head axis", repeat_kv_five_dims),
    Entry("repeat_kv", "wrong", "expand_non_singleton",
          "calls x.expand(B, G * n_rep, N, d) directly, but expand can only grow axes of "
          "size 1, so it raises whenever G > 1", repeat_kv_expand_directly),
    Entry("repeat_kv", "right", "index_select", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "stack_flatten", None, repeat_kv_stack_flatten),

    Entry("grouped_query_attention", "wrong", "no_head_count_check",
          "does not check that num_heads is a multiple of num_kv_heads, so 4 heads over 3 "
          "groups fail later with a RuntimeError instead of a ValueError", gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "tril_diagonal_one",
          "builds the causal mask with tril(diagonal=1), which lets each query see one "
          "future key", gqa_tril_diagonal_one),
    Entry("grouped_query_attention", "wrong", "scale_by_kv_width",
          "scales the scores by 1/sqrt(w_k.shape[1]) = 1/sqrt(num_kv_heads * d_head) "
          "instead of 1/sqrt(d_head)", gqa_scale_by_kv_width),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "tests `if causal is not None`, which is true for causal=False too, so the mask "
          "is always applied", gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "view_without_transpose",
          "splits the heads with view(B, H, N, d_head) straight from (B, N, H*d_head), "
          "without the reshape-then-transpose", gqa_view_without_transpose),
    Entry("grouped_query_attention", "wrong", "masked_fill_zero",
          "fills the masked scores with 0 instead of -inf, so future keys still get weight",
          gqa_mask_fill_zero),
    Entry("grouped_query_attention", "right", "sdpa_enable_gqa", None, gqa_sdpa_enable_gqa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None,
          gqa_grouped_einsum64),

    Entry("kv_cache_bytes", "wrong", "no_factor_two",
          "forgets the factor 2: counts only the keys (or only the values), not both",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8, giving bits instead of bytes", kv_bytes_in_bits),
    Entry("kv_cache_bytes", "wrong", "ignores_batch",
          "leaves batch_size out, counting the cache of one sequence only",
          kv_bytes_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "numpy_integer",
          "multiplies with np.prod, returning a numpy integer instead of a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "newest_token_not_cached",
          "counts seq_len - 1 cached tokens, as if the newest token's key and value were not "
          "stored", kv_bytes_newest_not_cached),
    Entry("kv_cache_bytes", "wrong", "fixed_two_bytes",
          "hard-codes 2 bytes per element and ignores the bytes_per_element argument",
          kv_bytes_fixed_fp16),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "loop_over_layers_and_tensors", None, kv_bytes_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of "
          "caching, so the projection work is quadratic in N", decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "appends_after_attending",
          "appends the new key and value to the cache only after attending, so each token "
          "cannot see itself (the first token sees nothing)", decode_append_after_attend),
    Entry("decode_with_cache", "wrong", "scale_by_cache_length",
          "scales the scores by 1/sqrt of the number of cached keys instead of "
          "1/sqrt(d_head)", decode_scale_by_cache_len),
    Entry("decode_with_cache", "wrong", "tiled_kv_repeat",
          "repeats the cached K/V heads with .repeat(1, n_rep, 1, 1), which tiles the groups "
          "instead of giving query head h group h // n_rep", decode_tiled_repeat),
    Entry("decode_with_cache", "wrong", "stack_adds_axis",
          "joins the per-step outputs with torch.stack(dim=1), which adds an axis: "
          "(B, N, 1, d_model) instead of (B, N, d_model)", decode_stacked_outputs),
    Entry("decode_with_cache", "wrong", "top_left_step_mask",
          "applies a top-left tril mask of shape (1, t+1) at each step, which lets the new "
          "query see only the first key instead of all cached keys", decode_top_left_step_mask),
    Entry("decode_with_cache", "right", "preallocated_cache_sdpa", None, decode_prealloc_sdpa),
    Entry("decode_with_cache", "right", "grouped_einsum_float64", None, decode_grouped_einsum64),
]
