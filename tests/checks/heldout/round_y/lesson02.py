"""Held-out catalogue (round y), lesson 02: split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_heads_no_transpose(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_heads_strided(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(b, n, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_heads_first(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    per_head = width // num_heads
    return x.reshape(batch, seq, num_heads, per_head).transpose(2, 0, 1, 3)


def split_heads_guard_swapped(x, num_heads):
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
    return x.reshape(B, N, num_heads, d_head).swapaxes(1, 2)


def split_heads_split_tokens(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=1)
    return np.stack(chunks, axis=1)


def split_heads_stack_split(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_heads_fill_loop(x, num_heads):
    x = np.asarray(x)
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    width = d_model // num_heads
    out = np.empty((b, num_heads, n, width), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h, :, :] = x[:, :, h * width:(h + 1) * width]
    return out


# ============================================================================ merge_heads
def merge_heads_no_transpose(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_wrong_permutation(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * d)


def merge_heads_iterates_batch(x):
    return np.concatenate(list(x), axis=-1)


def merge_heads_unpack_order(x):
    b, n, h, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def merge_heads_drops_last_head(x):
    n_heads = x.shape[1]
    return np.concatenate([x[:, i] for i in range(n_heads - 1)], axis=-1)


def merge_heads_hstack(x):
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_heads_concat_heads(x):
    x = np.asarray(x)
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_moveaxis(x):
    x = np.asarray(x)
    bnhd = np.moveaxis(x, 1, 2)
    return bnhd.reshape(*bnhd.shape[:2], -1)


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
    p = p / p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    heads = w @ v
    return heads.reshape(B, N, D) @ w_o


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    hd = d_model // num_heads
    Q = x @ w_q
    K = x @ w_k
    V = x @ w_k
    Q, K, V = (t.reshape(batch, n, num_heads, hd).swapaxes(1, 2) for t in (Q, K, V))
    att = np.einsum("bhid,bhjd->bhij", Q, K) / np.sqrt(hd)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    out = np.einsum("bhij,bhjd->bhid", att, V).swapaxes(1, 2).reshape(batch, n, d_model)
    return out @ w_o


def mha_assert_guard(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, "num_heads must divide d_model"
    d_head = d_model // num_heads
    heads = []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q = x @ w_q[:, cols]
        k = x @ w_k[:, cols]
        v = x @ w_v[:, cols]
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d_head)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p = p / p.sum(axis=-1, keepdims=True)
        heads.append(p @ v)
    return np.concatenate(heads, axis=-1) @ w_o


def mha_weights_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d = D // num_heads
    q = (x @ w_q.T).reshape(B, N, num_heads, d).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(B, N, num_heads, d).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(B, N, num_heads, d).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s = s / s.sum(axis=-1, keepdims=True)
    merged = (s @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return merged @ w_o.T


def mha_softmax_axis1(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads

    def softmax(z):
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def heads(t):
        return t.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    weights = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head))
    ctx = (weights @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_head_loop_float64(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    batch, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    parts = []
    for h in range(num_heads):
        sl = slice(h * dh, (h + 1) * dh)
        qh = np.einsum("bnd,de->bne", x, np.asarray(w_q, np.float64)[:, sl])
        kh = np.einsum("bnd,de->bne", x, np.asarray(w_k, np.float64)[:, sl])
        vh = np.einsum("bnd,de->bne", x, np.asarray(w_v, np.float64)[:, sl])
        s = np.einsum("bie,bje->bij", qh, kh) / math.sqrt(dh)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p = p / p.sum(axis=-1, keepdims=True)
        parts.append(np.einsum("bij,bje->bie", p, vh))
    return np.concatenate(parts, axis=-1) @ np.asarray(w_o, np.float64)


def mha_bnhd_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    hd = d_model // num_heads
    q = np.einsum("bnd,de->bne", x, w_q).reshape(b, n, num_heads, hd)
    k = np.einsum("bnd,de->bne", x, w_k).reshape(b, n, num_heads, hd)
    v = np.einsum("bnd,de->bne", x, w_v).reshape(b, n, num_heads, hd)
    logits = np.einsum("bihd,bjhd->bhij", q, k) / np.sqrt(hd)
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bjhd->bihd", probs, v).reshape(b, n, d_model)
    return np.einsum("bne,ed->bnd", ctx, w_o)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-without-transpose",
          "x is reshaped straight to (B, H, N, d_head) without a transpose, so the features of "
          "different tokens are mixed into each head instead of head h holding features "
          "h*d_head:(h+1)*d_head of every token", split_heads_no_transpose),
    Entry("split_heads", "wrong", "strided-features",
          "the last axis is reshaped as (d_head, H) instead of (H, d_head), so head h gets every "
          "H-th feature (h, h+H, ...) instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_strided),
    Entry("split_heads", "wrong", "heads-before-batch",
          "the transpose puts the head axis first, (H, B, N, d_head), instead of (B, H, N, d_head)",
          split_heads_heads_first),
    Entry("split_heads", "wrong", "guard-operands-swapped",
          "the divisibility test is written num_heads % d_model, so it raises ValueError for valid "
          "head counts such as 3 or 4 heads of d_model=12", split_heads_guard_swapped),
    Entry("split_heads", "wrong", "true-division-d_head",
          "d_head is computed with / instead of //, so it is a float and reshape raises TypeError on "
          "every valid input", split_heads_true_division),
    Entry("split_heads", "wrong", "split-along-tokens",
          "np.split cuts along axis 1 (the tokens) instead of the feature axis, so the heads hold "
          "groups of tokens (or np.split raises when N is not a multiple of H)",
          split_heads_split_tokens),
    Entry("split_heads", "right", "stack-of-split", None, split_heads_stack_split),
    Entry("split_heads", "right", "loop-fill", None, split_heads_fill_loop),

    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "(B, H, N, d_head) is reshaped straight to (B, N, H*d_head) without moving the head axis "
          "back next to d_head, so tokens and heads are scrambled", merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "transpose-0-2-3-1",
          "the transpose (0, 2, 3, 1) puts d_head before H, so the merged features are interleaved "
          "(feature i of every head side by side) instead of head 0's block first",
          merge_heads_wrong_permutation),
    Entry("merge_heads", "wrong", "list-iterates-batch",
          "list(x) iterates over the batch axis, not the heads, so the batch entries are "
          "concatenated and the result has shape (H, N, B*d_head)", merge_heads_iterates_batch),
    Entry("merge_heads", "wrong", "shape-unpacked-as-bnhd",
          "the shape is unpacked as (b, n, h, d) although x is (B, H, N, d_head), so after the "
          "transpose the reshape gives (B, H, N*d_head) instead of (B, N, H*d_head)",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "range-drops-last-head",
          "range(n_heads - 1) leaves out the last head, so the result has only (H-1)*d_head "
          "features (and a single head gives an empty concatenation error)",
          merge_heads_drops_last_head),
    Entry("merge_heads", "wrong", "hstack-axis-1",
          "np.hstack joins the (B, N, d_head) heads along axis 1 (the tokens), giving "
          "(B, H*N, d_head) instead of joining along the features", merge_heads_hstack),
    Entry("merge_heads", "right", "concatenate-heads", None, merge_heads_concat_heads),
    Entry("merge_heads", "right", "moveaxis-reshape", None, merge_heads_moveaxis),

    Entry("multi_head_attention", "wrong", "scale-sqrt-d_model",
          "the scores of each head are divided by sqrt(d_model) instead of sqrt(d_head)",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "merge-without-transpose",
          "the heads' outputs (B, H, N, d_head) are reshaped to (B, N, d_model) without transposing "
          "heads and tokens back, so token outputs are scrambled across heads",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "values-from-w_k",
          "the values are projected with w_k (copy-paste) instead of w_v", mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "assert-instead-of-valueerror",
          "the divisibility check is an assert, so a num_heads that does not divide d_model raises "
          "AssertionError instead of ValueError", mha_assert_guard),
    Entry("multi_head_attention", "wrong", "weights-transposed",
          "the weights are applied as x @ W.T (nn.Linear's (out, in) layout) instead of the course's "
          "x @ W", mha_weights_transposed),
    Entry("multi_head_attention", "wrong", "softmax-sum-over-heads",
          "the softmax's normalising sum uses axis=1, which in the 4-D (B, H, N, N) scores is the "
          "head axis, not the keys, so rows are not normalised over the keys",
          mha_softmax_axis1),
    Entry("multi_head_attention", "right", "per-head-column-slices-float64", None,
          mha_head_loop_float64),
    Entry("multi_head_attention", "right", "bnhd-einsum", None, mha_bnhd_einsum),
]
