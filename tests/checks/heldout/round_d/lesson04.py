"""Round d, lesson 04 (numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- causal_mask
def cm_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def cm_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q - 1)


def cm_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def cm_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def cm_true_is_masked(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def cm_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_k, n_q), dtype=bool), k=n_k - n_q)


def cm_outer(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.greater_equal.outer(np.arange(n_k - n_q, n_k), np.arange(n_k))


def cm_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    m = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        m[i, : max(0, i + n_k - n_q + 1)] = True
    return m


# ----------------------------------------------------------------------------- padding_mask
def pm_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pm_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def pm_inverted(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= lengths[:, None])[:, None, None, :]


def pm_no_new_axis(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n) < lengths)[:, None, None, :]


def pm_left_padding(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= n - lengths[:, None])[:, None, None, :]


def pm_loops(lengths, n):
    lengths = [int(v) for v in np.asarray(lengths)]
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        out[b, 0, 0, :length] = True
    return out


def pm_reshape(lengths, n):
    return np.arange(n) < np.asarray(lengths).reshape(-1, 1, 1, 1)


# ----------------------------------------------------------------------------- masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def ma_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_big_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def ma_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_zero_fill(q, k, v, mask):
    s = np.where(mask, _scores(q, k), 0.0)
    w = _safe_softmax(s)
    return w @ v, w


def ma_renormalise_after(q, k, v, mask):
    s = np.broadcast_to(_scores(q, k), np.broadcast_shapes(_scores(q, k).shape, np.shape(mask)))
    mask = np.broadcast_to(mask, s.shape)
    s64 = s.astype(np.float64)
    top = np.where(mask, s64, -np.inf).max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask, np.exp(np.minimum(s64 - top, 0.0)), 0.0)
    tot = e.sum(axis=-1, keepdims=True)
    w = e / np.where(tot > 0, tot, 1.0)
    dt = np.result_type(q, k, v)
    return (w @ v.astype(np.float64)).astype(dt), w.astype(dt)


def ma_row_loop(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2] if np.ndim(mask) > 2 else ())
    n_q, n_k = q.shape[-2], k.shape[-2]
    m = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.zeros(lead + (n_q, v.shape[-1]), dtype=q.dtype)
    w = np.zeros(lead + (n_q, n_k), dtype=q.dtype)
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keep = np.flatnonzero(m[idx + (i,)])
            if keep.size == 0:
                continue
            s = kb[idx][keep].astype(np.float64) @ qb[idx][i].astype(np.float64)
            s = s / math.sqrt(q.shape[-1])
            e = np.exp(s - s.max())
            p = e / e.sum()
            w[idx + (i,)][keep] = p
            out[idx + (i,)] = p @ vb[idx][keep].astype(np.float64)
    return out, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "Aligns the mask top-left (j <= i) instead of bottom-right (j <= i + n_k - n_q).",
          cm_top_left),
    Entry("causal_mask", "wrong", "excludes_own_position",
          "Uses a strict inequality, so a query may not attend to its own position.",
          cm_strict),
    Entry("causal_mask", "wrong", "float_mask",
          "Returns a float array of ones and zeros instead of a boolean mask.",
          cm_float),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "Uses the diagonal offset n_q - n_k instead of n_k - n_q.",
          cm_offset_sign),
    Entry("causal_mask", "wrong", "true_means_masked",
          "Marks the forbidden (future) positions True, the opposite of the course's True = may attend.",
          cm_true_is_masked),
    Entry("causal_mask", "wrong", "shape_n_k_by_n_q",
          "Builds the mask with shape (n_k, n_q) instead of (n_q, n_k).",
          cm_transposed),
    Entry("causal_mask", "right", "greater_equal_outer", None, cm_outer),
    Entry("causal_mask", "right", "row_loop", None, cm_loops),

    Entry("padding_mask", "wrong", "less_or_equal",
          "Uses j <= lengths[b] instead of j < lengths[b], letting one padding position through.",
          pm_le),
    Entry("padding_mask", "wrong", "shape_B_n",
          "Returns shape (B, n) without the two singleton axes for heads and queries.",
          pm_2d),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "Marks the padding positions True instead of the real tokens.",
          pm_inverted),
    Entry("padding_mask", "wrong", "compares_without_new_axis",
          "Compares arange(n) with lengths without adding an axis to lengths, so positions are compared element-wise instead of per sequence.",
          pm_no_new_axis),
    Entry("padding_mask", "wrong", "left_padding",
          "Assumes left padding and keeps the last lengths[b] positions instead of the first.",
          pm_left_padding),
    Entry("padding_mask", "right", "loop_fill", None, pm_loops),
    Entry("padding_mask", "right", "reshape_broadcast", None, pm_reshape),

    Entry("masked_attention", "wrong", "nan_on_fully_masked_rows",
          "Fills masked scores with -inf but does not guard rows with no allowed key, which become NaN.",
          ma_nan_rows),
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "Fills masked scores with -1e9 instead of -inf, so fully masked rows get uniform weights instead of zeros.",
          ma_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "Masks the positions where the mask is True, reading True as 'blocked'.",
          ma_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "Zeroes the masked weights after the softmax without renormalising the rows.",
          ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "fill_with_zero",
          "Sets masked scores to 0 instead of -inf, so masked keys still get weight.",
          ma_zero_fill),
    Entry("masked_attention", "right", "masked_exp_renormalise", None, ma_renormalise_after),
    Entry("masked_attention", "right", "per_row_selected_keys", None, ma_row_loop),
]
