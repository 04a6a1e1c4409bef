"""Held-out catalogue, lesson 06 (GQA and KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache.
Each function is one learner's answer; wrong ones carry one slip."""

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


def repeat_kv_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_kv_modulo(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h % groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def repeat_kv_minus_one(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, -1, n, d)


def repeat_kv_expand_only(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_builtin(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def repeat_kv_gather_index(x, n_rep):
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


# ============================================================================ grouped_query_attention
def gqa_diagonal_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    ctx = (w @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_keys_split_by_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    d_head = d_model // num_heads

    def split(t, heads):
        return t.reshape(b, n, heads, -1).transpose(1, 2)

    q = split(x @ w_q, num_heads)
    k = split(x @ w_k, num_heads)
    v = split(x @ w_v, num_kv_heads)
    groups = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, groups, dim=1)
    v = torch.repeat_interleave(v, groups, dim=1)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(d_head)
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(dim=-1)
    out = torch.matmul(p, v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(b, n, d_model) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).view(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).view(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).view(B, N, num_kv_heads, hd).transpose(1, 2)
    k = k.repeat(1, num_heads // num_kv_heads, 1, 1)
    v = v.repeat(1, num_heads // num_kv_heads, 1, 1)
    att = q.float() @ k.float().transpose(-2, -1) * (hd ** -0.5)
    if causal:
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool))
        att = att.masked_fill(~keep, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v.float()).to(x.dtype)
    return y.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        mask = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    ctx = (weights @ v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_scores_times_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2).float()
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2).float()
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if causal:
        scores = scores * torch.tril(torch.ones(N, N))
    probs = torch.softmax(scores, dim=-1)
    return (probs @ v).to(x.dtype).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, dh).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    scores = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / math.sqrt(dh)
    if causal is not None:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = torch.einsum("bhqk,bhkd->bhqd", weights, v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_kv_heads <= 0 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, width = x.shape
    head = width // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    xx = x.to(work)
    q = (xx @ w_q.to(work)).unflatten(-1, (num_heads, head)).transpose(1, 2)
    k = (xx @ w_k.to(work)).unflatten(-1, (num_kv_heads, head)).transpose(1, 2)
    v = (xx @ w_v.to(work)).unflatten(-1, (num_kv_heads, head)).transpose(1, 2)
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = ctx.transpose(1, 2).flatten(2) @ w_o.to(work)
    return out.to(x.dtype)


def gqa_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    x64 = x.double()
    wq, wk, wv, wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    n = x.shape[1]
    dh = x.shape[-1] // num_heads
    per_group = num_heads // num_kv_heads
    future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
    result = torch.zeros_like(x64)
    for h in range(num_heads):
        g = h // per_group
        qh = x64 @ wq[:, h * dh:(h + 1) * dh]
        kh = x64 @ wk[:, g * dh:(g + 1) * dh]
        vh = x64 @ wv[:, g * dh:(g + 1) * dh]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(future, -math.inf)
        p = torch.softmax(s, dim=-1)
        result += (p @ vh) @ wo[h * dh:(h + 1) * dh, :]
    return result.to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_power_typo(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size ** bytes_per_element


def kv_bytes_two_bytes_twice(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    k_and_v = 2
    fp16 = 2  # bytes
    return (k_and_v * fp16 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
            * bytes_per_element)


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        k_bytes = batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
        v_bytes = k_bytes
        total += k_bytes + v_bytes
    return total


# ============================================================================ decode_with_cache
def decode_v_reprojected(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = []
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache.append((xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2))
        keys = torch.cat(k_cache, dim=2)
        values = (x[:, :t + 1] @ w_v).view(B, t + 1, num_kv_heads, dh).transpose(1, 2)
        keys = keys.repeat_interleave(rep, dim=1).float()
        values = values.repeat_interleave(rep, dim=1).float()
        s = q.float() @ keys.transpose(-2, -1) / math.sqrt(dh)
        ctx = (torch.softmax(s, dim=-1) @ values).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    v_cache = x.new_zeros(B, num_kv_heads, 0, dh)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_new = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_new = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        keys = k_cache.repeat_interleave(rep, dim=1).float()
        vals = v_cache.repeat_interleave(rep, dim=1).float()
        s = q.float() @ keys.transpose(-2, -1) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = (p @ vals).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
        k_cache = torch.cat([k_cache, k_new], dim=2)
        v_cache = torch.cat([v_cache, v_new], dim=2)
    return torch.cat(outs, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    hd = d // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, ys = [], [], []
    for t in range(n):
        tok = x[:, t:t + 1, :]
        q = (tok @ w_q).reshape(b, 1, num_heads, hd).transpose(1, 2)
        ks.append((tok @ w_k).reshape(b, 1, num_kv_heads, hd).transpose(1, 2))
        vs.append((tok @ w_v).reshape(b, 1, num_kv_heads, hd).transpose(1, 2))
        K = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1).float()
        s = q.float() @ K.transpose(-2, -1) / math.sqrt(hd)
        mask = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))  # causal over the cache
        s = s.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(s, dim=-1) @ V).to(x.dtype)
        ys.append(y.transpose(1, 2).reshape(b, 1, d) @ w_o)
    return torch.cat(ys, dim=1)


def decode_cat_feature_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    steps = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        k_cache = k if k_cache is None else torch.cat([k_cache, k], dim=-1)
        v_cache = v if v_cache is None else torch.cat([v_cache, v], dim=-1)
        kk = k_cache.repeat_interleave(rep, dim=1).float()
        vv = v_cache.repeat_interleave(rep, dim=1).float()
        att = torch.softmax(q.float() @ kk.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        steps.append((att @ vv).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def decode_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    out = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q = (xt @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t:t + 1] = (xt @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t:t + 1] = (xt @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        out.append((w @ v).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(out, dim=1)


def decode_query_last_token(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(N):
        x_new = x[:, t:t + 1]
        q = (x[:, -1:] @ w_q).reshape(B, 1, num_heads, dh).transpose(1, 2)
        keys.append((x_new @ w_k).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        values.append((x_new @ w_v).reshape(B, 1, num_kv_heads, dh).transpose(1, 2))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1).float()
        V = torch.cat(values, dim=2).repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ K.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append((p @ V).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_prealloc_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    bsz, n, width = x.shape
    head = width // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_empty(bsz, num_kv_heads, n, head)
    v_cache = x.new_empty(bsz, num_kv_heads, n, head)
    pieces = []
    for pos in range(n):
        tok = x[:, pos, :]  # (B, d_model)
        q = (tok @ w_q).view(bsz, num_heads, 1, head)
        k_cache[:, :, pos] = (tok @ w_k).view(bsz, num_kv_heads, head)
        v_cache[:, :, pos] = (tok @ w_v).view(bsz, num_kv_heads, head)
        k = k_cache[:, :, :pos + 1].repeat_interleave(rep, dim=1).float()
        v = v_cache[:, :, :pos + 1].repeat_interleave(rep, dim=1).float()
        ctx = F.scaled_dot_product_attention(q.float(), k, v).to(x.dtype)  # (B, H, 1, head)
        pieces.append(ctx.reshape(bsz, width) @ w_o)
    return torch.stack(pieces, dim=1)


def decode_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    per_group = num_heads // num_kv_heads
    keys, vals, outs = [], [], []
    for t in range(n):
        row = x[:, t]  # only the new token: (B, d_model)
        q = (row @ w_q).double().reshape(batch, num_kv_heads, per_group, d_head)
        keys.append((row @ w_k).double().reshape(batch, num_kv_heads, d_head))
        vals.append((row @ w_v).double().reshape(batch, num_kv_heads, d_head))
        K = torch.stack(keys, dim=2)  # (B, G, t+1, d_head)
        V = torch.stack(vals, dim=2)
        s = torch.einsum("bgrd,bgtd->bgrt", q, K) / math.sqrt(d_head)
        s = s - s.amax(dim=-1, keepdim=True)
        p = s.exp()
        p = p / p.sum(dim=-1, keepdim=True)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, V).reshape(batch, d_model)
        outs.append(ctx.to(x.dtype) @ w_o)
    return torch.stack(outs, dim=1)


ENTRIES = [
    Entry(exercise="repeat_kv", kind="wrong", label="tensor_repeat_tiles",
          mistake="`x.repeat(1, n_rep, 1, 1)` tiles the groups (0, 1, ..., 0, 1, ...), so head h reads "
          "group h % G instead of h // n_rep", func=repeat_kv_tiled),
    Entry(exercise="repeat_kv", kind="wrong", label="interleave_token_dim",
          mistake="`repeat_interleave(..., dim=2)` repeats the tokens instead of the groups (dim=1), "
          "giving (B, G, N*n_rep, d)", func=repeat_kv_token_dim),
    Entry(exercise="repeat_kv", kind="wrong", label="interleave_without_dim",
          mistake="`repeat_interleave(n_rep)` without `dim` flattens the tensor first and returns a 1-D "
          "tensor", func=repeat_kv_no_dim),
    Entry(exercise="repeat_kv", kind="wrong", label="head_index_modulo",
          mistake="picks the group of head h as `h % G` where `h // n_rep` belongs (the tiled order)",
          func=repeat_kv_modulo),
    Entry(exercise="repeat_kv", kind="wrong", label="reshape_minus_one_empty",
          mistake="`reshape(b, -1, n, d)` cannot infer -1 when the sequence is empty (N=0), so it raises "
          "on a valid empty input instead of giving (B, G*n_rep, 0, d)", func=repeat_kv_minus_one),
    Entry(exercise="repeat_kv", kind="wrong", label="expand_without_new_axis",
          mistake="`expand` can only broadcast size-1 axes, so expanding the group axis G to G*n_rep "
          "without inserting a new axis raises unless G == 1", func=repeat_kv_expand_only),
    Entry(exercise="repeat_kv", kind="right", label="repeat_interleave_dim1", mistake=None, func=repeat_kv_builtin),
    Entry(exercise="repeat_kv", kind="right", label="index_select_floor_div", mistake=None, func=repeat_kv_gather_index),

    Entry(exercise="grouped_query_attention", kind="wrong", label="causal_mask_hides_diagonal",
          mistake="the causal mask is `triu(..., diagonal=0)`, which also masks the diagonal: each query "
          "loses its own key and the first row has no key at all (NaN)", func=gqa_diagonal_masked),
    Entry(exercise="grouped_query_attention", kind="wrong", label="keys_split_into_num_heads",
          mistake="splits the keys into `num_heads` heads instead of `num_kv_heads` (copy of the query "
          "line), so with fewer K/V heads the key width no longer matches and the product "
          "fails", func=gqa_keys_split_by_num_heads),
    Entry(exercise="grouped_query_attention", kind="wrong", label="tiled_kv_repeat",
          mistake="repeats the K/V heads with `.repeat` (tiled order), so query head h reads group "
          "h % G instead of h // n_rep", func=gqa_tiled_repeat),
    Entry(exercise="grouped_query_attention", kind="wrong", label="no_divisibility_check",
          mistake="never checks that num_kv_heads divides num_heads, so num_heads=4, num_kv_heads=3 "
          "fails later with a RuntimeError from the product instead of the ValueError naming "
          "both numbers", func=gqa_no_group_check),
    Entry(exercise="grouped_query_attention", kind="wrong", label="scores_multiplied_by_mask",
          mistake="applies the causal mask by multiplying the scores by a 0/1 matrix: a future key gets "
          "score 0 and still weight exp(0), instead of -inf", func=gqa_scores_times_mask),
    Entry(exercise="grouped_query_attention", kind="wrong", label="causal_flag_is_not_none",
          mistake="tests `if causal is not None`, which is true for `causal=False` too, so the mask is "
          "always applied", func=gqa_causal_is_not_none),
    Entry(exercise="grouped_query_attention", kind="right", label="sdpa_float32", mistake=None, func=gqa_sdpa),
    Entry(exercise="grouped_query_attention", kind="right", label="head_loop_weight_slices_float64", mistake=None,
          func=gqa_head_loop_float64),

    Entry(exercise="kv_cache_bytes", kind="wrong", label="no_factor_two",
          mistake="counts only one cache: the factor 2 for keys AND values is missing",
          func=kv_bytes_no_factor_two),
    Entry(exercise="kv_cache_bytes", kind="wrong", label="bits_not_bytes",
          mistake="multiplies by 8, returning bits instead of bytes", func=kv_bytes_bits),
    Entry(exercise="kv_cache_bytes", kind="wrong", label="batch_size_ignored",
          mistake="leaves `batch_size` out of the product, so the cache of one sequence is returned "
          "whatever the batch", func=kv_bytes_no_batch),
    Entry(exercise="kv_cache_bytes", kind="wrong", label="numpy_int64",
          mistake="`np.prod` returns a numpy int64, not the plain Python int the contract fixes",
          func=kv_bytes_np_prod),
    Entry(exercise="kv_cache_bytes", kind="wrong", label="power_instead_of_product",
          mistake="typo `batch_size ** bytes_per_element`: a power where a product belongs",
          func=kv_bytes_power_typo),
    Entry(exercise="kv_cache_bytes", kind="wrong", label="element_size_counted_twice",
          mistake="multiplies by a hard-coded 2 bytes (fp16) on top of `bytes_per_element`, counting "
          "the element size twice", func=kv_bytes_two_bytes_twice),
    Entry(exercise="kv_cache_bytes", kind="right", label="math_prod", mistake=None, func=kv_bytes_math_prod),
    Entry(exercise="kv_cache_bytes", kind="right", label="per_layer_k_plus_v_loop", mistake=None, func=kv_bytes_layer_loop),

    Entry(exercise="decode_with_cache", kind="wrong", label="values_reprojected_each_step",
          mistake="caches the keys but recomputes the values as `x[:, :t+1] @ w_v` at every step, "
          "projecting the whole prefix again (quadratic projection work); the numbers are "
          "right", func=decode_v_reprojected),
    Entry(exercise="decode_with_cache", kind="wrong", label="attends_before_appending",
          mistake="attends over the cache before appending the new token's key and value, so token t "
          "cannot see itself and the first token sees no key at all", func=decode_attend_before_append),
    Entry(exercise="decode_with_cache", kind="wrong", label="top_left_mask_in_step",
          mistake="masks each step with a top-left `tril(ones(1, t+1))`, which lets the single new query "
          "see only key 0; one new query may see the whole cache (bottom-right alignment)",
          func=decode_top_left_mask),
    Entry(exercise="decode_with_cache", kind="wrong", label="cache_cat_feature_dim",
          mistake="appends to the cache with `torch.cat(..., dim=-1)`, along the features instead of "
          "the tokens (dim=2), so from the second step the key width no longer matches and the "
          "product fails", func=decode_cat_feature_dim),
    Entry(exercise="decode_with_cache", kind="wrong", label="cache_default_float32",
          mistake="allocates the cache with `torch.zeros(...)` without `dtype=x.dtype`, so it is "
          "float32 and the product with float64 (or half) queries raises a dtype mismatch",
          func=decode_float32_cache),
    Entry(exercise="decode_with_cache", kind="wrong", label="query_from_last_token",
          mistake="projects the query from `x[:, -1:]` (the last token of the sequence) instead of the "
          "current token `x[:, t:t+1]`", func=decode_query_last_token),
    Entry(exercise="decode_with_cache", kind="right", label="preallocated_cache_sdpa", mistake=None, func=decode_prealloc_sdpa),
    Entry(exercise="decode_with_cache", kind="right", label="grouped_queries_einsum_float64", mistake=None,
          func=decode_grouped_einsum),
]
