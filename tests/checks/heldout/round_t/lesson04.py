"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention.
Each wrong answer carries exactly one slip."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
def causal_strict_less(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_tril_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_float_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    query_pos = np.arange(n_q)[None, :] + (n_k - n_q)
    key_pos = np.arange(n_k)[:, None]
    return key_pos <= query_pos


def causal_one_based_queries(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    queries = np.arange(1, n_q + 1)[:, None] + (n_k - n_q)
    keys = np.arange(n_k)[None, :]
    return keys <= queries


def causal_default_inverted(n_q, n_k=None):
    n_k = n_q if n_k is not None else n_k
    offset = n_k - n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=offset)


def causal_python_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_np_tri(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    return np.tri(n_q, cols, k=cols - n_q, dtype=bool)


# ============================================================================ padding_mask
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_no_singleton_axes(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_wrong_axes(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_float_loop(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.zeros((len(lengths), 1, 1, n))
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = 1
    return mask


def padding_uses_max_length(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(lengths.max())
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def padding_true_marks_pad(lengths, n):
    lengths = np.asarray(lengths)
    is_pad = np.arange(n)[None, :] >= lengths[:, None]
    return is_pad[:, None, None, :]


def padding_python_loop(lengths, n):
    rows = [[pos < int(length) for pos in range(n)] for length in np.asarray(lengths)]
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


def padding_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n))[:, np.newaxis, np.newaxis, :]


# ============================================================================ masked_attention
def _scores(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def masked_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_fill_minus_1e9(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def masked_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def masked_multiply_scores(q, k, v, mask):
    s = _scores(q, k) * mask
    w = _safe_softmax(s)
    w = np.where(np.any(mask, axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


def masked_scale_n_k(q, k, v, mask):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])
    w = _safe_softmax(np.where(mask, s, -np.inf))
    return w @ v, w


def masked_multiplicative(q, k, v, mask):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / np.sqrt(q64.shape[-1])
    allowed = np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)
    row_top = np.max(np.where(allowed, s, -np.inf), axis=-1, keepdims=True)
    row_top[~np.isfinite(row_top)] = 0.0
    e = np.exp(np.minimum(s - row_top, 0.0)) * allowed  # masked keys contribute exactly 0
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z == 0, 1.0, z)
    return np.einsum("...ij,...jd->...id", w, v64), w


def masked_row_loop(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n_q, n_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    full_mask = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.zeros(lead + (n_q, v.shape[-1]))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead, n_q):
        *batch, i = idx
        batch = tuple(batch)
        keys = np.flatnonzero(full_mask[batch + (i,)])
        if keys.size == 0:
            continue  # nobody to attend to: zeros
        s = kb[batch][keys] @ qb[batch][i] / math.sqrt(q.shape[-1])
        p = np.exp(s - s.max())
        p /= p.sum()
        weights[batch + (i,)][keys] = p
        out[batch + (i,)] = p @ vb[batch][keys]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "strict_less",
          "the mask keeps the diagonal out: `<` where `<=` belongs, so a query cannot attend "
          "its own position",
          causal_strict_less),
    Entry("causal_mask", "wrong", "tril_top_left",
          "uses np.tril without the offset k = n_k - n_q, a top-left aligned mask that is "
          "only right when n_q == n_k",
          causal_tril_top_left),
    Entry("causal_mask", "wrong", "float_mask",
          "returns np.tril of np.ones, a float array of 0/1, where the contract asks for a "
          "boolean mask",
          causal_float_mask),
    Entry("causal_mask", "wrong", "transposed",
          "puts the query positions on the columns and the keys on the rows, returning the "
          "(n_k, n_q) transpose: an upper-triangular mask that lets queries see the future",
          causal_transposed),
    Entry("causal_mask", "wrong", "one_based_queries",
          "numbers the queries from 1 (np.arange(1, n_q + 1)), so every query may also "
          "attend the next key",
          causal_one_based_queries),
    Entry("causal_mask", "wrong", "default_condition_inverted",
          "the default test is inverted (`n_q if n_k is not None else n_k`): a given n_k is "
          "replaced by n_q, and n_k=None stays None and fails",
          causal_default_inverted),
    Entry("causal_mask", "right", "python_loops", None, causal_python_loops),
    Entry("causal_mask", "right", "np_tri", None, causal_np_tri),

    Entry("padding_mask", "wrong", "less_equal",
          "uses `<=` where `<` belongs, so the first padding position (j = lengths[b]) is "
          "still allowed",
          padding_less_equal),
    Entry("padding_mask", "wrong", "no_singleton_axes",
          "returns the (B, n) mask without the two singleton axes, so it is not "
          "(B, 1, 1, n) and would broadcast against the wrong axes of the scores",
          padding_no_singleton_axes),
    Entry("padding_mask", "wrong", "singletons_in_wrong_place",
          "inserts the singleton axes as (B, 1, n, 1), putting the key positions on the "
          "query axis",
          padding_wrong_axes),
    Entry("padding_mask", "wrong", "float_zeros_ones",
          "fills an np.zeros array with ones, returning a float 0/1 mask instead of a "
          "boolean one",
          padding_float_loop),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "builds the positions with np.arange(lengths.max()) instead of np.arange(n), so "
          "the mask is too narrow when no sequence fills all n positions",
          padding_uses_max_length),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "follows the key_padding_mask convention (True = padding, `>=`), the opposite of "
          "the course's True = may attend",
          padding_true_marks_pad),
    Entry("padding_mask", "right", "python_loop", None, padding_python_loop),
    Entry("padding_mask", "right", "greater_outer", None, padding_greater_outer),

    Entry("masked_attention", "wrong", "nan_on_empty_rows",
          "does not guard fully masked rows: their max is -inf, -inf - (-inf) is NaN, so "
          "those rows give NaN instead of zeros",
          masked_nan_rows),
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights (the mean of the values) instead of zeros",
          masked_fill_minus_1e9),
    Entry("masked_attention", "wrong", "mask_inverted",
          "puts -inf where the mask is True, treating True as 'masked out' instead of the "
          "course's True = may attend",
          masked_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "multiplies the softmax weights by the mask after normalising, so the remaining "
          "weights no longer sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "multiplies the scores by the boolean mask, which sets masked scores to 0 "
          "(still attended) instead of -inf",
          masked_multiply_scores),
    Entry("masked_attention", "wrong", "scale_by_n_k",
          "scales the scores by 1/sqrt(k.shape[-2]), the number of keys, instead of "
          "1/sqrt(d_k) = 1/sqrt(k.shape[-1])",
          masked_scale_n_k),
    Entry("masked_attention", "right", "multiplicative_mask_einsum", None,
          masked_multiplicative),
    Entry("masked_attention", "right", "per_row_gather_loop", None, masked_row_loop),
]
