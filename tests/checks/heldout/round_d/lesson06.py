"""Round d, lesson 06 (torch): repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- repeat_kv
def rkv_tile(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def rkv_sequence_axis(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)


def rkv_numpy(x, n_rep):
    return x.detach().cpu().numpy().repeat(n_rep, axis=1)


def rkv_expand_wrong_axis(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, :, None, :].expand(b, g, n, n_rep, d).reshape(b, g * n_rep, n, d)


def rkv_batch_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=0)


def rkv_n_rep_as_total_heads(x, n_rep):
    return x.repeat_interleave(n_rep // x.shape[1], dim=1)


def rkv_index_select(x, n_rep):
    g = x.shape[1]
    idx = torch.arange(g * n_rep, device=x.device) // n_rep
    return x.index_select(1, idx)


def rkv_stack_loop(x, n_rep):
    return torch.stack([x[:, h // n_rep] for h in range(x.shape[1] * n_rep)], dim=1)


# ----------------------------------------------------------------------------- GQA helpers
def _split(t, heads):
    b, n, w = t.shape
    return t.reshape(b, n, heads, w // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _check(x, num_heads, num_kv_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def _attend(q, k, v, mask=None, scale=None):
    dt = q.dtype
    cdt = torch.promote_types(dt, torch.float32)
    q, k, v = q.to(cdt), k.to(cdt), v.to(cdt)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    top = s.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(s - top)
    tot = e.sum(-1, keepdim=True)
    w = e / torch.where(tot == 0, torch.ones_like(tot), tot)
    return (w @ v).to(dt)


def _gqa_core(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, *, tile=False,
              strict=False, scale_d_model=False, split_k_heads=None, check=True):
    if check:
        _check(x, num_heads, num_kv_heads)
    n = x.shape[1]
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, split_k_heads or num_kv_heads)
    v = _split(x @ w_v, split_k_heads or num_kv_heads)
    rep = num_heads // k.shape[1]
    if tile:
        k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    else:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    mask = None
    if causal:
        ones = torch.ones(n, n, dtype=torch.bool, device=x.device)
        mask = ones.tril(-1) if strict else ones.tril()
    scale = 1.0 / math.sqrt(x.shape[-1]) if scale_d_model else None
    return _merge(_attend(q, k, v, mask, scale)) @ w_o


# ----------------------------------------------------------------------------- GQA: wrong
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa_core(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, tile=True)


def gqa_masks_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa_core(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, strict=True)


def gqa_splits_keys_into_query_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                     causal=False):
    return _gqa_core(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal,
                     split_k_heads=num_heads)


def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa_core(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, scale_d_model=True)


def gqa_ignores_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa_core(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, False)


def gqa_no_divisibility_check(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    return _gqa_core(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal, check=False)


# ----------------------------------------------------------------------------- GQA: right
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x, num_heads, num_kv_heads)
    dt = x.dtype
    cdt = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
    q = _split(x @ w_q, num_heads).to(cdt)
    k = _split(x @ w_k, num_kv_heads).to(cdt)
    v = _split(x @ w_v, num_kv_heads).to(cdt)
    rep = num_heads // num_kv_heads
    k = k[:, :, None].expand(-1, -1, rep, -1, -1).flatten(1, 2)
    v = v[:, :, None].expand(-1, -1, rep, -1, -1).flatten(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _merge(ctx.to(dt)) @ w_o


def gqa_group_loop_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0 or num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads}, num_kv_heads={num_kv_heads} and "
                         f"d_model={d_model} must divide evenly")
    dh = d_model // num_heads
    per_group = num_heads // num_kv_heads
    x64 = x.double()
    outs = []
    for h in range(num_heads):
        g = h // per_group
        q = x64 @ w_q.double()[:, h * dh:(h + 1) * dh]
        k = x64 @ w_k.double()[:, g * dh:(g + 1) * dh]
        v = x64 @ w_v.double()[:, g * dh:(g + 1) * dh]
        s = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(dh)
        if causal:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1),
                              -math.inf)
        outs.append(torch.softmax(s, dim=-1) @ v)
    ctx = torch.cat(outs, dim=-1).to(x.dtype)
    return ctx @ w_o


# ----------------------------------------------------------------------------- kv_cache_bytes
def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_forgets_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kvb_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return (2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
            * bytes_per_element) / 2 ** 30


def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element * 8


def kvb_forgets_layers(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kvb_hardcoded_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * 2


def kvb_per_token(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    per_token_per_layer = 2 * num_kv_heads * head_dim * bytes_per_element  # K and V
    return sum(per_token_per_layer * seq_len * batch_size for _ in range(num_layers))


def kvb_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


# ----------------------------------------------------------------------------- decode_with_cache
def _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, mode=None):
    _check(x, num_heads, num_kv_heads)
    b, n, d_model = x.shape
    rep = num_heads // num_kv_heads
    k_cache, v_cache, outs = [], [], []
    for t in range(n):
        if mode == "reproject":
            x_seen = x[:, : t + 1]
            q = _split(x[:, t:t + 1] @ w_q, num_heads)
            k_all = _split(x_seen @ w_k, num_kv_heads)
            v_all = _split(x_seen @ w_v, num_kv_heads)
        else:
            x_t = x[:, t:t + 1]
            q = _split(x_t @ w_q, num_heads)
            k_cache.append(_split(x_t @ w_k, num_kv_heads))
            v_cache.append(_split(x_t @ w_v, num_kv_heads))
            dim = 1 if mode == "cat_heads" else 2
            k_all = torch.cat(k_cache, dim=dim)
            v_all = torch.cat(v_cache, dim=dim)
            if mode == "current_only":
                k_all, v_all = k_cache[-1], v_cache[-1]
            if mode == "exclude_current":
                k_all, v_all = k_all[:, :, :t], v_all[:, :, :t]
        if mode == "cat_heads":
            k_all = k_all.repeat_interleave(max(1, num_heads // k_all.shape[1]), 1)
            v_all = v_all.repeat_interleave(max(1, num_heads // v_all.shape[1]), 1)
        else:
            k_all = k_all.repeat_interleave(rep, 1)
            v_all = v_all.repeat_interleave(rep, 1)
        scale = 1.0 if mode == "no_scale" else None
        outs.append(_merge(_attend(q, k_all, v_all, None, scale)) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_reproject_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, "reproject")


def dwc_current_token_only(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, "current_only")


def dwc_excludes_current(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, "exclude_current")


def dwc_no_scale(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, "no_scale")


def dwc_cat_on_head_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    return _decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, "cat_heads")


def dwc_project_upfront(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x, num_heads, num_kv_heads)
    b, n, _ = x.shape
    rep = num_heads // num_kv_heads
    q_all = _split(x @ w_q, num_heads)
    k_all = _split(x @ w_k, num_kv_heads).repeat_interleave(rep, 1)
    v_all = _split(x @ w_v, num_kv_heads).repeat_interleave(rep, 1)
    outs = []
    for t in range(n):
        outs.append(_merge(_attend(q_all[:, :, t:t + 1], k_all[:, :, :t + 1],
                                   v_all[:, :, :t + 1])) @ w_o)
    return torch.cat(outs, dim=1)


def dwc_float64_prealloc_wo_at_end(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x, num_heads, num_kv_heads)
    b, n, d_model = x.shape
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    k_cache = x.new_zeros((b, num_kv_heads, n, dh), dtype=torch.float64)
    v_cache = x.new_zeros((b, num_kv_heads, n, dh), dtype=torch.float64)
    ctx = x.new_zeros((b, n, d_model), dtype=torch.float64)
    for t in range(n):
        row = x[:, t, :]  # (B, d_model)
        q = (row @ w_q).double().view(b, num_heads, dh)
        k_cache[:, :, t] = (row @ w_k).double().view(b, num_kv_heads, dh)
        v_cache[:, :, t] = (row @ w_v).double().view(b, num_kv_heads, dh)
        qg = q.view(b, num_kv_heads, rep, dh)
        s = torch.einsum("bgrd,bgtd->bgrt", qg, k_cache[:, :, : t + 1]) / math.sqrt(dh)
        w = torch.softmax(s, dim=-1)
        ctx[:, t] = torch.einsum("bgrt,bgtd->bgrd", w, v_cache[:, :, : t + 1]).reshape(b, d_model)
    return ctx.to(x.dtype) @ w_o


def dwc_list_cache_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    _check(x, num_heads, num_kv_heads)
    b, n, d_model = x.shape
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q = _split(x_t @ w_q, num_heads).float()
        ks.append(_split(x_t @ w_k, num_kv_heads).float())
        vs.append(_split(x_t @ w_v, num_kv_heads).float())
        k = torch.cat(ks, 2).repeat_interleave(rep, 1)
        v = torch.cat(vs, 2).repeat_interleave(rep, 1)
        if x.dtype == torch.float64:
            q, k, v = q.double(), k.double(), v.double()
        ctx = F.scaled_dot_product_attention(q, k, v)  # one query: every cached key allowed
        outs.append(_merge(ctx.to(x.dtype)) @ w_o)
    return torch.cat(outs, 1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiles_groups",
          "Uses x.repeat(1, n_rep, 1, 1), which tiles the groups so head h reads group h % G instead of h // n_rep.",
          rkv_tile),
    Entry("repeat_kv", "wrong", "repeats_sequence_axis",
          "Repeats along the sequence axis (dim=2) instead of the head axis.",
          rkv_sequence_axis),
    Entry("repeat_kv", "wrong", "returns_numpy",
          "Converts to numpy and uses np.repeat, returning an np.ndarray instead of a torch.Tensor.",
          rkv_numpy),
    Entry("repeat_kv", "wrong", "expand_after_sequence_axis",
          "Inserts the new axis after the sequence axis before expanding and reshaping, mixing positions into the head axis.",
          rkv_expand_wrong_axis),
    Entry("repeat_kv", "wrong", "repeats_batch_axis",
          "Repeats along the batch axis (dim=0) instead of the head axis.",
          rkv_batch_axis),
    Entry("repeat_kv", "wrong", "n_rep_as_total_heads",
          "Treats n_rep as the total number of query heads and repeats n_rep // G times.",
          rkv_n_rep_as_total_heads),
    Entry("repeat_kv", "right", "index_select", None, rkv_index_select),
    Entry("repeat_kv", "right", "stack_loop", None, rkv_stack_loop),

    Entry("grouped_query_attention", "wrong", "tiled_kv_groups",
          "Repeats the K/V heads by tiling (repeat) instead of repeat_interleave, so query head h uses group h % G.",
          gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "causal_masks_diagonal",
          "Builds the causal mask with tril(-1), so a token cannot attend to itself.",
          gqa_masks_diagonal),
    Entry("grouped_query_attention", "wrong", "splits_kv_into_query_heads",
          "Splits the key and value projections into num_heads heads instead of num_kv_heads.",
          gqa_splits_keys_into_query_heads),
    Entry("grouped_query_attention", "wrong", "scale_by_d_model",
          "Scales the scores by sqrt(d_model) instead of sqrt(d_head).",
          gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "ignores_causal",
          "Never applies the causal mask, whatever causal says.",
          gqa_ignores_causal),
    Entry("grouped_query_attention", "wrong", "no_divisibility_check",
          "Does not check that num_heads is a multiple of num_kv_heads, so a bad pair fails later with a RuntimeError instead of a ValueError.",
          gqa_no_divisibility_check),
    Entry("grouped_query_attention", "right", "sdpa_expand", None, gqa_sdpa),
    Entry("grouped_query_attention", "right", "per_head_loop_float64", None,
          gqa_group_loop_float64),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "Forgets the factor 2: counts the key cache but not the value cache.",
          kvb_keys_only),
    Entry("kv_cache_bytes", "wrong", "forgets_batch",
          "Leaves batch_size out of the product.",
          kvb_forgets_batch),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "Converts the result to GiB (a float) instead of returning bytes.",
          kvb_gib),
    Entry("kv_cache_bytes", "wrong", "counts_bits",
          "Multiplies by 8, counting bits instead of bytes.",
          kvb_bits),
    Entry("kv_cache_bytes", "wrong", "forgets_layers",
          "Counts one layer's cache, forgetting num_layers.",
          kvb_forgets_layers),
    Entry("kv_cache_bytes", "wrong", "hardcodes_two_bytes",
          "Hard-codes 2 bytes per element and ignores bytes_per_element.",
          kvb_hardcoded_fp16),
    Entry("kv_cache_bytes", "right", "per_token_per_layer_sum", None, kvb_per_token),
    Entry("kv_cache_bytes", "right", "math_prod", None, kvb_prod),

    Entry("decode_with_cache", "wrong", "reprojects_prefix",
          "Re-projects every earlier token with w_k and w_v at each step instead of caching, so projection work grows quadratically.",
          dwc_reproject_prefix),
    Entry("decode_with_cache", "wrong", "attends_current_token_only",
          "Attends each step's query only to the new token's key and value, ignoring the cache.",
          dwc_current_token_only),
    Entry("decode_with_cache", "wrong", "excludes_current_token",
          "Attends only to the cached earlier tokens, leaving out the new token's own key and value.",
          dwc_excludes_current),
    Entry("decode_with_cache", "wrong", "no_score_scaling",
          "Forgets to divide the scores by sqrt(d_head).",
          dwc_no_scale),
    Entry("decode_with_cache", "wrong", "cache_grows_on_head_axis",
          "Appends new keys and values to the cache along the head axis instead of the sequence axis.",
          dwc_cat_on_head_axis),
    Entry("decode_with_cache", "wrong", "projects_all_tokens_upfront",
          "Projects the whole sequence with w_q, w_k, w_v before the loop instead of one new token per step.",
          dwc_project_upfront),
    Entry("decode_with_cache", "right", "prealloc_float64_w_o_at_end", None,
          dwc_float64_prealloc_wo_at_end),
    Entry("decode_with_cache", "right", "list_cache_sdpa", None, dwc_list_cache_sdpa),
]
