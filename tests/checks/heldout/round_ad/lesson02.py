"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np
import torch
from scipy.special import softmax as scipy_softmax

from entry import Entry


# ============================================================================ split_heads
def split_heads_assert(x, num_heads):
    B, N, D = x.shape
    assert D % num_heads == 0, f"d_model={D} is not divisible by num_heads={num_heads}"
    return x.reshape(B, N, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def split_heads_no_transpose(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_heads_strided(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    d_head = width // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_torch_style_transpose(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(B, N, num_heads, d_model // num_heads).transpose(1, 2)


def split_heads_modulo_swapped(x, num_heads):
    B, N, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return np.swapaxes(x.reshape(B, N, num_heads, d_head), 1, 2)


def split_heads_stack_axis0(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    pieces = np.split(x, num_heads, axis=-1)  # H arrays of (B, N, d_head)
    return np.stack(pieces, axis=0)


def split_heads_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    return np.stack([x[:, :, h * size:(h + 1) * size] for h in range(num_heads)], axis=1)


def split_heads_torch(x, num_heads):
    arr = np.asarray(x)
    B, N, D = arr.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    t = torch.from_numpy(np.ascontiguousarray(arr))
    return t.view(B, N, num_heads, D // num_heads).permute(0, 2, 1, 3).contiguous().numpy()


# ============================================================================ merge_heads
def merge_heads_no_transpose(x):
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_feature_major(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_concat_iterates_batch(x):
    return np.concatenate(x, axis=-1)


def merge_heads_wrong_size_var(x):
    batch, num_heads, seq_len, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq_len, num_heads * seq_len)


def merge_heads_sum(x):
    return x.sum(axis=1)


def merge_heads_concat_axis1(x):
    heads = [x[:, h] for h in range(x.shape[1])]  # each (B, N, d_head)
    return np.concatenate(heads, axis=1)


def merge_heads_concat(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_fill(x):
    B, H, N, dh = x.shape
    out = np.empty((B, N, H * dh), dtype=x.dtype)
    for h in range(H):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h]
    return out


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    heads = weights @ v
    return heads.transpose(0, 2, 1, 3).reshape(b, n, d_model)


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d_head)
    s = s - s.max(-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bhkd->bqhd", w, v).reshape(b, n, d_model)
    return ctx @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q.T).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    k = (x @ w_k.T).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    v = (x @ w_v.T).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    logits = q @ k.swapaxes(-1, -2) / np.sqrt(d_head)
    att = np.exp(logits - logits.max(-1, keepdims=True))
    att = att / att.sum(-1, keepdims=True)
    out = (att @ v).swapaxes(1, 2).reshape(B, N, d_model)
    return out @ w_o.T


def mha_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, num_heads, N, d_head)
    k = (x @ w_k).reshape(B, num_heads, N, d_head)
    v = (x @ w_v).reshape(B, num_heads, N, d_head)
    sc = q @ k.swapaxes(-1, -2) / np.sqrt(d_head)
    sc = np.exp(sc - np.max(sc, axis=-1, keepdims=True))
    weights = sc / np.sum(sc, axis=-1, keepdims=True)
    merged = (weights @ v).reshape(B, N, d_model)
    return merged @ w_o


def mha_softmax_heads_axis(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    scores = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=1, keepdims=True)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(B, N, d_model)
    return out @ w_o


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    outs = []
    for h in range(num_heads):
        cols = slice(h * size, (h + 1) * size)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]  # (B, N, size)
        s = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(size)
        p = scipy_softmax(s, axis=-1)
        outs.append(p @ vh)
    return np.concatenate(outs, axis=-1) @ w_o


def mha_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads):
    x64 = np.asarray(x, dtype=np.float64)
    B, N, D = x64.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    wq = np.asarray(w_q, np.float64).reshape(D, num_heads, dh)
    wk = np.asarray(w_k, np.float64).reshape(D, num_heads, dh)
    wv = np.asarray(w_v, np.float64).reshape(D, num_heads, dh)
    wo = np.asarray(w_o, np.float64).reshape(num_heads, dh, D)
    q = np.einsum("bnd,dhe->bhne", x64, wq)
    k = np.einsum("bnd,dhe->bhne", x64, wk)
    v = np.einsum("bnd,dhe->bhne", x64, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(dh)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hef->bif", ctx, wo).astype(np.result_type(x, w_q))


ENTRIES = [
    Entry("split_heads", "wrong", "assert_guard",
          "checks divisibility with `assert`, so a bad num_heads raises AssertionError instead of "
          "the ValueError the contract asks for",
          split_heads_assert),
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) and a "
          "transpose, so each 'head' is a block of consecutive tokens' features, not features "
          "h*d_head:(h+1)*d_head of every token",
          split_heads_no_transpose),
    Entry("split_heads", "wrong", "strided_features",
          "reshapes the last axis as (d_head, H) instead of (H, d_head), so head h gets every H-th "
          "feature (h, h+H, ...) instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_strided),
    Entry("split_heads", "wrong", "torch_style_transpose",
          "calls `.transpose(1, 2)` as in PyTorch; numpy's transpose takes the full permutation, "
          "so it raises on every 4-D array",
          split_heads_torch_style_transpose),
    Entry("split_heads", "wrong", "modulo_operands_swapped",
          "tests `num_heads % d_model` instead of `d_model % num_heads`, so valid head counts "
          "smaller than d_model raise ValueError",
          split_heads_modulo_swapped),
    Entry("split_heads", "wrong", "stack_on_axis0",
          "stacks the H pieces from np.split on axis 0, giving (H, B, N, d_head) instead of "
          "(B, H, N, d_head)",
          split_heads_stack_axis0),
    Entry("split_heads", "right", "stack_slices", None, split_heads_slices),
    Entry("split_heads", "right", "torch_view_permute", None, split_heads_torch),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the head "
          "axis next to d_head, so tokens and heads get mixed up",
          merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "feature_major_order",
          "transposes to (B, N, d_head, H) before reshaping, so the heads' features are "
          "interleaved instead of placed block after block",
          merge_heads_feature_major),
    Entry("merge_heads", "wrong", "concatenate_iterates_batch",
          "passes the 4-D array itself to np.concatenate, which iterates over the first axis "
          "(the batch), not the heads, so batches are glued together and the shape is wrong",
          merge_heads_concat_iterates_batch),
    Entry("merge_heads", "wrong", "seq_len_for_d_head",
          "reshapes to num_heads * seq_len instead of num_heads * d_head (wrong variable), so "
          "it raises unless N happens to equal d_head",
          merge_heads_wrong_size_var),
    Entry("merge_heads", "wrong", "sum_heads",
          "adds the heads' outputs together instead of concatenating them, giving (B, N, d_head)",
          merge_heads_sum),
    Entry("merge_heads", "wrong", "concat_on_token_axis",
          "concatenates the heads along axis 1 (the token axis of each (B, N, d_head) slice) "
          "instead of the feature axis, giving (B, H*N, d_head)",
          merge_heads_concat_axis1),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_heads_concat),
    Entry("merge_heads", "right", "fill_blocks_loop", None, merge_heads_fill),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without multiplying by w_o",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "computes the values with w_k (copy-paste) instead of w_v",
          mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "linear_layout_transpose",
          "applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the contract "
          "applies them as x @ W",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "heads_without_transpose",
          "splits and merges heads with plain reshapes to (B, H, N, d_head) and back, without "
          "the transposes, so the heads do not hold feature blocks of every token",
          mha_split_without_transpose),
    Entry("multi_head_attention", "wrong", "softmax_over_heads",
          "takes the softmax over axis 1 (the heads) instead of the last axis (the keys)",
          mha_softmax_heads_axis),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None, mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum_float64", None, mha_einsum_float64),
]
