"""Attention written with one knob turned: the mistake models of lessons 06 and 07 (torch).

Each function computes the right answer with its default arguments and a known wrong answer
when one argument changes (tiled K/V groups, a shifted causal mask, no rescaling of the
running sum...). The judges evaluate them on the learner's inputs in float64 and name the
mistake whose output the learner's matches. They never call the answer key.
"""

from __future__ import annotations

import math


def _split(x, num_heads, transpose=True):
    """(B, N, num_heads * d) -> (B, num_heads, N, d); without ``transpose`` a plain reshape."""
    batch, n, width = x.shape
    if not transpose:
        return x.reshape(batch, num_heads, n, width // num_heads)
    return x.reshape(batch, n, num_heads, width // num_heads).transpose(1, 2)


def _merge(x):
    """(B, H, N, d) -> (B, N, H * d)."""
    batch, heads, n, d = x.shape
    return x.transpose(1, 2).reshape(batch, n, heads * d)


def softmax_rows(scores):
    """Softmax over the last axis; rows that are entirely -inf give zeros (not NaN)."""
    import torch

    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    weights = torch.exp(scores - top)
    total = weights.sum(dim=-1, keepdim=True)
    return weights / torch.where(total == 0, torch.ones_like(total), total)


def allowed_keys(n_q, n_k, shift=0, top_left=False):
    """Bool (n_q, n_k): key j visible to query i when j <= i + (n_k - n_q) + shift."""
    import torch

    offset = 0 if top_left else n_k - n_q
    query = torch.arange(n_q)[:, None] + offset + shift
    return torch.arange(n_k)[None, :] <= query


def gqa_variant(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, causal=False, *, tiled=False,
                scale=None, causal_shift=0, split_without_transpose=False,
                output_projection=True, swap_kv=False, softmax_axis=-1,
                merge_without_transpose=False):
    """Grouped-query self-attention (B, N, d_model) -> (B, N, d_model), with knobs.

    ``tiled``: head h reads group h % G (x.repeat) instead of h // (H / G).
    ``split_without_transpose``: True = every split and the merge plain reshapes; a string of
    "k" and "v" = those splits alone plain, the queries' and the merge right.
    ``scale``: None = 1/sqrt(d_head); "d_model" = 1/sqrt(d_model); "kv_width" =
    1/sqrt(num_kv_heads * d_head), the width of w_k's output; a number = that factor.
    ``causal_shift``: -1 hides the diagonal, +1 shows one future key.
    ``swap_kv``: keys from w_v and values from w_k; ``softmax_axis``: -2 normalises over the
    queries; ``merge_without_transpose``: the heads merged by a plain reshape of (B, H, N, d).
    """
    import torch

    d_model = x.shape[-1]
    d_head = d_model // num_heads
    plain = "qkv" if split_without_transpose is True else split_without_transpose or ""
    q = _split(x @ w_q, num_heads, "q" not in plain)  # (B, H, N, d_head)
    k = _split(x @ w_k, num_kv_heads, "k" not in plain)  # (B, G, N, d_head)
    v = _split(x @ w_v, num_kv_heads, "v" not in plain)
    if swap_kv:
        k, v = v, k
    n_rep = num_heads // num_kv_heads
    if tiled:
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    else:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    if scale is None:
        scale = 1 / math.sqrt(d_head)
    elif scale == "d_model":
        scale = 1 / math.sqrt(d_model)
    elif scale == "kv_width":
        scale = 1 / math.sqrt(num_kv_heads * d_head)
    scores = q @ k.transpose(-2, -1) * scale  # (B, H, N, N)
    if causal:
        n = x.shape[1]
        scores = scores.masked_fill(~allowed_keys(n, n, causal_shift), -torch.inf)
    if softmax_axis == -2:
        weights = softmax_rows(scores.transpose(-2, -1)).transpose(-2, -1)
    else:
        weights = softmax_rows(scores)
    ctx = weights @ v  # (B, H, N, d_head)
    merge_plain = split_without_transpose is True or merge_without_transpose
    merged = ctx.reshape(x.shape) if merge_plain else _merge(ctx)
    return merged @ w_o if output_projection else merged


def stepwise_decode(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads, *, visible="cache",
                    tiled=False, scale=None):
    """Token-by-token decoding; ``visible`` says which keys step t attends to:
    "cache" (0..t, right), "first" (key 0 only: a top-left causal mask on one query),
    "past" (0..t-1: the new token not yet in the cache), "all" (0..N-1: no causality),
    "self" (t only: a cache replaced by each new token instead of grown). ``scale``: None =
    1/sqrt(d_head); "keys" = 1/sqrt(the keys step t attends to), the cache's length read for
    the head width; "d_model" = 1/sqrt(d_model); a number = that factor."""
    import torch

    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    n_rep = num_heads // num_kv_heads
    per_step = scale == "keys"
    if scale == "d_model":
        scale = 1 / math.sqrt(d_model)
    scale = 1 / math.sqrt(d_head) if scale is None or per_step else scale
    k = _split(x @ w_k, num_kv_heads)  # (B, G, N, d_head)
    v = _split(x @ w_v, num_kv_heads)
    repeat = (lambda t: t.repeat(1, n_rep, 1, 1)) if tiled else (
        lambda t: t.repeat_interleave(n_rep, dim=1))
    k, v = repeat(k), repeat(v)  # (B, H, N, d_head)
    outputs = []
    for t in range(n):
        q_t = _split(x[:, t:t + 1] @ w_q, num_heads)  # (B, H, 1, d_head)
        stop = {"cache": t + 1, "first": 1, "past": t, "all": n, "self": t + 1}[visible]
        start = t if visible == "self" else 0
        if stop == 0:
            outputs.append(torch.zeros_like(x[:, t:t + 1]) @ w_o)
            continue
        step_scale = 1 / math.sqrt(stop - start) if per_step else scale
        scores = q_t @ k[:, :, start:stop].transpose(-2, -1) * step_scale  # (B, H, 1, stop - start)
        ctx = softmax_rows(scores) @ v[:, :, start:stop]  # (B, H, 1, d_head)
        outputs.append(_merge(ctx) @ w_o)
    return torch.cat(outputs, dim=1)  # (B, N, d_model)


def online_softmax_variant(q, k, v, block_size=64, causal=False, *, rescale="both",
                           inverted_rescale=False, divide=True, scale=None,
                           subtract_max=True, drop_last_block=False, causal_mode="right",
                           nan_empty_rows=False, finite_fill=False):
    """Attention over key blocks with a running max and sum, (B, H, N_q, d) -> same, with knobs.

    ``rescale``: which running totals shrink when the max grows ("both", "sum", "acc",
    "none"); ``inverted_rescale``: multiply by exp(new - old) instead of exp(old - new);
    ``divide``: the final division by the running sum; ``subtract_max``: False exponentiates
    raw scores; ``drop_last_block``: skips a last partial block; ``causal_mode``: "right"
    (bottom-right), "top_left" (no N_k - N_q offset) or "local" (block-local key indices);
    ``nan_empty_rows``: rows that see no key give NaN (0 / 0); ``finite_fill``: hidden scores
    get the dtype's lowest finite number instead of -inf (a row that sees no key averages them
    all).
    """
    import torch

    n_q, d = q.shape[-2], q.shape[-1]
    n_k = k.shape[-2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    shape = q.shape[:-1] + (1,)
    row_max = torch.full(shape, -torch.inf, dtype=q.dtype)
    row_sum = torch.zeros(shape, dtype=q.dtype)
    acc = torch.zeros_like(q)
    stop_all = (n_k // block_size) * block_size if drop_last_block else n_k
    for start in range(0, stop_all, block_size):
        stop = min(start + block_size, n_k)
        scores = q @ k[..., start:stop, :].transpose(-2, -1) * scale  # (.., N_q, b)
        if causal:
            keys = torch.arange(start, stop) if causal_mode != "local" else torch.arange(
                stop - start)
            offset = 0 if causal_mode == "top_left" else n_k - n_q
            hidden = keys[None, :] > torch.arange(n_q)[:, None] + offset
            scores = scores.masked_fill(
                hidden, torch.finfo(scores.dtype).min if finite_fill else -torch.inf)
        if subtract_max:
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
            shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
            # exp(-inf) = 0 on the first block; inverted, exp(+inf) = inf turns 0 * inf to NaN
            factor = torch.exp(shift - row_max) if inverted_rescale else torch.exp(
                row_max - shift)
        else:
            new_max, shift = row_max, torch.zeros_like(row_max)
            factor = torch.ones_like(row_max)
        if subtract_max:
            weights = torch.exp(scores - shift)
        else:  # overflows where float32 does (e^88), as a learner's float32 arithmetic would
            weights = torch.exp(scores.float()).to(scores.dtype)
        sum_factor = factor if rescale in ("both", "sum") else torch.ones_like(factor)
        acc_factor = factor if rescale in ("both", "acc") else torch.ones_like(factor)
        row_sum = row_sum * sum_factor + weights.sum(dim=-1, keepdim=True)
        acc = acc * acc_factor + weights @ v[..., start:stop, :]
        row_max = new_max
    if not divide:
        return acc
    if nan_empty_rows:
        return acc / row_sum
    return acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
