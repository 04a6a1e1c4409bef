"""Held-out catalogue, lesson 02 (multi-head attention): split_heads, merge_heads,
multi_head_attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ split_heads
def split_heads_reshape_only(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_interleaved(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    y = x.reshape(b, n, d_head, num_heads)  # (B, N, d_head, H)
    return y.transpose(0, 3, 1, 2)  # (B, H, N, d_head)


def split_heads_torch_transpose(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    if width % num_heads != 0:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    per_head = width // num_heads
    return x.reshape(batch, seq, num_heads, per_head).transpose(1, 2)


def split_heads_modulo_reversed(x, num_heads):
    B, N, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return np.transpose(x.reshape(B, N, num_heads, d_head), (0, 2, 1, 3))


def split_heads_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_stack_axis2(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    heads = [x[:, :, h * dh:(h + 1) * dh] for h in range(num_heads)]
    return np.stack(heads, axis=2)


def split_heads_np_split(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_heads_loop_fill(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if num_heads <= 0 or D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        for t in range(N):
            out[:, h, t, :] = x[:, t, h * dh:(h + 1) * dh]
    return out


# ============================================================================ merge_heads
def merge_heads_reshape_only(x):
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_wrong_permutation(x):
    b, h, n, d = x.shape
    return np.transpose(x, (0, 2, 3, 1)).reshape(b, n, h * d)


def merge_heads_concat_axis1(x):
    heads = [x[:, h] for h in range(x.shape[1])]  # each (B, N, d_head)
    return np.concatenate(heads, axis=1)


def merge_heads_transpose_no_axes(x):
    B, H, N, d_head = x.shape
    return x.transpose().reshape(B, N, H * d_head)


def merge_heads_unpack_order(x):
    batch, seq, heads, dim = x.shape  # (B, N, H, d_head)
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * dim)


def merge_heads_loop_skips_last(x):
    B, H, N, dh = x.shape
    out = np.zeros((B, N, H * dh), dtype=x.dtype)
    for h in range(H - 1):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h, :, :]
    return out


def merge_heads_concatenate(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_index_loops(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    out = np.empty((B, N, H * dh), dtype=x.dtype)
    for n in range(N):
        for h in range(H):
            out[:, n, h * dh:(h + 1) * dh] = x[:, h, n, :]
    return out


# ============================================================================ multi_head_attention
def mha_double_scale(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    scale = 1.0 / np.sqrt(dh)

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q = heads(x @ w_q) * scale
    k = heads(x @ w_k) * scale
    v = heads(x @ w_v)
    s = q @ k.swapaxes(-1, -2)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return (weights @ v).transpose(0, 2, 1, 3).reshape(b, n, d_model)


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    H, dh = num_heads, D // num_heads
    Q = (x @ w_q).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    K = (x @ w_k).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    V = (x @ w_v).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    S = np.einsum("bhqd,bhkd->bhqk", Q, K) / np.sqrt(dh)
    S = np.exp(S - S.max(axis=-1, keepdims=True))
    A = S / S.sum(axis=-1, keepdims=True)
    O = np.einsum("bhqk,bhkd->bhqd", A, V)  # (B, H, N, dh)
    return O.reshape(B, N, D) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def project(w):
        y = x @ w.T
        return y.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = project(w_q), project(w_k), project(w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    s = s - np.max(s, axis=-1, keepdims=True)
    a = np.exp(s)
    a = a / np.sum(a, axis=-1, keepdims=True)
    out = (a @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
    return out @ w_o.T


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)

    q = split(x @ w_q)
    k = split(x @ w_k)
    v = split(x @ w_k)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    merged = (w @ v).transpose(0, 2, 1, 3).reshape(B, N, d_model)
    return merged @ w_o


def mha_precedence_half_power(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / d_head ** 1 / 2
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, d_model) @ w_o


def mha_per_head_weight_slices(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    total = np.zeros((B, N, D))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ w_q[:, cols]  # (B, N, dh)
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        s = qh @ kh.transpose(0, 2, 1) / math.sqrt(dh)
        p = scipy.special.softmax(s, axis=-1)
        total += (p @ vh) @ w_o[cols, :]  # head h's share of the output projection
    return total.astype(x.dtype)


def mha_einsum_float64(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    D = x.shape[-1]
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    x64 = x.astype(np.float64)
    wq = np.asarray(w_q, np.float64).reshape(D, num_heads, dh)
    wk = np.asarray(w_k, np.float64).reshape(D, num_heads, dh)
    wv = np.asarray(w_v, np.float64).reshape(D, num_heads, dh)
    wo = np.asarray(w_o, np.float64).reshape(num_heads, dh, D)
    q = np.einsum("bnd,dhe->bhne", x64, wq)
    k = np.einsum("bnd,dhe->bhne", x64, wk)
    v = np.einsum("bnd,dhe->bhne", x64, wv)
    logits = np.einsum("bhqe,bhke->bhqk", q, k) / math.sqrt(dh)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhqe,hed->bqd", ctx, wo).astype(x.dtype)


ENTRIES = [
    # split_heads
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without the transpose, so a 'head' is a block "
          "of consecutive token features cut across tokens, not features h*d_head:(h+1)*d_head "
          "of every token",
          split_heads_reshape_only),
    Entry("split_heads", "wrong", "interleaved_features",
          "reshapes to (B, N, d_head, H) (the two split axes in the wrong order), so head h gets "
          "every H-th feature h, h+H, ... instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_interleaved),
    Entry("split_heads", "wrong", "torch_style_transpose",
          "calls numpy's transpose(1, 2) as if it were torch's: numpy's transpose wants a full "
          "permutation of the axes, so it raises on every input",
          split_heads_torch_transpose),
    Entry("split_heads", "wrong", "modulo_operands_reversed",
          "the divisibility guard tests num_heads % d_model instead of d_model % num_heads, so "
          "it raises ValueError for valid head counts smaller than d_model",
          split_heads_modulo_reversed),
    Entry("split_heads", "wrong", "true_division_head_size",
          "d_head is computed with `/`, a float, and reshape refuses a float size (TypeError); "
          "`//` belongs there",
          split_heads_true_division),
    Entry("split_heads", "wrong", "stack_on_axis_2",
          "the head slices are stacked on axis 2 instead of axis 1, so the result has shape "
          "(B, N, H, d_head) instead of (B, H, N, d_head)",
          split_heads_stack_axis2),
    Entry("split_heads", "right", "np_split_and_stack", None, split_heads_np_split),
    Entry("split_heads", "right", "loop_fill", None, split_heads_loop_fill),
    # merge_heads
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to d_head first, so tokens and heads are scrambled",
          merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "transpose_0231",
          "transposes to (B, N, d_head, H) instead of (B, N, H, d_head) before the reshape, so "
          "the heads' features come out interleaved instead of head 0's block first",
          merge_heads_wrong_permutation),
    Entry("merge_heads", "wrong", "concatenate_on_axis_1",
          "concatenates the heads along axis 1 (the tokens) instead of the last axis, giving "
          "(B, H*N, d_head) instead of (B, N, H*d_head)",
          merge_heads_concat_axis1),
    Entry("merge_heads", "wrong", "transpose_without_axes",
          "np.transpose without an axes argument reverses all four axes instead of swapping H "
          "and N, so the reshape scrambles the values",
          merge_heads_transpose_no_axes),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d_head) although the input is (B, H, N, d_head), so the "
          "reshape builds (B, H, N*d_head) instead of (B, N, H*d_head)",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "loop_misses_last_head",
          "the copy loop runs range(H - 1), so the last head's block stays zero",
          merge_heads_loop_skips_last),
    Entry("merge_heads", "right", "concatenate_last_axis", None, merge_heads_concatenate),
    Entry("merge_heads", "right", "index_loops", None, merge_heads_index_loops),
    # multi_head_attention
    Entry("multi_head_attention", "wrong", "scales_q_and_k",
          "both q and k are multiplied by 1/sqrt(d_head), so the scores are divided by d_head "
          "instead of sqrt(d_head)",
          mha_double_scale),
    Entry("multi_head_attention", "wrong", "forgets_w_o",
          "returns the merged heads without the output projection `@ w_o`",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "swapping H and N back, so heads and tokens are scrambled before w_o",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "weights_transposed_linear_layout",
          "applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the course "
          "stores them as (d_in, d_out) and applies x @ W",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "the values are projected with w_k (copy-paste of the key line) instead of w_v",
          mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "half_power_precedence",
          "`/ d_head ** 1 / 2` parses as (scores / d_head) / 2, so the scores are divided by "
          "2*d_head instead of sqrt(d_head)",
          mha_precedence_half_power),
    Entry("multi_head_attention", "right", "per_head_weight_slices", None,
          mha_per_head_weight_slices),
    Entry("multi_head_attention", "right", "einsum_float64", None, mha_einsum_float64),
]
