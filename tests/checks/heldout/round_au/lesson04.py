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


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_float(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_shape_swapped(n_q, n_k=None):
    n_k = n_k or n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :]
    return keys <= queries + (n_k - n_q)


def causal_abs_offset(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = abs(n_k - n_q)
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=offset)


def causal_not_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return ~np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    return np.array([[j - shift <= i for j in range(n_k)] for i in range(n_q)], dtype=bool)


# ============================================================================ padding_mask
def pad_leq(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def pad_axes_misplaced(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def pad_float_mask(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b, L in enumerate(lengths):
        mask[b, 0, 0, :L] = 1
    return mask


def pad_left_padding(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n), dtype=bool)
    for b in range(B):
        mask[b, 0, 0, -int(lengths[b]):] = True
    return mask


def pad_arange_batch(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(len(lengths))
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def pad_np_less_swapped(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.less(lengths[:, None], np.arange(n)[None, :])
    return keep.reshape(len(lengths), 1, 1, n)


def pad_loop(lengths, n):
    rows = []
    for L in np.asarray(lengths).tolist():
        rows.append([[[j < L for j in range(n)]]])
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


def pad_less_outer(lengths, n):
    lengths = np.asarray(lengths)
    return np.less.outer(np.arange(n), lengths).T.reshape(-1, 1, 1, n)


# ============================================================================ masked_attention
def ma_no_guard(q, k, v, mask):
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_big_negative(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def ma_inverted(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def ma_cleanup_after_out(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    out = w @ v
    w = np.nan_to_num(w)
    return out, w


def ma_scale_by_nk(q, k, v, mask):
    scale = 1.0 / np.sqrt(k.shape[-2])
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    w = np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)
    return w @ v, w


def ma_logsumexp(q, k, v, mask):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(divide="ignore"):
        lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    ok = np.isfinite(lse)
    w = np.where(ok, np.exp(s - np.where(ok, lse, 0.0)), 0.0)
    return np.einsum("...ij,...je->...ie", w, v64), w


def ma_multiplicative(q, k, v, mask):
    s = (q / math.sqrt(q.shape[-1])) @ np.swapaxes(k, -1, -2)
    allowed = np.broadcast_to(mask, s.shape)
    peak = np.max(np.where(allowed, s, -np.inf), axis=-1, keepdims=True)
    peak = np.nan_to_num(peak, neginf=0.0)
    e = np.exp(np.where(allowed, s - peak, 0.0)) * allowed
    tot = e.sum(axis=-1, keepdims=True)
    w = e / np.maximum(tot, np.finfo(np.float64).tiny)
    return w @ v, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, so the mask is aligned top-left and a "
          "query cannot see the keys cached before it when n_k > n_q", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "compares with `<` where `<=` belongs, so each query loses its own position (the "
          "diagonal)", causal_strict),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "uses np.triu (keeps the upper triangle) where np.tril belongs, so queries see the "
          "future instead of the past", causal_triu),
    Entry("causal_mask", "wrong", "float_not_bool",
          "returns np.tril(np.ones(...)), a float array of 0/1, instead of a boolean mask",
          causal_float),
    Entry("causal_mask", "wrong", "shape_transposed",
          "puts the keys on the rows and the queries on the columns, returning (n_k, n_q) "
          "instead of (n_q, n_k)", causal_shape_swapped),
    Entry("causal_mask", "wrong", "abs_offset",
          "takes abs(n_k - n_q) as the diagonal offset, so with more queries than keys the "
          "mask shifts up instead of down and early queries see keys they must not",
          causal_abs_offset),
    Entry("causal_mask", "right", "not_triu_above", None, causal_not_triu),
    Entry("causal_mask", "right", "nested_comprehension", None, causal_loops),
    Entry("padding_mask", "wrong", "less_equal",
          "compares j <= lengths[b] where `<` belongs, so one padding position per sequence is "
          "kept (and a length-0 sequence keeps position 0)", pad_leq),
    Entry("padding_mask", "wrong", "axes_misplaced",
          "inserts the singleton axes in the wrong places, returning (B, 1, n, 1), which "
          "broadcasts over queries instead of keys", pad_axes_misplaced),
    Entry("padding_mask", "wrong", "float_mask",
          "fills a np.zeros float array with 1s, returning a float mask instead of a boolean "
          "one", pad_float_mask),
    Entry("padding_mask", "wrong", "left_padding",
          "marks the last lengths[b] positions (as if sequences were left-padded) instead of "
          "the first, and -0: marks the whole row of a length-0 sequence", pad_left_padding),
    Entry("padding_mask", "wrong", "arange_over_batch",
          "builds the positions with np.arange(len(lengths)) (the batch size) where "
          "np.arange(n) belongs", pad_arange_batch),
    Entry("padding_mask", "wrong", "np_less_arguments_swapped",
          "calls np.less(lengths, positions), which is lengths[b] < j: the complement of the "
          "mask (minus the boundary position)", pad_np_less_swapped),
    Entry("padding_mask", "right", "python_lists", None, pad_loop),
    Entry("padding_mask", "right", "less_outer", None, pad_less_outer),
    Entry("masked_attention", "wrong", "fully_masked_rows_nan",
          "masks with -inf but never handles rows with no allowed key: their max is -inf and "
          "the weights and output become NaN instead of zeros", ma_no_guard),
    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over all keys instead of zeros", ma_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "treats True as 'masked out' (np.where(mask, -inf, s)), the opposite of the course's "
          "True = may attend", ma_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "multiplies the weights by the mask after the softmax without renormalising, so the "
          "allowed weights no longer sum to 1", ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "nan_cleanup_after_output",
          "computes out = w @ v before replacing the NaN weights of fully masked rows, so the "
          "weights are cleaned but those output rows stay NaN", ma_cleanup_after_out),
    Entry("masked_attention", "wrong", "scale_sqrt_n_k",
          "scales by 1/sqrt(k.shape[-2]) (the number of keys N_k) instead of 1/sqrt(d_k)",
          ma_scale_by_nk),
    Entry("masked_attention", "right", "logsumexp_float64", None, ma_logsumexp),
    Entry("masked_attention", "right", "multiplicative_mask", None, ma_multiplicative),
]
