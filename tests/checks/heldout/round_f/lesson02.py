"""Lesson 02 (numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


# ---------------------------------------------------------------- split_heads, wrong
def split_reshape_only(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d // num_heads)


def split_interleaved(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_heads_first(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(2, 0, 1, 3)


def split_slices_no_check(x, num_heads):
    d_head = x.shape[-1] // num_heads
    return np.stack([x[..., h * d_head:(h + 1) * d_head] for h in range(num_heads)], axis=1)


def split_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, f"d_model={d} is not divisible by num_heads={num_heads}"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_true_division(x, num_heads):
    b, n, d = x.shape
    d_head = d / num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


# ---------------------------------------------------------------- split_heads, right
def split_np_split(x, num_heads):
    x = np.asarray(x)
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_index_loop(x, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    out = np.empty((b, num_heads, n, dh), dtype=x.dtype)
    for h in range(num_heads):
        for j in range(dh):
            out[:, h, :, j] = x[:, :, h * dh + j]
    return out


# ---------------------------------------------------------------- merge_heads, wrong
def merge_reshape_only(x):
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def merge_interleaved(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_concat_seq(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_swap_batch_heads(x):
    b, h, n, dh = x.shape
    return x.swapaxes(0, 1).reshape(b, n, h * dh)


def merge_sum_heads(x):
    return x.sum(axis=1)


def merge_heads_for_seq(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, h, n * dh)


# ---------------------------------------------------------------- merge_heads, right
def merge_concat_features(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_moveaxis(x):
    b, h, n, dh = x.shape
    return np.ascontiguousarray(np.moveaxis(x, 1, 2)).reshape(b, n, -1)


# ---------------------------------------------------------------- multi_head_attention, wrong
def _split(x, h):
    b, n, d = x.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


def _attn(q, k, v, scale):
    s = q @ np.swapaxes(k, -1, -2) * scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attn(q, k, v, 1.0 / math.sqrt(x.shape[-1]))
    return _merge(ctx) @ w_o


def mha_no_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attn(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return _merge(ctx)


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attn(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return _merge(ctx) @ w_o.T


def mha_interleaved_heads(x, w_q, w_k, w_v, w_o, num_heads):
    def split(t):
        b, n, d = t.shape
        if d % num_heads:
            raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
        return t.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)

    def merge(t):
        b, h, n, dh = t.shape
        return t.transpose(0, 2, 3, 1).reshape(b, n, h * dh)

    q, k, v = (split(x @ w) for w in (w_q, w_k, w_v))
    ctx = _attn(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return merge(ctx) @ w_o


def mha_k_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_q, num_heads)
    v = _split(x @ w_v, num_heads)
    ctx = _attn(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return _merge(ctx) @ w_o


def mha_merge_reshape_only(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    ctx = _attn(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
    return ctx.reshape(x.shape) @ w_o


# ---------------------------------------------------------------- multi_head_attention, right
def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    out = np.zeros(x.shape, dtype=np.result_type(x, w_o))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        out += (p @ v) @ w_o[cols, :]  # each head's share of the output projection
    return out


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    wq = w_q.reshape(d, num_heads, dh)
    wk = w_k.reshape(d, num_heads, dh)
    wv = w_v.reshape(d, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh)
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhqe,hed->bqd", ctx, wo)


E = Entry
ENTRIES = [
    E("split_heads", "wrong", "reshape_without_transpose",
      "Reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' mixes "
      "tokens and features.", split_reshape_only),
    E("split_heads", "wrong", "interleaved_features",
      "Reshapes the features as (d_head, H) so that head h gets every H-th feature instead of "
      "the contiguous block h*d_head:(h+1)*d_head.", split_interleaved),
    E("split_heads", "wrong", "head_axis_moved_to_front",
      "Transposes the head axis in front of the batch axis, giving (H, B, N, d_head).",
      split_heads_first),
    E("split_heads", "wrong", "slices_without_divisibility_check",
      "Slices d_model // num_heads features per head without checking divisibility, so a "
      "d_model that num_heads does not divide silently drops features instead of raising "
      "ValueError.", split_slices_no_check),
    E("split_heads", "wrong", "assert_instead_of_valueerror",
      "Checks divisibility with assert, which raises AssertionError rather than the ValueError "
      "the contract asks for.", split_assert),
    E("split_heads", "wrong", "true_division_for_d_head",
      "Computes d_head with / instead of //, so reshape gets a float and raises TypeError.",
      split_true_division),
    E("split_heads", "right", "np_split_stack", None, split_np_split),
    E("split_heads", "right", "feature_index_loop", None, split_index_loop),

    E("merge_heads", "wrong", "reshape_without_transpose",
      "Reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without first swapping the head "
      "and sequence axes.", merge_reshape_only),
    E("merge_heads", "wrong", "interleaves_head_features",
      "Moves the head axis last before reshaping, which interleaves the heads' features "
      "instead of concatenating them.", merge_interleaved),
    E("merge_heads", "wrong", "concatenates_along_sequence",
      "Concatenates the heads along the sequence axis instead of the feature axis.",
      merge_concat_seq),
    E("merge_heads", "wrong", "swaps_batch_and_heads",
      "Swaps the batch and head axes (0, 1) instead of the head and sequence axes (1, 2) "
      "before the reshape.", merge_swap_batch_heads),
    E("merge_heads", "wrong", "sums_heads",
      "Sums the heads instead of concatenating their features.", merge_sum_heads),
    E("merge_heads", "wrong", "heads_in_sequence_slot",
      "Uses the number of heads where the sequence length belongs in the final reshape.",
      merge_heads_for_seq),
    E("merge_heads", "right", "concatenate_features", None, merge_concat_features),
    E("merge_heads", "right", "moveaxis_reshape", None, merge_moveaxis),

    E("multi_head_attention", "wrong", "scaled_by_sqrt_d_model",
      "Scales each head's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).",
      mha_scale_dmodel),
    E("multi_head_attention", "wrong", "no_output_projection",
      "Forgets the output projection w_o after merging the heads.", mha_no_w_o),
    E("multi_head_attention", "wrong", "nn_linear_weight_layout",
      "Applies the weights in nn.Linear's layout (x @ W.T) instead of the course's x @ W.",
      mha_linear_layout),
    E("multi_head_attention", "wrong", "interleaved_head_split",
      "Splits (and merges) heads by interleaving features, so head h gets every H-th feature "
      "instead of a contiguous block.", mha_interleaved_heads),
    E("multi_head_attention", "wrong", "keys_projected_with_w_q",
      "Copy-paste slip: projects the keys with w_q instead of w_k.", mha_k_from_w_q),
    E("multi_head_attention", "wrong", "merge_by_reshape_only",
      "Merges the heads by reshaping (B, H, N, d_head) to (B, N, d_model) without swapping "
      "the head and sequence axes.", mha_merge_reshape_only),
    E("multi_head_attention", "right", "per_head_columns_loop", None, mha_head_loop),
    E("multi_head_attention", "right", "einsum_head_weights", None, mha_einsum),
]
