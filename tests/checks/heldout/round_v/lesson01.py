"""Held-out catalogue, lesson 01 (single-head attention): softmax, attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # one shift for the whole array
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_no_keepdims(x, axis=-1):
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis)


def softmax_last_axis_sum(x, axis=-1):
    x = np.asarray(x)
    ex = np.exp(x - x.max(axis=axis, keepdims=True))
    return ex / ex.sum(axis=-1, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    z = np.asarray(x, dtype=float)
    z = np.where(np.isinf(z), 0.0, z)  # get rid of the infinities before exp
    z = z - z.max(axis=axis, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=axis, keepdims=True)


def softmax_subtract_min(x, axis=-1):
    lo = np.min(x, axis=axis, keepdims=True)
    w = np.exp(x - lo)
    return w / np.sum(w, axis=axis, keepdims=True)


def softmax_scipy_default_axis(x, axis=-1):
    return scipy.special.softmax(np.asarray(x))


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - scipy.special.logsumexp(x, axis=axis, keepdims=True))


def softmax_row_loops(x, axis=-1):
    a = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = a.reshape(-1, a.shape[-1])
    out = np.zeros_like(flat)
    for r, row in enumerate(flat):
        top = max(row)
        exps = [math.exp(v - top) if v != -math.inf else 0.0 for v in row]
        tot = sum(exps)
        out[r] = [e / tot for e in exps]
    return np.moveaxis(out.reshape(a.shape), -1, axis)


# ============================================================================ attention
def attention_swapped_return(q, k, v):
    d = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w, w @ v


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_precedence(q, k, v):
    d_k = q.shape[-1]
    kt = np.swapaxes(k, -1, -2)
    scores = q @ kt / d_k ** 1 / 2
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    ew = np.exp(scores)
    weights = ew / np.sum(ew, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = np.einsum("...qd,...kd->...qk", q, k) * scale
    s = s - s.max(axis=-2, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-2, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, v), p


def attention_naive_exp(q, k, v):
    d_k = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    out = np.matmul(weights, v)
    return out, weights


def attention_np_dot(q, k, v):
    d_k = q.shape[-1]
    scores = np.dot(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.dot(weights, v), weights


def attention_einsum_scipy(q, k, v):
    q, k, v = (np.asarray(a) for a in (q, k, v))
    logits = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    weights = scipy.special.softmax(logits, axis=-1)
    return np.einsum("...ij,...je->...ie", weights, v), weights


def attention_query_loops(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k)
    kf = k.reshape(-1, n_k, d_k)
    vf = v.reshape(-1, n_k, d_v)
    outs = np.zeros((qf.shape[0], n_q, d_v))
    ws = np.zeros((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            sc = [float(qf[b, i] @ kf[b, j]) / math.sqrt(d_k) for j in range(n_k)]
            top = max(sc)
            ex = [math.exp(s - top) for s in sc]
            z = sum(ex)
            for j in range(n_k):
                ws[b, i, j] = ex[j] / z
                outs[b, i] += ws[b, i, j] * vf[b, j]
    return outs.reshape(lead + (n_q, d_v)), ws.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's own maximum, so a "
          "slice far below the global maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "no_keepdims",
          "reduces the max and the sum without keepdims=True, so they broadcast against the "
          "wrong axis: wrong values on square inputs and a broadcasting error on the others",
          softmax_no_keepdims),
    Entry("softmax", "wrong", "sum_last_axis",
          "shifts along `axis` but always normalises along the last axis (sum(axis=-1)), so "
          "any other axis gives slices that do not sum to 1",
          softmax_last_axis_sum),
    Entry("softmax", "wrong", "inf_to_zero",
          "replaces -inf logits by 0 before the exponential, so entries that must get weight 0 "
          "get a positive weight",
          softmax_inf_to_zero),
    Entry("softmax", "wrong", "subtract_min",
          "subtracts the minimum instead of the maximum, so the exponents become large and "
          "positive and logits of size 1e4 overflow to inf/inf = NaN",
          softmax_subtract_min),
    Entry("softmax", "wrong", "scipy_default_axis",
          "calls scipy.special.softmax without passing axis; its default is axis=None, so it "
          "normalises over every entry of the array at once",
          softmax_scipy_default_axis),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "row_loops", None, softmax_row_loops),

    Entry("attention", "wrong", "swapped_return",
          "returns (weights, out) instead of (out, weights)",
          attention_swapped_return),
    Entry("attention", "wrong", "scale_by_dv",
          "takes the scale from v.shape[-1] (d_v) instead of the shared key size d_k, so the "
          "scores are scaled wrongly whenever d_v != d_k",
          attention_scale_dv),
    Entry("attention", "wrong", "precedence_sqrt",
          "writes `/ d_k ** 1 / 2`, which Python reads as (d_k ** 1) / 2, so the scores are "
          "divided by d_k / 2 instead of sqrt(d_k)",
          attention_precedence),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights along axis -2 (over the queries) instead of along the keys, "
          "so the rows of weights do not sum to 1",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "naive_exp",
          "exponentiates the scores without subtracting the row maximum, so large scores "
          "overflow to inf and the weights become NaN",
          attention_naive_exp),
    Entry("attention", "wrong", "np_dot_batched",
          "uses np.dot, which for arrays of more than 2 dimensions takes an outer product over "
          "the batch axes instead of a batched matrix product (np.matmul / @)",
          attention_np_dot),
    Entry("attention", "right", "einsum_scipy", None, attention_einsum_scipy),
    Entry("attention", "right", "query_loops", None, attention_query_loops),
]
