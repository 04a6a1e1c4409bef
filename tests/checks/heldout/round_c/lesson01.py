"""Round c, lesson 01: softmax, attention (numpy)."""

import numpy as np
import scipy.special

from entry import Entry


# ------------------------------------------------------------------ softmax
def softmax_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis)


def softmax_ignores_axis(x, axis=-1):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_whole_array_sum(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum()


def softmax_subtract_min(x, axis=-1):
    e = np.exp(x - np.min(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(x, axis=axis)


def softmax_logsumexp_rows(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        m = row.max()
        lse = m + np.log(np.sum(np.exp(row - m)))
        out[r] = np.exp(row - lse)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


# ------------------------------------------------------------------ attention
def _sm(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_by_dk(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2) / q.shape[-1])
    return w @ v, w


def attention_scale_by_dv(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1]))
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-2, keepdims=True)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    w = _sm(q @ k.T / np.sqrt(q.shape[-1]))
    return w @ v, w


def attention_no_scale(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2))
    return w @ v, w


def attention_dk_from_shape1(q, k, v):
    d_k = q.shape[1]
    w = _sm(q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k))
    return w @ v, w


def attention_einsum(q, k, v):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    w = scipy.special.softmax(s, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v), w


def attention_loops_float64(q, k, v):
    q, k, v = (np.asarray(a) for a in (q, k, v))
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d).astype(np.float64)
    kf = k.reshape(-1, n_k, d).astype(np.float64)
    vf = v.reshape(-1, n_k, d_v).astype(np.float64)
    out = np.zeros((qf.shape[0], n_q, d_v))
    wts = np.zeros((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            s = np.array([qf[b, i] @ kf[b, j] for j in range(n_k)]) / np.sqrt(d)
            e = np.exp(s - s.max())
            wts[b, i] = e / e.sum()
            out[b, i] = wts[b, i] @ vf[b]
    return (out.reshape(lead + (n_q, d_v)).astype(q.dtype),
            wts.reshape(lead + (n_q, n_k)).astype(q.dtype))


ENTRIES = [
    Entry("softmax", "wrong", "no_max_shift", "Exponentiates the raw inputs without subtracting the maximum, so inputs of size 1e4 overflow to inf/NaN.", softmax_no_shift),
    Entry("softmax", "wrong", "global_max", "Subtracts the maximum of the whole array instead of each slice's maximum, so a slice far below the global maximum underflows to 0/0.", softmax_global_max),
    Entry("softmax", "wrong", "sum_without_keepdims", "Sums without keepdims=True, so the division broadcasts the totals along the wrong axis (or fails).", softmax_no_keepdims),
    Entry("softmax", "wrong", "ignores_axis", "Always normalises over the last axis and ignores the axis argument.", softmax_ignores_axis),
    Entry("softmax", "wrong", "whole_array_total", "Divides by the sum of the whole array instead of the sum along the axis, so slices do not each sum to 1.", softmax_whole_array_sum),
    Entry("softmax", "wrong", "subtracts_min", "Subtracts the minimum instead of the maximum, so the exponents become large and positive and overflow.", softmax_subtract_min),
    Entry("softmax", "right", "scipy_softmax", None, softmax_scipy),
    Entry("softmax", "right", "row_loop_logsumexp", None, softmax_logsumexp_rows),
    Entry("attention", "wrong", "scale_by_dk", "Divides the scores by d_k instead of sqrt(d_k).", attention_scale_by_dk),
    Entry("attention", "wrong", "scale_by_dv", "Scales by the square root of the value width d_v instead of the key width d_k.", attention_scale_by_dv),
    Entry("attention", "wrong", "softmax_over_queries", "Takes the softmax over the query axis (-2) instead of the key axis, so each key's column sums to 1 instead of each query's row.", attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T", "Transposes k with .T, which reverses all axes and breaks batched inputs; only the last two axes should be swapped.", attention_k_dot_T),
    Entry("attention", "wrong", "no_scaling", "Forgets to scale the scores by 1/sqrt(d_k).", attention_no_scale),
    Entry("attention", "wrong", "d_k_from_shape1", "Reads d_k as q.shape[1], which is the query count rather than the feature width once there is a batch axis.", attention_dk_from_shape1),
    Entry("attention", "right", "einsum_scipy", None, attention_einsum),
    Entry("attention", "right", "explicit_loops", None, attention_loops_float64),
]
