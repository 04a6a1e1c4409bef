"""Held-out catalogue, lesson 01 (single-head attention): softmax, attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # subtract the biggest value for stability
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    ex = np.exp(x - m)
    return ex / ex.sum(axis=axis)


def softmax_argmax_shift(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    peak = np.argmax(x, axis=axis, keepdims=True)
    z = np.exp(x - peak)
    return z / z.sum(axis=axis, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    x = np.where(np.isinf(x), 0.0, x)  # get rid of infinities so nothing turns into NaN
    x = x - x.max(axis=axis, keepdims=True)
    num = np.exp(x)
    return num / num.sum(axis=axis, keepdims=True)


def softmax_no_shift(x, axis=-1):
    exps = np.exp(np.asarray(x, dtype=np.float64))
    return exps / np.sum(exps, axis=axis, keepdims=True)


def softmax_loop_sum_from_one(x, axis=-1):
    arr = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    shape = arr.shape
    rows = arr.reshape(-1, shape[-1])
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        row = rows[r]
        top = row.max()
        e = np.exp(row - top)
        total = 0.0
        for j in range(1, len(e)):
            total += e[j]
        out[r] = e / total
    return np.moveaxis(out.reshape(shape), -1, axis)


def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(np.asarray(x), axis=axis)


def softmax_logaddexp(x, axis=-1):
    x = np.asarray(x)
    lse = np.logaddexp.reduce(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


# ============================================================================ attention
def attention_no_scale(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(d)
    s -= np.max(s, axis=-1, keepdims=True)
    p = np.exp(s)
    p /= np.sum(p, axis=-1, keepdims=True)
    return np.matmul(p, v), p


def attention_softmax_over_queries(q, k, v):
    d_k = q.shape[-1]
    logits = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d_k)
    logits = logits - logits.max(axis=-2, keepdims=True)
    a = np.exp(logits)
    a = a / a.sum(axis=-2, keepdims=True)
    return np.einsum("...qk,...kv->...qv", a, v), a


def attention_dot_T(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = q @ k.T * scale
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_swapped_return(q, k, v):
    dk = q.shape[-1]
    sc = q @ np.swapaxes(k, -1, -2) / np.sqrt(dk)
    sc = np.exp(sc - sc.max(-1, keepdims=True))
    attn = sc / sc.sum(-1, keepdims=True)
    out = attn @ v
    return attn, out


def attention_unstable_softmax(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_einsum_scipy(q, k, v):
    q = np.asarray(q)
    k = np.asarray(k)
    v = np.asarray(v)
    s = np.einsum("...id,...jd->...ij", q * (q.shape[-1] ** -0.5), k)
    w = scipy.special.softmax(s, axis=-1)
    return np.einsum("...ij,...jd->...id", w, v), w


def attention_loops_float64(q, k, v):
    q = np.asarray(q)
    k = np.asarray(k)
    v = np.asarray(v)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k).astype(np.float64)
    kf = k.reshape(-1, n_k, d_k).astype(np.float64)
    vf = v.reshape(-1, n_k, d_v).astype(np.float64)
    out = np.zeros((qf.shape[0], n_q, d_v))
    wts = np.zeros((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            row = [float(np.dot(qf[b, i], kf[b, j])) / math.sqrt(d_k) for j in range(n_k)]
            top = max(row)
            ex = [math.exp(s - top) for s in row]
            tot = math.fsum(ex)
            for j in range(n_k):
                wts[b, i, j] = ex[j] / tot
                out[b, i] += wts[b, i, j] * vf[b, j]
    return (out.reshape(lead + (n_q, d_v)).astype(q.dtype),
            wts.reshape(lead + (n_q, n_k)).astype(q.dtype))


ENTRIES = [
    # softmax
    Entry("softmax", "wrong", "global_max_shift",
          "the stability shift subtracts the maximum of the whole array instead of each slice's "
          "maximum along `axis`, so a slice far below the global maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_without_keepdims",
          "the denominator is summed without keepdims=True, so it broadcasts against the wrong "
          "axis: a shape error for most arrays and silently wrong values for square ones",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "argmax_as_shift",
          "np.argmax returns the position of the maximum, not its value, so the 'stability "
          "shift' subtracts an index and large logits still overflow to inf/inf = NaN",
          softmax_argmax_shift),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "to avoid NaN the -inf entries are replaced by 0 before the softmax, so they get a "
          "weight e^0 / sum instead of weight 0",
          softmax_inf_to_zero),
    Entry("softmax", "wrong", "no_max_subtraction",
          "the maximum is not subtracted before np.exp, so logits of size 1e3-1e4 overflow to "
          "inf and the result is NaN",
          softmax_no_shift),
    Entry("softmax", "wrong", "loop_sum_starts_at_one",
          "the denominator loop runs `range(1, len(e))` from a total of 0.0, so the first "
          "exponent of each slice is left out of the sum and the weights add up to more than 1",
          softmax_loop_sum_from_one),
    Entry("softmax", "right", "scipy_special_softmax", None, softmax_scipy),
    Entry("softmax", "right", "logaddexp_reduce", None, softmax_logaddexp),
    # attention
    Entry("attention", "wrong", "no_sqrt_dk_scale",
          "the scores q.k are not divided by sqrt(d_k), so the softmax is too peaked",
          attention_no_scale),
    Entry("attention", "wrong", "scale_by_d_v",
          "the scores are divided by sqrt(v.shape[-1]) (d_v) instead of sqrt(d_k), the size of "
          "the vectors in the dot product",
          attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "the softmax normalises along axis -2 (over the queries) instead of axis -1 (over the "
          "keys), so the weight rows do not sum to 1",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T_on_batches",
          "`k.T` reverses every axis, not just the last two, so with batch axes the product "
          "fails or mixes batches; np.swapaxes(k, -1, -2) belongs there",
          attention_dot_T),
    Entry("attention", "wrong", "returns_weights_then_out",
          "returns the pair in the wrong order, (weights, out) instead of (out, weights)",
          attention_swapped_return),
    Entry("attention", "wrong", "softmax_without_max_shift",
          "the inline softmax exponentiates the scaled scores without subtracting the row "
          "maximum, so large scores overflow to inf and give NaN",
          attention_unstable_softmax),
    Entry("attention", "right", "einsum_scaled_q_scipy", None, attention_einsum_scipy),
    Entry("attention", "right", "python_loops_float64", None, attention_loops_float64),
]
