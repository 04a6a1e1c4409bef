"""Round l, lesson 02 (multi-head, numpy): split_heads, merge_heads, multi_head_attention."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

# ============================================================================ split_heads


def _check_divisible(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


def split_heads_plain_reshape(x, num_heads):
    b, n, d_model = x.shape
    _check_divisible(d_model, num_heads)
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_heads_interleaved(x, num_heads):
    b, n, d_model = x.shape
    _check_divisible(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_truncate(x, num_heads):
    b, n, d_model = x.shape
    d_head = d_model // num_heads
    usable = x[:, :, : num_heads * d_head]
    return usable.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_torch_transpose(x, num_heads):
    b, n, d_model = x.shape
    _check_divisible(d_model, num_heads)
    return x.reshape(b, n, num_heads, d_model // num_heads).transpose(1, 2)


def split_heads_slice_start(x, num_heads):
    d_model = x.shape[-1]
    _check_divisible(d_model, num_heads)
    d_head = d_model // num_heads
    return np.stack([x[:, :, h:h + d_head] for h in range(num_heads)], axis=1)


def split_heads_split_tokens(x, num_heads):
    _check_divisible(x.shape[-1], num_heads)
    return np.stack(np.split(x, num_heads, axis=1), axis=1)


def split_heads_comprehension(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return np.stack([x[..., h * d_head:(h + 1) * d_head] for h in range(num_heads)], axis=1)


def split_heads_torch_permute(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.view(b, n, num_heads, d_model // num_heads).permute(0, 2, 1, 3).numpy()


# ============================================================================ merge_heads


def merge_heads_plain_reshape(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_heads_interleaved(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_hstack(x):
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_heads_misread_layout(x):
    b, n, h, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def merge_heads_iterate_array(x):
    return np.concatenate([head for head in x], axis=-1)


def merge_heads_swap_1_3(x):
    b, h, n, d = x.shape
    return np.swapaxes(x, 1, 3).reshape(b, n, h * d)


def merge_heads_concat_heads(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_heads_einsum(x):
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


# ============================================================================ multi_head_attention


def _split(x, h):
    b, n, d = x.shape
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _attend(q, k, v, scale):
    w = _softmax(q @ np.swapaxes(k, -1, -2) * scale)
    return w @ v


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_divisible(d_model, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attend(q, k, v, 1.0 / math.sqrt(d_model))
    return _merge(ctx) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_divisible(d_model, num_heads)
    q = _split(x @ w_q.T, num_heads)
    k = _split(x @ w_k.T, num_heads)
    v = _split(x @ w_v.T, num_heads)
    ctx = _attend(q, k, v, 1.0 / math.sqrt(d_model // num_heads))
    return _merge(ctx) @ w_o.T


def mha_assert_guard(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    assert d_model % num_heads == 0, f"d_model={d_model} not divisible by num_heads={num_heads}"
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attend(q, k, v, 1.0 / math.sqrt(d_model // num_heads))
    return _merge(ctx) @ w_o


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_divisible(d_model, num_heads)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_k, num_heads)
    ctx = _attend(q, k, v, 1.0 / math.sqrt(d_model // num_heads))
    return _merge(ctx) @ w_o


def mha_adds_residual(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check_divisible(d_model, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attend(q, k, v, 1.0 / math.sqrt(d_model // num_heads))
    return x + _merge(ctx) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    _check_divisible(d_model, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attend(q, k, v, 1.0 / math.sqrt(d_model // num_heads))
    return ctx.reshape(b, n, d_model) @ w_o


def mha_per_head_blocks(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros(x.shape[:-1] + (d_model,), dtype=np.result_type(x, w_o))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x @ w_q[:, cols]
        k = x @ w_k[:, cols]
        v = x @ w_v[:, cols]
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)
        w = np.exp(s - s.max(axis=-1, keepdims=True))
        w /= w.sum(axis=-1, keepdims=True)
        out += (w @ v) @ w_o[cols, :]
    return out


def mha_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dtype = x.dtype
    tx, tq, tk, tv, to = (torch.from_numpy(np.asarray(a, dtype=np.float64))
                          for a in (x, w_q, w_k, w_v, w_o))

    def heads(t):
        return t.view(b, n, num_heads, -1).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(heads(tx @ tq), heads(tx @ tk), heads(tx @ tv))
    out = ctx.transpose(1, 2).reshape(b, n, d_model) @ to
    return out.numpy().astype(dtype)


ENTRIES = [
    Entry("split_heads", "wrong", "plain_reshape",
          "Reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' takes "
          "a block of consecutive tokens' features instead of one slice of every token.",
          split_heads_plain_reshape),
    Entry("split_heads", "wrong", "interleaved",
          "Reshapes to (B, N, d_head, H) before moving the heads forward, so head h takes the "
          "interleaved features h, h+H, h+2H, ... instead of the block h*d_head:(h+1)*d_head.",
          split_heads_interleaved),
    Entry("split_heads", "wrong", "truncate",
          "Silently drops the leftover features when d_model is not divisible by num_heads "
          "instead of raising ValueError.",
          split_heads_truncate),
    Entry("split_heads", "wrong", "torch_transpose",
          "Calls .transpose(1, 2) as in PyTorch, but numpy's transpose takes a full "
          "permutation of the axes, so it raises on the 4-D array.",
          split_heads_torch_transpose),
    Entry("split_heads", "wrong", "slice_start",
          "Starts head h's slice at feature h instead of h*d_head, so the heads overlap and "
          "only the first head is right.",
          split_heads_slice_start),
    Entry("split_heads", "wrong", "split_tokens",
          "Splits along axis 1 (the tokens) instead of the feature axis, which mixes tokens "
          "into heads or raises when N is not a multiple of num_heads.",
          split_heads_split_tokens),
    Entry("split_heads", "right", "comprehension", None, split_heads_comprehension),
    Entry("split_heads", "right", "torch_permute", None, split_heads_torch_permute),

    Entry("merge_heads", "wrong", "plain_reshape",
          "Reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the "
          "head axis next to d_head, which mixes tokens and heads.",
          merge_heads_plain_reshape),
    Entry("merge_heads", "wrong", "interleaved",
          "Transposes to (B, N, d_head, H) before reshaping, so the features of the heads come "
          "out interleaved instead of head after head.",
          merge_heads_interleaved),
    Entry("merge_heads", "wrong", "hstack",
          "Uses np.hstack, which concatenates along axis 1 (the tokens) for arrays of 2 or "
          "more dimensions, not along the last (feature) axis.",
          merge_heads_hstack),
    Entry("merge_heads", "wrong", "misread_layout",
          "Unpacks the shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so "
          "the reshape uses the head count as the sequence length.",
          merge_heads_misread_layout),
    Entry("merge_heads", "wrong", "iterate_array",
          "Iterates over the array itself, which walks the batch axis rather than the heads, "
          "so batch items are concatenated instead of heads.",
          merge_heads_iterate_array),
    Entry("merge_heads", "wrong", "swap_1_3",
          "Swaps axes 1 and 3 (heads and d_head) instead of 1 and 2 (heads and tokens) before "
          "reshaping, scrambling tokens and features.",
          merge_heads_swap_1_3),
    Entry("merge_heads", "right", "concat_heads", None, merge_heads_concat_heads),
    Entry("merge_heads", "right", "einsum", None, merge_heads_einsum),

    Entry("multi_head_attention", "wrong", "scale_d_model",
          "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head), the size of each "
          "head's dot products.",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "linear_layout",
          "Applies every weight in nn.Linear's layout (x @ W.T) instead of the course's "
          "x @ W with W of shape (d_in, d_out).",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "assert_guard",
          "Guards the head count with assert, which raises AssertionError (and vanishes under "
          "python -O) instead of the ValueError the contract requires.",
          mha_assert_guard),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "Projects the values with w_k (a copy-paste of the key line) instead of w_v.",
          mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "adds_residual",
          "Adds the residual x to the output; the residual connection belongs to the "
          "transformer block, not to the attention layer.",
          mha_adds_residual),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "Merges the heads with a plain reshape from (B, H, N, d_head) to (B, N, d_model) "
          "without moving the head axis back, which mixes tokens across heads.",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "right", "per_head_blocks", None, mha_per_head_blocks),
    Entry("multi_head_attention", "right", "torch_sdpa", None, mha_torch_sdpa),
]
