"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention.

Each function is one learner's answer; wrong ones carry exactly one slip.
"""

import math

import numpy as np
from scipy.special import softmax as scipy_softmax

from entry import Entry


# ============================================================================ split_heads
def split_heads_reshape_only(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_strided(x, num_heads):
    x = np.asarray(x)
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    y = x.reshape(batch, seq, d_head, num_heads)
    return y.transpose(0, 3, 1, 2)


def split_heads_stack_axis0(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=-1)
    return np.stack(chunks, axis=0)


def split_heads_true_division(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_seq_len_as_width(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = x.shape[1] // num_heads
    return np.swapaxes(x.reshape(B, N, num_heads, d_head), 1, 2)


def split_heads_assert_guard(x, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} is not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_right_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    width = d_model // num_heads
    heads = [x[:, :, h * width:(h + 1) * width] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_heads_right_moveaxis(x, num_heads):
    arr = np.asarray(x)
    if arr.shape[-1] % num_heads != 0:
        raise ValueError(
            f"d_model={arr.shape[-1]} is not divisible by num_heads={num_heads}")
    per_token = arr.reshape(arr.shape[0], arr.shape[1], num_heads, -1)
    return np.ascontiguousarray(np.moveaxis(per_token, 2, 1))


# ============================================================================ merge_heads
def merge_heads_reshape_only(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_feature_major(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * d)


def merge_heads_concat_seq_axis(x):
    heads = [x[:, h] for h in range(x.shape[1])]
    return np.concatenate(heads, axis=1)


def merge_heads_unpack_order(x):
    batch, seq, heads, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * d_head)


def merge_heads_iterate_array(x):
    return np.concatenate([head for head in x], axis=-1)


def merge_heads_int_buffer(x):
    B, H, N, d = x.shape
    out = np.zeros((B, N, H * d), dtype=int)
    for h in range(H):
        out[:, :, h * d:(h + 1) * d] = x[:, h, :, :]
    return out


def merge_heads_right_einsum(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


def merge_heads_right_concat(x):
    x = np.asarray(x)
    return np.concatenate([x[:, i, :, :] for i in range(x.shape[1])], axis=-1)


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
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
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_wq_for_keys(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_q).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(batch, n, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    att = np.exp(scores)
    att /= att.sum(axis=-1, keepdims=True)
    heads = att @ v
    return heads.transpose(0, 2, 1, 3).reshape(batch, n, d_model) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = np.swapaxes((x @ w_q).reshape(B, N, num_heads, d_head), 1, 2)
    k = np.swapaxes((x @ w_k).reshape(B, N, num_heads, d_head), 1, 2)
    v = np.swapaxes((x @ w_v).reshape(B, N, num_heads, d_head), 1, 2)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d_head)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    a = s / s.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bhkd->bhqd", a, v)
    merged = ctx.reshape(B, N, d_model)
    return merged @ w_o


def mha_sum_no_keepdims(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    hd = d_model // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    K = (x @ w_k).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    V = (x @ w_v).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    S = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(hd)
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    A = E / E.sum(axis=-1)
    O = (A @ V).transpose(0, 2, 1, 3).reshape(B, N, d_model)
    return O @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)

    q = heads(x @ w_q.T)
    k = heads(x @ w_k.T)
    v = heads(x @ w_v.T)
    sc = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    w = np.exp(sc - sc.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, d_model) @ w_o.T


def mha_softmax_axis_minus2(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).swapaxes(1, 2)
    logits = q @ k.swapaxes(-1, -2) / np.sqrt(d_head)
    logits = logits - logits.max(axis=-2, keepdims=True)
    probs = np.exp(logits)
    probs = probs / probs.sum(axis=-2, keepdims=True)
    return (probs @ v).swapaxes(1, 2).reshape(B, N, D) @ w_o


def mha_right_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    outputs = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        qh = x @ w_q[:, cols]
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        s = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(d_head)
        s = s - s.max(axis=2, keepdims=True)
        p = np.exp(s)
        p = p / p.sum(axis=2, keepdims=True)
        outputs.append(p @ vh)
    return np.concatenate(outputs, axis=-1) @ w_o


def mha_right_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    wq = np.asarray(w_q, dtype=np.float64).reshape(d, num_heads, dh)
    wk = np.asarray(w_k, dtype=np.float64).reshape(d, num_heads, dh)
    wv = np.asarray(w_v, dtype=np.float64).reshape(d, num_heads, dh)
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, dh, d)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    p = scipy_softmax(np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(dh), axis=-1)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hef->bif", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-without-transpose",
          "it reshapes straight to (B, H, N, d_head) without a transpose, which cuts the "
          "flattened tokens-and-features into blocks, so a head holds pieces of several tokens",
          split_heads_reshape_only),
    Entry("split_heads", "wrong", "strided-heads",
          "it reshapes to (B, N, d_head, H), so head h gets features h, h+H, h+2H, ... instead "
          "of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_strided),
    Entry("split_heads", "wrong", "stack-on-axis-0",
          "np.stack puts the heads on axis 0, so the result is (H, B, N, d_head) instead of "
          "(B, H, N, d_head)",
          split_heads_stack_axis0),
    Entry("split_heads", "wrong", "true-division-d_head",
          "d_head is computed with `/`, a float, and reshape rejects a float dimension: it "
          "raises TypeError on every valid input",
          split_heads_true_division),
    Entry("split_heads", "wrong", "seq-len-as-d_model",
          "d_head is computed from x.shape[1] (the sequence length N) instead of d_model, so "
          "the reshape raises (or splits into the wrong sizes) on valid inputs",
          split_heads_seq_len_as_width),
    Entry("split_heads", "wrong", "assert-guard",
          "the divisibility check is an `assert`, which raises AssertionError (and disappears "
          "under python -O) instead of the ValueError the contract asks for",
          split_heads_assert_guard),
    Entry("split_heads", "right", "slice-and-stack", None, split_heads_right_slices),
    Entry("split_heads", "right", "moveaxis", None, split_heads_right_moveaxis),

    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "it reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis next to the features, so tokens and heads are scrambled",
          merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "feature-major-order",
          "it transposes to (B, N, d_head, H) before reshaping, so the heads' features come "
          "out interleaved (feature 0 of every head first) instead of head 0's block first",
          merge_heads_feature_major),
    Entry("merge_heads", "wrong", "concat-on-sequence-axis",
          "the heads are concatenated along axis 1 (the sequence axis), giving "
          "(B, H*N, d_head) instead of (B, N, H*d_head)",
          merge_heads_concat_seq_axis),
    Entry("merge_heads", "wrong", "unpack-order",
          "the shape is unpacked as (B, N, H, d) although x is (B, H, N, d), so the reshape "
          "uses the head count as the sequence length and the result has the wrong shape",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "iterate-batch-axis",
          "iterating over the array walks its first axis (the batch), not the heads, so the "
          "batch elements are concatenated and the result is (H, N, B*d_head)",
          merge_heads_iterate_array),
    Entry("merge_heads", "wrong", "int-buffer",
          "the output buffer is allocated with dtype=int, so every value is truncated to an "
          "integer when the heads are copied in",
          merge_heads_int_buffer),
    Entry("merge_heads", "right", "einsum-permute", None, merge_heads_right_einsum),
    Entry("merge_heads", "right", "concat-heads", None, merge_heads_right_concat),

    Entry("multi_head_attention", "wrong", "scale-by-d_model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head), so with more than "
          "one head the weights are too flat",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "w_q-for-keys",
          "the keys are projected with w_q (copy-paste) instead of w_k",
          mha_wq_for_keys),
    Entry("multi_head_attention", "wrong", "merge-without-transpose",
          "the heads are merged by reshaping (B, H, N, d_head) straight to (B, N, d_model) "
          "without swapping H and N back, which scrambles tokens and heads",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "softmax-sum-no-keepdims",
          "the softmax divides by a sum taken without keepdims=True, so (B, H, N, N) / "
          "(B, H, N) aligns the wrong axes: it raises a broadcasting error when H != N, and "
          "when the shapes happen to line up the rows are divided by the wrong sums",
          mha_sum_no_keepdims),
    Entry("multi_head_attention", "wrong", "nn-linear-layout",
          "it applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the "
          "contract applies them as x @ W",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "softmax-over-queries",
          "the softmax is taken along axis -2 (over the queries) instead of over the keys",
          mha_softmax_axis_minus2),
    Entry("multi_head_attention", "right", "per-head-weight-columns", None,
          mha_right_per_head_columns),
    Entry("multi_head_attention", "right", "einsum-reshaped-weights", None,
          mha_right_einsum_weights),
]
