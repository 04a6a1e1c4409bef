"""Lesson 02 (numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ------------------------------------------------------------------ split_heads, wrong
def split_reshape_only(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, num_heads, n, d // num_heads)


def split_strided(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_heads_first(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, num_heads, d // num_heads).transpose(2, 0, 1, 3)


def split_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, "d_model must be divisible by num_heads"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_wrong_unpack(x, num_heads):
    b, d_model, n = x.shape  # unpacks the shape in the wrong order
    _check(x.shape[-1], num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, x.shape[1], num_heads, d_head).transpose(0, 2, 1, 3)


def split_no_transpose(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    parts = np.split(x, num_heads, axis=-1)
    return np.stack(parts, axis=2)


# ------------------------------------------------------------------ split_heads, right
def split_stack_slices(x, num_heads):
    x = np.asarray(x)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    return np.stack([x[..., h * dh:(h + 1) * dh] for h in range(num_heads)], axis=1)


def split_moveaxis(x, num_heads):
    b, n, d = np.shape(x)
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.moveaxis(np.reshape(x, (b, n, num_heads, -1)), 2, 1).copy()


# ------------------------------------------------------------------ merge_heads, wrong
def merge_reshape_only(x):
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def merge_interleaved(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_concat_seq(x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=-2)


def merge_sum_heads(x):
    return x.sum(axis=1)


def merge_wrong_transpose(x):
    b, h, n, dh = x.shape
    return x.transpose(2, 0, 1, 3).reshape(b, n, h * dh)


# ------------------------------------------------------------------ merge_heads, right
def merge_concat_features(x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=-1)


def merge_einsum_fill(x):
    b, h, n, dh = x.shape
    out = np.empty((b, n, h * dh), dtype=x.dtype)
    out.reshape(b, n, h, dh)[...] = np.einsum("bhnd->bnhd", x)
    return out


# ------------------------------------------------------------------ multi_head_attention
def _split(x, h):
    b, n, d = x.shape
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


def _softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    _check(d, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d))
    return _merge(w @ v) @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    _check(d, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads))
    return _merge(w @ v)


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    _check(d, num_heads)
    q, k, v = (_split(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads))
    return _merge(w @ v) @ w_o.T


def mha_split_reshape_only(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    q, k, v = ((x @ w).reshape(b, num_heads, n, d // num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads))
    return (w @ v).transpose(0, 2, 1, 3).reshape(b, n, d) @ w_o


def mha_softmax_over_queries(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    _check(d, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads), axis=-2)
    return _merge(w @ v) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads))
    return (w @ v).reshape(b, n, d) @ w_o


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    _check(d, num_heads)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_k, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(d // num_heads))
    return _merge(w @ v) @ w_o


# ------------------------------------------------------------------ multi_head_attention, right
def mha_per_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    out = np.zeros((b, n, d))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(dh))
        out += (w @ v) @ w_o[cols, :]  # each head's rows of w_o, summed
    return out.astype(x.dtype)


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    wq, wk, wv = (w.reshape(d, num_heads, dh) for w in (w_q, w_k, w_v))
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhne,hef->bnf", ctx, w_o.reshape(num_heads, dh, d))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose", "Reshapes straight to (B, H, N, "
          "d_head) without going through (B, N, H, d_head) and transposing, so tokens and "
          "features get mixed across heads.", split_reshape_only),
    Entry("split_heads", "wrong", "strided_heads", "Reshapes to (B, N, d_head, H), so head h "
          "gets every H-th feature instead of the contiguous block h*d_head:(h+1)*d_head.",
          split_strided),
    Entry("split_heads", "wrong", "head_axis_first", "Transposes with the wrong permutation, "
          "putting the head axis before the batch axis: (H, B, N, d_head).", split_heads_first),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror", "Checks divisibility with an "
          "assert, so a bad num_heads raises AssertionError instead of ValueError.",
          split_assert),
    Entry("split_heads", "wrong", "unpacks_shape_wrong_order", "Unpacks x.shape as (B, d_model, "
          "N), so d_head is computed from the sequence length instead of d_model.",
          split_wrong_unpack),
    Entry("split_heads", "wrong", "forgets_transpose", "Splits the features into heads but "
          "stacks them on axis 2, returning (B, N, H, d_head) without moving the head axis.",
          split_no_transpose),
    Entry("split_heads", "right", "stack_feature_slices", None, split_stack_slices),
    Entry("split_heads", "right", "moveaxis_minus_one", None, split_moveaxis),

    Entry("merge_heads", "wrong", "reshape_without_transpose", "Reshapes (B, H, N, d_head) "
          "straight to (B, N, H*d_head) without first swapping the head and sequence axes.",
          merge_reshape_only),
    Entry("merge_heads", "wrong", "interleaves_head_features", "Transposes to (B, N, d_head, H) "
          "before flattening, so the features of different heads are interleaved.",
          merge_interleaved),
    Entry("merge_heads", "wrong", "concatenates_along_sequence", "Concatenates the heads along "
          "the sequence axis instead of the feature axis.", merge_concat_seq),
    Entry("merge_heads", "wrong", "sums_heads", "Adds the heads together instead of "
          "concatenating them, losing the H*d_head width.", merge_sum_heads),
    Entry("merge_heads", "wrong", "wrong_transpose_order", "Transposes with (2, 0, 1, 3), which "
          "puts the sequence axis before the batch axis, then reshapes as if it were (B, N, ...)"
          ", mixing batches and tokens.", merge_wrong_transpose),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_concat_features),
    Entry("merge_heads", "right", "einsum_into_view", None, merge_einsum_fill),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model", "Scales the per-head scores by "
          "1/sqrt(d_model) instead of 1/sqrt(d_head).", mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "no_output_projection", "Forgets to apply w_o after "
          "merging the heads.", mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "linear_layout_transposed_weights", "Applies the "
          "weights as x @ W.T (nn.Linear's (out, in) layout) instead of x @ W.",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "split_by_reshape_only", "Splits the projections "
          "into heads with a plain reshape to (B, H, N, d_head), without the transpose, so "
          "tokens are mixed into heads.", mha_split_reshape_only),
    Entry("multi_head_attention", "wrong", "softmax_over_queries", "Takes the softmax over the "
          "query axis instead of the key axis.", mha_softmax_over_queries),
    Entry("multi_head_attention", "wrong", "merge_without_transpose", "Merges the heads by "
          "reshaping (B, H, N, d_head) directly to (B, N, d_model) without swapping the head "
          "and sequence axes.", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "values_projected_with_wk", "Copy-paste slip: "
          "projects the values with w_k instead of w_v.", mha_values_from_wk),
    Entry("multi_head_attention", "right", "per_head_loop_sum_wo_rows", None, mha_per_head_loop),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum_weights),
]
