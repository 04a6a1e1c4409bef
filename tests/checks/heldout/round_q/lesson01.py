"""Round q, lesson 01 (single head, numpy): softmax and attention.

Six wrong answers (one slip each) and two right answers (unusual routes) per exercise.
"""

import math

import numpy as np
from scipy.special import logsumexp

from entry import Entry


# ============================================================================ softmax
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    peak = np.max(x, axis=axis)  # keepdims forgotten
    e = np.exp(x - peak)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x, dtype=float)
    shifted = arr - arr.max(axis=axis, keepdims=True)
    num = np.exp(shifted)
    den = num.sum(axis=-1, keepdims=True)  # normaliser always along the last axis
    return num / den


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    z = np.exp(x - np.max(x))  # one maximum for the whole array
    return z / z.sum(axis=axis, keepdims=True)


def softmax_exp_paren(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x) - m  # parenthesis closed too early
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_moveaxis_not_back(x, axis=-1):
    a = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    a = a - a.max(axis=-1, keepdims=True)
    w = np.exp(a)
    w /= w.sum(axis=-1, keepdims=True)
    return w  # never moved back to `axis`


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # "clean" the infinities before exponentiating
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    lse = logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


def softmax_apply_along(x, axis=-1):
    def one(row):
        finite = row[np.isfinite(row)]
        top = finite.max() if finite.size else 0.0
        vals = [math.exp(v - top) if v != -math.inf else 0.0 for v in row]
        tot = math.fsum(vals)
        return np.array([v / tot for v in vals])

    return np.apply_along_axis(one, axis, np.asarray(x, dtype=np.float64))


# ============================================================================ attention
def _sm(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_dv(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d = v.shape[-1]  # size taken from v, not from q/k
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    weights = _sm(scores)
    return weights @ v, weights


def attention_dot_T(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ k.T / math.sqrt(q.shape[-1])  # .T reverses every axis
    weights = _sm(scores)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = s - s.max(axis=-2, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-2, keepdims=True)  # normalised down the columns
    return p @ v, p


def attention_pow_precedence(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d_k = q.shape[-1]
    scale = 1 / d_k ** 1 / 2  # meant 1 / d_k ** (1 / 2)
    w = _sm((q @ np.swapaxes(k, -1, -2)) * scale)
    return w @ v, w


def attention_no_max_shift(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return np.matmul(weights, v), weights


def attention_einsum_index(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    w = _sm(s)
    out = np.einsum("...ij,...id->...id", w, v)  # v indexed by the query index i
    return out, w


def attention_loops(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d)).reshape(-1, n_q, d)
    kb = np.broadcast_to(k, lead + (n_k, d)).reshape(-1, n_k, d)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    out = np.zeros((qb.shape[0], n_q, d_v))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            row = np.array([np.dot(qb[b, i], kb[b, j]) for j in range(n_k)]) / math.sqrt(d)
            row = np.exp(row - row.max())
            row /= row.sum()
            wts[b, i] = row
            out[b, i] = row @ vb[b]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


def attention_lse_einsum(q, k, v):
    q = np.asarray(q, dtype=np.float64) / np.sqrt(np.shape(q)[-1])
    scores = np.einsum("...qd,...kd->...qk", q, np.asarray(k, dtype=np.float64))
    weights = np.exp(scores - logsumexp(scores, axis=-1, keepdims=True))
    return np.einsum("...qk,...kv->...qv", weights, np.asarray(v, dtype=np.float64)), weights


ENTRIES = [
    Entry("softmax", "wrong", "max-without-keepdims",
          "The row maximum is taken without keepdims=True, so it no longer lines up with the "
          "slices of x: it raises for non-square arrays and subtracts the wrong slice's "
          "maximum on square ones.", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "sum-on-last-axis",
          "The maximum is taken along `axis` but the normaliser is always summed along the "
          "last axis (axis=-1 hard-coded), so for any other axis the slices do not sum to 1.",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "global-max",
          "It subtracts one maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the global maximum underflows to 0/0 = NaN.", softmax_global_max),
    Entry("softmax", "wrong", "exp-parenthesis",
          "The parenthesis closes too early: np.exp(x) - m instead of np.exp(x - m), so the "
          "maximum is subtracted after exponentiating (wrong values and overflow).",
          softmax_exp_paren),
    Entry("softmax", "wrong", "moveaxis-not-restored",
          "It moves `axis` to the end with np.moveaxis but never moves it back, so for any "
          "axis other than the last the result comes back transposed.",
          softmax_moveaxis_not_back),
    Entry("softmax", "wrong", "inf-replaced-by-zero",
          "It replaces -inf entries by 0 before exponentiating, so those entries get a "
          "positive weight instead of weight 0.", softmax_inf_to_zero),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "apply-along-axis-fsum", None, softmax_apply_along),

    Entry("attention", "wrong", "scale-by-d_v",
          "The scores are divided by sqrt(d_v) (v's last axis) instead of sqrt(d_k).",
          attention_scale_dv),
    Entry("attention", "wrong", "dot-T-on-batches",
          "It transposes k with .T, which reverses every axis: fine for 2-D inputs but wrong "
          "(or a shape error) as soon as there are batch or head axes; swapaxes(-1, -2) "
          "belongs there.", attention_dot_T),
    Entry("attention", "wrong", "softmax-over-queries",
          "The softmax normalises along axis -2 (over the queries) instead of over the keys, "
          "so the rows of the weights do not sum to 1.", attention_softmax_over_queries),
    Entry("attention", "wrong", "pow-precedence",
          "Operator precedence: 1 / d_k ** 1 / 2 is (1 / d_k) / 2, not 1 / sqrt(d_k), so the "
          "scores are scaled by 1/(2 d_k).", attention_pow_precedence),
    Entry("attention", "wrong", "no-max-subtraction",
          "The softmax exponentiates the scores without subtracting the row maximum, so large "
          "scores overflow to inf and give NaN weights.", attention_no_max_shift),
    Entry("attention", "wrong", "einsum-wrong-index",
          "In the weighted sum the einsum indexes v by the query index i instead of the key "
          "index j ('...ij,...id->...id'), so it raises when N_q != N_k and otherwise returns "
          "v itself instead of the weighted average.", attention_einsum_index),
    Entry("attention", "right", "explicit-loops", None, attention_loops),
    Entry("attention", "right", "einsum-logsumexp", None, attention_lse_einsum),
]
