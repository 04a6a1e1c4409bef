"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, 6 wrong + 2 right each."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_neg_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # avoid NaN from -inf
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_no_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_lse_without_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    log_z = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - log_z)


def softmax_row_loops(x, axis=-1):
    arr = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    res = np.zeros_like(flat)
    for r, row in enumerate(flat):
        top = max(row) if len(row) else 0.0
        if not math.isfinite(top):
            continue  # all -inf: zeros
        ex = [math.exp(val - top) for val in row]
        tot = sum(ex)
        res[r] = [val / tot for val in ex]
    return np.moveaxis(res.reshape(arr.shape), -1, axis)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
        out = np.exp(x - lse)
    return np.where(np.isfinite(lse), out, 0.0)


# ============================================================================ attention
def _stable_softmax_last(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = _stable_softmax_last(scores)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = (q @ k.T) / math.sqrt(d_k)
    weights = _stable_softmax_last(scores)
    return weights @ v, weights


def attention_softmax_queries(q, k, v):
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-2, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_unstable(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_returns_scores(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    probs = _stable_softmax_last(scores)
    out = probs @ v
    return out, scores


def attention_pow_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1/2
    weights = _stable_softmax_last(scores)
    return weights @ v, weights


def attention_einsum(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) / math.sqrt(q64.shape[-1])
    w = scipy.special.softmax(s, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v64), w


def attention_broadcast_sum(q, k, v):
    scores = (q[..., :, None, :] * k[..., None, :, :]).sum(axis=-1) * q.shape[-1] ** -0.5
    log_z = scipy.special.logsumexp(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - log_z)
    out = (weights[..., :, :, None] * v[..., None, :, :]).sum(axis=-2)
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "max_no_keepdims",
          "the row max is taken without keepdims=True, so it does not broadcast back against x "
          "slice by slice (wrong rows subtracted or a broadcasting error)", softmax_no_keepdims),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global max underflows to 0/0 (NaN)", softmax_global_max),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "the normalising sum is hard-coded to axis=-1 instead of the axis argument, so "
          "softmax along any other axis does not sum to 1 along that axis", softmax_sum_last_axis),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "replaces -inf logits by 0 to avoid NaN, which gives those entries a positive weight "
          "instead of weight 0", softmax_neg_inf_to_zero),
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the max, so logits of magnitude "
          "1e3-1e4 overflow to inf and give NaN", softmax_no_shift),
    Entry("softmax", "wrong", "logsumexp_missing_max",
          "log-sum-exp trick half applied: log sum exp(x - m) is used as log Z without adding "
          "the max m back, so every weight is scaled by exp(m)", softmax_lse_without_max),
    Entry("softmax", "right", "moveaxis_python_loops", None, softmax_row_loops),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_logsumexp),

    Entry("attention", "wrong", "scale_by_sqrt_dv",
          "scales the scores by 1/sqrt(d_v) (v's last axis) instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "k_dot_T",
          "uses k.T to transpose the keys: with batch or head axes .T reverses every axis, not "
          "just the last two (wrong scores or a shape error)", attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights over the query axis (-2) instead of over the keys (-1)",
          attention_softmax_queries),
    Entry("attention", "wrong", "softmax_not_stabilised",
          "the softmax inside attention does not subtract the row max, so large scores overflow "
          "to inf and give NaN", attention_unstable),
    Entry("attention", "wrong", "returns_raw_scores",
          "returns the scaled scores (before softmax) as the weights instead of the softmax "
          "probabilities", attention_returns_scores),
    Entry("attention", "wrong", "pow_precedence",
          "writes d_k ** 1/2, which Python reads as (d_k ** 1) / 2 = d_k / 2, not sqrt(d_k)",
          attention_pow_precedence),
    Entry("attention", "right", "einsum_scipy_softmax", None, attention_einsum),
    Entry("attention", "right", "broadcast_sum_logsumexp", None, attention_broadcast_sum),
]
