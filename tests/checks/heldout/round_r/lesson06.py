"""Held-out catalogue, lesson 06 (GQA and KV cache): repeat_kv, grouped_query_attention,
kv_cache_bytes, decode_with_cache. torch."""

import math
from functools import reduce
from operator import mul

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ================================================================================= repeat_kv
def rkv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_index_by_groups(x, n_rep):
    groups = x.shape[1]
    heads = [x[:, h // groups] for h in range(groups * n_rep)]
    return torch.stack(heads, dim=1)


def rkv_expand_group_axis(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def rkv_interleave_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def rkv_copies_off_by_one(x, n_rep):
    copies = []
    for g in range(x.shape[1]):
        for _ in range(1, n_rep):
            copies.append(x[:, g:g + 1])
    return torch.cat(copies, dim=1)


def rkv_interleave_dim1(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def rkv_index_select(x, n_rep):
    g = x.shape[1]
    idx = torch.div(torch.arange(g * n_rep, device=x.device), n_rep, rounding_mode="floor")
    return x.index_select(1, idx)


# ================================================================== grouped_query_attention
def _heads(t, count):
    b, n, w = t.shape
    return t.reshape(b, n, count, w // count).transpose(1, 2)


def _join(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _guard(num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")


def _softmax_safe(scores):
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(scores - top)
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def _attend(q, k, v, mask=None, scale=None):
    dt = q.dtype
    q, k, v = q.float(), k.float(), v.float()
    if q.dtype != torch.float64 and dt == torch.float64:
        q, k, v = q.double(), k.double(), v.double()
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return (_softmax_safe(s) @ v).to(dt)


def _up(t, dtype):
    return t.double() if dtype == torch.float64 else t.float()


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads)
    v = _heads(x @ w_v, num_kv_heads)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril() if causal else None
    return _join(_attend(q, k, v, mask)) @ w_o


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    n = x.shape[1]
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril() if causal else None
    return _join(_attend(q, k, v, mask)) @ w_o


def gqa_diagonal_minus_one(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    B, N, D = x.shape
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1)
    mask = None
    if causal:
        mask = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device), diagonal=-1)
    return _join(_attend(q, k, v, mask)) @ w_o


def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    n, d_model = x.shape[1], x.shape[2]
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril() if causal else None
    return _join(_attend(q, k, v, mask, scale=1.0 / math.sqrt(d_model))) @ w_o


def gqa_query_split_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                 causal=False):
    _guard(num_heads, num_kv_heads)
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, num_heads, n, d_head)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril() if causal else None
    return _join(_attend(q, k, v, mask)) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    n = x.shape[1]
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = None
    if causal is not None:
        mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    return _join(_attend(q, k, v, mask)) @ w_o


def gqa_sdpa_enable_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads)
    v = _heads(x @ w_v, num_kv_heads)
    up = _up(q, x.dtype).dtype
    ctx = F.scaled_dot_product_attention(q.to(up), k.to(up), v.to(up), is_causal=bool(causal),
                                         enable_gqa=True)
    return _join(ctx.to(x.dtype)) @ w_o


def gqa_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_kv_heads <= 0 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    xd = x.double()
    b, n, d_model = x.shape
    dh = d_model // num_heads
    r = num_heads // num_kv_heads
    q = (xd @ w_q.double()).reshape(b, n, num_kv_heads, r, dh)   # query head g*r + j
    k = (xd @ w_k.double()).reshape(b, n, num_kv_heads, dh)
    v = (xd @ w_v.double()).reshape(b, n, num_kv_heads, dh)
    s = torch.einsum("bqgjd,bkgd->bgjqk", q, k) / math.sqrt(dh)
    if causal:
        allowed = torch.arange(n)[None, :] <= torch.arange(n)[:, None]
        s = s.masked_fill(~allowed.to(x.device), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgjqk,bkgd->bqgjd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element / 2 ** 30


def kvb_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kvb_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kvb_seq_squared(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len ** 2 * batch_size \
        * bytes_per_element


def kvb_plus_one_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    tokens = seq_len + 1  # the cached tokens and the new one
    return 2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_element


def kvb_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("keys", "values"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kvb_shape_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    cache_shape = (num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim)
    return reduce(mul, cache_shape, int(bytes_per_element))


# ========================================================================= decode_with_cache
def _dims(x, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    return b, n, d_model // num_heads, num_heads // num_kv_heads


def dwc_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    b, n, dh, rep = _dims(x, num_heads, num_kv_heads)
    outs = []
    for t in range(n):
        q = _heads(x[:, t:t + 1] @ w_q, num_heads)
        k = _heads(x[:, :t + 1] @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
        v = _heads(x[:, :t + 1] @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
        outs.append(_join(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_attends_empty_slots(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    b, n, dh, rep = _dims(x, num_heads, num_kv_heads)
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype, device=x.device)
    v_cache = torch.zeros_like(k_cache)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(xt @ w_v, num_kv_heads)
        ctx = _attend(q, k_cache.repeat_interleave(rep, dim=1),
                      v_cache.repeat_interleave(rep, dim=1))
        outs.append(_join(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    b, n, dh, rep = _dims(x, num_heads, num_kv_heads)
    k_cache = torch.empty(b, num_kv_heads, n, dh, dtype=x.dtype, device=x.device)
    v_cache = torch.empty_like(k_cache)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(xt @ w_v, num_kv_heads)
        k_seen = k_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        v_seen = v_cache[:, :, :t].repeat_interleave(rep, dim=1).float()
        p = torch.softmax(q.float() @ k_seen.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        outs.append(_join((p @ v_seen).to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    b, n, dh, rep = _dims(x, num_heads, num_kv_heads)
    ks, vs, outs = [], [], []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat(1, rep, 1, 1)
        v = torch.cat(vs, dim=2).repeat(1, rep, 1, 1)
        outs.append(_join(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_cache_reset_each_step(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    b, n, dh, rep = _dims(x, num_heads, num_kv_heads)
    outs = []
    for t in range(n):
        k_list, v_list = [], []  # the cache
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        k_list.append(_heads(xt @ w_k, num_kv_heads))
        v_list.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(k_list, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(v_list, dim=2).repeat_interleave(rep, dim=1)
        outs.append(_join(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_float32_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    b, n, dh, rep = _dims(x, num_heads, num_kv_heads)
    k_cache = torch.zeros(b, num_kv_heads, n, dh, device=x.device)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, device=x.device)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(xt @ w_v, num_kv_heads)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, dim=1)
        s = q @ k.transpose(-2, -1) / math.sqrt(dh)
        outs.append(_join(torch.softmax(s, dim=-1) @ v) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    keys, values, outs = [], [], []
    for t in range(n):
        tok = x[:, t]  # (B, d_model): only the new token
        q = (tok @ w_q).reshape(b, num_heads, 1, dh)
        keys.append((tok @ w_k).reshape(b, num_kv_heads, 1, dh))
        values.append((tok @ w_v).reshape(b, num_kv_heads, 1, dh))
        up = _up(q, x.dtype).dtype
        ctx = F.scaled_dot_product_attention(q.to(up), torch.cat(keys, 2).to(up),
                                             torch.cat(values, 2).to(up), enable_gqa=True)
        outs.append(ctx.to(x.dtype).reshape(b, d_model) @ w_o)
    return torch.stack(outs, dim=1)


def dwc_grouped_einsum_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    g = num_kv_heads
    r = num_heads // g
    dh = d_model // num_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    k_cache = torch.zeros(b, n, g, dh, dtype=work, device=x.device)
    v_cache = torch.zeros(b, n, g, dh, dtype=work, device=x.device)
    result = torch.empty_like(x)
    for t in range(n):
        xt = x[:, t, :]
        q = torch.einsum("bd,de->be", xt, w_q).to(work).reshape(b, g, r, dh)
        k_cache[:, t] = torch.einsum("bd,de->be", xt, w_k).to(work).reshape(b, g, dh)
        v_cache[:, t] = torch.einsum("bd,de->be", xt, w_v).to(work).reshape(b, g, dh)
        s = torch.einsum("bgrd,bsgd->bgrs", q, k_cache[:, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrs,bsgd->bgrd", p, v_cache[:, :t + 1]).reshape(b, d_model)
        result[:, t, :] = ctx.to(x.dtype) @ w_o
    return result


E = Entry
ENTRIES = [
    E("repeat_kv", "wrong", "tiled_repeat",
      "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, ..., 0, 1, ...), so query head h gets "
      "group h % G instead of h // n_rep",
      rkv_tiled),
    E("repeat_kv", "wrong", "interleave_token_axis",
      "repeat_interleave runs along dim=2 (the tokens) instead of dim=1 (the groups), so every "
      "token is duplicated and the head count is unchanged",
      rkv_interleave_tokens),
    E("repeat_kv", "wrong", "index_divides_by_groups",
      "head h takes group h // G (the number of groups) instead of h // n_rep, so heads get "
      "the wrong groups (and the index runs past the last group when G < n_rep)",
      rkv_index_by_groups),
    E("repeat_kv", "wrong", "expand_non_singleton_axis",
      "expand can only broadcast axes of length 1, so expanding the group axis from G to "
      "G * n_rep raises for G > 1 (an unsqueezed axis is needed)",
      rkv_expand_group_axis),
    E("repeat_kv", "wrong", "repeat_interleave_without_dim",
      "repeat_interleave without dim flattens the tensor first, so it returns a 1-D tensor "
      "of every element repeated instead of (B, G*n_rep, N, d)",
      rkv_interleave_no_dim),
    E("repeat_kv", "wrong", "copies_range_from_1",
      "the copy loop runs over range(1, n_rep), making n_rep - 1 copies of each group "
      "(none at all for n_rep=1, where torch.cat of an empty list raises)",
      rkv_copies_off_by_one),
    E("repeat_kv", "right", "repeat_interleave_dim1", None, rkv_interleave_dim1),
    E("repeat_kv", "right", "index_select_floor_div", None, rkv_index_select),

    E("grouped_query_attention", "wrong", "no_divisibility_guard",
      "there is no check that num_heads is a multiple of num_kv_heads, so num_heads=4, "
      "num_kv_heads=3 fails later with a shape RuntimeError instead of a ValueError naming "
      "both numbers",
      gqa_no_guard),
    E("grouped_query_attention", "wrong", "tiled_kv_repeat",
      "the K/V heads are repeated with .repeat(1, n_rep, 1, 1), which tiles the groups, so "
      "query head h reads group h % G instead of h // n_rep",
      gqa_tiled_repeat),
    E("grouped_query_attention", "wrong", "causal_diagonal_minus_one",
      "the causal mask uses tril(diagonal=-1), which also hides the diagonal: each query "
      "cannot see its own token and the first query sees nothing",
      gqa_diagonal_minus_one),
    E("grouped_query_attention", "wrong", "scale_sqrt_d_model",
      "the scores are divided by sqrt(d_model) instead of sqrt(d_head)",
      gqa_scale_d_model),
    E("grouped_query_attention", "wrong", "query_split_without_transpose",
      "the queries are reshaped straight to (B, H, N, d_head) instead of (B, N, H, d_head) "
      "followed by transpose(1, 2), so the query heads mix tokens and features",
      gqa_query_split_no_transpose),
    E("grouped_query_attention", "wrong", "causal_is_not_none",
      "`if causal is not None:` is true for causal=False too, so the causal mask is always "
      "applied",
      gqa_causal_is_not_none),
    E("grouped_query_attention", "right", "sdpa_enable_gqa_float32", None, gqa_sdpa_enable_gqa),
    E("grouped_query_attention", "right", "grouped_einsum_no_repeat_float64", None,
      gqa_grouped_einsum_float64),

    E("kv_cache_bytes", "wrong", "no_factor_two",
      "it counts only one cache tensor: the factor 2 for keys and values is missing",
      kvb_no_factor_two),
    E("kv_cache_bytes", "wrong", "returns_gib",
      "it divides by 2**30 and returns GiB (a float) instead of the number of bytes",
      kvb_gib),
    E("kv_cache_bytes", "wrong", "batch_size_ignored",
      "batch_size is never used, so the cache of a batch is counted as one sequence's",
      kvb_batch_ignored),
    E("kv_cache_bytes", "wrong", "np_prod_int64",
      "np.prod returns a numpy.int64, not the plain Python int the contract asks for",
      kvb_np_prod),
    E("kv_cache_bytes", "wrong", "seq_len_squared",
      "it multiplies by seq_len squared, as if the cache stored the N x N score matrix; the "
      "cache holds one key and one value vector per token, linear in seq_len",
      kvb_seq_squared),
    E("kv_cache_bytes", "wrong", "seq_len_plus_one",
      "it counts seq_len + 1 tokens (an extra 'new' token) instead of seq_len",
      kvb_plus_one_token),
    E("kv_cache_bytes", "right", "layer_and_tensor_loop", None, kvb_layer_loop),
    E("kv_cache_bytes", "right", "reduce_over_cache_shape", None, kvb_shape_reduce),

    E("decode_with_cache", "wrong", "reprojects_prefix",
      "each step projects the whole prefix x[:, :t+1] with w_k and w_v again instead of only "
      "the new token: the values are right but the projection work is quadratic in N, which "
      "is exactly what the cache is there to avoid",
      dwc_reprojects_prefix),
    E("decode_with_cache", "wrong", "attends_unfilled_slots",
      "each step attends over the whole preallocated cache, including the zero-filled slots "
      "of future tokens, instead of only the first t + 1 entries",
      dwc_attends_empty_slots),
    E("decode_with_cache", "wrong", "cache_slice_excludes_current",
      "the cache is sliced [:t] instead of [:t + 1], so each query cannot see its own token "
      "and the first step attends to nothing (a zero output row)",
      dwc_excludes_current),
    E("decode_with_cache", "wrong", "tiled_kv_repeat",
      "the cached K/V heads are repeated with .repeat(1, n_rep, 1, 1), which tiles the groups, "
      "so query head h reads group h % G instead of h // n_rep",
      dwc_tiled_repeat),
    E("decode_with_cache", "wrong", "cache_reset_every_step",
      "the cache lists are created inside the loop, so they are emptied at every step and each "
      "token attends only to itself",
      dwc_cache_reset_each_step),
    E("decode_with_cache", "wrong", "cache_default_float32",
      "the cache is allocated with torch.zeros(...) without dtype=x.dtype, so it is float32: "
      "for float64 or half-precision inputs the product of the queries with the cached keys "
      "fails with a dtype mismatch",
      dwc_float32_cache),
    E("decode_with_cache", "right", "list_cache_sdpa_enable_gqa", None, dwc_list_cache_sdpa),
    E("decode_with_cache", "right", "grouped_einsum_preallocated_cache", None,
      dwc_grouped_einsum_cache),
]
