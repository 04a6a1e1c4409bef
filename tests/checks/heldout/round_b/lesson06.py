"""Lesson 06 (GQA and the KV cache, torch): repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry


# ============================================================================ repeat_kv
def rk_w_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)  # head h reads group h % G


def rk_w_sequence_axis(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


def rk_w_numpy_repeat(x, n_rep):
    return np.repeat(x, n_rep, axis=1)


def rk_w_view_expanded(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


def rk_w_index_by_groups(x, n_rep):
    g = x.shape[1]
    index = torch.tensor([h // g for h in range(g * n_rep)])  # divides by G, not n_rep
    return x[:, index]


def rk_w_feature_axis(x, n_rep):
    b, g, n, d = x.shape
    return x.repeat_interleave(n_rep, dim=-1).reshape(b, g * n_rep, n, d)


def rk_r_repeat_interleave(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


def rk_r_index_select(x, n_rep):
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


def rk_r_stack_loop(x, n_rep):
    return torch.stack([x[:, h // n_rep] for h in range(x.shape[1] * n_rep)], dim=1)


# ============================================================================ grouped_query_attention
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, mask=None, scale=None):
    c = torch.promote_types(q.dtype, torch.float32)
    s = q.to(c) @ k.to(c).transpose(-2, -1) / math.sqrt(q.shape[-1] if scale is None else scale)
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return (w @ v.to(c)).to(q.dtype)


def _check_heads(num_heads, num_kv_heads, d_model):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, *, rep="interleave",
         check=True, scale=None, kv_heads_for_split=None):
    d_model = x.shape[-1]
    if check:
        _check_heads(num_heads, num_kv_heads, d_model)
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    kv_split = num_kv_heads if kv_heads_for_split is None else kv_heads_for_split
    k, v = _split(x @ w_k, kv_split), _split(x @ w_v, kv_split)
    if rep == "interleave":
        k, v = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)
    elif rep == "tile":
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    n = x.shape[1]
    mask = None
    if causal:
        mask = torch.ones(n, n, dtype=torch.bool).tril()
    return _merge(_attend(q, k, v, mask, scale)) @ w_o


def gqa_w_tile(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, rep="tile")


def gqa_w_kv_split_into_query_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                    causal=False):
    # splits k and v into num_heads narrower heads and skips the repetition
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, rep=None,
                kv_heads_for_split=num_heads)


def gqa_w_causal_ignored(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, False)


def gqa_w_no_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_head = x.shape[-1] // num_heads
    n_rep = max(1, round(num_heads / num_kv_heads))
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, 1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, 1)
    heads = min(q.shape[1], k.shape[1])
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    ctx = _attend(q[:, :heads], k[:, :heads], v[:, :heads], mask)
    if heads < num_heads:  # pad the missing heads with zeros
        pad = torch.zeros(ctx.shape[0], num_heads - heads, n, d_head, dtype=ctx.dtype)
        ctx = torch.cat([ctx, pad], dim=1)
    return _merge(ctx) @ w_o


def gqa_w_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, scale=x.shape[-1])


def gqa_w_mask_fills_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    _check_heads(num_heads, num_kv_heads, d_model)
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, 1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, 1)
    n = x.shape[1]
    mask = ~torch.ones(n, n, dtype=torch.bool).tril() if causal else None  # True = blocked
    return _merge(_attend(q, k, v, mask)) @ w_o  # ... but passed where True = may attend


def gqa_w_kv_width_from_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    """Computes d_head as w_k's width / num_heads."""
    _check_heads(num_heads, num_kv_heads, x.shape[-1])
    d_head = w_k.shape[1] // num_heads
    q = (x @ w_q)[..., : num_heads * d_head]
    q = _split(q, num_heads)
    k = _split((x @ w_k)[..., : num_kv_heads * d_head], num_kv_heads)
    v = _split((x @ w_v)[..., : num_kv_heads * d_head], num_kv_heads)
    n_rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    ctx = _merge(_attend(q, k, v, mask))
    return ctx @ w_o[: ctx.shape[-1]]


