"""Held-out catalogue, lesson 06 (repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache): PyTorch."""

import functools
import math
import operator

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_seq_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_no_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep)


def repeat_kv_unpack_order(x, n_rep):
    B, N, G, d = x.shape
    return x[:, :, None].expand(-1, -1, n_rep, -1, -1).reshape(B, G * n_rep, N, d)


def repeat_kv_view(x, n_rep):
    B, G, N, d = x.shape
    return x[:, :, None, :, :].expand(B, G, n_rep, N, d).view(B, G * n_rep, N, d)


def repeat_kv_index_by_groups(x, n_rep):
    G = x.shape[1]
    idx = torch.arange(G * n_rep, device=x.device) // G
    return x[:, idx]


def repeat_kv_stack_flatten(x, n_rep):
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)


def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    head_to_group = torch.arange(groups * n_rep, device=x.device).div(n_rep,
                                                                      rounding_mode="floor")
    return x.index_select(1, head_to_group)


# ============================================================================ grouped_query_attention
def _heads(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _check(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")


def _attend(q, k, v, causal, scale):
    s = (q.float() @ k.float().transpose(-2, -1)) * scale
    if causal:
        n_q, n_k = s.shape[-2], s.shape[-1]
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=s.device)
        allowed = allowed.tril(0)
        s = s.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return (w @ v.float()).to(q.dtype)


def gqa_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, n_rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, n_rep, 1, 1)
    out = _attend(q, k, v, causal, 1 / math.sqrt(q.shape[-1]))
    return _unheads(out) @ w_o


def gqa_mask_convention(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), n_rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), n_rep, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))  # lower triangle
        s = s.masked_fill(mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    return _unheads((w @ v.float()).to(x.dtype)) @ w_o


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), n_rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), n_rep, dim=1)
    out = _attend(q, k, v, causal, 1 / math.sqrt(w_k.shape[1]))
    return _unheads(out) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), n_rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), n_rep, dim=1)
    out = _attend(q, k, v, causal, 1 / math.sqrt(q.shape[-1]))
    return _unheads(out) @ w_o


def gqa_view_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    dh = D // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = torch.repeat_interleave((x @ w_k).reshape(B, num_kv_heads, N, dh), n_rep, dim=1)
    v = torch.repeat_interleave((x @ w_v).reshape(B, num_kv_heads, N, dh), n_rep, dim=1)
    out = _attend(q, k, v, causal, 1 / math.sqrt(dh))
    return out.reshape(B, N, D) @ w_o


