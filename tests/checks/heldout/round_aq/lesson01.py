"""Held-out learners' answers, lesson 01 (softmax, attention)."""

import math

import numpy as np
from scipy.special import logsumexp

from entry import Entry


# ============================================================================ softmax
def softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    biggest = np.max(x, axis=axis)
    e = np.exp(x - biggest)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max()
    ex = np.exp(shifted)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_unstable(x, axis=-1):
    exps = np.exp(np.asarray(x, dtype=float))
    return exps / exps.sum(axis=axis, keepdims=True)


def softmax_min_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    lo = np.min(x, axis=axis, keepdims=True)
    z = np.exp(x - lo)
    return z / np.sum(z, axis=axis, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # avoid inf - inf
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_np_maximum(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.maximum(x, axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_via_logsumexp(x, axis=-1):
    x = np.asarray(x)
    log_norm = logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - log_norm)


def softmax_row_loops(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    result = np.zeros_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        top = -math.inf
        for value in row:
            if value > top:
                top = value
        if top == -math.inf:
            continue
        exps = [math.exp(value - top) for value in row]
        total = math.fsum(exps)
        for c, e in enumerate(exps):
            result[r, c] = e / total
    return np.moveaxis(result.reshape(moved.shape), -1, axis).astype(np.asarray(x).dtype)


# ============================================================================ attention
def attention_no_scale(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(d)
    s = np.exp(s - np.max(s, axis=-1, keepdims=True))
    weights = s / np.sum(s, axis=-1, keepdims=True)
    return np.matmul(weights, v), weights


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / math.sqrt(d_k)
    m = scores.max(axis=-1, keepdims=True)
    p = np.exp(scores - m)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v, p


def attention_softmax_queries(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = scale * (q @ np.swapaxes(k, -1, -2))
    logits = logits - logits.max(axis=-2, keepdims=True)
    ex = np.exp(logits)
    attn = ex / ex.sum(axis=-2, keepdims=True)
    return attn @ v, attn


def attention_pow_precedence(q, k, v):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / d_k ** 1/2
    s = s - s.max(-1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(-1, keepdims=True)
    return a @ v, a


def attention_returns_scores(q, k, v):
    dk = q.shape[-1]
    scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(dk)
    shifted = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    out = weights @ v
    return out, scores


def attention_einsum_scipy(q, k, v):
    from scipy.special import softmax as sp_softmax
    q, k, v = (np.asarray(a) for a in (q, k, v))
    logits = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    w = sp_softmax(logits, axis=-1)
    return np.einsum("...ij,...je->...ie", w, v), w


def attention_logaddexp(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.matmul(q64, np.moveaxis(k64, -1, -2)) * (q64.shape[-1] ** -0.5)
    lse = np.logaddexp.reduce(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - lse)
    out = np.matmul(weights, v64)
    dtype = np.result_type(q, k, v)
    return out.astype(dtype), weights.astype(dtype)


ENTRIES = [
    Entry("softmax", "wrong", "max-without-keepdims",
          "the row maximum is taken without keepdims=True, so it does not broadcast back "
          "against x: non-square inputs raise and square ones subtract the maxima of the "
          "wrong slices", softmax_no_keepdims),
    Entry("softmax", "wrong", "global-max-shift",
          "it subtracts the maximum of the whole array instead of each slice's maximum along "
          "axis, so a slice far below the global maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "no-max-subtraction",
          "it exponentiates the raw logits without subtracting the maximum, so logits of "
          "magnitude 1e4 overflow to inf and give NaN", softmax_unstable),
    Entry("softmax", "wrong", "min-shift",
          "it subtracts the minimum instead of the maximum along axis, so every exponent is "
          ">= 0 and large logits overflow (and a -inf minimum gives NaN)", softmax_min_shift),
    Entry("softmax", "wrong", "neg-inf-replaced-by-zero",
          "to avoid inf - inf it replaces -inf logits by 0 before exponentiating, so masked "
          "entries get a positive weight instead of 0", softmax_inf_to_zero),
    Entry("softmax", "wrong", "np-maximum-not-max",
          "it uses np.maximum(x, axis), the elementwise maximum of x and the number axis, "
          "instead of the reduction np.max(x, axis=axis), so nothing like the row maximum is "
          "subtracted and the result is not the softmax", softmax_np_maximum),
    Entry("softmax", "right", "scipy-logsumexp", None, softmax_via_logsumexp),
    Entry("softmax", "right", "python-row-loops", None, softmax_row_loops),

    Entry("attention", "wrong", "no-sqrt-dk-scale",
          "the scores q k^T are not divided by sqrt(d_k)", attention_no_scale),
    Entry("attention", "wrong", "scale-by-d-v",
          "the scores are divided by sqrt(d_v) (v's last axis) instead of sqrt(d_k), which "
          "differs whenever the value width differs from the key width", attention_scale_dv),
    Entry("attention", "wrong", "dot-T-transpose",
          "k.T reverses every axis instead of swapping the last two, so it only works for "
          "2-D inputs and breaks (raises) with batch or head axes", attention_dot_T),
    Entry("attention", "wrong", "softmax-over-queries",
          "the softmax normalises along axis -2 (over the queries) instead of axis -1 (over "
          "the keys)", attention_softmax_queries),
    Entry("attention", "wrong", "pow-precedence",
          "d_k ** 1/2 is (d_k ** 1) / 2 by operator precedence, so the scores are divided by "
          "2 d_k instead of sqrt(d_k)", attention_pow_precedence),
    Entry("attention", "wrong", "returns-scores-not-weights",
          "it returns the scaled scores (before the softmax) as the weights instead of the "
          "softmax weights", attention_returns_scores),
    Entry("attention", "right", "einsum-scipy-softmax", None, attention_einsum_scipy),
    Entry("attention", "right", "float64-logaddexp", None, attention_logaddexp),
]
