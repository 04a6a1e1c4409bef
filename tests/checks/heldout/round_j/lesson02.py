"""Lesson 02 (numpy): split_heads, merge_heads, multi_head_attention; round j entries."""

import math

import numpy as np
import torch
import torch.nn.functional as F

from entry import Entry

# ------------------------------------------------------------------------------ split_heads


def split_reshape_no_transpose(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d // num_heads)


def split_head_minor_features(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_guard_operands_swapped(x, num_heads):
    b, n, d = x.shape
    if num_heads % d != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_assert_guard(x, num_heads):
    b, n, d = x.shape
    assert d % num_heads == 0, f"d_model={d} not divisible by num_heads={num_heads}"
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_d_model_from_axis1(x, num_heads):
    d_model = x.shape[1]
    d_head = d_model // num_heads
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    return x.reshape(x.shape[0], x.shape[1], num_heads, d_head).transpose(0, 2, 1, 3)


def split_single_head_shortcut(x, num_heads):
    if num_heads == 1:
        return x
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_stack_slices(x, num_heads):
    x = np.asarray(x)
    d = x.shape[-1]
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    w = d // num_heads
    return np.stack([x[:, :, h * w:(h + 1) * w] for h in range(num_heads)], axis=1)


def split_einsum_view(x, num_heads):
    b, n, d = np.shape(x)
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    parts = np.split(np.asarray(x), num_heads, axis=-1)  # H arrays (B, N, d_head)
    return np.einsum("hbnd->bhnd", np.array(parts))


# ------------------------------------------------------------------------------ merge_heads


def merge_reshape_no_transpose(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_feature_interleaved(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_loop_over_batch_axis(x):
    return np.concatenate([x[:, h] for h in range(x.shape[0])], axis=-1)


def merge_hstack(x):
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_unpack_order(x):
    b, n, h, d = x.shape  # unpacked as if (B, N, H, d)
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def merge_fortran_order(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d, order="F")


def merge_concatenate_heads(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=2)


def merge_einsum(x):
    b, h, n, d = x.shape
    return np.ascontiguousarray(np.einsum("bhnd->bnhd", x)).reshape(b, n, h * d)


# --------------------------------------------------------------------- multi_head_attention


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _split(t, h):
    b, n, d = t.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(x.shape[-1]))
    return _merge(w @ v) @ w_o


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_k, num_heads)
    v = _split(x @ w_k, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]))
    return _merge(w @ v) @ w_o.T


def mha_split_by_reshape(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    q, k, v = ((x @ w).reshape(b, num_heads, n, dh) for w in (w_q, w_k, w_v))
    w = _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(dh))
    return (w @ v).reshape(b, n, d) @ w_o


def mha_adds_causal_mask(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    n = x.shape[1]
    s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    return _merge(_softmax(s) @ v) @ w_o


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    d = x.shape[-1]
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    out = np.zeros(x.shape[:-1] + (w_o.shape[1],), dtype=np.result_type(x, w_o))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = qh @ kh.swapaxes(-1, -2) / math.sqrt(dh)
        out += (_softmax(s) @ vh) @ w_o[cols, :]
    return out


def mha_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    t = {k: torch.from_numpy(np.asarray(a, dtype=np.float64))
         for k, a in dict(x=x, q=w_q, k=w_k, v=w_v, o=w_o).items()}

    def heads(m):
        return m.view(b, n, num_heads, d // num_heads).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(heads(t["x"] @ t["q"]), heads(t["x"] @ t["k"]),
                                         heads(t["x"] @ t["v"]))
    res = ctx.transpose(1, 2).reshape(b, n, d) @ t["o"]
    return res.numpy().astype(np.result_type(x, w_q))


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "Reshapes (B, N, d_model) straight to (B, H, N, d_head), which scrambles tokens and "
          "features across heads instead of giving head h the features h*d_head:(h+1)*d_head.",
          split_reshape_no_transpose),
    Entry("split_heads", "wrong", "head_index_fastest",
          "Reshapes to (B, N, d_head, H) before transposing, so head h gets every H-th "
          "feature (h, h+H, ...) instead of a contiguous block.", split_head_minor_features),
    Entry("split_heads", "wrong", "divisibility_guard_operands_swapped",
          "Checks num_heads % d_model instead of d_model % num_heads, so it raises on valid "
          "inputs with more than one head.", split_guard_operands_swapped),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "Guards divisibility with assert, so a bad num_heads raises AssertionError instead "
          "of ValueError.", split_assert_guard),
    Entry("split_heads", "wrong", "d_model_read_from_sequence_axis",
          "Reads d_model from x.shape[1] (the sequence length) when computing d_head, so the "
          "reshape is given the wrong head width and fails (or scrambles the features).",
          split_d_model_from_axis1),
    Entry("split_heads", "wrong", "single_head_returns_input",
          "Returns x unchanged when num_heads is 1, dropping the head axis: (B, N, d) instead "
          "of (B, 1, N, d).", split_single_head_shortcut),
    Entry("split_heads", "right", "stack_feature_slices", None, split_stack_slices),
    Entry("split_heads", "right", "np_split_einsum", None, split_einsum_view),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "Reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis next to the features, which mixes tokens across heads.",
          merge_reshape_no_transpose),
    Entry("merge_heads", "wrong", "features_interleaved",
          "Permutes to (B, N, d_head, H) before reshaping, so the features of the heads are "
          "interleaved instead of concatenated head after head.", merge_feature_interleaved),
    Entry("merge_heads", "wrong", "loops_over_batch_axis",
          "Loops over range(x.shape[0]), the batch size, instead of the number of heads, so "
          "it concatenates the wrong number of heads.", merge_loop_over_batch_axis),
    Entry("merge_heads", "wrong", "hstack_joins_sequence_axis",
          "Uses np.hstack, which joins along axis 1 (the sequence axis) rather than the last "
          "axis, so it returns (B, H*N, d_head).", merge_hstack),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "Unpacks x.shape as (B, N, H, d) although x is (B, H, N, d), so the final reshape "
          "uses H as the sequence length and N*d_head as the width.", merge_unpack_order),
    Entry("merge_heads", "wrong", "reshape_order_F",
          "Reshapes with order='F' (column-major), which fills the merged features in the "
          "wrong order.", merge_fortran_order),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_concatenate_heads),
    Entry("merge_heads", "right", "einsum_then_reshape", None, merge_einsum),

    Entry("multi_head_attention", "wrong", "missing_output_projection",
          "Returns the merged heads without multiplying by w_o.", mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "scaled_by_sqrt_d_model",
          "Scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head).", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "values_projected_with_w_k",
          "Projects the values with w_k instead of w_v.", mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "weights_transposed_linear_layout",
          "Applies every weight as x @ W.T (nn.Linear's layout) instead of x @ W.",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "heads_split_by_plain_reshape",
          "Splits and merges heads with a plain reshape between (B, N, d) and (B, H, N, d_head) "
          "instead of reshape plus transpose, so heads mix tokens and features.",
          mha_split_by_reshape),
    Entry("multi_head_attention", "wrong", "adds_a_causal_mask",
          "Applies a causal mask although the exercise has no mask, so each token only "
          "attends to earlier tokens.", mha_adds_causal_mask),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None, mha_per_head_columns),
    Entry("multi_head_attention", "right", "torch_sdpa_float64", None, mha_torch_sdpa),
]
