"""Round k, lesson 01 (numpy): softmax and attention."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry

ENTRIES = []


def add(exercise, kind, label, mistake=None):
    def deco(func):
        ENTRIES.append(Entry(exercise, kind, label, mistake, func))
        return func
    return deco


# ============================================================================ softmax
@add("softmax", "wrong", "global_max_shift",
     "It subtracts the maximum of the whole array instead of each slice's maximum along axis, "
     "so slices far below the top one underflow to 0/0 and come out as NaN.")
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


@add("softmax", "wrong", "sum_without_keepdims",
     "The normalising sum is taken without keepdims=True, so it broadcasts against the wrong "
     "axis: a shape error on non-square input and wrong values on square input.")
def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis)


@add("softmax", "wrong", "scipy_default_axis",
     "scipy.special.softmax is called without axis, and its default (axis=None) normalises over "
     "the whole array instead of along each slice.")
def softmax_scipy_no_axis(x, axis=-1):
    return scipy.special.softmax(np.asarray(x))


@add("softmax", "wrong", "shift_by_min",
     "It shifts by the minimum instead of the maximum, so large logits (1e4) still overflow "
     "exp and give inf/inf = NaN (and -inf entries make the shift itself NaN).")
def softmax_min_shift(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - x.min(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@add("softmax", "wrong", "neg_inf_replaced_by_zero",
     "It 'cleans' non-finite inputs by replacing -inf with 0 before exponentiating, so entries "
     "that must get weight 0 get a positive weight.")
def softmax_clean_inf(x, axis=-1):
    x = np.asarray(x)
    x = np.where(np.isfinite(x), x, 0.0)
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_1d(row):
    m = max(row)
    exps = [math.exp(r - m) for r in row]
    s = sum(exps)
    return np.array([e / s for e in exps])


@add("softmax", "wrong", "apply_along_last_axis",
     "It always normalises along the last axis (apply_along_axis with -1), ignoring the axis "
     "argument.")
def softmax_along_last(x, axis=-1):
    x = np.asarray(x, dtype=float)
    return np.apply_along_axis(_softmax_1d, -1, x)


@add("softmax", "right", "torch_softmax")
def softmax_torch(x, axis=-1):
    arr = np.asarray(x)
    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    return torch.softmax(t, dim=axis).numpy().astype(arr.dtype)


@add("softmax", "right", "scipy_logsumexp")
def softmax_via_lse(x, axis=-1):
    x = np.asarray(x)
    lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


# ============================================================================ attention
def _stable_softmax_last(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


@add("attention", "wrong", "dot_T_on_batched",
     "It transposes k with .T, which reverses every axis rather than swapping the last two, so "
     "batched inputs raise a shape error in the matmul.")
def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    w = _stable_softmax_last(scores)
    return w @ v, w


@add("attention", "wrong", "scale_uses_d_v",
     "The scale is taken from v's last axis (d_v) instead of d_k, so scores are mis-scaled "
     "whenever d_v != d_k.")
def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    w = _stable_softmax_last(scores)
    return np.matmul(w, v), w


@add("attention", "wrong", "no_max_subtraction",
     "The softmax exponentiates the scores without subtracting the row maximum, so large "
     "scores overflow to inf/inf and give NaN.")
def attention_unstable(q, k, v):
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", w, v), w


@add("attention", "wrong", "scale_after_softmax",
     "It divides the softmax weights by sqrt(d_k) instead of dividing the scores before the "
     "softmax, so the weights no longer sum to 1.")
def attention_scale_after(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    w = _stable_softmax_last(scores) / np.sqrt(q.shape[-1])
    return w @ v, w


@add("attention", "wrong", "d_k_from_shape_1",
     "It reads d_k as q.shape[1], which is d_k only for 2-D inputs; with batch axes it scales "
     "by the wrong size.")
def attention_shape1(q, k, v):
    d_k = q.shape[1]
    scores = q @ np.swapaxes(k, -1, -2) * (1.0 / np.sqrt(d_k))
    w = _stable_softmax_last(scores)
    return w @ v, w


@add("attention", "wrong", "returns_scores",
     "It returns the scaled scores as the second result instead of the softmax weights.")
def attention_return_scores(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = _stable_softmax_last(scores)
    out = weights @ v
    return out, scores


@add("attention", "right", "torch_float64_einsum")
def attention_torch(q, k, v):
    dtype = np.result_type(q, k, v)
    qt, kt, vt = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    s = torch.einsum("...id,...jd->...ij", qt, kt) / math.sqrt(qt.shape[-1])
    w = torch.softmax(s, dim=-1)
    out = torch.einsum("...ij,...jd->...id", w, vt)
    return out.numpy().astype(dtype), w.numpy().astype(dtype)


@add("attention", "right", "loop_over_leading_axes")
def attention_loops(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    out = np.zeros(lead + (n_q, d_v), dtype=np.float64)
    weights = np.zeros(lead + (n_q, n_k), dtype=np.float64)
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            row = [float(np.dot(q[idx][i], k[idx][j])) / math.sqrt(d_k) for j in range(n_k)]
            w = scipy.special.softmax(np.array(row))
            weights[idx][i] = w
            out[idx][i] = w @ v[idx]
    dtype = np.result_type(q, k, v)
    return out.astype(dtype), weights.astype(dtype)
