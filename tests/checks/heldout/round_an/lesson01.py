"""Held-out catalogue, lesson 01 (single-head attention): softmax, attention.

Each function is one learner's answer; wrong ones carry exactly one slip.
"""

import math

import numpy as np
from scipy.special import logsumexp, softmax as sp_softmax

from entry import Entry


# ============================================================================ softmax
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max()
    ex = np.exp(shifted)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x, dtype=float)
    top = arr.max(axis=axis, keepdims=True)
    num = np.exp(arr - top)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_inf_to_zero(x, axis=-1):
    z = np.array(x, dtype=float)
    z[np.isinf(z)] = 0.0  # avoid NaN from the infinities
    z = z - np.max(z, axis=axis, keepdims=True)
    ez = np.exp(z)
    return ez / np.sum(ez, axis=axis, keepdims=True)


def softmax_lse_no_shift_back(x, axis=-1):
    x = np.asarray(x, dtype=float)
    mx = np.max(x, axis=axis, keepdims=True)
    lse = np.log(np.sum(np.exp(x - mx), axis=axis, keepdims=True))
    return np.exp(x - lse)


def softmax_subtract_min(x, axis=-1):
    vals = np.asarray(x, dtype=float)
    low = np.min(vals, axis=axis, keepdims=True)
    e = np.exp(vals - low)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_right_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def softmax_right_row_loops(x, axis=-1):
    arr = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    out = np.zeros_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        finite = [v for v in row if v != -math.inf]
        if not finite:
            continue
        top = max(finite)
        weights = [0.0 if v == -math.inf else math.exp(v - top) for v in row]
        total = math.fsum(weights)
        out[r] = [w / total for w in weights]
    return np.moveaxis(out.reshape(arr.shape), -1, axis)


# ============================================================================ attention
def attention_no_scale(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = q @ np.swapaxes(k, -1, -2)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(d)
    logits = logits - logits.max(axis=-2, keepdims=True)
    p = np.exp(logits)
    p = p / p.sum(axis=-2, keepdims=True)
    return np.matmul(p, v), p


def attention_scale_by_dv(q, k, v):
    scale = 1.0 / np.sqrt(v.shape[-1])
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    out = np.einsum("...qk,...kd->...qd", weights, v)
    return out, weights


def attention_power_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = (q @ np.swapaxes(k, -1, -2)) / (d_k ** 1/2)
    shifted = scores - scores.max(axis=-1, keepdims=True)
    ex = np.exp(shifted)
    weights = ex / ex.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_sum_raw_scores(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    out = scores @ v
    return out, weights


def attention_right_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    w = sp_softmax(s, axis=-1)
    return np.einsum("...ij,...jv->...iv", w, v64), w


def attention_right_batch_loop(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k)
    kf = k.reshape(-1, n_k, d_k)
    vf = v.reshape(-1, n_k, d_v)
    outs = np.empty((qf.shape[0], n_q, d_v))
    ws = np.empty((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            row = np.dot(kf[b], qf[b, i]) / math.sqrt(d_k)
            row = np.exp(row - row.max())
            row /= row.sum()
            ws[b, i] = row
            outs[b, i] = np.dot(row, vf[b])
    return outs.reshape(lead + (n_q, d_v)), ws.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("softmax", "wrong", "max-without-keepdims",
          "the row maximum is taken without keepdims=True, so it broadcasts against the wrong "
          "axis: on square inputs each entry gets another row's maximum subtracted (wrong "
          "values), on other shapes the subtraction raises a broadcasting error",
          softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global-max-shift",
          "it subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the global maximum underflows to all zeros and gives 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "normalise-last-axis",
          "the maximum is taken along `axis` but the sum is hard-coded to axis=-1, so for "
          "axis=0 (or any axis other than the last) the slices do not sum to 1",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "inf-replaced-by-zero",
          "it overwrites the -inf entries with 0 before exponentiating, so masked entries get a "
          "positive weight instead of weight 0",
          softmax_inf_to_zero),
    Entry("softmax", "wrong", "logsumexp-forgets-max",
          "in the log-sum-exp route it computes log(sum(exp(x - max))) but forgets to add the "
          "maximum back, so exp(x - lse) is off by a factor exp(max) and overflows for large "
          "logits",
          softmax_lse_no_shift_back),
    Entry("softmax", "wrong", "shift-by-min",
          "it subtracts the minimum instead of the maximum, so every exponent is >= 0 and "
          "logits of 1e4 (or any -inf entry) overflow to inf and give NaN",
          softmax_subtract_min),
    Entry("softmax", "right", "scipy-logsumexp", None, softmax_right_logsumexp),
    Entry("softmax", "right", "python-row-loops", None, softmax_right_row_loops),

    Entry("attention", "wrong", "no-sqrt-scale",
          "the scores q k^T are not divided by sqrt(d_k), so the weights are too peaked",
          attention_no_scale),
    Entry("attention", "wrong", "k-dot-T",
          "it transposes k with k.T, which reverses all axes: fine for 2-D inputs but with "
          "batch or head axes the product raises or mixes the batch axes",
          attention_k_dot_T),
    Entry("attention", "wrong", "softmax-over-queries",
          "the softmax is taken along axis -2 (over the queries) instead of along the keys, so "
          "the columns of the weights sum to 1 instead of the rows",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "scale-by-d_v",
          "the scores are scaled by 1/sqrt(d_v) (v's last axis) instead of 1/sqrt(d_k), which "
          "is wrong whenever d_v != d_k",
          attention_scale_by_dv),
    Entry("attention", "wrong", "power-precedence",
          "`d_k ** 1/2` is (d_k ** 1) / 2 by operator precedence, so the scores are divided by "
          "d_k/2 instead of sqrt(d_k)",
          attention_power_precedence),
    Entry("attention", "wrong", "sum-of-raw-scores",
          "the output is computed as scores @ v with the unnormalised scores instead of the "
          "softmax weights (the weights it returns are right)",
          attention_sum_raw_scores),
    Entry("attention", "right", "einsum-scipy-float64", None, attention_right_einsum_scipy),
    Entry("attention", "right", "per-query-loops", None, attention_right_batch_loop),
]
