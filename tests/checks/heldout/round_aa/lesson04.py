"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ causal_mask
def causal_strict_less(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return j < i


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_tril(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_true_means_masked(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_axes_swapped(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    queries = np.arange(n_q)[None, :] + n_k - n_q
    keys = np.arange(n_k)[:, None]
    return keys <= queries


def causal_python_loops(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    shift = cols - n_q
    return np.array([[j <= i + shift for j in range(cols)] for i in range(n_q)],
                    dtype=bool).reshape(n_q, cols)


def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ============================================================================ padding_mask
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_flat_shape(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_keys_on_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_true_means_pad(lengths, n):
    lens = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lens[:, None]
    return pad[:, None, None, :]


def padding_int_values(lengths, n):
    lens = np.asarray(lengths).reshape(-1, 1)
    m = (np.arange(n).reshape(1, -1) < lens).astype(int)
    return m.reshape(len(lens), 1, 1, n)


def padding_lengths_as_row(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[None, :]
    return keep.reshape(-1, 1, 1, n)


def padding_loop(lengths, n):
    lens = [int(v) for v in np.asarray(lengths)]
    mask = np.zeros((len(lens), 1, 1, n), dtype=bool)
    for b, length in enumerate(lens):
        mask[b, 0, 0, :length] = True
    return mask


def padding_tri_lookup(lengths, n):
    table = np.tri(n + 1, n, k=-1, dtype=bool)  # row L: True where j < L
    rows = table[np.asarray(lengths)]
    return rows[:, None, None, :]


# ============================================================================ masked_attention
def masked_fill_minus_1e9(q, k, v, mask):
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = q @ np.swapaxes(k, -1, -2) * scale
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_nan_rows(q, k, v, mask):
    d = q.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    s = np.where(mask, s, -np.inf)
    s = s - np.max(s, axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / np.sum(e, axis=-1, keepdims=True)
    return w @ v, w


def masked_multiply_after_softmax(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def masked_inverted(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    top = np.max(s, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_scores_times_mask(q, k, v, mask):
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_stale_weights(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    masked = np.where(mask, scores, -np.inf)
    peak = masked.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    ex = np.exp(masked - peak)
    total = ex.sum(axis=-1, keepdims=True)
    probs = np.divide(ex, total, out=np.zeros_like(ex), where=total > 0)
    return probs @ v, weights


def masked_row_loop(q, k, v, mask):
    dtype = np.result_type(q, k, v)
    scores_shape = q.shape[:-1] + (k.shape[-2],)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                np.shape(mask)[:-2] if np.ndim(mask) > 2 else ())
    qb = np.broadcast_to(q, batch + q.shape[-2:])
    kb = np.broadcast_to(k, batch + k.shape[-2:])
    vb = np.broadcast_to(v, batch + v.shape[-2:])
    mb = np.broadcast_to(mask, batch + scores_shape[-2:])
    out = np.zeros(batch + (q.shape[-2], v.shape[-1]), dtype=np.float64)
    weights = np.zeros(batch + scores_shape[-2:], dtype=np.float64)
    scale = 1.0 / math.sqrt(q.shape[-1])
    for idx in np.ndindex(*batch):
        for i in range(q.shape[-2]):
            allowed = np.flatnonzero(mb[idx + (i,)])
            if allowed.size == 0:
                continue
            s = (kb[idx][allowed] @ qb[idx + (i,)].astype(np.float64)) * scale
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx + (i,)][allowed] = p
            out[idx + (i,)] = p @ vb[idx][allowed]
    return out.astype(dtype), weights.astype(dtype)


def masked_logsumexp(q, k, v, mask):
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    has_key = np.isfinite(lse)
    w = np.where(has_key, np.exp(s - np.where(has_key, lse, 0.0)), 0.0)
    return w @ v, w


ENTRIES = [
    Entry("causal_mask", "wrong", "strict_less_than",
          "the mask keeps the diagonal out: `<` where `<=` belongs, so a query may not attend "
          "to its own position", causal_strict_less),
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril with no offset, aligning the mask top-left: wrong whenever n_q != n_k "
          "(the queries are the last n_q positions)", causal_top_left),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes k=n_q - n_k to np.tril instead of n_k - n_q: the offset has the wrong sign",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_not_bool",
          "returns np.tril(np.ones(...)) as floats (1.0/0.0) instead of a boolean mask",
          causal_float_tril),
    Entry("causal_mask", "wrong", "true_means_masked",
          "returns True for the future keys (the 'True = blocked' convention of "
          "nn.MultiheadAttention's attn_mask) instead of True = may attend",
          causal_true_means_masked),
    Entry("causal_mask", "wrong", "rows_and_columns_swapped",
          "puts the key index on the rows and the query index on the columns, so the result is "
          "(n_k, n_q) and transposed", causal_axes_swapped),
    Entry("causal_mask", "right", "python_loops", None, causal_python_loops),
    Entry("causal_mask", "right", "np_tri_offset", None, causal_np_tri),

    Entry("padding_mask", "wrong", "less_equal",
          "uses `<=` where `<` belongs, so the first padding position (j == lengths[b]) is "
          "also allowed", padding_less_equal),
    Entry("padding_mask", "wrong", "no_singleton_axes",
          "returns shape (B, n), without the two singleton axes of (B, 1, 1, n) that broadcast "
          "over heads and queries", padding_flat_shape),
    Entry("padding_mask", "wrong", "key_axis_third",
          "puts the key positions on axis 2, shape (B, 1, n, 1): it would mask queries instead "
          "of keys", padding_keys_on_query_axis),
    Entry("padding_mask", "wrong", "true_means_padding",
          "marks the padding positions True (True = masked) instead of True = may attend",
          padding_true_means_pad),
    Entry("padding_mask", "wrong", "int_not_bool",
          "returns 0/1 integers (.astype(int)) instead of booleans", padding_int_values),
    Entry("padding_mask", "wrong", "lengths_as_row",
          "lengths[None, :] is a row, not a column: it broadcasts against the positions along "
          "the wrong axis (raises unless B == n or B == 1)", padding_lengths_as_row),
    Entry("padding_mask", "right", "python_loop", None, padding_loop),
    Entry("padding_mask", "right", "np_tri_row_lookup", None, padding_tri_lookup),

    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform average over all keys instead of zeros", masked_fill_minus_1e9),
    Entry("masked_attention", "wrong", "nan_on_empty_rows",
          "fills -inf but never guards fully masked rows: their max is -inf and they become "
          "0/0 = NaN instead of zeros", masked_nan_rows),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "applies the mask by multiplying the weights after the softmax, so the remaining "
          "weights no longer sum to 1 (no renormalisation)", masked_multiply_after_softmax),
    Entry("masked_attention", "wrong", "mask_inverted",
          "fills -inf where mask is True: the convention is True = may attend",
          masked_inverted),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "multiplies the scores by the mask, which sets masked scores to 0 (they still get "
          "weight) instead of -inf", masked_scores_times_mask),
    Entry("masked_attention", "wrong", "returns_unmasked_weights",
          "returns the weights of the softmax computed before the mask was applied, next to the "
          "masked output (a stale variable)", masked_stale_weights),
    Entry("masked_attention", "right", "per_row_loop", None, masked_row_loop),
    Entry("masked_attention", "right", "scipy_logsumexp", None, masked_logsumexp),
]
