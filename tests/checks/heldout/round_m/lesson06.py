"""Round m catalogue, lesson 06 (GQA and KV cache, torch):
repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_interleave_seq_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_interleave_no_dim(x, n_rep):
    b, g, n, d = x.shape
    return torch.repeat_interleave(x, n_rep).reshape(b, g * n_rep, n, d)


def repeat_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_index_by_groups(x, n_rep):
    b, g, n, d = x.shape
    out = x.new_empty(b, g * n_rep, n, d)
    for h in range(g * n_rep):
        out[:, h] = x[:, h // g]
    return out


def repeat_new_axis_first(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(1).expand(b, n_rep, g, n, d).reshape(b, n_rep * g, n, d)


def repeat_builtin_interleave(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def repeat_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return torch.index_select(x, 1, index)


# ============================================================================ grouped_query_attention
def _heads(t, num):
    b, n, width = t.shape
    return t.reshape(b, n, num, width // num).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_attend(q, k, v, allowed=None, scale=None):
    """Attention in float32 (or float64) for (B, H, Nq, d) tensors; result in q's dtype."""
    work = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.to(work) @ k.to(work).transpose(-1, -2)) * scale
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return (w @ v.to(work)).to(q.dtype)


def _check(x, num_heads, num_kv_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x, num_heads, num_kv_heads)
    n = x.shape[1]
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads)
    v = _heads(x @ w_v, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _unheads(_softmax_attend(q, k, v, allowed)) @ w_o


def gqa_triu_diagonal_zero(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x, num_heads, num_kv_heads)
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = _heads(x @ w_q, num_heads).float()
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1).float()
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1).float()
    if x.dtype == torch.float64:
        q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if causal:
        future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    ctx = torch.softmax(scores, dim=-1) @ v
    return _unheads(ctx.to(x.dtype)) @ w_o


def gqa_scale_from_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x, num_heads, num_kv_heads)
    n = x.shape[1]
    q_all, k_all, v_all = x @ w_q, x @ w_k, x @ w_v
    scale = 1.0 / math.sqrt(k_all.shape[-1])
    n_rep = num_heads // num_kv_heads
    q = _heads(q_all, num_heads)
    k = _heads(k_all, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _heads(v_all, num_kv_heads).repeat_interleave(n_rep, dim=1)
    allowed = torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal else None
    return _unheads(_softmax_attend(q, k, v, allowed, scale=scale)) @ w_o


def gqa_sdpa_scale_misread(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x, num_heads, num_kv_heads)
    d_head = x.shape[-1] // num_heads
    n_rep = num_heads // num_kv_heads
    work = torch.promote_types(x.dtype, torch.float32)
    q = _heads(x @ w_q, num_heads).to(work)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1).to(work)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1).to(work)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=math.sqrt(d_head))
    return _unheads(ctx.to(x.dtype)) @ w_o


def gqa_reshape_heads_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                   causal=False):
    _check(x, num_heads, num_kv_heads)
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, num_heads, n, d_head)
    k = (x @ w_k).reshape(b, num_kv_heads, n, d_head)
    v = (x @ w_v).reshape(b, num_kv_heads, n, d_head)
    n_rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    ctx = _softmax_attend(q, k, v, allowed)
    return ctx.reshape(b, n, d_model) @ w_o


def gqa_no_group_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    n = x.shape[1]
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _unheads(_softmax_attend(q, k, v, allowed)) @ w_o


def gqa_sdpa_right(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    work = torch.promote_types(x.dtype, torch.float32)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads).to(work)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1).to(work)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1).to(work)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # square: N_q == N_k
    return _unheads(ctx.to(x.dtype)) @ w_o


