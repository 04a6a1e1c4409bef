"""Held-out catalogue, lesson 01 (single head): softmax, attention."""

import math

import numpy as np
from scipy import special

from entry import Entry


# ============================================================================ softmax
def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    return e / e.sum(axis=axis)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shift = x.max()
    e = np.exp(x - shift)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x, dtype=float)
    peak = arr.max(axis=axis, keepdims=True)
    ex = np.exp(arr - peak)
    denom = ex.sum(axis=-1, keepdims=True)
    return ex / denom


def softmax_no_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    num = np.exp(x)
    return num / num.sum(axis=axis, keepdims=True)


def softmax_inf_zeroed(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # get rid of the infinities first
    x = x - x.max(axis=axis, keepdims=True)
    z = np.exp(x)
    return z / z.sum(axis=axis, keepdims=True)


def softmax_argmax_shift(x, axis=-1):
    logits = np.asarray(x, dtype=float)
    top = np.argmax(logits, axis=axis, keepdims=True)
    w = np.exp(logits - top)
    return w / np.sum(w, axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - special.logsumexp(x, axis=axis, keepdims=True))


def softmax_row_loops(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    result = np.zeros_like(flat)
    for r, row in enumerate(flat):
        biggest = max(row)
        if biggest == -math.inf:
            continue
        exps = [math.exp(v - biggest) for v in row]
        total = sum(exps)
        result[r] = [e / total for e in exps]
    return np.moveaxis(result.reshape(moved.shape), -1, axis)


# ============================================================================ attention
def attention_scale_nk(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n_k = k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(n_k)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    d_k = q.shape[-1]
    scores = (q @ k.T) / math.sqrt(d_k)
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= np.sum(weights, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_queries(q, k, v):
    def smax(z, axis):
        z = z - z.max(axis=axis, keepdims=True)
        ez = np.exp(z)
        return ez / ez.sum(axis=axis, keepdims=True)

    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(q.shape[-1])
    attn = smax(scores, axis=-2)
    return np.matmul(attn, v), attn


def attention_scale_after(q, k, v):
    raw = q @ np.swapaxes(k, -1, -2)
    raw = raw - raw.max(axis=-1, keepdims=True)
    p = np.exp(raw)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p / np.sqrt(q.shape[-1])
    return p @ v, p


def attention_unstable(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_power_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1/2
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_einsum64(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) * (q64.shape[-1] ** -0.5)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    out = np.einsum("...qk,...kv->...qv", w, v64)
    return out, w


def attention_loop_scipy(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.empty(lead + (q.shape[-2], v.shape[-1]))
    wts = np.empty(lead + (q.shape[-2], k.shape[-2]))
    for idx in np.ndindex(*lead):
        sc = qb[idx] @ kb[idx].T / math.sqrt(q.shape[-1])
        wts[idx] = special.softmax(sc, axis=1)
        out[idx] = wts[idx] @ vb[idx]
    return out, wts


ENTRIES = [
    Entry("softmax", "wrong", "sum_without_keepdims",
          "The max is kept with keepdims but the sum is not: e.sum(axis=axis) loses the reduced "
          "axis, so the division broadcasts along the wrong axis (wrong values on a square input, "
          "a broadcasting error otherwise).", softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "global_max_shift",
          "It subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice thousands below the global maximum underflows to 0/0 and gives NaN.",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "The normaliser is summed over axis=-1 whatever axis was asked for, so for axis=0 or "
          "axis=-2 the slices do not sum to 1.", softmax_sum_last_axis),
    Entry("softmax", "wrong", "no_max_subtraction",
          "No maximum is subtracted before np.exp, so logits of magnitude 1e4 overflow to inf "
          "and the result is NaN.", softmax_no_shift),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "It 'cleans' infinite logits by replacing them with 0, so -inf entries get a positive "
          "weight instead of weight 0.", softmax_inf_zeroed),
    Entry("softmax", "wrong", "argmax_as_shift",
          "np.argmax (the index of the maximum) is subtracted instead of np.max (its value), so "
          "the shift does not prevent overflow for logits of 1e4 and the result is NaN.",
          softmax_argmax_shift),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_row_loops", None, softmax_row_loops),
    Entry("attention", "wrong", "scaled_by_sqrt_n_keys",
          "The scores are divided by sqrt(N_k) (k.shape[-2], the number of keys) instead of "
          "sqrt(d_k) (k.shape[-1]).", attention_scale_nk),
    Entry("attention", "wrong", "k_dot_T_on_batches",
          "k.T reverses all axes, not just the last two, so batched inputs are multiplied "
          "against a scrambled key array (a shape error); np.swapaxes(k, -1, -2) was needed.",
          attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "The softmax is taken along axis=-2 (over the queries) instead of over the keys, so "
          "the weight rows do not sum to 1.", attention_softmax_queries),
    Entry("attention", "wrong", "scale_after_softmax",
          "The 1/sqrt(d_k) factor divides the weights after the softmax instead of the scores "
          "before it, so the weight rows sum to 1/sqrt(d_k).", attention_scale_after),
    Entry("attention", "wrong", "softmax_without_max",
          "The scores are exponentiated without subtracting the row maximum, so large scores "
          "overflow and give NaN.", attention_unstable),
    Entry("attention", "wrong", "power_precedence",
          "d_k ** 1/2 parses as (d_k ** 1) / 2, so the scores are divided by d_k and then by 2 "
          "instead of by sqrt(d_k).", attention_power_precedence),
    Entry("attention", "right", "einsum_float64", None, attention_einsum64),
    Entry("attention", "right", "ndindex_loop_scipy_softmax", None, attention_loop_scipy),
]
