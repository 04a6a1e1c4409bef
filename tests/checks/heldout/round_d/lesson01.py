"""Round d, lesson 01 (numpy): softmax, attention."""

import itertools
import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- softmax: wrong
def softmax_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=axis))
    return e / e.sum(axis=axis)


def softmax_ignores_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_neg_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_torch(x, axis=-1):
    import torch
    return torch.softmax(torch.from_numpy(np.asarray(x)), dim=axis)


# ----------------------------------------------------------------------------- softmax: right
def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
        out = np.exp(x - np.where(np.isfinite(lse), lse, 0.0))
    out = np.where(np.isneginf(lse), 0.0, out)
    return out.astype(x.dtype)


def softmax_row_loop(x, axis=-1):
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1).astype(np.float64)
    out = np.zeros_like(moved)
    for idx in np.ndindex(moved.shape[:-1]):
        row = moved[idx]
        top = max(row.tolist()) if row.size else 0.0
        if top == -math.inf:
            continue
        ex = [math.exp(v - top) for v in row.tolist()]
        total = math.fsum(ex)
        out[idx] = [e / total for e in ex]
    return np.moveaxis(out, -1, axis).astype(x.dtype)


def softmax_nan_to_num(x, axis=-1):
    x = np.asarray(x)
    top = np.maximum.reduce(x, axis=axis, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(x - top)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(e / e.sum(axis=axis, keepdims=True), nan=0.0).astype(x.dtype)


# ----------------------------------------------------------------------------- attention helpers
def _stable(s, axis=-1):
    m = s.max(axis=axis, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=axis, keepdims=True)


# ----------------------------------------------------------------------------- attention: wrong
def attention_scale_dk(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / q.shape[-1]
    w = _stable(s)
    return w @ v, w


def attention_scale_dv(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = _stable(s)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _stable(s, axis=-2)
    return w @ v, w


def attention_dot_T(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[-1])
    w = _stable(s)
    return w @ v, w


def attention_unstable_softmax(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_after_softmax(q, k, v):
    w = _stable(q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    return w @ v, w


# ----------------------------------------------------------------------------- attention: right
def attention_einsum(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = np.einsum("...id,...jd->...ij", q.astype(np.float64), k.astype(np.float64))
    s = s * (1.0 / math.sqrt(q.shape[-1]))
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=-1, keepdims=True)
    out = np.einsum("...ij,...jd->...id", w, v.astype(np.float64))
    return out.astype(q.dtype), w.astype(q.dtype)


def attention_loop(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    for idx in itertools.product(*[range(n) for n in lead]):
        for i in range(n_q):
            scores = kb[idx].astype(np.float64) @ qb[idx][i].astype(np.float64)
            scores /= math.sqrt(q.shape[-1])
            row = scipy.special.softmax(scores)
            weights[idx + (i,)] = row
            out[idx + (i,)] = row @ vb[idx].astype(np.float64)
    return out.astype(q.dtype), weights.astype(q.dtype)


ENTRIES = [
    Entry("softmax", "wrong", "no_max_shift",
          "Exponentiates the raw inputs without subtracting the maximum, so large logits overflow to inf and give NaN.",
          softmax_no_shift),
    Entry("softmax", "wrong", "global_max",
          "Subtracts the maximum of the whole array instead of each slice's maximum, so slices far below the global maximum underflow to 0/0.",
          softmax_global_max),
    Entry("softmax", "wrong", "max_without_keepdims",
          "Takes the maximum and the sum without keepdims=True, so they broadcast against the wrong axis (or fail to broadcast).",
          softmax_no_keepdims),
    Entry("softmax", "wrong", "ignores_axis",
          "Always normalises along the last axis and ignores the axis argument.",
          softmax_ignores_axis),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "Replaces -inf entries by 0 to avoid NaN, so masked entries get positive weight instead of 0.",
          softmax_neg_inf_to_zero),
    Entry("softmax", "wrong", "returns_torch_tensor",
          "Uses torch.softmax on a converted array and returns a torch.Tensor where the numpy lesson expects an np.ndarray.",
          softmax_torch),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_row_loop", None, softmax_row_loop),
    Entry("softmax", "right", "maximum_reduce_nan_to_num", None, softmax_nan_to_num),

    Entry("attention", "wrong", "scale_by_dk",
          "Divides the scores by d_k instead of sqrt(d_k).",
          attention_scale_dk),
    Entry("attention", "wrong", "scale_by_dv",
          "Scales the scores with the value width d_v instead of the key width d_k.",
          attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "Normalises the weights over the query axis (-2) instead of over the keys (-1).",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T",
          "Transposes k with .T, which reverses every axis, instead of swapping only the last two, so batched inputs break.",
          attention_dot_T),
    Entry("attention", "wrong", "unstable_softmax",
          "Uses a softmax without subtracting the row maximum, so large scores overflow to NaN.",
          attention_unstable_softmax),
    Entry("attention", "wrong", "scale_after_softmax",
          "Divides by sqrt(d_k) after the softmax instead of scaling the scores before it.",
          attention_scale_after_softmax),
    Entry("attention", "right", "einsum_float64", None, attention_einsum),
    Entry("attention", "right", "row_loop_scipy", None, attention_loop),
]
