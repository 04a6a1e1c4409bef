"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_float_dtype(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_offset_clipped(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = max(n_k - n_q, 0)  # "an offset cannot be negative"
    rows = np.arange(n_q).reshape(-1, 1)
    cols = np.arange(n_k).reshape(1, -1)
    return cols <= rows + offset


def causal_upside_down(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_no_new_axis(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.arange(n_k) <= np.arange(n_q) + (n_k - n_q)


def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def causal_python_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    rows = [[j - shift <= i for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def padding_three_dims(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :]


def padding_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths[:, None]
    return keep[:, None, :, None]


def padding_float_zeros(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n))
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = 1
    return mask


def padding_left_aligned(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, ..., n - int(length):] = True
    return mask


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    return (np.arange(width) < lengths[:, None]).reshape(len(lengths), 1, 1, width)


def padding_four_d_broadcast(lengths, n):
    lens = np.asarray(lengths).reshape(-1, 1, 1, 1)
    return np.arange(n).reshape(1, 1, 1, n) < lens


def padding_bool_loop(lengths, n):
    out = np.zeros((len(lengths), 1, 1, n), dtype=np.bool_)
    for b in range(len(lengths)):
        for j in range(n):
            out[b, 0, 0, j] = j < int(lengths[b])
    return out


# ============================================================================ masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


def masked_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_large_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    s = _scores(q, k)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def masked_scale_by_n_k(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_multiplicative(q, k, v, mask):
    s = _scores(q, k) * mask  # masked scores set to 0
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_out_from_unmasked(q, k, v, mask):
    s = _scores(q, k)
    full = np.exp(s - s.max(axis=-1, keepdims=True))
    full = full / full.sum(axis=-1, keepdims=True)
    ms = np.where(mask, s, -np.inf)
    top = np.max(ms, axis=-1, keepdims=True)
    top = np.where(np.isinf(top), 0.0, top)
    e = np.exp(ms - top)
    tot = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    out = full @ v
    return out, weights


def masked_numpy_ma(q, k, v, mask):
    s = _scores(q, k)
    hidden = ~np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)
    sm = np.ma.masked_array(s, mask=hidden)
    top = sm.max(axis=-1, keepdims=True)  # masked itself for a row with no allowed key
    e = np.ma.exp(sm - top)
    w = np.ma.filled(e / e.sum(axis=-1, keepdims=True), 0.0)
    return w @ v, w


def masked_row_loop(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2] if np.ndim(mask) > 2 else ())
    qb = np.broadcast_to(q, lead + (n_q, d)).reshape(-1, n_q, d)
    kb = np.broadcast_to(k, lead + (n_k, d)).reshape(-1, n_k, d)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, d_v))
    w = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            allowed = np.flatnonzero(mb[b, i])
            if allowed.size == 0:
                continue
            sc = kb[b, allowed] @ qb[b, i] / math.sqrt(d)
            p = np.exp(sc - sc.max())
            p /= p.sum()
            w[b, i, allowed] = p
            out[b, i] = p @ vb[b, allowed]
    return out.reshape(lead + (n_q, d_v)), w.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "np.tril without an offset aligns the mask top-left (key j <= i), which is only "
          "right when n_q == n_k; the contract aligns it bottom-right (j <= i + n_k - n_q).",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict_inequality",
          "It uses j < i + n_k - n_q, so each query may not attend its own position (the "
          "diagonal is masked).",
          causal_strict),
    Entry("causal_mask", "wrong", "float_not_bool",
          "np.tril(np.ones(...)) returns a float array of 1.0/0.0, not the boolean mask the "
          "contract requires.",
          causal_float_dtype),
    Entry("causal_mask", "wrong", "offset_clipped_at_zero",
          "The offset n_k - n_q is clipped at 0, so when n_q > n_k the mask is aligned "
          "top-left instead of bottom-right (the first n_q - n_k queries should see no key).",
          causal_offset_clipped),
    Entry("causal_mask", "wrong", "true_means_masked",
          "It returns the strictly-future positions (np.triu above the diagonal), i.e. True "
          "where attention is forbidden, the opposite of the True = may attend convention.",
          causal_upside_down),
    Entry("causal_mask", "wrong", "aranges_not_broadcast",
          "The two aranges are compared without adding a new axis, so instead of an "
          "(n_q, n_k) grid it compares them elementwise: a 1-D result when n_q == n_k and a "
          "broadcasting error otherwise (unless one of them is 1).",
          causal_no_new_axis),
    Entry("causal_mask", "right", "np_tri_bool", None, causal_np_tri),
    Entry("causal_mask", "right", "python_lists", None, causal_python_lists),

    Entry("padding_mask", "wrong", "less_or_equal",
          "It uses j <= lengths[b], so one padding position past each sequence's end is "
          "allowed.",
          padding_le),
    Entry("padding_mask", "wrong", "missing_singleton_axis",
          "Only one singleton axis is inserted, returning (B, 1, n) instead of (B, 1, 1, n), "
          "which would broadcast against the wrong axes of the scores.",
          padding_three_dims),
    Entry("padding_mask", "wrong", "masks_query_axis",
          "The mask is shaped (B, 1, n, 1), so it would mask query rows instead of key "
          "columns.",
          padding_query_axis),
    Entry("padding_mask", "wrong", "float_mask",
          "The mask is built with np.zeros (float64) and filled with 1, so it returns a float "
          "array instead of a boolean one.",
          padding_float_zeros),
    Entry("padding_mask", "wrong", "left_padding_assumed",
          "It marks the last lengths[b] positions as valid (as if sequences were left-padded) "
          "instead of the first lengths[b] positions.",
          padding_left_aligned),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "The key axis is sized by lengths.max() instead of n, so the mask is too narrow "
          "whenever no sequence fills all n positions.",
          padding_width_from_lengths),
    Entry("padding_mask", "right", "four_d_broadcast", None, padding_four_d_broadcast),
    Entry("padding_mask", "right", "bool_double_loop", None, padding_bool_loop),

    Entry("masked_attention", "wrong", "nan_on_empty_rows",
          "Fully masked rows are not guarded: their max is -inf, -inf - (-inf) is NaN, so those "
          "rows come out NaN instead of zeros.",
          masked_nan_rows),
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "Masked scores are set to -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over all keys instead of zeros.",
          masked_large_negative),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "The mask multiplies the weights after the softmax without renormalising, so the "
          "remaining weights of a row no longer sum to 1.",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "scale_by_n_k",
          "The scores are divided by sqrt(k.shape[-2]) (the number of keys) instead of "
          "sqrt(d_k).",
          masked_scale_by_n_k),
    Entry("masked_attention", "wrong", "multiplicative_mask",
          "It multiplies the scores by the mask, so masked keys get score 0 (and a positive "
          "weight) instead of being excluded with -inf.",
          masked_multiplicative),
    Entry("masked_attention", "wrong", "out_from_unmasked_weights",
          "The returned weights are masked correctly, but out is computed from the unmasked "
          "softmax weights, so the output still mixes in masked values.",
          masked_out_from_unmasked),
    Entry("masked_attention", "right", "numpy_masked_array", None, masked_numpy_ma),
    Entry("masked_attention", "right", "per_row_allowed_keys", None, masked_row_loop),
]
