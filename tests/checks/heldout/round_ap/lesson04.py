"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention.
Each function is one learner's own answer; wrong ones carry one slip."""

import math

import numpy as np

from entry import Entry


# ============================================================== causal_mask: wrong
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_ones(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    query_pos = np.arange(n_q) + (n_k - n_q)
    key_pos = np.arange(n_k)
    return key_pos[:, None] <= query_pos[None, :]


def causal_ignores_n_k(n_q, n_k=None):
    n_k = n_q if n_k is None else n_q
    rows = np.arange(n_q).reshape(-1, 1) + n_k - n_q
    cols = np.arange(n_k).reshape(1, -1)
    return cols <= rows


# ============================================================== causal_mask: right
def causal_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    mask = np.zeros((n_q, n_k), dtype=bool)
    shift = n_k - n_q
    for i in range(n_q):
        for j in range(n_k):
            mask[i, j] = j <= i + shift
    return mask


def causal_not_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
    return ~future


# ============================================================== padding_mask: wrong
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_one_singleton(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths[:, None]
    return keep[:, None, :]


def padding_true_is_pad(lengths, n):
    lens = np.asarray(lengths).reshape(-1, 1)
    is_pad = np.arange(n).reshape(1, -1) >= lens
    return is_pad.reshape(len(lens), 1, 1, n)


def padding_reshape_not_transpose(lengths, n):
    lengths = np.asarray(lengths)
    table = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return table.reshape(len(lengths), 1, 1, n)


def padding_ints(lengths, n):
    lengths = np.asarray(lengths)
    out = np.zeros((len(lengths), 1, 1, n), dtype=int)
    for b, length in enumerate(lengths):
        out[b, 0, 0, :length] = 1
    return out


def padding_longest_length(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


# ============================================================== padding_mask: right
def padding_loop(lengths, n):
    lengths = [int(v) for v in np.asarray(lengths)]
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = True
    return mask


def padding_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n))[:, np.newaxis, np.newaxis, :]


# ============================================================== masked_attention: wrong
def masked_fill_minus_1e9(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_true_means_blocked(q, k, v, mask):
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_scores_times_mask(q, k, v, mask):
    d_k = q.shape[-1]
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_k)
    s = s * mask  # masked scores become 0
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_scale_by_n_k(q, k, v, mask):
    n_k = k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(n_k)
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    w = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return w @ v, w


def masked_sum_no_keepdims(q, k, v, mask):
    s = (q @ np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
    s = np.where(mask, s, -np.inf)
    row_max = np.max(s, axis=-1, keepdims=True)
    row_max = np.where(np.isinf(row_max), 0.0, row_max)
    e = np.exp(s - row_max)
    tot = e.sum(axis=-1)
    w = np.where(e > 0, e / np.where(tot > 0, tot, 1.0), 0.0)
    return w @ v, w


def masked_nan_cleaned_in_out_only(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        scores = scores - scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights = weights / weights.sum(axis=-1, keepdims=True)
    out = np.nan_to_num(weights @ v)
    return out, weights


# ============================================================== masked_attention: right
def masked_row_loops(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    qb = np.broadcast_to(q, lead + (n_q, q.shape[-1]))
    kb = np.broadcast_to(k, lead + (n_k, k.shape[-1]))
    vb = np.broadcast_to(v, lead + (n_k, d_v))
    mb = np.broadcast_to(mask, lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    wts = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = [j for j in range(n_k) if mb[idx + (i, j)]]
            if not allowed:
                continue
            s = {j: float(qb[idx][i] @ kb[idx][j]) / math.sqrt(q.shape[-1]) for j in allowed}
            top = max(s.values())
            e = {j: math.exp(val - top) for j, val in s.items()}
            z = sum(e.values())
            for j in allowed:
                wts[idx + (i, j)] = e[j] / z
            out[idx + (i,)] = wts[idx + (i,)] @ vb[idx]
    return out, wts


def masked_exp_times_mask(q, k, v, mask):
    s = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    # shift by the largest *allowed* score (0 for rows with none)
    top = np.max(np.where(mask, s, -np.inf), axis=-1, keepdims=True)
    top = np.nan_to_num(top, neginf=0.0)
    e = np.where(mask, np.exp(np.minimum(s - top, 0.0)), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.maximum(z, np.finfo(e.dtype).tiny)
    return np.einsum("...ij,...jd->...id", w, v), w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril with no offset, aligning the mask top-left, so when n_k != n_q query i "
          "does not sit at position i + n_k - n_q",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict_less_than",
          "the comparison `<` keeps the diagonal out: `<=` belongs there, a query may attend "
          "its own position",
          causal_strict_less),
    Entry("causal_mask", "wrong", "tril_offset_sign_flipped",
          "passes k = n_q - n_k to np.tril instead of n_k - n_q, shifting the diagonal the "
          "wrong way when n_q != n_k",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_ones_not_bool",
          "builds the mask from np.ones without dtype=bool, so it returns a float 0/1 array "
          "instead of booleans",
          causal_float_ones),
    Entry("causal_mask", "wrong", "keys_on_rows",
          "puts the key positions on the rows and the queries on the columns, returning the "
          "(n_k, n_q) transpose",
          causal_transposed),
    Entry("causal_mask", "wrong", "n_k_overwritten_by_n_q",
          "the default line `n_k = n_q if n_k is None else n_q` reuses n_q in both branches, so "
          "a given n_k is ignored",
          causal_ignores_n_k),
    Entry("causal_mask", "right", "double_loop", None, causal_loops),
    Entry("causal_mask", "right", "not_triu_future", None, causal_not_triu),

    Entry("padding_mask", "wrong", "less_equal",
          "compares j <= lengths[b], so the first padding position is also allowed "
          "(`<` belongs there)",
          padding_less_equal),
    Entry("padding_mask", "wrong", "one_singleton_axis",
          "inserts only one singleton axis, returning (B, 1, n) instead of (B, 1, 1, n)",
          padding_one_singleton),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "uses the key_padding_mask convention True = padding (j >= lengths[b]), the inverse "
          "of the course's True = may attend",
          padding_true_is_pad),
    Entry("padding_mask", "wrong", "reshape_instead_of_transpose",
          "builds the table as (n, B) and reshapes it to (B, 1, 1, n) instead of transposing, "
          "which scrambles positions and sequences",
          padding_reshape_not_transpose),
    Entry("padding_mask", "wrong", "int_zeros_ones",
          "fills an int array with 1/0 instead of returning booleans", padding_ints),
    Entry("padding_mask", "wrong", "width_from_longest_length",
          "uses the longest length instead of n for the key axis, so the mask is too short "
          "when no sequence fills all n positions",
          padding_longest_length),
    Entry("padding_mask", "right", "loop_fill", None, padding_loop),
    Entry("padding_mask", "right", "greater_outer", None, padding_greater_outer),

    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights (the mean of the values) instead of zeros",
          masked_fill_minus_1e9),
    Entry("masked_attention", "wrong", "true_means_blocked",
          "treats True as 'blocked' (fills -inf where the mask is True), the inverse of the "
          "convention True = may attend",
          masked_true_means_blocked),
    Entry("masked_attention", "wrong", "scores_multiplied_by_mask",
          "multiplies the scores by the mask instead of filling -inf, so a masked key gets "
          "score 0 and still receives weight (and a fully masked row gets uniform weights)",
          masked_scores_times_mask),
    Entry("masked_attention", "wrong", "scale_by_sqrt_n_k",
          "scales the scores by 1/sqrt(N_k), the number of keys, instead of 1/sqrt(d_k)",
          masked_scale_by_n_k),
    Entry("masked_attention", "wrong", "denominator_without_keepdims",
          "sums the exponentials without keepdims, so the (..., N_q) totals broadcast along the "
          "key axis: a shape error, or wrong totals on square inputs",
          masked_sum_no_keepdims),
    Entry("masked_attention", "wrong", "nan_cleaned_only_in_out",
          "cleans the NaN of fully masked rows out of `out` with nan_to_num but returns the "
          "weights with those NaN rows",
          masked_nan_cleaned_in_out_only),
    Entry("masked_attention", "right", "python_row_loops", None, masked_row_loops),
    Entry("masked_attention", "right", "exp_where_mask_einsum", None, masked_exp_times_mask),
]
