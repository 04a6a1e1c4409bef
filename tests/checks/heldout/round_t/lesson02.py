"""Held-out catalogue, lesson 02 (multi-head, numpy): split_heads, merge_heads,
multi_head_attention. Each wrong answer carries exactly one slip."""

import math

import numpy as np

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ============================================================================ split_heads
def split_reshape_only(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_dims_swapped(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_torch_transpose(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = d_model // num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(1, 2)


def split_true_division(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    _check(width, num_heads)
    head_size = width / num_heads
    return np.transpose(x.reshape(batch, seq, num_heads, head_size), (0, 2, 1, 3))


def split_guard_reversed(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d_model // num_heads).swapaxes(1, 2)


def split_stack_axis2(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    d_head = d_model // num_heads
    heads = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(heads, axis=2)


def split_slice_stack(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    _check(d_model, num_heads)
    size = d_model // num_heads
    return np.stack([x[..., i * size:(i + 1) * size] for i in range(num_heads)], axis=1)


def split_np_split_moveaxis(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    parts = np.split(x, num_heads, axis=-1)  # H arrays (B, N, d_head)
    return np.moveaxis(np.array(parts), 0, 1)


# ============================================================================ merge_heads
def merge_reshape_only(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_transpose_0231(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_hstack(x):
    x = np.asarray(x)
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_unpack_order(x):
    x = np.asarray(x)
    batch, seq, heads, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * d_head)


def merge_loop_from_one(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for head in range(1, h):
        out[:, :, head * d:(head + 1) * d] = x[:, head]
    return out


def merge_sum_heads(x):
    x = np.asarray(x)
    return x.sum(axis=1)


def merge_concatenate_list(x):
    x = np.asarray(x)
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)


def merge_einsum_eye(x):
    x = np.asarray(x, dtype=np.float64)
    b, h, n, d = x.shape
    out = np.empty((b, n, h, d))
    np.einsum("bhnd->bnhd", x, out=out)
    return out.reshape(b, n, h * d)


# ============================================================================ multi_head_attention
def _softmax(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def _split(t, h):
    b, n, d = t.shape
    if d % h:
        raise ValueError(f"d_model={d} is not divisible by num_heads={h}")
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    q, k, v = _split(x @ w_q, num_heads), _split(x @ w_k, num_heads), _split(x @ w_v, num_heads)
    w = _softmax(q @ k.swapaxes(-1, -2) / np.sqrt(d_model))
    return _merge(w @ v) @ w_o


def mha_softmax_axis1(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    w = _softmax(scores, axis=1)
    return _merge(w @ v) @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax(scores) @ v)


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    queries = _split(x @ w_q, num_heads)
    keys = _split(x @ w_k, num_heads)
    values = _split(x @ w_k, num_heads)
    scores = queries @ keys.swapaxes(-1, -2) / math.sqrt(queries.shape[-1])
    return _merge(_softmax(scores) @ values) @ w_o


def mha_merge_no_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    heads = _softmax(scores) @ v
    return heads.reshape(b, n, d_model) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    q, k, v = (_split(x @ w.T, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax(scores) @ v) @ w_o.T


def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    outputs = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = qh @ np.transpose(kh, (0, 2, 1)) / math.sqrt(dh)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        outputs.append(p @ vh)
    return np.concatenate(outputs, axis=-1) @ w_o


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    wq, wk, wv = (np.asarray(w).reshape(d, num_heads, dh) for w in (w_q, w_k, w_v))
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(dh)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    wo = np.asarray(w_o).reshape(num_heads, dh, d)
    return np.einsum("bhne,hed->bnd", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without a transpose, so each 'head' is a "
          "block of consecutive numbers in memory that mixes tokens, not features "
          "h*d_head:(h+1)*d_head of every token",
          split_reshape_only),
    Entry("split_heads", "wrong", "reshape_dims_swapped",
          "reshapes the features as (d_head, H) instead of (H, d_head), so head h gets the "
          "strided features h, h+H, h+2H, ... instead of a contiguous block",
          split_dims_swapped),
    Entry("split_heads", "wrong", "torch_style_transpose",
          "calls the numpy array's .transpose(1, 2) as if it were torch's (swap two axes); "
          "numpy's transpose wants a full permutation, so it raises for a 4-D array",
          split_torch_transpose),
    Entry("split_heads", "wrong", "true_division_head_size",
          "computes d_head with `/`, a float, which numpy's reshape refuses (TypeError) "
          "instead of `//`",
          split_true_division),
    Entry("split_heads", "wrong", "guard_operands_reversed",
          "the divisibility check tests num_heads % d_model instead of d_model % num_heads, so "
          "valid head counts (e.g. 3 heads of d_model=12) raise ValueError",
          split_guard_reversed),
    Entry("split_heads", "wrong", "stack_on_axis_2",
          "slices the heads correctly but stacks them on axis 2, giving (B, N, H, d_head) "
          "instead of (B, H, N, d_head)",
          split_stack_axis2),
    Entry("split_heads", "right", "slice_and_stack", None, split_slice_stack),
    Entry("split_heads", "right", "np_split_moveaxis", None, split_np_split_moveaxis),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis next to d_head, so tokens and heads get scrambled",
          merge_reshape_only),
    Entry("merge_heads", "wrong", "transpose_0231",
          "permutes to (B, N, d_head, H) before the reshape, so the features of the heads are "
          "interleaved instead of head 0's block first",
          merge_transpose_0231),
    Entry("merge_heads", "wrong", "hstack_axis1",
          "uses np.hstack on the (B, N, d_head) heads believing it joins the last axis; for "
          "arrays of 3 or more dimensions hstack concatenates along axis 1 (the tokens)",
          merge_hstack),
    Entry("merge_heads", "wrong", "shape_unpacked_in_output_order",
          "unpacks x.shape as (B, N, H, d_head), the output's order, so the reshape uses H "
          "as the sequence length and N*d_head as the width",
          merge_unpack_order),
    Entry("merge_heads", "wrong", "loop_starts_at_one",
          "the copy loop runs over range(1, H), so head 0's block of features stays zero",
          merge_loop_from_one),
    Entry("merge_heads", "wrong", "sum_over_heads",
          "adds the heads together instead of concatenating them, returning (B, N, d_head)",
          merge_sum_heads),
    Entry("merge_heads", "right", "concatenate_heads", None, merge_concatenate_list),
    Entry("merge_heads", "right", "einsum_out_buffer", None, merge_einsum_eye),

    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "scales each head's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "softmax_axis_1",
          "keeps lesson 01's softmax(scores, axis=1), which was the key axis for 2-D scores "
          "but is the head axis of (B, H, N, N) scores",
          mha_softmax_axis1),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without the final `@ w_o` output projection",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "copy-paste slip: the values are projected with w_k instead of w_v",
          mha_values_from_wk),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads with a plain reshape of (B, H, N, d_head) to (B, N, d_model), "
          "without putting the head axis after the token axis first",
          mha_merge_no_transpose),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the "
          "course's functional weights are (d_in, d_out), applied as x @ W",
          mha_linear_layout),
    Entry("multi_head_attention", "right", "per_head_column_loop", None, mha_head_loop),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum_weights),
]
