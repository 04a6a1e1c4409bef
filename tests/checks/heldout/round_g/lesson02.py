"""Lesson 02 (multi-head, numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ----------------------------------------------------------------------------- split_heads
def split_reshape_only(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, num_heads, n, d // num_heads)


def split_strided(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_stack_axis2(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    dh = d // num_heads
    heads = [x[:, :, h * dh:(h + 1) * dh] for h in range(num_heads)]
    return np.stack(heads, axis=2)


def split_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, "d_model must be divisible by num_heads"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_swapped_modulo(x, num_heads):
    b, n, d_model = x.shape
    if num_heads % d_model:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d_model // num_heads).swapaxes(1, 2)


def split_wrong_transpose(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 3, 1).reshape(
        b, num_heads, n, d // num_heads)


def split_np_split(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_einsum_index(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.empty((b, num_heads, n, dh), dtype=x.dtype)
    for h in range(num_heads):
        for j in range(dh):
            out[:, h, :, j] = x[:, :, h * dh + j]
    return out


# ----------------------------------------------------------------------------- merge_heads
def merge_reshape_only(x):
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def merge_interleaved(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_concat_axis1(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_wrong_n(x):
    b, n = x.shape[:2]  # (B, H, N, d_head)
    return np.swapaxes(x, 1, 2).reshape(b, n, -1)


def merge_sum_heads(x):
    return x.sum(axis=1)


def merge_concat_loop(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_einsum(x):
    b, h, n, dh = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * dh)


# ----------------------------------------------------------------------------- multi_head_attention
def _softmax(s):
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(-1, keepdims=True)


def _split(x, h):
    b, n, d = x.shape
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d_model))
    return _merge(w @ v) @ w_o


def mha_split_no_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    dh = d_model // num_heads
    q = (x @ w_q).reshape(b, num_heads, n, dh)
    k = (x @ w_k).reshape(b, num_heads, n, dh)
    v = (x @ w_v).reshape(b, num_heads, n, dh)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(dh))
    return (w @ v).reshape(b, n, d_model) @ w_o


def mha_no_wo(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    dh = d_model // num_heads
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(dh))
    return _merge(w @ v)


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    dh = d_model // num_heads
    Q = _split(x @ w_q, num_heads)
    K = _split(x @ w_k, num_heads)
    V = _split(x @ w_k, num_heads)
    A = _softmax(Q @ K.swapaxes(-1, -2) / np.sqrt(dh))
    return _merge(A @ V) @ w_o


def mha_softmax_axis_minus2(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    dh = d_model // num_heads
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / np.sqrt(dh)
    s = s - s.max(-2, keepdims=True)
    a = np.exp(s) / np.exp(s).sum(-2, keepdims=True)
    return _merge(a @ v) @ w_o


def mha_merge_interleaved(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    dh = d_model // num_heads
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(dh)) @ v  # (B, H, N, dh)
    return ctx.transpose(0, 2, 3, 1).reshape(b, n, d_model) @ w_o


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros_like(x)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        a = _softmax(np.einsum("bid,bjd->bij", q, k) / math.sqrt(dh))
        out += (a @ v) @ w_o[cols, :]  # each head's rows of w_o
    return out


def mha_einsum_heads(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = np.shape(x)
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    wq = np.asarray(w_q).reshape(d_model, num_heads, dh)
    wk = np.asarray(w_k).reshape(d_model, num_heads, dh)
    wv = np.asarray(w_v).reshape(d_model, num_heads, dh)
    wo = np.asarray(w_o).reshape(num_heads, dh, d_model)
    q = np.einsum("bnm,mhd->bhnd", x, wq)
    k = np.einsum("bnm,mhd->bhnd", x, wk)
    v = np.einsum("bnm,mhd->bhnd", x, wv)
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(dh)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    ctx = np.einsum("bhij,bhjd->bhid", a, v)
    return np.einsum("bhid,hdm->bim", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-only", "Reshapes straight to (B, H, N, d_head) without a transpose, which mixes positions and features across heads.", split_reshape_only),
    Entry("split_heads", "wrong", "strided-heads", "Reshapes the feature axis as (d_head, H) instead of (H, d_head), so head h gets every H-th feature instead of a contiguous block.", split_strided),
    Entry("split_heads", "wrong", "stack-axis2", "Stacks the head slices along axis 2, returning (B, N, H, d_head) instead of (B, H, N, d_head).", split_stack_axis2),
    Entry("split_heads", "wrong", "assert-not-valueerror", "Checks divisibility with an assert, so a bad num_heads raises AssertionError instead of ValueError.", split_assert),
    Entry("split_heads", "wrong", "swapped-modulo", "Writes the divisibility test as num_heads % d_model, rejecting valid head counts and missing invalid ones.", split_swapped_modulo),
    Entry("split_heads", "wrong", "wrong-permutation", "Uses the permutation (0, 2, 3, 1) and reshapes back, scrambling features and positions within each head.", split_wrong_transpose),
    Entry("split_heads", "right", "np-split-stack", None, split_np_split),
    Entry("split_heads", "right", "index-loop", None, split_einsum_index),
    Entry("merge_heads", "wrong", "reshape-only", "Reshapes (B, H, N, d_head) straight to (B, N, d_model) without moving the head axis next to d_head first.", merge_reshape_only),
    Entry("merge_heads", "wrong", "interleaved", "Transposes to (B, N, d_head, H) before reshaping, so features of different heads end up interleaved.", merge_interleaved),
    Entry("merge_heads", "wrong", "concat-axis1", "Concatenates the heads along the sequence axis instead of the feature axis.", merge_concat_axis1),
    Entry("merge_heads", "wrong", "wrong-size-variable", "Reads N from x.shape[1], which is the head count, so the output has the wrong shape.", merge_wrong_n),
    Entry("merge_heads", "wrong", "sum-heads", "Adds the heads together instead of concatenating them.", merge_sum_heads),
    Entry("merge_heads", "right", "concat-loop", None, merge_concat_loop),
    Entry("merge_heads", "right", "einsum-permute", None, merge_einsum),
    Entry("multi_head_attention", "wrong", "scale-d-model", "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "split-without-transpose", "Splits heads by reshaping straight to (B, H, N, d_head), mixing positions and features across heads.", mha_split_no_transpose),
    Entry("multi_head_attention", "wrong", "no-output-projection", "Forgets the output projection w_o and returns the merged heads.", mha_no_wo),
    Entry("multi_head_attention", "wrong", "values-from-wk", "Copy-paste slip: projects the values with w_k instead of w_v.", mha_values_from_wk),
    Entry("multi_head_attention", "wrong", "softmax-axis-minus2", "Normalises the attention scores over the query axis instead of the key axis.", mha_softmax_axis_minus2),
    Entry("multi_head_attention", "wrong", "merge-interleaved", "Merges heads through (B, N, d_head, H), interleaving head features before w_o.", mha_merge_interleaved),
    Entry("multi_head_attention", "right", "per-head-columns", None, mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum-heads", None, mha_einsum_heads),
]
