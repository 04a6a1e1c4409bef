"""Round c, lesson 06: repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ repeat_kv
def rkv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_sequence_axis(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


def rkv_expand_non_singleton(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def rkv_numpy_repeat(x, n_rep):
    return np.repeat(x.numpy(), n_rep, axis=1)


def rkv_forgets_reshape(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d)


def rkv_stack_wrong_axis(x, n_rep):
    b, g, n, d = x.shape
    return torch.stack([x] * n_rep, dim=1).reshape(b, g * n_rep, n, d)


def rkv_repeat_interleave(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


def rkv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


# ------------------------------------------------------------------ grouped_query_attention
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, mask=None, scale=None, softmax_dim=-1):
    compute = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.to(compute) @ k.to(compute).transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=softmax_dim)
    return (w @ v.to(compute)).to(q.dtype)


def _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, *, rep="interleave",
         check=True, scale=None, mask_true_is_masked=False, softmax_dim=-1, d_head_from=None):
    d_model = x.shape[-1]
    if check and (d_model % num_heads or num_heads % num_kv_heads):
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    q = _split(x @ w_q, num_heads)
    if d_head_from == "w_k":
        d_head = w_k.shape[1] // num_heads
        k = (x @ w_k).reshape(x.shape[0], x.shape[1], -1, d_head).transpose(1, 2)
        v = (x @ w_v).reshape(x.shape[0], x.shape[1], -1, d_head).transpose(1, 2)
    else:
        k = _split(x @ w_k, num_kv_heads)
        v = _split(x @ w_v, num_kv_heads)
    n_rep = num_heads // max(1, k.shape[1])
    if rep == "interleave":
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    else:
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    n = x.shape[1]
    mask = None
    if causal:
        tri = torch.ones(n, n, dtype=torch.bool).tril()
        mask = ~tri if mask_true_is_masked else tri
    return _merge(_attend(q, k, v, mask, scale, softmax_dim)) @ w_o


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, rep="tile")


def gqa_ignores_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, False)


def gqa_d_head_from_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, d_head_from="w_k")


def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal,
                scale=1.0 / math.sqrt(x.shape[-1]))


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, check=False)


def gqa_mask_true_is_masked(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal,
                mask_true_is_masked=True)


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads).float()
    k = _split(x @ w_k, num_kv_heads).float().repeat_interleave(n_rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).float().repeat_interleave(n_rep, dim=1)
    if x.dtype == torch.float64:
        q, k, v = q.double(), k.double(), v.double()
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx).to(x.dtype) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    c = torch.float64
    q = (x @ w_q).to(c).reshape(b, n, g, r, dh)
    k = (x @ w_k).to(c).reshape(b, n, g, dh)
    v = (x @ w_v).to(c).reshape(b, n, g, dh)
    s = torch.einsum("bqgrd,bkgd->bgrqk", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    w = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrqk,bkgd->bqgrd", w, v).reshape(b, n, d_model)
    return ctx.to(x.dtype) @ w_o


# ------------------------------------------------------------------ kv_cache_bytes
def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kvb_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return (2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
            * bytes_per_element) / 2 ** 30


def kvb_hardcoded_bf16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kvb_plus_one_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return (2 * num_layers * num_kv_heads * head_dim * (seq_len + 1) * batch_size
            * bytes_per_element)


def kvb_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kvb_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token = num_kv_heads * head_dim * bytes_per_element
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += per_token * seq_len * batch_size
    return int(total)


# ------------------------------------------------------------------ decode_with_cache
def _check(x, num_heads, num_kv_heads):
    if x.shape[-1] % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def dec_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    outs = []
    for t in range(x.shape[1]):
        prefix = x[:, :t + 1]
        q = _split(x[:, t:t + 1] @ w_q, num_heads)
        k = _split(prefix @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
        v = _split(prefix @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
        outs.append(_merge(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, *, append_after=False,
            repeat=True, scale=None, no_cache=False):
    _check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        k_t = _split(x_t @ w_k, num_kv_heads)
        v_t = _split(x_t @ w_v, num_kv_heads)
        if not append_after:
            ks.append(k_t)
            vs.append(v_t)
        if no_cache:
            k, v = k_t, v_t
        elif ks:
            k, v = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        else:
            k = v = x.new_zeros(x.shape[0], num_kv_heads, 0, k_t.shape[-1])
        if repeat:
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        outs.append(_merge(_attend(q, k, v, scale=scale)) @ w_o)
        if append_after:
            ks.append(k_t)
            vs.append(v_t)
    return torch.cat(outs, dim=1)


def dec_append_after_attending(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, append_after=True)


def dec_no_repeat(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, repeat=False)


def dec_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                   scale=1.0 / math.sqrt(x.shape[-1]))


def dec_no_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, no_cache=True)


def dec_last_token_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)[:, -1:]


def dec_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x, num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    compute = torch.promote_types(x.dtype, torch.float32)
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads).to(compute)
        k_t = _split(x_t @ w_k, num_kv_heads).to(compute)
        v_t = _split(x_t @ w_v, num_kv_heads).to(compute)
        k_cache = k_t if k_cache is None else torch.cat([k_cache, k_t], dim=2)
        v_cache = v_t if v_cache is None else torch.cat([v_cache, v_t], dim=2)
        ctx = F.scaled_dot_product_attention(q, k_cache.repeat_interleave(n_rep, dim=1),
                                             v_cache.repeat_interleave(n_rep, dim=1))
        outs.append(_merge(ctx).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


def dec_preallocated_grouped(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(x, num_heads, num_kv_heads)
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    k_cache = torch.zeros(b, g, n, dh, dtype=torch.float64)
    v_cache = torch.zeros(b, g, n, dh, dtype=torch.float64)
    out = torch.empty(b, n, d_model, dtype=x.dtype)
    for t in range(n):
        x_t = x[:, t]  # (B, d_model)
        q = (x_t @ w_q).double().reshape(b, g, r, dh)
        k_cache[:, :, t] = (x_t @ w_k).double().reshape(b, g, dh)
        v_cache[:, :, t] = (x_t @ w_v).double().reshape(b, g, dh)
        s = torch.einsum("bgrd,bgkd->bgrk", q, k_cache[:, :, :t + 1]) / math.sqrt(dh)
        w = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrk,bgkd->bgrd", w, v_cache[:, :, :t + 1]).reshape(b, d_model)
        out[:, t] = ctx.to(x.dtype) @ w_o
    return out


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiles_groups", "Uses x.repeat(1, n_rep, 1, 1), which tiles the groups so query head h reads group h % G instead of h // n_rep.", rkv_tile),
    Entry("repeat_kv", "wrong", "repeats_sequence_axis", "Repeats along the sequence axis (dim=2) instead of the head axis.", rkv_sequence_axis),
    Entry("repeat_kv", "wrong", "expand_non_singleton", "Calls expand on the group axis, which only works when that axis has size 1.", rkv_expand_non_singleton),
    Entry("repeat_kv", "wrong", "numpy_repeat", "Uses np.repeat in a PyTorch lesson, returning a numpy array instead of a tensor.", rkv_numpy_repeat),
    Entry("repeat_kv", "wrong", "forgets_reshape", "Expands to (B, G, n_rep, N, d) but forgets to reshape to (B, G*n_rep, N, d).", rkv_forgets_reshape),
    Entry("repeat_kv", "wrong", "stacks_copies_first", "Stacks the copies in front of the group axis before reshaping, which tiles the groups instead of repeating each in place.", rkv_stack_wrong_axis),
    Entry("repeat_kv", "right", "repeat_interleave", None, rkv_repeat_interleave),
    Entry("repeat_kv", "right", "index_select", None, rkv_index_select),
    Entry("grouped_query_attention", "wrong", "tiles_groups", "Repeats K and V with .repeat (tiling), so query head h reads group h % G instead of h // n_rep.", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "ignores_causal", "Ignores the causal flag and never applies the causal mask.", gqa_ignores_causal),
    Entry("grouped_query_attention", "wrong", "d_head_from_w_k", "Computes d_head as w_k.shape[1] // num_heads, although w_k has only num_kv_heads * d_head columns.", gqa_d_head_from_w_k),
    Entry("grouped_query_attention", "wrong", "scale_by_d_model", "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "no_group_check", "Does not check that num_heads is divisible by num_kv_heads, so a bad pair fails with a shape error instead of a ValueError.", gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "mask_true_is_masked", "Passes the causal mask to masked_fill as if True meant allowed-to-fill, blocking the past and keeping the future.", gqa_mask_true_is_masked),
    Entry("grouped_query_attention", "right", "sdpa", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum", None, gqa_grouped_einsum),
    Entry("kv_cache_bytes", "wrong", "keys_only", "Counts only the keys and forgets the factor 2 for the values.", kvb_keys_only),
    Entry("kv_cache_bytes", "wrong", "ignores_batch", "Ignores batch_size.", kvb_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "gibibytes", "Converts to GiB (a float) instead of returning bytes.", kvb_gib),
    Entry("kv_cache_bytes", "wrong", "hardcoded_bf16", "Hard-codes 2 bytes per element instead of using bytes_per_element.", kvb_hardcoded_bf16),
    Entry("kv_cache_bytes", "wrong", "bits", "Multiplies by 8, returning bits instead of bytes.", kvb_bits),
    Entry("kv_cache_bytes", "wrong", "one_token_too_many", "Counts seq_len + 1 tokens, as if the new token were cached in addition to the sequence.", kvb_plus_one_token),
    Entry("kv_cache_bytes", "right", "math_prod", None, kvb_math_prod),
    Entry("kv_cache_bytes", "right", "per_layer_loop", None, kvb_per_layer_loop),
    Entry("decode_with_cache", "wrong", "reprojects_prefix", "Projects the whole prefix with w_k and w_v at every step instead of only the new token, so projection work is quadratic.", dec_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "appends_after_attending", "Appends the new token's key and value to the cache after attending, so each token cannot attend to itself (and the first sees no key).", dec_append_after_attending),
    Entry("decode_with_cache", "wrong", "no_repeat_kv", "Attends over the cache without repeating the K/V groups for the query heads.", dec_no_repeat),
    Entry("decode_with_cache", "wrong", "scale_by_d_model", "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", dec_scale_d_model),
    Entry("decode_with_cache", "wrong", "no_cache", "Never reads the cache: each token attends only to its own key and value.", dec_no_cache),
    Entry("decode_with_cache", "wrong", "last_token_only", "Returns only the last step's output (B, 1, d_model) instead of every step's.", dec_last_token_only),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, dec_list_cache_sdpa),
    Entry("decode_with_cache", "right", "preallocated_grouped", None, dec_preallocated_grouped),
]
