"""Held-out catalogue, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np
from scipy.special import logsumexp

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


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :]
    return keys <= queries + n_k - n_q


def causal_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_not_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return ~np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, None]


def padding_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    m = np.arange(n)[None, :] < lengths[:, None]
    return m[:, None, :, None]


def padding_reshape_not_transpose(lengths, n):
    lengths = np.asarray(lengths)
    grid = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return grid.reshape(len(lengths), 1, 1, n)


def padding_true_on_pads(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad[:, None, None, :]


def padding_sized_by_longest(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(lengths.max())
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def padding_loop_fill(lengths, n):
    lengths = [int(length) for length in lengths]
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        out[b, 0, 0, :length] = True
    return out


def padding_ufunc_outer(lengths, n):
    keep = np.greater.outer(np.asarray(lengths), np.arange(n))  # lengths[b] > j
    return keep.reshape(-1, 1, 1, n)


# ============================================================================ masked_attention
def ma_big_negative(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_inverted(q, k, v, mask):
    d = q.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def ma_nan_rows(q, k, v, mask):
    scale = 1 / math.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def ma_scale_by_nk(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-2])
    scores = np.where(mask, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    ex = np.exp(scores - top)
    den = ex.sum(axis=-1, keepdims=True)
    w = ex / np.where(den == 0, 1.0, den)
    return w @ v, w


def ma_multiply_scores(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    tot = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)
    return w @ v, w


def ma_logsumexp(q, k, v, mask):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    s = np.where(mask, s, -np.inf)
    lse = logsumexp(s, axis=-1, keepdims=True)  # -inf on rows with no key
    ok = np.isfinite(lse)
    w = np.where(ok, np.exp(s - np.where(ok, lse, 0.0)), 0.0)
    return np.einsum("...ij,...jv->...iv", w, v64), w


def ma_row_loops(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    full_mask = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + (n_q, d))
    kb = np.broadcast_to(k, lead + (n_k, d))
    vb = np.broadcast_to(v, lead + (n_k, d_v))
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(full_mask[idx][i])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx][i] / math.sqrt(d)
            e = np.exp(s - s.max())
            weights[idx][i, allowed] = e / e.sum()
            out[idx][i] = weights[idx][i] @ vb[idx]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, so the mask is aligned top-left and "
          "queries of a cache (n_q < n_k) cannot see their own recent keys", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less_than",
          "`<` where `<=` belongs: each query is kept from attending its own position (the "
          "diagonal)", causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes k = n_q - n_k to np.tril instead of n_k - n_q, so the alignment shifts the "
          "wrong way when n_q != n_k", causal_offset_sign),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "np.triu keeps the upper triangle, so queries attend the future and not the past",
          causal_triu),
    Entry("causal_mask", "wrong", "float_mask",
          "np.ones without dtype=bool makes a float 0/1 mask where the contract asks for bool",
          causal_float),
    Entry("causal_mask", "wrong", "keys_on_rows",
          "puts the key positions on the rows and the queries on the columns, returning the "
          "(n_k, n_q) transpose", causal_transposed),
    Entry("causal_mask", "right", "nested_list_comprehension", None, causal_loops),
    Entry("causal_mask", "right", "not_triu_shifted", None, causal_not_triu),

    Entry("padding_mask", "wrong", "less_or_equal",
          "`<=` where `<` belongs: the mask also keeps position lengths[b], one past the last "
          "real token", padding_le),
    Entry("padding_mask", "wrong", "missing_broadcast_axes",
          "returns the (B, n) mask without the two length-1 axes, so it is not (B, 1, 1, n)",
          padding_2d),
    Entry("padding_mask", "wrong", "masks_queries_axis",
          "inserts the new axes on the wrong side, giving (B, 1, n, 1): it masks query rows "
          "instead of key columns", padding_query_axis),
    Entry("padding_mask", "wrong", "reshape_instead_of_transpose",
          "builds the (n, B) comparison and reshapes it to (B, 1, 1, n) instead of transposing, "
          "which scrambles positions across sequences", padding_reshape_not_transpose),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "uses the 'True = padded' convention (>=), the inverse of the course's True = may "
          "attend", padding_true_on_pads),
    Entry("padding_mask", "wrong", "sized_by_longest_length",
          "sizes the key axis by lengths.max() instead of n, so the mask is too short when no "
          "sequence fills all n positions", padding_sized_by_longest),
    Entry("padding_mask", "right", "loop_fill_prefix", None, padding_loop_fill),
    Entry("padding_mask", "right", "greater_outer", None, padding_ufunc_outer),

    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights (and a mean of the values) instead of zeros", ma_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "np.where(mask, -inf, scores) removes the keys the mask allows (True read as 'masked "
          "out')", ma_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax_no_renormalise",
          "zeroes the masked weights after the softmax without renormalising, so rows no longer "
          "sum to 1", ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "nan_on_fully_masked_rows",
          "no guard for rows with no allowed key: max is -inf, -inf - -inf = NaN, so those rows "
          "are NaN instead of zeros", ma_nan_rows),
    Entry("masked_attention", "wrong", "scale_by_num_keys",
          "scales by 1/sqrt(k.shape[-2]) (the number of keys) instead of 1/sqrt(d_k) "
          "(k.shape[-1])", ma_scale_by_nk),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "multiplies the scores by the boolean mask, which sets masked scores to 0 instead of "
          "-inf, so masked keys still get weight exp(0 - max)", ma_multiply_scores),
    Entry("masked_attention", "right", "logsumexp_float64", None, ma_logsumexp),
    Entry("masked_attention", "right", "per_row_loops", None, ma_row_loops),
]
