"""Lesson 06 (torch): repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ---------------------------------------------------------------- repeat_kv, wrong
def rkv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_seq_axis(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


def rkv_no_reshape(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d)


def rkv_cat_batch(x, n_rep):
    return torch.cat([x] * n_rep, dim=0)


def rkv_view_expanded(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(2).expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rkv_n_rep_as_heads(x, n_rep):
    b, g, n, d = x.shape
    per_group = n_rep // g  # reads n_rep as the total number of query heads
    return x.repeat_interleave(per_group, dim=1)


# ---------------------------------------------------------------- repeat_kv, right
def rkv_repeat_interleave(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


def rkv_index_select(x, n_rep):
    heads = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, heads)


# ---------------------------------------------------------------- grouped_query_attention
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_attend(q, k, v, allowed=None, scale=None):
    dt = q.dtype
    c = torch.promote_types(dt, torch.float32)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.to(c) @ k.to(c).transpose(-2, -1)) * scale
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    return ((e / torch.where(tot == 0, torch.ones_like(tot), tot)) @ v.to(c)).to(dt)


def _check_heads(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def gqa_modulo_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat(1, n_rep, 1, 1)
    v = _split(x @ w_v, num_kv_heads).repeat(1, n_rep, 1, 1)
    n = x.shape[1]
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _merge(_softmax_attend(q, k, v, allowed)) @ w_o


def gqa_kv_split_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_v, num_heads)
    n = x.shape[1]
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _merge(_softmax_attend(q, k, v, allowed)) @ w_o


def gqa_triu_as_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    n = x.shape[1]
    allowed = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1) if causal else None
    return _merge(_softmax_attend(q, k, v, allowed)) @ w_o


def gqa_scale_group_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    n = x.shape[1]
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    scale = 1.0 / math.sqrt(x.shape[-1] // num_kv_heads)
    return _merge(_softmax_attend(q, k, v, allowed, scale)) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    n = x.shape[1]
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _merge(_softmax_attend(q, k, v, allowed)) @ w_o


def gqa_sdpa_prescaled(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    n_rep = num_heads // num_kv_heads
    dt = x.dtype
    c = torch.promote_types(dt, torch.float32)
    q = _split(x @ w_q, num_heads).to(c)
    q = q / math.sqrt(q.shape[-1])  # kept from the hand-written version
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1).to(c)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1).to(c)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx.to(dt)) @ w_o


# ---------------------------------------------------------------- grouped_query_attention, right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    _check_heads(d_model, num_heads, num_kv_heads)
    c = torch.promote_types(x.dtype, torch.float32)
    q = _split((x @ w_q).to(c), num_heads)
    k = _split((x @ w_k).to(c), num_kv_heads)
    v = _split((x @ w_v).to(c), num_kv_heads)
    rep = num_heads // num_kv_heads
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx).to(x.dtype) @ w_o


def gqa_head_loop64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0 or num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} / num_kv_heads={num_kv_heads} do not divide "
                         f"d_model={d_model} / num_heads")
    dh = d_model // num_heads
    group_size = num_heads // num_kv_heads
    x64 = x.double()
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    heads = []
    for h in range(num_heads):
        g = h // group_size
        q = x64 @ w_q.double()[:, h * dh:(h + 1) * dh]
        k = x64 @ w_k.double()[:, g * dh:(g + 1) * dh]
        v = x64 @ w_v.double()[:, g * dh:(g + 1) * dh]
        s = torch.einsum("bqe,bke->bqk", q, k) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(~mask, float("-inf"))
        heads.append(torch.softmax(s, dim=-1) @ v)
    return (torch.cat(heads, dim=-1) @ w_o.double()).to(x.dtype)


# ---------------------------------------------------------------- kv_cache_bytes
def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kvb_fixed_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def kvb_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 30


def kvb_one_layer(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


# ---------------------------------------------------------------- kv_cache_bytes, right
def kvb_meta_tensor(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    cache = torch.empty((2, num_layers, batch_size, num_kv_heads, seq_len, head_dim),
                        device="meta")
    return int(cache.numel()) * bytes_per_element


def kvb_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


# ---------------------------------------------------------------- decode_with_cache
def _dec_setup(x, num_heads, num_kv_heads):
    _check_heads(x.shape[-1], num_heads, num_kv_heads)
    return x.shape[0], x.shape[1], x.shape[-1] // num_heads, num_heads // num_kv_heads


def dwc_overwrite_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        k_cache = _split(x_t @ w_k, num_kv_heads)  # replaced every step
        v_cache = _split(x_t @ w_v, num_kv_heads)
        ctx = _softmax_attend(q, k_cache.repeat_interleave(rep, 1), v_cache.repeat_interleave(rep, 1))
        outs.append(_merge(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_exclude_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        if ks:
            k = torch.cat(ks, dim=2).repeat_interleave(rep, 1)
            v = torch.cat(vs, dim=2).repeat_interleave(rep, 1)
            ctx = _softmax_attend(q, k, v)
        else:
            ctx = torch.zeros_like(q)
        ks.append(_split(x_t @ w_k, num_kv_heads))  # appended after attending
        vs.append(_split(x_t @ w_v, num_kv_heads))
        outs.append(_merge(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    outs = []
    for t in range(n):
        prefix = x[:, :t + 1]
        q = _split(x[:, t:t + 1] @ w_q, num_heads)
        k = _split(prefix @ w_k, num_kv_heads).repeat_interleave(rep, 1)
        v = _split(prefix @ w_v, num_kv_heads).repeat_interleave(rep, 1)
        outs.append(_merge(_softmax_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_modulo_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    k_cache = x.new_empty((b, num_kv_heads, n, dh))
    v_cache = x.new_empty((b, num_kv_heads, n, dh))
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _split(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _split(x_t @ w_v, num_kv_heads)
        k = k_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        v = v_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        outs.append(_merge(_softmax_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_stack_outputs(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    k_cache = x.new_empty((b, num_kv_heads, n, dh))
    v_cache = x.new_empty((b, num_kv_heads, n, dh))
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _split(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _split(x_t @ w_v, num_kv_heads)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        outs.append(_merge(_softmax_attend(q, k, v)) @ w_o)
    return torch.stack(outs, dim=1)


def dwc_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    k_cache = x.new_empty((b, num_kv_heads, n, dh))
    v_cache = x.new_empty((b, num_kv_heads, n, dh))
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _split(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _split(x_t @ w_v, num_kv_heads)
        k = k_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        v = v_cache[:, :, :t + 1].repeat_interleave(rep, 1)
        allowed = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal mask for this step
        outs.append(_merge(_softmax_attend(q, k, v, allowed)) @ w_o)
    return torch.cat(outs, dim=1)


# ---------------------------------------------------------------- decode_with_cache, right
def dwc_sdpa_steps(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros((b, num_kv_heads, n, dh), dtype=c)
    v_cache = torch.zeros((b, num_kv_heads, n, dh), dtype=c)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1, :]
        q = _split(x_t @ w_q, num_heads).to(c)
        k_cache[:, :, t] = _split(x_t @ w_k, num_kv_heads)[:, :, 0].to(c)
        v_cache[:, :, t] = _split(x_t @ w_v, num_kv_heads)[:, :, 0].to(c)
        ctx = F.scaled_dot_product_attention(
            q, k_cache[:, :, :t + 1].repeat_interleave(rep, 1),
            v_cache[:, :, :t + 1].repeat_interleave(rep, 1))
        outs.append(_merge(ctx).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_list_cache_einsum64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, dh, rep = _dec_setup(x, num_heads, num_kv_heads)
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t, :]  # (B, d_model)
        q = (x_t @ w_q).double().view(b, num_kv_heads, rep, dh)  # heads grouped by KV head
        keys.append((x_t @ w_k).double().view(b, num_kv_heads, dh))
        values.append((x_t @ w_v).double().view(b, num_kv_heads, dh))
        K = torch.stack(keys, dim=2)  # (B, G, t+1, dh)
        V = torch.stack(values, dim=2)
        s = torch.einsum("bgrd,bgtd->bgrt", q, K) / math.sqrt(dh)
        p = torch.softmax(s, dim=-1)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, V).reshape(b, num_heads * dh)
        outs.append((ctx.to(x.dtype) @ w_o)[:, None, :])
    return torch.cat(outs, dim=1)


E = Entry
ENTRIES = [
    E("repeat_kv", "wrong", "tiles_groups",
      "Uses x.repeat(1, n_rep, 1, 1), which tiles the groups so head h reads group h % G "
      "instead of h // n_rep.", rkv_tile),
    E("repeat_kv", "wrong", "repeats_along_sequence",
      "Repeats along dim=2 (the sequence axis) instead of the group axis.", rkv_seq_axis),
    E("repeat_kv", "wrong", "expand_without_reshape",
      "Expands to (B, G, n_rep, N, d) but forgets to reshape to (B, G*n_rep, N, d).",
      rkv_no_reshape),
    E("repeat_kv", "wrong", "copies_along_batch",
      "Concatenates the copies along the batch axis (dim=0) instead of the head axis.",
      rkv_cat_batch),
    E("repeat_kv", "wrong", "view_on_expanded_tensor",
      "Calls .view on the expanded (non-contiguous) tensor instead of .reshape, which raises "
      "a RuntimeError when n_rep > 1.", rkv_view_expanded),
    E("repeat_kv", "wrong", "n_rep_read_as_total_heads",
      "Reads n_rep as the total number of query heads and repeats each group n_rep // G "
      "times.", rkv_n_rep_as_heads),
    E("repeat_kv", "right", "repeat_interleave", None, rkv_repeat_interleave),
    E("repeat_kv", "right", "index_select_floor_div", None, rkv_index_select),

    E("grouped_query_attention", "wrong", "groups_tiled_modulo",
      "Expands K/V with .repeat, so query head h reads group h % num_kv_heads instead of "
      "h // (num_heads // num_kv_heads).", gqa_modulo_groups),
    E("grouped_query_attention", "wrong", "kv_split_into_num_heads",
      "Splits the keys and values into num_heads heads instead of num_kv_heads groups.",
      gqa_kv_split_num_heads),
    E("grouped_query_attention", "wrong", "triu_used_as_allowed",
      "Builds the causal mask with torch.triu(..., diagonal=1) (the blocked positions) and "
      "uses it as the allowed mask.", gqa_triu_as_allowed),
    E("grouped_query_attention", "wrong", "scaled_by_group_width",
      "Scales the scores by 1/sqrt(d_model / num_kv_heads) instead of 1/sqrt(d_head).",
      gqa_scale_group_width),
    E("grouped_query_attention", "wrong", "no_num_kv_heads_check",
      "Never checks that num_kv_heads divides num_heads, so a bad head count fails later "
      "with a RuntimeError instead of a ValueError.", gqa_no_group_check),
    E("grouped_query_attention", "wrong", "sdpa_on_prescaled_queries",
      "Passes queries already divided by sqrt(d_head) to scaled_dot_product_attention, which "
      "scales again.", gqa_sdpa_prescaled),
    E("grouped_query_attention", "right", "sdpa_repeat_interleave", None, gqa_sdpa),
    E("grouped_query_attention", "right", "per_head_loop_float64", None, gqa_head_loop64),

    E("kv_cache_bytes", "wrong", "keys_only",
      "Counts only the key cache, forgetting the factor 2 for the values.", kvb_keys_only),
    E("kv_cache_bytes", "wrong", "bits_not_bytes",
      "Multiplies by 8, giving bits instead of bytes.", kvb_bits),
    E("kv_cache_bytes", "wrong", "batch_size_dropped",
      "Leaves batch_size out of the product.", kvb_no_batch),
    E("kv_cache_bytes", "wrong", "bytes_per_element_hardcoded",
      "Hard-codes 2 bytes per element (fp16) instead of using bytes_per_element.",
      kvb_fixed_fp16),
    E("kv_cache_bytes", "wrong", "converted_to_gib",
      "Converts the result to GiB (a float) instead of returning bytes as an int.", kvb_gib),
    E("kv_cache_bytes", "wrong", "layers_forgotten",
      "Forgets to multiply by the number of layers.", kvb_one_layer),
    E("kv_cache_bytes", "right", "meta_tensor_numel", None, kvb_meta_tensor),
    E("kv_cache_bytes", "right", "per_layer_loop", None, kvb_per_layer_loop),

    E("decode_with_cache", "wrong", "cache_overwritten",
      "Replaces the cache with the new token's key and value each step instead of appending, "
      "so every token attends only to itself.", dwc_overwrite_cache),
    E("decode_with_cache", "wrong", "current_token_excluded",
      "Attends over the cache before appending the new token's key and value, so each token "
      "misses itself (and the first gets zeros).", dwc_exclude_current),
    E("decode_with_cache", "wrong", "prefix_reprojected",
      "Re-projects keys and values of the whole prefix at every step instead of caching them "
      "(projection work quadratic in N).", dwc_reproject_prefix),
    E("decode_with_cache", "wrong", "groups_tiled_modulo",
      "Expands the cached groups with .repeat, so query head h reads group h % G instead of "
      "h // n_rep.", dwc_modulo_groups),
    E("decode_with_cache", "wrong", "outputs_stacked",
      "Stacks the per-step outputs (adding an axis) instead of concatenating them along the "
      "sequence axis.", dwc_stack_outputs),
    E("decode_with_cache", "wrong", "top_left_mask_for_new_query",
      "Applies a top-left causal mask of shape (1, t+1) to the single new query, so it only "
      "sees the first cached token.", dwc_top_left_step_mask),
    E("decode_with_cache", "right", "preallocated_cache_sdpa", None, dwc_sdpa_steps),
    E("decode_with_cache", "right", "list_cache_grouped_einsum", None, dwc_list_cache_einsum64),
]
