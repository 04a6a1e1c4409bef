"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ split_heads
def split_no_transpose(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, num_heads, N, D // num_heads)


def split_interleaved(x, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_first(x, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(2, 0, 1, 3)


def split_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return np.swapaxes(x.reshape(B, N, num_heads, d_head), 1, 2)


def split_guard_reversed(x, num_heads):
    B, N, d_model = x.shape
    if num_heads % d_model != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(B, N, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)


def split_assert_guard(x, num_heads):
    B, N, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} not divisible by num_heads={num_heads}"
    heads = x.reshape(B, N, num_heads, d_model // num_heads)
    return heads.transpose(0, 2, 1, 3)


def split_np_split_stack(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_slice_loop(x, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        out[:, h, :, :] = x[:, :, h * dh:(h + 1) * dh]
    return out


# ============================================================================ merge_heads
def merge_no_transpose(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_feature_major(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * d)


def merge_concat_seq_axis(x):
    H = x.shape[1]
    return np.concatenate([x[:, h] for h in range(H)], axis=1)


def merge_off_by_one(x):
    n_heads = x.shape[1]
    pieces = []
    for h in range(n_heads - 1):
        pieces.append(x[:, h, :, :])
    return np.concatenate(pieces, axis=-1)


def merge_unpack_order(x):
    B, N, H, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d)


def merge_concat_iterates_batch(x):
    return np.concatenate(x, axis=-1)  # glue the heads side by side


def merge_einsum(x):
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


def merge_concat_heads(x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=-1)


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
    o = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return o @ w_o


def mha_forgot_w_o(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    heads = []
    for w in (w_q, w_k, w_v):
        heads.append((x @ w).reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3))
    q, k, v = heads
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_head)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    ctx = weights @ v  # (B, H, N, d_head)
    return ctx.reshape(batch, seq, d_model) @ w_o


def mha_key_from_w_q(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    Q = np.swapaxes((x @ w_q).reshape(B, N, num_heads, dh), 1, 2)
    K = np.swapaxes((x @ w_q).reshape(B, N, num_heads, dh), 1, 2)
    V = np.swapaxes((x @ w_v).reshape(B, N, num_heads, dh), 1, 2)
    logits = Q @ np.swapaxes(K, 2, 3) / np.sqrt(dh)
    logits = logits - logits.max(axis=3, keepdims=True)
    att = np.exp(logits)
    att = att / att.sum(axis=3, keepdims=True)
    merged = np.swapaxes(att @ V, 1, 2).reshape(B, N, D)
    return merged @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    s = s - s.max(axis=-1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(axis=-1, keepdims=True)
    return (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o.T


def mha_double_scale(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    scale = 1.0 / math.sqrt(dh)
    q = (x @ w_q * scale).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    scores = (q @ k.transpose(0, 1, 3, 2)) * scale
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_einsum_weight_heads(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    wq = w_q.reshape(d_model, num_heads, dh)
    wk = w_k.reshape(d_model, num_heads, dh)
    wv = w_v.reshape(d_model, num_heads, dh)
    wo = w_o.reshape(num_heads, dh, d_model)
    q = np.einsum("bnd,dhe->bhne", x, wq)
    k = np.einsum("bnd,dhe->bhne", x, wk)
    v = np.einsum("bnd,dhe->bhne", x, wv)
    att = scipy.special.softmax(np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(dh), axis=-1)
    ctx = np.einsum("bhqk,bhke->bhqe", att, v)
    return np.einsum("bhne,hef->bnf", ctx, wo)


def mha_head_loop(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    n_feat = x.shape[2]
    if n_feat % num_heads != 0:
        raise ValueError(f"d_model={n_feat} is not divisible by num_heads={num_heads}")
    width = n_feat // num_heads
    q_all, k_all, v_all = x @ w_q, x @ w_k, x @ w_v
    outputs = []
    for head in range(num_heads):
        cols = slice(head * width, (head + 1) * width)
        qh, kh, vh = q_all[..., cols], k_all[..., cols], v_all[..., cols]
        logits = np.matmul(qh, np.transpose(kh, (0, 2, 1))) / math.sqrt(width)
        logits = logits - logits.max(axis=2, keepdims=True)
        probs = np.exp(logits)
        probs = probs / probs.sum(axis=2, keepdims=True)
        outputs.append(probs @ vh)
    return np.concatenate(outputs, axis=2) @ w_o


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_no_transpose",
          "reshapes straight to (B, H, N, d_head) without a transpose, which cuts the flat "
          "memory into the wrong blocks: tokens and features get mixed across heads",
          split_no_transpose),
    Entry("split_heads", "wrong", "interleaved_features",
          "reshapes to (B, N, d_head, H), so head h gets the strided features h::H instead of "
          "the contiguous block h*d_head:(h+1)*d_head",
          split_interleaved),
    Entry("split_heads", "wrong", "heads_before_batch",
          "transposes with (2, 0, 1, 3), which puts the head axis before the batch axis and "
          "returns (H, B, N, d_head)",
          split_heads_first),
    Entry("split_heads", "wrong", "true_division_d_head",
          "computes d_head with `/`, a float, so reshape raises TypeError on every input",
          split_true_division),
    Entry("split_heads", "wrong", "guard_operands_reversed",
          "tests num_heads % d_model instead of d_model % num_heads, so valid head counts "
          "(e.g. 3 heads of d_model=12) raise ValueError",
          split_guard_reversed),
    Entry("split_heads", "wrong", "assert_guard",
          "guards with assert, so a d_model not divisible by num_heads raises AssertionError "
          "instead of the ValueError the contract asks for",
          split_assert_guard),
    Entry("split_heads", "right", "np_split_stack", None, split_np_split_stack),
    Entry("split_heads", "right", "slice_loop", None, split_slice_loop),

    Entry("merge_heads", "wrong", "reshape_no_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to d_head first, so it scrambles tokens and heads",
          merge_no_transpose),
    Entry("merge_heads", "wrong", "feature_major_order",
          "transposes to (B, N, d_head, H) before the reshape, so the features come out "
          "interleaved across heads instead of head 0's block first",
          merge_feature_major),
    Entry("merge_heads", "wrong", "concat_sequence_axis",
          "concatenates the heads along axis 1 (the token axis) instead of the feature axis, "
          "returning (B, H*N, d_head)",
          merge_concat_seq_axis),
    Entry("merge_heads", "wrong", "range_off_by_one",
          "loops over range(num_heads - 1), so the last head is dropped whenever there is "
          "more than one head",
          merge_off_by_one),
    Entry("merge_heads", "wrong", "unpack_order",
          "unpacks x.shape as (B, N, H, d) although x is (B, H, N, d_head), so the final "
          "reshape uses the head count as the token count and returns the wrong shape",
          merge_unpack_order),
    Entry("merge_heads", "wrong", "concatenate_iterates_batch",
          "passes the 4-D array itself to np.concatenate, which iterates over its first axis "
          "(the batch), not the heads, so batches are glued side by side",
          merge_concat_iterates_batch),
    Entry("merge_heads", "right", "einsum_permute", None, merge_einsum),
    Entry("merge_heads", "right", "concat_heads", None, merge_concat_heads),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head), the size each "
          "head's dot product actually has",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "forgot_output_projection",
          "returns the merged heads without the final `@ w_o` output projection",
          mha_forgot_w_o),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "swapping the head and token axes first",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "key_from_w_q",
          "projects the keys with w_q (copy-paste of the query line) instead of w_k",
          mha_key_from_w_q),
    Entry("multi_head_attention", "wrong", "linear_layout_transpose",
          "applies every weight as x @ W.T (nn.Linear's (out, in) layout) although the course "
          "applies them as x @ W",
          mha_linear_layout),
    Entry("multi_head_attention", "wrong", "scaled_twice",
          "scales q by 1/sqrt(d_head) and then scales the scores again, dividing by d_head in "
          "total",
          mha_double_scale),
    Entry("multi_head_attention", "right", "einsum_weight_heads", None, mha_einsum_weight_heads),
    Entry("multi_head_attention", "right", "head_loop", None, mha_head_loop),
]