def gqa_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(b, n, g, r, dh)  # head h = group h // r, member h % r
    k = (x64 @ w_k.double()).reshape(b, n, g, dh)
    v = (x64 @ w_v.double()).reshape(b, n, g, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_hardcoded_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16: 2 bytes each


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 1024 ** 3


def kv_bytes_int32_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    factors = [2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element]
    return int(np.prod(factors, dtype=np.int32))


def kv_bytes_numpy_scalar(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_caches_queries(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    per_token = 3 * num_kv_heads * head_dim * bytes_per_element  # q, k and v
    return per_token * num_layers * seq_len * batch_size


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return int(per_token) * int(seq_len) * int(batch_size)


# ============================================================================ decode_with_cache
def _decode_check(x, num_heads, num_kv_heads):
    _check(x, num_heads, num_kv_heads)
    b, n, d_model = x.shape
    return b, n, d_model // num_heads


def decode_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh = _decode_check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    outs = []
    for t in range(n):
        q_t = _heads(x[:, t:t + 1] @ w_q, num_heads)
        prefix = x[:, :t + 1]
        k = _heads(prefix @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
        v = _heads(prefix @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
        outs.append(_unheads(_softmax_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh = _decode_check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    k_cache = x.new_zeros(b, num_kv_heads, n, dh)
    v_cache = x.new_zeros(b, num_kv_heads, n, dh)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(x_t @ w_v, num_kv_heads)
        k = k_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        v = v_cache[:, :, :t].repeat_interleave(n_rep, dim=1)
        w = torch.softmax((q_t @ k.transpose(-1, -2)).float() / math.sqrt(dh), dim=-1)
        outs.append(_unheads((w @ v.float()).to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_ratio_swapped(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh = _decode_check(x, num_heads, num_kv_heads)
    n_rep = num_kv_heads // num_heads
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        keys.append(_heads(x_t @ w_k, num_kv_heads))
        values.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        outs.append(_unheads(_softmax_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_last_token_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh = _decode_check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    out = None
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        k_t, v_t = _heads(x_t @ w_k, num_kv_heads), _heads(x_t @ w_v, num_kv_heads)
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=2)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=2)
        ctx = _softmax_attend(q_t, k_cache.repeat_interleave(n_rep, dim=1),
                              v_cache.repeat_interleave(n_rep, dim=1))
        out = _unheads(ctx) @ w_o
    return out


def decode_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh = _decode_check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    work = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads).to(work)
        keys.append(_heads(x_t @ w_k, num_kv_heads).to(work))
        values.append(_heads(x_t @ w_v, num_kv_heads).to(work))
        k = torch.cat(keys, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(n_rep, dim=1)
        ctx = F.scaled_dot_product_attention(q_t, k, v, is_causal=True)
        outs.append(_unheads(ctx.to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_default_dtype(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh = _decode_check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    k_cache = torch.zeros(b, num_kv_heads, n, dh)
    v_cache = torch.zeros(b, num_kv_heads, n, dh)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(x_t @ w_v, num_kv_heads)
        k = k_cache[:, :, :t + 1].repeat_interleave(n_rep, dim=1)
        v = v_cache[:, :, :t + 1].repeat_interleave(n_rep, dim=1)
        s = q_t @ k.transpose(-1, -2) / math.sqrt(dh)
        outs.append(_unheads(torch.softmax(s, dim=-1) @ v) @ w_o)
    return torch.cat(outs, dim=1)


def decode_lists_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    work = torch.promote_types(x.dtype, torch.float32)
    ks, vs, outs = [], [], []
    for t in range(n):
        tok = x[:, t]  # (B, d_model)
        q = (tok @ w_q).view(b, num_heads, 1, dh).to(work)
        ks.append((tok @ w_k).view(b, num_kv_heads, 1, dh).to(work))
        vs.append((tok @ w_v).view(b, num_kv_heads, 1, dh).to(work))
        k_all = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v_all = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q, k_all, v_all)  # every cached key is allowed
        outs.append(ctx.reshape(b, 1, d_model).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


def decode_grouped_float64_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    k_cache = torch.zeros(b, n, g, dh, dtype=torch.float64)
    v_cache = torch.zeros(b, n, g, dh, dtype=torch.float64)
    result = torch.empty(b, n, d_model, dtype=torch.float64)
    w_o64 = w_o.double()
    for t in range(n):
        x_t = x[:, t, :]
        q = (x_t @ w_q).double().reshape(b, g, r, dh)
        k_cache[:, t] = (x_t @ w_k).double().reshape(b, g, dh)
        v_cache[:, t] = (x_t @ w_v).double().reshape(b, g, dh)
        s = torch.einsum("bgrd,bjgd->bgrj", q, k_cache[:, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrj,bjgd->bgrd", p, v_cache[:, :t + 1]).reshape(b, d_model)
        result[:, t] = ctx @ w_o64
    return result.to(x.dtype)


ENTRIES = [
    # repeat_kv --------------------------------------------------------------------
    Entry("repeat_kv", "wrong", "tensor_repeat_tiles",
          "Tensor.repeat tiles the whole group axis (g0, g1, g0, g1, ...) instead of repeating "
          "each group in place, so query head h does not read group h // n_rep.",
          repeat_tiled),
    Entry("repeat_kv", "wrong", "interleave_along_tokens",
          "repeat_interleave is applied on dim=2, so it repeats the tokens (N axis) instead of "
          "the K/V heads on dim=1.",
          repeat_interleave_seq_dim),
    Entry("repeat_kv", "wrong", "interleave_without_dim",
          "torch.repeat_interleave without dim flattens the tensor and repeats every single "
          "element, so reshaping the result back to (B, G*n_rep, N, d) scrambles the values.",
          repeat_interleave_no_dim),
    Entry("repeat_kv", "wrong", "view_on_expanded_tensor",
          "It calls .view on the expanded tensor, whose repeated axis has stride 0, so merging "
          "G and n_rep into one axis raises a RuntimeError (view needs compatible strides; "
          "reshape would copy).",
          repeat_view_after_expand),
    Entry("repeat_kv", "wrong", "index_divides_by_groups",
          "Head h is filled from group h // G (the number of groups) instead of h // n_rep, so "
          "heads get the wrong groups, and with a single group the index runs out of range.",
          repeat_index_by_groups),
    Entry("repeat_kv", "wrong", "new_axis_before_groups",
          "The copy axis is inserted before the group axis (unsqueeze(1)), so after the reshape "
          "the heads come out tiled (g0, g1, ..., g0, g1, ...) instead of each group repeated "
          "n_rep times in a row.",
          repeat_new_axis_first),
    Entry("repeat_kv", "right", "repeat_interleave_dim1", None, repeat_builtin_interleave),
    Entry("repeat_kv", "right", "index_select_floor_div", None, repeat_index_select),
    # grouped_query_attention ------------------------------------------------------
    Entry("grouped_query_attention", "wrong", "repeat_tiles_groups",
          "It expands the K/V heads with Tensor.repeat, which tiles the groups, so with "
          "1 < num_kv_heads < num_heads query head h reads the wrong group.",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "triu_blocks_diagonal",
          "The blocked set is torch.triu(..., diagonal=0), which includes the diagonal, so "
          "with causal=True no query may attend to itself and the first query's row is all "
          "-inf, giving NaN.",
          gqa_triu_diagonal_zero),
    Entry("grouped_query_attention", "wrong", "scale_from_kv_width",
          "The scale is taken from the last axis of x @ w_k before splitting, "
          "1/sqrt(num_kv_heads * d_head), instead of 1/sqrt(d_head) (only right for MQA).",
          gqa_scale_from_kv_width),
    Entry("grouped_query_attention", "wrong", "sdpa_scale_is_multiplier",
          "It passes scale=sqrt(d_head) to F.scaled_dot_product_attention, but `scale` is the "
          "factor the scores are multiplied by, so the scores are multiplied by sqrt(d_head) "
          "instead of divided.",
          gqa_sdpa_scale_misread),
    Entry("grouped_query_attention", "wrong", "heads_by_reshape_only",
          "It splits heads with reshape(B, heads, N, d_head) without the transpose (and merges "
          "with a bare reshape), so each 'head' mixes features of different tokens.",
          gqa_reshape_heads_no_transpose),
    Entry("grouped_query_attention", "wrong", "no_group_divisibility_check",
          "It never checks num_heads % num_kv_heads, so num_heads=4, num_kv_heads=3 fails "
          "later with a RuntimeError from the matmul instead of a ValueError.",
          gqa_no_group_guard),
    Entry("grouped_query_attention", "right", "sdpa_is_causal_square", None, gqa_sdpa_right),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None,
          gqa_grouped_einsum_float64),
    # kv_cache_bytes ---------------------------------------------------------------
    Entry("kv_cache_bytes", "wrong", "forgets_k_and_v",
          "It leaves out the factor 2, counting only one of the two caches (keys or values).",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "hardcoded_two_bytes",
          "It multiplies by a hard-coded 2 bytes (fp16) instead of bytes_per_element, so 1- and "
          "4-byte caches are counted wrongly.",
          kv_bytes_hardcoded_fp16),
    Entry("kv_cache_bytes", "wrong", "returns_gibibytes",
          "It divides by 1024**3 and returns GiB as a float instead of the number of bytes as "
          "an int.",
          kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "int32_product_overflows",
          "It multiplies with np.prod(..., dtype=np.int32), which silently wraps around for "
          "caches of 2 GiB or more (modulo 2**32), so large caches come out wrong.",
          kv_bytes_int32_prod),
    Entry("kv_cache_bytes", "wrong", "numpy_integer_result",
          "It returns the np.prod result directly, a numpy int64, instead of a plain Python "
          "int.",
          kv_bytes_numpy_scalar),
    Entry("kv_cache_bytes", "wrong", "caches_queries_too",
          "It counts three tensors per token (queries, keys and values) although only keys "
          "and values are cached, so the size is 1.5x too large.",
          kv_bytes_caches_queries),
    Entry("kv_cache_bytes", "right", "loop_over_layers_and_tensors", None, kv_bytes_layer_loop),
    Entry("kv_cache_bytes", "right", "bytes_per_token_times_tokens", None, kv_bytes_per_token),
    # decode_with_cache --------------------------------------------------------------
    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "At every step it projects the whole prefix x[:, :t+1] with w_k and w_v again "
          "instead of caching, so the values are right but the projection work grows "
          "quadratically in N.",
          decode_reproject_prefix),
    Entry("decode_with_cache", "wrong", "cache_slice_excludes_new_token",
          "It writes the new key and value at slot t but attends over cache[:, :, :t], so the "
          "new token never sees itself and the first step attends to nothing (a zero row).",
          decode_cache_excludes_current),
    Entry("decode_with_cache", "wrong", "repeat_ratio_swapped",
          "n_rep is computed as num_kv_heads // num_heads (0 for GQA and MQA), so the K/V "
          "heads are repeated zero times and the attention product raises a RuntimeError "
          "(only plain MHA works).",
          decode_ratio_swapped),
    Entry("decode_with_cache", "wrong", "returns_last_step_only",
          "Like a generation loop it keeps only the last step's output, returning "
          "(B, 1, d_model) instead of the outputs of all N positions.",
          decode_last_token_only),
    Entry("decode_with_cache", "wrong", "sdpa_is_causal_top_left",
          "It passes is_causal=True to SDPA for the single new query; SDPA's causal mask is "
          "aligned top-left, so that query may attend only to key 0 instead of the whole "
          "cache.",
          decode_sdpa_is_causal),
    Entry("decode_with_cache", "wrong", "cache_in_default_dtype",
          "The caches are created with torch.zeros' default dtype float32, so for float64, "
          "float16 or bfloat16 inputs the query-key product mixes dtypes and raises a "
          "RuntimeError (only float32 works).",
          decode_cache_default_dtype),
    Entry("decode_with_cache", "right", "token_lists_sdpa", None, decode_lists_sdpa),
    Entry("decode_with_cache", "right", "grouped_einsum_float64_cache", None,
          decode_grouped_float64_cache),
]
