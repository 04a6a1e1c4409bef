"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, 6 wrong + 2 right each."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    shifted = x - np.max(x)
    ex = np.exp(shifted)
    return ex / np.sum(ex, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    row_max = x.max(axis=axis, keepdims=True)
    exps = np.exp(x - row_max)
    return exps / exps.sum(axis=-1, keepdims=True)


def softmax_neg_inf_to_zero(x, axis=-1):
    x = np.where(np.isinf(x), 0.0, x)  # avoid NaN from -inf
    top = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - top)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_denominator_unshifted(x, axis=-1):
    biggest = np.max(x, axis=axis, keepdims=True)
    numer = np.exp(x - biggest)
    denom = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numer / denom


def softmax_scipy_logsumexp(x, axis=-1):
    x = np.asarray(x)
    lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


def softmax_row_loop(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    out = np.zeros_like(moved)
    for idx in np.ndindex(moved.shape[:-1]):
        row = moved[idx]
        top = max(row)
        weights = [math.exp(v - top) for v in row]
        total = sum(weights)
        out[idx] = [w / total for w in weights]
    return np.moveaxis(out, -1, axis).astype(np.asarray(x).dtype)


# ============================================================================ attention
def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v, p


def attention_softmax_over_queries(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-2, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_precedence_sqrt(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= np.sum(weights, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_unstable_softmax(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_np_dot(q, k, v):
    d_k = q.shape[-1]
    scores = np.dot(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    out = np.dot(weights, v)
    return out, weights


def attention_einsum_lse(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) / math.sqrt(q64.shape[-1])
    w = np.exp(s - scipy.special.logsumexp(s, axis=-1, keepdims=True))
    out = np.einsum("...qk,...kv->...qv", w, v64)
    dtype = np.result_type(q, k, v)
    return out.astype(dtype), w.astype(dtype)


def attention_batch_loop(q, k, v):
    lead = q.shape[:-2]
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.empty(lead + (n_q, d_v), dtype=q.dtype)
    weights = np.empty(lead + (n_q, n_k), dtype=q.dtype)
    for idx in np.ndindex(*lead):
        sc = q[idx] @ k[idx].T / math.sqrt(q.shape[-1])
        w = scipy.special.softmax(sc, axis=1)
        weights[idx] = w
        out[idx] = w @ v[idx]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "max_without_keepdims",
          "the row maximum is taken without keepdims=True, so it broadcasts against the wrong "
          "axis: most inputs raise a broadcasting error and square ones silently subtract "
          "another row's maximum", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the logits without subtracting the maximum first, so logits of 1e4 "
          "overflow to inf and give NaN", softmax_no_shift),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to all zeros and gives 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_over_last_axis",
          "the max follows `axis` but the normalising sum is hard-coded to axis=-1, so for any "
          "other axis the result does not sum to 1 along `axis`", softmax_sum_last_axis),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "replaces -inf logits by 0 to dodge NaN, which gives those entries a positive weight "
          "instead of weight 0", softmax_neg_inf_to_zero),
    Entry("softmax", "wrong", "denominator_from_raw_logits",
          "the numerator is shifted by the maximum but the denominator sums exp of the raw "
          "logits, so every weight is off by a factor exp(max) (and 1e4 logits overflow)",
          softmax_denominator_unshifted),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_scipy_logsumexp),
    Entry("softmax", "right", "python_row_loop", None, softmax_row_loop),

    Entry("attention", "wrong", "k_dot_T",
          "transposes k with `.T`, which reverses every axis instead of swapping the last two, "
          "so any batched input breaks", attention_k_dot_T),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v) (v.shape[-1]) instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the scores over axis -2 (the queries) instead of over the keys",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "precedence_in_sqrt",
          "writes `/ d_k ** 1 / 2`, which by precedence divides by d_k and then by 2 instead of "
          "by sqrt(d_k)", attention_precedence_sqrt),
    Entry("attention", "wrong", "softmax_without_max_shift",
          "exponentiates the scaled scores without subtracting the row maximum, so large scores "
          "overflow to inf and the weights become NaN", attention_unstable_softmax),
    Entry("attention", "wrong", "np_dot_on_batches",
          "uses np.dot, which on arrays with more than two axes takes an outer product over the "
          "batch axes instead of batching like @, so batched inputs get the wrong shape or raise",
          attention_np_dot),
    Entry("attention", "right", "einsum_logsumexp_float64", None, attention_einsum_lse),
    Entry("attention", "right", "loop_over_batch_scipy", None, attention_batch_loop),
]
