"""Lesson 06 (torch): repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ repeat_kv, wrong
def rkv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_sequence_dim(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


def rkv_batch_dim(x, n_rep):
    return x.repeat_interleave(n_rep, dim=0)


def rkv_loop_one_short(x, n_rep):
    heads = []
    for g in range(x.shape[1]):
        for _ in range(1, n_rep):
            heads.append(x[:, g])
    if not heads:
        return x[:, :0]
    return torch.stack(heads, dim=1)


def rkv_divide_by_groups(x, n_rep):
    groups = x.shape[1]
    idx = torch.arange(groups * n_rep) // groups
    return x[:, idx]


def rkv_copy_axis_after_seq(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, :, None, :].expand(b, g, n, n_rep, d).reshape(b, g * n_rep, n, d)


# ------------------------------------------------------------------ repeat_kv, right
def rkv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def rkv_einsum_ones(x, n_rep):
    b, g, n, d = x.shape
    ones = torch.ones(n_rep, dtype=x.dtype, device=x.device)
    return torch.einsum("bgnd,r->bgrnd", x, ones).reshape(b, g * n_rep, n, d)


# ------------------------------------------------------------------ GQA helpers
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _check_heads(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def _attend(q, k, v, mask=None, scale=None):
    c = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.to(c) @ k.to(c).transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    if s.shape[-1] == 0:  # nothing to attend to yet
        return torch.zeros(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    return (w @ v.to(c)).to(q.dtype)


def _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, *, tile=False, strict=False,
         ignore_causal=False, scale_dmodel=False, merge_plain=False):
    b, n, d = x.shape
    _check_heads(d, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads)
    v = _split(x @ w_v, num_kv_heads)
    if tile:
        k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    else:
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    mask = None
    if causal and not ignore_causal:
        mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril(-1 if strict else 0)
    ctx = _attend(q, k, v, mask, 1.0 / math.sqrt(d) if scale_dmodel else None)
    merged = ctx.reshape(b, n, d) if merge_plain else _merge(ctx)
    return merged @ w_o


# ------------------------------------------------------------------ GQA, wrong
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, tile=True)


def gqa_strict_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, strict=True)


def gqa_ignores_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, ignore_causal=True)


def gqa_assert(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    assert num_heads % num_kv_heads == 0, "num_heads must be a multiple of num_kv_heads"
    b, n, d = x.shape
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _merge(_attend(q, k, v, mask)) @ w_o


def gqa_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, scale_dmodel=True)


def gqa_merge_plain_reshape(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, merge_plain=True)


# ------------------------------------------------------------------ GQA, right
def gqa_sdpa_float32(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d = x.shape
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    rep = num_heads // num_kv_heads
    xf = x.float() if x.dtype != torch.float64 else x
    q = _split(xf @ w_q.to(xf.dtype), num_heads)
    k = _split(xf @ w_k.to(xf.dtype), num_kv_heads).repeat_interleave(rep, 1)
    v = _split(xf @ w_v.to(xf.dtype), num_kv_heads).repeat_interleave(rep, 1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (_merge(ctx) @ w_o.to(xf.dtype)).to(x.dtype)


def gqa_per_head_loop64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d = x.shape
    if d % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"bad head counts num_heads={num_heads}, num_kv_heads={num_kv_heads}")
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    x64 = x.double()
    out = torch.zeros(b, n, d, dtype=torch.float64)
    for h in range(num_heads):
        g = h // rep
        q = x64 @ w_q.double()[:, h * dh:(h + 1) * dh]
        k = x64 @ w_k.double()[:, g * dh:(g + 1) * dh]
        v = x64 @ w_v.double()[:, g * dh:(g + 1) * dh]
        s = q @ k.transpose(1, 2) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -math.inf)
        out += torch.softmax(s, -1) @ v @ w_o.double()[h * dh:(h + 1) * dh]
    return out.to(x.dtype)


# ------------------------------------------------------------------ kv_cache_bytes
def kv_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kv_ignores_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kv_in_kib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total // 1024


def kv_hardcoded_bf16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def kv_one_layer(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        for tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


# ------------------------------------------------------------------ decode_with_cache
def _dec(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, *, exclude_current=False,
         no_cache=False, tile=False, prefix=False, stop_early=False, keys_with_wq=False):
    b, n, d = x.shape
    _check_heads(d, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    steps = n - 1 if stop_early else n
    for t in range(steps):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        if prefix:
            k_all = _split(x[:, :t + 1] @ w_k, num_kv_heads)
            v_all = _split(x[:, :t + 1] @ w_v, num_kv_heads)
        else:
            k_new = _split(x_t @ (w_q if keys_with_wq else w_k), num_kv_heads)
            v_new = _split(x_t @ w_v, num_kv_heads)
            if exclude_current:
                k_all = torch.cat(ks + [k_new[:, :, :0]], dim=2)
                v_all = torch.cat(vs + [v_new[:, :, :0]], dim=2)
            ks.append(k_new)
            vs.append(v_new)
            if no_cache:
                k_all, v_all = k_new, v_new
            elif not exclude_current:
                k_all, v_all = torch.cat(ks, dim=2), torch.cat(vs, dim=2)
        if tile:
            k_all, v_all = k_all.repeat(1, rep, 1, 1), v_all.repeat(1, rep, 1, 1)
        else:
            k_all = k_all.repeat_interleave(rep, dim=1)
            v_all = v_all.repeat_interleave(rep, dim=1)
        outs.append(_merge(_attend(q, k_all, v_all)) @ w_o)
    return torch.cat(outs, dim=1)


def dec_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _dec(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, exclude_current=True)


def dec_no_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _dec(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, no_cache=True)


def dec_tiled(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _dec(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, tile=True)


def dec_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _dec(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, prefix=True)


def dec_stops_early(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _dec(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, stop_early=True)


def dec_keys_with_wq(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    _check_heads(d, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    dh = d // num_heads
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t]
        q = (x_t @ w_q).reshape(b, num_heads, 1, dh)
        k = (x_t @ w_q)[:, : num_kv_heads * dh].reshape(b, num_kv_heads, 1, dh)  # w_q, not w_k
        ks.append(k)
        vs.append((x_t @ w_v).reshape(b, num_kv_heads, 1, dh))
        k_all = torch.cat(ks, 2).repeat_interleave(rep, 1)
        v_all = torch.cat(vs, 2).repeat_interleave(rep, 1)
        outs.append(_merge(_attend(q, k_all, v_all)) @ w_o)
    return torch.cat(outs, dim=1)


# ------------------------------------------------------------------ decode_with_cache, right
def dec_preallocated_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    if d % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads}, num_kv_heads={num_kv_heads} do not fit")
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=c)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=c)
    out = torch.empty(b, n, d, dtype=x.dtype)
    for t in range(n):
        x_t = x[:, t]  # (B, d)
        q = (x_t @ w_q).to(c).view(b, num_heads, 1, dh)
        k_cache[:, :, t] = (x_t @ w_k).to(c).view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (x_t @ w_v).to(c).view(b, num_kv_heads, dh)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        ctx = F.scaled_dot_product_attention(q, k, v)  # one query: no mask needed
        out[:, t] = (ctx.reshape(b, d).to(x.dtype) @ w_o)
    return out


def dec_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d = x.shape
    if num_heads % num_kv_heads or d % num_heads:
        raise ValueError(f"num_heads={num_heads} vs num_kv_heads={num_kv_heads}")
    dh = d // num_heads
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1, :].double()
        q = (x_t @ w_q.double()).reshape(b, num_kv_heads, rep, dh)  # heads grouped
        keys.append((x_t @ w_k.double()).reshape(b, num_kv_heads, dh))
        values.append((x_t @ w_v.double()).reshape(b, num_kv_heads, dh))
        k = torch.stack(keys, dim=2)  # (B, G, t+1, dh)
        v = torch.stack(values, dim=2)
        s = torch.einsum("bgrd,bgtd->bgrt", q, k) / math.sqrt(dh)
        ctx = torch.einsum("bgrt,bgtd->bgrd", torch.softmax(s, -1), v)
        outs.append(ctx.reshape(b, 1, d) @ w_o.double())
    return torch.cat(outs, 1).to(x.dtype)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiles_groups", "Uses x.repeat(1, n_rep, 1, 1), which tiles the "
          "groups so query head h reads group h % G instead of h // n_rep.", rkv_tile),
    Entry("repeat_kv", "wrong", "repeats_sequence_axis", "Repeats along dim=2 (the sequence "
          "axis) instead of the head axis.", rkv_sequence_dim),
    Entry("repeat_kv", "wrong", "repeats_batch_axis", "Repeats along dim=0 (the batch axis) "
          "instead of the head axis.", rkv_batch_dim),
    Entry("repeat_kv", "wrong", "inner_loop_one_short", "The inner copy loop runs "
          "range(1, n_rep), making n_rep - 1 copies of each group.", rkv_loop_one_short),
    Entry("repeat_kv", "wrong", "index_divides_by_groups", "Maps head h to group h // G "
          "(dividing by the number of groups) instead of h // n_rep.", rkv_divide_by_groups),
    Entry("repeat_kv", "wrong", "copy_axis_after_sequence", "Inserts the copy axis after the "
          "sequence axis before reshaping, so the reshape mixes tokens into heads.",
          rkv_copy_axis_after_seq),
    Entry("repeat_kv", "right", "index_select", None, rkv_index_select),
    Entry("repeat_kv", "right", "einsum_with_ones", None, rkv_einsum_ones),

    Entry("grouped_query_attention", "wrong", "tiled_kv_groups", "Expands K/V with "
          ".repeat(1, n_rep, 1, 1), so query head h uses group h % G instead of h // n_rep.",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "causal_excludes_diagonal", "Builds the causal "
          "mask with tril(-1), so a token cannot attend to itself (the first row is empty).",
          gqa_strict_causal),
    Entry("grouped_query_attention", "wrong", "ignores_causal_flag", "Never applies the causal "
          "mask, ignoring causal=True.", gqa_ignores_causal),
    Entry("grouped_query_attention", "wrong", "assert_for_head_counts", "Checks that num_heads "
          "is a multiple of num_kv_heads with assert, raising AssertionError instead of "
          "ValueError.", gqa_assert),
    Entry("grouped_query_attention", "wrong", "scale_sqrt_d_model", "Scales the scores by "
          "1/sqrt(d_model) instead of 1/sqrt(d_head).", gqa_scale_dmodel),
    Entry("grouped_query_attention", "wrong", "merge_by_plain_reshape", "Merges (B, H, N, d_head)"
          " back with a plain reshape to (B, N, d_model) without transposing heads and tokens.",
          gqa_merge_plain_reshape),
    Entry("grouped_query_attention", "right", "sdpa_float32", None, gqa_sdpa_float32),
    Entry("grouped_query_attention", "right", "per_head_loop_float64", None, gqa_per_head_loop64),

    Entry("kv_cache_bytes", "wrong", "forgets_values", "Counts only the K cache, forgetting the "
          "factor 2 for keys and values.", kv_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "returns_bits", "Multiplies by 8, returning bits instead of "
          "bytes.", kv_bits),
    Entry("kv_cache_bytes", "wrong", "ignores_batch", "Leaves batch_size out of the product.",
          kv_ignores_batch),
    Entry("kv_cache_bytes", "wrong", "reports_kib", "Converts the result to KiB (// 1024) "
          "instead of returning bytes.", kv_in_kib),
    Entry("kv_cache_bytes", "wrong", "hardcodes_two_bytes", "Hard-codes 2 bytes per element "
          "instead of using bytes_per_element.", kv_hardcoded_bf16),
    Entry("kv_cache_bytes", "wrong", "one_layer", "Counts the cache of one layer, leaving out "
          "num_layers.", kv_one_layer),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_prod),
    Entry("kv_cache_bytes", "right", "loop_layers_and_tensors", None, kv_per_layer_loop),

    Entry("decode_with_cache", "wrong", "attends_before_appending", "Attends over the cache "
          "before appending the new token's key and value, so a token never sees itself (and "
          "the first step sees nothing).", dec_excludes_current),
    Entry("decode_with_cache", "wrong", "no_cache_reuse", "Stores keys and values in the cache "
          "but attends only to the new token's key and value each step.", dec_no_cache),
    Entry("decode_with_cache", "wrong", "tiled_groups", "Expands the cached K/V with "
          ".repeat(1, n_rep, 1, 1), so query head h reads group h % G instead of h // n_rep.",
          dec_tiled),
    Entry("decode_with_cache", "wrong", "reprojects_prefix", "Recomputes the keys and values of "
          "the whole prefix x[:, :t+1] at every step instead of projecting only the new token.",
          dec_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "loop_stops_one_early", "Loops over range(N - 1), so "
          "the last token is never decoded.", dec_stops_early),
    Entry("decode_with_cache", "wrong", "keys_projected_with_wq", "Copy-paste slip: projects "
          "the new token's key with w_q instead of w_k.", dec_keys_with_wq),
    Entry("decode_with_cache", "right", "preallocated_cache_sdpa", None, dec_preallocated_sdpa),
    Entry("decode_with_cache", "right", "grouped_einsum_float64", None, dec_grouped_einsum),
]
