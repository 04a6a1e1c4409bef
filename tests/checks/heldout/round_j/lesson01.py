"""Lesson 01 (numpy): softmax and attention; round j entries."""

import math

import numpy as np
from scipy.special import logsumexp
from scipy.special import softmax as sp_softmax

from entry import Entry

# ---------------------------------------------------------------------------------- softmax


def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)  # no keepdims: broadcasts against the last axis
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x))  # one max for the whole array
    return e / e.sum(axis=axis, keepdims=True)


def softmax_axis_hardcoded(x, axis=-1):
    x = np.asarray(x)
    shifted = x - x.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_shift_denominator_only(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    return np.exp(x) / np.sum(np.exp(x - m), axis=axis, keepdims=True)


def softmax_neg_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # "avoid NaN" by removing the infinities
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_mean_normaliser(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.mean(e, axis=axis, keepdims=True)


def softmax_via_logsumexp(x, axis=-1):
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        lse = logsumexp(x, axis=axis, keepdims=True)
        out = np.exp(x - lse)
    return np.nan_to_num(out, nan=0.0).astype(x.dtype if np.issubdtype(x.dtype, np.floating)
                                              else float)


def softmax_python_rows(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    rows = []
    for row in flat:
        vals = [float(v) for v in row]
        top = max(vals)
        if top == -math.inf:
            rows.append([0.0] * len(vals))
            continue
        exps = [math.exp(v - top) for v in vals]
        total = math.fsum(exps)
        rows.append([e / total for e in exps])
    res = np.array(rows, dtype=np.float64).reshape(moved.shape)
    return np.moveaxis(res, -1, axis)


# -------------------------------------------------------------------------------- attention


def attention_scale_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = sp_softmax(scores, axis=-1)
    return w @ v, w


def attention_np_dot(q, k, v):
    d = q.shape[-1]
    scores = np.dot(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return np.dot(w, v), w


def attention_softmax_over_queries(q, k, v):
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    w = sp_softmax(scores, axis=-2)
    return w @ v, w


def attention_sqrt_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2  # meant d_k ** (1/2)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_no_max_shift(q, k, v):
    scores = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_weights_key_major(q, k, v):
    # scores laid out (..., N_k, N_q); normalised over keys (axis -2) correctly
    s = k @ np.swapaxes(q, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-2, keepdims=True)
    out = np.swapaxes(w, -1, -2) @ v
    return out, w


def attention_query_loops(q, k, v):
    q, k, v = (np.asarray(a) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d))
    kb = np.broadcast_to(k, lead + (n_k, d))
    vb = np.broadcast_to(v, lead + (n_k, d_v))
    out = np.zeros(lead + (n_q, d_v))
    w = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            s = kb[idx] @ qb[idx][i] / math.sqrt(d)
            s = s - s.max()
            e = np.exp(s)
            row = e / e.sum()
            w[idx + (i,)] = row
            out[idx + (i,)] = row @ vb[idx]
    return out, w


def attention_float64_logsumexp(q, k, v):
    dtype = np.result_type(q, k, v)
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) * (q64.shape[-1] ** -0.5)
    w = np.exp(s - logsumexp(s, axis=-1, keepdims=True))
    out = np.einsum("...ij,...jd->...id", w, v64)
    return out.astype(dtype), w.astype(dtype)


ENTRIES = [
    Entry("softmax", "wrong", "max_without_keepdims",
          "Takes the maximum without keepdims, so it broadcasts against the last axis and "
          "subtracts a different number from each entry of a row, which changes the weights "
          "(or fails on non-square input).", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global_max_shift",
          "Subtracts one maximum over the whole array instead of each slice's own maximum, so "
          "a slice far below the global maximum underflows to 0/0 and gives NaN.",
          softmax_global_max),
    Entry("softmax", "wrong", "axis_argument_ignored",
          "Always normalises over the last axis, ignoring the axis argument.",
          softmax_axis_hardcoded),
    Entry("softmax", "wrong", "shift_only_in_denominator",
          "Subtracts the maximum only inside the denominator and exponentiates the raw "
          "inputs in the numerator, so the weights are scaled by exp(max) and overflow for "
          "large inputs.", softmax_shift_denominator_only),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "Replaces -inf entries by 0 before the softmax, so masked entries get a positive "
          "weight instead of weight 0.", softmax_neg_inf_to_zero),
    Entry("softmax", "wrong", "mean_as_normaliser",
          "Divides by the mean of the exponentials instead of their sum, so each slice sums "
          "to its length instead of 1.", softmax_mean_normaliser),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_via_logsumexp),
    Entry("softmax", "right", "python_rows_fsum", None, softmax_python_rows),

    Entry("attention", "wrong", "scaled_by_sqrt_d_v",
          "Scales the scores by 1/sqrt(d_v), the value width, instead of 1/sqrt(d_k).",
          attention_scale_dv),
    Entry("attention", "wrong", "np_dot_on_batches",
          "Uses np.dot, which on stacked arrays forms a product over all pairs of batch "
          "entries instead of a batched matrix product, so batched inputs give the wrong "
          "shape.", attention_np_dot),
    Entry("attention", "wrong", "softmax_over_queries",
          "Normalises the scores over the query axis (-2) instead of over the keys.",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "sqrt_written_as_power_one_half",
          "Writes the scale as d_k ** 1 / 2, which Python reads as d_k / 2, so scores are "
          "divided by d_k/2 instead of sqrt(d_k).", attention_sqrt_precedence),
    Entry("attention", "wrong", "softmax_without_max_shift",
          "Exponentiates the scaled scores without subtracting the row maximum, so large "
          "scores overflow to inf and the weights become NaN.", attention_no_max_shift),
    Entry("attention", "wrong", "weights_returned_key_major",
          "Builds the scores as k q^T and returns the weights in that (N_k, N_q) layout, "
          "transposed from the (N_q, N_k) the contract asks for (the output is right).",
          attention_weights_key_major),
    Entry("attention", "right", "per_query_loops", None, attention_query_loops),
    Entry("attention", "right", "float64_einsum_logsumexp", None, attention_float64_logsumexp),
]
