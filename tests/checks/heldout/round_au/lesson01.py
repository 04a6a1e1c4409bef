"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, 6 wrong + 2 right each."""

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


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x)
    m = x.max(axis=axis, keepdims=True)
    ex = np.exp(x - m)
    return ex / ex.sum(axis=-1, keepdims=True)


def softmax_max_reexpanded(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis)[..., None]
    exps = np.exp(x - m)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def softmax_unshifted_sum(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    s = np.sum(np.exp(x), axis=axis, keepdims=True)
    return np.exp(x - m - np.log(s))


def softmax_scipy_no_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    return scipy.special.softmax(x)


def softmax_neginf_to_zero(x, axis=-1):
    logits = np.array(x, copy=True)
    logits[np.isinf(logits)] = 0.0  # "clean up" the -inf entries first
    top = logits.max(axis=axis, keepdims=True)
    w = np.exp(logits - top)
    return w / w.sum(axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    lse = scipy.special.logsumexp(x.astype(np.float64), axis=axis, keepdims=True)
    return np.exp(x.astype(np.float64) - lse).astype(x.dtype)


def softmax_row_loop(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty(flat.shape, dtype=np.float64)
    for r, row in enumerate(flat):
        peak = max(float(v) for v in row)
        terms = [math.exp(float(v) - peak) for v in row]
        total = math.fsum(terms)
        out[r] = [t / total for t in terms]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


# ============================================================================ attention
def attention_scale_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = (q @ k.T) / math.sqrt(d_k)
    s = s - np.max(s, axis=-1, keepdims=True)
    p = np.exp(s)
    p /= np.sum(p, axis=-1, keepdims=True)
    return p @ v, p


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(d)
    logits = logits - logits.max(axis=-2, keepdims=True)
    e = np.exp(logits)
    weights = e / e.sum(axis=-2, keepdims=True)
    return np.matmul(weights, v), weights


def attention_power_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    scores = scores - scores.max(-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(-1, keepdims=True)
    return weights @ v, weights


def attention_dk_from_shape1(q, k, v):
    d_k = q.shape[1]
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d_k)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_no_shift(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    e = np.exp((q @ np.swapaxes(k, -1, -2)) * scale)
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_einsum_lse(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64 / np.sqrt(q64.shape[-1]), k64)
    w = np.exp(s - scipy.special.logsumexp(s, axis=-1, keepdims=True))
    out = np.einsum("...ij,...je->...ie", w, v64)
    return out, w


def attention_batch_loop(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    qs = q * (1.0 / math.sqrt(q.shape[-1]))
    for idx in np.ndindex(*lead):
        s = qs[idx] @ k[idx].T
        s = s - s.max(axis=1)[:, None]
        w = np.exp(s)
        w = w / w.sum(axis=1)[:, None]
        weights[idx] = w
        out[idx] = w @ v[idx]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "subtracts one maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to 0/0 (NaN)", softmax_global_max),
    Entry("softmax", "wrong", "sum_over_last_axis",
          "the normalising sum runs over the last axis (axis=-1 hard-coded) instead of `axis`, "
          "so softmax along any other axis does not sum to 1", softmax_sum_last_axis),
    Entry("softmax", "wrong", "max_reexpanded_last_axis",
          "drops keepdims on the max and adds the axis back with [..., None], which only "
          "lines up when `axis` is the last one: other axes subtract the wrong maxima or fail "
          "to broadcast", softmax_max_reexpanded),
    Entry("softmax", "wrong", "unshifted_normaliser",
          "shifts the numerator by the maximum but normalises by the unshifted sum of exp(x), so "
          "every weight is off by a factor exp(-max) (and logits of 1e4 overflow the sum)", softmax_unshifted_sum),
    Entry("softmax", "wrong", "scipy_without_axis",
          "calls scipy.special.softmax(x) without axis=..., whose default axis=None normalises "
          "over the whole array instead of each row", softmax_scipy_no_axis),
    Entry("softmax", "wrong", "neginf_set_to_zero",
          "replaces -inf logits by 0 before the softmax, so entries that must get weight 0 "
          "get exp(0 - max) instead", softmax_neginf_to_zero),
    Entry("softmax", "right", "logsumexp_float64", None, softmax_logsumexp),
    Entry("softmax", "right", "row_loop_fsum", None, softmax_row_loop),
    Entry("attention", "wrong", "scale_by_sqrt_dv",
          "scales the scores by 1/sqrt(d_v) (v.shape[-1]) instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with .T, which reverses every axis of a batched array instead of "
          "swapping the last two (batched inputs then fail in the matmul)", attention_k_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the scores over axis -2 (the queries) instead of the keys, so the rows "
          "of weights do not sum to 1", attention_softmax_over_queries),
    Entry("attention", "wrong", "power_precedence",
          "writes `/ d_k ** 1 / 2`, which is (scores / d_k) / 2 by precedence, not scores / "
          "sqrt(d_k)", attention_power_precedence),
    Entry("attention", "wrong", "d_k_from_shape1",
          "reads d_k as q.shape[1], which is d_k only for 2-D q; with batch axes it is N_q or "
          "a head count", attention_dk_from_shape1),
    Entry("attention", "wrong", "no_max_shift",
          "exponentiates the scaled scores without subtracting the row maximum, so large "
          "scores overflow to inf and the weights become NaN", attention_no_shift),
    Entry("attention", "right", "einsum_logsumexp", None, attention_einsum_lse),
    Entry("attention", "right", "loop_over_batch", None, attention_batch_loop),
]
