"""Round l, lesson 01 (single head, numpy): softmax and attention."""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import special

from entry import Entry

# ============================================================================ softmax


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_scipy_no_axis(x, axis=-1):
    return special.softmax(np.asarray(x))


def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis)


def softmax_moveaxis_back(x, axis=-1):
    x = np.moveaxis(np.asarray(x), axis, -1)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out = e / e.sum(axis=-1, keepdims=True)
    return np.moveaxis(out, axis, -1)


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    num = np.exp(x - m)
    den = np.sum(np.exp(x), axis=axis, keepdims=True)
    return num / den


def softmax_torch_last_dim(x, axis=-1):
    t = torch.from_numpy(np.ascontiguousarray(x))
    return torch.softmax(t, dim=-1).numpy()


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - special.logsumexp(x, axis=axis, keepdims=True))


def _softmax_row(row):
    top = max(row)
    exps = [math.exp(v - top) for v in row]
    total = math.fsum(exps)
    return [e / total for e in exps]


def softmax_python_rows(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    rows = [_softmax_row(row.tolist()) for row in flat]
    out = np.array(rows, dtype=x.dtype).reshape(moved.shape)
    return np.moveaxis(out, -1, axis)


# ============================================================================ attention


def _stable_softmax(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def attention_dk_from_shape1(q, k, v):
    d_k = q.shape[1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    w = _stable_softmax(scores)
    return w @ v, w


def attention_numpy_dot_T(q, k, v):
    scores = np.matmul(q, k.T) / math.sqrt(q.shape[-1])
    w = _stable_softmax(scores)
    return np.matmul(w, v), w


def attention_power_precedence(q, k, v):
    d_k = q.shape[-1]
    scale = d_k ** -1/2
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    w = _stable_softmax(scores)
    return w @ v, w


def attention_einsum_key_major(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = np.einsum("...qd,...kd->...kq", q, k) * scale
    w = _stable_softmax(s, axis=-1)
    out = np.einsum("...kq,...kv->...qv", w, v)
    return out, np.swapaxes(w, -1, -2)


def attention_global_normaliser(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum()
    return w @ v, w


def attention_scores_times_v(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = _stable_softmax(scores)
    out = scores @ v
    return out, weights


def attention_torch_float64(q, k, v):
    dtype = np.result_type(q, k, v)
    tq, tk, tv = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    s = tq @ tk.transpose(-1, -2) / math.sqrt(tq.shape[-1])
    w = torch.softmax(s, dim=-1)
    out = w @ tv
    return out.numpy().astype(dtype), w.numpy().astype(dtype)


def attention_symmetric_scale_einsum(q, k, v):
    d_k = q.shape[-1]
    c = d_k ** -0.25
    s = np.einsum("...id,...jd->...ij", q * c, k * c)
    w = special.softmax(s, axis=-1)
    return np.einsum("...ij,...jv->...iv", w, v), w


ENTRIES = [
    Entry("softmax", "wrong", "global_max",
          "Subtracts the maximum of the whole array instead of each slice's maximum, so slices "
          "far below the global maximum underflow to 0/0 and give NaN.",
          softmax_global_max),
    Entry("softmax", "wrong", "scipy_no_axis",
          "Calls scipy.special.softmax without passing axis, and its default axis=None "
          "normalises over the whole array instead of along axis.",
          softmax_scipy_no_axis),
    Entry("softmax", "wrong", "sum_no_keepdims",
          "Divides by a sum taken without keepdims=True, so the totals broadcast against the "
          "wrong axis (wrong values on square inputs, a broadcasting error elsewhere).",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "moveaxis_back",
          "Moves the axis back with the same np.moveaxis(out, axis, -1) call instead of "
          "np.moveaxis(out, -1, axis), so for axis other than -1 the axes come back scrambled.",
          softmax_moveaxis_back),
    Entry("softmax", "wrong", "unshifted_denominator",
          "Shifts the numerator by the maximum but divides by the sum of the unshifted exp(x), "
          "so every value is off by a factor exp(-max) (and large inputs overflow).",
          softmax_unshifted_denominator),
    Entry("softmax", "wrong", "torch_last_dim",
          "Ignores the axis argument and always normalises along the last axis.",
          softmax_torch_last_dim),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_rows", None, softmax_python_rows),

    Entry("attention", "wrong", "dk_from_shape1",
          "Reads d_k from q.shape[1], which is the feature axis only for 2-D inputs; with batch "
          "or head axes it scales by the wrong size.",
          attention_dk_from_shape1),
    Entry("attention", "wrong", "numpy_dot_T",
          "Uses k.T, which in numpy reverses all axes, so batched keys are scrambled (or the "
          "product fails); only the last two axes should be swapped.",
          attention_numpy_dot_T),
    Entry("attention", "wrong", "power_precedence",
          "Writes the scale as d_k ** -1/2, which Python reads as (d_k ** -1) / 2 = 1/(2 d_k), "
          "not 1/sqrt(d_k).",
          attention_power_precedence),
    Entry("attention", "wrong", "einsum_key_major",
          "Lays the einsum scores out keys-by-queries and then takes the softmax over the last "
          "axis, so each key's weights are normalised over queries instead of each query's "
          "over keys.",
          attention_einsum_key_major),
    Entry("attention", "wrong", "global_normaliser",
          "Divides the exponentials by the sum over the whole array instead of each row's sum, "
          "so the weight rows do not sum to 1.",
          attention_global_normaliser),
    Entry("attention", "wrong", "scores_times_v",
          "Multiplies the raw scores by v instead of the softmax weights, so the output is not "
          "a weighted average of the values.",
          attention_scores_times_v),
    Entry("attention", "right", "torch_float64", None, attention_torch_float64),
    Entry("attention", "right", "symmetric_scale_einsum", None, attention_symmetric_scale_einsum),
]
