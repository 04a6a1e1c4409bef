"""Round k, lesson 06 (torch): repeat_kv, grouped_query_attention, kv_cache_bytes,
decode_with_cache."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


# ============================================================================ repeat_kv
@add("repeat_kv", "wrong", "tensor_repeat_tiles",
     "Tensor.repeat tiles the whole group axis (g0, g1, g0, g1, ...), so query head h gets group "
     "h % G instead of h // n_rep.")
def rkv_repeat(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


@add("repeat_kv", "wrong", "interleave_sequence_axis",
     "It repeats along dim 2 (the sequence axis) instead of dim 1 (the group axis).")
def rkv_wrong_dim(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


@add("repeat_kv", "wrong", "expand_non_singleton",
     "It calls expand to grow the group axis, but expand can only broadcast size-1 axes, so it "
     "raises a RuntimeError whenever G > 1.")
def rkv_expand(x, n_rep):
    b, g, n, d = x.shape
    return x.expand(b, g * n_rep, n, d)


@add("repeat_kv", "wrong", "never_flattened",
     "It expands to (B, G, n_rep, N, d) but never reshapes back, returning a 5-D tensor "
     "instead of (B, G*n_rep, N, d).")
def rkv_five_d(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d)


@add("repeat_kv", "wrong", "early_return_on_one_group",
     "The shortcut returns x unchanged when there is a single group (G = 1) instead of when "
     "n_rep = 1, so MQA inputs are never repeated.")
def rkv_bad_shortcut(x, n_rep):
    if x.shape[1] == 1:
        return x
    return x.repeat_interleave(n_rep, dim=1)


@add("repeat_kv", "wrong", "index_divides_by_groups",
     "It maps head h to group h // G instead of h // n_rep, which is wrong whenever G != n_rep.")
def rkv_index_by_g(x, n_rep):
    g = x.shape[1]
    idx = torch.arange(g * n_rep, device=x.device) // g
    return x[:, idx]


@add("repeat_kv", "right", "repeat_interleave")
def rkv_interleave(x, n_rep):
    return torch.repeat_interleave(x, repeats=n_rep, dim=1)


@add("repeat_kv", "right", "einsum_with_ones")
def rkv_einsum(x, n_rep):
    b, g, n, d = x.shape
    ones = torch.ones(n_rep, dtype=x.dtype, device=x.device)
    return torch.einsum("bgnd,r->bgrnd", x, ones).reshape(b, g * n_rep, n, d)


# ============================================================================ grouped_query_attention
def _check(d_model, num_heads, num_kv_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")


def _heads(t, h):
    b, n, w = t.shape
    return t.view(b, n, h, w // h).transpose(1, 2)


def _unheads(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, mask=None, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.float() @ k.float().transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return (w @ v.float()).to(q.dtype)


def _causal(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


@add("grouped_query_attention", "wrong", "repeat_tiles_groups",
     "It shares K/V with Tensor.repeat, which tiles the groups, so query head h reads group "
     "h % G instead of h // (num_heads // num_kv_heads).")
def gqa_tiled(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat(1, rep, 1, 1)
    v = _heads(x @ w_v, num_kv_heads).repeat(1, rep, 1, 1)
    mask = _causal(x.shape[1], x.device) if causal else None
    return _unheads(_attend(q, k, v, mask)) @ w_o


@add("grouped_query_attention", "wrong", "mask_excludes_diagonal",
     "Its causal mask is built with triu(diagonal=0) as the blocked part, which also blocks the "
     "diagonal, so a token cannot attend to itself.")
def gqa_no_self(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    n = x.shape[1]
    mask = None
    if causal:
        mask = ~torch.ones(n, n, dtype=torch.bool, device=x.device).triu(diagonal=0)
    return _unheads(_attend(q, k, v, mask)) @ w_o


@add("grouped_query_attention", "wrong", "scale_by_kv_width",
     "It scales the scores by 1/sqrt(w_k.shape[1]), the whole K width num_kv_heads * d_head, "
     "instead of 1/sqrt(d_head).")
def gqa_scale_width(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = _causal(x.shape[1], x.device) if causal else None
    return _unheads(_attend(q, k, v, mask, scale=1.0 / math.sqrt(w_k.shape[1]))) @ w_o


@add("grouped_query_attention", "wrong", "no_group_divisibility_check",
     "It never checks that num_heads is a multiple of num_kv_heads, so 4 heads over 3 K/V heads "
     "fail with a RuntimeError in the matmul instead of a ValueError naming the values.")
def gqa_no_guard(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = _causal(x.shape[1], x.device) if causal else None
    return _unheads(_attend(q, k, v, mask)) @ w_o


@add("grouped_query_attention", "wrong", "sdpa_float_mask_added",
     "It passes a 0/1 float mask to scaled_dot_product_attention, which adds a float mask to the "
     "scores instead of blocking keys, so the causal case is not causal.")
def gqa_float_mask(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=x.dtype, device=x.device).tril() if causal else None
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return _unheads(ctx) @ w_o


@add("grouped_query_attention", "wrong", "w_o_linear_layout",
     "It applies the output projection as ctx @ w_o.T (nn.Linear's layout) instead of "
     "ctx @ w_o.")
def gqa_wo_t(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    _check(x.shape[-1], num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    q = _heads(x @ w_q, num_heads)
    k = _heads(x @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
    v = _heads(x @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
    mask = _causal(x.shape[1], x.device) if causal else None
    return _unheads(_attend(q, k, v, mask)) @ w_o.T


@add("grouped_query_attention", "right", "sdpa_is_causal")
def gqa_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).view(b, n, num_heads, d_head).permute(0, 2, 1, 3).float()
    k = (x @ w_k).view(b, n, num_kv_heads, d_head).permute(0, 2, 1, 3).float()
    v = (x @ w_v).view(b, n, num_kv_heads, d_head).permute(0, 2, 1, 3).float()
    k = k.repeat_interleave(num_heads // num_kv_heads, dim=1)
    v = v.repeat_interleave(num_heads // num_kv_heads, dim=1)
    if x.dtype == torch.float64:
        q, k, v = q.double(), k.double(), v.double()
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return ctx.permute(0, 2, 1, 3).reshape(b, n, d_model).to(x.dtype) @ w_o


@add("grouped_query_attention", "right", "per_head_loop_float64")
def gqa_loop(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}")
    dh = d_model // num_heads
    per_group = num_heads // num_kv_heads
    x64 = x.double()
    q, k, v = x64 @ w_q.double(), x64 @ w_k.double(), x64 @ w_v.double()
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else torch.ones(n, n,
                                                                                  dtype=torch.bool)
    outs = []
    for h in range(num_heads):
        g = h // per_group
        qh = q[..., h * dh:(h + 1) * dh]
        kh = k[..., g * dh:(g + 1) * dh]
        vh = v[..., g * dh:(g + 1) * dh]
        s = torch.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s = s.masked_fill(~allowed, -math.inf)
        outs.append(torch.einsum("bij,bjd->bid", torch.softmax(s, -1), vh))
    return (torch.cat(outs, dim=-1) @ w_o.double()).to(x.dtype)


# ============================================================================ kv_cache_bytes
@add("kv_cache_bytes", "wrong", "keys_only",
     "It counts only the key cache, forgetting the factor 2 for the values.")
def kvb_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


@add("kv_cache_bytes", "wrong", "bits_not_bytes",
     "It multiplies by 8 bits per byte, returning the cache size in bits instead of bytes.")
def kvb_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    bits = 8 * bytes_per_element
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bits


@add("kv_cache_bytes", "wrong", "assumes_fp16",
     "It hard-codes 2 bytes per element (fp16) instead of using bytes_per_element, so 8-bit and "
     "float32 caches are sized wrongly.")
def kvb_fp16(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    elements = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size
    return elements * 2


@add("kv_cache_bytes", "wrong", "ignores_batch",
     "It leaves out batch_size, giving the cache of a single sequence.")
def kvb_no_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element
    return per_token * seq_len


@add("kv_cache_bytes", "wrong", "seq_len_plus_one",
     "It counts seq_len + 1 positions (as if the next token were already cached) instead of "
     "seq_len.")
def kvb_plus_one(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                 bytes_per_element=2):
    tokens = seq_len + 1
    return 2 * num_layers * num_kv_heads * head_dim * tokens * batch_size * bytes_per_element


@add("kv_cache_bytes", "wrong", "loop_overwrites_total",
     "In the loop over layers it assigns the total (=) instead of accumulating (+=), so it "
     "returns one layer's bytes.")
def kvb_loop(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    total = 0
    for _ in range(num_layers):
        total = 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total


@add("kv_cache_bytes", "right", "math_prod")
def kvb_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


@add("kv_cache_bytes", "right", "fraction_from_bits")
def kvb_fraction(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2):
    bits_per_layer = 2 * num_kv_heads * head_dim * seq_len * batch_size * 8 * bytes_per_element
    return int(sum(Fraction(bits_per_layer, 8) for _ in range(num_layers)))


# ============================================================================ decode_with_cache
def _step_attend(q_t, k, v):
    s = (q_t.float() @ k.float().transpose(-2, -1)) / math.sqrt(q_t.shape[-1])
    return (torch.softmax(s, dim=-1) @ v.float()).to(q_t.dtype)


@add("decode_with_cache", "wrong", "reprojects_prefix",
     "At every step it re-projects the whole prefix x[:, :t+1] with w_k and w_v instead of only "
     "the new token, so projection work grows quadratically (same values).")
def dwc_reproject(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    outs = []
    for t in range(n):
        q_t = _heads(x[:, t:t + 1] @ w_q, num_heads)
        k = _heads(x[:, :t + 1] @ w_k, num_kv_heads).repeat_interleave(rep, dim=1)
        v = _heads(x[:, :t + 1] @ w_v, num_kv_heads).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


@add("decode_with_cache", "wrong", "attend_before_append",
     "It attends over the cache before appending the new token's key and value, so each token "
     "never sees itself (and the first token sees nothing and outputs zeros).")
def dwc_before_append(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    d_head = d_model // num_heads
    k_cache = x.new_zeros(b, num_kv_heads, 0, d_head)
    v_cache = x.new_zeros(b, num_kv_heads, 0, d_head)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        ctx = _step_attend(q_t, k_cache.repeat_interleave(rep, 1), v_cache.repeat_interleave(rep, 1))
        k_cache = torch.cat([k_cache, _heads(x_t @ w_k, num_kv_heads)], dim=2)
        v_cache = torch.cat([v_cache, _heads(x_t @ w_v, num_kv_heads)], dim=2)
        outs.append(_unheads(ctx) @ w_o)
    return torch.cat(outs, dim=1)


@add("decode_with_cache", "wrong", "softmax_over_single_query",
     "It normalises over dim=-2, the query axis, which has size 1 when decoding, so every weight "
     "is 1 and the output is the sum of the cached values.")
def dwc_softmax_dim(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        ks.append(_heads(x_t @ w_k, num_kv_heads))
        vs.append(_heads(x_t @ w_v, num_kv_heads))
        q_t = _heads(x_t @ w_q, num_heads)
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        s = q_t @ k.transpose(-2, -1) / math.sqrt(q_t.shape[-1])
        outs.append(_unheads(torch.softmax(s, dim=-2) @ v) @ w_o)
    return torch.cat(outs, dim=1)


@add("decode_with_cache", "wrong", "cache_repeat_tiles",
     "It expands the cached K/V heads with Tensor.repeat, which tiles the groups, so query head "
     "h reads group h % G instead of h // (num_heads // num_kv_heads).")
def dwc_tiled(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    d_head = d_model // num_heads
    k_cache = torch.zeros(b, num_kv_heads, n, d_head, dtype=x.dtype)
    v_cache = torch.zeros_like(k_cache)
    outs = []
    for t in range(n):
        x_t = x[:, t:t + 1]
        q_t = _heads(x_t @ w_q, num_heads)
        k_cache[:, :, t:t + 1] = _heads(x_t @ w_k, num_kv_heads)
        v_cache[:, :, t:t + 1] = _heads(x_t @ w_v, num_kv_heads)
        k = k_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        v = v_cache[:, :, :t + 1].repeat(1, rep, 1, 1)
        outs.append(_unheads(_step_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=1)


@add("decode_with_cache", "wrong", "concat_steps_on_batch",
     "It concatenates the per-step outputs along dim 0 (the batch axis) instead of dim 1 (the "
     "sequence axis), returning (N*B, 1, d_model).")
def dwc_cat_batch(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        ks.append(_heads(x_t @ w_k, num_kv_heads))
        vs.append(_heads(x_t @ w_v, num_kv_heads))
        q_t = _heads(x_t @ w_q, num_heads)
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v)) @ w_o)
    return torch.cat(outs, dim=0)


@add("decode_with_cache", "wrong", "missing_output_projection",
     "It returns the merged heads of each step without applying the output projection w_o.")
def dwc_no_wo(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads, num_kv_heads)
    rep = num_heads // num_kv_heads
    ks, vs, outs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]
        ks.append(_heads(x_t @ w_k, num_kv_heads))
        vs.append(_heads(x_t @ w_v, num_kv_heads))
        q_t = _heads(x_t @ w_q, num_heads)
        k = torch.cat(ks, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(vs, dim=2).repeat_interleave(rep, dim=1)
        outs.append(_unheads(_step_attend(q_t, k, v)))
    return torch.cat(outs, dim=1)


@add("decode_with_cache", "right", "list_cache_sdpa")
def dwc_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    keys, values, outs = [], [], []
    for t in range(n):
        x_t = x[:, t]
        q = (x_t @ w_q).view(b, num_heads, 1, dh).to(compute)
        keys.append((x_t @ w_k).view(b, num_kv_heads, 1, dh).to(compute))
        values.append((x_t @ w_v).view(b, num_kv_heads, 1, dh).to(compute))
        k = torch.cat(keys, dim=2).repeat_interleave(rep, dim=1)
        v = torch.cat(values, dim=2).repeat_interleave(rep, dim=1)
        ctx = F.scaled_dot_product_attention(q, k, v)
        outs.append(ctx.reshape(b, 1, d_model).to(x.dtype) @ w_o)
    return torch.cat(outs, dim=1)


@add("decode_with_cache", "right", "preallocated_float64_einsum")
def dwc_einsum(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh = d_model // num_heads
    rep = num_heads // num_kv_heads
    x64 = x.double()
    wq, wk, wv, wo = (w.double() for w in (w_q, w_k, w_v, w_o))
    k_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=torch.float64)
    v_cache = torch.zeros(b, num_kv_heads, n, dh, dtype=torch.float64)
    out = torch.zeros(b, n, d_model, dtype=torch.float64)
    for t in range(n):
        xt = x64[:, t]
        q = torch.einsum("bd,de->be", xt, wq).view(b, num_kv_heads, rep, dh)
        k_cache[:, :, t] = torch.einsum("bd,de->be", xt, wk).view(b, num_kv_heads, dh)
        v_cache[:, :, t] = torch.einsum("bd,de->be", xt, wv).view(b, num_kv_heads, dh)
        s = torch.einsum("bgrd,bgtd->bgrt", q, k_cache[:, :, :t + 1]) / math.sqrt(dh)
        ctx = torch.einsum("bgrt,bgtd->bgrd", torch.softmax(s, dim=-1), v_cache[:, :, :t + 1])
        out[:, t] = ctx.reshape(b, d_model) @ wo
    return out.to(x.dtype)
