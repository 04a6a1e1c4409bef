"""Round l, lesson 06 (GQA and the KV cache, torch)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

# ============================================================================ repeat_kv


def repeat_kv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_interleave_flat(x, n_rep):
    if n_rep == 1:
        return x
    return torch.repeat_interleave(x, n_rep)


def repeat_kv_token_dim(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=2)


def repeat_kv_skip_single_group(x, n_rep):
    b, g, n, d = x.shape
    if g == 1 or n_rep == 1:
        return x
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)


def repeat_kv_axis_last(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(-1).expand(b, g, n, d, n_rep).reshape(b, g * n_rep, n, d)


def repeat_kv_divide_by_groups(x, n_rep):
    groups = x.shape[1]
    return torch.stack([x[:, h // groups] for h in range(groups * n_rep)], dim=1)


def repeat_kv_interleave_dim1(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


# ============================================================================ grouped_query_attention


def _heads(t, count):
    b, n, width = t.shape
    return t.view(b, n, count, width // count).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _check_heads(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def _softmax_attend(q, k, v, allowed=None):
    """float32-or-better attention of (B, H, Nq, d) against (B, H, Nk, d)."""
    ct = torch.promote_types(q.dtype, torch.float32)
    q, k, v = q.to(ct), k.to(ct), v.to(ct)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return w @ v


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n = x.shape[1]
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return (_unheads(_softmax_attend(q, k, v, allowed)).to(x.dtype)) @ w_o


def gqa_triu_as_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n = x.shape[1]
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1) if causal else None
    return _unheads(_softmax_attend(q, k, v, mask)).to(x.dtype) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _unheads(ctx) @ w_o


def gqa_no_self(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n = x.shape[1]
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    allowed = torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1) if causal else None
    return _unheads(_softmax_attend(q, k, v, allowed)).to(x.dtype) @ w_o


def gqa_float_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n = x.shape[1]
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads)
    v = _heads(x @ w_v, num_kv_heads)
    mask = torch.ones(n, n, dtype=x.dtype).tril() if causal else None
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return _unheads(ctx) @ w_o


def gqa_view_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).view(b, num_heads, n, d_head)
    k = (x @ w_k).view(b, num_kv_heads, n, d_head).repeat_interleave(rep, dim=1)
    v = (x @ w_v).view(b, num_kv_heads, n, d_head).repeat_interleave(rep, dim=1)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _unheads(_softmax_attend(q, k, v, allowed)).to(x.dtype) @ w_o


def gqa_sdpa_enable_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads)
    v = _heads(x @ w_v, num_kv_heads)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return _unheads(ctx) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    for name, value, by_name, by in (("d_model", d_model, "num_heads", num_heads),
                                     ("num_heads", num_heads, "num_kv_heads", num_kv_heads)):
        if value % by != 0:
            raise ValueError(f"{name}={value} is not divisible by {by_name}={by}")
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    xd, wq, wk, wv, wo = (t.to(torch.float64) for t in (x, w_q, w_k, w_v, w_o))
    q = (xd @ wq).view(b, n, g, r, dh)
    k = (xd @ wk).view(b, n, g, dh)
    v = (xd @ wv).view(b, n, g, dh)
    s = torch.einsum("bqgrd,bkgd->bgrqk", q, k) / math.sqrt(dh)
    if causal:
        future = torch.arange(n)[None, :] > torch.arange(n)[:, None]
        s = s.masked_fill(future, float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrqk,bkgd->bqgrd", w, v).reshape(b, n, d_model)
    return (ctx @ wo).to(x.dtype)


# ============================================================================ kv_cache_bytes


def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    bits = 8 * bytes_per_element
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bits


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_extra_slot(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    slots = seq_len + 1
    return 2 * num_layers * num_kv_heads * head_dim * slots * batch_size * bytes_per_element


def kv_bytes_kib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total // 1024


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    elements = np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size])
    return elements * bytes_per_element


def kv_bytes_tensor_shapes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    shape = (batch_size, num_kv_heads, seq_len, head_dim)
    per_tensor = math.prod(shape) * bytes_per_element
    return sum(per_tensor for _layer in range(num_layers) for _kv in ("k", "v"))


def kv_bytes_meta_tensor(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    cache = torch.empty(num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim,
                        dtype=torch.uint8, device="meta")
    return int(cache.numel()) * int(bytes_per_element)


# ============================================================================ decode_with_cache


def _prepare(x, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    return b, n, d_model, d_model // num_heads, num_heads // num_kv_heads


def _step_heads(t, count):
    """(B, 1, count * d) -> (B, count, 1, d)."""
    b, one, width = t.shape
    return t.view(b, one, count, width // count).transpose(1, 2)


def decode_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    outs = []
    for t in range(n):
        prefix = x[:, : t + 1]
        q = _step_heads(x[:, t : t + 1] @ w_q, num_heads)
        k = _heads(prefix @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
        v = _heads(prefix @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
        ctx = _softmax_attend(q, k, v).to(x.dtype)
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def decode_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    k_cache = x.new_zeros(b, num_kv_heads, n, dh)
    v_cache = x.new_zeros(b, num_kv_heads, n, dh)
    outs = []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q = _step_heads(x_t @ w_q, num_heads)
        k_cache[:, :, t : t + 1] = _step_heads(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t : t + 1] = _step_heads(x_t @ w_v, num_kv_heads)
        k = k_cache[:, :, :t].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t].repeat_interleave(rep, dim=1)
        ctx = _softmax_attend(q, k, v).to(x.dtype)
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def decode_whole_buffer(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    outs = []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q = _step_heads(x_t @ w_q, num_heads)
        k_cache[:, :, t] = (x_t[:, 0] @ w_k).view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t[:, 0] @ w_v).view(b, num_kv_heads, dh)
        ctx = _softmax_attend(q, k_cache.repeat_interleave(rep, dim=1),
                              v_cache.repeat_interleave(rep, dim=1)).to(x.dtype)
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def decode_key_into_value_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q_t = _step_heads(x_t @ w_q, num_heads)
        k_t = _step_heads(x_t @ w_k, num_kv_heads)
        v_t = _step_heads(x_t @ w_v, num_kv_heads)
        keys.append(k_t)
        values.append(k_t)
        k = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_softmax_attend(q_t, k, v).to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_last_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    k_cache = v_cache = None
    out = None
    for t in range(n):
        x_t = x[:, t : t + 1]
        q = _step_heads(x_t @ w_q, num_heads)
        k_t = _step_heads(x_t @ w_k, num_kv_heads)
        v_t = _step_heads(x_t @ w_v, num_kv_heads)
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=2)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=2)
        ctx = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
        out = _unheads(ctx) @ w_o
    return out


def decode_cat_batch_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q = _step_heads(x_t @ w_q, num_heads)
        keys.append(_step_heads(x_t @ w_k, num_kv_heads))
        values.append(_step_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_softmax_attend(q, k, v).to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=0)


def decode_grouped_einsum_lists(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    g = num_kv_heads
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t]
        q = (x_t @ w_q).view(b, g, rep, dh).to(torch.float64)
        keys.append((x_t @ w_k).view(b, g, dh).to(torch.float64))
        values.append((x_t @ w_v).view(b, g, dh).to(torch.float64))
        k = torch.stack(keys, dim=2)
        v = torch.stack(values, dim=2)
        s = torch.einsum("bgrd,bgtd->bgrt", q, k) / math.sqrt(dh)
        w = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", w, v).reshape(b, 1, d_model).to(x.dtype)
        outs.append(ctx @ w_o)
    return torch.cat(outs, dim=1)


def decode_sdpa_preallocated(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, dh, rep = _prepare(x, num_heads, num_kv_heads)
    k_cache = torch.empty(b, num_kv_heads, n, dh, dtype=x.dtype, device=x.device)
    v_cache = torch.empty_like(k_cache)
    out = torch.empty_like(x)
    for t in range(n):
        x_t = x[:, t : t + 1]
        k_cache[:, :, t : t + 1] = _step_heads(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t : t + 1] = _step_heads(x_t @ w_v, num_kv_heads)
        q = _step_heads(x_t @ w_q, num_heads)
        ctx = F.scaled_dot_product_attention(q, k_cache[:, :, : t + 1], v_cache[:, :, : t + 1],
                                             enable_gqa=True)
        out[:, t : t + 1] = _unheads(ctx) @ w_o
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tile",
          "Uses x.repeat(1, n_rep, 1, 1), which tiles the groups (g0, g1, g0, g1) so head h "
          "reads group h % G instead of h // n_rep.",
          repeat_kv_tile),
    Entry("repeat_kv", "wrong", "interleave_flat",
          "Calls torch.repeat_interleave without dim, which flattens the tensor and returns a "
          "1-D result.",
          repeat_kv_interleave_flat),
    Entry("repeat_kv", "wrong", "token_dim",
          "Repeats along dim 2 (the tokens) instead of dim 1 (the K/V heads).",
          repeat_kv_token_dim),
    Entry("repeat_kv", "wrong", "skip_single_group",
          "Skips the repeat when there is a single group, returning (B, 1, N, d) instead of "
          "(B, n_rep, N, d).",
          repeat_kv_skip_single_group),
    Entry("repeat_kv", "wrong", "axis_last",
          "Adds the repeat axis after d instead of after the group axis, so the reshape "
          "interleaves copies of single features rather than copying whole heads.",
          repeat_kv_axis_last),
    Entry("repeat_kv", "wrong", "divide_by_groups",
          "Maps query head h to group h // G (the number of groups) instead of h // n_rep.",
          repeat_kv_divide_by_groups),
    Entry("repeat_kv", "right", "interleave_dim1", None, repeat_kv_interleave_dim1),
    Entry("repeat_kv", "right", "index_select", None, repeat_kv_index_select),

    Entry("grouped_query_attention", "wrong", "tiled_groups",
          "Expands K and V with .repeat along the head axis, which tiles the groups so query "
          "head h reads group h % num_kv_heads instead of h // n_rep.",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "triu_as_allowed",
          "Uses triu(diagonal=1), the positions to block, as a True = may-attend mask, so "
          "each query sees only future keys (the last row sees none).",
          gqa_triu_as_allowed),
    Entry("grouped_query_attention", "wrong", "no_group_check",
          "Never checks that num_heads is divisible by num_kv_heads, so a bad head count "
          "fails later with a RuntimeError on mismatched shapes instead of a ValueError.",
          gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "no_self",
          "Builds the causal mask with tril(diagonal=-1), so a token may not attend to itself "
          "(and the first token attends to nothing).",
          gqa_no_self),
    Entry("grouped_query_attention", "wrong", "float_mask",
          "Passes a float 0/1 tril matrix as attn_mask, which SDPA adds to the scores as a "
          "bias instead of blocking the future keys.",
          gqa_float_mask),
    Entry("grouped_query_attention", "wrong", "view_no_transpose",
          "Views the projections straight as (B, H, N, d_head) without the transpose, so each "
          "'head' gets a block of consecutive tokens' features.",
          gqa_view_no_transpose),
    Entry("grouped_query_attention", "right", "sdpa_enable_gqa", None, gqa_sdpa_enable_gqa),
    Entry("grouped_query_attention", "right", "grouped_einsum", None, gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "no_factor_two",
          "Counts only one of the two caches: the keys and the values are both stored, which "
          "doubles the bytes.",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "bits",
          "Multiplies by bits per element (8 * bytes_per_element), giving the size in bits "
          "instead of bytes.",
          kv_bytes_bits),
    Entry("kv_cache_bytes", "wrong", "no_batch",
          "Ignores batch_size: every sequence in the batch keeps its own cache.",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "extra_slot",
          "Counts seq_len + 1 cached positions instead of seq_len.",
          kv_bytes_extra_slot),
    Entry("kv_cache_bytes", "wrong", "kib",
          "Divides by 1024 and returns KiB instead of bytes.",
          kv_bytes_kib),
    Entry("kv_cache_bytes", "wrong", "np_prod",
          "Multiplies with np.prod, which returns a numpy integer rather than the plain int "
          "the contract asks for.",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "right", "tensor_shapes", None, kv_bytes_tensor_shapes),
    Entry("kv_cache_bytes", "right", "meta_tensor", None, kv_bytes_meta_tensor),

    Entry("decode_with_cache", "wrong", "reproject_prefix",
          "Projects the keys and values of the whole prefix again at every step instead of "
          "only the new token, so projection work grows quadratically (the values are right).",
          decode_reproject_prefix),
    Entry("decode_with_cache", "wrong", "excludes_current",
          "Attends over the cache up to t (exclusive) after writing step t, so a token never "
          "sees its own key and the first token sees nothing.",
          decode_excludes_current),
    Entry("decode_with_cache", "wrong", "whole_buffer",
          "Attends over the whole preallocated cache at every step, so the empty zero slots of "
          "future positions take part in the softmax.",
          decode_whole_buffer),
    Entry("decode_with_cache", "wrong", "key_into_value_cache",
          "Appends the new key to the value cache too (a copy-paste slip), so the values "
          "attended over are the keys.",
          decode_key_into_value_cache),
    Entry("decode_with_cache", "wrong", "last_only",
          "Returns only the last step's output (B, 1, d_model) instead of the outputs of all "
          "N steps.",
          decode_last_only),
    Entry("decode_with_cache", "wrong", "cat_batch_dim",
          "Concatenates the per-step outputs along dim 0 (the batch) instead of dim 1 (the "
          "tokens).",
          decode_cat_batch_dim),
    Entry("decode_with_cache", "right", "grouped_einsum_lists", None, decode_grouped_einsum_lists),
    Entry("decode_with_cache", "right", "sdpa_preallocated", None, decode_sdpa_preallocated),
]
