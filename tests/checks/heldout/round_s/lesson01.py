"""Held-out catalogue, lesson 01 (single-head attention, numpy): softmax, attention."""

import math

import numpy as np
from scipy.special import logsumexp

from entry import Entry


# ============================================================================ softmax
# ---- wrong ----------------------------------------------------------------------------------
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)  # keepdims forgotten
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max()  # one max for the whole array
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    z = x - np.max(x, axis=axis, keepdims=True)
    ez = np.exp(z)
    return ez / ez.sum(axis=-1, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x, dtype=float)
    top = np.max(x, axis=axis, keepdims=True)
    num = np.exp(x - top)
    den = np.sum(np.exp(x), axis=axis, keepdims=True)
    return num / den


def softmax_lse_all_axes(x, axis=-1):
    x = np.asarray(x, dtype=float)
    return np.exp(x - logsumexp(x))


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # "clean" the infinities first
    x = x - x.max(axis=axis, keepdims=True)
    w = np.exp(x)
    return w / w.sum(axis=axis, keepdims=True)


# ---- right ----------------------------------------------------------------------------------
def softmax_rowloop(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    result = np.zeros_like(flat)
    for r, row in enumerate(flat):
        finite = [v for v in row if v != -math.inf]
        if not finite:
            continue
        top = max(finite)
        exps = [0.0 if v == -math.inf else math.exp(v - top) for v in row]
        total = math.fsum(exps)
        result[r] = [e / total for e in exps]
    return np.moveaxis(result.reshape(moved.shape), -1, axis)


def softmax_via_lse(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    lse = peak + np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True))
    return np.exp(x - lse)


# ============================================================================ attention
# ---- wrong ----------------------------------------------------------------------------------
def _stable_softmax(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def attention_scale_by_dv(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    w = _stable_softmax(scores)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ k.T / np.sqrt(q.shape[-1])
    w = _stable_softmax(scores)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    weights = _stable_softmax(scores, axis=-2)
    return weights @ v, weights


def attention_half_power(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    w = _stable_softmax(scores)
    return w @ v, w


def attention_naive_exp(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_after_softmax(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    raw = q @ np.swapaxes(k, -1, -2)
    w = _stable_softmax(raw) / np.sqrt(q.shape[-1])
    return w @ v, w


# ---- right ----------------------------------------------------------------------------------
def attention_einsum_lse(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    s = np.einsum("...id,...jd->...ij", q, k) * (q.shape[-1] ** -0.5)
    w = np.exp(s - logsumexp(s, axis=-1, keepdims=True))
    return np.einsum("...ij,...jv->...iv", w, v), w


def attention_batch_loop(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qs = q.reshape(-1, n_q, d_k).astype(np.float64)
    ks = k.reshape(-1, n_k, d_k).astype(np.float64)
    vs = v.reshape(-1, n_k, d_v).astype(np.float64)
    outs = np.empty((qs.shape[0], n_q, d_v))
    weights = np.empty((qs.shape[0], n_q, n_k))
    root = math.sqrt(d_k)
    for b in range(qs.shape[0]):
        for i in range(n_q):
            scores = [float(np.dot(qs[b, i], ks[b, j])) / root for j in range(n_k)]
            top = max(scores)
            exps = [math.exp(s - top) for s in scores]
            total = sum(exps)
            weights[b, i] = [e / total for e in exps]
            outs[b, i] = weights[b, i] @ vs[b]
    return outs.reshape(lead + (n_q, d_v)), weights.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("softmax", "wrong", "max_no_keepdims",
          "The maximum is taken without keepdims=True, so it is broadcast along the wrong axis: "
          "each column gets another slice's maximum subtracted (wrong weights on square arrays, "
          "a broadcasting error on the others).",
          softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global_max",
          "It subtracts the maximum of the whole array instead of each slice's own maximum, so a "
          "slice thousands below the global maximum underflows to 0/0 and gives NaN.",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_over_last_axis",
          "The maximum uses `axis` but the normalising sum is hard-coded to axis=-1, so for any "
          "other axis the result does not sum to 1 along `axis`.",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "unshifted_denominator",
          "The numerator is shifted by the maximum but the denominator sums np.exp(x) of the "
          "unshifted logits, so every weight is off by a factor exp(max) (and large logits "
          "overflow).",
          softmax_unshifted_denominator),
    Entry("softmax", "wrong", "logsumexp_all_axes",
          "scipy's logsumexp is called without axis (and keepdims), so it reduces over the whole "
          "array: the entries sum to 1 over the array, not along `axis`.",
          softmax_lse_all_axes),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "The -inf entries are replaced by 0 before the softmax, so they get a positive weight "
          "instead of weight 0.",
          softmax_inf_to_zero),
    Entry("softmax", "right", "python_row_loop", None, softmax_rowloop),
    Entry("softmax", "right", "exp_minus_logsumexp", None, softmax_via_lse),
    Entry("attention", "wrong", "scale_by_d_v",
          "The scores are divided by sqrt(v.shape[-1]) (d_v) instead of sqrt(d_k): wrong "
          "whenever the value width differs from the key width.",
          attention_scale_by_dv),
    Entry("attention", "wrong", "k_dot_T",
          "k.T reverses all axes, not just the last two: correct for 2-D inputs, but with batch "
          "axes the product fails (or pairs the wrong axes); np.swapaxes(k, -1, -2) is needed.",
          attention_k_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "The softmax normalises along axis -2 (over the queries) instead of over the keys, so "
          "rows of the weights do not sum to 1.",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "half_power_precedence",
          "`d_k ** 1 / 2` is (d_k ** 1) / 2 by precedence, so the scores are divided by d_k/2 "
          "instead of sqrt(d_k).",
          attention_half_power),
    Entry("attention", "wrong", "softmax_without_max_shift",
          "The softmax exponentiates the raw scores without subtracting the row maximum, so "
          "large scores overflow to inf and the weights become NaN.",
          attention_naive_exp),
    Entry("attention", "wrong", "scale_after_softmax",
          "The 1/sqrt(d_k) factor is applied to the weights after the softmax instead of to the "
          "scores before it, so the rows sum to 1/sqrt(d_k) and the sharpness is unchanged.",
          attention_scale_after_softmax),
    Entry("attention", "right", "einsum_logsumexp", None, attention_einsum_lse),
    Entry("attention", "right", "per_query_python_loop", None, attention_batch_loop),
]
