"""Held-out catalogue, lesson 02 (multi-head): split_heads, merge_heads, multi_head_attention."""

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
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_guard_swapped(x, num_heads):
    b, n, d = x.shape
    if num_heads % d != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_heads_assert(x, num_heads):
    b, n, d_model = x.shape
    assert d_model % num_heads == 0, f"d_model={d_model} is not divisible by num_heads={num_heads}"
    d_head = d_model // num_heads
    return np.transpose(x.reshape(b, n, num_heads, d_head), (0, 2, 1, 3))


def split_heads_stack_axis0(x, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    chunks = np.split(x, num_heads, axis=-1)  # num_heads arrays of (B, N, d_head)
    return np.stack(chunks, axis=0)


def split_heads_true_division(x, num_heads):
    B, N, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(B, N, num_heads, d_head).swapaxes(1, 2)


def split_heads_slices(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[2]
    d_head, rest = divmod(d_model, num_heads)
    if rest:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    heads = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_heads_moveaxis(x, num_heads):
    x = np.asarray(x)
    b, n, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    return np.moveaxis(x.reshape(b, n, num_heads, -1), 2, 1).copy()


# ============================================================================ merge_heads
def merge_heads_reshape_only(x):
    B, H, N, dh = x.shape
    return x.reshape(B, N, H * dh)


def merge_heads_feature_major(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_concat_wrong_axis(x):
    heads = [x[:, h] for h in range(x.shape[1])]  # each (B, N, d_head)
    return np.concatenate(heads, axis=-2)


def merge_heads_stale_shape(x):
    y = x.swapaxes(1, 2)  # (B, N, H, d_head)
    return y.reshape(x.shape[0], x.shape[1], -1)


def merge_heads_average(x):
    return x.mean(axis=1)


def merge_heads_loop_from_one(x):
    B, H, N, dh = x.shape
    out = np.zeros((B, N, H * dh), dtype=x.dtype)
    for h in range(1, H):
        out[:, :, h * dh:(h + 1) * dh] = x[:, h]
    return out


def merge_heads_dstack(x):
    return np.dstack([x[:, head] for head in range(x.shape[1])])


def merge_heads_token_loop(x):
    batch, heads, seq, dh = x.shape
    result = np.empty((batch, seq, heads * dh), dtype=x.dtype)
    for b in range(batch):
        for n in range(seq):
            result[b, n] = x[b, :, n, :].ravel()
    return result


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
    ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_linear_transposed(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    q = (x @ w_q.T).reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_head)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    merged = (w @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d_model)
    return merged @ w_o.T


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    Q = x @ w_q
    K = x @ w_k
    V = x @ w_k
    Q, K, V = (t.reshape(b, n, num_heads, hd).transpose(0, 2, 1, 3) for t in (Q, K, V))
    logits = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(hd)
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = p / p.sum(axis=-1, keepdims=True)
    return (p @ V).transpose(0, 2, 1, 3).reshape(b, n, d) @ w_o


def mha_einsum_drops_heads(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh)
    k = (x @ w_k).reshape(B, N, num_heads, dh)
    v = (x @ w_v).reshape(B, N, num_heads, dh)
    scores = np.einsum("bqhd,bkhd->bqk", q, k) / np.sqrt(dh)
    scores = scores - scores.max(axis=-1, keepdims=True)
    att = np.exp(scores)
    att = att / att.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bqk,bkhd->bqhd", att, v)
    return ctx.reshape(B, N, D) @ w_o


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    q = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(dh)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    heads = (e / e.sum(axis=-1, keepdims=True)) @ v  # (B, H, N, dh)
    return heads.reshape(B, N, D) @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads
    qh = (x @ w_q).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    kh = (x @ w_k).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    vh = (x @ w_v).reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)
    s = qh @ kh.swapaxes(-1, -2) / math.sqrt(dh)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    heads = (e / e.sum(axis=-1, keepdims=True)) @ vh
    return heads.transpose(0, 2, 1, 3).reshape(B, N, D)


def mha_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    pieces = []
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh, kh, vh = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]  # (B, N, dh)
        s = qh @ np.swapaxes(kh, 1, 2) / math.sqrt(dh)
        s = np.exp(s - s.max(axis=2, keepdims=True))
        pieces.append((s / s.sum(axis=2, keepdims=True)) @ vh)
    return np.concatenate(pieces, axis=2) @ w_o


def mha_einsum_weights(x, w_q, w_k, w_v, w_o, num_heads):
    x64 = np.asarray(x, dtype=np.float64)
    d = x64.shape[-1]
    if num_heads <= 0 or d % num_heads:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    e = d // num_heads
    wq = np.asarray(w_q, dtype=np.float64).reshape(d, num_heads, e)
    wk = np.asarray(w_k, dtype=np.float64).reshape(d, num_heads, e)
    wv = np.asarray(w_v, dtype=np.float64).reshape(d, num_heads, e)
    wo = np.asarray(w_o, dtype=np.float64).reshape(num_heads, e, d)
    q = np.einsum("bnd,dhe->bhne", x64, wq)
    k = np.einsum("bnd,dhe->bhne", x64, wk)
    v = np.einsum("bnd,dhe->bhne", x64, wv)
    s = np.einsum("bhqe,bhke->bhqk", q, k) / math.sqrt(e)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = np.einsum("bhqk,bhke->bhqe", p, v)
    return np.einsum("bhqe,hed->bqd", ctx, wo)


ENTRIES = [
    # split_heads
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, N, d_model) straight to (B, H, N, d_head) without a transpose, so each "
          "'head' is a block of consecutive numbers across tokens, not features h*d_head:(h+1)*d_head",
          split_heads_reshape_only),
    Entry("split_heads", "wrong", "factors_in_wrong_order",
          "reshapes the features as (d_head, H) instead of (H, d_head), so head h gets the strided "
          "features h, h+H, h+2H, ... instead of a contiguous block",
          split_heads_strided),
    Entry("split_heads", "wrong", "guard_operands_swapped",
          "the divisibility check tests num_heads % d_model instead of d_model % num_heads, so it "
          "raises ValueError on valid inputs (e.g. d_model=12, num_heads=3)",
          split_heads_guard_swapped),
    Entry("split_heads", "wrong", "assert_instead_of_valueerror",
          "checks divisibility with `assert`, which raises AssertionError instead of the "
          "ValueError the contract asks for",
          split_heads_assert),
    Entry("split_heads", "wrong", "stack_heads_on_axis0",
          "stacks the np.split chunks along axis 0, giving (H, B, N, d_head) instead of "
          "(B, H, N, d_head)",
          split_heads_stack_axis0),
    Entry("split_heads", "wrong", "d_head_true_division",
          "computes d_head with `/`, a float, which numpy's reshape rejects with a TypeError "
          "even when d_model divides evenly",
          split_heads_true_division),
    Entry("split_heads", "right", "slices_stacked_axis1", None, split_heads_slices),
    Entry("split_heads", "right", "reshape_moveaxis", None, split_heads_moveaxis),
    # merge_heads
    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) to (B, N, H*d_head) without moving the head axis next to "
          "d_head first, which scrambles tokens and heads",
          merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "feature_major_interleave",
          "transposes to (B, N, d_head, H) before flattening, so the heads' features are "
          "interleaved instead of placed side by side, head 0's block first",
          merge_heads_feature_major),
    Entry("merge_heads", "wrong", "concatenate_on_token_axis",
          "concatenates the heads along axis -2 (tokens), giving (B, H*N, d_head) instead of "
          "concatenating along the feature axis",
          merge_heads_concat_wrong_axis),
    Entry("merge_heads", "wrong", "reshape_with_stale_shape",
          "after swapping axes it reshapes with x.shape[1] of the original array, which is H, "
          "not N, so the result has shape (B, H, N*d_head)",
          merge_heads_stale_shape),
    Entry("merge_heads", "wrong", "averages_heads",
          "averages the heads (mean over axis 1) instead of concatenating them, so the result "
          "has d_head features instead of H*d_head",
          merge_heads_average),
    Entry("merge_heads", "wrong", "loop_skips_head_0",
          "the copy loop runs over range(1, H), so head 0's block is left as zeros",
          merge_heads_loop_from_one),
    Entry("merge_heads", "right", "dstack_heads", None, merge_heads_dstack),
    Entry("merge_heads", "right", "per_token_ravel_loop", None, merge_heads_token_loop),
    # multi_head_attention
    Entry("multi_head_attention", "wrong", "scale_by_d_model",
          "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head), the size of the "
          "vectors each head actually dots",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "weights_transposed_like_nn_linear",
          "applies every weight as x @ W.T (nn.Linear's (out, in) habit) although the course "
          "applies them as x @ W",
          mha_linear_transposed),
    Entry("multi_head_attention", "wrong", "values_projected_with_w_k",
          "projects the values with w_k (copy-paste of the key line) instead of w_v",
          mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "einsum_sums_over_heads",
          "the einsum 'bqhd,bkhd->bqk' leaves h out of the output, so the scores are summed over "
          "heads and every head shares one attention pattern",
          mha_einsum_drops_heads),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the (B, H, N, d_head) head outputs with a plain reshape to (B, N, d_model) "
          "without first moving the head axis after the token axis",
          mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without the final projection @ w_o",
          mha_no_output_projection),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None, mha_per_head_columns),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights_float64", None,
          mha_einsum_weights),
]
