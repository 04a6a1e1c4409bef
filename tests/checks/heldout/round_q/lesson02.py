"""Round q, lesson 02 (multi-head, numpy): split_heads, merge_heads, multi_head_attention.

Six wrong answers (one slip each) and two right answers (unusual routes) per exercise.
"""

import math

import numpy as np

from entry import Entry


def _check(d_model, num_heads):
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


# ============================================================================ split_heads
def split_no_transpose(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    return x.reshape(b, num_heads, n, d_model // num_heads)  # no transpose: tokens mixed


def split_interleaved(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = d_model // num_heads
    # heads as the *last* factor: head h gets features h, h+H, h+2H, ...
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_assert(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    assert width % num_heads == 0, f"d_model={width} is not divisible by num_heads={num_heads}"
    return x.reshape(batch, seq, num_heads, width // num_heads).transpose(0, 2, 1, 3)


def split_np_transpose_no_axes(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    four = x.reshape(b, n, num_heads, d_model // num_heads)
    return np.transpose(four)  # without axes: reverses all four axes


def split_dhead_from_seq(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = x.shape[1] // num_heads  # shape[1] is N, not d_model
    return x.reshape(b, n, num_heads, d_head).swapaxes(1, 2)


def split_np_split_tokens(x, num_heads):
    x = np.asarray(x)
    _check(x.shape[-1], num_heads)
    pieces = np.split(x, num_heads, axis=1)  # axis 1 is the token axis
    return np.stack(pieces, axis=1)


def split_loop_stack(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    size = x.shape[-1] // num_heads
    heads = []
    for h in range(num_heads):
        heads.append(x[:, :, h * size:(h + 1) * size])
    return np.stack(heads, axis=1)


def split_einsum_eye(x, num_heads):
    x = np.asarray(x, dtype=np.float64)
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    selector = np.eye(d_model).reshape(d_model, num_heads, d_head)  # feature -> (head, slot)
    return np.einsum("bnf,fhe->bhne", x, selector)


# ============================================================================ merge_heads
def merge_no_transpose(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_interleaved(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)  # features d-major, heads interleaved


def merge_concat_tokens(x):
    x = np.asarray(x)
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=1)  # axis 1 is N here


def merge_shape_from_heads(x):
    x = np.asarray(x)
    batch, tokens = x.shape[0], x.shape[1]  # shape[1] is H, not N
    return x.transpose(0, 2, 1, 3).reshape(batch, tokens, -1)


def merge_sum_heads(x):
    x = np.asarray(x)
    return x.sum(axis=1)  # "concatenate" done as a sum over heads


def merge_loop_last_head_missing(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=x.dtype)
    for head in range(h - 1):
        out[:, :, head * d:(head + 1) * d] = x[:, head]
    return out


def merge_loop_tokens(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    out = np.empty((b, n, h * d), dtype=x.dtype)
    for t in range(n):
        out[:, t, :] = x[:, :, t, :].reshape(b, h * d)
    return out


def merge_concatenate_heads(x):
    x = np.asarray(x)
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)


# ============================================================================ multi_head_attention
def _split(t, h):
    b, n, d = t.shape
    return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)


def _merge(t):
    b, h, n, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def _softmax_last(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    d_model = x.shape[-1]
    _check(d_model, num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(d_model)  # whole width instead of d_head
    return _merge(_softmax_last(s) @ v) @ w_o


def mha_wq_for_keys(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    _check(x.shape[-1], num_heads)
    q = _split(x @ w_q, num_heads)
    k = _split(x @ w_q, num_heads)  # copy-paste: should be w_k
    v = _split(x @ w_v, num_heads)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    return _merge(_softmax_last(s) @ v) @ w_o


def mha_reshape_only(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    dh = d_model // num_heads

    def heads(t):
        return t.reshape(b, num_heads, n, dh)  # reshape straight to (B, H, N, d_head)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    ctx = _softmax_last(q @ k.swapaxes(-1, -2) / math.sqrt(dh)) @ v
    return ctx.reshape(b, n, d_model) @ w_o


def mha_softmax_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    _check(x.shape[-1], num_heads)
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    s = s - s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)  # axis 1 is the head axis
    return _merge(p @ v) @ w_o


def mha_guard_on_seq_len(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    batch, seq_len, d_model = x.shape
    if seq_len % num_heads:  # checks N instead of d_model
        raise ValueError(f"d_model={seq_len} is not divisible by num_heads={num_heads}")
    q, k, v = (_split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(d_model // num_heads)
    return _merge(_softmax_last(s) @ v) @ w_o


def mha_true_division(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    b, n, d_model = x.shape
    _check(d_model, num_heads)
    d_head = d_model / num_heads  # float: reshape refuses it
    q = (x @ w_q).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)
    ctx = _softmax_last(q @ k.swapaxes(-1, -2) / math.sqrt(d_head)) @ v
    return _merge(ctx) @ w_o


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    out = np.zeros_like(x)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = qh @ np.swapaxes(kh, 1, 2) / np.sqrt(dh)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        out += (p @ vh) @ w_o[cols, :]  # sum over heads of head_h @ W_o rows = concat @ W_o
    return out


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    e = d // num_heads
    wq, wk, wv = (np.asarray(w, dtype=np.float64).reshape(d, num_heads, e) for w in (w_q, w_k, w_v))
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, e, d)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) / math.sqrt(e)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hed->bid", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-without-transpose",
          "It reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' "
          "gets a block of consecutive numbers that mixes tokens and features.",
          split_no_transpose),
    Entry("split_heads", "wrong", "interleaved-heads",
          "It reshapes to (B, N, d_head, H), so head h gets the strided features h, h+H, "
          "h+2H, ... instead of the contiguous block h*d_head:(h+1)*d_head.",
          split_interleaved),
    Entry("split_heads", "wrong", "assert-not-valueerror",
          "The divisibility check is an assert, so a bad num_heads raises AssertionError "
          "instead of the ValueError the contract asks for.", split_assert),
    Entry("split_heads", "wrong", "np-transpose-without-axes",
          "np.transpose without an axes argument reverses all four axes, giving "
          "(d_head, H, N, B) instead of swapping only N and H.", split_np_transpose_no_axes),
    Entry("split_heads", "wrong", "d_head-from-seq-len",
          "d_head is computed from x.shape[1] (the sequence length N) instead of d_model, so "
          "the reshape fails or cuts the features wrongly.", split_dhead_from_seq),
    Entry("split_heads", "wrong", "np-split-token-axis",
          "np.split cuts along axis 1, the token axis, instead of the feature axis, so it "
          "splits the sequence (and raises when N is not a multiple of num_heads).",
          split_np_split_tokens),
    Entry("split_heads", "right", "loop-slices-stack", None, split_loop_stack),
    Entry("split_heads", "right", "einsum-selector-matrix", None, split_einsum_eye),

    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "It reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis next to d_head first, so tokens and heads are scrambled.", merge_no_transpose),
    Entry("merge_heads", "wrong", "interleaved-features",
          "It transposes to (B, N, d_head, H) before the reshape, so the heads' features are "
          "interleaved instead of head 0's block first.", merge_interleaved),
    Entry("merge_heads", "wrong", "concatenate-token-axis",
          "It concatenates the heads along axis 1, which for (B, N, d_head) slices is the token "
          "axis, giving (B, H*N, d_head) instead of (B, N, H*d_head).", merge_concat_tokens),
    Entry("merge_heads", "wrong", "shape-from-head-axis",
          "The target shape takes x.shape[1] (that is H) as the number of tokens, so the "
          "result has shape (B, H, N*d_head) instead of (B, N, H*d_head).",
          merge_shape_from_heads),
    Entry("merge_heads", "wrong", "sum-over-heads",
          "It sums the heads (x.sum(axis=1)) instead of concatenating them, so the result has "
          "width d_head and mixes the heads' outputs.", merge_sum_heads),
    Entry("merge_heads", "wrong", "loop-misses-last-head",
          "The loop runs over range(H - 1), so the last head's block is left as zeros.",
          merge_loop_last_head_missing),
    Entry("merge_heads", "right", "loop-over-tokens", None, merge_loop_tokens),
    Entry("merge_heads", "right", "concatenate-heads-last-axis", None, merge_concatenate_heads),

    Entry("multi_head_attention", "wrong", "scale-by-d_model",
          "The scores are divided by sqrt(d_model) instead of sqrt(d_head), the size of one "
          "head's dot products.", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "w_q-reused-for-keys",
          "The keys are computed with w_q (copy-paste) instead of w_k.", mha_wq_for_keys),
    Entry("multi_head_attention", "wrong", "heads-by-plain-reshape",
          "The heads are made by reshaping (B, N, d_model) straight to (B, H, N, d_head) and "
          "merged back with the inverse reshape, without the transposes, so each head mixes "
          "tokens and features.", mha_reshape_only),
    Entry("multi_head_attention", "wrong", "softmax-over-heads",
          "The softmax normalises along axis 1, the head axis, instead of the key axis, so "
          "each head's weight rows do not sum to 1.", mha_softmax_over_heads),
    Entry("multi_head_attention", "wrong", "guard-checks-seq-len",
          "The divisibility check tests the sequence length N instead of d_model, so valid "
          "inputs with N not a multiple of num_heads raise ValueError.", mha_guard_on_seq_len),
    Entry("multi_head_attention", "wrong", "true-division-d_head",
          "d_head is computed with / instead of //, a float, so the reshape into heads raises "
          "TypeError on every input.", mha_true_division),
    Entry("multi_head_attention", "right", "per-head-weight-columns", None,
          mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum-head-weights", None, mha_einsum_weights),
]
