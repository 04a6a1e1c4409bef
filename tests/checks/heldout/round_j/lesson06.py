"""Lesson 06 (torch): repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache."""

import math

import torch
import torch.nn.functional as F

from entry import Entry

# --------------------------------------------------------------------------------- repeat_kv


def rkv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def rkv_expand_non_singleton(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


def rkv_loop_off_by_one(x, n_rep):
    copies = []
    for _ in range(1, n_rep):
        copies.append(x.unsqueeze(2))
    copies = copies or [x.unsqueeze(2)[:, :, :0]]
    b, g, n, d = x.shape
    return torch.cat(copies, dim=2).reshape(b, -1, n, d)


def rkv_reshape_minus_one(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).reshape(b, -1, n, d)


def rkv_n_rep_as_total_heads(x, n_rep):
    return x.repeat_interleave(n_rep // x.shape[1], dim=1)


def rkv_repeat_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


def rkv_index_select(x, n_rep):
    idx = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


# -------------------------------------------------------------------- grouped_query_attention


def _heads(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _softmax32(s):
    return torch.softmax(s.float() if s.dtype in (torch.float16, torch.bfloat16) else s, dim=-1)


def _check(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by "
                         f"num_kv_heads={num_kv_heads}")


def _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, *, tile=False, scale=None,
         diag=0, merge_plain=False, check=True):
    if check:
        _check(x.shape[-1], num_heads, num_kv_heads)
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads)
    v = _heads(x @ w_v, num_kv_heads)
    rep = num_heads // num_kv_heads
    if tile:
        k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    else:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    d_head = q.shape[-1]
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(scale if scale else d_head)
    if causal:
        n = x.shape[1]
        allowed = torch.ones(n, n, dtype=torch.bool).tril(diag)
        s = s.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(s, dim=-1)
    w = torch.nan_to_num(w)
    ctx = (w @ v.float()).to(x.dtype)
    if merge_plain:
        return ctx.reshape(x.shape[0], x.shape[1], -1) @ w_o
    return _unheads(ctx) @ w_o


def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, tile=True)


def gqa_scale_kv_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, scale=w_k.shape[1])


def gqa_strict_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, diag=-1)


def gqa_masked_fill_allowed(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    q = _heads(x @ w_q, num_heads)
    rep = num_heads // num_kv_heads
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    s = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.shape[-1])
    if causal:
        n = x.shape[1]
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))  # True = may attend
        s = s.masked_fill(mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    return _unheads((w @ v.float()).to(x.dtype)) @ w_o


def gqa_no_group_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, check=False)


def gqa_merge_plain_reshape(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, merge_plain=True)


def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads).double()
    k = _heads(x @ w_k, num_kv_heads).double().repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).double().repeat_interleave(rep, dim=1)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _unheads(ctx.to(x.dtype)) @ w_o


