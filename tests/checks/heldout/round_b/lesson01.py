"""Lesson 01 (single head, numpy): softmax, attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def sm_w_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def sm_w_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))  # one max for the whole array
    return e / e.sum(axis=axis, keepdims=True)


def sm_w_shift_keepdims(x, axis=-1):
    e = np.exp(x - x.max(axis=axis))
    return e / e.sum(axis=axis, keepdims=True)


def sm_w_axis_ignored(x, axis=-1):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sm_w_shift_by_min(x, axis=-1):
    e = np.exp(x - x.min(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sm_w_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def sm_w_torch_kwargs(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdim=True))  # torch's keyword
    return e / e.sum(axis=axis, keepdim=True)


def sm_w_sum_over_all(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum()


def sm_r_scipy(x, axis=-1):
    return scipy.special.softmax(x, axis=axis)


def sm_r_row_loop(x, axis=-1):
    moved = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty_like(flat)
    for i, row in enumerate(flat):
        top = max(row)
        ex = [math.exp(v - top) for v in row]
        total = sum(ex)
        out[i] = [e / total for e in ex]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def sm_r_logaddexp(x, axis=-1):
    lse = np.logaddexp.reduce(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


# ============================================================================ attention
def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def at_w_scale_dv(q, k, v):
    w = _softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(v.shape[-1]))
    return w @ v, w


def at_w_scale_nk(q, k, v):
    w = _softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2]))
    return w @ v, w


def at_w_full_transpose(q, k, v):
    w = _softmax(q @ k.T / math.sqrt(q.shape[-1]))  # .T reverses every axis
    return w @ v, w


def at_w_softmax_queries(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-2, keepdims=True)
    return w @ v, w


def at_w_unstable(q, k, v):
    e = np.exp(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def at_w_scale_after_softmax(q, k, v):
    w = _softmax(q @ np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    return w @ v, w


def at_w_np_dot(q, k, v):
    w = _softmax(np.dot(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1]))
    return np.dot(w, v), w


def at_w_divide_by_d(q, k, v):
    w = _softmax(q @ np.swapaxes(k, -1, -2) / q.shape[-1])
    return w @ v, w


def at_w_returns_swapped(q, k, v):
    w = _softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]))
    return w, w @ v


def at_r_einsum(q, k, v):
    s = np.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    w = scipy.special.softmax(s, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v), w


def at_r_loop(q, k, v):
    lead = q.shape[:-2]
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    Q, K, V = q.reshape(-1, n_q, d), k.reshape(-1, n_k, d), v.reshape(-1, n_k, d_v)
    out = np.zeros((Q.shape[0], n_q, d_v))
    wts = np.zeros((Q.shape[0], n_q, n_k))
    for b in range(Q.shape[0]):
        for i in range(n_q):
            s = np.array([np.dot(Q[b, i], K[b, j]) for j in range(n_k)]) / np.sqrt(d)
            e = np.exp(s - s.max())
            wts[b, i] = e / e.sum()
            out[b, i] = wts[b, i] @ V[b]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


def at_r_float32(q, k, v):
    q32, k32, v32 = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    s = q32 @ np.swapaxes(k32, -1, -2) / np.float32(np.sqrt(q.shape[-1]))
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v32, w


E = Entry
ENTRIES = [
    E("softmax", "wrong", "no_max_shift",
      "Exponentiates the raw inputs without subtracting the maximum, so inputs of size 1e4 "
      "overflow.", sm_w_no_shift),
    E("softmax", "wrong", "global_max_shift",
      "Subtracts the maximum of the whole array instead of each slice's maximum, so rows far "
      "below it underflow to 0/0.", sm_w_global_max),
    E("softmax", "wrong", "max_without_keepdims",
      "Takes the max along axis without keepdims, so the shift broadcasts along the wrong axis "
      "(or fails).", sm_w_shift_keepdims),
    E("softmax", "wrong", "axis_ignored",
      "Always normalises along the last axis, ignoring the axis argument.", sm_w_axis_ignored),
    E("softmax", "wrong", "shift_by_min",
      "Subtracts the minimum instead of the maximum, which makes overflow worse.",
      sm_w_shift_by_min),
    E("softmax", "wrong", "returns_log_softmax",
      "Returns the log-softmax (x minus logsumexp) instead of the probabilities.",
      sm_w_log_softmax),
    E("softmax", "wrong", "torch_keepdim_keyword",
      "Writes torch's keepdim= keyword in numpy calls, which raises a TypeError.",
      sm_w_torch_kwargs),
    E("softmax", "wrong", "normalises_by_grand_total",
      "Divides by the sum of the whole array instead of the sum along axis.", sm_w_sum_over_all),
    E("softmax", "right", "scipy_special", None, sm_r_scipy),
    E("softmax", "right", "python_row_loop", None, sm_r_row_loop),
    E("softmax", "right", "logaddexp_reduce", None, sm_r_logaddexp),
    E("attention", "wrong", "scale_by_value_width",
      "Scales scores by 1/sqrt(d_v) (v's width) instead of 1/sqrt(d_k).", at_w_scale_dv),
    E("attention", "wrong", "scale_by_num_keys",
      "Scales scores by 1/sqrt(N_k), the number of keys, instead of 1/sqrt(d_k).",
      at_w_scale_nk),
    E("attention", "wrong", "k_dot_T_on_batches",
      "Uses k.T, which reverses every axis of a batched array instead of swapping the last "
      "two.", at_w_full_transpose),
    E("attention", "wrong", "softmax_over_queries",
      "Normalises the scores over the query axis (-2) instead of the key axis.",
      at_w_softmax_queries),
    E("attention", "wrong", "unstable_softmax",
      "Exponentiates scores without subtracting the row maximum, overflowing on large "
      "scores.", at_w_unstable),
    E("attention", "wrong", "scale_after_softmax",
      "Divides the weights by sqrt(d_k) after the softmax instead of scaling the scores "
      "before it.", at_w_scale_after_softmax),
    E("attention", "wrong", "np_dot_on_batches",
      "Uses np.dot, which on batched arrays takes an outer product over the batch axes "
      "instead of batching like @.", at_w_np_dot),
    E("attention", "wrong", "divides_by_d",
      "Divides the scores by d_k instead of sqrt(d_k).", at_w_divide_by_d),
    E("attention", "wrong", "returns_weights_first",
      "Returns (weights, out) instead of (out, weights).", at_w_returns_swapped),
    E("attention", "right", "einsum_scipy", None, at_r_einsum),
    E("attention", "right", "python_loops", None, at_r_loop),
    E("attention", "right", "float32_internals", None, at_r_float32),
]
