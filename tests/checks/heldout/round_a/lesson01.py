"""Lesson 01 (numpy): softmax and attention, as learners write them."""

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- softmax: wrong
def softmax_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))  # one max for the whole array
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_plus_max(x, axis=-1):
    e = np.exp(x + np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_max_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis)


def softmax_ignores_axis(x, axis=-1):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return np.exp(x - m) / np.sum(np.exp(x), axis=axis, keepdims=True)


# ----------------------------------------------------------------------------- softmax: right
def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(x, axis=axis)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    return np.exp(x - scipy.special.logsumexp(x, axis=axis, keepdims=True))


def softmax_row_loop(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty(flat.shape, dtype=np.float32)
    for r in range(flat.shape[0]):
        row = flat[r]
        shifted = (row - row.max()).astype(np.float32)  # shift in x's dtype, then float32
        ex = np.exp(shifted)
        out[r] = ex / ex.sum()
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


# ----------------------------------------------------------------------------- attention helpers
def _stable_softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ----------------------------------------------------------------------------- attention: wrong
def attention_scale_by_d(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k
    w = _stable_softmax(scores)
    return w @ v, w


def attention_no_scale(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    w = _stable_softmax(scores)
    return w @ v, w


def attention_scale_by_dv(q, k, v):
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    w = _stable_softmax(scores)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _stable_softmax(scores, axis=-2)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    scores = q @ k.T / np.sqrt(q.shape[-1])
    w = _stable_softmax(scores)
    return w @ v, w


def attention_returns_swapped(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _stable_softmax(scores)
    return w, w @ v


def attention_scales_weights(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    w = _stable_softmax(scores) / np.sqrt(q.shape[-1])
    return w @ v, w


def attention_dk_from_shape1(q, k, v):
    d_k = q.shape[1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    w = _stable_softmax(scores)
    return w @ v, w


def attention_naive_exp(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_np_dot(q, k, v):
    scores = np.dot(q, np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    w = _stable_softmax(scores)
    return np.dot(w, v), w


# ----------------------------------------------------------------------------- attention: right
def attention_einsum_scipy(q, k, v):
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    w = scipy.special.softmax(scores, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v), w


def attention_prescaled_float32(q, k, v):
    q32 = np.asarray(q, dtype=np.float32) * np.float32(q.shape[-1] ** -0.5)
    k32 = np.asarray(k, dtype=np.float32)
    v32 = np.asarray(v, dtype=np.float32)
    scores = np.matmul(q32, np.moveaxis(k32, -1, -2))
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return np.matmul(w, v32), w


ENTRIES = [
    Entry("softmax", "wrong", "no_shift",
          "Exponentiates the raw logits without subtracting the maximum, so logits of 1e4 "
          "overflow to inf and the result is NaN.", softmax_no_shift),
    Entry("softmax", "wrong", "global_max",
          "Subtracts the maximum of the whole array instead of each slice's own maximum, so a "
          "slice far below the global maximum underflows to 0/0.", softmax_global_max),
    Entry("softmax", "wrong", "shift_wrong_sign",
          "Adds the maximum instead of subtracting it, which makes overflow worse instead of "
          "preventing it.", softmax_plus_max),
    Entry("softmax", "wrong", "max_without_keepdims",
          "Takes the maximum without keepdims=True, so it does not broadcast back against x "
          "slice by slice (an error, or the wrong maxima subtracted).", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "sum_without_keepdims",
          "Divides by the sum taken without keepdims=True, so the sums are lined up along the "
          "wrong axis (an error, or slices divided by another slice's total).",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "ignores_axis",
          "Ignores the axis argument and always normalises along the last axis.",
          softmax_ignores_axis),
    Entry("softmax", "wrong", "unshifted_denominator",
          "Shifts the numerator by the maximum but divides by the sum of the unshifted "
          "exponentials, so the two do not cancel.", softmax_unshifted_denominator),
    Entry("softmax", "right", "scipy", None, softmax_scipy),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "row_loop_float32", None, softmax_row_loop),

    Entry("attention", "wrong", "scale_by_d",
          "Divides the scores by d_k instead of sqrt(d_k).", attention_scale_by_d),
    Entry("attention", "wrong", "no_scale",
          "Leaves out the 1/sqrt(d_k) scaling of the scores.", attention_no_scale),
    Entry("attention", "wrong", "scale_by_dv",
          "Scales by the square root of the value width d_v instead of the key width d_k.",
          attention_scale_by_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "Applies the softmax along the query axis (-2) instead of along the keys.",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T",
          "Uses k.T, which reverses every axis, instead of swapping only the last two, so "
          "batched inputs break.", attention_k_dot_T),
    Entry("attention", "wrong", "returns_swapped",
          "Returns (weights, out) instead of (out, weights).", attention_returns_swapped),
    Entry("attention", "wrong", "scales_weights_not_scores",
          "Divides the softmax weights by sqrt(d_k) instead of the scores, so the rows no "
          "longer sum to 1.", attention_scales_weights),
    Entry("attention", "wrong", "dk_from_shape1",
          "Reads d_k from q.shape[1], which is the feature axis only for 2-D inputs; with "
          "batch axes it picks up a batch or query size.", attention_dk_from_shape1),
    Entry("attention", "wrong", "naive_exp",
          "Writes the softmax inline without subtracting the row maximum, so large scores "
          "overflow to NaN.", attention_naive_exp),
    Entry("attention", "wrong", "np_dot",
          "Uses np.dot, which does not batch over leading axes (it pairs every batch of q with "
          "every batch of k), instead of @ / matmul.", attention_np_dot),
    Entry("attention", "right", "einsum_scipy", None, attention_einsum_scipy),
    Entry("attention", "right", "prescaled_float32", None, attention_prescaled_float32),
]
