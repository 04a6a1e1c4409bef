"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
from scipy.special import softmax as sp_softmax

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# =============================================================================== split_heads
def split_no_transpose(x, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, num_heads, n, d // num_heads)


def split_interleaved(x, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    _check(d, num_heads)
    d_head = d // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_guard_swapped(x, num_heads):
    x = np.asarray(x)
    batch, seq, d_model = x.shape
    if num_heads % d_model:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)


def split_stack_default_axis(x, num_heads):
    x = np.asarray(x)
    _check(x.shape[-1], num_heads)
    pieces = np.split(x, num_heads, axis=-1)  # H arrays of (B, N, d_head)
    return np.stack(pieces)


def split_true_division(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    _check(D, num_heads)
    dh = D / num_heads
    return x.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)


def split_loop_off_by_one(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    dh = d_model // num_heads
    heads = [x[:, :, (h - 1) * dh:h * dh] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_stack_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    width = d_model // num_heads
    return np.stack([x[..., i * width:(i + 1) * width] for i in range(num_heads)], axis=1)


def split_moveaxis(x, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    h_count, rem = divmod(d, num_heads)
    if rem:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.ascontiguousarray(np.moveaxis(x.reshape(b, n, num_heads, h_count), 2, 1))


# =============================================================================== merge_heads
def merge_no_transpose(x):
    x = np.asarray(x)
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def merge_interleaved(x):
    x = np.asarray(x)
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_iterates_batch(x):
    x = np.asarray(x)
    return np.concatenate(list(x), axis=-1)


def merge_concat_tokens(x):
    x = np.asarray(x)
    heads = [x[:, h] for h in range(x.shape[1])]  # each (B, N, d_head)
    return np.concatenate(heads, axis=1)


def merge_drops_last_head(x):
    x = np.asarray(x)
    n_heads = x.shape[1]
    return np.concatenate([x[:, h, :, :] for h in range(n_heads - 1)], axis=-1)


def merge_shape_unpacked_wrong(x):
    x = np.asarray(x)
    B, N, H, d_head = x.shape  # misremembered layout
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d_head)


def merge_concat_heads(x):
    x = np.asarray(x)
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_fill_loop(x):
    x = np.asarray(x)
    b, h, n, dh = x.shape
    out = np.empty((b, n, h * dh), dtype=x.dtype)
    for head in range(h):
        for tok in range(n):
            out[:, tok, head * dh:(head + 1) * dh] = x[:, head, tok, :]
    return out


# ====================================================================== multi_head_attention
def _softmax_last(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def _split(t, h):
    b, n, d = t.shape
    _check(d, h)
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, dh = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(d_model)
    return _merge(_softmax_last(scores) @ v) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q = _split(x @ w_q.T, num_heads)
    k = _split(x @ w_k.T, num_heads)
    v = _split(x @ w_v.T, num_heads)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax_last(s) @ v) @ w_o.T


def mha_values_not_projected(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x, num_heads)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax_last(s) @ v) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    att = _softmax_last(q @ k.swapaxes(-1, -2) / math.sqrt(D // num_heads))
    ctx = att @ v  # (B, H, N, d_head)
    return ctx.reshape(B, N, D) @ w_o


def mha_head_loop_skips_first(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    dh = d_model // num_heads
    Q, K, V = x @ w_q, x @ w_k, x @ w_v
    concat = np.zeros_like(Q)
    for h in range(1, num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        s = Q[..., cols] @ K[..., cols].swapaxes(-1, -2) / math.sqrt(dh)
        concat[..., cols] = _softmax_last(s) @ V[..., cols]
    return concat @ w_o


def mha_softmax_axis_2(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, N, N)
    s = s - s.max(axis=2, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=2, keepdims=True)
    return _merge(p @ v) @ w_o


def mha_per_head_loop_scipy(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    w_q, w_k, w_v, w_o = (np.asarray(w, dtype=np.float64) for w in (w_q, w_k, w_v, w_o))
    out = np.zeros_like(x)
    for h in range(num_heads):
        c = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, c], x @ w_k[:, c], x @ w_v[:, c]
        p = sp_softmax(qh @ kh.transpose(0, 2, 1) / math.sqrt(dh), axis=-1)
        out += (p @ vh) @ w_o[c, :]  # concat then @ w_o == sum of per-head blocks
    return out


def mha_einsum_weights_by_head(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    e = d // num_heads
    wq, wk, wv = (np.asarray(w).reshape(d, num_heads, e) for w in (w_q, w_k, w_v))
    wo = np.asarray(w_o).reshape(num_heads, e, d)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(e)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", s, v)
    return np.einsum("bhqe,hed->bqd", ctx, wo)


E = Entry
ENTRIES = [
    E("split_heads", "wrong", "reshape_without_transpose",
      "it reshapes (B, N, d_model) straight to (B, H, N, d_head) instead of to (B, N, H, d_head) "
      "and then swapping axes 1 and 2, so tokens and features get mixed between heads",
      split_no_transpose),
    E("split_heads", "wrong", "interleaved_features",
      "it reshapes to (B, N, d_head, H), so head h gets every H-th feature (h, h+H, ...) "
      "instead of the contiguous block h*d_head:(h+1)*d_head",
      split_interleaved),
    E("split_heads", "wrong", "guard_operands_swapped",
      "the divisibility guard tests num_heads % d_model instead of d_model % num_heads, so it "
      "raises ValueError on valid inputs such as d_model=12, num_heads=3",
      split_guard_swapped),
    E("split_heads", "wrong", "np_stack_default_axis",
      "np.stack puts the heads on axis 0 by default, giving (H, B, N, d_head) instead of "
      "(B, H, N, d_head); axis=1 is needed",
      split_stack_default_axis),
    E("split_heads", "wrong", "d_head_true_division",
      "d_head is computed with / instead of //, so it is a float and reshape raises TypeError "
      "on every valid input",
      split_true_division),
    E("split_heads", "wrong", "slice_off_by_one",
      "the head slices are shifted by one block ((h-1)*d_head:h*d_head), so head 0 is an empty "
      "slice and the stack fails (or, with one head, returns an empty last axis)",
      split_loop_off_by_one),
    E("split_heads", "right", "stack_of_slices", None, split_stack_slices),
    E("split_heads", "right", "divmod_moveaxis", None, split_moveaxis),

    E("merge_heads", "wrong", "reshape_without_transpose",
      "it reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first moving the "
      "head axis next to d_head, so features of different tokens get mixed",
      merge_no_transpose),
    E("merge_heads", "wrong", "interleaved_features",
      "it transposes to (B, N, d_head, H) before the reshape, so the heads' features are "
      "interleaved instead of placed side by side, head 0's block first",
      merge_interleaved),
    E("merge_heads", "wrong", "list_iterates_batch",
      "list(x) iterates over the batch axis, not the heads, so the batch items are "
      "concatenated and the result has shape (H, N, B*d_head)",
      merge_iterates_batch),
    E("merge_heads", "wrong", "concat_along_tokens",
      "the heads are concatenated along axis 1 (the tokens) instead of the last axis, giving "
      "(B, H*N, d_head)",
      merge_concat_tokens),
    E("merge_heads", "wrong", "range_drops_last_head",
      "the loop runs over range(num_heads - 1), so the last head is dropped and the result is "
      "d_head features too narrow (with one head there is nothing to concatenate and it raises)",
      merge_drops_last_head),
    E("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
      "the shape is unpacked as (B, N, H, d_head) although x is (B, H, N, d_head), so the "
      "final reshape uses N and H swapped and gives (B, H, N*d_head)",
      merge_shape_unpacked_wrong),
    E("merge_heads", "right", "concatenate_heads_last_axis", None, merge_concat_heads),
    E("merge_heads", "right", "fill_loop", None, merge_fill_loop),

    E("multi_head_attention", "wrong", "scale_sqrt_d_model",
      "the scores are divided by sqrt(d_model) instead of sqrt(d_head) (the per-head key "
      "size); wrong whenever num_heads > 1",
      mha_scale_d_model),
    E("multi_head_attention", "wrong", "nn_linear_weight_layout",
      "the weights are applied as x @ W.T (nn.Linear's (out, in) layout) instead of the "
      "course's x @ W",
      mha_linear_layout),
    E("multi_head_attention", "wrong", "values_not_projected",
      "the values are the split input x itself: w_v is never applied",
      mha_values_not_projected),
    E("multi_head_attention", "wrong", "merge_without_transpose",
      "the heads' outputs (B, H, N, d_head) are reshaped straight to (B, N, d_model) without "
      "swapping the head and token axes, so tokens' features get mixed",
      mha_merge_without_transpose),
    E("multi_head_attention", "wrong", "head_loop_starts_at_1",
      "the per-head loop runs over range(1, num_heads), so head 0's block of the concatenation "
      "stays zero (with one head the whole output is zero)",
      mha_head_loop_skips_first),
    E("multi_head_attention", "wrong", "softmax_over_axis_2",
      "the softmax normalises along axis 2 of the (B, H, N_q, N_k) scores (the queries, an "
      "axis number left over from a 3-D version) instead of along the keys",
      mha_softmax_axis_2),
    E("multi_head_attention", "right", "per_head_loop_float64_scipy", None,
      mha_per_head_loop_scipy),
    E("multi_head_attention", "right", "einsum_weights_reshaped_by_head", None,
      mha_einsum_weights_by_head),
]
