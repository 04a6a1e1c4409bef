"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, 6 wrong + 2 right each."""

import math

import numpy as np
from scipy import special

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # one max for the whole array
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    ex = np.exp(x - m)
    total = ex.sum(axis=axis)
    return ex / total


def softmax_naive(x, axis=-1):
    x = np.asarray(x, dtype=float)
    numer = np.exp(x)
    return numer / numer.sum(axis=axis, keepdims=True)


def softmax_moveaxis_once(x, axis=-1):
    arr = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    arr = arr - arr.max(axis=-1, keepdims=True)
    arr = np.exp(arr)
    arr = arr / arr.sum(axis=-1, keepdims=True)
    return arr


def softmax_neginf_to_zero(x, axis=-1):
    logits = np.nan_to_num(np.asarray(x, dtype=float), neginf=0.0)  # avoid NaNs from -inf
    top = logits.max(axis=axis, keepdims=True)
    w = np.exp(logits - top)
    return w / w.sum(axis=axis, keepdims=True)


def softmax_mean_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    centred = x - x.mean(axis=axis, keepdims=True)
    e = np.exp(centred)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_scipy(x, axis=-1):
    return special.softmax(np.asarray(x, dtype=np.float64), axis=axis)


def softmax_logsumexp_loop(x, axis=-1):
    a = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    out = np.zeros_like(a)
    for idx in np.ndindex(*a.shape[:-1]):
        row = a[idx]
        top = max(row)
        if top == -math.inf:
            continue
        lse = top + math.log(sum(math.exp(v - top) for v in row))
        out[idx] = [math.exp(v - lse) for v in row]
    return np.moveaxis(out, -1, axis)


# ============================================================================ attention
def attention_scale_dv(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    d_k = q.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d_k)
    s = np.exp(s - s.max(axis=-2, keepdims=True))
    weights = s / s.sum(axis=-2, keepdims=True)
    return np.matmul(weights, v), weights


def attention_np_dot(q, k, v):
    d_k = q.shape[-1]
    scores = np.dot(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.dot(p, v), p


def attention_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1/2
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_swapped_return(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = np.einsum("...qd,...kd->...qk", q, k) * scale
    logits = logits - logits.max(-1, keepdims=True)
    probs = np.exp(logits)
    probs = probs / probs.sum(-1, keepdims=True)
    out = np.einsum("...qk,...kd->...qd", probs, v)
    return probs, out


def attention_inline_softmax_no_max(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
    exp_scores = np.exp(scores)
    weights = exp_scores / exp_scores.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_einsum_lse(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    w = np.exp(s - special.logsumexp(s, axis=-1, keepdims=True))
    return np.einsum("...ij,...jv->...iv", w, v64), w


def attention_loops(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            row = np.array([np.dot(q[idx][i], k[idx][j]) for j in range(n_k)]) / math.sqrt(d_k)
            row = np.exp(row - row.max())
            row /= row.sum()
            weights[idx][i] = row
            out[idx][i] = sum(row[j] * v[idx][j] for j in range(n_k))
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to 0/0 = NaN", softmax_global_max),
    Entry("softmax", "wrong", "sum_no_keepdims",
          "the sum is taken without keepdims=True, so dividing by it broadcasts along the wrong "
          "axis (wrong values, or a broadcasting error when the shapes do not line up)",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum, so logits of 1e3-1e4 "
          "overflow to inf and the result is NaN", softmax_naive),
    Entry("softmax", "wrong", "moveaxis_not_restored",
          "moves `axis` to the end to normalise but never moves it back, so for any axis other "
          "than the last the result has the wrong shape", softmax_moveaxis_once),
    Entry("softmax", "wrong", "neginf_to_zero",
          "replaces -inf logits by 0 before the softmax to avoid NaN, so entries that should get "
          "weight 0 get a positive weight", softmax_neginf_to_zero),
    Entry("softmax", "wrong", "mean_shift",
          "centres the logits by their mean instead of their maximum: the shift does not bound "
          "the exponents, so large spreads overflow and -inf entries make the mean -inf (NaN)",
          softmax_mean_shift),
    Entry("softmax", "right", "scipy_special", None, softmax_scipy),
    Entry("softmax", "right", "logsumexp_python_loop", None, softmax_logsumexp_loop),

    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v), the value width, instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises each column (over the queries, axis -2) instead of each row over the keys",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "np_dot_not_batched",
          "np.dot is not a batched matrix product: on 3-D/4-D inputs it pairs every batch "
          "element with every other, giving a wrongly shaped result (or a shape error)",
          attention_np_dot),
    Entry("attention", "wrong", "precedence_sqrt",
          "`d_k ** 1/2` is (d_k ** 1) / 2, so the scores are divided by 2*d_k instead of sqrt(d_k)",
          attention_precedence),
    Entry("attention", "wrong", "returns_weights_first",
          "returns (weights, out) instead of (out, weights)", attention_swapped_return),
    Entry("attention", "wrong", "inline_softmax_no_max",
          "the softmax written inline skips the max subtraction, so large scores overflow exp "
          "and the weights become NaN", attention_inline_softmax_no_max),
    Entry("attention", "right", "einsum_logsumexp_float64", None, attention_einsum_lse),
    Entry("attention", "right", "explicit_loops", None, attention_loops),
]
