"""Held-out learners' answers, lesson 02 (split_heads, merge_heads, multi_head_attention).
Numpy; no mhalib."""

import math

import numpy as np

from entry import Entry

# ============================================================================ split_heads


def split_heads_reshape_only(x, num_heads):
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


def split_heads_torch_transpose(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads != 0:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    head_dim = width // num_heads
    return x.reshape(batch, seq, num_heads, head_dim).transpose(1, 2)


def split_heads_slices_no_check(x, num_heads):
    d_head = x.shape[-1] // num_heads
    pieces = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(pieces, axis=1)


def split_heads_np_split_axis1(x, num_heads):
    d_model = x.shape[2]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=1)
    return np.stack(chunks, axis=1)


def split_heads_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return np.transpose(x.reshape(B, N, num_heads, d_head), (0, 2, 1, 3))


def split_heads_loop_fill(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    out = np.empty((B, num_heads, N, dh), dtype=x.dtype)
    for h in range(num_heads):
        for n in range(N):
            out[:, h, n, :] = x[:, n, h * dh:(h + 1) * dh]
    return out


def split_heads_einsum(x, num_heads):
    b, n, d = np.shape(x)
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.einsum("bnhk->bhnk", np.reshape(x, (b, n, num_heads, d // num_heads))).copy()


# ============================================================================ merge_heads


def merge_heads_reshape_only(x):
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_feature_major(x):
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * d)


def merge_heads_hstack(x):
    heads = [x[:, h] for h in range(x.shape[1])]  # each (B, N, d_head)
    return np.hstack(heads)


def merge_heads_shape_names_swapped(x):
    B, N, H, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d)


def merge_heads_off_by_one(x):
    batch, heads, seq, dh = x.shape
    out = np.zeros((batch, seq, heads * dh), dtype=x.dtype)
    for h in range(heads):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h - 1]
    return out


def merge_heads_sum_heads(x):
    return x.sum(axis=1)


def merge_heads_einsum(x):
    b, h, n, d = x.shape
    return np.einsum("bhnd->bnhd", x).reshape(b, n, h * d)


def merge_heads_concat_list(x):
    return np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1)


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
    s = np.exp(s - s.max(-1, keepdims=True))
    a = s / s.sum(-1, keepdims=True)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return o @ w_o


def mha_wo_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    heads = []
    for w in (w_q, w_k, w_v):
        heads.append((x @ w).reshape(b, n, num_heads, d_head).swapaxes(1, 2))
    q, k, v = heads
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = (p @ v).swapaxes(1, 2).reshape(b, n, d_model)
    return ctx @ w_o.T


def mha_keys_from_wq(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    hd = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    K = (x @ w_q).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    V = (x @ w_v).reshape(B, N, num_heads, hd).transpose(0, 2, 1, 3)
    S = np.einsum("bhqd,bhkd->bhqk", Q, K) / np.sqrt(hd)
    S = np.exp(S - S.max(axis=-1, keepdims=True))
    P = S / S.sum(axis=-1, keepdims=True)
    O = np.einsum("bhqk,bhkd->bhqd", P, V)
    return O.transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_no_head_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, dm = x.shape
    if dm % num_heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    dh = dm // num_heads
    q = (x @ w_q).reshape(batch, seq, num_heads, dh)
    k = (x @ w_k).reshape(batch, seq, num_heads, dh)
    v = (x @ w_v).reshape(batch, seq, num_heads, dh)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / np.sum(w, axis=-1, keepdims=True)
    out = (w @ v).reshape(batch, seq, dm)
    return out @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)
    att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(d_head)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    heads = att @ v  # (B, H, N, d_head)
    return heads.reshape(B, N, d_model) @ w_o


def mha_column_max(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    d_head = D // num_heads

    def heads(t):
        return np.transpose(t.reshape(B, N, num_heads, d_head), (0, 2, 1, 3))

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head)
    logits = logits - logits.max(axis=-2, keepdims=True)
    e = np.exp(logits)
    weights = e / e.sum(axis=-1, keepdims=True)
    merged = np.transpose(weights @ v, (0, 2, 1, 3)).reshape(B, N, D)
    return merged @ w_o


def mha_per_head_output_sum(x, w_q, w_k, w_v, w_o, num_heads):
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
        s = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(dh)
        s = np.exp(s - s.max(axis=2, keepdims=True))
        s = s / s.sum(axis=2, keepdims=True)
        total += (s @ vh) @ w_o[cols, :]  # head h only touches its rows of w_o
    return total


