"""Held-out catalogue, lesson 01 (single-head attention, numpy): softmax, attention."""

import math

import numpy as np
from scipy import special

from entry import Entry


# ============================================================================ softmax
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    shifted = arr - arr.max()
    ex = np.exp(shifted)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x)
    top = x.max(axis=axis, keepdims=True)
    num = np.exp(x - top)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_no_shift(x, axis=-1):
    z = np.exp(np.asarray(x, dtype=float))
    return z / z.sum(axis=axis, keepdims=True)


def softmax_neg_inf_to_zero(x, axis=-1):
    x = np.array(x, dtype=float)
    # get rid of the infinities so nothing turns into nan
    x = np.where(np.isneginf(x), 0.0, x)
    x = x - x.max(axis=axis, keepdims=True)
    w = np.exp(x)
    return w / w.sum(axis=axis, keepdims=True)


def softmax_lse_no_axis(x, axis=-1):
    logits = np.asarray(x, dtype=float)
    log_norm = special.logsumexp(logits)
    return np.exp(logits - log_norm)


def softmax_right_scipy(x, axis=-1):
    return special.softmax(np.asarray(x, dtype=np.float64), axis=axis)


def softmax_right_row_loop(x, axis=-1):
    arr = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    res = np.empty_like(flat)
    for r, row in enumerate(flat):
        big = max(row)
        terms = [math.exp(v - big) for v in row]
        tot = math.fsum(terms)
        res[r] = [t / tot for t in terms]
    return np.moveaxis(res.reshape(arr.shape), -1, axis)


# ============================================================================ attention
def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    dim = v.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(dim)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.matmul(p, v), p


def attention_softmax_over_queries(q, k, v):
    def _softmax(a, axis):
        a = a - a.max(axis=axis, keepdims=True)
        ea = np.exp(a)
        return ea / ea.sum(axis=axis, keepdims=True)

    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = _softmax(scores, axis=-2)
    return weights @ v, weights


def attention_half_power(q, k, v):
    d_k = q.shape[-1]
    logits = np.einsum("...id,...jd->...ij", q, k) / d_k ** 1 / 2
    logits = logits - np.max(logits, axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs = probs / np.sum(probs, axis=-1, keepdims=True)
    out = np.einsum("...ij,...jd->...id", probs, v)
    return out, probs


def attention_scale_after_softmax(q, k, v):
    raw = q @ np.swapaxes(k, -2, -1)
    raw = raw - raw.max(-1, keepdims=True)
    e = np.exp(raw)
    weights = e / e.sum(-1, keepdims=True) / np.sqrt(q.shape[-1])
    return weights @ v, weights


def attention_exp_unshifted(q, k, v):
    scale = 1.0 / math.sqrt(k.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_right_einsum_lse(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) / np.sqrt(q64.shape[-1])
    w = np.exp(s - special.logsumexp(s, axis=-1, keepdims=True))
    return np.einsum("...qk,...kv->...qv", w, v64), w


def attention_right_batch_loop(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    out = np.zeros(lead + (n_q, d_v))
    wts = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        qi, ki, vi = q[idx], k[idx], v[idx]
        for i in range(n_q):
            s = np.array([qi[i].dot(ki[j]) for j in range(n_k)]) / math.sqrt(d)
            s = s - s.max()
            p = np.exp(s)
            p = p / p.sum()
            wts[idx + (i,)] = p
            out[idx + (i,)] = p @ vi
    return out, wts


ENTRIES = [
    Entry("softmax", "wrong", "max-without-keepdims",
          "the maximum is taken without keepdims=True, so it broadcasts against the wrong axis: "
          "a square input is shifted column by column (wrong weights) and other shapes raise a "
          "broadcasting error", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global-max-shift",
          "it subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "row far below the global maximum underflows to 0/0 and gives NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum-hardcoded-last-axis",
          "the max uses `axis` but the normalising sum is hard-coded to axis=-1, so for "
          "axis=0 or axis=1 the result does not sum to 1 along `axis`", softmax_sum_last_axis),
    Entry("softmax", "wrong", "no-max-subtraction",
          "it exponentiates the logits without subtracting the maximum, so logits of 1e3-1e4 "
          "overflow to inf and the weights become NaN", softmax_no_shift),
    Entry("softmax", "wrong", "neg-inf-replaced-by-zero",
          "it replaces -inf logits by 0 to avoid NaN, which gives those entries a positive "
          "weight instead of weight 0", softmax_neg_inf_to_zero),
    Entry("softmax", "wrong", "logsumexp-without-axis",
          "scipy's logsumexp is called without axis=, so it normalises over the whole array "
          "instead of along `axis`", softmax_lse_no_axis),
    Entry("softmax", "right", "scipy-special-softmax", None, softmax_right_scipy),
    Entry("softmax", "right", "moveaxis-row-loop-fsum", None, softmax_right_row_loop),

    Entry("attention", "wrong", "k-dot-T",
          "it transposes k with `.T`, which reverses all axes: correct for 2-D inputs but a "
          "shape error as soon as there are batch or head axes", attention_dot_T),
    Entry("attention", "wrong", "scale-by-d-v",
          "the scores are divided by sqrt(d_v) (v's last axis) instead of sqrt(d_k), which is "
          "wrong whenever d_v != d_k", attention_scale_dv),
    Entry("attention", "wrong", "softmax-over-queries",
          "the softmax runs along axis -2 (over the queries) instead of the last axis (over the "
          "keys), so the rows of weights do not sum to 1", attention_softmax_over_queries),
    Entry("attention", "wrong", "d-pow-1-over-2",
          "`d_k ** 1 / 2` is (d_k ** 1) / 2 by operator precedence, so the scores are divided "
          "by d_k / 2 instead of sqrt(d_k)", attention_half_power),
    Entry("attention", "wrong", "scale-after-softmax",
          "the 1/sqrt(d_k) factor is applied to the weights after the softmax instead of to the "
          "scores before it, so rows sum to 1/sqrt(d_k) and the sharpness is unchanged",
          attention_scale_after_softmax),
    Entry("attention", "wrong", "unshifted-exp",
          "the softmax inside attention exponentiates the scaled scores without subtracting the "
          "row maximum, so large scores overflow to inf and the weights become NaN",
          attention_exp_unshifted),
    Entry("attention", "right", "einsum-logsumexp-float64", None, attention_right_einsum_lse),
    Entry("attention", "right", "ndindex-row-loops", None, attention_right_batch_loop),
]
