"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch):
repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_token_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_no_dim(x, n_rep):
    if n_rep == 1:
        return x
    return torch.repeat_interleave(x, n_rep)


def repeat_kv_view_after_expand(x, n_rep):
    B, G, N, D = x.shape
    return x[:, :, None, :, :].expand(B, G, n_rep, N, D).view(B, G * n_rep, N, D)


def repeat_kv_index_modulo(x, n_rep):
    groups = x.shape[1]
    idx = torch.tensor([h % groups for h in range(groups * n_rep)], dtype=torch.long)
    return x[:, idx]


def repeat_kv_n_rep_as_heads(x, n_rep):
    groups = x.shape[1]
    per_group = n_rep // groups  # query heads per K/V group
    return x.repeat_interleave(per_group, dim=1)


def repeat_kv_right_stack(x, n_rep):
    b, g, n, d = x.shape
    return torch.stack([x] * n_rep, dim=2).reshape(b, g * n_rep, n, d)


def repeat_kv_right_gather(x, n_rep):
    heads = x.shape[1] * n_rep
    index = torch.arange(heads, device=x.device) // n_rep
    return torch.index_select(x, 1, index)


# ============================================================================ grouped_query_attention
def gqa_masked_fill_keeps_future(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
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
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(dh)
    if causal:
        allowed = torch.tril(torch.ones(N, N, dtype=torch.bool))
        s = s.masked_fill(allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).to(x.dtype)
    return (p @ v).transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_diagonal_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(batch, n, num_kv_heads, d_head).transpose(1, 2)
    group = num_heads // num_kv_heads
    k = k[:, :, None].expand(-1, -1, group, -1, -1).reshape(batch, num_heads, n, d_head)
    v = v[:, :, None].expand(-1, -1, group, -1, -1).reshape(batch, num_heads, n, d_head)
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(weights, v.float()).to(x.dtype)
    return ctx.transpose(1, 2).reshape(batch, n, d_model) @ w_o


def gqa_kv_split_into_query_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                  causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, _ = x.shape

    def heads(t, h):
        return t.reshape(B, N, h, -1).transpose(1, 2)

    q = heads(x @ w_q, num_heads)
    k = heads(x @ w_k, num_heads)
    v = heads(x @ w_v, num_heads)
    dh = q.shape[-1]
    s = torch.einsum("bhid,bhjd->bhij", q.float(), k.float()) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(~torch.ones(N, N, dtype=torch.bool).tril(), float("-inf"))
    a = s.softmax(dim=-1)
    o = torch.einsum("bhij,bhjd->bhid", a, v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(B, N, -1) @ w_o


def gqa_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    hd = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, hd).transpose(1, 2)
    n_rep = num_heads // num_kv_heads
    k = torch.repeat_interleave(k, n_rep, dim=1)
    v = torch.repeat_interleave(v, n_rep, dim=1)
    scores = (q.float() @ k.float().transpose(-2, -1)) / hd ** 0.5
    if causal:
        mask = torch.ones(N, N, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, -math.inf)
    out = (scores.softmax(-1) @ v.float()).to(x.dtype)
    return out.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(B, N, num_kv_heads, d_head).transpose(1, 2)
    r = num_heads // num_kv_heads
    k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
    att = (q.float() @ k.float().transpose(2, 3)) * (1.0 / math.sqrt(d_head))
    if causal:
        att = att.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v.float()).to(x.dtype)  # (B, H, N, d_head)
    return y.reshape(B, N, D) @ w_o


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    bsz, seq, dm = x.shape
    hd = dm // num_heads
    q = (x @ w_q).reshape(bsz, seq, num_heads, hd).transpose(1, 2)
    k = (x @ w_k).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    v = (x @ w_v).reshape(bsz, seq, num_kv_heads, hd).transpose(1, 2)
    times = num_heads // num_kv_heads
    k = k.repeat(1, times, 1, 1)
    v = v.repeat(1, times, 1, 1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(~torch.tril(torch.ones(seq, seq, dtype=torch.bool)), float("-inf"))
    o = (torch.softmax(s, -1) @ v.float()).to(x.dtype)
    return o.transpose(1, 2).reshape(bsz, seq, dm) @ w_o


def gqa_right_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xw = x.to(work)
    q = (xw @ w_q.to(work)).view(B, N, num_heads, dh).transpose(1, 2)
    k = (xw @ w_k.to(work)).view(B, N, num_kv_heads, dh).transpose(1, 2)
    v = (xw @ w_v.to(work)).view(B, N, num_kv_heads, dh).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    merged = ctx.transpose(1, 2).reshape(B, N, D)
    return (merged @ w_o.to(work)).to(x.dtype)


def gqa_right_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    hd = d // num_heads
    r = num_heads // num_kv_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(b, n, num_kv_heads, r, hd)  # head g*r + j
    k = (x64 @ w_k.double()).reshape(b, n, num_kv_heads, hd)
    v = (x64 @ w_v.double()).reshape(b, n, num_kv_heads, hd)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(hd)
    if causal:
        pos = torch.arange(n)
        s = torch.where(pos[None, :] <= pos[:, None], s, torch.tensor(-math.inf,
                                                                      dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(b, n, d)
    return (o @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_caches_queries_too(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    tensors = 3  # q, k and v per token
    per_token = tensors * num_kv_heads * head_dim * bytes_per_element
    return num_layers * per_token * seq_len * batch_size


def kv_bytes_in_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8


def kv_bytes_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_layer = 2 * num_kv_heads * head_dim * seq_len
    return per_layer * num_layers * bytes_per_element


def kv_bytes_seq_minus_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    cached = seq_len - 1  # the token being generated is not in the cache yet
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


def kv_bytes_true_division(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    bits = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * (8 * bytes_per_element)
    return bits / 8


def kv_bytes_right_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                             bytes_per_element=2):
    one_token = {"k": num_kv_heads * head_dim, "v": num_kv_heads * head_dim}
    per_token_bytes = sum(one_token.values()) * bytes_per_element * num_layers
    return per_token_bytes * seq_len * batch_size


def kv_bytes_right_shapes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    cache_shape = (num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim)
    return math.prod(cache_shape) * bytes_per_element


# ============================================================================ decode_with_cache
def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
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
        a = torch.softmax((q.float() @ k.float().transpose(-1, -2)) / math.sqrt(dh), dim=-1)
        ctx = (a @ v.float()).to(x.dtype)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    g = num_kv_heads
    rep = num_heads // g
    k_cache = torch.zeros(batch, g, n, d_head, dtype=x.dtype)
    v_cache = torch.zeros(batch, g, n, d_head, dtype=x.dtype)
    out = torch.zeros_like(x)
    for t in range(n):
        xt = x[:, t]  # (B, d_model)
        q = (xt @ w_q).view(batch, num_heads, 1, d_head)
        k_cache[:, :, t] = (xt @ w_k).view(batch, g, d_head)
        v_cache[:, :, t] = (xt @ w_v).view(batch, g, d_head)
        keys = k_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        vals = v_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        s = q.float() @ keys.transpose(-1, -2) / math.sqrt(d_head)
        w = torch.softmax(s, dim=-1)
        ctx = (w @ vals).to(x.dtype).reshape(batch, d_model)
        out[:, t] = ctx @ w_o
    return out


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    hd = D // num_heads
    r = num_heads // num_kv_heads
    k_cache = v_cache = None
    steps = []
    for t in range(N):
        tok = x[:, t : t + 1, :]
        q = (tok @ w_q).reshape(B, 1, num_heads, hd).transpose(1, 2)
        k_new = (tok @ w_k).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        v_new = (tok @ w_v).reshape(B, 1, num_kv_heads, hd).transpose(1, 2)
        k_cache, v_cache = k_new, v_new  # update the cache
        k = k_cache.repeat_interleave(r, dim=1)
        v = v_cache.repeat_interleave(r, dim=1)
        sc = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(hd)
        o = (torch.softmax(sc, dim=-1) @ v.float()).to(x.dtype)
        steps.append(o.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(steps, dim=1)


def decode_cat_feature_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    ks, vs = None, None
    outputs = []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        ks = k if ks is None else torch.cat([ks, k], dim=-1)
        vs = v if vs is None else torch.cat([vs, v], dim=-1)
        kk = ks.repeat_interleave(n_rep, dim=1).float()
        vv = vs.repeat_interleave(n_rep, dim=1).float()
        p = torch.softmax(q.float() @ kk.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        outputs.append((p @ vv).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_returns_last_step(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    K = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    V = torch.empty(B, num_kv_heads, N, dh, dtype=x.dtype)
    y = None
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        K[:, :, t : t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        V[:, :, t : t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        kk = K[:, :, : t + 1].repeat_interleave(rep, 1).float()
        vv = V[:, :, : t + 1].repeat_interleave(rep, 1).float()
        w = torch.softmax(q.float() @ kk.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        y = (w @ vv).to(x.dtype).transpose(1, 2).reshape(B, 1, D) @ w_o
    return y  # the newest token's output


def decode_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh)
    v_cache = torch.zeros(B, num_kv_heads, N, dh)
    res = []
    for t in range(N):
        xt = x[:, t : t + 1]
        q = (xt @ w_q).view(B, 1, num_heads, dh).transpose(1, 2)
        k_cache[:, :, t : t + 1] = (xt @ w_k).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        v_cache[:, :, t : t + 1] = (xt @ w_v).view(B, 1, num_kv_heads, dh).transpose(1, 2)
        kk = k_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        vv = v_cache[:, :, : t + 1].repeat_interleave(rep, dim=1)
        scores = q @ kk.transpose(-1, -2) / math.sqrt(dh)
        a = torch.softmax(scores, dim=-1)
        res.append((a @ vv).transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(res, dim=1)


def decode_right_lists(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(N):
        xt = x[:, t, :]  # (B, D): the new token only
        q = (xt @ w_q).float().view(B, num_heads, 1, dh)
        keys.append((xt @ w_k).float().view(B, num_kv_heads, 1, dh))
        values.append((xt @ w_v).float().view(B, num_kv_heads, 1, dh))
        K = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        V = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q, K, V)  # every cached key is in the past
        outs.append(ctx.reshape(B, D).to(x.dtype) @ w_o)
    return torch.stack(outs, dim=1)


def decode_right_grouped_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d = x.shape
    hd = d // num_heads
    r = num_heads // num_kv_heads
    cache_k = torch.zeros(b, n, num_kv_heads, hd, dtype=torch.float64)
    cache_v = torch.zeros(b, n, num_kv_heads, hd, dtype=torch.float64)
    result = torch.empty(b, n, d, dtype=x.dtype)
    for pos in range(n):
        tok = x[:, pos]
        q = (tok @ w_q).double().reshape(b, num_kv_heads, r, hd)
        cache_k[:, pos] = (tok @ w_k).double().reshape(b, num_kv_heads, hd)
        cache_v[:, pos] = (tok @ w_v).double().reshape(b, num_kv_heads, hd)
        seen_k, seen_v = cache_k[:, : pos + 1], cache_v[:, : pos + 1]
        s = torch.einsum("bgrd,btgd->bgrt", q, seen_k) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,btgd->bgrd", p, seen_v).reshape(b, d)
        result[:, pos] = (ctx @ w_o.double()).to(x.dtype)
    return result


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor-repeat-tiles",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 0, 1, ...) instead of repeating "
          "each group in place (0, 0, 1, 1, ...), so head h reads group h % G, not h // n_rep",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave-token-dim",
          "repeat_interleave runs along dim=2 (the tokens) instead of dim=1 (the K/V heads), "
          "so each token is duplicated and the head count is unchanged", repeat_kv_token_dim),
    Entry("repeat_kv", "wrong", "repeat-interleave-no-dim",
          "torch.repeat_interleave without dim= flattens the tensor first, so the result is a "
          "1-D tensor instead of (B, G*n_rep, N, d)", repeat_kv_no_dim),
    Entry("repeat_kv", "wrong", "view-after-expand",
          "after expand the copies share memory (stride 0), and .view cannot merge those axes: "
          "it raises a RuntimeError where .reshape would copy", repeat_kv_view_after_expand),
    Entry("repeat_kv", "wrong", "head-index-modulo",
          "the index of the group each head reads is h % G instead of h // n_rep, which gives "
          "the tiled order, not the grouped one", repeat_kv_index_modulo),
    Entry("repeat_kv", "wrong", "n_rep-read-as-total-heads",
          "n_rep is read as the total number of query heads and divided by G, so each group is "
          "copied n_rep // G times instead of n_rep times", repeat_kv_n_rep_as_heads),
    Entry("repeat_kv", "right", "stack-dim2-reshape", None, repeat_kv_right_stack),
    Entry("repeat_kv", "right", "index-select", None, repeat_kv_right_gather),

    Entry("grouped_query_attention", "wrong", "masked-fill-with-allowed-mask",
          "masked_fill fills where its mask is True, but it is given the tril mask of allowed "
          "keys (True = may attend), so it hides the past and keeps the future (the last query "
          "sees nothing and gives NaN)",
          gqa_masked_fill_keeps_future),
    Entry("grouped_query_attention", "wrong", "diagonal-masked",
          "the future mask is torch.triu(..., diagonal=0), which also hides the diagonal, so "
          "no query can attend to itself and the first query, left with no key, gives NaN "
          "(diagonal=1 belongs)", gqa_diagonal_masked),
    Entry("grouped_query_attention", "wrong", "kv-split-into-num_heads",
          "keys and values are split into num_heads heads (reshape with -1) instead of "
          "num_kv_heads, so their head size is wrong whenever num_kv_heads < num_heads and the "
          "score product fails",
          gqa_kv_split_into_query_heads),
    Entry("grouped_query_attention", "wrong", "no-divisibility-check",
          "there is no check that num_heads is a multiple of num_kv_heads, so a bad pair fails "
          "later with a RuntimeError (or silently) instead of the ValueError the contract "
          "requires", gqa_no_divisibility_check),
    Entry("grouped_query_attention", "wrong", "merge-without-transpose",
          "the heads' output (B, H, N, d_head) is reshaped straight to (B, N, d_model) without "
          "transpose(1, 2), which mixes tokens and heads before w_o",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "tiled-kv-heads",
          "the K/V heads are expanded with .repeat (tiled), so query head h reads group h % G "
          "instead of h // (num_heads // num_kv_heads)", gqa_tiled_groups),
    Entry("grouped_query_attention", "right", "sdpa-float32", None, gqa_right_sdpa),
    Entry("grouped_query_attention", "right", "grouped-einsum-float64", None,
          gqa_right_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no-factor-two",
          "it counts only one cache tensor; keys and values are two, so the factor 2 is missing",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "caches-queries-too",
          "it counts three tensors per token (Q, K and V), but queries are never cached: only "
          "K and V", kv_bytes_caches_queries_too),
    Entry("kv_cache_bytes", "wrong", "bits-not-bytes",
          "it multiplies by 8, returning the size in bits instead of bytes", kv_bytes_in_bits),
    Entry("kv_cache_bytes", "wrong", "batch-size-ignored",
          "batch_size is never multiplied in, so the size is that of one sequence",
          kv_bytes_batch_ignored),
    Entry("kv_cache_bytes", "wrong", "seq-len-minus-one",
          "it counts seq_len - 1 cached tokens instead of seq_len", kv_bytes_seq_minus_one),
    Entry("kv_cache_bytes", "wrong", "true-division-float",
          "it converts bits to bytes with /, so it returns a float instead of a plain int",
          kv_bytes_true_division),
    Entry("kv_cache_bytes", "right", "per-token-dict", None, kv_bytes_right_per_token),
    Entry("kv_cache_bytes", "right", "prod-of-cache-shape", None, kv_bytes_right_shapes),

    Entry("decode_with_cache", "wrong", "reprojects-prefix",
          "at every step it projects the whole prefix x[:, :t+1] with w_k and w_v instead of "
          "only the new token, so the projection work grows quadratically (no real cache)",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "attends-cache-before-current",
          "the step attends to cache[:t], the earlier tokens only, so a token never sees its own "
          "key (the first step has no key at all and outputs zeros)",
          decode_cache_excludes_current),
    Entry("decode_with_cache", "wrong", "cache-overwritten",
          "the cache is replaced by the new token's key and value instead of appended to, so "
          "every step attends only to itself", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "cat-on-feature-dim",
          "the new key and value are concatenated on dim=-1 (features) instead of dim=2 "
          "(tokens), so the cache's shape is wrong and the second step fails",
          decode_cat_feature_dim),
    Entry("decode_with_cache", "wrong", "returns-last-step-only",
          "it returns only the last token's output (B, 1, d_model) instead of every step's "
          "output stacked to (B, N, d_model)", decode_returns_last_step),
    Entry("decode_with_cache", "wrong", "cache-default-float32",
          "the cache is allocated with torch.zeros' default dtype float32 instead of x's "
          "dtype, so products of the float32 cache with float64/float16 queries fail",
          decode_cache_default_dtype),
    Entry("decode_with_cache", "right", "list-cache-sdpa", None, decode_right_lists),
    Entry("decode_with_cache", "right", "grouped-einsum-float64", None,
          decode_right_grouped_float64),
]
