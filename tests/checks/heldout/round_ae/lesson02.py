"""Held-out catalogue, lesson 02 (multi-head, numpy): split_heads, merge_heads,
multi_head_attention."""

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ split_heads
def split_heads_reshape_only(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.reshape(b, num_heads, n, d_model // num_heads)


def split_heads_interleaved(x, num_heads):
    batch, seq, width = x.shape
    if width % num_heads:
        raise ValueError(f"d_model={width} is not divisible by num_heads={num_heads}")
    d_head = width // num_heads
    return x.reshape(batch, seq, d_head, num_heads).transpose(0, 3, 1, 2)


def split_heads_heads_before_batch(x, num_heads):
    B, N, D = x.shape
    if D % num_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    return x.reshape(B, N, num_heads, D // num_heads).transpose(2, 0, 1, 3)


def split_heads_slices_no_check(x, num_heads):
    d_head = x.shape[-1] // num_heads
    heads = [x[:, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]
    return np.stack(heads, axis=1)


def split_heads_guard_reversed(x, num_heads):
    b, n, d = x.shape
    if num_heads % d != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    return np.swapaxes(x.reshape(b, n, num_heads, d // num_heads), 1, 2)


def split_heads_true_division(x, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model / num_heads
    return x.reshape(b, n, num_heads, d_head).transpose(0, 2, 1, 3)


def split_heads_right_split_stack(x, num_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return np.stack(np.split(x, num_heads, axis=-1), axis=1)


def split_heads_right_einsum(x, num_heads):
    batch, length, d_model = np.shape(x)
    if num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    four = np.asarray(x).reshape(batch, length, num_heads, -1)
    return np.einsum("bnhe->bhne", four).copy()


# ============================================================================ merge_heads
def merge_heads_reshape_only(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)


def merge_heads_head_minor(x):
    b, h, n, d = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, n, h * d)


def merge_heads_hstack(x):
    return np.hstack([x[:, h] for h in range(x.shape[1])])


def merge_heads_unpack_order(x):
    B, N, H, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * d)


def merge_heads_sum_heads(x):
    return np.sum(x, axis=1)


def merge_heads_range_off_by_one(x):
    n_heads = x.shape[1]
    pieces = []
    for h in range(n_heads - 1):
        pieces.append(x[:, h, :, :])
    return np.concatenate(pieces, axis=-1)


def merge_heads_right_dstack(x):
    return np.dstack([x[:, h] for h in range(x.shape[1])])


def merge_heads_right_index_loop(x):
    x = np.asarray(x)
    b, h, n, d = x.shape
    out = np.empty((b, n, h * d), dtype=x.dtype)
    for head in range(h):
        for j in range(d):
            out[:, :, head * d + j] = x[:, head, :, j]
    return out


# ============================================================================ multi_head_attention
def mha_scale_d_model(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    dh = D // num_heads

    def heads(t):
        return t.reshape(B, N, num_heads, dh).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return ctx @ w_o


def mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d_model={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    q = (x @ w_q).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    k = (x @ w_k).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    v = (x @ w_v).reshape(b, n, num_heads, hd).swapaxes(1, 2)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(hd)
    weights = scipy.special.softmax(scores, axis=-1)
    merged = (weights @ v).swapaxes(1, 2).reshape(b, n, d)
    return merged


def mha_values_from_w_k(x, w_q, w_k, w_v, w_o, num_heads):
    batch, seq, d_model = x.shape
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads
    Q = x @ w_q
    K = x @ w_k
    V = x @ w_k
    split = lambda t: t.reshape(batch, seq, num_heads, d_head).transpose(0, 2, 1, 3)  # noqa: E731
    Q, K, V = split(Q), split(K), split(V)
    s = np.einsum("bhqd,bhkd->bhqk", Q, K) / np.sqrt(d_head)
    s -= s.max(axis=-1, keepdims=True)
    a = np.exp(s)
    a /= a.sum(axis=-1, keepdims=True)
    o = np.einsum("bhqk,bhkd->bqhd", a, V).reshape(batch, seq, d_model)
    return o @ w_o


def mha_linear_layout(x, w_q, w_k, w_v, w_o, num_heads):
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"d_model={D} is not divisible by num_heads={num_heads}")
    H, dh = num_heads, D // num_heads
    q = (x @ w_q.T).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    k = (x @ w_k.T).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    v = (x @ w_v.T).reshape(B, N, H, dh).transpose(0, 2, 1, 3)
    sc = q @ np.swapaxes(k, -1, -2) / np.sqrt(dh)
    sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
    sc = sc / sc.sum(axis=-1, keepdims=True)
    out = (sc @ v).transpose(0, 2, 1, 3).reshape(B, N, D)
    return out @ w_o.T


def mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads):
    b, n, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_head = d_model // num_heads

    def split(t):
        return np.transpose(t.reshape(b, n, num_heads, d_head), (0, 2, 1, 3))

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_head)
    logits = logits - logits.max(axis=-1, keepdims=True)
    w = np.exp(logits)
    w = w / w.sum(axis=-1, keepdims=True)
    heads = w @ v  # (b, H, n, d_head)
    return heads.reshape(b, n, d_model) @ w_o


def mha_one_big_head(x, w_q, w_k, w_v, w_o, num_heads):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    d = q.shape[-1]
    scores = q @ np.swapaxes(k, 1, 2) / np.sqrt(d / num_heads)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    attn = e / e.sum(axis=-1, keepdims=True)
    return (attn @ v) @ w_o


def mha_right_per_head_columns(x, w_q, w_k, w_v, w_o, num_heads):
    x = np.asarray(x, dtype=np.float64)
    d_model = x.shape[-1]
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    total = np.zeros(x.shape)
    for h in range(num_heads):
        cols = slice(h * dh, (h + 1) * dh)
        qh = x @ w_q[:, cols]
        kh = x @ w_k[:, cols]
        vh = x @ w_v[:, cols]
        s = np.einsum("bid,bjd->bij", qh, kh) / np.sqrt(dh)
        p = scipy.special.softmax(s, axis=-1)
        total += (p @ vh) @ w_o[cols, :]  # head h's share of the output projection
    return total


def mha_right_einsum_weights_split(x, w_q, w_k, w_v, w_o, num_heads):
    d_model = np.shape(x)[-1]
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    dh = d_model // num_heads
    wq = np.asarray(w_q).reshape(d_model, num_heads, dh)
    wk = np.asarray(w_k).reshape(d_model, num_heads, dh)
    wv = np.asarray(w_v).reshape(d_model, num_heads, dh)
    wo = np.asarray(w_o).reshape(num_heads, dh, d_model)
    q = np.einsum("bnm,mhe->bhne", x, wq)
    k = np.einsum("bnm,mhe->bhne", x, wk)
    v = np.einsum("bnm,mhe->bhne", x, wv)
    s = np.einsum("bhie,bhje->bhij", q, k) * dh ** -0.5
    s = s - scipy.special.logsumexp(s, axis=-1, keepdims=True)
    ctx = np.einsum("bhij,bhje->bhie", np.exp(s), v)
    return np.einsum("bhie,hem->bim", ctx, wo)


ENTRIES = [
    Entry("split_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, N, d_model) straight to (B, H, N, d_head) without the transpose, so each "
          "'head' gets a block of consecutive numbers that mixes tokens instead of features "
          "h*d_head:(h+1)*d_head of every token", split_heads_reshape_only),
    Entry("split_heads", "wrong", "interleaved_features",
          "reshapes the last axis as (d_head, H) instead of (H, d_head), so head h gets every "
          "H-th feature instead of the contiguous block h*d_head:(h+1)*d_head",
          split_heads_interleaved),
    Entry("split_heads", "wrong", "heads_axis_first",
          "transposes with (2, 0, 1, 3), putting the head axis before the batch axis: the result "
          "is (H, B, N, d_head) instead of (B, H, N, d_head)", split_heads_heads_before_batch),
    Entry("split_heads", "wrong", "slices_no_divisibility_check",
          "slices the heads in a loop without checking that num_heads divides d_model, so an "
          "indivisible d_model silently drops the last features instead of raising ValueError",
          split_heads_slices_no_check),
    Entry("split_heads", "wrong", "divisibility_test_reversed",
          "the divisibility test is written `num_heads % d_model` instead of "
          "`d_model % num_heads`, so it raises ValueError for valid head counts smaller than "
          "d_model", split_heads_guard_reversed),
    Entry("split_heads", "wrong", "true_division_head_size",
          "computes d_head with `/`, a float, and numpy's reshape refuses a float dimension "
          "(TypeError) on every valid input", split_heads_true_division),
    Entry("split_heads", "right", "np_split_stack", None, split_heads_right_split_stack),
    Entry("split_heads", "right", "einsum_transpose", None, split_heads_right_einsum),

    Entry("merge_heads", "wrong", "reshape_without_transpose",
          "reshapes (B, H, N, d_head) straight to (B, N, H*d_head) without moving the head axis "
          "next to d_head first, which scrambles tokens and heads", merge_heads_reshape_only),
    Entry("merge_heads", "wrong", "head_minor_order",
          "transposes to (B, N, d_head, H) before reshaping, so the features come out "
          "interleaved head by head instead of head 0's block first", merge_heads_head_minor),
    Entry("merge_heads", "wrong", "hstack_wrong_axis",
          "np.hstack joins along axis 1, the token axis of each (B, N, d_head) head, giving "
          "(B, H*N, d_head) instead of concatenating features", merge_heads_hstack),
    Entry("merge_heads", "wrong", "shape_unpacked_in_wrong_order",
          "unpacks x.shape as (B, N, H, d) although the input is (B, H, N, d_head), so the "
          "final reshape uses the head count as the sequence length", merge_heads_unpack_order),
    Entry("merge_heads", "wrong", "sums_heads",
          "adds the heads together instead of concatenating them, returning (B, N, d_head)",
          merge_heads_sum_heads),
    Entry("merge_heads", "wrong", "loop_drops_last_head",
          "loops over `range(n_heads - 1)`, so the last head is left out of the concatenation",
          merge_heads_range_off_by_one),
    Entry("merge_heads", "right", "dstack_heads", None, merge_heads_right_dstack),
    Entry("merge_heads", "right", "elementwise_index_loop", None, merge_heads_right_index_loop),

    Entry("multi_head_attention", "wrong", "scale_sqrt_d_model",
          "scales each head's scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
          mha_scale_d_model),
    Entry("multi_head_attention", "wrong", "no_output_projection",
          "returns the merged heads without multiplying by w_o", mha_no_output_projection),
    Entry("multi_head_attention", "wrong", "values_from_w_k",
          "computes the values with w_k (a copy-paste of the keys' line) instead of w_v",
          mha_values_from_w_k),
    Entry("multi_head_attention", "wrong", "nn_linear_layout",
          "applies the weights as `x @ W.T` (nn.Linear's (out, in) layout) although the course "
          "applies them as `x @ W`", mha_linear_layout),
    Entry("multi_head_attention", "wrong", "merge_without_transpose",
          "merges the heads' outputs with a plain reshape of (B, H, N, d_head) to (B, N, d_model), "
          "without moving the head axis back next to d_head", mha_merge_without_transpose),
    Entry("multi_head_attention", "wrong", "one_big_head",
          "never splits into heads: one attention over all d_model features (with the d_head "
          "scale), so the heads' separate softmaxes are lost and an indivisible d_model does not "
          "raise", mha_one_big_head),
    Entry("multi_head_attention", "right", "per_head_weight_columns", None,
          mha_right_per_head_columns),
    Entry("multi_head_attention", "right", "einsum_reshaped_weights", None,
          mha_right_einsum_weights_split),
]
