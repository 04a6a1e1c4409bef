"""Held-out catalogue, lesson 02 (multi-head, numpy): split_heads, merge_heads,
multi_head_attention. Each function is one learner's answer; wrong ones carry one slip."""

import math

import numpy as np

from entry import Entry


# ============================================================================ split_heads
def split_heads_no_transpose(x, num_heads):
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
    d_head = width // num_heads
    y = x.reshape(batch, seq, d_head, num_heads)
    return y.transpose(0, 3, 1, 2)


def split_heads_torch_transpose(x, num_heads):
    x = np.asarray(x)
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, N, num_heads, D // num_heads).transpose(1, 2)


def split_heads_true_division(x, num_heads):
    x = np.asarray(x)
    B, N, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return np.transpose(x.reshape(B, N, num_heads, d_head), (0, 2, 1, 3))


def split_heads_guard_reversed(x, num_heads):
    x = np.asarray(x)
    B, N, d_model = x.shape
    if num_heads % d_model:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(B, N, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_stack_axis0(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    pieces = np.split(x, num_heads, axis=-1)  # H arrays of (B, N, d_head)
    return np.stack(pieces, axis=0)


def split_heads_slice_stack(x, num_heads):
    x = np.asarray(x)
    if x.shape[-1] % num_heads != 0:
        raise ValueError(f"d_model={x.shape[-1]} is not divisible by num_heads={num_heads}")
    width = x.shape[-1] // num_heads
    heads = [x[:, :, h * width:(h + 1) * width] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_heads_moveaxis(x, num_heads):
    arr = np.asarray(x)
    b, n, dm = arr.shape
    q, r = divmod(dm, num_heads)
    if r:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    return np.moveaxis(arr.reshape(b, n, num_heads, q), 2, 1).copy()


# ============================================================================ merge_heads
def merge_heads_plain_reshape(x):
    x = np.asarray(x)
    B, H, N, d = x.shape
    return x.reshape(B, N, H * d)


def merge_heads_interleaved(x):
    x = np.asarray(x)
    B, H, N, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(B, N, H * d)


def merge_heads_unpack_order(x):
    x = np.asarray(x)
    b, n, h, d = x.shape  # (B, N, H, d_head)
    return x.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def merge_heads_range_off_by_one(x):
    x = np.asarray(x)
    parts = []
    for h in range(1, x.shape[1]):
        parts.append(x[:, h])
    return np.concatenate(parts, axis=-1)


def merge_heads_hstack(x):
    x = np.asarray(x)
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_heads_sum(x):
    x = np.asarray(x)
    return x.sum(axis=1)


def merge_heads_triple_loop(x):
    x = np.asarray(x)
    B, H, N, d = x.shape
    out = np.empty((B, N, H * d), dtype=x.dtype)
    for b in range(B):
        for h in range(H):
            out[b, :, h * d:(h + 1) * d] = x[b, h]
    return out


def merge_heads_concat(x):
    x = np.asarray(x)
    return np.concatenate([x[:, head, :, :] for head in range(x.shape[1])], axis=2)


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def split(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    s = q @ k.swapaxes(-1, -2) / np.sqrt(D)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    s -= s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def heads(t):
        return t.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)

    q = heads(x @ w_q.T)
    k = heads(x @ w_k.T)
    v = heads(x @ w_v.T)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores = scores - scores.max(axis=-1, keepdims=True)
    att = np.exp(scores)
    att = att / att.sum(axis=-1, keepdims=True)
    merged = (att @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
    return merged @ w_o.T


def mha_softmax_axis1(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = np.transpose((x @ w_q).reshape(B, N, num_heads, dh), (0, 2, 1, 3))
    k = np.transpose((x @ w_k).reshape(B, N, num_heads, dh), (0, 2, 1, 3))
    v = np.transpose((x @ w_v).reshape(B, N, num_heads, dh), (0, 2, 1, 3))
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(dh)
    scores = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(scores)
    probs = e / e.sum(axis=1, keepdims=True)
    ctx = np.einsum("bhqk,bhkd->bhqd", probs, v)
    return np.transpose(ctx, (0, 2, 1, 3)).reshape(B, N, D) @ w_o


def mha_keys_from_wq(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    Q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    K = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    V = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    S = Q @ K.swapaxes(-1, -2) / np.sqrt(dh)
    S = np.exp(S - S.max(axis=-1, keepdims=True))
    S = S / S.sum(axis=-1, keepdims=True)
    return (S @ V).transpose(0, 2, 1, 3).reshape(B, N, D) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def to_heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = to_heads(x @ w_q), to_heads(x @ w_k), to_heads(x @ w_v)
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    logits = logits - logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    ctx = weights @ v  # (B, H, N, dh)
    return ctx.reshape(B, N, D) @ w_o


def mha_per_head_out_rows(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros(x.shape)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ w_q[:, cols]
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", qh, kh) / math.sqrt(dh)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        total += np.einsum("bij,bjd->bid", p, vh) @ w_o[cols, :]
    return total


def mha_batched_einsum(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, dm = np.shape(x)
    if num_heads <= 0 or dm % num_heads:
        raise ValueError(f"d_model={dm} is not divisible by num_heads={num_heads}")
    hd = dm // num_heads
    wq = np.asarray(w_q).reshape(dm, num_heads, hd)
    wk = np.asarray(w_k).reshape(dm, num_heads, hd)
    wv = np.asarray(w_v).reshape(dm, num_heads, hd)
    wo = np.asarray(w_o).reshape(num_heads, hd, dm)
    q = np.einsum("bnm,mhe->bhne", x, wq)
    k = np.einsum("bnm,mhe->bhne", x, wk)
    v = np.einsum("bnm,mhe->bhne", x, wv)
    logits = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(hd)
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", p, v)
    return np.einsum("bhie,hem->bim", ctx, wo)


ENTRIES = [
    Entry(exercise="split_heads", kind="wrong", label="reshape_without_transpose",
          mistake="reshapes straight to (B, H, N, d_head) without the transpose, so each 'head' is a "
          "block of the flattened token-feature memory, not features h*d_head:(h+1)*d_head of "
          "every token", func=split_heads_no_transpose),
    Entry(exercise="split_heads", kind="wrong", label="reshape_dhead_before_heads",
          mistake="reshapes the last axis as (d_head, H) instead of (H, d_head), so head h gets the "
          "strided features h, h+H, h+2H, ... instead of a contiguous block",
          func=split_heads_interleaved),
    Entry(exercise="split_heads", kind="wrong", label="torch_style_transpose",
          mistake="`ndarray.transpose(1, 2)` is written as in torch; numpy's transpose wants a full "
          "permutation of the four axes, so it raises on every valid input",
          func=split_heads_torch_transpose),
    Entry(exercise="split_heads", kind="wrong", label="true_division_dhead",
          mistake="`d_head = d_model / num_heads` is a float, and numpy's reshape rejects a float "
          "dimension (TypeError) on every valid input", func=split_heads_true_division),
    Entry(exercise="split_heads", kind="wrong", label="divisibility_guard_reversed",
          mistake="the guard tests `num_heads % d_model` instead of `d_model % num_heads`, so it raises "
          "ValueError on valid inputs such as d_model=12, num_heads=3",
          func=split_heads_guard_reversed),
    Entry(exercise="split_heads", kind="wrong", label="stack_heads_axis0",
          mistake="stacks the heads with `np.stack(..., axis=0)`, giving (H, B, N, d_head) instead of "
          "(B, H, N, d_head)", func=split_heads_stack_axis0),
    Entry(exercise="split_heads", kind="right", label="slice_and_stack_axis1", mistake=None, func=split_heads_slice_stack),
    Entry(exercise="split_heads", kind="right", label="divmod_moveaxis", mistake=None, func=split_heads_moveaxis),

    Entry(exercise="merge_heads", kind="wrong", label="reshape_without_transpose",
          mistake="reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to the features first, so tokens and heads are scrambled",
          func=merge_heads_plain_reshape),
    Entry(exercise="merge_heads", kind="wrong", label="transpose_0231_interleaves",
          mistake="transposes to (B, N, d_head, H) before the reshape, so the heads' features end up "
          "interleaved instead of head 0's block first", func=merge_heads_interleaved),
    Entry(exercise="merge_heads", kind="wrong", label="shape_unpacked_as_bnhd",
          mistake="unpacks `x.shape` as (B, N, H, d_head) although x is (B, H, N, d_head), so the "
          "reshape uses H as the token count and the result has the wrong shape",
          func=merge_heads_unpack_order),
    Entry(exercise="merge_heads", kind="wrong", label="head_loop_starts_at_1",
          mistake="the loop over heads runs `range(1, H)`, so head 0 is dropped from the concatenation",
          func=merge_heads_range_off_by_one),
    Entry(exercise="merge_heads", kind="wrong", label="hstack_joins_tokens",
          mistake="`np.hstack` joins along axis 1, which for the (B, N, d_head) head slices is the token "
          "axis, not the feature axis: (B, H*N, d_head) instead of (B, N, H*d_head)",
          func=merge_heads_hstack),
    Entry(exercise="merge_heads", kind="wrong", label="sums_heads",
          mistake="adds the heads together (`sum(axis=1)`) instead of concatenating them side by side, "
          "so the result is (B, N, d_head)", func=merge_heads_sum),
    Entry(exercise="merge_heads", kind="right", label="triple_loop_blocks", mistake=None, func=merge_heads_triple_loop),
    Entry(exercise="merge_heads", kind="right", label="concatenate_heads", mistake=None, func=merge_heads_concat),

    Entry(exercise="multi_head_attention", kind="wrong", label="scale_sqrt_d_model",
          mistake="the scores are divided by sqrt(d_model) instead of sqrt(d_head), the width each head "
          "actually dots over", func=mha_scale_d_model),
    Entry(exercise="multi_head_attention", kind="wrong", label="no_output_projection",
          mistake="returns the merged heads without multiplying by `w_o`", func=mha_no_output_projection),
    Entry(exercise="multi_head_attention", kind="wrong", label="nn_linear_layout",
          mistake="applies every weight as `x @ W.T` (nn.Linear's (out, in) layout) although the "
          "contract applies them as `x @ W`", func=mha_linear_layout),
    Entry(exercise="multi_head_attention", kind="wrong", label="softmax_over_heads_axis",
          mistake="the softmax runs over axis 1 of the (B, H, N, N) scores, the heads, instead of over "
          "the keys (axis -1)", func=mha_softmax_axis1),
    Entry(exercise="multi_head_attention", kind="wrong", label="keys_projected_with_wq",
          mistake="copy-paste slip: the keys are projected with `w_q` instead of `w_k`",
          func=mha_keys_from_wq),
    Entry(exercise="multi_head_attention", kind="wrong", label="merge_without_transpose",
          mistake="merges the heads by reshaping (B, H, N, d_head) straight to (B, N, d_model) without "
          "transposing heads and tokens back first", func=mha_merge_without_transpose),
    Entry(exercise="multi_head_attention", kind="right", label="per_head_weight_slices_summed", mistake=None,
          func=mha_per_head_out_rows),
    Entry(exercise="multi_head_attention", kind="right", label="weights_reshaped_einsum", mistake=None, func=mha_batched_einsum),
]
