"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention)."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ split_heads
def split_no_transpose(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_dhead_major(x, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    y = x.reshape(B, N, d_head, num_heads)  # (B, N, d_head, H)
    return y.transpose(0, 3, 1, 2)  # (B, H, N, d_head)


def split_dot_T(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return x.reshape(batch, seq, num_heads, width // num_heads).T


def split_assert_guard(x, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    return np.swapaxes(x.reshape(B, N, num_heads, d_head), 1, 2)


def split_stack_axis0(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=0)


def split_loop_unscaled_offset(x, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h] = x[:, :, h:h + dh]
    return out


def split_stack_right(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_loop_right(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        for t in range(N):
            out[:, h, t, :] = x[:, t, h * dh:(h + 1) * dh]
    return out


# ============================================================================ merge_heads
def merge_no_transpose(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_dhead_major(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * d)


def merge_concat_axis1(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=1)


def merge_slice_by_n(x):
    b, h_count, n, d = x.shape
    out = np.zeros((b, n, h_count * d), dtype=x.dtype)
    for h in range(h_count):
        out[:, :, h * n:(h + 1) * n] = x[:, h]
    return out


def merge_swap_batch_heads(x):
    B, H, N, d = x.shape
    return np.swapaxes(x, 0, 1).reshape(B, N, H * d)


def merge_prepend(x):
    merged = x[:, 0]
    for h in range(1, x.shape[1]):
        merged = np.concatenate([x[:, h], merged], axis=-1)
    return merged


def merge_einsum(x):
    B, H, N, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(B, N, H * d)


def merge_dstack(x):
    return np.dstack([x[:, h] for h in range(x.shape[1])])


# ============================================================================ multi_head_attention
def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q.T).reshape(B, N, num_heads, dh).swapaxes(1, 2)
    k = (x @ w_k.T).reshape(B, N, num_heads, dh).swapaxes(1, 2)
    v = (x @ w_v.T).reshape(B, N, num_heads, dh).swapaxes(1, 2)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(dh)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    ctx = (w @ v).swapaxes(1, 2).reshape(B, N, D)
    return ctx @ w_o.T


def mha_sum_no_keepdims(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    heads = []
    for w in (w_q, w_k, w_v):
        heads.append((x @ w).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3))
    q, k, v = heads
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1)
    ctx = weights @ v
    return ctx.transpose(0, 2, 1, 3).reshape(batch, n, d_model) @ w_o


def mha_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, num_heads, N, dh)
    k = (x @ w_k).reshape(B, num_heads, N, dh)
    v = (x @ w_v).reshape(B, num_heads, N, dh)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return (p @ v).reshape(B, N, D) @ w_o


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = np.swapaxes((x @ w_q).reshape(B, N, num_heads, dh), 1, 2)
    k = np.swapaxes((x @ w_k).reshape(B, N, num_heads, dh), 1, 2)
    v = np.swapaxes((x @ w_k).reshape(B, N, num_heads, dh), 1, 2)
    p = scipy.special.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(dh), axis=-1)
    return np.swapaxes(p @ v, 1, 2).reshape(B, N, D) @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    qh = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    kh = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    vh = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    logits = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(dh)
    logits = logits - np.max(logits, axis=3, keepdims=True)
    weights = np.exp(logits)
    weights = weights / np.sum(weights, axis=3, keepdims=True)
    return (weights @ vh).transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    outs = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        q = x @ w_q[:, cols]
        k = x @ w_k[:, cols]
        v = x @ w_v[:, cols]
        s = q @ np.swapaxes(k, 1, 2) / math.sqrt(dh)
        s = s - s.max(axis=2, keepdims=True)
        p = np.exp(s)
        p = p / p.sum(axis=2, keepdims=True)
        outs.append(p @ v)
    return np.concatenate(outs, axis=-1) @ w_o


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    D = x.shape[-1]
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    wq, wk, wv = (np.asarray(w, dtype=np.float64).reshape(D, num_heads, dh)
                  for w in (w_q, w_k, w_v))
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, dh, D)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    p = scipy.special.softmax(np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(dh), axis=-1)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hef->bif", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) and "
          "transposing, so each 'head' mixes features of different tokens", split_no_transpose),
    Entry("split_heads", "wrong", "d_head_major_reshape",
          "reshapes to (B, N, d_head, H), so head h gets every H-th feature (h, h+H, ...) "
          "instead of the contiguous block h*d_head:(h+1)*d_head", split_dhead_major),
    Entry("split_heads", "wrong", "dot_T_on_4d",
          "uses .T to swap the head and token axes, but on a 4-D array .T reverses all four "
          "axes and returns (d_head, H, N, B)", split_dot_T),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "guards divisibility with `assert`, so a bad num_heads raises AssertionError, not the "
          "ValueError the contract asks for", split_assert_guard),
    Entry("split_heads", "wrong", "stack_heads_on_axis0",
          "stacks the np.split pieces on axis 0, giving (H, B, N, d_head) instead of "
          "(B, H, N, d_head)", split_stack_axis0),
    Entry("split_heads", "wrong", "slice_offset_h_not_h_times_dhead",
          "slices features x[..., h:h+d_head] (offset h) instead of h*d_head:(h+1)*d_head, so "
          "the heads overlap", split_loop_unscaled_offset),
    Entry("split_heads", "right", "split_and_stack", None, split_stack_right),
    Entry("split_heads", "right", "double_loop", None, split_loop_right),
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to the features first, so tokens and heads are scrambled", merge_no_transpose),
    Entry("merge_heads", "wrong", "d_head_major_transpose",
          "transposes to (B, N, d_head, H) before the reshape, interleaving the heads' "
          "features instead of putting head 0's block first", merge_dhead_major),
    Entry("merge_heads", "wrong", "concatenate_on_token_axis",
          "concatenates the heads on axis 1 (the tokens) instead of the last axis, returning "
          "(B, H*N, d_head)", merge_concat_axis1),
    Entry("merge_heads", "wrong", "slice_width_uses_n",
          "writes head h into columns h*N:(h+1)*N, using the sequence length where d_head "
          "belongs (it raises a broadcasting error unless N == d_head)", merge_slice_by_n),
    Entry("merge_heads", "wrong", "swap_batch_and_heads",
          "swaps axes 0 and 1 (batch and heads) instead of 1 and 2 (heads and tokens) before "
          "reshaping", merge_swap_batch_heads),
    Entry("merge_heads", "wrong", "prepend_heads_reversed",
          "concatenates each new head in front of the running result, so the heads come out in "
          "reverse order", merge_prepend),
    Entry("merge_heads", "right", "einsum_permute", None, merge_einsum),
    Entry("merge_heads", "right", "dstack_heads", None, merge_dstack),
    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales every head's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the course "
          "applies them as x @ W", mha_linear_layout),
    Entry("multi_head_attention", "wrong", "softmax_sum_without_keepdims",
          "divides by e.sum(axis=-1) without keepdims, so the row sums line up with the key axis: "
          "numpy raises a broadcasting error, or (when the shapes happen to fit) divides each "
          "weight by another row's sum", mha_sum_no_keepdims),
    Entry("multi_head_attention", "wrong", "split_without_transpose",
          "splits heads by reshaping straight to (B, H, N, d_head) (and merges back the same "
          "way) instead of reshaping to (B, N, H, d_head) and transposing", mha_split_without_transpose),
    Entry("multi_head_attention", "wrong", "values_projected_with_w_k",
          "projects the values with w_k instead of w_v (copy-paste of the key line)",
          mha_values_from_wk),
    Entry("multi_head_attention", "wrong", "missing_output_projection",
          "returns the merged heads without the final @ w_o output projection",
          mha_no_output_projection),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None, mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None, mha_einsum_weights),
]