def gqa_grouped_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not divisible by "
                         f"num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    g, r = num_kv_heads, num_heads // num_kv_heads
    xd = x.double()
    q = (xd @ w_q.double()).view(b, n, g, r, dh)
    k = (xd @ w_k.double()).view(b, n, g, dh)
    v = (xd @ w_v.double()).view(b, n, g, dh)
    s = torch.einsum("bigrd,bjgd->bgrij", q, k) / dh ** 0.5
    if causal:
        i = torch.arange(n)
        s = torch.where(i[None, :] <= i[:, None], s, torch.tensor(float("-inf"),
                                                                 dtype=s.dtype))
    p = torch.softmax(s, dim=-1)
    ctx = torch.einsum("bgrij,bjgd->bigrd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.double()).to(x.dtype)


# ---------------------------------------------------------------------------- kv_cache_bytes


def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_batch_ignored(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kvb_times_eight(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * bytes_per_element * 8


def kvb_next_token_too(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * (seq_len + 1) * batch_size * \
        bytes_per_element


def kvb_v_in_elements(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    per = num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return per * bytes_per_element + per


def kvb_summed_over_steps(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                          bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * batch_size * bytes_per_element
    return sum(per_token * t for t in range(1, seq_len + 1))


def kvb_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod([2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element])


def kvb_layer_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                   bytes_per_element=2):
    total = 0
    for _layer in range(num_layers):
        for _tensor in ("k", "v"):
            total += num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total


# ------------------------------------------------------------------------- decode_with_cache


def _step_attend(q_t, k_seen, v_seen):
    """q_t (B, H, 1, d); k_seen, v_seen (B, H, T, d)."""
    s = (q_t.float() @ k_seen.float().transpose(-2, -1)) / math.sqrt(q_t.shape[-1])
    return (torch.softmax(s, -1) @ v_seen.float()).to(q_t.dtype)


def dwc_reprojects_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(x.shape[1]):
        prefix = x[:, : t + 1]
        q_t = _heads(prefix[:, -1:] @ w_q, num_heads)
        k = _heads(prefix @ w_k, num_kv_heads).repeat_interleave(rep, 1)
        v = _heads(prefix @ w_v, num_kv_heads).repeat_interleave(rep, 1)
        outs.append(_unheads(_step_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_cache_appended_after(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    b, n, _ = x.shape
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        if ks:
            k = torch.cat(ks, 2).repeat_interleave(rep, 1)
            v = torch.cat(vs, 2).repeat_interleave(rep, 1)
            ctx = _step_attend(q_t, k, v)
        else:
            ctx = torch.zeros_like(q_t)
        ks.append(_heads(x_t @ w_k, num_kv_heads))
        vs.append(_heads(x_t @ w_v, num_kv_heads))
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_cat_on_feature_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    k_cache = v_cache = None
    outs = []
    for t in range(x.shape[1]):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        k_new, v_new = _heads(x_t @ w_k, num_kv_heads), _heads(x_t @ w_v, num_kv_heads)
        k_cache = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-1)
        v_cache = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-1)
        k = k_cache.repeat_interleave(rep, 1)
        v = v_cache.repeat_interleave(rep, 1)
        outs.append(_unheads(_step_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads).float()
        ks.append(_heads(x_t @ w_k, num_kv_heads))
        vs.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(ks, 2).repeat_interleave(rep, 1).float()
        v = torch.cat(vs, 2).repeat_interleave(rep, 1).float()
        s = q_t @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
        outs.append(_unheads((torch.softmax(s, -1) @ v).to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_returns_last_step(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs = [], []
    out = None
    for t in range(x.shape[1]):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        ks.append(_heads(x_t @ w_k, num_kv_heads))
        vs.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(ks, 2).repeat_interleave(rep, 1)
        v = torch.cat(vs, 2).repeat_interleave(rep, 1)
        out = _unheads(_step_attend(q_t, k, v)) @ w_o
    return out


def dwc_query_from_last_token(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(x.shape[1]):
        x_t = x[:, t:t + 1]
        q_t = _heads(x[:, -1:] @ w_q, num_heads)
        ks.append(_heads(x_t @ w_k, num_kv_heads))
        vs.append(_heads(x_t @ w_v, num_kv_heads))
        k = torch.cat(ks, 2).repeat_interleave(rep, 1)
        v = torch.cat(vs, 2).repeat_interleave(rep, 1)
        outs.append(_unheads(_step_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_python_lists_per_sequence(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by "
                         f"num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    rows = []
    for bi in range(b):
        k_cache = [[] for _ in range(num_kv_heads)]
        v_cache = [[] for _ in range(num_kv_heads)]
        seq_out = []
        for t in range(n):
            tok = x[bi, t:t + 1]  # (1, d_model): one row per product
            q = (tok @ w_q).double().view(num_heads, dh)
            k = (tok @ w_k).double().view(num_kv_heads, dh)
            v = (tok @ w_v).double().view(num_kv_heads, dh)
            for g in range(num_kv_heads):
                k_cache[g].append(k[g])
                v_cache[g].append(v[g])
            heads = []
            for h in range(num_heads):
                ks = torch.stack(k_cache[h // rep])
                vs = torch.stack(v_cache[h // rep])
                wts = torch.softmax(ks @ q[h] / math.sqrt(dh), dim=0)
                heads.append(wts @ vs)
            seq_out.append(torch.cat(heads).to(x.dtype))
        rows.append(torch.stack(seq_out))
    return torch.stack(rows) @ w_o


def dwc_sdpa_steps(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    dh = d_model // num_heads
    k_cache = x.new_zeros(b, num_kv_heads, 0, dh, dtype=torch.float64)
    v_cache = x.new_zeros(b, num_kv_heads, 0, dh, dtype=torch.float64)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads).double()
        k_cache = torch.cat([k_cache, _heads(x_t @ w_k, num_kv_heads).double()], dim=2)
        v_cache = torch.cat([v_cache, _heads(x_t @ w_v, num_kv_heads).double()], dim=2)
        ctx = F.scaled_dot_product_attention(q_t, k_cache.repeat_interleave(rep, 1),
                                             v_cache.repeat_interleave(rep, 1))
        outs.append(_unheads(ctx.to(x.dtype)) @ w_o)
    return torch.cat(outs, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled_with_repeat",
          "Uses x.repeat(1, n_rep, 1, 1), which tiles the groups (g0, g1, g0, g1, ...), so "
          "head h reads group h % G instead of h // n_rep.", rkv_tile),
    Entry("repeat_kv", "wrong", "repeated_along_sequence",
          "Calls repeat_interleave on dim 2, repeating tokens instead of heads: "
          "(B, G, N*n_rep, d).", rkv_wrong_dim),
    Entry("repeat_kv", "wrong", "expand_non_singleton_axis",
          "Calls x.expand(B, G*n_rep, N, d) directly, which only works when G is 1 and "
          "raises otherwise because expand cannot grow a non-singleton axis.",
          rkv_expand_non_singleton),
    Entry("repeat_kv", "wrong", "loop_makes_n_rep_minus_one_copies",
          "Loops over range(1, n_rep), making n_rep - 1 copies of each group instead of "
          "n_rep.", rkv_loop_off_by_one),
    Entry("repeat_kv", "wrong", "reshape_minus_one_with_empty_sequence",
          "Reshapes with -1 for the head axis, which cannot be inferred when N = 0, so an "
          "empty sequence raises instead of returning an empty tensor.", rkv_reshape_minus_one),
    Entry("repeat_kv", "wrong", "n_rep_read_as_total_heads",
          "Treats n_rep as the target number of heads and repeats each group n_rep // G "
          "times.", rkv_n_rep_as_total_heads),
    Entry("repeat_kv", "right", "repeat_interleave", None, rkv_repeat_interleave),
    Entry("repeat_kv", "right", "index_select_h_div_n_rep", None, rkv_index_select),

    Entry("grouped_query_attention", "wrong", "kv_groups_tiled",
          "Repeats K and V with .repeat (tiling), so query head h uses group h % G instead "
          "of h // n_rep.", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "scaled_by_kv_width",
          "Scales the scores by 1/sqrt(w_k.shape[1]), the total K width of all groups, "
          "instead of 1/sqrt(d_head).", gqa_scale_kv_width),
    Entry("grouped_query_attention", "wrong", "causal_diagonal_excluded",
          "Builds the causal mask with tril(-1), so a token cannot attend to itself and the "
          "first token sees no key at all.", gqa_strict_causal),
    Entry("grouped_query_attention", "wrong", "masked_fill_on_allowed_positions",
          "Calls masked_fill with the tril mask itself (True = allowed), so it blanks out "
          "the past and keeps the future.", gqa_masked_fill_allowed),
    Entry("grouped_query_attention", "wrong", "missing_group_divisibility_check",
          "Never checks num_heads % num_kv_heads, so 4 heads over 3 groups fails inside a "
          "tensor op with a RuntimeError instead of a ValueError.", gqa_no_group_check),
    Entry("grouped_query_attention", "wrong", "heads_merged_without_transpose",
          "Merges (B, H, N, d_head) back with a plain reshape to (B, N, d_model) without "
          "transposing H and N first.", gqa_merge_plain_reshape),
    Entry("grouped_query_attention", "right", "sdpa_float64", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "grouped_einsum_no_repeat", None,
          gqa_grouped_einsum),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "Counts only the key cache, leaving out the factor 2 for the values.", kvb_keys_only),
    Entry("kv_cache_bytes", "wrong", "batch_size_ignored",
          "Leaves batch_size out of the product.", kvb_batch_ignored),
    Entry("kv_cache_bytes", "wrong", "converted_to_bits",
          "Multiplies by 8 at the end, returning bits instead of bytes.", kvb_times_eight),
    Entry("kv_cache_bytes", "wrong", "counts_one_extra_token",
          "Multiplies by seq_len + 1, reserving room for the next token as well.",
          kvb_next_token_too),
    Entry("kv_cache_bytes", "wrong", "values_counted_in_elements",
          "Multiplies the key part by bytes_per_element but adds the value part in elements, "
          "so V is counted at one byte per element.", kvb_v_in_elements),
    Entry("kv_cache_bytes", "wrong", "summed_over_decode_steps",
          "Adds up the cache size after every decode step (1 + 2 + ... + N tokens) instead of "
          "the size of the cache holding N tokens.", kvb_summed_over_steps),
    Entry("kv_cache_bytes", "right", "math_prod", None, kvb_prod),
    Entry("kv_cache_bytes", "right", "layer_and_tensor_loop", None, kvb_layer_loop),

    Entry("decode_with_cache", "wrong", "reprojects_whole_prefix",
          "Keeps no real cache: each step projects the whole prefix x[:, :t+1] with w_k and "
          "w_v again, giving the right values with quadratic projection work.",
          dwc_reprojects_prefix),
    Entry("decode_with_cache", "wrong", "cache_appended_after_attending",
          "Appends the new token's key and value to the cache only after attending, so each "
          "token attends to the earlier tokens but not to itself (the first gets zeros).",
          dwc_cache_appended_after),
    Entry("decode_with_cache", "wrong", "cache_concatenated_on_feature_axis",
          "Concatenates new keys and values to the cache along the last (feature) axis "
          "instead of the sequence axis, so from the second token on the cached keys no "
          "longer match the query's width and the step fails.",
          dwc_cat_on_feature_axis),
    Entry("decode_with_cache", "wrong", "scaled_by_sqrt_d_model",
          "Scales each step's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).",
          dwc_scale_d_model),
    Entry("decode_with_cache", "wrong", "returns_only_last_step",
          "Overwrites the output at every step and returns only the last token's output, "
          "(B, 1, d_model) instead of (B, N, d_model).", dwc_returns_last_step),
    Entry("decode_with_cache", "wrong", "query_from_last_token",
          "Projects the query from x[:, -1:] at every step instead of the current token "
          "x[:, t:t+1].", dwc_query_from_last_token),
    Entry("decode_with_cache", "right", "python_lists_per_sequence", None,
          dwc_python_lists_per_sequence),
    Entry("decode_with_cache", "right", "growing_cache_sdpa", None, dwc_sdpa_steps),
]