def gqa_r_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check_heads(num_heads, num_kv_heads, x.shape[-1])
    c = torch.promote_types(x.dtype, torch.float32)
    q = _split(x @ w_q, num_heads).to(c)
    k = _split(x @ w_k, num_kv_heads).to(c)
    v = _split(x @ w_v, num_kv_heads).to(c)
    n_rep = num_heads // num_kv_heads
    out = F.scaled_dot_product_attention(q, k.repeat_interleave(n_rep, 1),
                                         v.repeat_interleave(n_rep, 1), is_causal=causal)
    return _merge(out.to(x.dtype)) @ w_o


def gqa_r_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} and num_kv_heads={num_kv_heads} do not fit "
                         f"d_model={d_model}")
    dh = d_model // num_heads
    r = num_heads // num_kv_heads
    x64 = x.double()
    q = (x64 @ w_q.double()).reshape(b, n, num_kv_heads, r, dh)
    k = (x64 @ w_k.double()).reshape(b, n, num_kv_heads, dh)
    v = (x64 @ w_v.double()).reshape(b, n, num_kv_heads, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / math.sqrt(dh)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    w = torch.softmax(s, dim=-1)
    o = torch.einsum("bgrij,bjgd->bigrd", w, v).reshape(b, n, d_model)
    return (o @ w_o.double()).to(x.dtype)


def gqa_r_head_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    _check_heads(num_heads, num_kv_heads, d_model)
    dh = d_model // num_heads
    r = num_heads // num_kv_heads
    n = x.shape[1]
    out = 0
    for h in range(num_heads):
        g = h // r
        q = x @ w_q[:, h * dh:(h + 1) * dh]
        k = x @ w_k[:, g * dh:(g + 1) * dh]
        v = x @ w_v[:, g * dh:(g + 1) * dh]
        mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
        out = out + _attend(q, k, v, mask) @ w_o[h * dh:(h + 1) * dh]
    return out


# ============================================================================ kv_cache_bytes
def kv_w_k_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_w_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kv_w_no_layers(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_w_elements(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size


def kv_w_mib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return (2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
            * bytes_per_element / 2 ** 20)


def kv_w_plus_new_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                        bytes_per_element=2):
    return (2 * num_layers * num_kv_heads * head_dim * (seq_len + 1) * batch_size
            * bytes_per_element)


def kv_w_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kv_r_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_r_per_layer_sum(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element
    return sum(per_token * seq_len * batch_size for _ in range(num_layers))


# ============================================================================ decode_with_cache
def _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, *, mode="append", rep="interleave",
            scale=None, last_only=False):
    d_model = x.shape[-1]
    _check_heads(num_heads, num_kv_heads, d_model)
    b, n, _ = x.shape
    r = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads)
        k_new, v_new = _split(x_t @ w_k, num_kv_heads), _split(x_t @ w_v, num_kv_heads)
        if mode == "before":  # attends to the cache before adding the new token
            k_all = torch.cat(ks, 2) if ks else k_new[:, :, :0]
            v_all = torch.cat(vs, 2) if vs else v_new[:, :, :0]
            ks.append(k_new)
            vs.append(v_new)
        elif mode == "overwrite":
            k_all, v_all = k_new, v_new
        else:
            ks.append(k_new)
            vs.append(v_new)
            k_all, v_all = torch.cat(ks, 2), torch.cat(vs, 2)
        if rep == "interleave":
            k_all, v_all = k_all.repeat_interleave(r, 1), v_all.repeat_interleave(r, 1)
        else:
            k_all, v_all = k_all.repeat(1, r, 1, 1), v_all.repeat(1, r, 1, 1)
        outs.append(_merge(_attend(q, k_all, v_all, None, scale)) @ w_o)
    if last_only:
        return outs[-1]
    return torch.cat(outs, dim=1)


def dc_w_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check_heads(num_heads, num_kv_heads, x.shape[-1])
    r = num_heads // num_kv_heads
    outs = []
    for t in range(x.shape[1]):
        prefix = x[:, :t + 1]
        q = _split(prefix[:, -1:] @ w_q, num_heads)
        k = _split(prefix @ w_k, num_kv_heads).repeat_interleave(r, 1)
        v = _split(prefix @ w_v, num_kv_heads).repeat_interleave(r, 1)
        outs.append(_merge(_attend(q, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dc_w_project_all_upfront(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check_heads(num_heads, num_kv_heads, x.shape[-1])
    r = num_heads // num_kv_heads
    q_all = _split(x @ w_q, num_heads)
    k_all = _split(x @ w_k, num_kv_heads).repeat_interleave(r, 1)
    v_all = _split(x @ w_v, num_kv_heads).repeat_interleave(r, 1)
    outs = []
    for t in range(x.shape[1]):
        outs.append(_merge(_attend(q_all[:, :, t:t + 1], k_all[:, :, :t + 1],
                                   v_all[:, :, :t + 1])) @ w_o)
    return torch.cat(outs, dim=1)


def dc_w_cache_overwritten(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, mode="overwrite")


def dc_w_attend_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, mode="before")


def dc_w_tile(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, rep="tile")


def dc_w_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, scale=x.shape[-1])


def dc_w_last_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, last_only=True)


def dc_r_list_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads)


def dc_r_preallocated_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check_heads(num_heads, num_kv_heads, d_model)
    dh = d_model // num_heads
    r = num_heads // num_kv_heads
    c = torch.promote_types(x.dtype, torch.float32)
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=c)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=c)
    out = torch.zeros(b, n, d_model, dtype=x.dtype)
    for t in range(n):
        x_t = x[:, t]  # (B, d_model)
        q = (x_t @ w_q).reshape(b, num_heads, 1, dh).to(c)
        k_cache[:, :, t] = (x_t @ w_k).reshape(b, num_kv_heads, dh).to(c)
        v_cache[:, :, t] = (x_t @ w_v).reshape(b, num_kv_heads, dh).to(c)
        ctx = F.scaled_dot_product_attention(q, k_cache[:, :, :t + 1].repeat_interleave(r, 1),
                                             v_cache[:, :, :t + 1].repeat_interleave(r, 1))
        out[:, t] = ctx.reshape(b, d_model).to(x.dtype) @ w_o
    return out


