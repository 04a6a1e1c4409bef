"""Held-out catalogue, lesson 01 (single-head attention, numpy): softmax, attention."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry


# ============================================================================ softmax
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def softmax_global_max(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    shifted = arr - np.max(arr)  # "subtract the max" for stability
    ex = np.exp(shifted)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    peak = x.max(axis=axis, keepdims=True)
    exps = np.exp(x - peak)
    return exps / exps.sum(axis=-1, keepdims=True)


def softmax_denominator_unshifted(x, axis=-1):
    x = np.asarray(x, dtype=float)
    top = np.max(x, axis=axis, keepdims=True)
    numer = np.exp(x - top)
    denom = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numer / denom


def softmax_moveaxis_not_restored(x, axis=-1):
    z = np.moveaxis(np.asarray(x, dtype=float), axis, -1)  # work on the last axis
    z = z - z.max(axis=-1, keepdims=True)
    w = np.exp(z)
    w /= w.sum(axis=-1, keepdims=True)
    return w


def softmax_scipy_no_axis(x, axis=-1):
    return scipy.special.softmax(np.asarray(x, dtype=float))


def softmax_right_logsumexp(x, axis=-1):
    arr = np.asarray(x)
    lse = scipy.special.logsumexp(arr, axis=axis, keepdims=True)
    return np.exp(arr - lse)


def softmax_right_rowloop(x, axis=-1):
    def one_row(row):
        row = row.astype(np.float64)
        biggest = max(row)
        weights = [math.exp(r - biggest) for r in row]
        total = sum(weights)
        return np.array([w / total for w in weights])

    arr = np.asarray(x)
    return np.apply_along_axis(one_row, axis, arr).astype(arr.dtype)


# ============================================================================ attention
def attention_sqrt_precedence(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    q, k, v = map(np.asarray, (q, k, v))
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(q.shape[-1])
    s = s - s.max(axis=-2, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-2, keepdims=True)
    return np.matmul(p, v), p


def attention_dot_T(q, k, v):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    v = np.asarray(v, dtype=float)
    scores = q @ k.T / math.sqrt(k.shape[-1])
    scores -= scores.max(axis=-1, keepdims=True)
    attn = np.exp(scores)
    attn /= attn.sum(axis=-1, keepdims=True)
    return attn @ v, attn


def attention_no_shift(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    logits = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    num = np.exp(logits)
    weights = num / num.sum(axis=-1, keepdims=True)
    out = np.einsum("...qk,...kd->...qd", weights, v)
    return out, weights


def attention_sum_no_keepdims(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    scale = 1.0 / np.sqrt(q.shape[-1])
    sc = (q @ np.swapaxes(k, -1, -2)) * scale
    sc = sc - np.max(sc, axis=-1, keepdims=True)
    ex = np.exp(sc)
    wts = ex / np.sum(ex, axis=-1)
    return wts @ v, wts


def attention_scale_by_dv(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    d = v.shape[-1]
    scores = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(d)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_right_einsum64(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q64, k64) * q64.shape[-1] ** -0.5
    scores -= np.max(scores, axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= np.einsum("...ij->...i", p)[..., None]
    out = np.einsum("...ij,...jd->...id", p, v64)
    dt = np.result_type(np.asarray(q).dtype, np.float32)
    return out.astype(dt), p.astype(dt)


def attention_right_torch(q, k, v):
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    logits = tq @ tk.transpose(-1, -2) / math.sqrt(tq.shape[-1])
    probs = torch.softmax(logits, dim=-1)
    return (probs @ tv).numpy(), probs.numpy()


ENTRIES = [
    Entry("softmax", "wrong", "max-without-keepdims",
          "the row maximum is taken without keepdims=True, so the (reduced) maxima broadcast "
          "against the wrong axis: a shape error on non-square inputs and wrong numbers on "
          "square ones", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global-max-shift",
          "it subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the global max underflows to all zeros and gives 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum-hardcoded-last-axis",
          "the maximum is taken along `axis` but the normalising sum is always over the last "
          "axis (axis=-1 hard-coded), so for any other axis the slices do not sum to 1",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "denominator-unshifted",
          "the numerator is exp(x - max) but the denominator sums exp(x) without the shift, so "
          "the result is off by a factor exp(max) and overflows for large logits",
          softmax_denominator_unshifted),
    Entry("softmax", "wrong", "moveaxis-not-undone",
          "it moves `axis` to the end to work on it but never moves it back, so for axis != -1 "
          "the result has the axes in the wrong order (wrong shape)",
          softmax_moveaxis_not_restored),
    Entry("softmax", "wrong", "scipy-softmax-no-axis",
          "scipy.special.softmax is called without axis=, and its default axis=None normalises "
          "over the whole array instead of along `axis`", softmax_scipy_no_axis),
    Entry("softmax", "right", "logsumexp", None, softmax_right_logsumexp),
    Entry("softmax", "right", "apply-along-axis-python", None, softmax_right_rowloop),

    Entry("attention", "wrong", "sqrt-as-power-one-half",
          "the scale is written `/ d_k ** 1 / 2`: ** binds before /, so the scores are divided "
          "by d_k and then by 2 (by 2*d_k) instead of by sqrt(d_k)", attention_sqrt_precedence),
    Entry("attention", "wrong", "softmax-over-queries",
          "the softmax runs over axis -2 (the queries) instead of axis -1 (the keys), so the "
          "columns, not the rows, of the weights sum to 1", attention_softmax_over_queries),
    Entry("attention", "wrong", "k-dot-T",
          "k.T reverses every axis, not just the last two, so with batch or head axes the "
          "product is wrong or fails; np.swapaxes(k, -1, -2) is needed", attention_dot_T),
    Entry("attention", "wrong", "no-max-subtraction",
          "the softmax exponentiates the raw scores without subtracting the row maximum, so "
          "large scores overflow to inf and give NaN weights", attention_no_shift),
    Entry("attention", "wrong", "row-sum-without-keepdims",
          "the row sums are taken without keepdims=True, so dividing broadcasts them along the "
          "wrong axis (a shape error, or wrong weights when N_q == N_k)",
          attention_sum_no_keepdims),
    Entry("attention", "wrong", "scale-by-d_v",
          "the scale uses v.shape[-1] (d_v) instead of the key size d_k, which is wrong "
          "whenever d_v != d_k", attention_scale_by_dv),
    Entry("attention", "right", "einsum-float64", None, attention_right_einsum64),
    Entry("attention", "right", "torch-softmax", None, attention_right_torch),
]
