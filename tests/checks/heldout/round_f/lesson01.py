"""Lesson 01 (numpy): softmax and attention. Learners' answers, one slip each (wrong) or unusual (right)."""

import numpy as np
import scipy.special

from entry import Entry


# ---------------------------------------------------------------- softmax, wrong
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))  # one maximum for the whole array
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_reinsert_last(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    e = np.exp(x - np.expand_dims(m, axis))
    s = np.sum(e, axis=axis)
    return e / s[..., None]  # reduced axis put back at the end


def softmax_min_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.min(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_log_only(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return x - lse


def softmax_axis_ignored(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_total_sum(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e)


# ---------------------------------------------------------------- softmax, right
def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(np.asarray(x), axis=axis)


def softmax_rows_loop(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1]).astype(np.float64)
    out = np.empty_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        top = row.max()
        w = np.exp(row - top)
        out[r] = w / w.sum()
    return np.moveaxis(out.reshape(moved.shape), -1, axis).astype(x.dtype)


# ---------------------------------------------------------------- attention, wrong
def _softmax_last(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_dv(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = _softmax_last(s)
    return w @ v, w


def attention_softmax_queries(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(axis=-2, keepdims=True)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[-1])
    w = _softmax_last(s)
    return w @ v, w


def attention_divide_by_dk(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / q.shape[-1]
    w = _softmax_last(s)
    return w @ v, w


def attention_returns_scores(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _softmax_last(s)
    return w @ v, s


def attention_unstable_exp(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


# ---------------------------------------------------------------- attention, right
def attention_einsum64(q, k, v):
    dtype = np.result_type(q, k, v)
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) / np.sqrt(q64.shape[-1])
    w = np.exp(s - scipy.special.logsumexp(s, axis=-1, keepdims=True))
    out = np.einsum("...qk,...kv->...qv", w, v64)
    return out.astype(dtype), w.astype(dtype)


def attention_flat_loop(q, k, v):
    lead = q.shape[:-2]
    qf = q.reshape((-1,) + q.shape[-2:])
    kf = k.reshape((-1,) + k.shape[-2:])
    vf = v.reshape((-1,) + v.shape[-2:])
    outs, ws = [], []
    for i in range(qf.shape[0]):
        s = qf[i] @ kf[i].T * (1.0 / np.sqrt(qf.shape[-1]))
        w = scipy.special.softmax(s, axis=1)
        outs.append(w @ vf[i])
        ws.append(w)
    out = np.stack(outs).reshape(lead + (q.shape[-2], v.shape[-1]))
    w = np.stack(ws).reshape(lead + (q.shape[-2], k.shape[-2]))
    return out, w


E = Entry
ENTRIES = [
    E("softmax", "wrong", "global_max_shift",
      "Subtracts the maximum of the whole array instead of each slice's own maximum, so slices "
      "far below the global maximum underflow to 0/0.", softmax_global_max),
    E("softmax", "wrong", "sum_reinserted_at_end",
      "Puts the reduced axis of the normalising sum back at the end ([..., None]) instead of at "
      "`axis`, so only axis=-1 normalises correctly.", softmax_reinsert_last),
    E("softmax", "wrong", "min_shift",
      "Shifts the logits by the slice minimum instead of the maximum, so the exponents are "
      "positive and overflow for large inputs.", softmax_min_shift),
    E("softmax", "wrong", "log_softmax_not_exponentiated",
      "Computes x - logsumexp(x), the log-softmax, and forgets to exponentiate it.",
      softmax_log_only),
    E("softmax", "wrong", "axis_argument_ignored",
      "Ignores the `axis` argument and always normalises along the last axis.",
      softmax_axis_ignored),
    E("softmax", "wrong", "normalised_by_grand_total",
      "Divides by the sum of the whole array instead of the sum along `axis`, so the slices do "
      "not each sum to 1.", softmax_total_sum),
    E("softmax", "right", "scipy_special", None, softmax_scipy),
    E("softmax", "right", "moveaxis_row_loop", None, softmax_rows_loop),

    E("attention", "wrong", "scaled_by_sqrt_dv",
      "Scales the scores by 1/sqrt(d_v), the value width, instead of 1/sqrt(d_k).",
      attention_scale_dv),
    E("attention", "wrong", "softmax_over_queries",
      "Takes the softmax over the query axis (-2) instead of over the keys (-1).",
      attention_softmax_queries),
    E("attention", "wrong", "k_dot_T_reverses_all_axes",
      "Writes k.T, which reverses every axis of a batched k, instead of swapping only the "
      "last two axes.", attention_k_dot_T),
    E("attention", "wrong", "divides_by_dk_not_sqrt",
      "Divides the scores by d_k instead of sqrt(d_k).", attention_divide_by_dk),
    E("attention", "wrong", "returns_scores_as_weights",
      "Returns the scaled scores instead of the softmax weights as the second output.",
      attention_returns_scores),
    E("attention", "wrong", "softmax_without_max_shift",
      "Exponentiates the scores without subtracting the row maximum, so large scores "
      "overflow to inf/inf = NaN.", attention_unstable_exp),
    E("attention", "right", "einsum_float64_logsumexp", None, attention_einsum64),
    E("attention", "right", "flattened_batch_loop", None, attention_flat_loop),
]
