"""Held-out catalogue, lesson 01 (numpy): softmax, attention."""

import math

import numpy as np
import scipy.special

from entry import Entry

# ============================================================================ softmax


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # one maximum for the whole array
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x)
    m = x.max(axis=axis, keepdims=True)
    ex = np.exp(x - m)
    return ex / ex.sum(axis=-1, keepdims=True)


def softmax_neginf_to_zero(x, axis=-1):
    logits = np.asarray(x, dtype=np.float64)
    logits = np.where(np.isneginf(logits), 0.0, logits)  # "avoid -inf trouble"
    top = np.max(logits, axis=axis, keepdims=True)
    weights = np.exp(logits - top)
    return weights / weights.sum(axis=axis, keepdims=True)


def softmax_logsumexp_no_axis(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - scipy.special.logsumexp(x))


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x)
    row_max = np.max(x, axis=axis, keepdims=True)
    numer = np.exp(x - row_max)
    denom = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numer / denom


def softmax_sum_no_keepdims(x, axis=-1):
    z = np.asarray(x)
    z = z - np.max(z, axis=axis, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=axis)


def softmax_logaddexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    log_norm = np.logaddexp.reduce(x, axis=axis, keepdims=True)
    return np.exp(x - log_norm)


def softmax_rows_loop(x, axis=-1):
    arr = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    out = np.empty_like(flat)
    for r, row in enumerate(flat):
        top = max(row)
        terms = [math.exp(v - top) for v in row]
        total = math.fsum(terms)
        out[r] = [t / total for t in terms]
    return np.moveaxis(out.reshape(arr.shape), -1, axis)


# ============================================================================ attention


def _stable_softmax(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def attention_precedence_scale(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) * d_k ** -1/2
    w = _stable_softmax(scores)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = (q @ k.T) / np.sqrt(d_k)
    w = _stable_softmax(scores, axis=-1)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    weights = _stable_softmax(scores, axis=-2)
    return np.matmul(weights, v), weights


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = q @ np.swapaxes(k, -2, -1) / np.sqrt(d)
    a = _stable_softmax(s)
    return a @ v, a


def attention_returns_swapped(q, k, v):
    dk = q.shape[-1]
    logits = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(dk)
    attn = _stable_softmax(logits)
    output = np.einsum("...qk,...kv->...qv", attn, v)
    return attn, output


def attention_scale_after_softmax(q, k, v):
    d_k = q.shape[-1]
    raw = q @ np.swapaxes(k, -1, -2)
    weights = _stable_softmax(raw) / np.sqrt(d_k)
    return weights @ v, weights


def attention_einsum_scipy(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    s = np.einsum("...id,...jd->...ij", q / np.sqrt(q.shape[-1]), k)
    w = scipy.special.softmax(s, axis=-1)
    return np.einsum("...ij,...jc->...ic", w, v), w


def attention_loops(q, k, v):
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, batch + (n_q, d_k))
    kb = np.broadcast_to(k, batch + (n_k, d_k))
    vb = np.broadcast_to(v, batch + (n_k, d_v))
    out = np.zeros(batch + (n_q, d_v))
    weights = np.zeros(batch + (n_q, n_k))
    root = math.sqrt(d_k)
    for idx in np.ndindex(*batch):
        for i in range(n_q):
            s = [float(np.dot(qb[idx][i], kb[idx][j])) / root for j in range(n_k)]
            top = max(s)
            e = [math.exp(val - top) for val in s]
            tot = sum(e)
            for j in range(n_k):
                weights[idx][i, j] = e[j] / tot
                out[idx][i] += weights[idx][i, j] * vb[idx][j]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's own maximum, so a "
          "slice far below the global maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_last_axis",
          "normalises with a sum over the last axis (axis=-1 written in) instead of `axis`, so "
          "softmax along any other axis does not sum to 1",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "neginf_to_zero",
          "replaces -inf logits by 0 before the exponential, so those entries get the weight of "
          "a logit 0 instead of weight 0",
          softmax_neginf_to_zero),
    Entry("softmax", "wrong", "logsumexp_no_axis",
          "calls scipy's logsumexp without axis, which reduces over the whole array: the result "
          "sums to 1 over everything, not along `axis`",
          softmax_logsumexp_no_axis),
    Entry("softmax", "wrong", "unshifted_denominator",
          "shifts the numerator by the maximum but sums exp(x) unshifted in the denominator, so "
          "every weight is off by a factor exp(-max) (and 1e4 logits overflow)",
          softmax_unshifted_denominator),
    Entry("softmax", "wrong", "sum_no_keepdims",
          "sums the exponentials without keepdims=True, so the division broadcasts the totals "
          "along the wrong axis (or fails to broadcast at all)",
          softmax_sum_no_keepdims),
    Entry("softmax", "right", "logaddexp_reduce", None, softmax_logaddexp),
    Entry("softmax", "right", "python_rows_loop", None, softmax_rows_loop),

    Entry("attention", "wrong", "precedence_scale",
          "writes the scale as `d_k ** -1/2`, which Python reads as (1/d_k)/2, not 1/sqrt(d_k)",
          attention_precedence_scale),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with `.T`, which reverses every axis: fine for 2-D inputs but wrong (or "
          "failing) once there are batch or head axes",
          attention_k_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "takes the softmax along axis -2 (over the queries) instead of over the keys, so the "
          "weight rows do not sum to 1",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v), the value width, instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "returns_swapped",
          "returns (weights, out) instead of (out, weights)",
          attention_returns_swapped),
    Entry("attention", "wrong", "scale_after_softmax",
          "divides the weights by sqrt(d_k) after the softmax instead of dividing the scores "
          "before it, so the rows no longer sum to 1",
          attention_scale_after_softmax),
    Entry("attention", "right", "einsum_scipy_float64", None, attention_einsum_scipy),
    Entry("attention", "right", "python_loops", None, attention_loops),
]
