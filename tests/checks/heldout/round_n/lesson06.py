"""Held-out catalogue, lesson 06 (GQA and the KV cache, torch): repeat_kv,
grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_sequence_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_no_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep)


def repeat_kv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def repeat_kv_index_div_groups(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep, device=x.device) // groups
    return x[:, idx]


def repeat_kv_n_rep_as_heads(x, n_rep):
    # n_rep read as the number of query heads: each group is copied n_rep // G times
    groups = x.shape[1]
    return x.repeat_interleave(max(n_rep // groups, 1), dim=1)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep, device=x.device).div(n_rep, rounding_mode="floor")
    return torch.index_select(x, 1, idx)


def repeat_kv_cat_loop(x, n_rep):
    pieces = []
    for g in range(x.shape[1]):
        for _ in range(n_rep):
            pieces.append(x[:, g:g + 1])
    return torch.cat(pieces, dim=1)


# ============================================================================ GQA helpers
def _heads(t, n_heads):
    b, n, width = t.shape
    return t.view(b, n, n_heads, width // n_heads).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, causal, scale=None, mask=None):
    """softmax(q k^T * scale) v in float32 (or float64), back in q's dtype; empty rows give 0."""
    work = torch.promote_types(q.dtype, torch.float32)
    qf, kf, vf = q.to(work), k.to(work), v.to(work)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = qf @ kf.transpose(-2, -1) * scale
    if causal:
        n_q, n_k = s.shape[-2:]
        mask = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(n_k - n_q)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ vf).to(q.dtype)


def _guard(num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")


# ============================================================================ grouped_query_attention
def gqa_tiled_kv(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    return _unheads(_attend(q, k, v, causal)) @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    kv_width = w_k.shape[1]
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), rep, dim=1)
    ctx = _attend(q, k, v, causal, scale=1.0 / math.sqrt(kv_width))
    return _unheads(ctx) @ w_o


def gqa_strict_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    B, N, D = x.shape
    work = torch.promote_types(x.dtype, torch.float32)
    q = _heads(x @ w_q, num_heads).to(work)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1).to(work)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1).to(work)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        future = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=0)
        scores = scores.masked_fill(future, float("-inf"))
    ctx = (torch.softmax(scores, dim=-1) @ v).to(x.dtype)
    return ctx.transpose(1, 2).reshape(B, N, D) @ w_o


def gqa_reversed_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_kv_heads % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    return _unheads(_attend(q, k, v, causal)) @ w_o


def gqa_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    b, n, d_model = x.shape
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    ctx = _attend(q, k, v, causal)
    return ctx.reshape(b, n, d_model) @ w_o


def gqa_kv_split_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _guard(num_heads, num_kv_heads)
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_heads)
    v = _heads(x @ w_v, num_heads)
    return _unheads(_attend(q, k, v, causal)) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    work = torch.promote_types(x.dtype, torch.float32)
    q = (x @ w_q).reshape(b, n, num_heads, dh).permute(0, 2, 1, 3).to(work)
    k = (x @ w_k).reshape(b, n, num_kv_heads, dh).permute(0, 2, 1, 3).to(work)
    v = (x @ w_v).reshape(b, n, num_kv_heads, dh).permute(0, 2, 1, 3).to(work)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.to(x.dtype).permute(0, 2, 1, 3).reshape(b, n, d_model) @ w_o


def gqa_per_head_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    group_size = num_heads // num_kv_heads
    xq, xk, xv = x @ w_q, x @ w_k, x @ w_v
    outs = []
    for h in range(num_heads):
        g = h // group_size
        qh = xq[..., h * dh:(h + 1) * dh].double()
        kh = xk[..., g * dh:(g + 1) * dh].double()
        vh = xv[..., g * dh:(g + 1) * dh].double()
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        if causal:
            i = torch.arange(n).view(-1, 1)
            j = torch.arange(n).view(1, -1)
            s = torch.where(j <= i, s, torch.tensor(float("-inf"), dtype=s.dtype))
        p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
        outs.append(torch.einsum("bij,bjd->bid", p, vh).to(x.dtype))
    return torch.cat(outs, dim=-1) @ w_o


