"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, 6 wrong + 2 right each."""

import math

import numpy as np
from scipy.special import logsumexp, softmax as sp_softmax

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # stabilise
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_zero_out_inf(x, axis=-1):
    x = np.array(x, dtype=float)
    x[np.isinf(x)] = 0.0  # avoid NaN from infinities
    x = x - x.max(axis=axis, keepdims=True)
    ex = np.exp(x)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_no_shift(x, axis=-1):
    ex = np.exp(x)
    return ex / np.sum(ex, axis=axis, keepdims=True)


def softmax_min_shift(x, axis=-1):
    lo = np.min(x, axis=axis, keepdims=True)
    exps = np.exp(x - lo)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    x_max = np.max(x, axis=axis, keepdims=True)
    numer = np.exp(x - x_max)
    denom = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numer / denom


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True)).astype(x.dtype)


def softmax_row_loop(x, axis=-1):
    arr = np.asarray(x)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.zeros(flat.shape, dtype=np.float64)
    for r in range(flat.shape[0]):
        row = [float(v) for v in flat[r]]
        top = max(row)
        ws = [math.exp(v - top) for v in row]
        tot = sum(ws)
        for c, w in enumerate(ws):
            out[r, c] = w / tot
    return np.moveaxis(out.reshape(moved.shape), -1, axis).astype(arr.dtype)


# ============================================================================ attention
def attention_scale_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = np.matmul(q, k.T) / math.sqrt(d_k)
    s = s - np.max(s, axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.matmul(p, v), p


def attention_softmax_queries(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(d_k)
    scores = scores - scores.max(axis=-2, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_swapped_return(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = np.einsum("...qd,...kd->...qk", q, k) * scale
    logits = logits - logits.max(axis=-1, keepdims=True)
    a = np.exp(logits)
    a = a / a.sum(axis=-1, keepdims=True)
    out = np.einsum("...qk,...kd->...qd", a, v)
    return a, out


def attention_unstable_softmax(q, k, v):
    d = q.shape[-1]
    scores = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_einsum_scipy(q, k, v):
    q, k, v = (np.asarray(a) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    weights = sp_softmax(scores, axis=-1)
    out = np.einsum("...ij,...jc->...ic", weights, v)
    return out, weights


def attention_loop_rows(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d_k)).reshape(-1, n_q, d_k)
    kb = np.broadcast_to(k, lead + (n_k, d_k)).reshape(-1, n_k, d_k)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    outs = np.zeros((qb.shape[0], n_q, d_v))
    ws = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            s = kb[b] @ (qb[b, i] / math.sqrt(d_k))  # (n_k,)
            s = s - s.max()
            e = np.exp(s)
            ws[b, i] = e / e.sum()
            outs[b, i] = ws[b, i] @ vb[b]
    return outs.reshape(lead + (n_q, d_v)), ws.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum along `axis`, "
          "so a slice far below the global maximum underflows to all zeros and gives 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "the normalising sum is taken over axis -1 whatever `axis` is, so for axis=0 or 1 the "
          "slices along `axis` do not sum to 1",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "replaces -inf logits by 0 'to avoid NaN', so masked entries get a positive weight "
          "instead of weight 0",
          softmax_zero_out_inf),
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum, so logits around 1e3-1e4 "
          "overflow to inf and give NaN",
          softmax_no_shift),
    Entry("softmax", "wrong", "min_shift",
          "stabilises by subtracting the minimum instead of the maximum, so the exponents become "
          "large and positive (overflow to inf/NaN), and a -inf entry makes the whole slice NaN",
          softmax_min_shift),
    Entry("softmax", "wrong", "denominator_unshifted",
          "the numerator uses the shifted exponentials but the denominator sums np.exp(x) of the "
          "raw logits, so the result is off by a factor exp(-max) (and overflows for big logits)",
          softmax_unshifted_denominator),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_row_loop", None, softmax_row_loop),

    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v) (v.shape[-1]) instead of 1/sqrt(d_k), which is wrong "
          "whenever the value width differs from the key width",
          attention_scale_dv),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with .T, which reverses every axis, not just the last two, so batched "
          "inputs (3-D, 4-D) raise a shape error",
          attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights over axis -2 (the queries) instead of axis -1 (the keys), so the "
          "rows of weights do not sum to 1",
          attention_softmax_queries),
    Entry("attention", "wrong", "sqrt_precedence",
          "writes `/ d_k ** 1 / 2`, which is (d_k ** 1) / 2 by precedence, so the scores are divided "
          "by 2 d_k instead of sqrt(d_k)",
          attention_precedence),
    Entry("attention", "wrong", "returns_weights_first",
          "returns (weights, out) instead of (out, weights)",
          attention_swapped_return),
    Entry("attention", "wrong", "unstable_softmax",
          "the softmax inside attention exponentiates the scores without subtracting the row "
          "maximum, so large scores overflow to inf and the rows become NaN",
          attention_unstable_softmax),
    Entry("attention", "right", "einsum_scipy_softmax", None, attention_einsum_scipy),
    Entry("attention", "right", "loop_over_query_rows", None, attention_loop_rows),
]
