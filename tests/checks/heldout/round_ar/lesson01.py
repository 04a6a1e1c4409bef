"""Held-out learners' answers, lesson 01 (softmax, attention). Numpy; no mhalib."""

import math

import numpy as np

from entry import Entry

# ============================================================================ softmax


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # one max for the whole array
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    ex = np.exp(x - m)
    total = ex.sum(axis=axis)
    return ex / total


def softmax_sum_last_axis(x, axis=-1):
    top = x.max(axis=axis, keepdims=True)
    num = np.exp(x - top)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_inf_to_zero(x, axis=-1):
    # get rid of the infinities first so nothing turns into NaN
    x = np.where(np.isinf(x), 0.0, x)
    x = x - x.max(axis=axis, keepdims=True)
    p = np.exp(x)
    return p / p.sum(axis=axis, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    mx = np.max(x, axis=axis, keepdims=True)
    numerator = np.exp(x - mx)
    denominator = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numerator / denominator


def softmax_min_shift(x, axis=-1):
    lo = np.min(x, axis=axis, keepdims=True)
    z = np.exp(x - lo)
    return z / np.sum(z, axis=axis, keepdims=True)


def softmax_torch_route(x, axis=-1):
    import torch

    arr = np.asarray(x)
    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    out = torch.softmax(t, dim=axis).numpy()
    return out.astype(arr.dtype if np.issubdtype(arr.dtype, np.floating) else np.float64)


def softmax_rowwise_logsumexp(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    result = np.zeros_like(flat)
    for r, row in enumerate(flat):
        top = row.max()
        if not np.isfinite(top):
            continue
        lse = top + math.log(sum(math.exp(v - top) for v in row))
        result[r] = [math.exp(v - lse) for v in row]
    return np.moveaxis(result.reshape(moved.shape), -1, axis)


# ============================================================================ attention


def attention_scale_by_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = (q @ k.T) / math.sqrt(d_k)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    weights = s / s.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(d)
    logits = logits - logits.max(axis=-2, keepdims=True)
    e = np.exp(logits)
    weights = e / e.sum(axis=-2, keepdims=True)
    return np.matmul(weights, v), weights


def attention_returns_scores(q, k, v):
    d_k = q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_k)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    out = np.einsum("...qk,...kv->...qv", probs, v)
    return out, scores


def attention_pow_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) * d_k ** -1/2
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_no_max_shift(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_einsum_logsumexp(q, k, v):
    from scipy.special import logsumexp

    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    w = np.exp(s - logsumexp(s, axis=-1, keepdims=True))
    o = np.einsum("...ij,...jc->...ic", w, v64)
    dt = np.result_type(q, k, v)
    return o.astype(dt), w.astype(dt)


def attention_explicit_loops(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    out = np.zeros(lead + (n_q, d_v))
    wts = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            row = np.array([float(np.dot(q[idx][i], k[idx][j])) for j in range(n_k)])
            row /= math.sqrt(d_k)
            row = np.exp(row - row.max())
            row /= row.sum()
            wts[idx][i] = row
            for j in range(n_k):
                out[idx][i] += row[j] * v[idx][j]
    return out, wts


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "the shift uses the maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the global maximum underflows to all zeros and gives 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_no_keepdims",
          "the denominator is summed without keepdims=True, so it broadcasts against the wrong "
          "axis (a broadcast error on non-square inputs, wrong values on square ones)",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "the maximum respects `axis` but the sum is always taken over the last axis, so "
          "softmax along axis=0 (or any other axis) is normalised the wrong way",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "-inf logits are replaced by 0 before the softmax, so masked entries get a real "
          "weight instead of weight 0",
          softmax_inf_to_zero),
    Entry("softmax", "wrong", "unshifted_denominator",
          "the numerator is exp(x - max) but the denominator sums exp(x) without the shift, so "
          "every weight is off by a factor exp(-max) (and the denominator overflows at 1e4)",
          softmax_unshifted_denominator),
    Entry("softmax", "wrong", "shift_by_min",
          "the logits are shifted by the minimum instead of the maximum, so the exponents are "
          "positive and overflow (inf/inf = NaN) for large logits or with -inf entries",
          softmax_min_shift),
    Entry("softmax", "right", "torch_softmax_float64", None, softmax_torch_route),
    Entry("softmax", "right", "rowwise_logsumexp_loop", None, softmax_rowwise_logsumexp),

    Entry("attention", "wrong", "scale_by_d_v",
          "the scores are divided by sqrt of v's last axis (d_v) instead of sqrt(d_k), which "
          "only agrees when d_v == d_k",
          attention_scale_by_dv),
    Entry("attention", "wrong", "k_dot_T",
          "k.T reverses every axis, not only the last two, so with batch or head axes the "
          "scores mix the wrong dimensions (or raise); np.swapaxes(k, -1, -2) was needed",
          attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "the softmax normalises over axis -2 (the queries) instead of axis -1 (the keys), so "
          "the weight rows do not sum to 1",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "returns_scores_not_weights",
          "the second return value is the scaled scores before the softmax, not the attention "
          "weights",
          attention_returns_scores),
    Entry("attention", "wrong", "pow_precedence_scale",
          "`d_k ** -1/2` parses as (d_k ** -1) / 2, so the scores are scaled by 1/(2 d_k) "
          "instead of 1/sqrt(d_k)",
          attention_pow_precedence),
    Entry("attention", "wrong", "no_max_subtraction",
          "the softmax of the scores is not shifted by the row maximum, so large scores "
          "overflow exp and give inf/inf = NaN weights",
          attention_no_max_shift),
    Entry("attention", "right", "einsum_scipy_logsumexp", None, attention_einsum_logsumexp),
    Entry("attention", "right", "explicit_loops", None, attention_explicit_loops),
]
