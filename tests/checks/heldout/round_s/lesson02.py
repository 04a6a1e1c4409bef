"""Held-out catalogue, lesson 02 (multi-head attention, numpy):
split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
from scipy.special import softmax as sp_softmax

from entry import Entry


# ============================================================================ split_heads
# ---- wrong ----------------------------------------------------------------------------------
def split_heads_no_transpose(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_heads_interleaved(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_np_transpose_default(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    four = x.reshape(B, N, num_heads, D // num_heads)
    return np.transpose(four)  # meant: swap N and H


def split_heads_true_division(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    d_head = width / num_heads
    return x.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_assert_guard(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    assert width % num_heads == 0, f"d_model={width} is not divisible by num_heads={num_heads}"
    return x.reshape(batch, seq, num_heads, width // num_heads).swapaxes(1, 2)


def split_heads_guard_swapped(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    if num_heads % width:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return x.reshape(batch, seq, num_heads, width // num_heads).swapaxes(1, 2)


# ---- right ----------------------------------------------------------------------------------
def split_heads_stack_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    size = d_model // num_heads
    pieces = [x[:, :, h * size:(h + 1) * size] for h in range(num_heads)]
    return np.stack(pieces, axis=1)


def split_heads_einsum(x, num_heads):
    x = np.asarray(x)
    b, n, dm = x.shape
    if dm % num_heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    return np.einsum("bnhd->bhnd", x.reshape(b, n, num_heads, -1)).copy()


# ============================================================================ merge_heads
# ---- wrong ----------------------------------------------------------------------------------
def merge_heads_no_transpose(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_heads_moveaxis_last(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return np.moveaxis(x, 1, -1).reshape(b, n, h * d)


def merge_heads_hstack(x):
    x = np.asarray(x)
    return np.hstack([x[:, head] for head in range(x.shape[1])])


def merge_heads_unpack_order(x):
    x = np.asarray(x)
    B, N, H, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * D)


def merge_heads_sum(x):
    x = np.asarray(x)
    return x.sum(axis=1)


def merge_heads_one_based(x):
    x = np.asarray(x)
    batch, heads, seq, dh = x.shape
    out = np.zeros((batch, seq, heads * dh), dtype=x.dtype)
    for h in range(1, heads):  # head_1 ... head_H as in the paper
        out[:, :, (h - 1) * dh:h * dh] = x[:, h - 1]
    return out


# ---- right ----------------------------------------------------------------------------------
def merge_heads_loop_fill(x):
    x = np.asarray(x)
    batch, heads, seq, dh = x.shape
    out = np.empty((batch, seq, heads * dh), dtype=x.dtype)
    for h in range(heads):
        out[..., h * dh:(h + 1) * dh] = x[:, h, :, :]
    return out


def merge_heads_einsum(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


# ============================================================================ multi_head_attention
def _split(t, heads):
    b, n, dm = t.shape
    if dm % heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={heads}")
    return t.reshape(b, n, heads, dm // heads).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _softmax_last(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


# ---- wrong ----------------------------------------------------------------------------------
def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_k, num_heads)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax_last(s) @ v) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q, k, v = (_split(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax_last(s) @ v) @ w_o.T


def mha_merge_by_reshape(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(D // num_heads)
    ctx = _softmax_last(s) @ v
    return ctx.reshape(B, N, D) @ w_o


def mha_single_wide_head(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    d_head = x.shape[-1] // num_heads
    s = q @ k.swapaxes(-1, -2) / math.sqrt(d_head)
    return (_softmax_last(s) @ v) @ w_o


def mha_scale_precedence(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / (d_model / num_heads ** 0.5)
    return _merge(_softmax_last(s) @ v) @ w_o


def mha_softmax_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax_last(s, axis=1) @ v) @ w_o


# ---- right ----------------------------------------------------------------------------------
def mha_head_blocks_of_weights(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros(x.shape)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        w = sp_softmax(qh @ np.swapaxes(kh, 1, 2) / np.sqrt(dh), axis=-1)
        total += (w @ vh) @ w_o[cols, :]  # concat @ w_o == sum of row blocks
    return total


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    b, n, dm = x.shape
    if dm % num_heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    dh = dm // num_heads
    q = np.einsum("bnm,mhd->bhnd", x, np.reshape(w_q, (dm, num_heads, dh)))
    k = np.einsum("bnm,mhd->bhnd", x, np.reshape(w_k, (dm, num_heads, dh)))
    v = np.einsum("bnm,mhd->bhnd", x, np.reshape(w_v, (dm, num_heads, dh)))
    s = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dh)
    p = sp_softmax(s, axis=-1)
    ctx = np.einsum("bhij,bhjd->bhid", p, v)
    return np.einsum("bhid,hdm->bim", ctx, np.reshape(w_o, (num_heads, dh, dm)))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "It reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' "
          "takes consecutive chunks of the flattened (N, d_model) block, mixing tokens and "
          "features.",
          split_heads_no_transpose),
    Entry("split_heads", "wrong", "interleaved_features",
          "It reshapes to (B, N, d_head, H), so head h gets the strided features h, h+H, h+2H... "
          "instead of the contiguous block h*d_head:(h+1)*d_head.",
          split_heads_interleaved),
    Entry("split_heads", "wrong", "np_transpose_reverses_all",
          "np.transpose without axes reverses all four axes, giving (d_head, H, N, B) instead "
          "of swapping only N and H.",
          split_heads_np_transpose_default),
    Entry("split_heads", "wrong", "true_division_d_head",
          "d_head is computed with / instead of //, a float, and reshape rejects a float size "
          "(TypeError on every valid input).",
          split_heads_true_division),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "The divisibility guard is an assert, so a bad num_heads raises AssertionError "
          "instead of the ValueError the contract requires.",
          split_heads_assert_guard),
    Entry("split_heads", "wrong", "guard_operands_swapped",
          "The guard tests num_heads % d_model instead of d_model % num_heads, so it rejects "
          "valid head counts (e.g. 3 heads of a 12-wide model) with a ValueError.",
          split_heads_guard_swapped),
    Entry("split_heads", "right", "stack_of_slices", None, split_heads_stack_slices),
    Entry("split_heads", "right", "einsum_permutation", None, split_heads_einsum),
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "It reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis next to d_head first, so tokens and heads are scrambled.",
          merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "head_axis_moved_last",
          "np.moveaxis puts the head axis after d_head, so the features come out interleaved "
          "(head index fastest) instead of head 0's block first.",
          merge_heads_moveaxis_last),
    Entry("merge_heads", "wrong", "hstack_on_3d",
          "np.hstack joins 3-D arrays along axis 1 (the tokens), not the last axis, so the "
          "heads are stacked as extra tokens: (B, H*N, d_head).",
          merge_heads_hstack),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "The shape is unpacked as (B, N, H, D) although the input is (B, H, N, D), so the "
          "reshape uses N for H and H for N and the output has the wrong shape when H != N.",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "heads_summed",
          "The heads are added together instead of concatenated side by side, giving "
          "(B, N, d_head).",
          merge_heads_sum),
    Entry("merge_heads", "wrong", "one_based_head_loop",
          "The loop runs over range(1, H) as if heads were numbered 1..H, so the last head is "
          "never copied and its block stays zero.",
          merge_heads_one_based),
    Entry("merge_heads", "right", "loop_into_preallocated", None, merge_heads_loop_fill),
    Entry("merge_heads", "right", "einsum_then_reshape", None, merge_heads_einsum),
    Entry("multi_head_attention", "wrong", "values_projected_with_w_k",
          "The values are projected with w_k instead of w_v (copy-paste), so the heads average "
          "the keys.",
          mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "The weights are applied as x @ W.T (nn.Linear's (out, in) layout) instead of x @ W.",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "merge_by_plain_reshape",
          "The heads' outputs (B, H, N, d_head) are reshaped to (B, N, d_model) without the "
          "transpose, which mixes tokens of different heads.",
          mha_merge_by_reshape),
    Entry("multi_head_attention", "wrong", "one_wide_head",
          "It never splits into heads: one attention over the full d_model width (only scaled "
          "by sqrt(d_head)), so the result is wrong for H > 1 and a bad num_heads raises nothing.",
          mha_single_wide_head),
    Entry("multi_head_attention", "wrong", "scale_precedence",
          "`d_model / num_heads ** 0.5` divides d_model by sqrt(H) (** binds tighter than /) "
          "instead of taking sqrt(d_model / H), so the scores are scaled wrongly.",
          mha_scale_precedence),
    Entry("multi_head_attention", "wrong", "softmax_over_heads",
          "The softmax normalises along axis 1 (the heads) instead of the last axis (the keys).",
          mha_softmax_over_heads),
    Entry("multi_head_attention", "right", "sum_over_weight_blocks", None,
          mha_head_blocks_of_weights),
    Entry("multi_head_attention", "right", "einsum_with_head_axis", None, mha_einsum),
]
