"""Lesson 02 (multi-head, numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ------------------------------------------------------------------ split_heads: wrong
def split_direct_reshape(x, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_strided(x, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_stack_first(x, num_heads):
    _check(x.shape[-1], num_heads)
    return np.stack(np.split(x, num_heads, axis=-1), axis=0)


def split_assert(x, num_heads):
    b, n, d_model = x.shape
    assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
    d_head = d_model // num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_swap_batch(x, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(1, 0, 2, 3)


def split_wrong_dim_axis(x, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = x.shape[1] // num_heads
    heads = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(heads, axis=1)


# ------------------------------------------------------------------ split_heads: right
def split_loop_stack(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    w = d_model // num_heads
    return np.stack([x[..., h * w:(h + 1) * w] for h in range(num_heads)], axis=1)


def split_moveaxis(x, num_heads):
    b, n, d_model = np.shape(x)
    if d_model % num_heads != 0:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    return np.moveaxis(np.reshape(x, (b, n, num_heads, -1)), 2, 1)


# ------------------------------------------------------------------ merge_heads: wrong
def merge_direct_reshape(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_feature_before_head(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_concat_seq(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_loop_short(x):
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for head in range(h - 1):
        out[:, :, head * d:(head + 1) * d] = x[:, head]
    return out


def merge_swap_head_feature(x):
    b, h, n, d = x.shape
    return np.swapaxes(x, 1, 3).reshape(b, n, h * d)


def merge_unpack_order(x):
    b, n, h, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


# ------------------------------------------------------------------ merge_heads: right
def merge_concat_features(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_einsum(x):
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


# ------------------------------------------------------------------ multi_head_attention
def _softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def _split(t, h):
    b, n, d = t.shape
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def mha_no_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    _check(x.shape[-1], num_heads)
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d_model))
    return _merge(w @ v) @ w_o


def mha_split_reshape(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    dh = d_model // num_heads

    def heads(t):
        return t.reshape(b, num_heads, n, dh)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(dh))
    return (w @ v).transpose(0, 2, 1, 3).reshape(b, n, d_model) @ w_o


def mha_w_o_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    _check(x.shape[-1], num_heads)
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o.T


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    _check(x.shape[-1], num_heads)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_k, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o


def mha_merge_plain_reshape(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return (w @ v).reshape(b, n, d_model) @ w_o


# ------------------------------------------------------------------ multi_head_attention: right
def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros_like(x)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x @ w_q[:, cols]
        k = x @ w_k[:, cols]
        v = x @ w_v[:, cols]
        w = _softmax(q @ np.swapaxes(k, 1, 2) / math.sqrt(dh))
        out += (w @ v) @ w_o[cols, :]
    return out


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    wq = np.asarray(w_q, dtype=np.float64).reshape(d_model, num_heads, dh)
    wk = np.asarray(w_k, dtype=np.float64).reshape(d_model, num_heads, dh)
    wv = np.asarray(w_v, dtype=np.float64).reshape(d_model, num_heads, dh)
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, dh, d_model)
    q = np.einsum("bnm,mhd->bhnd", x, wq)
    k = np.einsum("bnm,mhd->bhnd", x, wk)
    v = np.einsum("bnm,mhd->bhnd", x, wv)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(dh)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("bhij,bhjd->bhid", p, v)
    return np.einsum("bhid,hdm->bim", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "direct-reshape",
          "Reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) and "
          "transposing, which mixes tokens and features.", split_direct_reshape),
    Entry("split_heads", "wrong", "strided-features",
          "Reshapes the features as (d_head, H), so head h gets features h, h+H, h+2H, ... "
          "instead of the contiguous block h*d_head:(h+1)*d_head.", split_strided),
    Entry("split_heads", "wrong", "stack-on-axis-0",
          "Stacks the head chunks on a new first axis, returning (H, B, N, d_head) instead of "
          "(B, H, N, d_head).", split_stack_first),
    Entry("split_heads", "wrong", "assert-divisibility",
          "Checks divisibility with assert, which raises AssertionError instead of the "
          "ValueError the contract requires.", split_assert),
    Entry("split_heads", "wrong", "transpose-batch-axis",
          "Transposes with (1, 0, 2, 3), swapping batch and sequence instead of sequence and "
          "head.", split_swap_batch),
    Entry("split_heads", "wrong", "d_head-from-seq-axis",
          "Computes d_head from x.shape[1] (the sequence length) instead of the feature axis.",
          split_wrong_dim_axis),
    Entry("split_heads", "right", "slice-and-stack", None, split_loop_stack),
    Entry("split_heads", "right", "reshape-moveaxis", None, split_moveaxis),

    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "Reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the "
          "head axis after the sequence axis.", merge_direct_reshape),
    Entry("merge_heads", "wrong", "feature-before-head",
          "Transposes to (B, N, d_head, H) before flattening, so the heads' features come out "
          "interleaved.", merge_feature_before_head),
    Entry("merge_heads", "wrong", "concat-along-sequence",
          "Concatenates the heads along the sequence axis instead of the feature axis.",
          merge_concat_seq),
    Entry("merge_heads", "wrong", "loop-one-head-short",
          "Loops over range(H - 1), so the last head's features stay zero.", merge_loop_short),
    Entry("merge_heads", "wrong", "swap-head-and-feature",
          "Swaps the head axis with the feature axis (1 and 3) instead of with the sequence "
          "axis before flattening.", merge_swap_head_feature),
    Entry("merge_heads", "wrong", "unpack-shape-order",
          "Unpacks x.shape as (B, N, H, d_head), so the output uses the head count as its "
          "sequence length.", merge_unpack_order),
    Entry("merge_heads", "right", "concat-features", None, merge_concat_features),
    Entry("merge_heads", "right", "einsum-permute", None, merge_einsum),

    Entry("multi_head_attention", "wrong", "no-output-projection",
          "Never applies the output projection w_o after merging the heads.", mha_no_w_o),
    Entry("multi_head_attention", "wrong", "scale-by-d_model",
          "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "split-by-plain-reshape",
          "Splits the projections into heads with a plain reshape to (B, H, N, d_head), "
          "mixing tokens and features.", mha_split_reshape),
    Entry("multi_head_attention", "wrong", "w_o-transposed",
          "Applies w_o transposed (nn.Linear's (out, in) layout) instead of x @ w_o.",
          mha_w_o_transposed),
    Entry("multi_head_attention", "wrong", "values-from-w_k",
          "Copy-paste slip: projects the values with w_k instead of w_v.", mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "merge-plain-reshape",
          "Merges the heads with a plain reshape of (B, H, N, d_head), without moving the head "
          "axis back after the sequence axis.", mha_merge_plain_reshape),
    Entry("multi_head_attention", "right", "per-head-weight-columns", None,
          mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum-head-weights", None, mha_einsum),
]
