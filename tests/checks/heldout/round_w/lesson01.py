"""Held-out catalogue, lesson 01 (single head, numpy): softmax and attention.

Each function below is one learner's answer; wrong ones carry exactly one slip.
"""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max()  # stability shift
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    top = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - top)
    return e / np.sum(e, axis=axis)


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x, dtype=float)
    m = np.max(arr, axis=axis, keepdims=True)
    num = np.exp(arr - m)
    den = num.sum(-1, keepdims=True)
    return num / den


def softmax_scipy_default(x, axis=-1):
    logits = np.asarray(x, dtype=np.float64)
    if axis != -1:
        logits = np.moveaxis(logits, axis, -1)
    probs = scipy.special.softmax(logits)
    if axis != -1:
        probs = np.moveaxis(probs, -1, axis)
    return probs


def softmax_lse_grouping(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    s = np.sum(np.exp(x - m), axis=axis, keepdims=True)
    log_probs = x - m + np.log(s)
    return np.exp(log_probs)


def softmax_clip(x, axis=-1):
    z = np.clip(np.asarray(x, dtype=np.float64), -500.0, 500.0)  # keep exp finite
    ez = np.exp(z)
    return ez / ez.sum(axis=axis, keepdims=True)


def softmax_rowloop(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty_like(flat)
    for r, row in enumerate(flat):
        top = max(row)
        terms = [math.exp(v - top) for v in row]
        total = math.fsum(terms)
        out[r] = [t / total for t in terms]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - scipy.special.logsumexp(x, axis=axis, keepdims=True))


# ============================================================================ attention
def attention_sqrt_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = q @ k.T / math.sqrt(d_k)
    s = s - np.max(s, axis=-1, keepdims=True)
    p = np.exp(s)
    p /= np.sum(p, axis=-1, keepdims=True)
    return p @ v, p


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(d)
    logits = logits - logits.max(axis=-2, keepdims=True)
    weights = np.exp(logits)
    weights = weights / weights.sum(axis=-2, keepdims=True)
    return np.matmul(weights, v), weights


def attention_unstable(q, k, v):
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_pair_swapped(q, k, v):
    dk = q.shape[-1]
    scores = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(dk)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    out = weights @ v
    return weights, out


def attention_scale_after_softmax(q, k, v):
    raw = q @ np.swapaxes(k, -1, -2)
    raw = raw - raw.max(axis=-1, keepdims=True)
    w = np.exp(raw)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w / np.sqrt(q.shape[-1])  # temperature 1/sqrt(d_k)
    return w @ v, w


def attention_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    logits = np.einsum("...id,...jd->...ij", q64, k64) * (q64.shape[-1] ** -0.5)
    weights = scipy.special.softmax(logits, axis=-1)
    out = np.einsum("...ij,...jv->...iv", weights, v64)
    return out, weights


def attention_index_loop(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.zeros(lead + (n_q, d_v))
    wts = np.zeros(lead + (n_q, n_k))
    root = math.sqrt(q.shape[-1])
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            s = [float(np.dot(q[idx + (i,)], k[idx + (j,)])) / root for j in range(n_k)]
            top = max(s)
            e = [math.exp(t - top) for t in s]
            z = sum(e)
            for j in range(n_k):
                wts[idx + (i, j)] = e[j] / z
                out[idx + (i,)] += (e[j] / z) * v[idx + (j,)]
    return out, wts


ENTRIES = [
    Entry(exercise="softmax", kind="wrong", label="global_max_shift",
          mistake="the stability shift subtracts the maximum of the whole array, not of each slice "
          "along `axis`, so a slice far below the global maximum underflows to all zeros and "
          "0/0 gives NaN", func=softmax_global_max),
    Entry(exercise="softmax", kind="wrong", label="sum_without_keepdims",
          mistake="the denominator `np.sum(e, axis=axis)` drops the reduced axis, so it broadcasts "
          "against the wrong axis (a square input is divided column by column, other shapes "
          "raise a broadcasting ValueError)", func=softmax_sum_no_keepdims),
    Entry(exercise="softmax", kind="wrong", label="denominator_last_axis",
          mistake="the denominator always sums over the last axis (`sum(-1)`) whatever `axis` is asked, "
          "so softmax along axis 0 or 1 is normalised along the wrong axis",
          func=softmax_sum_last_axis),
    Entry(exercise="softmax", kind="wrong", label="scipy_default_axis_none",
          mistake="`scipy.special.softmax` is called without `axis`; its default is axis=None, so it "
          "normalises over the whole array instead of each slice", func=softmax_scipy_default),
    Entry(exercise="softmax", kind="wrong", label="logsumexp_sign_grouping",
          mistake="the log-softmax is written `x - m + log(s)` where `x - (m + log(s))` belongs: the "
          "log of the normaliser is added instead of subtracted", func=softmax_lse_grouping),
    Entry(exercise="softmax", kind="wrong", label="clip_instead_of_shift",
          mistake="overflow is avoided by clipping the logits to [-500, 500] instead of subtracting the "
          "maximum, so large logits collapse to ties and get wrong (equal) weights",
          func=softmax_clip),
    Entry(exercise="softmax", kind="right", label="python_row_loop", mistake=None, func=softmax_rowloop),
    Entry(exercise="softmax", kind="right", label="exp_minus_logsumexp", mistake=None, func=softmax_logsumexp),

    Entry(exercise="attention", kind="wrong", label="scale_by_sqrt_dv",
          mistake="the scores are divided by sqrt of the value width `v.shape[-1]` instead of "
          "sqrt(d_k), which differs whenever d_v != d_k", func=attention_sqrt_dv),
    Entry(exercise="attention", kind="wrong", label="k_dot_T",
          mistake="`k.T` reverses every axis of a batched array instead of swapping the last two, so "
          "batched inputs fail to multiply (2-D inputs happen to work)", func=attention_dot_T),
    Entry(exercise="attention", kind="wrong", label="softmax_over_queries",
          mistake="the softmax normalises along axis -2 (over the queries) instead of over the keys "
          "(axis -1), so the weight rows do not sum to 1", func=attention_softmax_over_queries),
    Entry(exercise="attention", kind="wrong", label="no_max_subtraction",
          mistake="the softmax exponentiates the raw scores without subtracting the row maximum, so "
          "large scores overflow to inf and give NaN weights", func=attention_unstable),
    Entry(exercise="attention", kind="wrong", label="returns_weights_first",
          mistake="returns `(weights, out)`: the pair is in the wrong order, the contract asks for "
          "`(out, weights)`", func=attention_pair_swapped),
    Entry(exercise="attention", kind="wrong", label="scale_after_softmax",
          mistake="the 1/sqrt(d_k) factor divides the weights after the softmax instead of the scores "
          "before it, so the weights no longer sum to 1 and the scores are unscaled",
          func=attention_scale_after_softmax),
    Entry(exercise="attention", kind="right", label="einsum_scipy_float64", mistake=None, func=attention_einsum_scipy),
    Entry(exercise="attention", kind="right", label="ndindex_scalar_loops", mistake=None, func=attention_index_loop),
]
