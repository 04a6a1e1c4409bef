"""Held-out catalogue, lesson 02 (multi-head, numpy): split_heads, merge_heads,
multi_head_attention. Each function is one learner's own answer; wrong ones carry one slip."""

import math

import numpy as np
from scipy.special import softmax as scipy_softmax

from entry import Entry


# ============================================================== split_heads: wrong
def split_heads_no_transpose(x, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d // num_heads)


def split_heads_transpose_first(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return np.swapaxes(x, 1, 2).reshape(batch, num_heads, seq, d_head)


def split_heads_interleaved(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    return x.reshape(B, N, dh, num_heads).transpose(0, 3, 1, 2)


def split_heads_guard_reversed(x, num_heads):
    batch, n_tok, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, n_tok, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_stack_default_axis(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    pieces = np.split(x, num_heads, axis=-1)  # H arrays of (B, N, d_head)
    return np.stack(pieces)


def split_heads_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


# ============================================================== split_heads: right
def split_heads_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    w = d_model // num_heads
    return np.stack([x[:, :, h * w:(h + 1) * w] for h in range(num_heads)], axis=1)


def split_heads_einsum_onehot(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    # selector[h, f, j] = 1 when feature f is feature j of head h
    selector = np.eye(D, dtype=x.dtype).reshape(D, num_heads, dh).transpose(1, 0, 2)
    return np.einsum("bnf,hfj->bhnj", x, selector)


# ============================================================== merge_heads: wrong
def merge_heads_no_transpose(x):
    b, h, n, dh = x.shape
    return x.reshape(b, n, h * dh)


def merge_heads_dhead_major(x):
    B, H, N, D = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * D)


def merge_heads_hstack(x):
    heads = [x[:, h] for h in range(x.shape[1])]  # each (B, N, d_head)
    return np.hstack(heads)


def merge_heads_summed(x):
    return np.sum(x, axis=1)


def merge_heads_unpack_order(x):
    batch, seq, heads, d_head = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * d_head)


def merge_heads_loop_from_one(x):
    B, H, N, dh = x.shape
    out = np.zeros((B, N, H * dh), dtype=x.dtype)
    for h in range(1, H):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h]
    return out


# ============================================================== merge_heads: right
def merge_heads_concatenate(x):
    return np.concatenate([x[:, h, :, :] for h in range(x.shape[1])], axis=-1)


def merge_heads_index_loops(x):
    x = np.asarray(x)
    B, H, N, dh = x.shape
    out = np.empty((B, N, H * dh), dtype=x.dtype)
    for b in range(B):
        for h in range(H):
            for n in range(N):
                for j in range(dh):
                    out[b, n, h * dh + j] = x[b, h, n, j]
    return out


# ============================================================== multi_head_attention: wrong
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    def split(t, h):
        b, n, d = t.shape
        return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

    def merge(t):
        b, h, n, dh = t.shape
        return t.transpose(0, 2, 1, 3).reshape(b, n, h * dh)

    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    q, k, v = split(x @ w_q, num_heads), split(x @ w_k, num_heads), split(x @ w_v, num_heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_model)
    s = s - s.max(-1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(-1, keepdims=True)
    return merge(a @ v) @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = p @ v
    return ctx.transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    def split(t, h):
        b, n, d = t.shape
        return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

    def merge(t):
        b, h, n, dh = t.shape
        return t.transpose(0, 2, 1, 3).reshape(b, n, h * dh)

    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    Q = split(x @ w_q, num_heads)
    K = split(x @ w_k, num_heads)
    V = split(x @ w_k, num_heads)
    logits = np.einsum("bhqd,bhkd->bhqk", Q, K) / np.sqrt(dh)
    weights = scipy_softmax(logits, axis=-1)
    return merge(weights @ V) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    s = q @ k.swapaxes(-1, -2) / np.sqrt(d_head)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    heads = w @ v  # (B, H, N, d_head)
    return heads.reshape(B, N, d_model) @ w_o


def mha_softmax_sum_no_keepdims(x, w_q, w_k, w_v, w_o, num_heads):
    def split(t, h):
        b, n, d = t.shape
        return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

    def merge(t):
        b, h, n, dh = t.shape
        return t.transpose(0, 2, 1, 3).reshape(b, n, h * dh)

    d_model = x.shape[2]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    q, k, v = (split(x @ w, num_heads) for w in (w_q, w_k, w_v))
    scores = q @ np.swapaxes(k, 2, 3) / np.sqrt(d_model // num_heads)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn = e / e.sum(axis=-1)
    return merge(attn @ v) @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    # weights stored like nn.Linear: (out, in), so transpose them
    def split(t, h):
        b, n, d = t.shape
        return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

    def merge(t):
        b, h, n, dh = t.shape
        return t.transpose(0, 2, 1, 3).reshape(b, n, h * dh)

    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    q = split(x @ w_q.T, num_heads)
    k = split(x @ w_k.T, num_heads)
    v = split(x @ w_v.T, num_heads)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    p = scipy_softmax(s, axis=-1)
    return merge(p @ v) @ w_o.T


# ============================================================== multi_head_attention: right
def mha_per_head_blocks(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    dh = d // num_heads
    total = np.zeros_like(x)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        p = scipy_softmax(s, axis=-1)
        # concat(heads) @ w_o == sum over heads of head_h @ (rows of w_o for head h)
        total += (p @ vh) @ w_o[cols, :]
    return total


def mha_batch_head_loops(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = np.shape(x)
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, N, D))
    for b in range(B):
        Q, K, V = x[b] @ w_q, x[b] @ w_k, x[b] @ w_v  # (N, D)
        concat = np.empty((N, D))
        for h in range(num_heads):
            lo, hi = h * dh, (h + 1) * dh
            s = Q[:, lo:hi] @ K[:, lo:hi].T / dh ** 0.5
            s = np.exp(s - s.max(axis=1)[:, None])
            s /= s.sum(axis=1)[:, None]
            concat[:, lo:hi] = s @ V[:, lo:hi]
        out[b] = concat @ w_o
    return out


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' holds "
          "a block of consecutive values mixing tokens and features",
          split_heads_no_transpose),
    Entry("split_heads", "wrong", "transpose_before_reshape",
          "swaps the token and feature axes before reshaping, so the reshape of (B, d_model, N) "
          "cuts the features into heads along the wrong order",
          split_heads_transpose_first),
    Entry("split_heads", "wrong", "interleaved_features",
          "reshapes to (B, N, d_head, H), so head h gets every H-th feature (h, h+H, ...) "
          "instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_interleaved),
    Entry("split_heads", "wrong", "divisibility_test_reversed",
          "tests `num_heads % d_model` instead of `d_model % num_heads`, so valid head counts "
          "smaller than d_model raise ValueError",
          split_heads_guard_reversed),
    Entry("split_heads", "wrong", "np_stack_default_axis",
          "np.stack puts the new head axis first by default (axis=0), giving (H, B, N, d_head) "
          "instead of (B, H, N, d_head)",
          split_heads_stack_default_axis),
    Entry("split_heads", "wrong", "true_division_d_head",
          "computes d_head with `/`, a float, which reshape rejects with a TypeError",
          split_heads_true_division),
    Entry("split_heads", "right", "stack_slices_axis1", None, split_heads_slices),
    Entry("split_heads", "right", "einsum_selector", None, split_heads_einsum_onehot),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, d_model) without first moving the head "
          "axis next to d_head, so tokens and heads are scrambled",
          merge_heads_no_transpose),
    Entry("merge_heads", "wrong", "d_head_major_concat",
          "transposes to (B, N, d_head, H) before reshaping, so features are interleaved across "
          "heads instead of head 0's block first",
          merge_heads_dhead_major),
    Entry("merge_heads", "wrong", "hstack_token_axis",
          "np.hstack concatenates along axis 1 (the tokens), not the last axis, so it returns "
          "(B, H*N, d_head)",
          merge_heads_hstack),
    Entry("merge_heads", "wrong", "sums_heads",
          "adds the heads together instead of concatenating them, returning (B, N, d_head)",
          merge_heads_summed),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d_head) although it is (B, H, N, d_head), so the "
          "reshape uses H tokens of N * d_head features",
          merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "head_loop_starts_at_one",
          "the loop over heads starts at 1, so head 0's block is left as zeros",
          merge_heads_loop_from_one),
    Entry("merge_heads", "right", "concatenate_last_axis", None, merge_heads_concatenate),
    Entry("merge_heads", "right", "index_loops", None, merge_heads_index_loops),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)", mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without multiplying by w_o", mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "values_projected_with_w_k",
          "projects the values with w_k instead of w_v", mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads with a plain reshape of (B, H, N, d_head) to (B, N, d_model), "
          "without moving the head axis back next to d_head",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "softmax_denominator_no_keepdims",
          "the softmax denominator is summed without keepdims, so (B, H, N) does not line up "
          "with the (B, H, N, N) scores: a broadcasting error, or wrong sums where shapes "
          "happen to match",
          mha_softmax_sum_no_keepdims),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "transposes every weight as if it were stored like nn.Linear (out, in), but the "
          "contract applies them as x @ W",
          mha_linear_layout),
    Entry("multi_head_attention", "right", "sum_of_per_head_blocks", None, mha_per_head_blocks),
    Entry("multi_head_attention", "right", "batch_and_head_loops", None, mha_batch_head_loops),
]
