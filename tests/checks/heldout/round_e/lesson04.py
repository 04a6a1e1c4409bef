"""Lesson 04 (numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

from entry import Entry


# ------------------------------------------------------------------ causal_mask, wrong
def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return j < i


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_blocked_convention(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_float_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_swapped_shape(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_k, n_q), dtype=bool), k=n_k - n_q)


# ------------------------------------------------------------------ causal_mask, right
def causal_tri(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def causal_outer_loop(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        last = i + n_k - n_q  # absolute position of query i
        mask[i, : max(last + 1, 0)] = True
    return mask


# ------------------------------------------------------------------ padding_mask, wrong
def pad_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pad_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def pad_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :, None]


def pad_inverted(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= lengths[:, None])[:, None, None, :]


def pad_int_dtype(lengths, n):
    lengths = np.asarray(lengths)
    keep = (np.arange(n)[None, :] < lengths[:, None]).astype(np.int64)
    return keep[:, None, None, :]


def pad_loop_minus_one(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, : length - 1] = True  # "last valid index is length - 1"
    return mask


# ------------------------------------------------------------------ padding_mask, right
def pad_less_outer(lengths, n):
    lengths = np.asarray(lengths)
    return np.less.outer(np.arange(n), lengths).T.reshape(-1, 1, 1, n)


def pad_loop(lengths, n):
    lengths = [int(v) for v in lengths]
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        for j in range(n):
            mask[b, 0, 0, j] = j < length
    return mask


# ------------------------------------------------------------------ masked_attention helpers
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _safe_softmax(s):
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    t = e.sum(axis=-1, keepdims=True)
    return np.divide(e, t, out=np.zeros_like(e), where=t > 0)


# ------------------------------------------------------------------ masked_attention, wrong
def ma_big_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _safe_softmax(s)
    return w @ v, w


def ma_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_multiply_scores(q, k, v, mask):
    s = _scores(q, k) * mask
    w = _safe_softmax(s)
    return w @ v, w


def ma_transposed_mask(q, k, v, mask):
    s = np.where(np.swapaxes(mask, -1, -2), _scores(q, k), -np.inf)
    w = _safe_softmax(s)
    return w @ v, w


# ------------------------------------------------------------------ masked_attention, right
def ma_rows_loop(q, k, v, mask):
    s = _scores(q.astype(np.float64), k.astype(np.float64))
    m = np.broadcast_to(mask, s.shape)
    w = np.zeros_like(s)
    for idx in np.ndindex(*s.shape[:-1]):
        allowed = m[idx]
        if allowed.any():
            row = s[idx][allowed]
            e = np.exp(row - row.max())
            w[idx][allowed] = e / e.sum()
    return w @ v, w


def ma_masked_exp(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = s + np.zeros(np.broadcast_shapes(s.shape, np.shape(mask)))
    m = np.broadcast_to(mask, s.shape)
    top = np.max(np.where(m, s, -np.inf), axis=-1, keepdims=True)
    e = np.where(m, np.exp(np.where(m, s - np.where(np.isfinite(top), top, 0), 0.0)), 0.0)
    tot = e.sum(-1, keepdims=True)
    w = e / np.maximum(tot, np.finfo(float).tiny) * (tot > 0)
    return np.einsum("...qk,...kd->...qd", w, v), w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned", "Aligns the mask top-left (np.tril with "
          "k=0), so with n_q < n_k the queries cannot see the cached earlier keys.",
          causal_top_left),
    Entry("causal_mask", "wrong", "excludes_diagonal", "Uses j < i + n_k - n_q, so a query may "
          "not attend to its own position.", causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_flipped", "Uses the diagonal offset n_q - n_k "
          "instead of n_k - n_q.", causal_offset_sign),
    Entry("causal_mask", "wrong", "marks_blocked_positions", "Returns True for the future keys "
          "(the blocked positions) instead of the allowed ones.", causal_blocked_convention),
    Entry("causal_mask", "wrong", "float_not_bool", "Returns np.tril(np.ones(...)) as floats "
          "instead of a boolean mask.", causal_float_mask),
    Entry("causal_mask", "wrong", "shape_n_k_by_n_q", "Builds the array with shape (n_k, n_q) "
          "instead of (n_q, n_k).", causal_swapped_shape),
    Entry("causal_mask", "right", "np_tri_bool", None, causal_tri),
    Entry("causal_mask", "right", "row_loop", None, causal_outer_loop),

    Entry("padding_mask", "wrong", "less_or_equal", "Uses j <= lengths[b], letting each "
          "sequence attend one padding position.", pad_less_equal),
    Entry("padding_mask", "wrong", "missing_broadcast_axes", "Returns the (B, n) mask without "
          "inserting the two singleton axes for heads and queries.", pad_2d),
    Entry("padding_mask", "wrong", "key_axis_in_query_slot", "Inserts the singleton axes in the "
          "wrong places, giving (B, 1, n, 1) so the mask runs along queries instead of keys.",
          pad_query_axis),
    Entry("padding_mask", "wrong", "true_marks_padding", "Returns True at the padding positions "
          "(j >= length) instead of at the positions that may be attended.", pad_inverted),
    Entry("padding_mask", "wrong", "integer_mask", "Casts the mask to integers with "
          ".astype(int) instead of keeping it boolean.", pad_int_dtype),
    Entry("padding_mask", "wrong", "loop_slice_length_minus_one", "Fills mask[b, :length - 1], "
          "an off-by-one that drops the last valid key (and marks all but one key for "
          "length 0).", pad_loop_minus_one),
    Entry("padding_mask", "right", "less_outer", None, pad_less_outer),
    Entry("padding_mask", "right", "double_loop", None, pad_loop),

    Entry("masked_attention", "wrong", "fill_minus_1e9", "Fills masked scores with -1e9 instead "
          "of -inf, so a fully masked row gets uniform weights instead of zeros.",
          ma_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted", "Puts -inf where the mask is True, "
          "treating True as 'blocked' instead of 'may attend'.", ma_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax", "Multiplies the softmax weights by "
          "the mask afterwards without renormalising, so rows no longer sum to 1.",
          ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "nan_on_fully_masked_rows", "Does not guard the row "
          "maximum, so a fully masked row gives exp(-inf + inf) = NaN instead of zeros.",
          ma_nan_rows),
    Entry("masked_attention", "wrong", "multiplies_scores_by_mask", "Multiplies the scores by "
          "the mask (masked scores become 0, not -inf), so masked keys still get weight.",
          ma_multiply_scores),
    Entry("masked_attention", "wrong", "mask_transposed", "Applies the mask with its last two "
          "axes swapped (keys on rows, queries on columns).", ma_transposed_mask),
    Entry("masked_attention", "right", "row_loop_allowed_keys", None, ma_rows_loop),
    Entry("masked_attention", "right", "einsum_masked_exp", None, ma_masked_exp),
]