def gqa_causal_excludes_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = torch.repeat_interleave(_heads(x @ w_k, num_kv_heads), n_rep, dim=1)
    v = torch.repeat_interleave(_heads(x @ w_v, num_kv_heads), n_rep, dim=1)
    s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        s = s.masked_fill(~(j < i), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return _unheads((w @ v.float()).to(x.dtype)) @ w_o


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    _check(d_model, num_heads, num_kv_heads)
    work = torch.promote_types(x.dtype, torch.float32)
    xs, wq, wk, wv, wo = (t.to(work) for t in (x, w_q, w_k, w_v, w_o))
    q = _heads(xs @ wq, num_heads)
    k = _heads(xs @ wk, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = _heads(xs @ wv, num_kv_heads).repeat_interleave(num_heads // num_kv_heads, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (_unheads(ctx) @ wo).to(x.dtype)


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    B, N, D = x.shape
    H, G = num_heads, num_kv_heads
    if D % H != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={H}")
    if H % G != 0:
        raise ValueError(f"num_heads={H} is not a multiple of num_kv_heads={G}")
    dh, r = D // H, H // G
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(B, N, G, r, dh)  # head h = g * r + j
    k = (x64 @ w_k.double()).reshape(B, N, G, dh)
    v = (x64 @ w_v.double()).reshape(B, N, G, dh)
    s = torch.einsum("bngrd,bmgd->bgrnm", q, k) / math.sqrt(dh)
    if causal:
        future = torch.ones(N, N, dtype=torch.bool).triu(1)
        s = s.masked_fill(future, -math.inf)
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrnm,bmgd->bngrd", p, v).reshape(B, N, D)
    return (ctx @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
def kv_bytes_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    bits = bytes_per_element * 8
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bits


def kv_bytes_np_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return np.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                    bytes_per_element])


def kv_bytes_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kv_bytes_extra_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                         bytes_per_element=2):
    tokens = (seq_len + 1) * batch_size  # prompt plus the token being generated
    return 2 * num_layers * num_kv_heads * head_dim * tokens * bytes_per_element


def kv_bytes_heads_left_out(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    width = head_dim  # width of one cached key vector
    return 2 * num_layers * width * seq_len * batch_size * bytes_per_element


def kv_bytes_reduce(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    factors = (2, num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element)
    return functools.reduce(operator.mul, factors, 1)


def kv_bytes_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    per_layer_k = num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    total = 0
    for _layer in range(num_layers):
        total += per_layer_k  # keys
        total += per_layer_k  # values
    return total


# ============================================================================ decode_with_cache
def _step_attend(q_t, k_seen, v_seen, dh):
    s = (q_t.float() @ k_seen.float().transpose(-2, -1)) / math.sqrt(dh)
    return (torch.softmax(s, dim=-1) @ v_seen.float()).to(q_t.dtype)


def decode_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, n_rep = D // num_heads, num_heads // num_kv_heads
    outs = []
    for t in range(N):
        q_t = _heads(x[:, t:t + 1] @ w_q, num_heads)
        prefix = x[:, :t + 1]
        k = torch.repeat_interleave(_heads(prefix @ w_k, num_kv_heads), n_rep, dim=1)
        v = torch.repeat_interleave(_heads(prefix @ w_v, num_kv_heads), n_rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v, dh)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, n_rep = D // num_heads, num_heads // num_kv_heads
    k_cache = x.new_zeros(B, num_kv_heads, N, dh)
    v_cache = x.new_zeros(B, num_kv_heads, N, dh)
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q_t = _heads(xt @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(xt @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(xt @ w_v, num_kv_heads)
        k = torch.repeat_interleave(k_cache[:, :, :t], n_rep, dim=1)
        v = torch.repeat_interleave(v_cache[:, :, :t], n_rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v, dh)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, n_rep = D // num_heads, num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(N):
        xt = x[:, t:t + 1]
        q_t = _heads(xt @ w_q, num_heads)
        k_cache = _heads(xt @ w_k, num_kv_heads)
        v_cache = _heads(xt @ w_v, num_kv_heads)
        k = torch.repeat_interleave(k_cache, n_rep, dim=1)
        v = torch.repeat_interleave(v_cache, n_rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v, dh)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_tiled_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, n_rep = D // num_heads, num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q_t = _heads(xt @ w_q, num_heads)
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat(1, n_rep, 1, 1)
        v = torch.cat(vs, dim=2).repeat(1, n_rep, 1, 1)
        outs.append(_unheads(_step_attend(q_t, k, v, dh)) @ w_o)
    return torch.cat(outs, dim=1)


def decode_scale_cache_length(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    n_rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q_t = _heads(xt @ w_q, num_heads)
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.repeat_interleave(torch.cat(ks, dim=2), n_rep, dim=1)
        v = torch.repeat_interleave(torch.cat(vs, dim=2), n_rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v, k.shape[-2])) @ w_o)
    return torch.cat(outs, dim=1)


def decode_stack_outputs(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    dh, n_rep = D // num_heads, num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(N):
        xt = x[:, t:t + 1]
        q_t = _heads(xt @ w_q, num_heads)
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.repeat_interleave(torch.cat(ks, dim=2), n_rep, dim=1)
        v = torch.repeat_interleave(torch.cat(vs, dim=2), n_rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v, dh)) @ w_o)
    return torch.stack(outs, dim=1)


def decode_sdpa_growing_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    B, N, D = x.shape
    n_rep = num_heads // num_kv_heads
    work = torch.promote_types(x.dtype, torch.float32)
    keys = values = None
    results = []
    for t in range(N):
        tok = x[:, t, :]  # (B, D): only the new token
        q_t = (tok @ w_q).to(work).view(B, num_heads, 1, -1)
        k_t = (tok @ w_k).to(work).view(B, num_kv_heads, 1, -1)
        v_t = (tok @ w_v).to(work).view(B, num_kv_heads, 1, -1)
        keys = k_t if keys is None else torch.cat([keys, k_t], dim=2)
        values = v_t if values is None else torch.cat([values, v_t], dim=2)
        ctx = F.scaled_dot_product_attention(q_t, keys.repeat_interleave(n_rep, dim=1),
                                             values.repeat_interleave(n_rep, dim=1))
        results.append(ctx.reshape(B, 1, D).to(x.dtype) @ w_o)
    return torch.cat(results, dim=1)


def decode_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    B, N, D = x.shape
    H, G = num_heads, num_kv_heads
    if D % H or H % G:
        raise ValueError(f"d_model={D}, num_heads={H}, num_kv_heads={G}: need H | d_model "
                         "and num_kv_heads | num_heads")
    dh, r = D // H, H // G
    k_cache = torch.zeros(B, N, G, dh, dtype=torch.float64)
    v_cache = torch.zeros(B, N, G, dh, dtype=torch.float64)
    y = torch.empty(B, N, D, dtype=torch.float64)
    w_o64 = w_o.double()
    for t in range(N):
        row = x[:, t]
        k_cache[:, t] = (row @ w_k).double().reshape(B, G, dh)
        v_cache[:, t] = (row @ w_v).double().reshape(B, G, dh)
        q = (row @ w_q).double().reshape(B, G, r, dh)
        s = torch.einsum("bgrd,bmgd->bgrm", q, k_cache[:, :t + 1]) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrm,bmgd->bgrd", p, v_cache[:, :t + 1]).reshape(B, D)
        y[:, t] = ctx @ w_o64
    return y.to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tensor_repeat_tiled",
          "uses x.repeat(1, n_rep, 1, 1), which tiles the groups (0, 1, 0, 1, ...) instead of "
          "giving query head h the group h // n_rep", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "interleave_on_seq_dim",
          "repeat_interleave along dim=2 (the sequence) instead of dim=1 (the groups), "
          "returning (B, G, N*n_rep, d)", repeat_kv_seq_dim),
    Entry("repeat_kv", "wrong", "interleave_without_dim",
          "calls torch.repeat_interleave without dim, which flattens the tensor to 1-D",
          repeat_kv_no_dim),
    Entry("repeat_kv", "wrong", "shape_unpacked_as_BNGd",
          "unpacks x.shape as (B, N, G, d), so the final reshape swaps the group and sequence "
          "sizes", repeat_kv_unpack_order),
    Entry("repeat_kv", "wrong", "view_on_expanded",
          "calls .view on the expanded tensor, which cannot be viewed as (B, G*n_rep, N, d) "
          "(RuntimeError) where .reshape would copy", repeat_kv_view),
    Entry("repeat_kv", "wrong", "index_divides_by_groups",
          "maps head h to group h // G (the number of groups) instead of h // n_rep",
          repeat_kv_index_by_groups),
    Entry("repeat_kv", "right", "stack_flatten", None, repeat_kv_stack_flatten),
    Entry("repeat_kv", "right", "index_select_floor_div", None, repeat_kv_index_select),

    Entry("grouped_query_attention", "wrong", "tiled_kv_heads",
          "repeats the K/V heads with .repeat (tiled), so query head h reads group h % G "
          "instead of h // n_rep", gqa_tiled_repeat),
    Entry("grouped_query_attention", "wrong", "mask_convention_inverted",
          "fills -inf where the lower-triangular mask is True (treating True as 'masked'), so "
          "each query sees only future keys (the last row sees none)", gqa_mask_convention),
    Entry("grouped_query_attention", "wrong", "scale_by_kv_width",
          "scales by 1/sqrt(w_k.shape[1]) = 1/sqrt(num_kv_heads * d_head) instead of "
          "1/sqrt(d_head)", gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "no_group_divisibility_check",
          "never checks that num_kv_heads divides num_heads, so 4 heads with 3 K/V heads fail "
          "later with a shape RuntimeError instead of a ValueError", gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "heads_reshaped_without_transpose",
          "reshapes (B, N, heads*d_head) straight to (B, heads, N, d_head) (and back) without "
          "the transpose, mixing tokens and heads", gqa_view_without_transpose),
    Entry("grouped_query_attention", "wrong", "causal_strict_less",
          "the causal mask allows j < i instead of j <= i, so no query sees its own token and "
          "the first row is fully masked (NaN)", gqa_causal_excludes_diagonal),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float64", None, gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "leaves out the factor 2: counts the key cache only, not keys and values",
          kv_bytes_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "bits_not_bytes",
          "multiplies by 8 bits per byte, returning the size in bits", kv_bytes_bits),
    Entry("kv_cache_bytes", "wrong", "numpy_prod_int64",
          "multiplies with np.prod, which returns a numpy int64 instead of a plain Python int",
          kv_bytes_np_prod),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "never multiplies by batch_size, so a batch of sequences costs as much as one",
          kv_bytes_batch_ignored),
    Entry("kv_cache_bytes", "wrong", "extra_token_counted",
          "counts seq_len + 1 tokens per sequence (the token being generated) instead of "
          "seq_len", kv_bytes_extra_token),
    Entry("kv_cache_bytes", "wrong", "kv_heads_left_out",
          "takes head_dim as the whole width of a cached key and leaves num_kv_heads out",
          kv_bytes_heads_left_out),
    Entry("kv_cache_bytes", "right", "reduce_mul", None, kv_bytes_reduce),
    Entry("kv_cache_bytes", "right", "layer_loop", None, kv_bytes_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "projects the whole prefix x[:, :t+1] with w_k and w_v at every step instead of only "
          "the new token (right values, quadratic projection work)", decode_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "cache_slice_excludes_current",
          "attends over k_cache[:, :, :t], which leaves out the token just added, so step 0 has "
          "no key (an all-zero output row) and later steps miss the current token", decode_cache_excludes_current),
    Entry("decode_with_cache", "wrong", "cache_overwritten",
          "assigns the new key/value to the cache variable instead of appending, so each token "
          "attends only to itself", decode_cache_overwritten),
    Entry("decode_with_cache", "wrong", "tiled_kv_heads",
          "repeats the cached K/V heads with .repeat (tiled), so query head h reads group h % G "
          "instead of h // n_rep", decode_tiled_repeat),
    Entry("decode_with_cache", "wrong", "scale_by_cache_length",
          "scales the scores by 1/sqrt(k.shape[-2]), the current cache length, instead of "
          "1/sqrt(d_head)", decode_scale_cache_length),
    Entry("decode_with_cache", "wrong", "stack_instead_of_cat",
          "joins the per-step (B, 1, d_model) outputs with torch.stack(dim=1), giving "
          "(B, N, 1, d_model) instead of torch.cat's (B, N, d_model)", decode_stack_outputs),
    Entry("decode_with_cache", "right", "sdpa_growing_cache", None, decode_sdpa_growing_cache),
    Entry("decode_with_cache", "right", "grouped_einsum_float64", None,
          decode_grouped_einsum_float64),
]
