"""Lesson 01 (single head, numpy): learners' answers to softmax and attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- softmax: wrong
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x)  # one max for the whole array
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = x.max(axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_lse_unshifted(x, axis=-1):
    x = np.asarray(x, dtype=float)
    lse = np.log(np.sum(np.exp(x), axis=axis, keepdims=True))
    return np.exp(x - lse)


def softmax_zero_infs(x, axis=-1):
    x = np.array(x, dtype=float)
    x[np.isinf(x)] = 0.0  # get rid of the infinities before exponentiating
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_swap_back(x, axis=-1):
    x = np.asarray(x, dtype=float)
    moved = np.moveaxis(x, axis, -1)
    m = moved.max(axis=-1, keepdims=True)
    e = np.exp(moved - m)
    p = e / e.sum(axis=-1, keepdims=True)
    return np.swapaxes(p, axis, -1)


def softmax_last_axis_only(x, axis=-1):
    x = np.asarray(x, dtype=float)
    z = x - x.max(-1, keepdims=True)
    ez = np.exp(z)
    return ez / ez.sum(-1, keepdims=True)


# ----------------------------------------------------------------------------- softmax: right
def softmax_via_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
        out = np.exp(x - lse)
    return np.nan_to_num(out, nan=0.0)


def softmax_moveaxis_loop(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    res = np.zeros_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        top = np.max(row)
        if not np.isfinite(top):
            continue
        e = np.exp(row - top)
        res[r] = e / e.sum()
    return np.moveaxis(res.reshape(moved.shape), -1, axis)


# ----------------------------------------------------------------------------- attention: wrong
def _sm(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_dv(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    w = _sm(scores)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d_k = q.shape[-1]
    w = _sm(q @ k.T / math.sqrt(d_k))
    return w @ v, w


def attention_softmax_queries(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = s - s.max(axis=-2, keepdims=True)
    w = np.exp(s) / np.exp(s).sum(axis=-2, keepdims=True)
    return w @ v, w


def attention_no_shift(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_by_nq(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n, d = q.shape[-2], q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(n)
    w = _sm(scores)
    return w @ v, w


def attention_double_scale(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    c = 1.0 / np.sqrt(q.shape[-1])
    qs, ks = q * c, k * c  # scale both sides
    w = _sm(qs @ np.swapaxes(ks, -1, -2))
    return w @ v, w


# ----------------------------------------------------------------------------- attention: right
def attention_einsum_scipy(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q, k) * (q.shape[-1] ** -0.5)
    w = scipy.special.softmax(s, axis=-1)
    return np.einsum("...ij,...jd->...id", w, v), w


def attention_ndindex_loop(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = q.shape[:-2]
    out = np.empty(lead + (q.shape[-2], v.shape[-1]))
    weights = np.empty(lead + (q.shape[-2], k.shape[-2]))
    for idx in np.ndindex(*lead):
        for i in range(q.shape[-2]):
            s = np.array([q[idx][i] @ k[idx][j] for j in range(k.shape[-2])]) / math.sqrt(q.shape[-1])
            e = np.exp(s - s.max())
            p = e / e.sum()
            weights[idx + (i,)] = p
            out[idx + (i,)] = p @ v[idx]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "global-max", "Subtracts one maximum over the whole array instead of each slice's own maximum, so slices far below the global maximum underflow to 0/0.", softmax_global_max),
    Entry("softmax", "wrong", "max-no-keepdims", "Takes the maximum without keepdims, so it broadcasts against the wrong axis (or fails) when subtracted.", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "lse-unshifted", "Computes the log-sum-exp as log(sum(exp(x))) without subtracting the maximum first, so large inputs overflow.", softmax_lse_unshifted),
    Entry("softmax", "wrong", "infs-to-zero", "Replaces -inf entries by 0 before exponentiating, so masked entries get positive weight instead of 0.", softmax_zero_infs),
    Entry("softmax", "wrong", "swapaxes-back", "Moves the axis to the end with moveaxis but puts it back with swapaxes, which scrambles the axis order for 3-D inputs.", softmax_swap_back),
    Entry("softmax", "wrong", "ignores-axis", "Ignores the axis argument and always normalises along the last axis.", softmax_last_axis_only),
    Entry("softmax", "right", "scipy-logsumexp", None, softmax_via_logsumexp),
    Entry("softmax", "right", "moveaxis-row-loop", None, softmax_moveaxis_loop),
    Entry("attention", "wrong", "scale-by-dv", "Scales the scores by 1/sqrt(d_v) (the value width) instead of 1/sqrt(d_k).", attention_scale_dv),
    Entry("attention", "wrong", "k-dot-T", "Uses k.T, which reverses every axis of a batched k instead of swapping the last two.", attention_k_dot_T),
    Entry("attention", "wrong", "softmax-over-queries", "Normalises the scores over the query axis (-2) instead of the key axis.", attention_softmax_queries),
    Entry("attention", "wrong", "no-max-shift", "Exponentiates the raw scores without subtracting the row maximum, so large scores overflow to inf/NaN.", attention_no_shift),
    Entry("attention", "wrong", "scale-by-nq", "Scales by 1/sqrt of the number of queries (shape[-2]) instead of the key width d_k.", attention_scale_by_nq),
    Entry("attention", "wrong", "scale-both-sides", "Multiplies both q and k by 1/sqrt(d_k), so the scores end up divided by d_k.", attention_double_scale),
    Entry("attention", "right", "einsum-scipy", None, attention_einsum_scipy),
    Entry("attention", "right", "ndindex-loop", None, attention_ndindex_loop),
]
