"""Held-out catalogue, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np
import scipy.special

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
    return j < i + (n_k - n_q)


def causal_float_dtype(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    n_k = n_k if n_k is not None else n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_rows_are_keys(n_q, n_k=None):
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
    if n_k is None:
        n_k = n_q
    return ~np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


# ============================================================================ padding_mask
def pad_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def pad_flat_shape(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, None]


def pad_query_axis(lengths, n):
    lens = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lens[:, None]
    return keep[:, None, :, None]


def pad_true_means_padding(lengths, n):
    lengths = np.asarray(lengths)
    is_pad = np.arange(n)[None, :] >= lengths[:, None]
    return is_pad[:, None, None, :]


def pad_reshape_instead_of_transpose(lengths, n):
    lengths = np.asarray(lengths)
    B = lengths.shape[0]
    grid = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return grid.reshape(B, 1, 1, n)


def pad_float_loop(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b in range(B):
        mask[b, 0, 0, :lengths[b]] = 1
    return mask


def pad_bool_loop(lengths, n):
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(np.asarray(lengths).tolist()):
        out[b, 0, 0, :length] = True
    return out


def pad_direct_4d(lengths, n):
    return np.arange(n) < np.asarray(lengths).reshape(-1, 1, 1, 1)


# ============================================================================ masked_attention
def ma_finite_fill(q, k, v, mask):
    d = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_inverted_mask(q, k, v, mask):
    scale = 1 / math.sqrt(q.shape[-1])
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def ma_nan_fixed_after_out(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = weights / weights.sum(axis=-1, keepdims=True)
    out = weights @ v
    weights = np.nan_to_num(weights)  # fully masked rows: NaN -> 0
    return out, weights


def ma_boolean_indexing(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores[~mask] = -np.inf
    row_max = scores.max(axis=-1, keepdims=True)
    row_max[~np.isfinite(row_max)] = 0.0
    w = np.exp(scores - row_max)
    total = w.sum(axis=-1, keepdims=True)
    total[total == 0] = 1.0
    w = w / total
    return w @ v, w


def ma_row_guard_no_keepdims(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    very_negative = np.finfo(scores.dtype).min
    scores = np.where(mask, scores, very_negative)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    has_key = np.broadcast_to(mask, weights.shape).any(axis=-1)
    weights = np.where(has_key, weights, 0.0)
    return weights @ v, weights


def ma_per_row_loop(q, k, v, mask):
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    full_mask = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    dtype = np.result_type(q, k, v)
    weights = np.zeros(lead + (n_q, n_k), dtype=np.float64)
    out = np.zeros(lead + (n_q, v.shape[-1]), dtype=np.float64)
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(full_mask[idx][i])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx][i] / math.sqrt(q.shape[-1])
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx][i, allowed] = p
            out[idx][i] = p @ vb[idx][allowed]
    return out.astype(dtype), weights.astype(dtype)


def ma_logsumexp(q, k, v, mask):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / np.sqrt(q64.shape[-1])
    s = np.where(mask, s, -np.inf)
    has_key = np.any(np.broadcast_to(mask, s.shape), axis=-1, keepdims=True)
    lse = scipy.special.logsumexp(np.where(has_key, s, 0.0), axis=-1, keepdims=True)
    w = np.where(has_key, np.exp(s - lse), 0.0)
    dtype = np.result_type(q, k, v)
    return (w @ v64).astype(dtype), w.astype(dtype)


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "aligns the triangle top-left (plain np.tril, no offset), so with n_q != n_k query i "
          "sees keys j <= i instead of j <= i + n_k - n_q", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "the mask keeps the diagonal out: `<` where `<=` belongs, so no query may attend its "
          "own position", causal_strict_less),
    Entry("causal_mask", "wrong", "float_not_bool",
          "builds the triangle from np.ones without dtype=bool, so it returns a float array of "
          "0.0/1.0 instead of a boolean mask", causal_float_dtype),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes the np.tril offset as n_q - n_k instead of n_k - n_q, so the diagonal moves "
          "the wrong way when n_q != n_k", causal_offset_sign),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "uses np.triu where np.tril belongs, so each query may attend the future keys "
          "(and itself) instead of the past ones", causal_triu),
    Entry("causal_mask", "wrong", "keys_on_rows",
          "puts the key index on the rows and the query index on the columns, giving the "
          "transposed (n_k, n_q) mask", causal_rows_are_keys),
    Entry("causal_mask", "right", "nested_loops", None, causal_loops),
    Entry("causal_mask", "right", "not_triu_shifted", None, causal_not_triu),

    Entry("padding_mask", "wrong", "less_equal",
          "compares j <= lengths[b] instead of j < lengths[b], so one padding position per "
          "sequence is let through", pad_less_equal),
    Entry("padding_mask", "wrong", "missing_broadcast_axes",
          "returns the (B, n) mask without inserting the two length-1 axes of (B, 1, 1, n)",
          pad_flat_shape),
    Entry("padding_mask", "wrong", "padding_on_query_axis",
          "inserts the new axes as (B, 1, n, 1), so the mask runs along the queries instead of "
          "the keys", pad_query_axis),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "uses PyTorch's key_padding_mask convention (True = padding) instead of the course's "
          "True = may attend: the mask is inverted", pad_true_means_padding),
    Entry("padding_mask", "wrong", "reshape_of_transposed_grid",
          "builds the comparison grid as (n, B) and reshapes it to (B, 1, 1, n) instead of "
          "transposing, which scrambles the positions across sequences", pad_reshape_instead_of_transpose),
    Entry("padding_mask", "wrong", "float_zeros_loop",
          "fills np.zeros((B, 1, 1, n)) with 1s, so the mask is a float array instead of a "
          "boolean one", pad_float_loop),
    Entry("padding_mask", "right", "bool_slice_loop", None, pad_bool_loop),
    Entry("padding_mask", "right", "compare_against_4d_lengths", None, pad_direct_4d),

    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform average over all keys instead of zeros", ma_finite_fill),
    Entry("masked_attention", "wrong", "mask_inverted",
          "reads True as 'masked out': np.where(mask, -inf, scores) removes exactly the keys "
          "the mask allows", ma_inverted_mask),
    Entry("masked_attention", "wrong", "zero_weights_after_softmax",
          "applies the mask by multiplying the softmax weights by it, without renormalising, so "
          "the remaining weights no longer sum to 1", ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "nan_fixed_after_out",
          "replaces the NaN of fully masked rows by 0 in the weights only after computing "
          "out = weights @ v, so those rows of out stay NaN", ma_nan_fixed_after_out),
    Entry("masked_attention", "wrong", "boolean_index_no_broadcast",
          "masks with scores[~mask] = -inf; boolean indexing does not broadcast, so a mask "
          "that only broadcasts to the scores' shape raises IndexError", ma_boolean_indexing),
    Entry("masked_attention", "wrong", "row_guard_without_keepdims",
          "the 'row has an allowed key' test is taken with .any(axis=-1) without keepdims, so it "
          "broadcasts along the key axis instead of the query axis (raises, or zeros the wrong "
          "entries)", ma_row_guard_no_keepdims),
    Entry("masked_attention", "right", "per_row_loop_over_allowed_keys", None, ma_per_row_loop),
    Entry("masked_attention", "right", "logsumexp_float64", None, ma_logsumexp),
]
