"""Lesson 01 (numpy): softmax and attention. Learners' answers, one slip per wrong entry."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ------------------------------------------------------------------ softmax, wrong
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_no_keepdims_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = e.sum(axis=-1, keepdims=True)
    return e / s


def softmax_no_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_neg_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_max_axis0(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=0, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = e.sum(axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


# ------------------------------------------------------------------ softmax, right
def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(np.asarray(x), axis=axis)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    lse = scipy.special.logsumexp(x.astype(np.float64), axis=axis, keepdims=True)
    return np.exp(x.astype(np.float64) - lse).astype(x.dtype)


def softmax_loop_rows(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.zeros_like(moved)
    for idx in np.ndindex(*moved.shape[:-1]):
        row = moved[idx]
        top = max(row)
        ex = [math.exp(v - top) for v in row]
        tot = sum(ex)
        out[idx] = [e / tot for e in ex]
    return np.moveaxis(out, -1, axis).astype(x.dtype)


# ------------------------------------------------------------------ attention helpers
def _sm(s):
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------ attention, wrong
def attention_scale_by_dk(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / q.shape[-1]
    w = _sm(scores)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    m = scores.max(axis=-2, keepdims=True)
    e = np.exp(scores - m)
    w = e / e.sum(axis=-2, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    scores = q @ k.T / np.sqrt(q.shape[-1])
    w = _sm(scores)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    w = _sm(scores)
    return w @ v, w


def attention_unstable_softmax(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_returns_scores(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _sm(scores)
    return w @ v, scores


# ------------------------------------------------------------------ attention, right
def attention_einsum64(q, k, v):
    dtype = np.result_type(q, k, v)
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) / math.sqrt(q64.shape[-1])
    w = scipy.special.softmax(s, axis=-1)
    out = np.einsum("...qk,...kd->...qd", w, v64)
    return out.astype(dtype), w.astype(dtype)


def attention_loops(q, k, v):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    out = np.zeros(lead + (n_q, d_v))
    w = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            s = np.array([np.dot(q[idx][i], k[idx][j]) for j in range(n_k)]) / math.sqrt(d)
            s = s - s.max()
            p = np.exp(s) / np.exp(s).sum()
            w[idx][i] = p
            out[idx][i] = p @ v[idx]
    return out, w


ENTRIES = [
    Entry("softmax", "wrong", "global_max", "Subtracts the maximum of the whole array instead "
          "of each slice's maximum along axis, so rows far below the global maximum underflow "
          "to 0/0.", softmax_global_max),
    Entry("softmax", "wrong", "max_without_keepdims", "Takes the maximum along axis without "
          "keepdims=True, so subtracting it broadcasts against the wrong axis.",
          softmax_no_keepdims_max),
    Entry("softmax", "wrong", "sum_over_last_axis", "Normalises by a sum over the last axis "
          "regardless of the axis argument (the max uses axis, the sum does not).",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "no_max_shift", "Exponentiates the raw inputs without subtracting "
          "the maximum, so large inputs overflow to inf/NaN.", softmax_no_shift),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero", "Replaces -inf entries by 0 before "
          "exponentiating to avoid NaN, so masked entries get a positive weight instead of 0.",
          softmax_neg_inf_to_zero),
    Entry("softmax", "wrong", "max_along_axis0", "Takes the stabilising maximum along axis 0 "
          "instead of along axis, which shifts each row by different constants and changes the "
          "result.", softmax_max_axis0),
    Entry("softmax", "right", "scipy_softmax", None, softmax_scipy),
    Entry("softmax", "right", "logsumexp_float64", None, softmax_logsumexp),
    Entry("softmax", "right", "python_loops_moveaxis", None, softmax_loop_rows),

    Entry("attention", "wrong", "scale_one_over_dk", "Divides the scores by d_k instead of "
          "sqrt(d_k).", attention_scale_by_dk),
    Entry("attention", "wrong", "softmax_over_queries", "Normalises the weights over the query "
          "axis (-2) instead of over the keys (-1).", attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T_transpose", "Transposes k with .T, which reverses all "
          "axes instead of swapping the last two, so batched inputs break.", attention_dot_T),
    Entry("attention", "wrong", "scale_by_dv", "Scales the scores by 1/sqrt of the value width "
          "d_v (v.shape[-1]) instead of the key width d_k.", attention_scale_dv),
    Entry("attention", "wrong", "softmax_without_max_shift", "Computes the softmax without "
          "subtracting the row maximum, so large scores overflow to NaN.",
          attention_unstable_softmax),
    Entry("attention", "wrong", "returns_scores_not_weights", "Returns the scaled scores "
          "(before the softmax) as the second output instead of the attention weights.",
          attention_returns_scores),
    Entry("attention", "right", "einsum_float64_scipy", None, attention_einsum64),
    Entry("attention", "right", "explicit_loops", None, attention_loops),
]