# ============================================================================ kv_cache_bytes
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_elements(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size


def kv_bytes_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_numpy_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_fp16_hardcoded_too(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size  # K and V
    return elements * 2 * bytes_per_element  # 2 bytes per fp16 value


def kv_bytes_seq_minus_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    cached = seq_len - 1  # the newest token is not in the cache yet
    return 2 * num_layers * num_kv_heads * head_dim * cached * batch_size * bytes_per_element


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    shape = (num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim)  # a stacked cache
    return math.prod(shape) * bytes_per_element


# ============================================================================ decode_with_cache


def decode_excludes_new_token(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    b, n, d_model = x.shape
    rep = num_heads // num_kv_heads
    dh = d_model // num_heads
    k_cache = x.new_zeros(b, num_kv_heads, n, dh)
    v_cache = x.new_zeros(b, num_kv_heads, n, dh)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(xt @ w_v, num_kv_heads)
        k = k_cache[:, :, :t].repeat_interleave(rep, dim=1)
        v = v_cache[:, :, :t].repeat_interleave(rep, dim=1)
        outs.append(_unheads(_attend(q, k, v, False)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    n = x.shape[1]
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(n):
        prefix = x[:, :t + 1]
        q = _heads(x[:, t:t + 1] @ w_q, num_heads)
        k = _heads(prefix @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
        v = _heads(prefix @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_attend(q, k, v, False)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1, :]
        q = _heads(xt @ w_q, num_heads)
        k_cache = _heads(xt @ w_k, num_kv_heads)  # the cache is the new key
        v_cache = _heads(xt @ w_v, num_kv_heads)
        k = k_cache.repeat_interleave(rep, dim=1)
        v = v_cache.repeat_interleave(rep, dim=1)
        outs.append(_unheads(_attend(q, k, v, False)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_top_left_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        mask = torch.tril(torch.ones(1, t + 1, dtype=torch.bool))  # causal mask for this step
        outs.append(_unheads(_attend(q, k, v, False, mask=mask)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cat_batch_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_attend(q, k, v, False)) @ w_o)
    return torch.cat(outs)


def decode_tiled_kv(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _guard(num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    b, n, d_model = x.shape
    dh = d_model // num_heads
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        k_cache[:, :, t] = (xt @ w_k).view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).view(b, num_kv_heads, dh)
        k = k_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        v = v_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        outs.append(_unheads(_attend(q, k, v, False)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_list_cache_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    work = torch.promote_types(x.dtype, torch.float32)
    keys, values, outs = [], [], []
    for t in range(n):
        tok = x[:, t]  # (B, d_model): one row per sequence
        q = (tok @ w_q).view(b, num_kv_heads, rep, dh).to(work)
        keys.append((tok @ w_k).view(b, num_kv_heads, dh).to(work))
        values.append((tok @ w_v).view(b, num_kv_heads, dh).to(work))
        K = torch.stack(keys, dim=2)  # (B, G, t+1, dh)
        V = torch.stack(values, dim=2)
        s = torch.einsum("bgrd,bgtd->bgrt", q, K) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, V).reshape(b, d_model).to(x.dtype)
        outs.append(ctx @ w_o)
    return torch.stack(outs, dim=1)


def decode_float64_per_head(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    b, n, d_model = x.shape
    dh = d_model // num_heads
    per_group = num_heads // num_kv_heads
    k_cache = torch.empty(b, num_kv_heads, n, dh, dtype=torch.float64)
    v_cache = torch.empty(b, num_kv_heads, n, dh, dtype=torch.float64)
    result = torch.empty(b, n, d_model, dtype=x.dtype)
    for t in range(n):
        xt = x[:, t:t + 1]
        qt = (xt @ w_q).double().view(b, num_heads, dh)
        k_cache[:, :, t] = (xt @ w_k).double().view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (xt @ w_v).double().view(b, num_kv_heads, dh)
        heads = []
        for h in range(num_heads):
            g = h // per_group
            scores = (k_cache[:, g, :t + 1] @ qt[:, h].unsqueeze(-1)).squeeze(-1) / math.sqrt(dh)
            w = torch.softmax(scores, dim=-1)
            heads.append((w.unsqueeze(1) @ v_cache[:, g, :t + 1]).squeeze(1))
        result[:, t] = (torch.cat(heads, dim=-1).to(x.dtype) @ w_o)
    return result


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_repeat",
          "x.repeat(1, n_rep, 1, 1) tiles the groups (0, 1, ..., 0, 1, ...), so query head h "
          "reads group h % G instead of h // n_rep.",
          repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_sequence_axis",
          "repeat_interleave runs along dim=2, copying every token n_rep times instead of "
          "every head, so the output is (B, G, N*n_rep, d).",
          repeat_kv_sequence_dim),
    Entry("repeat_kv", "wrong", "interleave_without_dim",
          "torch.repeat_interleave without dim flattens the tensor first, so it returns a 1-D "
          "tensor instead of (B, G*n_rep, N, d).",
          repeat_kv_no_dim),
    Entry("repeat_kv", "wrong", "view_after_expand",
          "It calls .view on the expanded tensor, which is not contiguous, so it raises a "
          "RuntimeError whenever n_rep > 1 (reshape would make the copy).",
          repeat_kv_view_after_expand),
    Entry("repeat_kv", "wrong", "index_divided_by_groups",
          "The head-to-group index is arange(G*n_rep) // G instead of // n_rep, so heads read "
          "the wrong groups (or an index out of range) unless G == n_rep or G == 1.",
          repeat_kv_index_div_groups),
    Entry("repeat_kv", "wrong", "n_rep_read_as_head_count",
          "It treats n_rep as the total number of query heads and repeats each group "
          "max(n_rep // G, 1) times, so whenever G > 1 and n_rep > 1 the head axis gets "
          "fewer than G * n_rep heads.",
          repeat_kv_n_rep_as_heads),
    Entry("repeat_kv", "right", "index_select_floor_div", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "cat_loop", None, repeat_kv_cat_loop),

    Entry("grouped_query_attention", "wrong", "tiled_kv_heads",
          "K and V heads are repeated with .repeat (tiled), so query head h uses group h % G "
          "instead of h // n_rep; only MHA and MQA come out right.",
          gqa_tiled_kv),
    Entry("grouped_query_attention", "wrong", "scale_by_kv_width",
          "The scores are scaled by 1/sqrt(w_k.shape[1]) = 1/sqrt(num_kv_heads*d_head) instead "
          "of 1/sqrt(d_head), which is only right for MQA.",
          gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "causal_mask_hides_diagonal",
          "The causal mask uses triu(diagonal=0), hiding each query's own key as well as the "
          "future, so with causal=True the first row has no key (NaN) and the others miss "
          "themselves.",
          gqa_strict_causal),
    Entry("grouped_query_attention", "wrong", "guard_modulo_reversed",
          "The guard tests num_kv_heads % num_heads instead of num_heads % num_kv_heads, so "
          "every real GQA/MQA configuration raises ValueError.",
          gqa_reversed_guard),
    Entry("grouped_query_attention", "wrong", "merge_without_transpose",
          "The heads' outputs (B, H, N, d_head) are reshaped to (B, N, d_model) without moving "
          "the head axis behind N, mixing tokens and heads unless N=1.",
          gqa_merge_without_transpose),
    Entry("grouped_query_attention", "wrong", "kv_split_into_query_heads",
          "K and V are split into num_heads heads instead of num_kv_heads, which gives heads "
          "of the wrong width (a shape error) except when num_kv_heads == num_heads.",
          gqa_kv_split_num_heads),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per_head_loop_float64", None, gqa_per_head_loop),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "It forgets the factor 2 for keys and values, counting only the K cache.",
          kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "elements_not_bytes",
          "bytes_per_element is never used, so it returns the number of cached elements, not "
          "bytes.",
          kv_bytes_elements),
    Entry("kv_cache_bytes", "wrong", "ignores_batch_size",
          "batch_size is ignored, so the cache of a single sequence is returned for any batch.",
          kv_bytes_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "numpy_integer",
          "np.prod returns a numpy int64, not the plain Python int the contract requires.",
          kv_bytes_numpy_prod),
    Entry("kv_cache_bytes", "wrong", "fp16_size_counted_twice",
          "It multiplies by a hard-coded 2 bytes for fp16 and by bytes_per_element as well, "
          "double counting the element size.",
          kv_bytes_fp16_hardcoded_too),
    Entry("kv_cache_bytes", "wrong", "seq_len_minus_one",
          "It counts seq_len - 1 cached tokens, as if the newest token were not in the cache, "
          "instead of seq_len.",
          kv_bytes_seq_minus_one),
    Entry("kv_cache_bytes", "right", "per_layer_loop", None, kv_bytes_layer_loop),
    Entry("kv_cache_bytes", "right", "stacked_shape_math_prod", None, kv_bytes_math_prod),

    Entry("decode_with_cache", "wrong", "cache_slice_excludes_new_token",
          "Each step attends over k_cache[:, :, :t], the cache before the new token, so a "
          "token never sees its own key and the first token gets a zero output.",
          decode_excludes_new_token),
    Entry("decode_with_cache", "wrong", "reprojects_whole_prefix",
          "Keys and values of the whole prefix are projected again at every step instead of "
          "being cached: the values are right but the projection work grows quadratically.",
          decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "The cache variables are reassigned to the new token's key and value each step "
          "instead of appended to, so every token attends only to itself.",
          decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "top_left_mask_per_step",
          "Each step applies tril(ones(1, t+1)), a top-left causal mask, to the single new "
          "query, so every token sees only the first key instead of the whole cache.",
          decode_top_left_mask),
    Entry("decode_with_cache", "wrong", "outputs_joined_on_batch_axis",
          "The per-step outputs (B, 1, d_model) are concatenated with torch.cat's default "
          "dim=0, giving (N*B, 1, d_model) instead of (B, N, d_model).",
          decode_cat_batch_dim),
    Entry("decode_with_cache", "wrong", "tiled_kv_heads",
          "The cached K/V heads are repeated with .repeat (tiled), so query head h reads group "
          "h % G instead of h // n_rep; only MHA and MQA come out right.",
          decode_tiled_kv),
    Entry("decode_with_cache", "right", "list_cache_grouped_einsum", None,
          decode_list_cache_einsum),
    Entry("decode_with_cache", "right", "float64_cache_per_head", None, decode_float64_per_head),
]
