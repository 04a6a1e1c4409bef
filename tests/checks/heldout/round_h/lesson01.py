"""Lesson 01 (single head, numpy): softmax and attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ------------------------------------------------------------------ softmax: wrong
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis)[..., None])
    return e / e.sum(axis=axis)[..., None]


def softmax_sum_last(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_mean_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    c = np.mean(x, axis=axis, keepdims=True)
    e = np.exp(x - c)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # guard against NaN
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    numer = np.exp(x - m)
    denom = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numer / denom


# ------------------------------------------------------------------ softmax: right
def softmax_rowloop(x, axis=-1):
    a = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = a.reshape(-1, a.shape[-1])
    out = np.zeros_like(flat)
    for i, row in enumerate(flat):
        top = row.max()
        if not np.isfinite(top):
            continue
        ex = np.exp(row - top)
        out[i] = ex / ex.sum()
    return np.moveaxis(out.reshape(a.shape), -1, axis)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


# ------------------------------------------------------------------ attention helpers
def _stable_softmax_last(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------ attention: wrong
def attention_scale_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = _stable_softmax_last(scores)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = np.matmul(q, k.T) / math.sqrt(d_k)
    w = _stable_softmax_last(scores)
    return np.matmul(w, v), w


def attention_softmax_queries(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
    scores = scores - scores.max(axis=-2, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-2, keepdims=True)
    return w @ v, w


def attention_scale_after_softmax(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2)
    w = _stable_softmax_last(scores) / math.sqrt(d_k)
    return w @ v, w


def attention_no_max_shift(q, k, v):
    d_k = q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d_k)
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kv->...qv", w, v), w


def attention_precedence(q, k, v):
    d_k = q.shape[-1]
    scale = d_k ** -1 / 2
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    w = _stable_softmax_last(scores)
    return w @ v, w


# ------------------------------------------------------------------ attention: right
def attention_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q64, k64) / np.sqrt(q64.shape[-1])
    w = scipy.special.softmax(scores, axis=-1)
    out = np.einsum("...ij,...je->...ie", w, v64)
    return out.astype(np.result_type(q, k, v)), w.astype(np.result_type(q, k, v))


def attention_index_loop(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = q.shape[:-2]
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            s = np.array([q[idx][i] @ k[idx][j] for j in range(n_k)]) / math.sqrt(q.shape[-1])
            s = np.exp(s - s.max())
            weights[idx][i] = s / s.sum()
            out[idx][i] = weights[idx][i] @ v[idx]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "global-max-shift",
          "Subtracts the maximum of the whole array rather than each slice's maximum, so slices "
          "far below the global maximum underflow to 0/0.", softmax_global_max),
    Entry("softmax", "wrong", "keepdims-forgotten",
          "Reduces the max and the sum without keepdims and re-adds the axis at the end, so for "
          "any axis other than the last they broadcast against the wrong axis.",
          softmax_no_keepdims),
    Entry("softmax", "wrong", "sum-over-last-axis",
          "Takes the max along the requested axis but normalises with a sum over the last axis "
          "whatever axis was asked for.", softmax_sum_last),
    Entry("softmax", "wrong", "mean-shift",
          "Subtracts the mean instead of the maximum for stability, which still overflows when "
          "the entries are thousands apart.", softmax_mean_shift),
    Entry("softmax", "wrong", "inf-replaced-by-zero",
          "Replaces -inf entries by 0 to avoid NaN, so entries that should get weight 0 get a "
          "real share of the probability.", softmax_inf_to_zero),
    Entry("softmax", "wrong", "unshifted-denominator",
          "Shifts by the max in the numerator but sums exp of the unshifted inputs in the "
          "denominator, so the rows no longer sum to 1 (and overflow for large inputs).",
          softmax_unshifted_denominator),
    Entry("softmax", "right", "row-loop-moveaxis", None, softmax_rowloop),
    Entry("softmax", "right", "scipy-logsumexp", None, softmax_logsumexp),

    Entry("attention", "wrong", "scale-by-d_v",
          "Scales the scores by 1/sqrt of the value width d_v instead of the key width d_k.",
          attention_scale_dv),
    Entry("attention", "wrong", "k-dot-T-batched",
          "Uses k.T, which reverses every axis of a batched k instead of swapping the last two.",
          attention_k_dot_T),
    Entry("attention", "wrong", "softmax-over-queries",
          "Normalises the weights over the query axis (-2) instead of over the keys.",
          attention_softmax_queries),
    Entry("attention", "wrong", "scale-after-softmax",
          "Divides the softmax weights by sqrt(d_k) instead of scaling the scores before the "
          "softmax.", attention_scale_after_softmax),
    Entry("attention", "wrong", "no-max-subtraction",
          "Exponentiates the scaled scores without subtracting the row max, so large scores "
          "overflow to inf/NaN.", attention_no_max_shift),
    Entry("attention", "wrong", "power-precedence",
          "Writes the scale as d_k ** -1 / 2, which Python reads as (1/d_k)/2, not "
          "1/sqrt(d_k).", attention_precedence),
    Entry("attention", "right", "einsum-scipy-float64", None, attention_einsum_scipy),
    Entry("attention", "right", "ndindex-loops", None, attention_index_loop),
]
