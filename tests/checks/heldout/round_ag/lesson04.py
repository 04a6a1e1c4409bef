"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

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


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_inverted(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    # mark the future keys
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :] + n_k - n_q
    return keys <= queries


def causal_right_loops(n_q, n_k=None):
    total = n_q if n_k is None else n_k
    shift = total - n_q
    rows = [[j <= i + shift for j in range(total)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, total)


def causal_right_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ============================================================================ padding_mask
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_missing_axes(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n) < lengths[:, None])[:, None, :]


def padding_left_aligned(lengths, n):
    lengths = np.asarray(lengths)
    m = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, L in enumerate(lengths):
        m[b, 0, 0, -L:] = True
    return m


def padding_reshape_not_transpose(lengths, n):
    lengths = np.asarray(lengths)
    grid = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return grid.reshape(len(lengths), 1, 1, n)


def padding_float_buffer(lengths, n):
    lengths = np.asarray(lengths)
    out = np.zeros((lengths.shape[0], 1, 1, n))
    for b in range(lengths.shape[0]):
        out[b, ..., :lengths[b]] = 1
    return out


def padding_arange_of_batch(lengths, n):
    lengths = np.asarray(lengths)
    B = len(lengths)
    positions = np.arange(len(lengths))
    return (positions[None, :] < lengths[:, None]).reshape(B, 1, 1, -1)


def padding_right_greater_outer(lengths, n):
    lengths = np.asarray(lengths)
    return np.greater.outer(lengths, np.arange(n)).reshape(lengths.shape[0], 1, 1, n)


def padding_right_python(lengths, n):
    rows = [[[[pos < int(L) for pos in range(n)]]] for L in lengths]
    return np.array(rows, dtype=np.bool_)


