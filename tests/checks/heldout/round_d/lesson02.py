"""Round d, lesson 02 (numpy): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- split_heads
def split_no_transpose(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d // num_heads)


def split_interleaved(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_assert(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, "d_model must be divisible by num_heads"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_uses_seq_len(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    d_head = x.shape[1] // num_heads
    return x.reshape(b, -1, num_heads, d_head).transpose(0, 2, 1, 3)


def split_reversed_modulo(x, num_heads):
    b, n, d = x.shape
    if num_heads % d:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_stack_slices(x, num_heads):
    x = np.asarray(x)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    return np.stack([x[:, :, h * dh:(h + 1) * dh] for h in range(num_heads)], axis=1)


def split_np_split(x, num_heads):
    x = np.asarray(x)
    d = x.shape[-1]
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.moveaxis(np.array(np.split(x, num_heads, axis=-1)), 0, 1)


# ----------------------------------------------------------------------------- merge_heads
def merge_no_transpose(x):
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def merge_feature_major(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * dh)


def merge_unpacks_wrong_order(x):
    b, n, h, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


def merge_sum_heads(x):
    return x.sum(axis=1)


def merge_concat_seq_axis(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_concat_last(x):
    x = np.asarray(x)
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)


def merge_fill_loop(x):
    x = np.asarray(x)
    b, h, n, dh = x.shape
    out = np.empty((b, n, h * dh), dtype=x.dtype)
    for i in range(h):
        out[:, :, i * dh:(i + 1) * dh] = x[:, i]
    return out


# ----------------------------------------------------------------------------- multi_head_attention
def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _split(x, h):
    b, n, d = x.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return x.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(x):
    b, h, n, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * dh)


def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(x.shape[-1]))
    return _merge(w @ v) @ w_o


def mha_no_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v)


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o.T


def mha_reshape_split(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    q, k, v = ((x @ w).reshape(b, num_heads, n, d // num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return (w @ v).reshape(b, n, d) @ w_o


def mha_keys_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_q, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o


def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    heads = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        heads.append(_softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)) @ v)
    return np.concatenate(heads, axis=-1) @ w_o


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    x64 = x.astype(np.float64)
    q = np.einsum("bnd,dhe->bhne", x64, w_q.astype(np.float64).reshape(d, num_heads, dh))
    k = np.einsum("bnd,dhe->bhne", x64, w_k.astype(np.float64).reshape(d, num_heads, dh))
    v = np.einsum("bnd,dhe->bhne", x64, w_v.astype(np.float64).reshape(d, num_heads, dh))
    w = _softmax(np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(dh))
    ctx = np.einsum("bhij,bhje->bhie", w, v)
    out = np.einsum("bhie,hef->bif", ctx, w_o.astype(np.float64).reshape(num_heads, dh, d))
    return out.astype(x.dtype)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "Reshapes straight to (B, H, N, d_head) without the transpose, so heads mix tokens and features.",
          split_no_transpose),
    Entry("split_heads", "wrong", "interleaved_features",
          "Reshapes the last axis as (d_head, H) instead of (H, d_head), so head h gets every H-th feature instead of a contiguous block.",
          split_interleaved),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "Checks divisibility with assert, which raises AssertionError instead of a ValueError naming the values.",
          split_assert),
    Entry("split_heads", "wrong", "d_head_from_seq_len",
          "Computes d_head from x.shape[1] (the sequence length) instead of the model width x.shape[2].",
          split_uses_seq_len),
    Entry("split_heads", "wrong", "reversed_modulo_check",
          "Writes the divisibility check as num_heads % d_model, so valid inputs raise.",
          split_reversed_modulo),
    Entry("split_heads", "right", "stack_slices", None, split_stack_slices),
    Entry("split_heads", "right", "np_split_moveaxis", None, split_np_split),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "Reshapes (B, H, N, d_head) to (B, N, d_model) without moving the head axis next to d_head first.",
          merge_no_transpose),
    Entry("merge_heads", "wrong", "feature_major",
          "Transposes to (B, N, d_head, H) before flattening, interleaving the heads' features.",
          merge_feature_major),
    Entry("merge_heads", "wrong", "unpacks_shape_as_BNHd",
          "Unpacks x.shape as (B, N, H, d_head), so the reshape uses the head count as the sequence length.",
          merge_unpacks_wrong_order),
    Entry("merge_heads", "wrong", "sums_heads",
          "Sums the heads instead of concatenating them, giving width d_head instead of d_model.",
          merge_sum_heads),
    Entry("merge_heads", "wrong", "concat_on_sequence_axis",
          "Concatenates the heads along the sequence axis instead of the feature axis.",
          merge_concat_seq_axis),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_concat_last),
    Entry("merge_heads", "right", "fill_loop", None, merge_fill_loop),

    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "Scales the scores by sqrt(d_model) instead of sqrt(d_head).",
          mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "Forgets the output projection w_o after merging the heads.",
          mha_no_w_o),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "Applies the weights transposed (x @ W.T, nn.Linear's layout) instead of x @ W.",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "reshape_split_heads",
          "Splits heads by reshaping to (B, H, N, d_head) without a transpose, mixing tokens across heads.",
          mha_reshape_split),
    Entry("multi_head_attention", "wrong", "keys_from_w_q",
          "Copy-paste slip: projects the keys with w_q instead of w_k.",
          mha_keys_from_w_q),
    Entry("multi_head_attention", "right", "per_head_column_slices", None, mha_head_loop),
    Entry("multi_head_attention", "right", "einsum_float64", None, mha_einsum),
]
