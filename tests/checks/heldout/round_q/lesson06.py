"""Round q, lesson 06 (GQA and KV cache, torch): repeat_kv, grouped_query_attention,
kv_cache_bytes, decode_with_cache.

Six wrong answers (one slip each) and two right answers (unusual routes) per exercise.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def rkv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)  # tiles the groups: head h reads group h % G


def rkv_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)  # dim 2 is the token axis


def rkv_new_axis_first(x, n_rep):
    b, g, n, d = x.shape
    # the copy axis is put before the group axis, so the copies come out tiled
    return x[:, None].expand(b, n_rep, g, n, d).reshape(b, g * n_rep, n, d)


def rkv_interleave_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)  # without dim it flattens the tensor first


def rkv_index_by_groups(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep) // groups  # should divide by n_rep
    return x[:, idx]


def rkv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rkv_index_select(x, n_rep):
    heads = torch.arange(x.shape[1] * n_rep, device=x.device)
    return x.index_select(1, torch.div(heads, n_rep, rounding_mode="floor"))


def rkv_stack_loop(x, n_rep):
    copies = [x[:, h // n_rep] for h in range(x.shape[1] * n_rep)]
    return torch.stack(copies, dim=1)


# ============================================================================ grouped_query_attention
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _interleave(t, r):
    return t.repeat_interleave(r, dim=1)


def _attend(q, k, v, causal, triu_diag=1, fill_allowed=False):
    dtype = q.dtype
    q, k, v = q.float() if dtype != torch.float64 else q, k.to(q.dtype if dtype == torch.float64
                                                               else torch.float32), \
        v.to(torch.float64 if dtype == torch.float64 else torch.float32)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n_q, n_k = s.shape[-2:]
        blocked = torch.ones(n_q, n_k, dtype=torch.bool).triu(triu_diag)
        s = s.masked_fill(~blocked if fill_allowed else blocked, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).to(dtype)


def _gqa_check(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)  # tiled: head h gets group h % G
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    return _unheads(_attend(q, k, v, causal)) @ w_o


def gqa_diagonal_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _interleave(_heads(x @ w_k, num_kv_heads), rep)
    v = _interleave(_heads(x @ w_v, num_kv_heads), rep)
    # triu(0) blocks the diagonal too: each token cannot see itself
    return _unheads(_attend(q, k, v, causal, triu_diag=0)) @ w_o


def gqa_dhead_from_wk(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    b, n, _ = x.shape
    d_head = w_k.shape[1] // num_heads  # w_k is only num_kv_heads * d_head wide
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, n, -1, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, -1, d_head).transpose(1, 2).repeat_interleave(rep, dim=1)
    v = (x @ w_v).reshape(b, n, -1, d_head).transpose(1, 2).repeat_interleave(rep, dim=1)
    return _unheads(_attend(q, k, v, causal)) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    rep = num_heads // num_kv_heads  # floor division hides a bad num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _interleave(_heads(x @ w_k, num_kv_heads), rep)
    v = _interleave(_heads(x @ w_v, num_kv_heads), rep)
    return _unheads(_attend(q, k, v, causal)) @ w_o


def gqa_view_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).view(b, num_heads, n, dh)  # straight view: tokens and features mixed
    k = (x @ w_k).view(b, num_kv_heads, n, dh).repeat_interleave(rep, dim=1)
    v = (x @ w_v).view(b, num_kv_heads, n, dh).repeat_interleave(rep, dim=1)
    return _attend(q, k, v, causal).reshape(b, n, d_model) @ w_o


def gqa_masked_fill_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _interleave(_heads(x @ w_k, num_kv_heads), rep)
    v = _interleave(_heads(x @ w_v, num_kv_heads), rep)
    # masked_fill(~blocked): fills where the allowed mask is True
    return _unheads(_attend(q, k, v, causal, fill_allowed=True)) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    q = (x @ w_q).to(work).unflatten(-1, (num_heads, dh)).transpose(1, 2)
    k = (x @ w_k).to(work).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    v = (x @ w_v).to(work).unflatten(-1, (num_kv_heads, dh)).transpose(1, 2)
    r = num_heads // num_kv_heads
    k = k.repeat_interleave(r, dim=1)
    v = v.repeat_interleave(r, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.transpose(1, 2).flatten(2).to(x.dtype) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    xd = x.double()
    q = (xd @ w_q.double()).reshape(b, n, g, r, dh)  # query head h = group h // r, member h % r
    k = (xd @ w_k.double()).reshape(b, n, g, dh)
    v = (xd @ w_v.double()).reshape(b, n, g, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).tril().logical_not(), -math.inf)
    p = s.softmax(dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8  # bits, not bytes


def kvb_numpy_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])  # numpy integer, not a plain int


def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len  # batch_size never used


def kvb_head_dim_as_width(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    per_head = head_dim // num_kv_heads  # head_dim treated as the total K width
    return 2 * num_layers * num_kv_heads * per_head * seq_len * batch_size * bytes_per_element


def kvb_next_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    tokens = seq_len + 1  # room for the token about to be generated
    return 2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_element


def kvb_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kvb_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


# ============================================================================ decode_with_cache
def _split(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _step_attention(q, k, v):
    """q (B, H, 1, d), k/v (B, H, T, d): softmax in float32 (or float64)."""
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = (q.to(work) @ k.to(work).transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, dim=-1) @ v.to(work)).to(q.dtype)


def dec_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(x.shape[1]):
        prefix = x[:, : t + 1]
        q = _split(prefix[:, -1:] @ w_q, num_heads)
        k = _split(prefix @ w_k, num_kv_heads).repeat_interleave(rep, 1)  # whole prefix again
        v = _split(prefix @ w_v, num_kv_heads).repeat_interleave(rep, 1)
        outs.append(_merge(_step_attention(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dec_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    b, n, _ = x.shape
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads)
        k_all = torch.cat(keys + [xt.new_zeros(b, num_kv_heads, 0, q.shape[-1])], dim=2)
        v_all = torch.cat(values + [xt.new_zeros(b, num_kv_heads, 0, q.shape[-1])], dim=2)
        # attends before appending: token t never sees its own key
        ctx = _step_attention(q, k_all.repeat_interleave(rep, 1), v_all.repeat_interleave(rep, 1))
        outs.append(_merge(ctx) @ w_o)
        keys.append(_split(xt @ w_k, num_kv_heads))
        values.append(_split(xt @ w_v, num_kv_heads))
    return torch.cat(outs, dim=1)


def dec_value_from_wk(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        k_t = _split(xt @ w_k, num_kv_heads)
        v_t = _split(xt @ w_k, num_kv_heads)  # copy-paste: should be w_v
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=2)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=2)
        q = _split(xt @ w_q, num_heads)
        ctx = _step_attention(q, k_cache.repeat_interleave(rep, 1), v_cache.repeat_interleave(rep, 1))
        outs.append(_merge(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dec_no_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        k_t, v_t = _split(xt @ w_k, num_kv_heads), _split(xt @ w_v, num_kv_heads)
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=2)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=2)
        q = _split(xt @ w_q, num_heads)
        ctx = _step_attention(q, k_cache, v_cache)  # G K/V heads against H query heads
        outs.append(_merge(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dec_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        k_cache = _split(xt @ w_k, num_kv_heads)  # replaces the cache instead of appending
        v_cache = _split(xt @ w_v, num_kv_heads)
        q = _split(xt @ w_q, num_heads)
        ctx = _step_attention(q, k_cache.repeat_interleave(rep, 1), v_cache.repeat_interleave(rep, 1))
        outs.append(_merge(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dec_cat_batch_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, 1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, 1)
        outs.append(_merge(_step_attention(_split(xt @ w_q, num_heads), k, v)) @ w_o)
    return torch.cat(outs, dim=0)  # stacks the steps along the batch axis


def dec_sdpa_list_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _gqa_check(x.shape[-1], num_heads, num_kv_heads)
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    k_list, v_list, ys = [], [], []
    for t in range(n):
        tok = x[:, t]  # (B, d_model): one row per sequence
        q = (tok @ w_q).to(work).view(b, num_heads, 1, dh)
        k_list.append((tok @ w_k).to(work).view(b, num_kv_heads, 1, dh))
        v_list.append((tok @ w_v).to(work).view(b, num_kv_heads, 1, dh))
        k = torch.cat(k_list, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(v_list, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q, k, v)  # one query sees all cached keys
        ys.append(ctx.reshape(b, d_model).to(x.dtype) @ w_o)
    return torch.stack(ys, dim=1)


def dec_float64_buffers(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    kbuf = torch.zeros(b, n, g, dh, dtype=torch.float64)
    vbuf = torch.zeros(b, n, g, dh, dtype=torch.float64)
    out = torch.zeros(b, n, d_model, dtype=torch.float64)
    wq, wk, wv, wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    for pos in range(n):
        row = x[:, pos].double()  # (B, d_model)
        kbuf[:, pos] = (row @ wk).view(b, g, dh)
        vbuf[:, pos] = (row @ wv).view(b, g, dh)
        q = (row @ wq).view(b, g, r, dh)
        s = torch.einsum("bgrd,btgd->bgrt", q, kbuf[:, : pos + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,btgd->bgrd", p, vbuf[:, : pos + 1])
        out[:, pos] = ctx.reshape(b, d_model) @ wo
    return out.to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "repeat-tiles",
          "x.repeat tiles the groups (0, 1, 2, 0, 1, 2), so head h reads group h % G instead "
          "of h // n_rep.", rkv_tiled),
    Entry("repeat_kv", "wrong", "interleave-token-axis",
          "repeat_interleave is applied on dim=2, the token axis, instead of dim=1, the group "
          "axis, so tokens are duplicated instead of heads.", rkv_interleave_tokens),
    Entry("repeat_kv", "wrong", "copy-axis-before-groups",
          "The new copy axis is inserted before the group axis, so expand + reshape produces the "
          "tiled order (group h % G) instead of the interleaved one.", rkv_new_axis_first),
    Entry("repeat_kv", "wrong", "interleave-without-dim",
          "repeat_interleave without dim flattens the tensor, returning a 1-D tensor instead of "
          "(B, G * n_rep, N, d).", rkv_interleave_no_dim),
    Entry("repeat_kv", "wrong", "index-divides-by-G",
          "The head index is h // G instead of h // n_rep, so heads read the wrong groups (and "
          "the index runs past the groups when G = 1).", rkv_index_by_groups),
    Entry("repeat_kv", "wrong", "view-after-expand",
          "After expand it calls .view, which cannot merge the expanded (stride-0) axis, so it "
          "raises a RuntimeError: .reshape is needed.", rkv_view_after_expand),
    Entry("repeat_kv", "right", "index-select-floor-div", None, rkv_index_select),
    Entry("repeat_kv", "right", "stack-per-head", None, rkv_stack_loop),

    Entry("grouped_query_attention", "wrong", "tiled-kv-heads",
          "K and V are repeated with .repeat, which tiles the groups, so query head h uses "
          "group h % G instead of h // n_rep.", gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "diagonal-masked",
          "The causal mask is built with triu(0), which also blocks the diagonal: each token "
          "cannot attend to itself and the first row has no key at all (NaN).",
          gqa_diagonal_masked),
    Entry("grouped_query_attention", "wrong", "d_head-from-w_k",
          "d_head is computed as w_k.shape[1] // num_heads, but w_k is only num_kv_heads * "
          "d_head wide, so with fewer K/V heads the heads are cut at the wrong size.",
          gqa_dhead_from_wk),
    Entry("grouped_query_attention", "wrong", "no-kv-heads-check",
          "It never checks that num_heads is a multiple of num_kv_heads; floor division hides "
          "the problem and it fails later with a RuntimeError instead of a ValueError.",
          gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "view-without-transpose",
          "The heads are made with .view(B, H, N, d_head) straight from (B, N, width), without "
          "the transpose, so each head mixes tokens and features.", gqa_view_no_transpose),
    Entry("grouped_query_attention", "wrong", "masked-fill-on-allowed",
          "masked_fill is given the allowed positions, so with causal=True it sets the visible "
          "scores (past and diagonal) to -inf and keeps the future ones; the last row, all "
          "visible, becomes NaN.",
          gqa_masked_fill_allowed),
    Entry("grouped_query_attention", "right", "sdpa-float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped-einsum-float64", None,
          gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "keys-only",
          "It counts only the key cache; the factor 2 for keys and values is missing.",
          kvb_keys_only),
    Entry("kv_cache_bytes", "wrong", "bits-not-bytes",
          "It multiplies by 8, returning bits instead of bytes.", kvb_bits),
    Entry("kv_cache_bytes", "wrong", "numpy-prod-int64",
          "np.prod returns a numpy int64, not the plain Python int the contract asks for.",
          kvb_numpy_prod),
    Entry("kv_cache_bytes", "wrong", "batch-ignored",
          "batch_size is never multiplied in, so the cache of a batch is counted as one "
          "sequence's.", kvb_no_batch),
    Entry("kv_cache_bytes", "wrong", "head_dim-as-total-width",
          "head_dim is divided by num_kv_heads as if it were the total K width, so the "
          "per-head size shrinks whenever there are several K/V heads.",
          kvb_head_dim_as_width),
    Entry("kv_cache_bytes", "wrong", "seq_len-plus-one",
          "It sizes the cache for seq_len + 1 tokens (an extra slot for the next token), one "
          "token too many.", kvb_next_token),
    Entry("kv_cache_bytes", "right", "math-prod", None, kvb_math_prod),
    Entry("kv_cache_bytes", "right", "loop-over-layers-and-tensors", None, kvb_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects-prefix",
          "Each step projects the whole prefix x[:, :t+1] with w_k and w_v again instead of "
          "only the new token, so the projection work is quadratic in N (the values are right).",
          dec_reproject_prefix),
    Entry("decode_with_cache", "wrong", "attends-before-append",
          "The new token's key and value are appended to the cache after attending, so token t "
          "never sees itself (and the first token sees no key at all, giving zeros).",
          dec_excludes_current),
    Entry("decode_with_cache", "wrong", "value-from-w_k",
          "The values are projected with w_k (copy-paste) instead of w_v.", dec_value_from_wk),
    Entry("decode_with_cache", "wrong", "kv-groups-not-repeated",
          "The cached K/V groups are not repeated for the query heads, so with 1 < "
          "num_kv_heads < num_heads the shapes do not broadcast and it raises (MQA only works "
          "by broadcasting luck).", dec_no_repeat),
    Entry("decode_with_cache", "wrong", "cache-overwritten",
          "The cache is reassigned to the new token's key and value instead of appended to, so "
          "each token attends only to itself.", dec_cache_overwritten),
    Entry("decode_with_cache", "wrong", "cat-on-batch-axis",
          "The per-step outputs are concatenated along dim 0, the batch axis, giving "
          "(N * B, 1, d_model) instead of (B, N, d_model).", dec_cat_batch_dim),
    Entry("decode_with_cache", "right", "sdpa-list-cache", None, dec_sdpa_list_cache),
    Entry("decode_with_cache", "right", "float64-buffers-grouped-einsum", None,
          dec_float64_buffers),
]
