"""Held-out catalogue, lesson 01 (single-head): softmax and attention. Learners' answers."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=axis)
    ex = np.exp(x - m)
    return ex / np.sum(ex, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    z = np.asarray(x, dtype=np.float64)
    z = z - z.max(axis=axis, keepdims=True)
    num = np.exp(z)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    top = np.max(x, axis=axis, keepdims=True)
    numer = np.exp(x - top)
    denom = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numer / denom


def softmax_swap_not_restored(x, axis=-1):
    arr = np.swapaxes(np.asarray(x, dtype=np.float64), axis, -1)
    arr = arr - arr.max(axis=-1, keepdims=True)
    p = np.exp(arr)
    p /= p.sum(axis=-1, keepdims=True)
    return p


def softmax_neginf_to_zero(x, axis=-1):
    x = np.array(x, dtype=np.float64)
    x[np.isinf(x)] = 0.0  # "get rid of the infinities so nothing becomes NaN"
    mx = x.max(axis=axis, keepdims=True)
    w = np.exp(x - mx)
    return w / w.sum(axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - scipy.special.logsumexp(x, axis=axis, keepdims=True))


def softmax_row_loop(x, axis=-1):
    arr = np.asarray(x)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1]).astype(np.float64)
    out = np.empty_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        biggest = max(row.tolist())
        if biggest == -math.inf:
            out[r] = 0.0
            continue
        terms = [math.exp(v - biggest) for v in row.tolist()]
        total = math.fsum(terms)
        out[r] = [t / total for t in terms]
    return np.moveaxis(out.reshape(moved.shape), -1, axis).astype(arr.dtype)


# ============================================================================ attention
def attention_softmax_over_queries(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    scores = scores - scores.max(axis=-2, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-2, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = q @ k.T / math.sqrt(d_k)
    s = s - s.max(axis=-1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(axis=-1, keepdims=True)
    return a @ v, a


def attention_half_power(q, k, v):
    d_k = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / d_k ** 1 / 2
    scores -= np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= np.sum(weights, axis=-1, keepdims=True)
    return np.matmul(weights, v), weights


def attention_returns_swapped(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = np.einsum("...id,...jd->...ij", q, k) * scale
    logits = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    context = probs @ v
    return probs, context


def attention_no_max_shift(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_scale_after_softmax(q, k, v):
    raw = q @ np.swapaxes(k, -1, -2)
    raw = raw - raw.max(axis=-1, keepdims=True)
    weights = np.exp(raw)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    out = weights @ v / np.sqrt(q.shape[-1])
    return out, weights


def attention_einsum_scipy(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    logits = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    w = scipy.special.softmax(logits, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v), w


def attention_flat_loops(q, k, v):
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = np.asarray(q, dtype=np.float64).reshape(-1, n_q, d_k)
    kf = np.asarray(k, dtype=np.float64).reshape(-1, n_k, d_k)
    vf = np.asarray(v, dtype=np.float64).reshape(-1, n_k, d_v)
    outs = np.zeros((qf.shape[0], n_q, d_v))
    ws = np.zeros((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            s = np.array([np.dot(qf[b, i], kf[b, j]) for j in range(n_k)]) / math.sqrt(d_k)
            s = np.exp(s - s.max())
            ws[b, i] = s / s.sum()
            outs[b, i] = ws[b, i] @ vf[b]
    return outs.reshape(lead + (n_q, d_v)), ws.reshape(lead + (n_q, n_k))


ENTRIES = [
    # softmax
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to all zeros and gives 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "max_without_keepdims",
          "takes the maximum without keepdims=True, so the (reduced) maxima broadcast against the "
          "wrong axis: a shape error for most inputs and silently wrong values for square ones",
          softmax_no_keepdims),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "subtracts the maximum along `axis` but normalises by the sum over the last axis "
          "(axis=-1 hard-coded), so any other axis gives slices that do not sum to 1",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "denominator_unshifted",
          "the numerator uses the shifted exponentials but the denominator sums np.exp(x) of the "
          "unshifted logits, which overflows to inf for large logits (weights 0) and is off by "
          "the factor exp(max) otherwise",
          softmax_unshifted_denominator),
    Entry("softmax", "wrong", "swapaxes_not_undone",
          "moves `axis` to the end with swapaxes but never swaps it back, so for any axis other "
          "than the last the result has the axes in the wrong order (wrong shape)",
          softmax_swap_not_restored),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "replaces -inf entries by 0 before the softmax (to avoid NaN), so masked entries get a "
          "positive weight instead of weight 0",
          softmax_neginf_to_zero),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "moveaxis_row_loop_fsum", None, softmax_row_loop),
    # attention
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights over axis -2 (the queries) instead of axis -1 (the keys), so "
          "each column rather than each row sums to 1",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T",
          "uses k.T, which reverses all axes of a batched k instead of swapping the last two, so "
          "batched inputs raise a shape error",
          attention_dot_T),
    Entry("attention", "wrong", "d_k_power_one_half_precedence",
          "writes `d_k ** 1 / 2`, which Python reads as (d_k ** 1) / 2, so scores are divided by "
          "d_k / 2 instead of sqrt(d_k)",
          attention_half_power),
    Entry("attention", "wrong", "returns_weights_then_out",
          "returns the pair in the order (weights, out) instead of (out, weights)",
          attention_returns_swapped),
    Entry("attention", "wrong", "no_max_subtraction",
          "exponentiates the scores without subtracting the row maximum, so large scores "
          "overflow to inf and the weights become NaN",
          attention_no_max_shift),
    Entry("attention", "wrong", "scale_applied_to_output",
          "divides the output by sqrt(d_k) after the softmax instead of scaling the scores "
          "before it, so the weights are those of the unscaled scores and the output is shrunk",
          attention_scale_after_softmax),
    Entry("attention", "right", "einsum_scipy_softmax", None, attention_einsum_scipy),
    Entry("attention", "right", "flattened_batch_loops", None, attention_flat_loops),
]
