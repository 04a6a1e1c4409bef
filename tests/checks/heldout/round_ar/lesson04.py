"""Held-out learners' answers, lesson 04 (causal_mask, padding_mask, masked_attention).
Numpy; no mhalib."""

import math

import numpy as np

from entry import Entry

# ============================================================================ causal_mask


def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_offset_sign_flipped(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_shape_swapped(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    rows = np.arange(n_k)[:, None]
    cols = np.arange(n_q)[None, :]
    return cols <= rows + n_k - n_q


def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def causal_nested_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = n_k - n_q
    return np.array([[j - offset <= i for j in range(n_k)] for i in range(n_q)],
                    dtype=bool).reshape(n_q, n_k)


# ============================================================================ padding_mask


def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_flat_shape(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_missing_new_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths
    return keep.reshape(len(lengths), 1, 1, n)


def padding_left_aligned(lengths, n):
    lengths = np.asarray(lengths)
    pos = np.arange(n)
    keep = pos[None, :] >= (n - lengths)[:, None]
    return keep[:, None, None, :]


def padding_true_is_pad(lengths, n):
    L = np.asarray(lengths).reshape(-1, 1, 1, 1)
    return np.arange(n).reshape(1, 1, 1, n) >= L


def padding_int_mask(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n), dtype=int)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = 1
    return mask


def padding_bool_loop(lengths, n):
    lengths = [int(v) for v in np.asarray(lengths)]
    mask = np.zeros((len(lengths), 1, 1, n), dtype=np.bool_)
    for b, length in enumerate(lengths):
        for j in range(length):
            mask[b, 0, 0, j] = True
    return mask


def padding_expand_dims(lengths, n):
    return np.arange(n) < np.expand_dims(np.asarray(lengths), (1, 2, 3))


# ============================================================================ masked_attention


def masked_big_negative(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    d = q.shape[-1]
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(d)
    s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_nan_rows(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, v), p


def masked_after_softmax(q, k, v, mask):
    scale = 1 / math.sqrt(q.shape[-1])
    logits = (q @ np.swapaxes(k, -1, -2)) * scale
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def masked_multiply_scores(q, k, v, mask):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(d_k)
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_scale_by_nk(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-2])
    scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    ex = np.exp(scores - top)
    z = ex.sum(axis=-1, keepdims=True)
    z[z == 0] = 1.0
    weights = ex / z
    return weights @ v, weights


def masked_scipy_logsumexp(q, k, v, mask):
    from scipy.special import logsumexp

    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    lse = logsumexp(s, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        w = np.exp(s - lse)
    w = np.where(np.isfinite(lse), w, 0.0)
    return np.matmul(w, v), w


def masked_torch_nan_to_num(q, k, v, mask):
    import torch

    dt = np.result_type(q, k, v)
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    tm = torch.from_numpy(np.asarray(mask, dtype=bool))
    scores = tq @ tk.transpose(-2, -1) / math.sqrt(tq.shape[-1])
    scores = scores.masked_fill(~tm, float("-inf"))
    w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return (w @ tv).numpy().astype(dt), w.numpy().astype(dt)


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "np.tril without an offset aligns the mask top-left, so when n_q != n_k query i is "
          "not placed at position i + n_k - n_q",
          causal_top_left),
    Entry("causal_mask", "wrong", "diagonal_excluded",
          "the mask keeps the diagonal out: `<` where `<=` belongs, so a query cannot attend "
          "its own position",
          causal_strict_less),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "the tril offset is n_q - n_k instead of n_k - n_q, so with a cache (n_k > n_q) the "
          "queries lose the keys they should see",
          causal_offset_sign_flipped),
    Entry("causal_mask", "wrong", "float_not_bool",
          "np.tril(np.ones(...)) returns a float array of 0.0/1.0, not the boolean mask the "
          "contract fixes",
          causal_float_mask),
    Entry("causal_mask", "wrong", "shape_n_k_by_n_q",
          "builds the mask with the keys on the rows, shape (n_k, n_q) instead of "
          "(n_q, n_k)",
          causal_shape_swapped),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "uses np.triu, which keeps the entries on and above the offset diagonal, so queries "
          "attend the future instead of the past",
          causal_triu),
    Entry("causal_mask", "right", "np_tri_bool", None, causal_np_tri),
    Entry("causal_mask", "right", "nested_comprehension", None, causal_nested_lists),

    Entry("padding_mask", "wrong", "less_or_equal",
          "`<=` instead of `<`: position lengths[b] (the first padding token) is kept",
          padding_le),
    Entry("padding_mask", "wrong", "shape_b_n",
          "returns the (B, n) mask without the two singleton axes, so it is not (B, 1, 1, n)",
          padding_flat_shape),
    Entry("padding_mask", "wrong", "no_axis_for_broadcast",
          "compares np.arange(n) with lengths directly, without lengths[:, None], so the (n,) "
          "and (B,) arrays do not broadcast (it raises)",
          padding_missing_new_axis),
    Entry("padding_mask", "wrong", "left_padding",
          "assumes the padding sits at the start of the sequence: keeps the last lengths[b] "
          "positions instead of the first",
          padding_left_aligned),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "marks the padding positions True (j >= lengths[b]), the opposite of the course's "
          "True = may attend convention",
          padding_true_is_pad),
    Entry("padding_mask", "wrong", "int_mask",
          "fills an int array with 0/1 instead of returning a boolean mask",
          padding_int_mask),
    Entry("padding_mask", "right", "bool_loops", None, padding_bool_loop),
    Entry("padding_mask", "right", "expand_dims_tuple", None, padding_expand_dims),

    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "fills masked scores with -1e9 instead of -inf, so a row with no allowed key gets "
          "uniform weights instead of zeros",
          masked_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "`np.where(mask, -inf, scores)` blanks the allowed keys and keeps the masked ones "
          "(True means may attend)",
          masked_inverted),
    Entry("masked_attention", "wrong", "nan_on_empty_rows",
          "no guard for rows with no allowed key: their max is -inf, -inf - (-inf) is NaN, so "
          "those rows come out NaN instead of zeros",
          masked_nan_rows),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "zeroes the masked weights after the softmax without renormalising, so the rows no "
          "longer sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "multiplies the scores by the mask, which sets masked scores to 0 (still a real "
          "weight) instead of -inf",
          masked_multiply_scores),
    Entry("masked_attention", "wrong", "scale_by_n_k",
          "scales the scores by 1/sqrt(k.shape[-2]) (the number of keys) instead of "
          "1/sqrt(d_k)",
          masked_scale_by_nk),
    Entry("masked_attention", "right", "scipy_logsumexp", None, masked_scipy_logsumexp),
    Entry("masked_attention", "right", "torch_softmax_nan_to_num", None, masked_torch_nan_to_num),
]
