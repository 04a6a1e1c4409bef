"""Lesson 06 (torch): repeat_kv, grouped_query_attention, kv_cache_bytes, decode_with_cache, as
learners write them."""

import math

import torch
import torch.nn.functional as F

from entry import Entry


# ----------------------------------------------------------------------------- repeat_kv: wrong
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def repeat_kv_sequence_axis(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=2)


def repeat_kv_forgets_reshape(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None, :, :].expand(b, g, n_rep, n, d)


def repeat_kv_no_dim(x, n_rep):
    return x.repeat_interleave(n_rep)


def repeat_kv_axis_after_tokens(x, n_rep):
    b, g, n, d = x.shape
    copies = x[:, :, :, None, :].expand(b, g, n, n_rep, d)  # (B, G, N, n_rep, d)
    return copies.reshape(b, g * n_rep, n, d)


def repeat_kv_view_of_expand(x, n_rep):
    b, g, n, d = x.shape
    return x[:, :, None].expand(b, g, n_rep, n, d).view(b, g * n_rep, n, d)


# ----------------------------------------------------------------------------- repeat_kv: right
def repeat_kv_index_select(x, n_rep):
    groups = x.shape[1]
    index = torch.arange(groups * n_rep, device=x.device) // n_rep  # head h -> group h // n_rep
    return x.index_select(1, index)


def repeat_kv_stack_loop(x, n_rep):
    heads = []
    for g in range(x.shape[1]):
        for _ in range(n_rep):
            heads.append(x[:, g])
    if not heads:
        return x.clone()
    return torch.stack(heads, dim=1)


# ----------------------------------------------------------------------------- GQA helpers
def _split(t, heads):
    b, n, width = t.shape
    return t.reshape(b, n, heads, width // heads).transpose(1, 2)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(1, 2).reshape(b, n, h * d)


def _attend(q, k, v, causal, scale):
    scores = (q @ k.transpose(-2, -1)).float() * scale
    if causal:
        n = q.shape[-2]
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1).to(v.dtype) @ v


# ----------------------------------------------------------------------------- GQA: wrong
def gqa_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_head = x.shape[-1] // num_heads
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat(1, n_rep, 1, 1)
    v = _split(x @ w_v, num_kv_heads).repeat(1, n_rep, 1, 1)
    return _merge(_attend(q, k, v, causal, d_head ** -0.5)) @ w_o


def gqa_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    return _merge(_attend(q, k, v, causal, x.shape[-1] ** -0.5)) @ w_o


def gqa_mask_hides_diagonal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    n = x.shape[1]
    d_head = x.shape[-1] // num_heads
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    scores = (q @ k.transpose(-2, -1)).float() / math.sqrt(d_head)
    if causal:
        future = torch.ones(n, n, dtype=torch.bool).triu()  # meant: keys after the query
        scores = scores.masked_fill(future, float("-inf"))
    return _merge(torch.softmax(scores, dim=-1).to(x.dtype) @ v) @ w_o


def gqa_ignores_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_head = x.shape[-1] // num_heads
    n_rep = num_heads // num_kv_heads
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    return _merge(_attend(q, k, v, False, d_head ** -0.5)) @ w_o


def gqa_kv_split_with_num_heads(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(1, 2)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(1, 2)
    v = (x @ w_v).reshape(b, n, num_heads, d_head).transpose(1, 2)
    if n_rep > 1:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    return _merge(_attend(q, k, v, causal, d_head ** -0.5)) @ w_o


def gqa_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    q = (x @ w_q).reshape(b, num_heads, n, d_head)
    k = (x @ w_k).reshape(b, num_kv_heads, n, d_head).repeat_interleave(n_rep, dim=1)
    v = (x @ w_v).reshape(b, num_kv_heads, n, d_head).repeat_interleave(n_rep, dim=1)
    ctx = _attend(q, k, v, causal, d_head ** -0.5)
    return ctx.reshape(b, n, d_model) @ w_o


def gqa_no_value_error(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_head = x.shape[-1] // num_heads
    n_rep = max(1, round(num_heads / num_kv_heads))
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)[:, :num_heads]
    v = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)[:, :num_heads]
    if k.shape[1] < num_heads:  # pad the last group so the shapes line up
        extra = num_heads - k.shape[1]
        k = torch.cat([k, k[:, -1:].expand(-1, extra, -1, -1)], dim=1)
        v = torch.cat([v, v[:, -1:].expand(-1, extra, -1, -1)], dim=1)
    return _merge(_attend(q, k, v, causal, d_head ** -0.5)) @ w_o


