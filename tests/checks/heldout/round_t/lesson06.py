"""Held-out catalogue, lesson 06 (GQA and KV cache, torch): repeat_kv, grouped_query_attention,
kv_cache_bytes, decode_with_cache. Each wrong answer carries exactly one slip."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def rkv_tiled_repeat(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_interleave_tokens(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_interleave_no_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep)


def rkv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rkv_expand_no_reshape(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d)


def rkv_index_by_groups(x, n_rep):
    groups = x.shape[1]
    index = [h // groups for h in range(groups * n_rep)]
    return x[:, index]


def rkv_index_select(x, n_rep):
    groups = x.shape[1]
    src = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, src)


def rkv_stack_copies(x, n_rep):
    heads = [x[:, g] for g in range(x.shape[1]) for _ in range(n_rep)]
    return torch.stack(heads, dim=1)


# ============================================================================ grouped_query_attention
def _check_heads(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")


def _heads(t, h):
    b, n, width = t.shape
    return t.view(b, n, h, width // h).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_f32(scores, like):
    return torch.softmax(scores.float(), dim=-1).to(like.dtype)


def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        s = s.masked_fill(future, float("-inf"))
    return _unheads(_softmax_f32(s, x) @ v) @ w_o


def gqa_diagonal_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool))
        s = s.masked_fill(future, float("-inf"))
    return _unheads(_softmax_f32(s, x) @ v) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal is not None:
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        s = s.masked_fill(future, float("-inf"))
    return _unheads(_softmax_f32(s, x) @ v) @ w_o


def gqa_masked_fill_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))  # True = may attend
        s = s.masked_fill(allowed, float("-inf"))
    w = torch.nan_to_num(_softmax_f32(s, x))
    return _unheads(w @ v) @ w_o


def gqa_repeat_before_split(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads((x @ w_k).repeat_interleave(n_rep, dim=-1), num_heads)
    v = _heads((x @ w_v).repeat_interleave(n_rep, dim=-1), num_heads)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return _unheads(_softmax_f32(s, x) @ v) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    ctx = _softmax_f32(s, x) @ v  # (B, H, N, d_head)
    return ctx.reshape(b, n, d_model) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    bsz, seq, d_model = x.shape
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads} (d_model={d_model})")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(bsz, seq, num_heads, d_head).permute(0, 2, 1, 3)
    k = (x @ w_k).reshape(bsz, seq, num_kv_heads, d_head).permute(0, 2, 1, 3)
    v = (x @ w_v).reshape(bsz, seq, num_kv_heads, d_head).permute(0, 2, 1, 3)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    ctx = ctx.to(x.dtype).permute(0, 2, 1, 3).reshape(bsz, seq, d_model)
    return ctx @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    g, r, dh = num_kv_heads, num_heads // num_kv_heads, d_model // num_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).view(b, n, g, r, dh)  # query head h = group * r + j
    k = (x64 @ w_k.double()).view(b, n, g, dh)
    v = (x64 @ w_v.double()).view(b, n, g, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        keep = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        s = torch.where(keep, s, torch.tensor(float("-inf"), dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    n_bytes = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return n_bytes / 2 ** 30


def kvb_batch_left_out(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kvb_fixed_two_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16


def kvb_next_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    positions = seq_len + 1  # room for the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * positions * batch_size * bytes_per_element


def kvb_numpy_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kvb_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    k_and_v = ("k", "v")
    return math.prod([len(k_and_v), num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element])


def kvb_per_token_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    per_token_per_layer = functools.reduce(operator.mul, (2, num_kv_heads, head_dim,
                                                          bytes_per_element))
    tokens = seq_len * batch_size
    total = 0
    for _ in range(num_layers):
        total += per_token_per_layer * tokens
    return total


# ============================================================================ decode_with_cache
def _prep(x, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads, num_kv_heads)
    return b, n, d_model, d_model // num_heads, num_heads // num_kv_heads


def _attend(q, k, v):
    """q (B, H, 1, d); k, v (B, H, T, d); softmax in float32, back to q's dtype."""
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)


