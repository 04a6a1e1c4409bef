"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, wrong and right."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- softmax (wrong)
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # one max for the whole array
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    ex = np.exp(x - m)
    return ex / ex.sum(axis=axis)


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    top = arr.max(axis=axis, keepdims=True)
    num = np.exp(arr - top)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_clip(x, axis=-1):
    z = np.clip(np.asarray(x, dtype=float), -500.0, 500.0)  # keep exp in range
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_shift_min(x, axis=-1):
    x = np.asarray(x, dtype=float)
    lo = np.min(x, axis=axis, keepdims=True)
    lo = np.where(np.isfinite(lo), lo, 0.0)
    e = np.exp(x - lo)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_log_sign(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    s = np.sum(np.exp(x - m), axis=axis, keepdims=True)
    return np.exp(x - m + np.log(s))


# ----------------------------------------------------------------------------- softmax (right)
def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(np.asarray(x, dtype=np.float64), axis=axis)


def softmax_loop_moveaxis(x, axis=-1):
    a = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = a.reshape(-1, a.shape[-1])
    out = np.zeros_like(flat)
    for r, row in enumerate(flat):
        big = max(row)
        if big == -math.inf:
            continue
        ws = [math.exp(v - big) for v in row]
        tot = math.fsum(ws)
        out[r] = [w / tot for w in ws]
    return np.moveaxis(out.reshape(a.shape), -1, axis)


# ----------------------------------------------------------------------------- attention (wrong)
def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-2, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-2, keepdims=True)
    return p @ v, p


def attention_k_dot_T(q, k, v):
    dk = q.shape[-1]
    logits = (q @ k.T) / math.sqrt(dk)
    logits -= logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_no_max(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_times_sqrt(q, k, v):
    d_k = q.shape[-1]
    scores = (q @ np.swapaxes(k, -1, -2)) * np.sqrt(d_k)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_global_sum(q, k, v):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum()
    return w @ v, w


# ----------------------------------------------------------------------------- attention (right)
def attention_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    weights = scipy.special.softmax(scores, axis=-1)
    out = np.einsum("...ij,...jd->...id", weights, v64)
    return out, weights


def attention_quarter_root_lse(q, k, v):
    c = q.shape[-1] ** -0.25  # split the 1/sqrt(d) between q and k
    s = (q * c) @ np.swapaxes(k * c, -1, -2)
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    w = np.exp(s - lse)
    return np.matmul(w, v), w


ENTRIES = [
    Entry("softmax", "wrong", "global_max", "subtracts the largest entry of the whole array "
          "instead of each slice's maximum, so slices far below it underflow to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_no_keepdims", "the sum of the exponentials drops keepdims, so "
          "the totals no longer broadcast back along `axis` (raises, or divides by the wrong "
          "slice's total on square inputs)", softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "sum_last_axis", "normalises with a sum over the last axis whatever "
          "`axis` is, so softmax along any other axis does not sum to 1", softmax_sum_last_axis),
    Entry("softmax", "wrong", "clip_logits", "clips the logits to +-500 instead of subtracting "
          "the maximum, so large logits are flattened and their differences lost",
          softmax_clip),
    Entry("softmax", "wrong", "shift_by_min", "shifts by the minimum instead of the maximum, so "
          "the exponents become large and positive and overflow to inf/inf = NaN",
          softmax_shift_min),
    Entry("softmax", "wrong", "log_domain_sign", "in the log domain writes x - m + log(sum) "
          "where x - (m + log(sum)) belongs, so it multiplies by the total instead of "
          "dividing", softmax_log_sign),
    Entry("softmax", "right", "scipy_special", None, softmax_scipy),
    Entry("softmax", "right", "loop_fsum", None, softmax_loop_moveaxis),
    Entry("attention", "wrong", "scale_by_d_v", "scales the scores by 1/sqrt of the value width "
          "d_v (v.shape[-1]) instead of the key width d_k", attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries", "normalises along axis -2 (over the "
          "queries) instead of over the keys, so the weight rows do not sum to 1",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T", "uses k.T, which reverses every axis of a batched k "
          "instead of swapping the last two (fails on batch/head axes)", attention_k_dot_T),
    Entry("attention", "wrong", "no_max_shift", "exponentiates the raw scores without "
          "subtracting the row maximum, so large scores overflow to inf/inf = NaN",
          attention_no_max),
    Entry("attention", "wrong", "multiply_sqrt_dk", "multiplies the scores by sqrt(d_k) "
          "instead of dividing by it", attention_times_sqrt),
    Entry("attention", "wrong", "sum_over_everything", "divides the exponentials by their sum "
          "over the whole array instead of each query row's sum", attention_global_sum),
    Entry("attention", "right", "einsum_scipy_float64", None, attention_einsum_scipy),
    Entry("attention", "right", "quarter_root_logsumexp", None, attention_quarter_root_lse),
]
