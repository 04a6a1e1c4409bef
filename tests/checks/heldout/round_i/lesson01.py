"""Lesson 01 (single head): softmax and attention, numpy."""

import math

import numpy as np
import scipy.special

from entry import Entry

E = "softmax"


# ---------------------------------------------------------------- softmax: wrong
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_subtract_min(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.min(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_whole_array_total(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e)


def softmax_argmax_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.expand_dims(np.argmax(x, axis=axis), axis))
    return e / e.sum(axis=axis, keepdims=True)


# ---------------------------------------------------------------- softmax: right
def softmax_scipy(x, axis=-1):
    x = np.asarray(x)
    return scipy.special.softmax(x, axis=axis).astype(x.dtype, copy=False)


def softmax_logsumexp_moveaxis(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty_like(flat)
    for r, row in enumerate(flat):
        finite = row[np.isfinite(row)]
        top = finite.max() if finite.size else 0.0
        lse = top + math.log(sum(math.exp(v - top) for v in row))
        out[r] = [math.exp(v - lse) for v in row]
    return np.moveaxis(out.reshape(moved.shape), -1, axis).astype(x.dtype)


# ---------------------------------------------------------------- attention: wrong
def _sm(s):
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_by_dv(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = _sm(s)
    return w @ v, w


def attention_stray_T(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[-1])
    w = _sm(s)
    return w @ v, w


def attention_power_precedence(q, k, v):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / d_k ** 1/2
    w = _sm(s)
    return w @ v, w


def attention_scale_output(q, k, v):
    w = _sm(q @ np.swapaxes(k, -1, -2))
    return w @ v / math.sqrt(q.shape[-1]), w


def attention_kq_einsum(q, k, v):
    s = np.einsum("...qd,...kd->...qk", k, q) / math.sqrt(q.shape[-1])
    w = _sm(s)
    return w @ v, w


def attention_returns_scores(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    weights = _sm(scores)
    out = weights @ v
    return out, scores


# ---------------------------------------------------------------- attention: right
def attention_einsum_scipy(q, k, v):
    q, k, v = (np.asarray(a) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    w = scipy.special.softmax(s, axis=-1).astype(s.dtype)
    return np.einsum("...ij,...jd->...id", w, v), w


def attention_split_scale_lse(q, k, v):
    dt = np.result_type(q, k, v)
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    c = q64.shape[-1] ** -0.25
    s = (q64 * c) @ np.swapaxes(k64 * c, -1, -2)
    w = np.exp(s - scipy.special.logsumexp(s, axis=-1, keepdims=True))
    return (w @ v64).astype(dt), w.astype(dt)


ENTRIES = [
    Entry(E, "wrong", "max_no_keepdims", "The row maximum is taken without keepdims=True, so "
          "x - max broadcasts against the wrong axis (or fails) instead of shifting each slice.",
          softmax_max_no_keepdims),
    Entry(E, "wrong", "global_max", "It subtracts the maximum of the whole array instead of each "
          "slice's maximum, so slices far below the global maximum underflow to 0/0 = NaN.",
          softmax_global_max),
    Entry(E, "wrong", "sum_last_axis", "The maximum uses axis but the normalising sum is "
          "hard-coded to the last axis, so any other axis is normalised along the wrong axis.",
          softmax_sum_last_axis),
    Entry(E, "wrong", "subtract_min", "It subtracts the minimum instead of the maximum, so "
          "large inputs still overflow exp to inf and give NaN.", softmax_subtract_min),
    Entry(E, "wrong", "whole_array_total", "It divides by the sum of the whole array instead "
          "of the sum along axis, so no slice sums to 1.", softmax_whole_array_total),
    Entry(E, "wrong", "argmax_shift", "It subtracts np.argmax (an index) where np.max (the "
          "value) was meant, so large logits overflow.", softmax_argmax_shift),
    Entry(E, "right", "scipy_softmax", None, softmax_scipy),
    Entry(E, "right", "per_row_logsumexp_loop", None, softmax_logsumexp_moveaxis),
]

E = "attention"
ENTRIES += [
    Entry(E, "wrong", "scale_by_d_v", "The scores are divided by sqrt(d_v) (v's last axis) "
          "instead of sqrt(d_k).", attention_scale_by_dv),
    Entry(E, "wrong", "stray_T_on_batched_k", "k.T reverses every axis of a batched k instead "
          "of swapping the last two, so batched inputs fail.", attention_stray_T),
    Entry(E, "wrong", "power_precedence", "d_k ** 1/2 is read as (d_k ** 1) / 2, so the scores "
          "are divided by d_k/2 instead of sqrt(d_k).", attention_power_precedence),
    Entry(E, "wrong", "scales_output_not_scores", "The 1/sqrt(d_k) factor is applied to the "
          "output after the softmax instead of to the scores before it.",
          attention_scale_output),
    Entry(E, "wrong", "einsum_operands_swapped", "The einsum is given k and q in the wrong "
          "order, so it builds k q^T (keys by queries) instead of q k^T.", attention_kq_einsum),
    Entry(E, "wrong", "returns_scores_as_weights", "It returns the scaled scores in place of "
          "the softmax weights as the second result.", attention_returns_scores),
    Entry(E, "right", "einsum_scipy", None, attention_einsum_scipy),
    Entry(E, "right", "split_scale_float64_lse", None, attention_split_scale_lse),
]
