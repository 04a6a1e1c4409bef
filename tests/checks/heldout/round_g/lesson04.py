"""Lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- causal_mask
def cm_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def cm_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q - 1)


def cm_offset_flipped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j <= i + (n_q - n_k)


def cm_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def cm_flipped_comparison(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    qpos = np.arange(n_q)[:, None] + n_k - n_q
    kpos = np.arange(n_k)[None, :]
    return kpos >= qpos


def cm_transposed_grid(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[:, None] <= np.arange(n_q)[None, :] + (n_k - n_q)


def cm_loop(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    m = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        last = i + n_k - n_q
        for j in range(n_k):
            m[i, j] = j <= last
    return m


def cm_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ----------------------------------------------------------------------------- padding_mask
def pm_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pm_key_in_query_slot(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def pm_int(lengths, n):
    lengths = np.asarray(lengths)
    keep = (np.arange(n)[None, :] < lengths[:, None]).astype(np.int64)
    return keep.reshape(len(lengths), 1, 1, n)


def pm_inverted(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]  # True where padded
    return pad[:, None, None, :]


def pm_max_length(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def pm_loop_off_by_one(lengths, n):
    B = len(lengths)
    m = np.zeros((B, 1, 1, n), dtype=bool)
    for b in range(B):
        m[b, 0, 0, :lengths[b] - 1] = True
    return m


def pm_loop(lengths, n):
    B = len(lengths)
    m = np.zeros((B, 1, 1, n), dtype=bool)
    for b in range(B):
        for j in range(n):
            if j < lengths[b]:
                m[b, 0, 0, j] = True
    return m


def pm_less_outer(lengths, n):
    return np.less.outer(np.arange(n), np.asarray(lengths)).T.reshape(-1, 1, 1, n)


# ----------------------------------------------------------------------------- masked_attention
def _scores(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def _safe_softmax(s):
    top = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


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
    s = _scores(q, k)
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_zero_fill(q, k, v, mask):
    s = _scores(q, k)
    s = s * mask  # zero out the masked scores
    w = _safe_softmax(s)
    return w @ v, w


def ma_softmax_queries(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    top = s.max(-2, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(-2, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def ma_log_mask(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    with np.errstate(divide="ignore"):
        bias = np.log(np.asarray(mask, dtype=np.float64))  # 0 allowed, -inf masked
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1]) + bias
    s = np.broadcast_to(s, np.broadcast_shapes(s.shape, bias.shape))
    top = np.max(s, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.exp(s - top)
    z = e.sum(-1, keepdims=True)
    w = e / np.where(z == 0, 1.0, z)
    return w @ v, w


def ma_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], np.shape(mask)[:-2])
    full_mask = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.zeros(lead + (n_q, v.shape[-1]))
    w = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(full_mask[idx + (i,)])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx][i] / np.sqrt(q.shape[-1])
            p = np.exp(s - s.max())
            p /= p.sum()
            w[idx + (i,)][allowed] = p
            out[idx + (i,)] = p @ vb[idx][allowed]
    return out, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top-left", "Aligns the triangle top-left (j <= i) instead of bottom-right, which is wrong whenever n_q != n_k.", cm_top_left),
    Entry("causal_mask", "wrong", "strict-diagonal", "Uses a strict inequality, so each query may not attend to its own position.", cm_strict),
    Entry("causal_mask", "wrong", "offset-sign", "Uses the offset n_q - n_k instead of n_k - n_q.", cm_offset_flipped),
    Entry("causal_mask", "wrong", "float-mask", "Returns a float array of ones and zeros instead of a boolean mask.", cm_float),
    Entry("causal_mask", "wrong", "flipped-comparison", "Compares key >= query position, allowing the future instead of the past.", cm_flipped_comparison),
    Entry("causal_mask", "wrong", "transposed-grid", "Puts the keys on the rows and the queries on the columns, returning the transposed (n_k, n_q) grid.", cm_transposed_grid),
    Entry("causal_mask", "right", "double-loop", None, cm_loop),
    Entry("causal_mask", "right", "np-tri", None, cm_np_tri),
    Entry("padding_mask", "wrong", "less-or-equal", "Uses j <= length instead of j < length, letting one padding position through.", pm_le),
    Entry("padding_mask", "wrong", "key-in-query-slot", "Inserts the singleton axes in the wrong places, returning (B, 1, n, 1) instead of (B, 1, 1, n).", pm_key_in_query_slot),
    Entry("padding_mask", "wrong", "int-mask", "Returns an integer 0/1 array instead of a boolean mask.", pm_int),
    Entry("padding_mask", "wrong", "inverted", "Marks the padded positions True instead of the real tokens.", pm_inverted),
    Entry("padding_mask", "wrong", "max-length-width", "Builds the mask from lengths.max() instead of n, so it is too narrow when no sequence fills n.", pm_max_length),
    Entry("padding_mask", "wrong", "loop-minus-one", "In the loop fills [:lengths[b] - 1], dropping the last real token (and filling almost everything for length 0).", pm_loop_off_by_one),
    Entry("padding_mask", "right", "loop", None, pm_loop),
    Entry("padding_mask", "right", "less-outer", None, pm_less_outer),
    Entry("masked_attention", "wrong", "minus-1e9", "Fills masked scores with -1e9 instead of -inf, so a fully masked row becomes a uniform average instead of zeros.", ma_big_negative),
    Entry("masked_attention", "wrong", "inverted-mask", "Fills -inf where the mask is True, treating True as 'blocked'.", ma_inverted),
    Entry("masked_attention", "wrong", "mask-after-softmax", "Multiplies the weights by the mask after the softmax without renormalising the rows.", ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "nan-empty-rows", "Subtracts the row maximum without guarding rows that are all -inf, so fully masked rows give NaN.", ma_nan_rows),
    Entry("masked_attention", "wrong", "zero-fill", "Sets masked scores to 0 (multiplies by the mask) instead of -inf, so masked keys still get weight.", ma_zero_fill),
    Entry("masked_attention", "wrong", "softmax-over-queries", "Normalises the masked scores over the query axis instead of the key axis.", ma_softmax_queries),
    Entry("masked_attention", "right", "log-mask-bias", None, ma_log_mask),
    Entry("masked_attention", "right", "row-loop", None, ma_row_loop),
]
