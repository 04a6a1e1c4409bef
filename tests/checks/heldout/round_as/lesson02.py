"""Held-out catalogue, lesson 02 (split_heads, merge_heads, multi_head_attention), written blind."""

import math

import numpy as np

from entry import Entry


# -------------------------------------------------------------------------- split_heads, wrong
def split_heads_direct_reshape(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_heads_interleaved(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    head_dim = width // num_heads
    return x.reshape(batch, seq, head_dim, num_heads).transpose(0, 3, 1, 2)


def split_heads_assert_guard(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    assert D % num_heads == 0, f"d_model={D} is not divisible by num_heads={num_heads}"
    return x.reshape(B, N, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def split_heads_stack_axis0(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=-1)  # H pieces of (B, N, d_head)
    return np.stack(chunks, axis=0)


def split_heads_one_based_loop(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    heads = []
    for h in range(1, num_heads + 1):  # head_1 ... head_H
        heads.append(x[:, :, h * dh:(h + 1) * dh])
    return np.stack(heads, axis=1)


def split_heads_dhead_from_seq(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = x.shape[1] // num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


# -------------------------------------------------------------------------- split_heads, right
def split_heads_fill_loop(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h] = x[:, :, h * dh:(h + 1) * dh]
    return out


def split_heads_split_stack(x, num_heads):
    arr = np.asarray(x)
    d_model = arr.shape[2]
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(arr, num_heads, axis=2), axis=1)


# -------------------------------------------------------------------------- merge_heads, wrong
def merge_heads_no_transpose(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_interleaved(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * dh)


def merge_heads_hstack(x):
    x = np.asarray(x)
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_heads_reshape_wrong_count(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, H, -1)


def merge_heads_int_buffer(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    out = np.zeros((b, n, h * d), dtype=int)
    for i in range(h):
        out[:, :, i * d:(i + 1) * d] = x[:, i]
    return out


def merge_heads_loop_short(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    merged = np.zeros((b, n, h * d), dtype=x.dtype)
    for i in range(h - 1):
        merged[:, :, i * d:(i + 1) * d] = x[:, i, :, :]
    return merged


# -------------------------------------------------------------------------- merge_heads, right
def merge_heads_einsum(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(B, N, H * dh)


def merge_heads_concatenate(x):
    x = np.asarray(x)
    return np.concatenate([x[:, head] for head in range(x.shape[1])], axis=-1)


# ----------------------------------------------------------------- multi_head_attention, wrong
def mha_scale_dmodel(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
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


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    heads = weights @ v
    return heads.transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_values_from_wk(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def heads(t):
        return t.reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)

    Q = heads(x @ w_q)
    K = heads(x @ w_k)
    V = heads(x @ w_k)
    S = Q @ K.swapaxes(-1, -2) / np.sqrt(d_head)
    S = np.exp(S - S.max(axis=-1, keepdims=True))
    A = S / S.sum(axis=-1, keepdims=True)
    return (A @ V).swapaxes(1, 2).reshape(batch, seq, d_model) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q, k, v = [(x @ w).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
               for w in (w_q, w_k, w_v)]
    att = np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(dh)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    ctx = att @ v  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def mha_softmax_axis1(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = np.swapaxes((x @ w_q).reshape(B, N, num_heads, dh), 1, 2)
    k = np.swapaxes((x @ w_k).reshape(B, N, num_heads, dh), 1, 2)
    v = np.swapaxes((x @ w_v).reshape(B, N, num_heads, dh), 1, 2)
    scores = q @ np.swapaxes(k, 2, 3) / np.sqrt(dh)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    return np.swapaxes(w @ v, 1, 2).reshape(B, N, D) @ w_o


def mha_true_division_dhead(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=float)
    B, N, D = x.shape
    d_head = D / num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_head)
    s = np.exp(s - s.max(-1, keepdims=True))
    s = s / s.sum(-1, keepdims=True)
    return (s @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


# ----------------------------------------------------------------- multi_head_attention, right
def mha_per_head_blocks(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.zeros((B, N, D))
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ w_q[:, cols]
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        s = qh @ kh.transpose(0, 2, 1) / math.sqrt(dh)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p = p / p.sum(axis=-1, keepdims=True)
        out += (p @ vh) @ w_o[cols, :]  # head h's rows of w_o
    return out


def mha_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    b, n, d = x.shape
    if num_heads < 1 or d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    wq = np.asarray(w_q, np.float64).reshape(d, num_heads, hd)
    wk = np.asarray(w_k, np.float64).reshape(d, num_heads, hd)
    wv = np.asarray(w_v, np.float64).reshape(d, num_heads, hd)
    wo = np.asarray(w_o, np.float64).reshape(num_heads, hd, d)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    logits = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(hd)
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", probs, v)
    return np.einsum("bhie,hed->bid", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-straight-to-BHNd",
          "reshapes straight to (B, H, N, d_head) without going through (B, N, H, d_head) and a "
          "transpose, so tokens and features get mixed across heads", split_heads_direct_reshape),
    Entry("split_heads", "wrong", "interleaved-features",
          "reshapes to (B, N, d_head, H): head h gets the strided features h, h+H, h+2H, ... "
          "instead of the block h*d_head:(h+1)*d_head", split_heads_interleaved),
    Entry("split_heads", "wrong", "assert-instead-of-valueerror",
          "guards divisibility with `assert`, which raises AssertionError, where the contract "
          "requires a ValueError", split_heads_assert_guard),
    Entry("split_heads", "wrong", "stack-on-axis-0",
          "stacks the H feature blocks on axis 0, returning (H, B, N, d_head) instead of "
          "(B, H, N, d_head)", split_heads_stack_axis0),
    Entry("split_heads", "wrong", "one-based-head-loop",
          "numbers the heads 1..H in the loop, so every slice is shifted one head to the right "
          "and the last one is empty (shape error or an empty d_head)",
          split_heads_one_based_loop),
    Entry("split_heads", "wrong", "d_head-from-seq-len",
          "computes d_head from x.shape[1] (the sequence length N) instead of d_model, so the "
          "reshape fails or gives the wrong head size", split_heads_dhead_from_seq),
    Entry("split_heads", "right", "fill-preallocated-loop", None, split_heads_fill_loop),
    Entry("split_heads", "right", "np-split-then-stack", None, split_heads_split_stack),
    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to d_head first, which scrambles tokens and heads", merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "d_head-before-H",
          "transposes to (B, N, d_head, H) before reshaping, so the heads' features come out "
          "interleaved instead of head 0's block first", merge_heads_interleaved),
    Entry("merge_heads", "wrong", "hstack-on-3d",
          "uses np.hstack, which concatenates 3-D arrays along axis 1 (the tokens), not along "
          "the features: shape (B, H*N, d_head)", merge_heads_hstack),
    Entry("merge_heads", "wrong", "reshape-B-H",
          "reshapes to (B, H, -1), using the head count where the sequence length belongs",
          merge_heads_reshape_wrong_count),
    Entry("merge_heads", "wrong", "int-output-buffer",
          "preallocates the output with dtype=int, so every value is truncated to an integer",
          merge_heads_int_buffer),
    Entry("merge_heads", "wrong", "loop-misses-last-head",
          "the copy loop runs over range(H - 1), so the last head's block stays zero",
          merge_heads_loop_short),
    Entry("merge_heads", "right", "einsum-permute", None, merge_heads_einsum),
    Entry("merge_heads", "right", "concatenate-heads", None, merge_heads_concatenate),
    Entry("multi_head_attention", "wrong", "scale-by-d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head), the size of the "
          "vectors each head actually dots", mha_scale_dmodel),
    Entry("multi_head_attention", "wrong", "missing-output-projection",
          "stops after merging the heads: the output projection w_o is never applied",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "values-from-w_k",
          "projects the values with w_k (copy-paste) instead of w_v", mha_values_from_wk),
    Entry("multi_head_attention", "wrong", "merge-without-transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "transposing back, scrambling tokens and heads", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "softmax-over-heads-axis",
          "normalises the 4-D scores along axis 1 (the heads axis) instead of the last axis "
          "(the keys)", mha_softmax_axis1),
    Entry("multi_head_attention", "wrong", "true-division-d_head",
          "computes d_head = d_model / num_heads with `/`, a float, so reshape raises TypeError "
          "on every input instead of working (and instead of a ValueError naming both numbers)",
          mha_true_division_dhead),
    Entry("multi_head_attention", "right", "per-head-weight-blocks", None, mha_per_head_blocks),
    Entry("multi_head_attention", "right", "einsum-reshaped-weights", None, mha_einsum),
]