def dwc_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, n_rep = _prep(x, num_heads, num_kv_heads)
    outs = []
    for t in range(n):
        q = _heads(x[:, t:t + 1] @ w_q, num_heads)
        k = _heads(x[:, :t + 1] @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
        v = _heads(x[:, :t + 1] @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
        outs.append(_unheads(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_unwritten_slots(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, n_rep = _prep(x, num_heads, num_kv_heads)
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _heads(x_t @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(x_t @ w_v, num_kv_heads)
        k = k_cache.repeat_interleave(n_rep, dim=1)
        v = v_cache.repeat_interleave(n_rep, dim=1)
        outs.append(_unheads(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, n_rep = _prep(x, num_heads, num_kv_heads)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _heads(x_t @ w_q, num_heads)
        keys.append(_heads(x_t @ w_k, num_kv_heads))
        values.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(dh)
        causal = torch.ones(1, t + 1, dtype=torch.bool).tril()  # (1, t+1) causal mask
        s = s.masked_fill(~causal, float("-inf"))
        ctx = (torch.softmax(s, dim=-1) @ v.float()).to(x.dtype)
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_stack_outputs(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, n_rep = _prep(x, num_heads, num_kv_heads)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _heads(x_t @ w_q, num_heads)
        keys.append(_heads(x_t @ w_k, num_kv_heads))
        values.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        outs.append(_unheads(_attend(q, k, v)) @ w_o)  # (B, 1, d_model)
    return torch.stack(outs, dim=1)


def dwc_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, n_rep = _prep(x, num_heads, num_kv_heads)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _heads(x_t @ w_q, num_heads)
        keys.append(_heads(x_t @ w_k, num_kv_heads))
        values.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(keys, dim=2).repeat(1, n_rep, 1, 1)
        v = torch.cat(values, dim=2).repeat(1, n_rep, 1, 1)
        outs.append(_unheads(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_cache_reset_in_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, n_rep = _prep(x, num_heads, num_kv_heads)
    outs = []
    for t in range(n):
        keys, values = [], []
        x_t = x[:, t:t + 1]
        q = _heads(x_t @ w_q, num_heads)
        keys.append(_heads(x_t @ w_k, num_kv_heads))
        values.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        outs.append(_unheads(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    bsz, seq, d_model = x.shape
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads} (d_model={d_model})")
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    k_list, v_list, steps = [], [], []
    for pos in range(seq):
        tok = x[:, pos, :]  # (B, d_model): only the new token
        q = (tok @ w_q).reshape(bsz, num_heads, 1, dh)
        k_list.append((tok @ w_k).reshape(bsz, num_kv_heads, 1, dh))
        v_list.append((tok @ w_v).reshape(bsz, num_kv_heads, 1, dh))
        keys = torch.cat(k_list, dim=2).repeat_interleave(rep, dim=1)
        vals = torch.cat(v_list, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q.float(), keys.float(), vals.float())
        steps.append(ctx.to(x.dtype).reshape(bsz, d_model) @ w_o)
    return torch.stack(steps, dim=1)


def dwc_grouped_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if num_heads % num_kv_heads or d_model % num_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    g, r, dh = num_kv_heads, num_heads // num_kv_heads, d_model // num_heads
    wq, wk, wv, wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    k_cache = torch.empty(b, g, n, dh, dtype=torch.float64)
    v_cache = torch.empty(b, g, n, dh, dtype=torch.float64)
    out = torch.empty(b, n, d_model, dtype=torch.float64)
    for t in range(n):
        x_t = x[:, t].double()  # (B, d_model)
        k_cache[:, :, t] = (x_t @ wk).view(b, g, dh)
        v_cache[:, :, t] = (x_t @ wv).view(b, g, dh)
        q_t = (x_t @ wq).view(b, g, r, dh)
        s = torch.einsum("bgrd,bgtd->bgrt", q_t, k_cache[:, :, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, v_cache[:, :, :t + 1]).reshape(b, d_model)
        out[:, t] = ctx @ wo
    return out.to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) instead of "
          "repeating each group n_rep times in a row (0, 0, 1, 1, ...)",
          rkv_tiled_repeat),
    Entry("repeat_kv", "wrong", "interleave_tokens",
          "repeat_interleave along dim=2 repeats the tokens, not the K/V heads (dim=1), so "
          "the result is (B, G, N*n_rep, d)",
          rkv_interleave_tokens),
    Entry("repeat_kv", "wrong", "interleave_without_dim",
          "calls torch.repeat_interleave without `dim`, which flattens the tensor and "
          "returns a 1-D result",
          rkv_interleave_no_dim),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "uses .view after .expand; the expanded tensor is not contiguous, so view raises "
          "(reshape, which copies, is needed)",
          rkv_view_after_expand),
    Entry("repeat_kv", "wrong", "expand_without_reshape",
          "returns the expanded (B, G, n_rep, N, d) tensor, forgetting to reshape it to "
          "(B, G*n_rep, N, d)",
          rkv_expand_no_reshape),
    Entry("repeat_kv", "wrong", "index_divided_by_groups",
          "maps query head h to group h // G instead of h // n_rep, so heads read the wrong "
          "groups (or an index out of range)",
          rkv_index_by_groups),
    Entry("repeat_kv", "right", "index_select", None, rkv_index_select),
    Entry("repeat_kv", "right", "stack_copies", None, rkv_stack_copies),

    Entry("grouped_query_attention", "wrong", "no_divisibility_guard",
          "does not check that num_heads is a multiple of num_kv_heads, so num_heads=4, "
          "num_kv_heads=3 fails later with a RuntimeError from the matmul instead of a "
          "ValueError naming both numbers",
          gqa_no_guard),
    Entry("grouped_query_attention", "wrong", "diagonal_masked",
          "builds the future mask with triu(diagonal=0), which also hides the diagonal: a "
          "query cannot see itself and the first query sees nothing (NaN)",
          gqa_diagonal_masked),
    Entry("grouped_query_attention", "wrong", "causal_is_not_none",
          "tests `if causal is not None:`, which is true for causal=False too, so the causal "
          "mask is always applied",
          gqa_causal_is_not_none),
    Entry("grouped_query_attention", "wrong", "masked_fill_on_allowed",
          "passes the True = may-attend lower-triangular mask straight to masked_fill, which "
          "fills where the mask is True, so it hides the allowed keys and keeps the future",
          gqa_masked_fill_allowed),
    Entry("grouped_query_attention", "wrong", "repeat_before_split",
          "repeat_interleaves the projected K/V features before splitting them into heads, "
          "so each feature is duplicated inside a head instead of each whole K/V head being "
          "shared by n_rep query heads",
          gqa_repeat_before_split),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "merges the heads with ctx.reshape(B, N, d_model) straight from (B, H, N, d_head), "
          "without transposing heads and tokens back first",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None,
          gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no_factor_two",
          "counts only one cache tensor: the factor 2 for keys and values is missing",
          kvb_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "converts the result to GiB (a float) instead of returning the number of bytes as "
          "an int",
          kvb_gib),
    Entry("kv_cache_bytes", "wrong", "batch_left_out",
          "multiplies per-token bytes by seq_len only, leaving batch_size out",
          kvb_batch_left_out),
    Entry("kv_cache_bytes", "wrong", "bytes_hard_coded",
          "hard-codes 2 bytes per element (fp16) instead of using bytes_per_element",
          kvb_fixed_two_bytes),
    Entry("kv_cache_bytes", "wrong", "seq_len_plus_one",
          "reserves seq_len + 1 positions (one for the token being generated) instead of "
          "seq_len",
          kvb_next_token),
    Entry("kv_cache_bytes", "wrong", "numpy_int",
          "multiplies with np.prod, returning a numpy int64 instead of a plain Python int",
          kvb_numpy_prod),
    Entry("kv_cache_bytes", "right", "math_prod", None, kvb_math_prod),
    Entry("kv_cache_bytes", "right", "per_layer_accumulation", None, kvb_per_token_reduce),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "has no real cache: every step projects all tokens 0..t with w_k and w_v again, so "
          "the values are right but the projection work is quadratic in N",
          dwc_reproject_prefix),
    Entry("decode_with_cache", "wrong", "attends_unwritten_slots",
          "preallocates a zero cache of length N and attends over all of it at every step, "
          "instead of only the t+1 slots written so far; the zero keys of future positions "
          "get weight",
          dwc_unwritten_slots),
    Entry("decode_with_cache", "wrong", "top_left_mask_per_step",
          "applies a top-left causal mask (tril of a 1 x (t+1) matrix) at each step, so the "
          "single new query, which sits at the last position, may only see key 0",
          dwc_top_left_mask),
    Entry("decode_with_cache", "wrong", "stack_outputs",
          "joins the (B, 1, d_model) step outputs with torch.stack(dim=1), which adds a new "
          "axis, (B, N, 1, d_model), instead of torch.cat along the token axis",
          dwc_stack_outputs),
    Entry("decode_with_cache", "wrong", "tiled_group_repeat",
          "expands the cached K/V heads with .repeat(1, n_rep, 1, 1), tiling the groups, so "
          "query head h reads group h % G instead of h // n_rep",
          dwc_tiled_groups),
    Entry("decode_with_cache", "wrong", "cache_reset_each_step",
          "creates the cache lists inside the loop, so they are emptied at every step and "
          "each token attends only to itself",
          dwc_cache_reset_in_loop),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, dwc_list_cache_sdpa),
    Entry("decode_with_cache", "right", "preallocated_grouped_float64", None,
          dwc_grouped_float64),
]
