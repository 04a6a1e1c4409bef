"""Held-out learners' answers, lesson 01 (softmax, attention). Numpy lesson."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # one max for the whole array
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_none_reexpand(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    exps = np.exp(x - m)
    total = exps.sum(axis=axis)
    return exps / total[..., None]


def softmax_max_last_axis(x, axis=-1):
    logits = np.array(x, dtype=np.float64)
    top = logits.max(axis=-1, keepdims=True)
    z = np.exp(logits - top)
    return z / z.sum(axis=axis, keepdims=True)


def softmax_scipy_default(x, axis=-1):
    return scipy.special.softmax(x)


def softmax_zero_infs(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # get rid of the -inf so exp does not complain
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x, dtype=float)
    stable = np.exp(x - x.max(axis=axis, keepdims=True))
    denom = np.exp(x).sum(axis=axis, keepdims=True)
    return stable / denom


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - scipy.special.logsumexp(x, axis=axis, keepdims=True))


def softmax_row_loop(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    result = np.zeros_like(flat)
    for r, row in enumerate(flat):
        peak = max(row)
        weights = [math.exp(v - peak) for v in row]
        s = sum(weights)
        result[r] = [w / s for w in weights]
    return np.moveaxis(result.reshape(moved.shape), -1, axis)


# ============================================================================ attention
def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = np.matmul(q, k.T) / math.sqrt(d_k)
    s = np.exp(s - np.max(s, axis=-1, keepdims=True))
    weights = s / np.sum(s, axis=-1, keepdims=True)
    return np.matmul(weights, v), weights


def attention_axis_one(q, k, v):
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=1, keepdims=True)
    return weights @ v, weights


def attention_returns_scores(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -2, -1) / math.sqrt(d_k)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = p @ v
    return out, scores


def attention_pow_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_no_shift(q, k, v):
    scores = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_einsum_scipy(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("...id,...jd->...ij", q, k) * scale
    weights = scipy.special.softmax(scores, axis=-1)
    out = np.einsum("...ij,...jv->...iv", weights, v)
    return out, weights


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
            row = [float(np.dot(q[idx][i], k[idx][j])) / math.sqrt(d_k) for j in range(n_k)]
            top = max(row)
            ex = [math.exp(s - top) for s in row]
            tot = math.fsum(ex)
            for j in range(n_k):
                weights[idx + (i, j)] = ex[j] / tot
            out[idx + (i,)] = weights[idx + (i,)] @ v[idx]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "subtracts one maximum of the whole array instead of each slice's maximum along "
          "axis, so a slice far below the global maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "reexpand_last_axis",
          "sums without keepdims and re-expands the sum with [..., None], which puts the "
          "kept axis last: right only for axis=-1, a broadcasting error or wrong division "
          "for other axes",
          softmax_none_reexpand),
    Entry("softmax", "wrong", "max_on_last_axis",
          "takes the stabilising maximum along the last axis whatever axis is asked, so "
          "for axis != -1 the shift is not constant along the softmax axis and changes "
          "the result",
          softmax_max_last_axis),
    Entry("softmax", "wrong", "scipy_default_axis",
          "calls scipy.special.softmax without passing axis; scipy's default axis=None "
          "normalises over the whole array, not along axis",
          softmax_scipy_default),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "replaces the -inf entries by 0 before the exponential, so they get weight "
          "exp(0 - max) instead of 0",
          softmax_zero_infs),
    Entry("softmax", "wrong", "unshifted_denominator",
          "divides the shifted exponentials by the sum of the unshifted ones, "
          "np.exp(x).sum(...): a wrong variable that overflows for logits of 1e4 and is "
          "off by the factor exp(max) everywhere",
          softmax_unshifted_denominator),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_row_loop", None, softmax_row_loop),

    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v), the value width v.shape[-1], instead of "
          "1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with .T, which reverses every axis: right for 2-D inputs only, "
          "batched inputs fail or mix the batch axes",
          attention_dot_T),
    Entry("attention", "wrong", "softmax_axis_1",
          "normalises with axis=1, which is the key axis only for 2-D inputs; with batch "
          "or head axes the softmax runs over the wrong axis",
          attention_axis_one),
    Entry("attention", "wrong", "returns_scores",
          "returns the scaled scores as the second result instead of the softmax weights",
          attention_returns_scores),
    Entry("attention", "wrong", "pow_precedence",
          "writes the scale as / d_k ** 1 / 2, which Python reads as (d_k ** 1) / 2, so "
          "the scores are divided by d_k / 2 instead of sqrt(d_k)",
          attention_pow_precedence),
    Entry("attention", "wrong", "no_max_shift",
          "exponentiates the scores without subtracting the row maximum, so large scores "
          "overflow to inf and the weights become NaN",
          attention_no_shift),
    Entry("attention", "right", "einsum_scipy", None, attention_einsum_scipy),
    Entry("attention", "right", "explicit_loops", None, attention_loops),
]
