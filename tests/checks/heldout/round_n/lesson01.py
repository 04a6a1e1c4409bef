"""Held-out catalogue, lesson 01 (single-head attention, numpy): softmax, attention."""

import math

import numpy as np
import torch
from scipy.special import logsumexp

from entry import Entry


# ============================================================================ softmax
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_without_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max(axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / exps.sum(keepdims=True)


def softmax_inf_zeroed(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # "clean up" infinities before exponentiating
    z = x - np.max(x, axis=axis, keepdims=True)
    ez = np.exp(z)
    return ez / np.sum(ez, axis=axis, keepdims=True)


def softmax_axis_special_cases(x, axis=-1):
    x = np.asarray(x, dtype=float)
    if axis == 0:
        return softmax_axis_special_cases(x.T).T
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x, dtype=float)
    numerator = np.exp(x - np.max(x, axis=axis, keepdims=True))
    denominator = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numerator / denominator


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def softmax_torch(x, axis=-1):
    t = torch.from_numpy(np.ascontiguousarray(x))
    return torch.softmax(t, dim=axis).numpy()


# ============================================================================ attention
def _stable_softmax_last(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_by_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = _stable_softmax_last(scores)
    return w @ v, w


def attention_precedence_sqrt(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    w = _stable_softmax_last(scores)
    return w @ v, w


def attention_naive_exp(q, k, v):
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return np.matmul(weights, v), weights


def attention_np_dot(q, k, v):
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    weights = _stable_softmax_last(scores)
    out = np.dot(weights, v)
    return out, weights


def attention_returns_scores(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    weights = _stable_softmax_last(scores)
    out = weights @ v
    return out, scores


def attention_softmax_over_queries(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = scores - scores.max(axis=-2, keepdims=True)
    e = np.exp(s)
    weights = e / e.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_einsum_float64(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    lse = logsumexp(scores, axis=-1, keepdims=True)
    weights = np.exp(scores - lse)
    out = np.einsum("...ij,...jv->...iv", weights, v64)
    return out, weights


def attention_loops(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k)
    kf = np.broadcast_to(k, lead + (n_k, d_k)).reshape(-1, n_k, d_k)
    vf = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    out = np.zeros((qf.shape[0], n_q, d_v))
    wts = np.zeros((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            row = [float(np.dot(qf[b, i], kf[b, j])) / math.sqrt(d_k) for j in range(n_k)]
            top = max(row)
            ex = [math.exp(s - top) for s in row]
            tot = sum(ex)
            for j in range(n_k):
                wts[b, i, j] = ex[j] / tot
                out[b, i] += wts[b, i, j] * vf[b, j]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("softmax", "wrong", "max_without_keepdims",
          "The maximum is taken without keepdims=True, so it broadcasts against the wrong axis: "
          "in a square 2-D input entry (i, j) gets row j's maximum subtracted (silently "
          "wrong), and non-square 2-D inputs raise a broadcasting error.",
          softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global_max_shift",
          "It subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice whose logits lie thousands below another slice's underflows to 0/0 and "
          "returns NaN.",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_without_axis",
          "np.sum is called without axis=axis, so the exponentials are divided by the sum over "
          "the whole array and only a 1-D input comes out normalised.",
          softmax_sum_without_axis),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "It replaces -inf entries by 0 before exponentiating, so masked entries receive a "
          "positive weight instead of weight 0.",
          softmax_inf_zeroed),
    Entry("softmax", "wrong", "only_axis_0_handled",
          "Only axis=0 is handled specially (by transposing); every other axis, e.g. axis=1 or "
          "axis=-2 of a 3-D array, is silently normalised along the last axis.",
          softmax_axis_special_cases),
    Entry("softmax", "wrong", "unshifted_denominator",
          "The numerator uses the max-shifted exponentials but the denominator sums np.exp(x) "
          "without the shift, so every weight is off by a factor exp(-max) and large logits "
          "overflow to inf in the denominator.",
          softmax_unshifted_denominator),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "torch_softmax", None, softmax_torch),

    Entry("attention", "wrong", "scale_by_d_v",
          "Scores are divided by sqrt(v.shape[-1]) (d_v) instead of sqrt(d_k), which is only "
          "right when the value width happens to equal the key width.",
          attention_scale_by_dv),
    Entry("attention", "wrong", "precedence_in_sqrt",
          "d_k ** 1/2 parses as (d_k ** 1) / 2, so the scores are divided by d_k / 2 instead of "
          "sqrt(d_k).",
          attention_precedence_sqrt),
    Entry("attention", "wrong", "naive_exp_overflow",
          "The softmax exponentiates the scores without subtracting the row maximum, so large "
          "scores overflow to inf and the weights become NaN.",
          attention_naive_exp),
    Entry("attention", "wrong", "np_dot_for_batches",
          "np.dot is used for weights @ v, but with batch axes np.dot pairs every batch of the "
          "weights with every batch of v instead of broadcasting them, so the output gets "
          "extra axes; it is only right for 2-D inputs.",
          attention_np_dot),
    Entry("attention", "wrong", "returns_raw_scores",
          "It returns the scaled scores as the second result instead of the softmax weights "
          "(out itself is correct).",
          attention_returns_scores),
    Entry("attention", "wrong", "softmax_over_queries",
          "The softmax normalises along axis -2 (over the queries) instead of over the keys, "
          "so the rows of the weights do not sum to 1.",
          attention_softmax_over_queries),
    Entry("attention", "right", "einsum_logsumexp_float64", None, attention_einsum_float64),
    Entry("attention", "right", "python_loops", None, attention_loops),
]