# ----------------------------------------------------------------------------- GQA: right
def gqa_sdpa_enable_gqa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    d_model = x.shape[-1]
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} must divide d_model={d_model} and be a "
                         f"multiple of num_kv_heads={num_kv_heads}")
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_kv_heads)
    v = _split(x @ w_v, num_kv_heads)
    ctx = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return _merge(ctx) @ w_o


def gqa_grouped_einsum_float32(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}")
    dh, g = d_model // num_heads, num_kv_heads
    r = num_heads // g
    x32 = x.float()
    q = (x32 @ w_q.float()).reshape(b, n, g, r, dh)  # query head h = group h // r, member h % r
    k = (x32 @ w_k.float()).reshape(b, n, g, dh)
    v = (x32 @ w_v.float()).reshape(b, n, g, dh)
    s = torch.einsum("bqgrd,bkgd->bgrqk", q, k) / math.sqrt(dh)
    if causal:
        allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~allowed, float("-inf"))
    p = s.softmax(dim=-1)
    ctx = torch.einsum("bgrqk,bkgd->bqgrd", p, v).reshape(b, n, d_model)
    return (ctx @ w_o.float()).to(x.dtype)


# ----------------------------------------------------------------------------- kv_cache_bytes
def kv_bytes_keys_only(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_elements(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                      bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size


def kv_bytes_forgets_layers(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                            bytes_per_element=2):
    return 2 * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


def kv_bytes_forgets_batch(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * bytes_per_element


def kv_bytes_in_gib(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                    bytes_per_element=2):
    total = 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element
    return total / 1024 ** 3


def kv_bytes_bits(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                  bytes_per_element=2):
    bits = 8 * bytes_per_element
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bits


def kv_bytes_per_token_times_layers(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                                    bytes_per_element=2):
    per_token = 2 * num_kv_heads * head_dim * bytes_per_element * num_layers
    return per_token * seq_len * batch_size


def kv_bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                       bytes_per_element=2):
    return math.prod((2, num_layers, num_kv_heads, head_dim, seq_len, batch_size,
                      bytes_per_element))


def kv_bytes_allocate_meta(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1,
                           bytes_per_element=2):
    dtype = {1: torch.int8, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[
        bytes_per_element]
    cache = torch.empty(num_layers, 2, batch_size, num_kv_heads, seq_len, head_dim,
                        dtype=dtype, device="meta")
    return cache.numel() * cache.element_size()


# ----------------------------------------------------------------------------- decode_with_cache
def _decode_dims(x, num_heads, num_kv_heads):
    b, n, d_model = x.shape
    return b, n, d_model, d_model // num_heads, num_heads // num_kv_heads


def decode_recomputes_prefix(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    outputs = []
    for t in range(n):
        prefix = x[:, : t + 1]  # run the causal layer again on everything so far
        q = _split(prefix @ w_q, num_heads)
        k = _split(prefix @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
        v = _split(prefix @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
        ctx = _attend(q, k, v, True, d_head ** -0.5)
        outputs.append(_merge(ctx[:, :, -1:]) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_projects_all_first(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    q_all = _split(x @ w_q, num_heads)
    k_all = _split(x @ w_k, num_kv_heads).repeat_interleave(n_rep, dim=1)
    v_all = _split(x @ w_v, num_kv_heads).repeat_interleave(n_rep, dim=1)
    outputs = []
    for t in range(n):
        q_t = q_all[:, :, t : t + 1]
        ctx = _attend(q_t, k_all[:, :, : t + 1], v_all[:, :, : t + 1], False, d_head ** -0.5)
        outputs.append(_merge(ctx) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_sdpa_is_causal(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    k_cache, v_cache, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q_t = _split(x_t @ w_q, num_heads)
        k_cache.append(_split(x_t @ w_k, num_kv_heads))
        v_cache.append(_split(x_t @ w_v, num_kv_heads))
        k = torch.cat(k_cache, dim=2).repeat_interleave(n_rep, dim=1)
        v = torch.cat(v_cache, dim=2).repeat_interleave(n_rep, dim=1)
        ctx = F.scaled_dot_product_attention(q_t, k, v, is_causal=True)
        outputs.append(_merge(ctx) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_appends_after_attending(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    k_cache = x.new_zeros(b, num_kv_heads, 0, d_head)
    v_cache = x.new_zeros(b, num_kv_heads, 0, d_head)
    outputs = []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q_t = _split(x_t @ w_q, num_heads)
        k = k_cache.repeat_interleave(n_rep, dim=1)
        v = v_cache.repeat_interleave(n_rep, dim=1)
        ctx = _attend(q_t, k, v, False, d_head ** -0.5)
        outputs.append(_merge(ctx) @ w_o)
        k_cache = torch.cat([k_cache, _split(x_t @ w_k, num_kv_heads)], dim=2)
        v_cache = torch.cat([v_cache, _split(x_t @ w_v, num_kv_heads)], dim=2)
    return torch.cat(outputs, dim=1)


def decode_overwrites_cache(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    outputs = []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q_t = _split(x_t @ w_q, num_heads)
        k_cache = _split(x_t @ w_k, num_kv_heads)  # the cache is just the new token
        v_cache = _split(x_t @ w_v, num_kv_heads)
        k = k_cache.repeat_interleave(n_rep, dim=1)
        v = v_cache.repeat_interleave(n_rep, dim=1)
        outputs.append(_merge(_attend(q_t, k, v, False, d_head ** -0.5)) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_cat_on_head_axis(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    k_cache, v_cache, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q_t = _split(x_t @ w_q, num_heads)
        k_cache.append(_split(x_t @ w_k, num_kv_heads))
        v_cache.append(_split(x_t @ w_v, num_kv_heads))
        k = torch.cat(k_cache, dim=1).repeat_interleave(n_rep, dim=1)
        v = torch.cat(v_cache, dim=1).repeat_interleave(n_rep, dim=1)
        outputs.append(_merge(_attend(q_t, k, v, False, d_head ** -0.5)) @ w_o)
    return torch.cat(outputs, dim=1)


def decode_tiled_groups(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    k_cache, v_cache, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t : t + 1]
        q_t = _split(x_t @ w_q, num_heads)
        k_cache.append(_split(x_t @ w_k, num_kv_heads))
        v_cache.append(_split(x_t @ w_v, num_kv_heads))
        k = torch.cat(k_cache, dim=2).repeat(1, n_rep, 1, 1)
        v = torch.cat(v_cache, dim=2).repeat(1, n_rep, 1, 1)
        outputs.append(_merge(_attend(q_t, k, v, False, d_head ** -0.5)) @ w_o)
    return torch.cat(outputs, dim=1)


# ----------------------------------------------------------------------------- decode: right
def decode_per_sequence_sdpa(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    out = torch.empty_like(x)
    for s in range(b):  # one sequence at a time, a preallocated cache per sequence
        k_cache = x.new_empty(num_kv_heads, n, d_head)
        v_cache = x.new_empty(num_kv_heads, n, d_head)
        for t in range(n):
            x_t = x[s, t]  # (d_model,)
            q_t = (x_t @ w_q).view(num_heads, 1, d_head)
            k_cache[:, t] = (x_t @ w_k).view(num_kv_heads, d_head)
            v_cache[:, t] = (x_t @ w_v).view(num_kv_heads, d_head)
            ctx = F.scaled_dot_product_attention(
                q_t.float(), k_cache[:, : t + 1].float(), v_cache[:, : t + 1].float(),
                enable_gqa=True)  # (H, 1, d_head): every cached key is in the past
            out[s, t] = (ctx.reshape(d_model).to(x.dtype) @ w_o)
    return out


def decode_grouped_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads):
    # Keeps the K/V cache as lists of per-token tensors and attends in float64, group by group.
    b, n, d_model, d_head, n_rep = _decode_dims(x, num_heads, num_kv_heads)
    keys, values, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t]  # (B, d_model)
        q = (x_t @ w_q).double().view(b, num_kv_heads, n_rep, d_head)
        keys.append((x_t @ w_k).double().view(b, num_kv_heads, d_head))
        values.append((x_t @ w_v).double().view(b, num_kv_heads, d_head))
        k = torch.stack(keys, dim=2)  # (B, G, t + 1, d_head)
        v = torch.stack(values, dim=2)
        s = torch.einsum("bgrd,bgtd->bgrt", q, k) / math.sqrt(d_head)
        ctx = torch.einsum("bgrt,bgtd->bgrd", torch.softmax(s, dim=-1), v)
        outputs.append(ctx.reshape(b, d_model).to(x.dtype) @ w_o)
    return torch.stack(outputs, dim=1)


ENTRIES = [
    Entry("repeat_kv", "wrong", "tiled",
          "Uses x.repeat, which tiles the groups (g0, g1, g0, g1, ...) instead of interleaving "
          "them, so query head h reads group h % G instead of h // n_rep.", repeat_kv_tiled),
    Entry("repeat_kv", "wrong", "repeats_tokens",
          "Repeats along the sequence axis (dim=2) instead of the head axis.",
          repeat_kv_sequence_axis),
    Entry("repeat_kv", "wrong", "forgets_reshape",
          "Expands to (B, G, n_rep, N, d) but never reshapes the copies into the head axis.",
          repeat_kv_forgets_reshape),
    Entry("repeat_kv", "wrong", "repeat_interleave_without_dim",
          "Calls repeat_interleave without dim, which flattens the tensor into a 1-D vector.",
          repeat_kv_no_dim),
    Entry("repeat_kv", "wrong", "new_axis_after_tokens",
          "Inserts the copy axis after the token axis, so the reshape mixes tokens into the "
          "heads.", repeat_kv_axis_after_tokens),
    Entry("repeat_kv", "wrong", "view_of_expand",
          "Calls .view on the expanded (non-contiguous) tensor, which raises as soon as there "
          "are several groups to copy; reshape is needed.", repeat_kv_view_of_expand),
    Entry("repeat_kv", "right", "index_select", None, repeat_kv_index_select),
    Entry("repeat_kv", "right", "stack_loop", None, repeat_kv_stack_loop),

    Entry("grouped_query_attention", "wrong", "tiled_groups",
          "Repeats the K/V heads with .repeat (tiled) instead of interleaving them, pairing "
          "query heads with the wrong group.", gqa_tiled_groups),
    Entry("grouped_query_attention", "wrong", "scale_sqrt_d_model",
          "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", gqa_scale_d_model),
    Entry("grouped_query_attention", "wrong", "mask_hides_diagonal",
          "Builds the causal mask with triu() (diagonal included), so a token cannot see itself "
          "and the first row has no key at all (NaN).", gqa_mask_hides_diagonal),
    Entry("grouped_query_attention", "wrong", "ignores_causal",
          "Never applies the causal mask, whatever causal says.", gqa_ignores_causal),
    Entry("grouped_query_attention", "wrong", "kv_split_with_num_heads",
          "Splits the keys and values into num_heads heads instead of num_kv_heads, which "
          "breaks as soon as there are fewer K/V heads than query heads.",
          gqa_kv_split_with_num_heads),
    Entry("grouped_query_attention", "wrong", "split_without_transpose",
          "Splits the heads by reshaping straight to (B, heads, N, d_head) without the "
          "transpose.", gqa_split_without_transpose),
    Entry("grouped_query_attention", "wrong", "no_value_error_for_uneven_groups",
          "Rounds num_heads / num_kv_heads and pads the last group instead of raising "
          "ValueError when num_kv_heads does not divide num_heads.", gqa_no_value_error),
    Entry("grouped_query_attention", "right", "sdpa_enable_gqa", None, gqa_sdpa_enable_gqa),
    Entry("grouped_query_attention", "right", "grouped_einsum_float32", None,
          gqa_grouped_einsum_float32),

    Entry("kv_cache_bytes", "wrong", "keys_only",
          "Forgets the factor 2: counts the keys but not the values.", kv_bytes_keys_only),
    Entry("kv_cache_bytes", "wrong", "elements_not_bytes",
          "Returns the number of cached elements, never multiplying by bytes_per_element.",
          kv_bytes_elements),
    Entry("kv_cache_bytes", "wrong", "forgets_layers",
          "Counts one layer's cache, forgetting to multiply by num_layers.",
          kv_bytes_forgets_layers),
    Entry("kv_cache_bytes", "wrong", "forgets_batch",
          "Ignores batch_size: counts the cache of one sequence.", kv_bytes_forgets_batch),
    Entry("kv_cache_bytes", "wrong", "returns_gib",
          "Converts to GiB (a float) instead of returning the number of bytes.",
          kv_bytes_in_gib),
    Entry("kv_cache_bytes", "wrong", "counts_bits",
          "Multiplies by 8 * bytes_per_element, counting bits instead of bytes.", kv_bytes_bits),
    Entry("kv_cache_bytes", "right", "math_prod", None, kv_bytes_math_prod),
    Entry("kv_cache_bytes", "right", "meta_tensor_size", None, kv_bytes_allocate_meta),
    Entry("kv_cache_bytes", "right", "per_token_times_tokens", None,
          kv_bytes_per_token_times_layers),

    Entry("decode_with_cache", "wrong", "recomputes_prefix",
          "Runs the causal layer again on the whole prefix at every step (re-projecting every "
          "earlier token), instead of projecting only the new token and reusing the cache.",
          decode_recomputes_prefix),
    Entry("decode_with_cache", "wrong", "projects_all_tokens_first",
          "Projects Q, K and V of all tokens up front and then loops, so no step projects only "
          "its new token (the 'cache' is the full sequence computed in advance).",
          decode_projects_all_first),
    Entry("decode_with_cache", "wrong", "sdpa_is_causal_top_left",
          "Calls scaled_dot_product_attention with is_causal=True for one query against t + 1 "
          "cached keys; its mask is aligned top-left, so the new token sees only key 0.",
          decode_sdpa_is_causal),
    Entry("decode_with_cache", "wrong", "appends_after_attending",
          "Appends the new key and value to the cache only after attending, so a token never "
          "sees itself (and the first token sees nothing).", decode_appends_after_attending),
    Entry("decode_with_cache", "wrong", "overwrites_cache",
          "Replaces the cache with the new token's key and value instead of appending them, so "
          "each token attends only to itself.", decode_overwrites_cache),
    Entry("decode_with_cache", "wrong", "cat_on_head_axis",
          "Concatenates the cache along the head axis (dim=1) instead of the sequence axis.",
          decode_cat_on_head_axis),
    Entry("decode_with_cache", "wrong", "tiled_groups",
          "Repeats the cached K/V heads with .repeat (tiled) instead of interleaving them.",
          decode_tiled_groups),
    Entry("decode_with_cache", "right", "per_sequence_sdpa", None, decode_per_sequence_sdpa),
    Entry("decode_with_cache", "right", "grouped_einsum_float64", None,
          decode_grouped_einsum_float64),
]