# ============================================================================ masked_attention
def masked_fill_minus_1e9(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted_convention(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    mask = np.asarray(mask)
    scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_multiply_after_softmax(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    probs = probs * mask
    return probs @ v, probs


def masked_scale_by_dv(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    d = v.shape[-1]
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    logits = np.where(mask, logits, -np.inf)
    m = np.max(logits, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    ex = np.exp(logits - m)
    z = ex.sum(axis=-1, keepdims=True)
    wts = np.divide(ex, z, out=np.zeros_like(ex), where=z > 0)
    return wts @ v, wts


def masked_nan_cleanup_too_late(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    sc = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    sc = np.where(mask, sc, -np.inf)
    with np.errstate(invalid="ignore"):
        ex = np.exp(sc - sc.max(axis=-1, keepdims=True))
        weights = ex / ex.sum(axis=-1, keepdims=True)
    out = weights @ v
    weights = np.nan_to_num(weights, nan=0.0)
    return out, weights


def masked_softmax_over_queries(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = (q @ np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
    s = np.where(mask, s, -np.inf)
    mx = np.max(s, axis=-2, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(s - mx)
    den = np.sum(e, axis=-2, keepdims=True)
    w = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    return w @ v, w


def masked_right_scipy_nan_to_num(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        w = scipy.special.softmax(scores, axis=-1)
    w = np.nan_to_num(w, nan=0.0)
    return np.einsum("...qk,...kd->...qd", w, v), w


def masked_right_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    mb = np.broadcast_to(np.asarray(mask), lead + (n_q, n_k))
    weights = np.zeros(lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, v.shape[-1]))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(mb[idx + (i,)])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx + (i,)] / math.sqrt(q.shape[-1])
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx + (i,)][allowed] = p
            out[idx + (i,)] = p @ vb[idx][allowed]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top-left-aligned",
          "np.tril without an offset aligns the mask top-left, so when n_q != n_k query i "
          "may attend only keys j <= i instead of j <= i + n_k - n_q", causal_top_left),
    Entry("causal_mask", "wrong", "strict-less-than",
          "the comparison is `<` where `<=` belongs, so every query is kept from its own "
          "position (the diagonal)", causal_strict_less),
    Entry("causal_mask", "wrong", "offset-sign-flipped",
          "the tril offset is n_q - n_k instead of n_k - n_q, so for n_q != n_k the diagonal "
          "is shifted the wrong way", causal_offset_sign),
    Entry("causal_mask", "wrong", "float-not-bool",
          "np.tril(np.ones(...)) is returned as a float array of 0.0/1.0 instead of the "
          "boolean mask the contract fixes", causal_float_mask),
    Entry("causal_mask", "wrong", "true-marks-future",
          "it marks the keys to hide (True = masked), the opposite of the course's convention "
          "True = may attend", causal_inverted),
    Entry("causal_mask", "wrong", "transposed-shape",
          "the key positions index the rows and the queries the columns, so the mask comes "
          "out (n_k, n_q), transposed", causal_transposed),
    Entry("causal_mask", "right", "python-lists", None, causal_right_loops),
    Entry("causal_mask", "right", "np-tri", None, causal_right_tri),

    Entry("padding_mask", "wrong", "less-or-equal",
          "the comparison is `j <= lengths[b]` where `j < lengths[b]` belongs, so one padding "
          "position past each sequence is kept", padding_less_equal),
    Entry("padding_mask", "wrong", "missing-head-axis",
          "only one axis is inserted, so the mask is (B, 1, n) instead of (B, 1, 1, n) and "
          "would broadcast the batch against the heads", padding_missing_axes),
    Entry("padding_mask", "wrong", "left-aligned-negative-slice",
          "it fills the last lengths[b] positions (slice -L:) as if padding came first, and "
          "for L = 0 the slice -0: selects the whole row", padding_left_aligned),
    Entry("padding_mask", "wrong", "reshape-instead-of-transpose",
          "the comparison is built as (n, B) and then reshaped to (B, 1, 1, n) instead of "
          "transposed, which scrambles positions across sequences",
          padding_reshape_not_transpose),
    Entry("padding_mask", "wrong", "float-buffer",
          "the mask is built in np.zeros (float64) and filled with 1, so it is a float array "
          "instead of the boolean mask the contract fixes", padding_float_buffer),
    Entry("padding_mask", "wrong", "arange-over-batch",
          "the key positions are np.arange(len(lengths)) (the batch size) instead of "
          "np.arange(n), so the mask has B positions instead of n", padding_arange_of_batch),
    Entry("padding_mask", "right", "greater-outer", None, padding_right_greater_outer),
    Entry("padding_mask", "right", "nested-lists", None, padding_right_python),

    Entry("masked_attention", "wrong", "fill-minus-1e9",
          "masked scores are set to -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over the masked keys instead of zeros", masked_fill_minus_1e9),
    Entry("masked_attention", "wrong", "mask-convention-inverted",
          "np.where(mask, -inf, scores) hides the keys where mask is True, the opposite of the "
          "convention True = may attend", masked_inverted_convention),
    Entry("masked_attention", "wrong", "mask-after-softmax-no-renorm",
          "it multiplies the softmax weights by the mask after normalising, so the allowed "
          "weights no longer sum to 1", masked_multiply_after_softmax),
    Entry("masked_attention", "wrong", "scale-by-d_v",
          "the scale uses v.shape[-1] (d_v) instead of d_k, wrong whenever d_v != d_k",
          masked_scale_by_dv),
    Entry("masked_attention", "wrong", "nan-cleanup-after-output",
          "fully masked rows give NaN weights, which are zeroed with nan_to_num only after "
          "out = weights @ v was computed, so those output rows stay NaN",
          masked_nan_cleanup_too_late),
    Entry("masked_attention", "wrong", "softmax-over-queries",
          "the max and sum of the softmax run over axis -2 (the queries) instead of axis -1 "
          "(the keys)", masked_softmax_over_queries),
    Entry("masked_attention", "right", "scipy-softmax-nan-to-num", None,
          masked_right_scipy_nan_to_num),
    Entry("masked_attention", "right", "row-by-row-allowed-keys", None, masked_right_row_loop),
]
