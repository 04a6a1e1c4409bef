"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
from scipy import special

from entry import Entry


# ============================================================================ causal_mask
def causal_strict_less(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_float_tril(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_aranges_swapped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q
    return np.arange(n_k)[:, None] <= np.arange(n_q)[None, :] + offset


def causal_square_n_q(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_q), dtype=bool), n_k - n_q)


def causal_right_comprehension(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    shift = cols - n_q
    return np.array([[j <= i + shift for j in range(cols)] for i in range(n_q)],
                    dtype=bool).reshape(n_q, cols)


def causal_right_np_tri(n_q, n_k=None):
    n_k = n_k if n_k is not None else n_q
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ============================================================================ padding_mask
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_no_singleton_axes(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, None]


def padding_transposed_then_reshaped(lengths, n):
    lens = np.asarray(lengths)
    m = np.arange(n)[:, None] < lens[None, :]  # (n, B)
    return m.reshape(len(lens), 1, 1, n)


def padding_inverted(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad[:, None, None, :]


def padding_float_zeros(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b, L in enumerate(lengths):
        mask[b, 0, 0, :L] = 1
    return mask


def padding_negative_slice(lengths, n):
    B = len(lengths)
    mask = np.ones((B, 1, 1, n), dtype=bool)
    for b in range(B):
        mask[b, 0, 0, -(n - lengths[b]):] = False
    return mask


def padding_right_loop(lengths, n):
    rows = []
    for length in np.asarray(lengths).tolist():
        rows.append([pos < length for pos in range(n)])
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


def padding_right_outer(lengths, n):
    lens = np.asarray(lengths).reshape(-1, 1, 1, 1)
    positions = np.arange(n).reshape(1, 1, 1, n)
    return np.less(positions, lens)


# ============================================================================ masked_attention
def masked_fill_minus_1e9(q, k, v, mask):
    d = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted_convention(q, k, v, mask):
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_multiply_scores(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_scale_by_n_k(q, k, v, mask):
    n_k, d = k.shape[-2], k.shape[-1]
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(k.shape[-2])
    scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    ex = np.exp(scores - top)
    den = ex.sum(axis=-1, keepdims=True)
    den[den == 0] = 1.0
    w = ex / den
    return np.einsum("...ij,...jd->...id", w, v), w


def masked_guard_wrong_axis(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        w = special.softmax(scores, axis=-1)
    has_key = np.any(mask, axis=-2, keepdims=True)
    w = np.where(has_key, w, 0.0)
    return w @ v, w


def masked_nan_cleaned_in_out_only(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        shifted = scores - scores.max(axis=-1, keepdims=True)
        weights = np.exp(shifted)
        weights = weights / weights.sum(axis=-1, keepdims=True)
    out = np.nan_to_num(weights @ v)
    return out, weights


def masked_right_logsumexp(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    lse = special.logsumexp(s, axis=-1, keepdims=True)
    finite = np.isfinite(lse)
    w = np.exp(s - np.where(finite, lse, 0.0))
    w = np.where(finite, w, 0.0)
    return w @ v, w


def masked_right_row_loop(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    n_q, n_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2] if np.ndim(mask) > 2 else ())
    full_mask = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    weights = np.zeros(lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, v.shape[-1]))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(full_mask[idx + (i,)])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx][i] / math.sqrt(q.shape[-1])
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx + (i,)][allowed] = p
            out[idx + (i,)] = p @ vb[idx][allowed]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "strict-less-than",
          "the comparison is `<` where `<=` belongs, so each query is kept from its own "
          "position (the diagonal)", causal_strict_less),
    Entry("causal_mask", "wrong", "top-left-aligned",
          "np.tril without the offset n_k - n_q aligns the mask top-left, so when n_q != n_k "
          "the queries do not sit at the last n_q positions", causal_top_left),
    Entry("causal_mask", "wrong", "triu-instead-of-tril",
          "np.triu keeps the upper triangle (the future keys) instead of np.tril's lower "
          "triangle", causal_triu),
    Entry("causal_mask", "wrong", "float-mask",
          "np.tril of np.ones gives a float array of 0.0/1.0, not the boolean mask the "
          "contract fixes", causal_float_tril),
    Entry("causal_mask", "wrong", "aranges-swapped",
          "the two aranges are broadcast the wrong way round (keys down, queries across), so "
          "the mask has shape (n_k, n_q) and is transposed", causal_aranges_swapped),
    Entry("causal_mask", "wrong", "ones-n-q-by-n-q",
          "the array of ones is built as (n_q, n_q), reusing n_q for the key axis, so the "
          "mask has the wrong shape whenever n_k != n_q", causal_square_n_q),
    Entry("causal_mask", "right", "nested-comprehension", None, causal_right_comprehension),
    Entry("causal_mask", "right", "np-tri-offset", None, causal_right_np_tri),

    Entry("padding_mask", "wrong", "less-equal",
          "the comparison is `<=` where `<` belongs, so the first padded position "
          "j = lengths[b] is kept", padding_less_equal),
    Entry("padding_mask", "wrong", "missing-singleton-axes",
          "it returns the (B, n) mask without the two singleton axes of (B, 1, 1, n), so it "
          "does not broadcast over heads and queries", padding_no_singleton_axes),
    Entry("padding_mask", "wrong", "transposed-then-reshaped",
          "the broadcast builds an (n, B) array (positions down, sequences across) and reshape "
          "then forces it into (B, 1, 1, n), scrambling which sequence each row belongs to",
          padding_transposed_then_reshaped),
    Entry("padding_mask", "wrong", "true-marks-padding",
          "it marks the padding with True (`>=`), the opposite of the convention True = may "
          "attend", padding_inverted),
    Entry("padding_mask", "wrong", "float-zeros-array",
          "the mask is filled into np.zeros, a float array of 0.0/1.0, not a boolean one",
          padding_float_zeros),
    Entry("padding_mask", "wrong", "negative-slice-minus-zero",
          "it clears the padding with the slice -(n - L):, and when L == n that is -0:, which "
          "clears the whole row instead of nothing", padding_negative_slice),
    Entry("padding_mask", "right", "python-rows", None, padding_right_loop),
    Entry("padding_mask", "right", "np-less-4d-broadcast", None, padding_right_outer),

    Entry("masked_attention", "wrong", "fill-minus-1e9",
          "masked scores are set to -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform row (weights 1/N_k, the mean of v) instead of zeros", masked_fill_minus_1e9),
    Entry("masked_attention", "wrong", "inverted-mask-convention",
          "np.where(mask, -inf, scores) removes the allowed keys and keeps the forbidden ones: "
          "True means may attend", masked_inverted_convention),
    Entry("masked_attention", "wrong", "multiply-scores-by-mask",
          "it multiplies the scores by the mask, which sets masked scores to 0 instead of -inf, "
          "so masked keys still get weight exp(0) in the softmax (and fully masked rows become "
          "uniform instead of zeros)", masked_multiply_scores),
    Entry("masked_attention", "wrong", "scale-by-sqrt-n-k",
          "the scale reads k.shape[-2] (N_k) instead of k.shape[-1] (d_k), so scores are "
          "divided by sqrt(N_k)", masked_scale_by_n_k),
    Entry("masked_attention", "wrong", "empty-row-test-wrong-axis",
          "the test for rows with no allowed key uses mask.any(axis=-2) (over queries) instead "
          "of axis=-1 (over keys), so fully masked rows keep their NaN weights",
          masked_guard_wrong_axis),
    Entry("masked_attention", "wrong", "nan-cleaned-in-out-only",
          "np.nan_to_num is applied to the output only: the returned weights of a fully "
          "masked row are still NaN instead of zeros", masked_nan_cleaned_in_out_only),
    Entry("masked_attention", "right", "logsumexp-float64", None, masked_right_logsumexp),
    Entry("masked_attention", "right", "allowed-keys-row-loop", None, masked_right_row_loop),
]