def dc_r_grouped_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check_heads(num_heads, num_kv_heads, d_model)
    dh = d_model // num_heads
    r = num_heads // num_kv_heads
    keys, values, rows = [], [], []
    for t in range(n):
        x_t = x[:, t].double()
        q = (x_t @ w_q.double()).reshape(b, num_kv_heads, r, dh)
        keys.append((x_t @ w_k.double()).reshape(b, num_kv_heads, dh))
        values.append((x_t @ w_v.double()).reshape(b, num_kv_heads, dh))
        K, V = torch.stack(keys, 2), torch.stack(values, 2)  # (B, G, t+1, dh)
        w = torch.softmax(torch.einsum("bgrd,bgjd->bgrj", q, K) / math.sqrt(dh), -1)
        ctx = torch.einsum("bgrj,bgjd->bgrd", w, V).reshape(b, d_model)
        rows.append(ctx @ w_o.double())
    return torch.stack(rows, 1).to(x.dtype)


E = Entry
ENTRIES = [
    E("repeat_kv", "wrong", "tile_not_interleave",
      "Uses x.repeat(1, n_rep, 1, 1), so query head h reads group h % G instead of h // n_rep.",
      rk_w_tile),
    E("repeat_kv", "wrong", "repeats_sequence_axis",
      "Repeats along the token axis (dim 2) instead of the head axis.", rk_w_sequence_axis),
    E("repeat_kv", "wrong", "numpy_repeat_on_tensor",
      "Calls np.repeat(x, n_rep, axis=1) on a torch tensor: it round-trips through numpy, "
      "which fails for bfloat16 (and would leave the GPU).", rk_w_numpy_repeat),
    E("repeat_kv", "wrong", "view_of_expanded",
      "Calls .view on the expanded tensor, which cannot merge a stride-0 axis (needs "
      "reshape).", rk_w_view_expanded),
    E("repeat_kv", "wrong", "index_divides_by_groups",
      "Maps head h to group h // G instead of h // n_rep.", rk_w_index_by_groups),
    E("repeat_kv", "wrong", "repeats_features",
      "Repeats along the feature axis and reshapes, interleaving features across heads.",
      rk_w_feature_axis),
    E("repeat_kv", "right", "repeat_interleave", None, rk_r_repeat_interleave),
    E("repeat_kv", "right", "index_select", None, rk_r_index_select),
    E("repeat_kv", "right", "stack_loop", None, rk_r_stack_loop),
    E("grouped_query_attention", "wrong", "tile_groups",
      "Repeats k and v with .repeat, so head h uses group h % G instead of h // n_rep.",
      gqa_w_tile),
    E("grouped_query_attention", "wrong", "kv_split_into_query_heads",
      "Splits k and v into num_heads narrow heads instead of num_kv_heads repeated heads.",
      gqa_w_kv_split_into_query_heads),
    E("grouped_query_attention", "wrong", "causal_ignored",
      "Never applies the causal mask, whatever the causal flag says.", gqa_w_causal_ignored),
    E("grouped_query_attention", "wrong", "no_divisibility_error",
      "Rounds num_heads / num_kv_heads and pads missing heads instead of raising ValueError.",
      gqa_w_no_check),
    E("grouped_query_attention", "wrong", "scale_by_d_model",
      "Scales scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", gqa_w_scale_d_model),
    E("grouped_query_attention", "wrong", "mask_polarity_flipped",
      "Builds the mask as True = blocked and passes it where True means may attend.",
      gqa_w_mask_fills_allowed),
    E("grouped_query_attention", "wrong", "d_head_from_kv_width",
      "Derives d_head from w_k's width divided by num_heads, which is too narrow for GQA.",
      gqa_w_kv_width_from_heads),
    E("grouped_query_attention", "right", "sdpa_repeat_interleave", None, gqa_r_sdpa),
    E("grouped_query_attention", "right", "grouped_einsum_no_repeat", None,
      gqa_r_grouped_einsum),
    E("grouped_query_attention", "right", "per_head_loop", None, gqa_r_head_loop),
    E("kv_cache_bytes", "wrong", "keys_only",
      "Counts only the keys, forgetting the factor 2 for K and V.", kv_w_k_only),
    E("kv_cache_bytes", "wrong", "ignores_batch",
      "Leaves out the batch size.", kv_w_no_batch),
    E("kv_cache_bytes", "wrong", "ignores_layers",
      "Counts one layer's cache only.", kv_w_no_layers),
    E("kv_cache_bytes", "wrong", "elements_not_bytes",
      "Counts elements, never multiplying by bytes_per_element.", kv_w_elements),
    E("kv_cache_bytes", "wrong", "returns_mib",
      "Divides by 2**20 and returns MiB as a float instead of bytes.", kv_w_mib),
    E("kv_cache_bytes", "wrong", "one_token_extra",
      "Caches seq_len + 1 tokens, counting the token being generated.", kv_w_plus_new_token),
    E("kv_cache_bytes", "wrong", "bits_not_bytes",
      "Multiplies by 8, returning bits.", kv_w_bits),
    E("kv_cache_bytes", "right", "math_prod", None, kv_r_prod),
    E("kv_cache_bytes", "right", "per_layer_sum", None, kv_r_per_layer_sum),
    E("decode_with_cache", "wrong", "reprojects_prefix",
      "Projects the whole prefix again at every step instead of only the new token.",
      dc_w_reproject_prefix),
    E("decode_with_cache", "wrong", "projects_everything_upfront",
      "Projects every token's q, k and v before the loop, which is not decoding with a "
      "cache.", dc_w_project_all_upfront),
    E("decode_with_cache", "wrong", "cache_overwritten",
      "Replaces the cache with the new key and value instead of appending them.",
      dc_w_cache_overwritten),
    E("decode_with_cache", "wrong", "attends_before_append",
      "Attends over the cache before adding the new token, so a token never sees itself.",
      dc_w_attend_before_append),
    E("decode_with_cache", "wrong", "tile_groups",
      "Repeats the cached groups with .repeat, mapping head h to group h % G.", dc_w_tile),
    E("decode_with_cache", "wrong", "scale_by_d_model",
      "Scales scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", dc_w_scale_d_model),
    E("decode_with_cache", "wrong", "returns_last_step_only",
      "Returns only the last step's output, (B, 1, d_model), instead of every step.",
      dc_w_last_only),
    E("decode_with_cache", "right", "list_cache_cat", None, dc_r_list_cache),
    E("decode_with_cache", "right", "preallocated_cache_sdpa", None, dc_r_preallocated_sdpa),
    E("decode_with_cache", "right", "grouped_float64", None, dc_r_grouped_float64),
]
