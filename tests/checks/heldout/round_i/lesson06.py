"""Lesson 06 (GQA and KV cache): repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache, torch."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ---------------------------------------------------------------- repeat_kv
def rkv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_token_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_copy_axis_after_tokens(x, n_rep):
    b, g, n, d = x.shape
    return x.unsqueeze(3).expand(b, g, n, n_rep, d).reshape(b, g * n_rep, n, d)


def rkv_range_from_one(x, n_rep):
    heads = [x[:, g] for g in range(x.shape[1]) for _ in range(1, n_rep)]
    return torch.stack(heads, dim=1)


def rkv_guard_ge(x, n_rep):
    if n_rep >= 1:
        return x
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, g * n_rep, n, d)


def rkv_view_after_expand(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rkv_interleave(x, n_rep):
    return x.repeat_interleave(n_rep, dim=1)


def rkv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


# ---------------------------------------------------------------- grouped_query_attention
def _split(t, h):
    b, n, w = t.shape
    return t.reshape(b, n, h, w // h).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, mask=None):
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = q.to(work) @ k.to(work).transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v.to(work)).to(q.dtype)


def _check(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by "
                         f"num_kv_heads={num_kv_heads}")


def gqa_tile_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _split(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _merge(_attend(q, k, v, mask)) @ w_o


def gqa_float_mask_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads).float()
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1).float()
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1).float()
    n = x.shape[1]
    mask = torch.tril(torch.ones(n, n)) if causal else None
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return _merge(ctx.to(x.dtype)) @ w_o


def gqa_d_head_from_w_k(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    d_head = w_k.shape[1] // num_heads
    b, n, _ = x.shape
    q = (x @ w_q).reshape(b, n, -1, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, -1, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, -1, d_head).transpose(1, 2)
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _merge(_attend(q, k, v, mask)) @ w_o


def gqa_no_group_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _merge(_attend(q, k, v, mask)) @ w_o


def gqa_causal_is_not_none(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    n = x.shape[1]
    mask = None
    if causal is not None:
        mask = torch.ones(n, n, dtype=torch.bool).tril()
    return _merge(_attend(q, k, v, mask)) @ w_o


def gqa_merge_reshape_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    return _attend(q, k, v, mask).reshape(x.shape) @ w_o


def gqa_sdpa_interleave(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not a multiple of "
                         f"num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xw = x.to(work)
    q = (xw @ w_q.to(work)).view(b, n, num_heads, dh).permute(0, 2, 1, 3)
    k = (xw @ w_k.to(work)).view(b, n, num_kv_heads, dh).permute(0, 2, 1, 3)
    v = (xw @ w_v.to(work)).view(b, n, num_kv_heads, dh).permute(0, 2, 1, 3)
    rep = num_heads // num_kv_heads
    ctx = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1),
                                         v.repeat_interleave(rep, 1), is_causal=causal)
    out = ctx.permute(0, 2, 1, 3).reshape(b, n, d_model) @ w_o.to(work)
    return out.to(x.dtype)


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} must be divisible by "
                         f"num_kv_heads={num_kv_heads}")
    g, r, dh = num_kv_heads, num_heads // num_kv_heads, d_model // num_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(b, n, g, r, dh)
    k = (x64 @ w_k.double()).reshape(b, n, g, dh)
    v = (x64 @ w_v.double()).reshape(b, n, g, dh)
    s = torch.einsum("bigre,bjge->bgrij", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjge->bigre", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ---------------------------------------------------------------- kv_cache_bytes
def kvb_no_factor_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kvb_mib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total // 2 ** 20


def kvb_hard_coded_two(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def kvb_k_and_v_twice(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    kv_heads = 2 * num_kv_heads  # keys and values
    return 2 * num_layers * kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kvb_per_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token_layer = num_kv_heads * head_dim * bytes_per_element
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += per_token_layer * seq_len * batch_size
    return total


# ---------------------------------------------------------------- decode_with_cache
def _dims(x, num_heads, num_kv_heads):
    d_model = x.shape[-1]
    _check(d_model, num_heads, num_kv_heads)
    return d_model // num_heads, num_heads // num_kv_heads


def dec_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    dh, rep = _dims(x, num_heads, num_kv_heads)
    outs = []
    for t in range(x.shape[1]):
        prefix = x[:, : t + 1]
        q = _split(prefix[:, -1:] @ w_q, num_heads)
        k = _split(prefix @ w_k, num_kv_heads).repeat_interleave(rep, 1)
        v = _split(prefix @ w_v, num_kv_heads).repeat_interleave(rep, 1)
        outs.append(_merge(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dec_cache_excludes_new(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    dh, rep = _dims(x, num_heads, num_kv_heads)
    b, n, _ = x.shape
    kc = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    vc = torch.zeros(b, num_kv_heads, n, dh, dtype=x.dtype)
    outs = []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads)
        kc[:, :, t:t + 1] = _split(xt @ w_k, num_kv_heads)
        vc[:, :, t:t + 1] = _split(xt @ w_v, num_kv_heads)
        k = kc[:, :, :t].repeat_interleave(rep, 1)
        v = vc[:, :, :t].repeat_interleave(rep, 1)
        outs.append(_merge(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dec_returns_last_step(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    dh, rep = _dims(x, num_heads, num_kv_heads)
    ks, vs = [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads)
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, 1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, 1)
        out_t = _merge(_attend(q, k, v)) @ w_o
    return out_t


def dec_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    dh, rep = _dims(x, num_heads, num_kv_heads)
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads)
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat(1, rep, 1, 1)
        v = torch.cat(vs, dim=2).repeat(1, rep, 1, 1)
        outs.append(_merge(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dec_top_left_step_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    dh, rep = _dims(x, num_heads, num_kv_heads)
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads)
        ks.append(_split(xt @ w_k, num_kv_heads))
        vs.append(_split(xt @ w_v, num_kv_heads))
        k = torch.cat(ks, dim=2).repeat_interleave(rep, 1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, 1)
        mask = torch.ones(1, t + 1, dtype=torch.bool).tril()
        outs.append(_merge(_attend(q, k, v, mask)) @ w_o)
    return torch.cat(outs, dim=1)


def dec_cat_on_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    dh, rep = _dims(x, num_heads, num_kv_heads)
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads)
        k_new = _split(xt @ w_k, num_kv_heads)
        v_new = _split(xt @ w_v, num_kv_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=1)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=1)
        k = k_cache.repeat_interleave(rep, 1)[:, :num_heads]
        v = v_cache.repeat_interleave(rep, 1)[:, :num_heads]
        outs.append(_merge(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dec_preallocated_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by "
                         f"num_kv_heads={num_kv_heads}")
    dh, g = d_model // num_heads, num_kv_heads
    r = num_heads // g
    k_cache = torch.zeros(b, n, g, dh, dtype=torch.float64)
    v_cache = torch.zeros(b, n, g, dh, dtype=torch.float64)
    out = torch.empty(b, n, d_model, dtype=x.dtype)
    for t in range(n):
        xt = x[:, t]  # (B, d_model)
        q = (xt @ w_q).double().reshape(b, g, r, dh)
        k_cache[:, t] = (xt @ w_k).double().reshape(b, g, dh)
        v_cache[:, t] = (xt @ w_v).double().reshape(b, g, dh)
        s = torch.einsum("bgre,bjge->bgrj", q, k_cache[:, : t + 1]) / math.sqrt(dh)
        p = torch.exp(s - s.amax(-1, keepdim=True))
        p = p / p.sum(-1, keepdim=True)
        ctx = torch.einsum("bgrj,bjge->bgre", p, v_cache[:, : t + 1]).reshape(b, d_model)
        out[:, t] = (ctx.to(x.dtype) @ w_o)
    return out


def dec_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"need d_model={d_model} divisible by num_heads={num_heads} and "
                         f"num_heads={num_heads} divisible by num_kv_heads={num_kv_heads}")
    rep = num_heads // num_kv_heads
    keys, values, outs = [], [], []
    for t in range(n):
        xt = x[:, t:t + 1]
        q = _split(xt @ w_q, num_heads).float()
        keys.append(_split(xt @ w_k, num_kv_heads).float())
        values.append(_split(xt @ w_v, num_kv_heads).float())
        k = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q, k, v)
        outs.append(_merge(ctx).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


E = "repeat_kv"
ENTRIES = [
    Entry(E, "wrong", "repeat_tiles_groups", "Tensor.repeat tiles the groups (0,1,2,0,1,2), so "
          "query head h reads group h % G instead of h // n_rep.", rkv_tile),
    Entry(E, "wrong", "interleave_on_token_axis", "repeat_interleave is applied along dim=2 "
          "(tokens) instead of dim=1 (groups).", rkv_token_dim),
    Entry(E, "wrong", "copy_axis_after_tokens", "The copy axis is inserted after the token axis, "
          "so the final reshape interleaves tokens into the head axis.",
          rkv_copy_axis_after_tokens),
    Entry(E, "wrong", "range_starts_at_one", "The copy loop runs range(1, n_rep), making only "
          "n_rep - 1 copies of each group.", rkv_range_from_one),
    Entry(E, "wrong", "guard_ge_one", "The early return tests n_rep >= 1 instead of n_rep == 1, "
          "so x is always returned unrepeated.", rkv_guard_ge),
    Entry(E, "wrong", "view_after_expand", ".view on the expanded (non-contiguous) tensor "
          "raises; reshape was needed.", rkv_view_after_expand),
    Entry(E, "right", "repeat_interleave_dim1", None, rkv_interleave),
    Entry(E, "right", "index_select_floor_div", None, rkv_index_select),
]

E = "grouped_query_attention"
ENTRIES += [
    Entry(E, "wrong", "tiles_kv_groups", "K and V are expanded with repeat (tiling), so query "
          "head h uses group h % G instead of h // (H/G).", gqa_tile_groups),
    Entry(E, "wrong", "float_mask_to_sdpa", "The causal mask is a float 0/1 tensor, which SDPA "
          "adds to the scores instead of using it to block future keys.", gqa_float_mask_sdpa),
    Entry(E, "wrong", "d_head_from_w_k", "d_head is computed as w_k.shape[1] // num_heads "
          "(the K/V width) instead of d_model // num_heads.", gqa_d_head_from_w_k),
    Entry(E, "wrong", "no_group_divisibility_check", "It never checks that num_kv_heads divides "
          "num_heads, so a bad pair fails with a RuntimeError instead of a ValueError.",
          gqa_no_group_guard),
    Entry(E, "wrong", "causal_is_not_none", "The mask guard tests causal is not None, so "
          "causal=False still applies the causal mask.", gqa_causal_is_not_none),
    Entry(E, "wrong", "merge_without_transpose", "The heads are merged by reshaping "
          "(B, H, N, d_head) straight to (B, N, d_model) without transposing.",
          gqa_merge_reshape_only),
    Entry(E, "right", "sdpa_repeat_interleave", None, gqa_sdpa_interleave),
    Entry(E, "right", "grouped_einsum_no_repeat", None, gqa_grouped_einsum),
]

E = "kv_cache_bytes"
ENTRIES += [
    Entry(E, "wrong", "keys_only", "It forgets the factor 2 for keys and values, counting only "
          "one of the two caches.", kvb_no_factor_two),
    Entry(E, "wrong", "bits_not_bytes", "It multiplies by 8, returning bits instead of "
          "bytes.", kvb_bits),
    Entry(E, "wrong", "ignores_batch", "batch_size is left out of the product.", kvb_no_batch),
    Entry(E, "wrong", "mebibytes", "It divides by 2**20, reporting MiB instead of bytes.",
          kvb_mib),
    Entry(E, "wrong", "hard_coded_two_bytes", "It multiplies by a hard-coded 2 bytes instead of "
          "bytes_per_element.", kvb_hard_coded_two),
    Entry(E, "wrong", "k_and_v_counted_twice", "K and V are counted twice: once by doubling the "
          "head count and again by the leading factor 2.", kvb_k_and_v_twice),
    Entry(E, "right", "math_prod", None, kvb_prod),
    Entry(E, "right", "per_layer_loop", None, kvb_per_layer_loop),
]

E = "decode_with_cache"
ENTRIES += [
    Entry(E, "wrong", "reprojects_prefix", "Each step projects the whole prefix with w_k and "
          "w_v again instead of only the new token, so projection work grows quadratically.",
          dec_reprojects_prefix),
    Entry(E, "wrong", "cache_slice_excludes_new_token", "The cache is sliced [:t] instead of "
          "[:t + 1], so each step leaves out the token it just added.", dec_cache_excludes_new),
    Entry(E, "wrong", "returns_last_step_only", "It returns out_t, the last loop value, instead "
          "of the concatenated outputs of all steps.", dec_returns_last_step),
    Entry(E, "wrong", "tiles_cached_groups", "The cached K/V are expanded with repeat (tiling), "
          "so query head h reads group h % G.", dec_tiled_groups),
    Entry(E, "wrong", "top_left_step_mask", "Each one-query step gets a top-left tril mask, so "
          "the new query sees only the first cached key instead of all of them.",
          dec_top_left_step_mask),
    Entry(E, "wrong", "cache_grows_on_head_axis", "New keys and values are concatenated along "
          "dim=1 (heads) instead of dim=2 (tokens).", dec_cat_on_heads),
    Entry(E, "right", "preallocated_float64_einsum", None, dec_preallocated_float64),
    Entry(E, "right", "list_cache_sdpa", None, dec_list_cache_sdpa),
]
