"""Lesson 06 (GQA and KV cache, torch)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- repeat_kv
def rkv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_seq_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_unsqueeze_wrong_place(x, n_rep):
    B, G, N, d = x.shape
    return x.unsqueeze(3).expand(B, G, N, n_rep, d).reshape(B, G * n_rep, N, d)


def rkv_loop_off_by_one(x, n_rep):
    if n_rep == 1:
        return x
    parts = []
    for g in range(x.shape[1]):
        copies = [x[:, g:g + 1] for _ in range(1, n_rep)]
        parts.extend(copies)
    return torch.cat(parts, dim=1)


def rkv_batch_axis(x, n_rep):
    return x.repeat_interleave(n_rep, dim=0)


def rkv_cat_copies(x, n_rep):
    return torch.cat([x] * n_rep, dim=1)


def rkv_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def rkv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


# ----------------------------------------------------------------------------- grouped_query_attention
def _check(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def _heads(t, h):
    B, N, W = t.shape
    return t.view(B, N, h, W // h).transpose(1, 2)


def _attend(q, k, v, mask, scale):
    s = (q.float() if q.dtype in (torch.float16, torch.bfloat16) else q) @ (
        k.float() if k.dtype in (torch.float16, torch.bfloat16) else k).transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    w = torch.nan_to_num(w, nan=0.0)
    return (w @ v.to(w.dtype)).to(q.dtype)


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    _check(D, num_heads, num_kv_heads)
    dh = D // num_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, num_heads // num_kv_heads, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, num_heads // num_kv_heads, 1, 1)
    mask = torch.ones(N, N, dtype=torch.bool).tril() if causal else None
    ctx = _attend(q, k, v, mask, 1 / math.sqrt(dh))
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    _check(D, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = torch.tril(torch.ones(N, N, dtype=torch.bool)) if causal else None
    scale = 1.0 / math.sqrt(D // num_kv_heads)
    ctx = _attend(q, k, v, mask, scale)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_strict_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    _check(D, num_heads, num_kv_heads)
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1)
    mask = torch.tril(torch.ones(N, N, dtype=torch.bool), diagonal=-1) if causal else None
    ctx = _attend(q, k, v, mask, dh ** -0.5)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_ignores_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    _check(D, num_heads, num_kv_heads)
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    ctx = _attend(q, k, v, None, 1 / math.sqrt(dh))
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    mask = torch.ones(N, N, dtype=torch.bool).tril() if causal else None
    ctx = _attend(q, k, v, mask, 1 / math.sqrt(dh))
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    _check(D, num_heads, num_kv_heads)
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    mask = torch.ones(N, N, dtype=torch.bool).tril() if causal else None
    ctx = _attend(q, k, v, mask, 1 / math.sqrt(dh))  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} must be a multiple of num_kv_heads={num_kv_heads}")
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_head_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    x64 = x.double()
    out = torch.zeros(B, N, D, dtype=torch.float64)
    allowed = torch.ones(N, N, dtype=torch.bool).tril() if causal else torch.ones(N, N, dtype=torch.bool)
    for h in range(num_heads):
        g = h // rep
        q = x64 @ w_q.double()[:, h * dh:(h + 1) * dh]
        k = x64 @ w_k.double()[:, g * dh:(g + 1) * dh]
        v = x64 @ w_v.double()[:, g * dh:(g + 1) * dh]
        s = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(dh)
        s = s.masked_fill(~allowed, -math.inf)
        out += (torch.softmax(s, -1) @ v) @ w_o.double()[h * dh:(h + 1) * dh]
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- kv_cache_bytes
def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kvb_numpy_int(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element])


def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kvb_fixed_two_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16


def kvb_one_layer(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    k = num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    v = num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return k + v


def kvb_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kvb_tensor_nbytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_elem = bytes_per_element
    shape = (num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim)
    return int(math.prod(shape)) * per_elem


# ----------------------------------------------------------------------------- decode_with_cache
def _split_tok(t, h):
    B, W = t.shape[0], t.shape[-1]
    return t.reshape(B, 1, h, W // h).transpose(1, 2)  # (B, h, 1, dh)


def _softmax_att(q, k, v, scale):
    w = torch.softmax((q.float() @ k.float().transpose(-2, -1)) * scale, dim=-1)
    return (w @ v.float()).to(q.dtype)


def dwc_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(N):
        prefix = x[:, :t + 1]
        k = _heads(prefix @ w_k, num_kv_heads).repeat_interleave(rep, 1)
        v = _heads(prefix @ w_v, num_kv_heads).repeat_interleave(rep, 1)
        q = _split_tok(x[:, t] @ w_q, num_heads)
        ctx = _softmax_att(q, k, v, 1 / math.sqrt(dh))
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t]
        q = _split_tok(xt @ w_q, num_heads)
        if ks:
            k = torch.cat(ks, dim=2).repeat_interleave(rep, 1)
            v = torch.cat(vs, dim=2).repeat_interleave(rep, 1)
            ctx = _softmax_att(q, k, v, 1 / math.sqrt(dh))
        else:
            ctx = torch.zeros_like(q)
        ks.append(_split_tok(xt @ w_k, num_kv_heads))  # cache updated after attending
        vs.append(_split_tok(xt @ w_v, num_kv_heads))
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(B, num_kv_heads, N, dh, dtype=x.dtype)
    v_cache = torch.zeros_like(k_cache)
    outs = []
    for t in range(N):
        xt = x[:, t]
        k_cache[:, :, t:t + 1] = _split_tok(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _split_tok(xt @ w_v, num_kv_heads)
        k = k_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        v = v_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        ctx = _softmax_att(_split_tok(xt @ w_q, num_heads), k, v, 1 / math.sqrt(dh))
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    cache_k, cache_v, outs = None, None, []
    for t in range(N):
        xt = x[:, t]
        k_new = _split_tok(xt @ w_k, num_kv_heads)
        v_new = _split_tok(xt @ w_k, num_kv_heads)
        cache_k = k_new if cache_k is None else torch.cat([cache_k, k_new], 2)
        cache_v = v_new if cache_v is None else torch.cat([cache_v, v_new], 2)
        q = _split_tok(xt @ w_q, num_heads)
        ctx = _softmax_att(q, cache_k.repeat_interleave(rep, 1), cache_v.repeat_interleave(rep, 1),
                           dh ** -0.5)
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, 1)


def dwc_overwrites_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    outs = []
    k_cache = v_cache = None
    for t in range(N):
        xt = x[:, t]
        k_cache = _split_tok(xt @ w_k, num_kv_heads)  # replaces the cache
        v_cache = _split_tok(xt @ w_v, num_kv_heads)
        q = _split_tok(xt @ w_q, num_heads)
        ctx = _softmax_att(q, k_cache.repeat_interleave(rep, 1), v_cache.repeat_interleave(rep, 1),
                           1 / math.sqrt(dh))
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, 1)


def dwc_scale_by_cache_len(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t]
        ks.append(_split_tok(xt @ w_k, num_kv_heads))
        vs.append(_split_tok(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, 2).repeat_interleave(rep, 1)
        v = torch.cat(vs, 2).repeat_interleave(rep, 1)
        ctx = _softmax_att(_split_tok(xt @ w_q, num_heads), k, v, 1 / math.sqrt(k.shape[2]))
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, 1)


def dwc_list_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if D % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"d_model={D}, num_heads={num_heads}, num_kv_heads={num_kv_heads} "
                         "are not compatible")
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t]
        ks.append(_split_tok(xt @ w_k, num_kv_heads))
        vs.append(_split_tok(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        ctx = _softmax_att(_split_tok(xt @ w_q, num_heads), k, v, 1 / math.sqrt(dh))
        outs.append(ctx.transpose(1, 2).reshape(B, 1, D) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    if D % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} and num_kv_heads={num_kv_heads} do not fit "
                         f"d_model={D}")
    dh = D // num_heads
    G, rep = num_kv_heads, num_heads // num_kv_heads
    K = torch.empty(B, G, N, dh, dtype=torch.float64)
    V = torch.empty(B, G, N, dh, dtype=torch.float64)
    rows = []
    for t in range(N):
        xt = x[:, t:t + 1, :]  # (B, 1, D)
        K[:, :, t] = (xt @ w_k).double().view(B, G, dh)
        V[:, :, t] = (xt @ w_v).double().view(B, G, dh)
        q = (xt @ w_q).double().view(B, G, rep, dh)  # heads grouped: h = g * rep + r
        s = torch.einsum("bgrd,bgtd->bgrt", q, K[:, :, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, V[:, :, :t + 1]).reshape(B, 1, D)
        rows.append(ctx.to(x.dtype) @ w_o)
    return torch.cat(rows, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled-repeat", "Uses Tensor.repeat along the head axis, which tiles the groups (head h reads group h % G) instead of repeating each group n_rep times in place.", rkv_tiled),
    Entry("repeat_kv", "wrong", "sequence-axis", "Repeats along dim 2 (the sequence axis) instead of the head axis.", rkv_seq_axis),
    Entry("repeat_kv", "wrong", "unsqueeze-after-n", "Inserts the repeat axis after N instead of after G, so the reshape mixes positions into the head axis.", rkv_unsqueeze_wrong_place),
    Entry("repeat_kv", "wrong", "loop-one-copy-short", "The copy loop runs range(1, n_rep), making only n_rep - 1 copies of each group.", rkv_loop_off_by_one),
    Entry("repeat_kv", "wrong", "batch-axis", "Repeats along dim 0 (the batch) instead of the group axis.", rkv_batch_axis),
    Entry("repeat_kv", "wrong", "cat-copies", "Concatenates n_rep copies of the whole tensor along the head axis, so the groups are tiled rather than each repeated in place.", rkv_cat_copies),
    Entry("repeat_kv", "right", "repeat-interleave", None, rkv_interleave),
    Entry("repeat_kv", "right", "index-select", None, rkv_index_select),
    Entry("grouped_query_attention", "wrong", "tiled-groups", "Expands K/V with .repeat, so query head h reads group h % G instead of h // n_rep.", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "scale-kv-width", "Scales the scores by 1/sqrt(d_model // num_kv_heads) instead of 1/sqrt(d_head).", gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "strict-causal", "Builds the causal mask with tril(diagonal=-1), so a token may not attend to itself (the first row is empty).", gqa_strict_mask),
    Entry("grouped_query_attention", "wrong", "ignores-causal", "Never applies the causal mask, even when causal=True.", gqa_ignores_causal),
    Entry("grouped_query_attention", "wrong", "no-group-check", "Does not check that num_heads is a multiple of num_kv_heads, so a bad pair fails deep inside with a RuntimeError instead of a ValueError.", gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "merge-no-transpose", "Merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without moving the head axis back.", gqa_merge_no_transpose),
    Entry("grouped_query_attention", "right", "sdpa", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "head-loop-float64", None, gqa_head_loop),
    Entry("kv_cache_bytes", "wrong", "keys-only", "Forgets the factor 2 for storing both keys and values.", kvb_keys_only),
    Entry("kv_cache_bytes", "wrong", "bits", "Multiplies by 8, returning bits instead of bytes.", kvb_bits),
    Entry("kv_cache_bytes", "wrong", "numpy-int", "Uses np.prod, which returns a numpy integer instead of a plain Python int.", kvb_numpy_int),
    Entry("kv_cache_bytes", "wrong", "ignores-batch", "Leaves batch_size out of the product.", kvb_no_batch),
    Entry("kv_cache_bytes", "wrong", "hard-coded-fp16", "Hard-codes 2 bytes per element instead of using bytes_per_element.", kvb_fixed_two_bytes),
    Entry("kv_cache_bytes", "wrong", "one-layer", "Counts K and V for a single layer, forgetting to multiply by num_layers.", kvb_one_layer),
    Entry("kv_cache_bytes", "right", "layer-loop", None, kvb_per_layer_loop),
    Entry("kv_cache_bytes", "right", "cache-shape-prod", None, kvb_tensor_nbytes),
    Entry("decode_with_cache", "wrong", "reprojects-prefix", "Projects the whole prefix to keys and values again at every step instead of only the new token.", dwc_reproject_prefix),
    Entry("decode_with_cache", "wrong", "excludes-current-token", "Appends the new key/value to the cache only after attending, so each token cannot see itself (and the first step sees nothing).", dwc_excludes_current),
    Entry("decode_with_cache", "wrong", "tiled-groups", "Expands the cached K/V heads with .repeat, so query head h reads group h % G instead of h // n_rep.", dwc_tiled_groups),
    Entry("decode_with_cache", "wrong", "values-from-wk", "Copy-paste slip: the cached values are projected with w_k instead of w_v.", dwc_values_from_wk),
    Entry("decode_with_cache", "wrong", "overwrites-cache", "Overwrites the cache with the new token's key and value instead of appending, so each step attends only to itself.", dwc_overwrites_cache),
    Entry("decode_with_cache", "wrong", "scale-by-cache-length", "Scales the scores by 1/sqrt(current cache length) instead of 1/sqrt(d_head).", dwc_scale_by_cache_len),
    Entry("decode_with_cache", "right", "list-cache", None, dwc_list_cache),
    Entry("decode_with_cache", "right", "grouped-einsum", None, dwc_grouped_einsum),
]
