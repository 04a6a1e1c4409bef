"""Lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention, numpy."""

import math

import numpy as np
import scipy.special

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ---------------------------------------------------------------- split_heads: wrong
def split_reshape_only(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, num_heads, n, d // num_heads)


def split_strided_features(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_swap_wrong_pair(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    return np.swapaxes(x.reshape(b, n, num_heads, d // num_heads), 2, 3)


def split_guard_reversed(x, num_heads):
    b, n, d = x.shape
    if num_heads % d:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, -1).transpose(0, 2, 1, 3)


def split_assert_guard(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, "d_model must be divisible by num_heads"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_true_division(x, num_heads):
    b, n, d = x.shape
    _check(d, num_heads)
    d_head = d / num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


# ---------------------------------------------------------------- split_heads: right
def split_list_of_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    return np.stack([x[:, :, h * dh:(h + 1) * dh] for h in range(num_heads)], axis=1)


def split_moveaxis(x, num_heads):
    b, n, d_model = np.shape(x)
    if d_model % num_heads:
        raise ValueError(f"num_heads={num_heads} does not divide d_model={d_model}")
    return np.moveaxis(np.reshape(x, (b, n, num_heads, d_model // num_heads)), 2, 1)


# ---------------------------------------------------------------- merge_heads: wrong
def merge_reshape_only(x):
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def merge_heads_last(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_concat_over_batch(x):
    return np.concatenate(x, axis=-1)


def merge_loop_from_one(x):
    return np.concatenate([x[:, h] for h in range(1, x.shape[1])], axis=-1)


def merge_hstack(x):
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_unpack_order(x):
    b, n, h, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


# ---------------------------------------------------------------- merge_heads: right
def merge_einsum(x):
    b, h, n, dh = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * dh)


def merge_fill_loop(x):
    b, h, n, dh = x.shape
    out = np.empty((b, n, h * dh), dtype=x.dtype)
    for head in range(h):
        out[:, :, head * dh:(head + 1) * dh] = x[:, head]
    return out


# ---------------------------------------------------------------- multi_head_attention
def _split(t, h):
    b, n, d = t.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, dh = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(x.shape[-1]))
    return _merge(w @ v) @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v)


def mha_w_o_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o.T


def mha_values_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_q, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    ctx = w @ v
    return ctx.reshape(x.shape) @ w_o


def mha_unasked_causal(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    n = x.shape[1]
    s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    return _merge(_softmax(s) @ v) @ w_o


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros(x.shape, dtype=np.result_type(x, w_q))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = q @ np.swapaxes(k, 1, 2) / math.sqrt(dh)
        out += scipy.special.softmax(s, axis=-1) @ v @ w_o[cols, :]
    return out


def mha_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads):
    dt = np.result_type(x, w_q, w_k, w_v, w_o)
    b, n, d_model = x.shape
    if num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    x64 = x.astype(np.float64)
    heads = lambda w: w.astype(np.float64).reshape(d_model, num_heads, dh)  # noqa: E731
    q = np.einsum("bnd,dhe->bhne", x64, heads(w_q))
    k = np.einsum("bnd,dhe->bhne", x64, heads(w_k))
    v = np.einsum("bnd,dhe->bhne", x64, heads(w_v))
    s = np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(dh)
    p = np.exp(s - scipy.special.logsumexp(s, axis=-1, keepdims=True))
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    w_o3 = w_o.astype(np.float64).reshape(num_heads, dh, d_model)
    return np.einsum("bhie,hef->bif", ctx, w_o3).astype(dt)


E = "split_heads"
ENTRIES = [
    Entry(E, "wrong", "reshape_straight_to_heads", "It reshapes straight to (B, H, N, d_head) "
          "without going through (B, N, H, d_head) and transposing, so tokens and features are "
          "scrambled across heads.", split_reshape_only),
    Entry(E, "wrong", "strided_feature_split", "It reshapes to (B, N, d_head, H), so head h gets "
          "every H-th feature instead of the contiguous block h*d_head:(h+1)*d_head.",
          split_strided_features),
    Entry(E, "wrong", "swaps_wrong_axes", "After reshaping to (B, N, H, d_head) it swaps axes 2 "
          "and 3 instead of 1 and 2, giving (B, N, d_head, H).", split_swap_wrong_pair),
    Entry(E, "wrong", "guard_operands_reversed", "The divisibility guard tests num_heads % "
          "d_model instead of d_model % num_heads, so valid head counts are rejected.",
          split_guard_reversed),
    Entry(E, "wrong", "assert_instead_of_valueerror", "It checks divisibility with assert, which "
          "raises AssertionError instead of the ValueError the contract requires.",
          split_assert_guard),
    Entry(E, "wrong", "true_division_d_head", "d_head is computed with / instead of //, so it is "
          "a float and reshape refuses it.", split_true_division),
    Entry(E, "right", "stack_of_slices", None, split_list_of_slices),
    Entry(E, "right", "reshape_moveaxis", None, split_moveaxis),
]

E = "merge_heads"
ENTRIES += [
    Entry(E, "wrong", "reshape_without_transpose", "It reshapes (B, H, N, d_head) straight to "
          "(B, N, H*d_head) without first moving the head axis next to d_head.",
          merge_reshape_only),
    Entry(E, "wrong", "heads_moved_last", "It transposes to (B, N, d_head, H) before flattening, "
          "so the features of different heads come out interleaved.", merge_heads_last),
    Entry(E, "wrong", "concatenates_over_batch", "np.concatenate(x, axis=-1) iterates over the "
          "batch axis, not the heads, so it glues batch elements together.",
          merge_concat_over_batch),
    Entry(E, "wrong", "loop_starts_at_one", "The loop over heads starts at 1, so head 0 is "
          "left out of the result.", merge_loop_from_one),
    Entry(E, "wrong", "hstack_joins_tokens", "np.hstack joins the heads along axis 1 (tokens) "
          "instead of the feature axis.", merge_hstack),
    Entry(E, "wrong", "shape_unpacked_in_wrong_order", "x.shape is unpacked as (B, N, H, d_head) "
          "instead of (B, H, N, d_head), so the reshape uses H and N the wrong way round.",
          merge_unpack_order),
    Entry(E, "right", "einsum_permute", None, merge_einsum),
    Entry(E, "right", "fill_feature_blocks", None, merge_fill_loop),
]

E = "multi_head_attention"
ENTRIES += [
    Entry(E, "wrong", "scale_by_d_model", "The scores are divided by sqrt(d_model) instead of "
          "sqrt(d_head).", mha_scale_d_model),
    Entry(E, "wrong", "no_output_projection", "It returns the merged heads without multiplying "
          "by w_o.", mha_no_output_projection),
    Entry(E, "wrong", "w_o_transposed", "It applies w_o.T (the nn.Linear habit) instead of w_o "
          "as the course's x @ W convention requires.", mha_w_o_transposed),
    Entry(E, "wrong", "values_from_w_q", "The values are projected with w_q (a copy-paste slip) "
          "instead of w_v.", mha_values_from_w_q),
    Entry(E, "wrong", "merge_reshape_no_transpose", "The heads are merged by reshaping "
          "(B, H, N, d_head) straight to (B, N, d_model) without transposing back.",
          mha_merge_without_transpose),
    Entry(E, "wrong", "unasked_causal_mask", "It applies a causal mask that this exercise does "
          "not ask for (no mask).", mha_unasked_causal),
    Entry(E, "right", "per_head_weight_columns", None, mha_per_head_columns),
    Entry(E, "right", "einsum_float64", None, mha_einsum_float64),
]
