"""Held-out catalogue, lesson 06 (GQA, MQA and the KV cache, torch):
repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
# ---- wrong ----------------------------------------------------------------------------------
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_token_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_numpy(x, n_rep):
    return np.repeat(x.detach().cpu().numpy(), n_rep, axis=1)


def repeat_kv_plain_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def repeat_kv_n_rep_as_total(x, n_rep):
    groups = x.shape[1]
    return x.repeat_interleave(n_rep // groups, dim=1)


def repeat_kv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


# ---- right ----------------------------------------------------------------------------------
def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


def repeat_kv_cat_per_group(x, n_rep):
    blocks = []
    for g in range(x.shape[1]):
        blocks.extend([x[:, g:g + 1]] * n_rep)
    return torch.cat(blocks, dim=1)


# ============================================================================ grouped_query_attention
def _heads(t, count):
    b, n, width = t.shape
    return t.reshape(b, n, count, width // count).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _check(num_heads, num_kv_heads, d_model):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")


def _attend(q, k, v, allowed=None):
    """float32 softmax attention; allowed (N_q, N_k) bool or None."""
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


# ---- wrong ----------------------------------------------------------------------------------
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _unheads(_attend(q, k, v, mask)) @ w_o


def gqa_values_from_keys(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads)
    v = _heads(x @ w_v, num_kv_heads)
    k_full = torch.repeat_interleave(k, rep, dim=1)
    v_full = torch.repeat_interleave(k, rep, dim=1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _unheads(_attend(q, k_full, v_full, mask)) @ w_o


def gqa_diagonal_excluded(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1) if causal else None
    return _unheads(_attend(q, k, v, mask)) @ w_o


def gqa_view_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads, x.shape[-1])
    B, N, D = x.shape
    dh = D // num_heads
    rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (x @ w_k).reshape(B, num_kv_heads, N, dh).repeat_interleave(rep, dim=1)
    v = (x @ w_v).reshape(B, num_kv_heads, N, dh).repeat_interleave(rep, dim=1)
    mask = torch.ones(N, N, dtype=torch.bool).tril() if causal else None
    return _unheads(_attend(q, k, v, mask)) @ w_o


def gqa_fill_where_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads).float()
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1).float()
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1).float()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        causal_mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        s = s.masked_fill(causal_mask, float("-inf"))
    ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
    return _unheads(ctx) @ w_o


def gqa_no_multiple_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _unheads(_attend(q, k, v, mask)) @ w_o


# ---- right ----------------------------------------------------------------------------------
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    q = (x @ w_q).view(batch, n, num_heads, dh).permute(0, 2, 1, 3).float()
    k = (x @ w_k).view(batch, n, num_kv_heads, dh).permute(0, 2, 1, 3).float()
    v = (x @ w_v).view(batch, n, num_kv_heads, dh).permute(0, 2, 1, 3).float()
    group = num_heads // num_kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    ctx = ctx.to(x.dtype).permute(0, 2, 1, 3).reshape(batch, n, d_model)
    return ctx @ w_o


def gqa_per_head_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    share = num_heads // num_kv_heads
    x64, wq, wk, wv, wo = (t.double() for t in (x, w_q, w_k, w_v, w_o))
    n = x.shape[1]
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    result = torch.zeros(x.shape, dtype=torch.float64)
    for h in range(num_heads):
        g = h // share
        qh = torch.einsum("bnm,md->bnd", x64, wq[:, h * dh:(h + 1) * dh])
        kh = torch.einsum("bnm,md->bnd", x64, wk[:, g * dh:(g + 1) * dh])
        vh = torch.einsum("bnm,md->bnd", x64, wv[:, g * dh:(g + 1) * dh])
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(future, -math.inf)
        p = torch.softmax(s, dim=-1)
        result += torch.einsum("bij,bjd->bid", p, vh) @ wo[h * dh:(h + 1) * dh, :]
    return result.to(x.dtype)


# ============================================================================ kv_cache_bytes
# ---- wrong ----------------------------------------------------------------------------------
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_in_mib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total // 2 ** 20


def kv_bytes_fp16_hardcoded(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2  # fp16


def kv_bytes_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return 2 * np.prod([num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                        bytes_per_element])


def kv_bytes_power_typo(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size ** bytes_per_element


# ---- right ----------------------------------------------------------------------------------
def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    factors = (2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    return int(math.prod(int(f) for f in factors))


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            shape = (batch_size, num_kv_heads, seq_len, head_dim)
            total += math.prod(shape) * bytes_per_element
    return total


# ============================================================================ decode_with_cache
def _split_heads(t, count):
    b, n, width = t.shape
    return t.view(b, n, count, width // count).transpose(1, 2)


# ---- wrong ----------------------------------------------------------------------------------
def decode_projects_everything(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    Q = _split_heads(x @ w_q, num_heads)
    K = _split_heads(x @ w_k, num_kv_heads)
    V = _split_heads(x @ w_v, num_kv_heads)
    outs = []
    for t in range(x.shape[1]):
        k_seen = K[:, :, :t + 1].repeat_interleave(rep, dim=1)
        v_seen = V[:, :, :t + 1].repeat_interleave(rep, dim=1)
        ctx = _attend(Q[:, :, t:t + 1], k_seen, v_seen)
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split_heads(xt @ w_q, num_heads)
        past_k = torch.cat(keys, dim=2) if keys else q.new_zeros(q.shape[0], num_kv_heads, 0,
                                                                  q.shape[-1])
        past_v = torch.cat(values, dim=2) if values else past_k
        ctx = _attend(q, past_k.repeat_interleave(rep, dim=1),
                      past_v.repeat_interleave(rep, dim=1))
        keys.append(_split_heads(xt @ w_k, num_kv_heads))  # appended after attending
        values.append(_split_heads(xt @ w_v, num_kv_heads))
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def decode_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split_heads(xt @ w_q, num_heads)
        keys.append(_split_heads(xt @ w_k, num_kv_heads))
        values.append(_split_heads(xt @ w_v, num_kv_heads))
        k_all = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        v_all = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        step_mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal, as in training
        outs.append(_unheads(_attend(q, k_all, v_all, step_mask)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_scale_by_cache_length(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split_heads(xt @ w_q, num_heads).float()
        keys.append(_split_heads(xt @ w_k, num_kv_heads))
        values.append(_split_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1).float()
        v = torch.cat(values, dim=2).repeat_interleave(rep, dim=1).float()
        s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])
        ctx = (torch.softmax(s, dim=-1) @ v).to(x.dtype)
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cat_batch_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads, x.shape[-1])
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split_heads(xt @ w_q, num_heads)
        keys.append(_split_heads(xt @ w_k, num_kv_heads))
        values.append(_split_heads(xt @ w_v, num_kv_heads))
        k_all = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        v_all = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_attend(q, k_all, v_all)) @ w_o)
    return torch.cat(outs)


def decode_whole_preallocated_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(num_heads, num_kv_heads, x.shape[-1])
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _split_heads(xt @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _split_heads(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _split_heads(xt @ w_v, num_kv_heads)
        ctx = _attend(q, k_cache.repeat_interleave(rep, dim=1),
                      v_cache.repeat_interleave(rep, dim=1))
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


# ---- right ----------------------------------------------------------------------------------
def decode_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    group = num_heads // num_kv_heads
    cache_k, cache_v, steps = None, None, []
    for t in range(n):
        token = x[:, t, :]  # (B, d_model)
        q = (token @ w_q).view(batch, num_heads, 1, dh).float()
        k_new = (token @ w_k).view(batch, num_kv_heads, 1, dh).float()
        v_new = (token @ w_v).view(batch, num_kv_heads, 1, dh).float()
        cache_k = k_new if cache_k is None else torch.cat([cache_k, k_new], dim=2)
        cache_v = v_new if cache_v is None else torch.cat([cache_v, v_new], dim=2)
        ctx = F.scaled_dot_product_attention(q, cache_k.repeat_interleave(group, dim=1),
                                             cache_v.repeat_interleave(group, dim=1))
        steps.append(ctx.to(x.dtype).reshape(batch, d_model) @ w_o)
    return torch.stack(steps, dim=1)


def decode_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    share = num_heads // num_kv_heads
    k_cache = torch.zeros(batch, num_kv_heads, n, dh, dtype=torch.float64)
    v_cache = torch.zeros_like(k_cache)
    out = torch.zeros(batch, n, d_model, dtype=torch.float64)
    wo = w_o.double()
    for t in range(n):
        xt = x[:, t].double()  # (B, d_model)
        q = (xt @ w_q.double()).view(batch, num_kv_heads, share, dh)
        k_cache[:, :, t] = (xt @ w_k.double()).view(batch, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v.double()).view(batch, num_kv_heads, dh)
        s = torch.einsum("bgrd,bgtd->bgrt", q, k_cache[:, :, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, v_cache[:, :, :t + 1])
        out[:, t] = ctx.reshape(batch, d_model) @ wo
    return out.to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, 2, 0, 1, 2...), so query head h "
          "reads group h % G instead of h // n_rep.",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "repeated_along_tokens",
          "repeat_interleave runs along dim=2, the token axis, so it copies every key n_rep "
          "times instead of copying the heads.",
          repeat_kv_token_axis),
    Entry("repeat_kv", "wrong", "returns_numpy",
          "It goes through np.repeat and returns a numpy array instead of a torch.Tensor "
          "(and .numpy() fails on bfloat16).",
          repeat_kv_numpy),
    Entry("repeat_kv", "wrong", "expand_non_singleton",
          "x.expand(B, G*n_rep, N, d) can only stretch axes of size 1, so it raises for G > 1; "
          "a new size-1 axis must be added first.",
          repeat_kv_plain_expand),
    Entry("repeat_kv", "wrong", "n_rep_read_as_total_heads",
          "n_rep is read as the total number of query heads and divided by G, so each group is "
          "repeated n_rep // G times instead of n_rep times.",
          repeat_kv_n_rep_as_total),
    Entry("repeat_kv", "wrong", "view_after_expand",
          ".view cannot merge the expanded (stride-0) axis with the group axis, so it raises a "
          "RuntimeError for n_rep > 1; .reshape (which copies) is needed.",
          repeat_kv_view_after_expand),
    Entry("repeat_kv", "right", "index_select_h_div_n_rep", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "cat_of_group_copies", None, repeat_kv_cat_per_group),
    Entry("grouped_query_attention", "wrong", "tiled_kv_heads",
          "K and V are repeated with .repeat (tiled), so query head h uses group h % G "
          "instead of h // (H/G).",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "values_repeated_from_keys",
          "The repeated values are built from k instead of v (copy-paste), so the heads "
          "average keys.",
          gqa_values_from_keys),
    Entry("grouped_query_attention", "wrong", "causal_diagonal_excluded",
          "The causal mask is tril(diagonal=-1), which hides each query's own key: the first "
          "query has no key at all and its row becomes NaN.",
          gqa_diagonal_excluded),
    Entry("grouped_query_attention", "wrong", "reshape_heads_without_transpose",
          "The projections are reshaped straight to (B, heads, N, d_head) instead of "
          "(B, N, heads, d_head) followed by transpose(1, 2), mixing tokens and heads.",
          gqa_view_without_transpose),
    Entry("grouped_query_attention", "wrong", "masked_fill_on_allowed",
          "masked_fill is given the tril mask itself, so it blocks the allowed keys (past and "
          "self) and keeps the future ones (True = may attend read as True = masked); the last "
          "query has no key left and gives NaN.",
          gqa_fill_where_allowed),
    Entry("grouped_query_attention", "wrong", "no_multiple_check",
          "There is no check that num_heads is a multiple of num_kv_heads, so a bad pair fails "
          "later with a RuntimeError from the matmul instead of the required ValueError.",
          gqa_no_multiple_check),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per_head_weight_slices_float64", None,
          gqa_per_head_float64),
    Entry("kv_cache_bytes", "wrong", "keys_only",
          "The factor 2 is missing: it counts the key cache only, not keys and values.",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "mebibytes",
          "It converts the result to MiB (// 2**20) although the contract asks for bytes.",
          kv_bytes_in_mib),
    Entry("kv_cache_bytes", "wrong", "fp16_hardcoded",
          "bytes_per_element is ignored and 2 bytes (fp16) is hard-coded.",
          kv_bytes_fp16_hardcoded),
    Entry("kv_cache_bytes", "wrong", "batch_size_missing",
          "batch_size is left out of the product, so the cache of only one sequence is "
          "counted.",
          kv_bytes_no_batch),
    Entry("kv_cache_bytes", "wrong", "numpy_integer",
          "np.prod returns a numpy integer, so the result is np.int64 instead of a plain Python "
          "int.",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "power_for_product",
          "`batch_size ** bytes_per_element` is typed where `batch_size * bytes_per_element` "
          "belongs, so the count uses batch_size to the power bytes (for one sequence the "
          "bytes factor disappears).",
          kv_bytes_power_typo),
    Entry("kv_cache_bytes", "right", "math_prod_of_factors", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "per_layer_per_tensor_loop", None, kv_bytes_layer_loop),
    Entry("decode_with_cache", "wrong", "projects_whole_sequence_up_front",
          "It projects the whole sequence with w_q, w_k, w_v before the loop and only slices "
          "the result per step: the values are right but each step does not project only the "
          "new token (the work the contract fixes).",
          decode_projects_everything),
    Entry("decode_with_cache", "wrong", "cache_appended_after_attending",
          "The new token's key and value are appended after attending, so each query sees "
          "only the earlier tokens, not itself (the first step sees no key at all).",
          decode_cache_excludes_current),
    Entry("decode_with_cache", "wrong", "top_left_step_mask",
          "Each step applies tril(ones(1, t+1)), a top-left-aligned causal mask, so the single "
          "new query may only attend key 0 instead of all cached keys.",
          decode_top_left_step_mask),
    Entry("decode_with_cache", "wrong", "scaled_by_cache_length",
          "The scores are divided by sqrt(k.shape[-2]), the number of cached keys, instead of "
          "sqrt(d_head).",
          decode_scale_by_cache_length),
    Entry("decode_with_cache", "wrong", "cat_on_batch_axis",
          "The per-step outputs (B, 1, d_model) are concatenated with torch.cat's default "
          "dim=0, giving (N*B, 1, d_model) instead of (B, N, d_model).",
          decode_cat_batch_axis),
    Entry("decode_with_cache", "wrong", "attends_unfilled_cache_slots",
          "It attends over the whole preallocated cache at every step, including the future "
          "slots that are still zeros, instead of only the first t+1 entries.",
          decode_whole_preallocated_cache),
    Entry("decode_with_cache", "right", "list_cache_with_sdpa", None, decode_list_cache_sdpa),
    Entry("decode_with_cache", "right", "grouped_einsum_float64", None,
          decode_grouped_einsum_float64),
]
