"""Held-out catalogue, lesson 01 (single head, numpy): softmax and attention.

Each function below is one learner's own answer; wrong ones carry exactly one slip.
"""

import math

import numpy as np
from scipy.special import logsumexp
from scipy.special import softmax as sp_softmax

from entry import Entry


# ============================================================== softmax: wrong answers
def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max())
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_max_last_axis(x, axis=-1):
    arr = np.asarray(x, dtype=float)
    top = arr.max(axis=-1, keepdims=True)
    ex = np.exp(arr - top)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_neg_inf_to_zero(x, axis=-1):
    z = np.asarray(x, dtype=float)
    z = np.where(np.isinf(z), 0.0, z)  # get rid of the infinities before exp
    z = z - z.max(axis=axis, keepdims=True)
    ez = np.exp(z)
    return ez / ez.sum(axis=axis, keepdims=True)


def softmax_expm1(x, axis=-1):
    logits = np.asarray(x, dtype=float)
    m = np.max(logits, axis=axis, keepdims=True)
    w = np.expm1(logits - m)  # "more accurate exp"
    return w / np.sum(w, axis=axis, keepdims=True)


def softmax_moveaxis_not_back(x, axis=-1):
    a = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    a = a - a.max(axis=-1, keepdims=True)
    num = np.exp(a)
    return num / num.sum(axis=-1, keepdims=True)


# ============================================================== softmax: right answers
def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def softmax_python_rows(x, axis=-1):
    def one_row(row):
        top = max(row)
        exps = [math.exp(v - top) for v in row]
        total = math.fsum(exps)
        return np.array([e / total for e in exps])

    return np.apply_along_axis(one_row, axis, np.asarray(x, dtype=np.float64))


# ============================================================== attention: wrong answers
def attention_scale_by_dk(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_by_dv(q, k, v):
    scale = 1.0 / np.sqrt(v.shape[-1])
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) * scale
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)
    return np.matmul(p, v), p


def attention_dot_T(q, k, v):
    scores = (q @ k.T) / math.sqrt(q.shape[-1])
    m = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - m)
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d)
    s = s - s.max(axis=-2, keepdims=True)
    e = np.exp(s)
    a = e / e.sum(axis=-2, keepdims=True)
    return a @ v, a


def attention_returns_scores(q, k, v):
    def stable_softmax(s, axis=-1):
        s = s - s.max(axis=axis, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=axis, keepdims=True)

    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = stable_softmax(scores, axis=-1)
    out = weights @ v
    return out, scores


def attention_unstable_exp(q, k, v):
    kt = np.swapaxes(k, -1, -2)
    s = (q @ kt) / np.sqrt(k.shape[-1])
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


# ============================================================== attention: right answers
def attention_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    w = sp_softmax(s, axis=-1)
    return np.einsum("...ij,...jd->...id", w, v64), w


def attention_loops(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    inv = 1.0 / math.sqrt(q.shape[-1])
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            row = [float(np.dot(qb[idx][i], kb[idx][j])) * inv for j in range(n_k)]
            top = max(row)
            ex = [math.exp(r - top) for r in row]
            tot = sum(ex)
            for j in range(n_k):
                weights[idx + (i, j)] = ex[j] / tot
                out[idx + (i,)] += weights[idx + (i, j)] * vb[idx][j]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "sum_without_keepdims",
          "the row sums are taken without keepdims=True, so the denominator broadcasts along "
          "the wrong axis (wrong values on square inputs, a shape error otherwise)",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "global_max_shift",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "max_along_last_axis",
          "the maximum is taken along the last axis whatever `axis` is, so for axis=0 or -2 "
          "it subtracts a value that varies inside the normalised slice",
          softmax_max_last_axis),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "replaces -inf logits by 0 before exponentiating, so masked entries get a positive "
          "weight instead of weight 0",
          softmax_neg_inf_to_zero),
    Entry("softmax", "wrong", "expm1_for_exp",
          "uses np.expm1, which computes exp(x) - 1, not a more accurate exp: the weights are "
          "shifted (the maximum gets 0) and can be negative",
          softmax_expm1),
    Entry("softmax", "wrong", "moveaxis_not_undone",
          "moves `axis` to the end to normalise but never moves it back, so for axis != -1 "
          "the result has the wrong shape / layout",
          softmax_moveaxis_not_back),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_rows_apply_along_axis", None, softmax_python_rows),

    Entry("attention", "wrong", "scale_by_d_k",
          "divides the scores by d_k instead of sqrt(d_k)", attention_scale_by_dk),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales by 1/sqrt(d_v) (the values' width, v.shape[-1]) instead of 1/sqrt(d_k)",
          attention_scale_by_dv),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with `.T`, which reverses every axis, so inputs with batch or head "
          "axes fail (or mix batches) instead of swapping the last two axes",
          attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the scores over the query axis (-2) instead of over the keys (-1)",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "returns_scores_as_weights",
          "returns the scaled scores (before softmax) as the weights; the output itself is "
          "right", attention_returns_scores),
    Entry("attention", "wrong", "softmax_without_max_shift",
          "exponentiates the scores without subtracting the row maximum, so large scores "
          "overflow to inf/inf = NaN", attention_unstable_exp),
    Entry("attention", "right", "einsum_scipy_float64", None, attention_einsum_scipy),
    Entry("attention", "right", "python_loops", None, attention_loops),
]
