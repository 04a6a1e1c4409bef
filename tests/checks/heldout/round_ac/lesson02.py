"""Held-out catalogue, lesson 02 (multi-head, numpy): split_heads, merge_heads,
multi_head_attention."""

import math

import numpy as np
from scipy import special

from entry import Entry


# ============================================================================ split_heads
def split_reshape_only(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_factors_swapped(x, num_heads):
    x = np.asarray(x)
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    head_dim = width // num_heads
    return x.reshape(batch, seq, head_dim, num_heads).transpose(0, 3, 1, 2)


def split_assert_guard(x, num_heads):
    B, N, D = x.shape
    assert D % num_heads == 0, f"d_model={D} is not divisible by num_heads={num_heads}"
    return np.swapaxes(x.reshape(B, N, num_heads, D // num_heads), 1, 2)


def split_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_slice_precedence(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    out = np.empty((B, num_heads, N, d_head), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h] = x[:, :, h * d_head:h + 1 * d_head]
    return out


def split_np_split_axis1(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    pieces = np.split(x, num_heads, axis=1)
    return np.stack(pieces, axis=1)


def split_right_stack_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    width = d_model // num_heads
    return np.stack([x[..., i * width:(i + 1) * width] for i in range(num_heads)], axis=1)


def split_right_moveaxis_copy(x, num_heads):
    b, n, dm = np.shape(x)
    q, r = divmod(dm, num_heads)
    if r:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    four = np.reshape(x, (b, n, num_heads, q))
    return np.ascontiguousarray(np.moveaxis(four, 2, 1))


# ============================================================================ merge_heads
def merge_reshape_only(x):
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_wrong_transpose(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_hstack(x):
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_loop_off_by_one(x):
    B, H, N, d_head = x.shape
    out = np.zeros((B, N, H * d_head), dtype=x.dtype)
    for h in range(H - 1):
        out[:, :, h * d_head:(h + 1) * d_head] = x[:, h]
    return out


def merge_unpack_order(x):
    B, N, H, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d_head)


def merge_squeeze(x):
    batch, heads, seq, hd = x.shape
    return np.swapaxes(x, 1, 2).reshape(batch, seq, heads * hd).squeeze()


def merge_right_concat(x):
    return np.concatenate([x[:, head, :, :] for head in range(x.shape[1])], axis=-1)


def merge_right_einsum(x):
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


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
    a = np.exp(s)
    a /= a.sum(-1, keepdims=True)
    ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_v_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    k = (x @ w_k).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    v = (x @ w_k).reshape(batch, seq, num_heads, d_head).swapaxes(1, 2)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    merged = (p @ v).swapaxes(1, 2).reshape(batch, seq, d_model)
    return merged @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    proj = [(x @ w.T).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
            for w in (w_q, w_k, w_v)]
    q, k, v = proj
    att = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(hd)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    heads = np.einsum("bhij,bhjd->bhid", att, v)
    return heads.transpose(0, 2, 1, 3).reshape(B, N, d) @ w_o.T


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    K = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    V = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_head)
    W = np.exp(S - S.max(axis=-1, keepdims=True))
    W = W / W.sum(axis=-1, keepdims=True)
    heads = W @ V  # (B, H, N, d_head)
    concat = heads.reshape(B, N, d_model)
    return concat @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, dm = x.shape
    if dm % num_heads != 0:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    dh = dm // num_heads
    q = np.moveaxis((x @ w_q).reshape(b, n, num_heads, dh), 2, 1)
    k = np.moveaxis((x @ w_k).reshape(b, n, num_heads, dh), 2, 1)
    v = np.moveaxis((x @ w_v).reshape(b, n, num_heads, dh), 2, 1)
    logits = np.matmul(q, np.moveaxis(k, -1, -2)) / math.sqrt(dh)
    w = special.softmax(logits, axis=-1)
    out = np.matmul(w, v)
    return np.moveaxis(out, 1, 2).reshape(b, n, dm)


def mha_softmax_over_heads(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    weights = special.softmax(scores, axis=1)
    ctx = weights @ v
    return ctx.transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_right_per_head_blocks(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros_like(x)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ w_q[:, cols]
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        p = np.exp(s - special.logsumexp(s, axis=-1, keepdims=True))
        # concat(heads) @ w_o == sum over heads of head_h @ (rows of w_o for head h)
        total += (p @ vh) @ w_o[cols, :]
    return total


def mha_right_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    e = d // num_heads
    wq = w_q.reshape(d, num_heads, e)
    wk = w_k.reshape(d, num_heads, e)
    wv = w_v.reshape(d, num_heads, e)
    wo = w_o.reshape(num_heads, e, d)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(e)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhqe,hed->bqd", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape-without-transpose",
          "it reshapes straight to (B, H, N, d_head), which cuts the flattened (N, d_model) "
          "block into pieces instead of giving head h the features h*d_head:(h+1)*d_head of "
          "every token (a transpose of N and H is missing)", split_reshape_only),
    Entry("split_heads", "wrong", "head-dim-factor-order",
          "it reshapes d_model as (d_head, H) instead of (H, d_head), so head h gets every H-th "
          "feature (h, h+H, ...) rather than the contiguous block h*d_head:(h+1)*d_head",
          split_factors_swapped),
    Entry("split_heads", "wrong", "assert-guard",
          "the divisibility check is an assert, which raises AssertionError instead of the "
          "ValueError the contract requires", split_assert_guard),
    Entry("split_heads", "wrong", "float-d-head",
          "d_head is computed with `/`, a float, and reshape refuses a float dimension, so "
          "every valid call raises TypeError", split_true_division),
    Entry("split_heads", "wrong", "slice-end-precedence",
          "the slice end `h + 1 * d_head` is h + d_head by operator precedence, not "
          "(h + 1) * d_head, so heads after the first get a too-short slice (broadcast into "
          "wrong values) or an empty one (a broadcasting error)", split_slice_precedence),
    Entry("split_heads", "wrong", "np-split-sequence-axis",
          "np.split cuts along axis=1 (the tokens) instead of the feature axis, so heads hold "
          "groups of tokens (or it raises when N is not a multiple of num_heads)",
          split_np_split_axis1),
    Entry("split_heads", "right", "stack-feature-slices", None, split_right_stack_slices),
    Entry("split_heads", "right", "divmod-moveaxis", None, split_right_moveaxis_copy),

    Entry("merge_heads", "wrong", "reshape-without-transpose",
          "it reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without bringing the "
          "head axis next to d_head first, which scrambles tokens and heads",
          merge_reshape_only),
    Entry("merge_heads", "wrong", "transpose-0-2-3-1",
          "the transpose (0, 2, 3, 1) puts d_head before the heads, so the features are "
          "interleaved head by head instead of head 0's block first", merge_wrong_transpose),
    Entry("merge_heads", "wrong", "hstack-axis-1",
          "np.hstack joins along axis 1 (the tokens), not the last axis, so the result is "
          "(B, H*N, d_head) instead of (B, N, H*d_head)", merge_hstack),
    Entry("merge_heads", "wrong", "loop-skips-last-head",
          "the loop runs over range(H - 1), so the last head's block is never copied and stays "
          "zero", merge_loop_off_by_one),
    Entry("merge_heads", "wrong", "unpack-shape-as-B-N-H-d",
          "it unpacks x.shape as (B, N, H, d_head) although x is (B, H, N, d_head), so N and H "
          "are swapped and the output has shape (B, H, N*d_head)", merge_unpack_order),
    Entry("merge_heads", "wrong", "squeeze-drops-axes",
          "the final .squeeze() drops every axis of length 1, so a batch or sequence of one "
          "comes back with fewer than three dimensions", merge_squeeze),
    Entry("merge_heads", "right", "concatenate-heads-last-axis", None, merge_right_concat),
    Entry("merge_heads", "right", "einsum-permute", None, merge_right_einsum),

    Entry("multi_head_attention", "wrong", "scale-sqrt-d-model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head), the size of each "
          "head's dot product", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "values-from-w-k",
          "the values are projected with w_k (copy-paste of the key line) instead of w_v",
          mha_v_from_w_k),
    Entry("multi_head_attention", "wrong", "weights-transposed-linear-layout",
          "it applies the weights as x @ W.T (nn.Linear's (out, in) layout) although the "
          "course applies them as x @ W", mha_linear_layout),
    Entry("multi_head_attention", "wrong", "merge-without-transpose",
          "the heads are merged by reshaping (B, H, N, d_head) straight to (B, N, d_model), "
          "without moving the head axis after N first, so tokens and heads get mixed",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "no-output-projection",
          "it returns the concatenated heads without multiplying by w_o",
          mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "softmax-over-heads-axis",
          "the softmax is taken along axis 1 (across heads) instead of the last axis (across "
          "keys)", mha_softmax_over_heads),
    Entry("multi_head_attention", "right", "per-head-column-blocks-sum", None,
          mha_right_per_head_blocks),
    Entry("multi_head_attention", "right", "einsum-head-shaped-weights", None,
          mha_right_einsum_weights),
]
