"""Round m catalogue, lesson 01 (single-head attention, numpy): softmax, attention."""

import math

import numpy as np
from scipy.special import logsumexp, softmax as sp_softmax

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x)  # one shift for the whole array
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # "get rid of the infinities first"
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_exp_ratio(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x) / np.exp(m)  # same as exp(x - m) on paper
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_mean_shift(x, axis=-1):
    x = np.asarray(x)
    centred = x - np.mean(x, axis=axis, keepdims=True)
    e = np.exp(centred)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_moveaxis_back(x, axis=-1):
    x = np.asarray(x)
    z = np.moveaxis(x, axis, -1)  # put the softmax axis last
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    z = z / z.sum(axis=-1, keepdims=True)
    return np.moveaxis(z, axis, -1)  # ... and "move it back"


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def softmax_apply_along_axis(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)

    def one_slice(row):
        top = max(row)
        exps = [math.exp(r - top) for r in row]
        total = math.fsum(exps)
        return np.array([e / total for e in exps])

    return np.apply_along_axis(one_slice, axis, x)


# ============================================================================ attention
def attention_scale_by_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / math.sqrt(d_k)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_sqrt_precedence(q, k, v):
    d_k = q.shape[-1]
    scale = 1 / d_k ** 1 / 2
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) * scale
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / np.sum(w, axis=-1, keepdims=True)
    return np.matmul(w, v), w


def attention_max_over_queries(q, k, v):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_no_max_shift(q, k, v):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", w, v), w


def attention_swapped_return(q, k, v):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)
    out = w @ v
    return w, out


def attention_einsum_scipy(q, k, v):
    scores = np.einsum("...id,...jd->...ij", q, k) * (q.shape[-1] ** -0.5)
    weights = sp_softmax(scores, axis=-1)
    return np.einsum("...ij,...jd->...id", weights, v), weights


def attention_loops_float64(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = q64.shape[:-2]
    n_q, d_k = q64.shape[-2:]
    n_k, d_v = v64.shape[-2:]
    qf = q64.reshape(-1, n_q, d_k)
    kf = k64.reshape(-1, n_k, d_k)
    vf = v64.reshape(-1, n_k, d_v)
    out = np.zeros((qf.shape[0], n_q, d_v))
    weights = np.zeros((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            row = [float(np.dot(qf[b, i], kf[b, j])) / math.sqrt(d_k) for j in range(n_k)]
            top = max(row)
            exps = [math.exp(s - top) for s in row]
            total = sum(exps)
            for j in range(n_k):
                weights[b, i, j] = exps[j] / total
                out[b, i] += weights[b, i, j] * vf[b, j]
    return out.reshape(lead + (n_q, d_v)), weights.reshape(lead + (n_q, n_k))


ENTRIES = [
    # softmax ------------------------------------------------------------------
    Entry("softmax", "wrong", "global_max_shift",
          "It subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice whose values lie thousands below the global maximum underflows to all zeros "
          "and its weights become 0/0 = NaN.",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "The maximum is taken along `axis` but the normalising sum is hard-coded to "
          "axis=-1, so for any other axis the result is divided by the wrong totals.",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "infinities_replaced_by_zero",
          "It replaces -inf entries by 0 before exponentiating, so entries that must get "
          "weight 0 receive a positive weight exp(0 - max).",
          softmax_inf_to_zero),
    Entry("softmax", "wrong", "exp_ratio_overflows",
          "It writes exp(x - max) as exp(x) / exp(max), which is equal on paper but overflows "
          "to inf/inf = NaN for logits of magnitude 1e3-1e4, so the stabilisation is lost.",
          softmax_exp_ratio),
    Entry("softmax", "wrong", "shift_by_mean",
          "It centres each slice by its mean instead of subtracting its maximum, so large "
          "spreads still overflow exp (NaN) and a slice containing -inf has mean -inf, "
          "giving NaN everywhere in it.",
          softmax_mean_shift),
    Entry("softmax", "wrong", "moveaxis_back_wrong_order",
          "To move the axis back it calls np.moveaxis(z, axis, -1) again instead of "
          "np.moveaxis(z, -1, axis), so for axis=0 or 1 of a 3-D array the result comes back "
          "with its axes in the wrong order (wrong shape).",
          softmax_moveaxis_back),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_math_per_slice", None, softmax_apply_along_axis),
    # attention ----------------------------------------------------------------
    Entry("attention", "wrong", "scale_by_d_v",
          "It divides the scores by sqrt(v.shape[-1]) (d_v) instead of sqrt(d_k), which is "
          "only right when the values have the same width as the keys.",
          attention_scale_by_dv),
    Entry("attention", "wrong", "k_dot_T_reverses_all_axes",
          "It transposes k with k.T, which reverses every axis of a batched array instead of "
          "swapping the last two, so batched inputs fail with a matmul shape error (only 2-D "
          "inputs work).",
          attention_k_dot_T),
    Entry("attention", "wrong", "sqrt_operator_precedence",
          "`1 / d_k ** 1 / 2` parses as (1 / d_k) / 2, so the scores are scaled by 1/(2 d_k) "
          "instead of 1/sqrt(d_k).",
          attention_sqrt_precedence),
    Entry("attention", "wrong", "stabilising_max_over_queries",
          "The stabilising maximum is taken over axis -2 (the queries) while the sum runs "
          "over the keys, so each key's column gets a different shift and the row weights are "
          "distorted.",
          attention_max_over_queries),
    Entry("attention", "wrong", "no_max_subtraction",
          "It exponentiates the raw scores without subtracting the row maximum, so large scores "
          "overflow to inf and the weights become NaN.",
          attention_no_max_shift),
    Entry("attention", "wrong", "returns_weights_then_out",
          "It returns the tuple in the order (weights, out) instead of (out, weights).",
          attention_swapped_return),
    Entry("attention", "right", "einsum_scipy_softmax", None, attention_einsum_scipy),
    Entry("attention", "right", "python_loops_float64", None, attention_loops_float64),
]