def mha_torch_sdpa(x, w_q, w_k, w_v, w_o, num_heads):
    import torch
    import torch.nn.functional as F

    B, N, D = np.shape(x)
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    tx = torch.as_tensor(np.asarray(x, dtype=np.float64))
    wq, wk, wv, wo = (torch.as_tensor(np.asarray(w, dtype=np.float64))
                      for w in (w_q, w_k, w_v, w_o))

    def to_heads(t):
        return t.view(B, N, num_heads, D // num_heads).permute(0, 2, 1, 3)

    ctx = F.scaled_dot_product_attention(to_heads(tx @ wq), to_heads(tx @ wk), to_heads(tx @ wv))
    y = ctx.permute(0, 2, 1, 3).reshape(B, N, D) @ wo
    return y.numpy().astype(np.asarray(x).dtype)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes straight to (B, H, N, d_head) without the transpose, so a head gets a "
          "scrambled mix of tokens and features instead of features h*d_head:(h+1)*d_head of "
          "every token",
          split_heads_reshape_only),
    Entry("split_heads", "wrong", "strided_features",
          "reshapes to (B, N, d_head, H), so head h takes every H-th feature (h, h+H, ...) "
          "instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_strided),
    Entry("split_heads", "wrong", "torch_style_transpose",
          "numpy's transpose(1, 2) is not torch's swap of two axes: it is a full axis order, "
          "which does not match a 4-D array, so the call raises",
          split_heads_torch_transpose),
    Entry("split_heads", "wrong", "slices_without_divisibility_check",
          "no check that num_heads divides d_model: the slices silently drop the leftover "
          "features instead of raising ValueError",
          split_heads_slices_no_check),
    Entry("split_heads", "wrong", "np_split_sequence_axis",
          "np.split cuts along axis 1 (the tokens) instead of the feature axis, so the heads "
          "are chunks of the sequence (and it raises when N is not a multiple of H)",
          split_heads_np_split_axis1),
    Entry("split_heads", "wrong", "float_head_size",
          "d_head is computed with `/`, a float, and reshape refuses a float dimension "
          "(TypeError) on every valid input",
          split_heads_true_division),
    Entry("split_heads", "right", "loop_fill", None, split_heads_loop_fill),
    Entry("split_heads", "right", "einsum_permute", None, split_heads_einsum),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head "
          "axis next to d_head, which mixes tokens of different heads",
          merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "feature_major_order",
          "transposes to (B, N, d_head, H) before the reshape, so the features come out "
          "interleaved across heads instead of head 0's block first",
          merge_heads_feature_major),
    Entry("merge_heads", "wrong", "hstack_joins_axis_1",
          "np.hstack joins 3-D arrays along axis 1 (the tokens), not the last axis, so the "
          "result is (B, H*N, d_head)",
          merge_heads_hstack),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d) although x is (B, H, N, d), so N and H swap roles "
          "and the result comes out (B, H, N*d_head) instead of (B, N, H*d_head)",
          merge_heads_shape_names_swapped),
    Entry("merge_heads", "wrong", "head_index_off_by_one",
          "the loop copies head h-1 into slot h, so the heads come out rotated by one "
          "(head H-1 first)",
          merge_heads_off_by_one),
    Entry("merge_heads", "wrong", "sums_the_heads",
          "adds the heads together instead of concatenating them, giving (B, N, d_head)",
          merge_heads_sum_heads),
    Entry("merge_heads", "right", "einsum_then_reshape", None, merge_heads_einsum),
    Entry("merge_heads", "right", "concatenate_head_list", None, merge_heads_concat_list),

    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "the scores are divided by sqrt(d_model) instead of sqrt(d_head), which only agrees "
          "with one head",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "w_o_transposed",
          "the output projection is applied as `@ w_o.T` (nn.Linear's layout) although the "
          "course applies weights as `x @ W`",
          mha_wo_transposed),
    Entry("multi_head_attention", "wrong", "keys_from_w_q",
          "the keys are projected with w_q (copy-paste) instead of w_k",
          mha_keys_from_wq),
    Entry("multi_head_attention", "wrong", "attention_across_heads",
          "q, k, v stay (B, N, H, d_head) without the transpose, so each token attends over "
          "its own heads instead of over the positions",
          mha_no_head_transpose),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "the heads (B, H, N, d_head) are reshaped to (B, N, d_model) without moving the head "
          "axis back, which scrambles tokens and heads before w_o",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "max_over_queries",
          "the softmax shift subtracts the maximum over axis -2 (per key column) instead of "
          "per row, which is not a constant within a row and changes the weights",
          mha_column_max),
    Entry("multi_head_attention", "right", "per_head_output_sum", None, mha_per_head_output_sum),
    Entry("multi_head_attention", "right", "torch_sdpa", None, mha_torch_sdpa),
]
