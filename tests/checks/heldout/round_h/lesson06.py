"""Lesson 06 (GQA and KV cache, torch)."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ------------------------------------------------------------------ repeat_kv: wrong
def rkv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_seq_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_unflattened(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d)


def rkv_total_heads(x, n_rep):
    g = x.shape[1]
    return x.repeat_interleave(max(n_rep // g, 1), dim=1)


def rkv_index_by_groups(x, n_rep):
    g = x.shape[1]
    heads = [x[:, h // g] for h in range(g * n_rep)]
    return torch.stack(heads, dim=1)


# ------------------------------------------------------------------ repeat_kv: right
def rkv_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def rkv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


# ------------------------------------------------------------------ GQA helpers
def _check(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def _heads(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax_attend(q, k, v, mask=None):
    dt = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v).to(dt)


def _causal(n, device):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


# ------------------------------------------------------------------ grouped_query_attention: wrong
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    mask = _causal(x.shape[1], x.device) if causal else None
    return _merge(_softmax_attend(q, k, v, mask)) @ w_o


def gqa_mask_shifted(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    mask = None
    if causal:
        n = x.shape[1]
        mask = torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1)
    return _merge(_softmax_attend(q, k, v, mask)) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    mask = _causal(x.shape[1], x.device) if causal else None
    return _merge(_softmax_attend(q, k, v, mask)) @ w_o


def gqa_causal_ignored(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    return _merge(_softmax_attend(q, k, v)) @ w_o


def gqa_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    b, n, d_model = x.shape
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    mask = _causal(n, x.device) if causal else None
    ctx = _softmax_attend(q, k, v, mask)
    return ctx.reshape(b, n, d_model) @ w_o


def gqa_v_not_repeated(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads)
    mask = _causal(x.shape[1], x.device) if causal else None
    return _merge(_softmax_attend(q, k, v, mask)) @ w_o


# ------------------------------------------------------------------ grouped_query_attention: right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    q = _heads(x @ w_q, num_heads).float()
    k = _heads(x @ w_k, num_kv_heads).float()
    v = _heads(x @ w_v, num_kv_heads).float()
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return _merge(ctx.to(x.dtype)) @ w_o


def gqa_head_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} must be a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    x64 = x.double()
    out = torch.zeros(b, n, d_model, dtype=torch.float64)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    for h in range(num_heads):
        g = h // rep
        q = x64 @ w_q.double()[:, h * dh:(h + 1) * dh]
        k = x64 @ w_k.double()[:, g * dh:(g + 1) * dh]
        v = x64 @ w_v.double()[:, g * dh:(g + 1) * dh]
        s = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(dh)
        if allowed is not None:
            s = s.masked_fill(~allowed, -math.inf)
        out += (torch.softmax(s, -1) @ v) @ w_o.double()[h * dh:(h + 1) * dh]
    return out.to(x.dtype)


# ------------------------------------------------------------------ kv_cache_bytes: wrong
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


def kvb_divide_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                     bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements // bytes_per_element


def kvb_fp32_hardcoded(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 4


def kvb_mib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 2 ** 20


# ------------------------------------------------------------------ kv_cache_bytes: right
def kvb_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += batch_size * num_kv_heads * seq_len * head_dim * bytes_per_element
    return total


def kvb_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element])


# ------------------------------------------------------------------ decode_with_cache: wrong
def _step_setup(x, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    return num_heads // num_kv_heads


def dwc_cache_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    rep = _step_setup(x, num_heads, num_kv_heads)
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        if ks:
            k = torch.cat(ks, dim=2).repeat_interleave(rep, 1)
            v = torch.cat(vs, dim=2).repeat_interleave(rep, 1)
            ctx = _softmax_attend(q, k, v)
        else:
            ctx = torch.zeros_like(q)
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        outs.append(_merge(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    rep = _step_setup(x, num_heads, num_kv_heads)
    outs = []
    k_cache = v_cache = None
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _heads(xt @ w_q, num_heads)
        k_cache = _heads(xt @ w_k, num_kv_heads)
        v_cache = _heads(xt @ w_v, num_kv_heads)
        ctx = _softmax_attend(q, k_cache.repeat_interleave(rep, 1),
                              v_cache.repeat_interleave(rep, 1))
        outs.append(_merge(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    rep = _step_setup(x, num_heads, num_kv_heads)
    outs = []
    for t in range(x.shape[1]):
        prefix = x[:, :t + 1]
        q = _heads(x[:, t:t + 1] @ w_q, num_heads)
        k = _heads(prefix @ w_k, num_kv_heads).repeat_interleave(rep, 1)
        v = _heads(prefix @ w_v, num_kv_heads).repeat_interleave(rep, 1)
        outs.append(_merge(_softmax_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    rep = _step_setup(x, num_heads, num_kv_heads)
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, 2).repeat(1, rep, 1, 1)
        v = torch.cat(vs, 2).repeat(1, rep, 1, 1)
        outs.append(_merge(_softmax_attend(_heads(xt @ w_q, num_heads), k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_last_step_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    rep = _step_setup(x, num_heads, num_kv_heads)
    ks, vs = [], []
    out = None
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, 2).repeat_interleave(rep, 1)
        v = torch.cat(vs, 2).repeat_interleave(rep, 1)
        out = _merge(_softmax_attend(_heads(xt @ w_q, num_heads), k, v)) @ w_o
    return out


def dwc_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    rep = _step_setup(x, num_heads, num_kv_heads)
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        ks.append(_heads(xt @ w_k, num_kv_heads))
        vs.append(_heads(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, 2).repeat_interleave(rep, 1)
        v = torch.cat(vs, 2).repeat_interleave(rep, 1)
        mask = torch.ones(1, t + 1, dtype=torch.bool).tril()  # causal mask for this step
        outs.append(_merge(_softmax_attend(_heads(xt @ w_q, num_heads), k, v, mask)) @ w_o)
    return torch.cat(outs, dim=1)


# ------------------------------------------------------------------ decode_with_cache: right
def dwc_sdpa_lists(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    rep = num_heads // num_kv_heads
    k_list, v_list, outs = [], [], []
    for t in range(n):
        xt = x[:, t:t + 1, :]
        k_list.append(_heads(xt @ w_k, num_kv_heads).float())
        v_list.append(_heads(xt @ w_v, num_kv_heads).float())
        k = torch.cat(k_list, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(v_list, dim=2).repeat_interleave(rep, dim=1)
        q = _heads(xt @ w_q, num_heads).float()
        ctx = F.scaled_dot_product_attention(q, k, v)
        outs.append(_merge(ctx).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_prealloc_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=torch.float64)
    v_cache = torch.zeros_like(k_cache)
    result = torch.empty(b, n, d_model, dtype=x.dtype)
    for t in range(n):
        row = x[:, t, :]  # (B, d_model)
        q = (row @ w_q).double().view(b, num_heads, dh)
        k_cache[:, :, t] = (row @ w_k).double().view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (row @ w_v).double().view(b, num_kv_heads, dh)
        qg = q.view(b, num_kv_heads, rep, dh)
        s = torch.einsum("bgrd,bgtd->bgrt", qg, k_cache[:, :, :t + 1]) / math.sqrt(dh)
        p = torch.exp(s - s.amax(-1, keepdim=True))
        p = p / p.sum(-1, keepdim=True)
        ctx = torch.einsum("bgrt,bgtd->bgrd", p, v_cache[:, :, :t + 1]).reshape(b, d_model)
        result[:, t] = ctx.to(x.dtype) @ w_o
    return result


ENTRIES = [
    Entry("repeat_kv", "wrong", "tile-with-repeat",
          "Tiles the groups with Tensor.repeat, so query head h reads group h % G instead of "
          "h // n_rep.", rkv_tile),
    Entry("repeat_kv", "wrong", "repeat-sequence-axis",
          "Repeats along the sequence axis (dim 2) instead of the group axis.", rkv_seq_axis),
    Entry("repeat_kv", "wrong", "copies-not-flattened",
          "Expands to (B, G, n_rep, N, d) but never flattens the copies into the head axis.",
          rkv_unflattened),
    Entry("repeat_kv", "wrong", "n_rep-as-total-heads",
          "Treats n_rep as the total number of query heads and repeats each group "
          "n_rep // G times.", rkv_total_heads),
    Entry("repeat_kv", "wrong", "index-by-group-count",
          "Gives head h the group h // G (dividing by the number of groups) instead of "
          "h // n_rep.", rkv_index_by_groups),
    Entry("repeat_kv", "right", "repeat-interleave", None, rkv_interleave),
    Entry("repeat_kv", "right", "index-select", None, rkv_index_select),

    Entry("grouped_query_attention", "wrong", "tiled-groups",
          "Expands K and V with Tensor.repeat (tiling), so query head h uses group h % G "
          "instead of h // (H / G).", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "mask-diagonal-minus-one",
          "Builds the causal mask with tril(diagonal=-1), hiding each token from itself.",
          gqa_mask_shifted),
    Entry("grouped_query_attention", "wrong", "group-divisibility-unchecked",
          "Never checks that num_heads is a multiple of num_kv_heads, so 4 heads over 3 "
          "groups fails with a RuntimeError instead of a ValueError.", gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "causal-flag-ignored",
          "Ignores the causal flag and never masks future tokens.", gqa_causal_ignored),
    Entry("grouped_query_attention", "wrong", "merge-without-transpose",
          "Merges the heads with a plain reshape of (B, H, N, d_head), without moving the "
          "head axis after the sequence axis.", gqa_merge_no_transpose),
    Entry("grouped_query_attention", "wrong", "values-not-repeated",
          "Repeats the keys for each query head but forgets to repeat the values.",
          gqa_v_not_repeated),
    Entry("grouped_query_attention", "right", "sdpa-enable-gqa", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per-head-float64-loop", None, gqa_head_loop),

    Entry("kv_cache_bytes", "wrong", "keys-only",
          "Forgets the factor 2: counts the keys' cache but not the values'.",
          kvb_no_factor_two),
    Entry("kv_cache_bytes", "wrong", "bits-not-bytes",
          "Multiplies by 8, returning bits instead of bytes.", kvb_bits),
    Entry("kv_cache_bytes", "wrong", "batch-ignored",
          "Leaves batch_size out of the product.", kvb_no_batch),
    Entry("kv_cache_bytes", "wrong", "divide-by-element-size",
          "Divides the element count by bytes_per_element instead of multiplying.",
          kvb_divide_bytes),
    Entry("kv_cache_bytes", "wrong", "float32-hardcoded",
          "Hard-codes 4 bytes per element (float32) instead of using bytes_per_element.",
          kvb_fp32_hardcoded),
    Entry("kv_cache_bytes", "wrong", "mebibytes",
          "Returns the size in MiB (divided by 2**20) instead of in bytes.", kvb_mib),
    Entry("kv_cache_bytes", "right", "layer-loop", None, kvb_layer_loop),
    Entry("kv_cache_bytes", "right", "math-prod", None, kvb_prod),

    Entry("decode_with_cache", "wrong", "attend-before-append",
          "Attends over the cache before appending the new token's key and value, so no "
          "token sees itself (the first step has nothing to attend to).",
          dwc_cache_before_append),
    Entry("decode_with_cache", "wrong", "cache-overwritten",
          "Overwrites the cache with the new key and value each step instead of appending, "
          "so each token attends only to itself.", dwc_cache_overwritten),
    Entry("decode_with_cache", "wrong", "prefix-reprojected",
          "Re-projects the whole prefix with w_k and w_v at every step instead of projecting "
          "only the new token and caching it.", dwc_reproject_prefix),
    Entry("decode_with_cache", "wrong", "tiled-groups",
          "Expands the cached groups with Tensor.repeat (tiling), so head h reads group h % G "
          "instead of h // (H / G).", dwc_tiled_groups),
    Entry("decode_with_cache", "wrong", "last-step-only",
          "Keeps only the last step's output instead of concatenating every step's.",
          dwc_last_step_only),
    Entry("decode_with_cache", "wrong", "top-left-step-mask",
          "Masks each step with a top-left tril(1, t+1) mask, so the single new query sees "
          "only the first cached key.", dwc_top_left_step_mask),
    Entry("decode_with_cache", "right", "list-cache-sdpa", None, dwc_sdpa_lists),
    Entry("decode_with_cache", "right", "preallocated-float64", None, dwc_prealloc_float64),
]
