"""Held-out catalogue (round y), lesson 01: softmax and attention (numpy)."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    exps = np.exp(x - x.max())
    return exps / exps.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x, dtype=float)
    m = arr.max(axis=axis, keepdims=True)
    num = np.exp(arr - m)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_argmax_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    biggest = np.argmax(x, axis=axis, keepdims=True)
    z = np.exp(x - biggest)
    return z / np.sum(z, axis=axis, keepdims=True)


def softmax_neginf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isneginf(x), 0.0, x)  # avoid NaNs from -inf
    x = x - x.max(axis=axis, keepdims=True)
    ex = np.exp(x)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_lse_without_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    log_norm = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - log_norm)


def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(np.asarray(x), axis=axis)


def softmax_rows_loop(x, axis=-1):
    arr = np.asarray(x)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1]).astype(np.float64)
    out = np.zeros_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        top = max(row.tolist())
        if top == -math.inf:
            continue
        lse = top + math.log(sum(math.exp(v - top) for v in row.tolist()))
        out[r] = [math.exp(v - lse) for v in row.tolist()]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


# ============================================================================ attention
def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    scale = 1.0 / math.sqrt(v.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.matmul(p, v), p


def attention_half_power(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k**1 / 2
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    logits = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(d)
    logits = logits - logits.max(axis=-2, keepdims=True)
    a = np.exp(logits)
    a = a / a.sum(axis=-2, keepdims=True)
    return np.einsum("...ij,...jd->...id", a, v), a


def attention_dk_from_axis1(q, k, v):
    d_k = q.shape[1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_scale_after_softmax(q, k, v):
    raw = np.matmul(q, np.swapaxes(k, -1, -2))
    raw = raw - raw.max(axis=-1, keepdims=True)
    e = np.exp(raw)
    weights = e / e.sum(axis=-1, keepdims=True) / np.sqrt(q.shape[-1])
    return weights @ v, weights


def attention_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) * (q64.shape[-1] ** -0.5)
    w = scipy.special.softmax(s, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v64), w


def attention_flat_loop(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    qb = np.broadcast_to(q, lead + q.shape[-2:]).reshape(-1, *q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:]).reshape(-1, *k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:]).reshape(-1, *v.shape[-2:])
    outs, ws = [], []
    root = math.sqrt(q.shape[-1])
    for qi, ki, vi in zip(qb, kb, vb):
        s = qi.dot(ki.T) / root
        log_z = scipy.special.logsumexp(s, axis=1, keepdims=True)
        w = np.exp(s - log_z)
        ws.append(w)
        outs.append(w.dot(vi))
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.array(outs).reshape(lead + (n_q, d_v))
    weights = np.array(ws).reshape(lead + (n_q, n_k))
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "max-without-keepdims",
          "the row maximum is taken without keepdims=True, so it broadcasts along the wrong axis "
          "(or fails to broadcast and raises) instead of being subtracted slice by slice", softmax_no_keepdims),
    Entry("softmax", "wrong", "max-of-whole-array",
          "the shift is the maximum of the whole array (x.max()), not of each slice along axis, so "
          "slices far below the global maximum underflow to 0/0 and come out as NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum-hardcoded-last-axis",
          "the normalising sum is taken over axis=-1 whatever axis was asked for, so for axis=0 or "
          "axis=1 the result is not normalised along the requested axis", softmax_sum_last_axis),
    Entry("softmax", "wrong", "argmax-as-shift",
          "np.argmax is used instead of np.max, so the index of the maximum is subtracted instead of "
          "its value and logits of size 1e4 overflow to inf/NaN", softmax_argmax_shift),
    Entry("softmax", "wrong", "neginf-replaced-by-zero",
          "-inf entries are replaced by 0 before the exponential to avoid NaNs, so they receive a "
          "positive weight instead of weight 0", softmax_neginf_to_zero),
    Entry("softmax", "wrong", "logsumexp-forgets-max",
          "the log-normaliser is computed from the shifted logits but the maximum is never added back, "
          "so exp(x - log_norm) is off by the factor exp(max) (wrong values, overflow for large logits)",
          softmax_lse_without_shift),
    Entry("softmax", "right", "scipy-special", None, softmax_scipy),
    Entry("softmax", "right", "python-loop-logsumexp", None, softmax_rows_loop),

    Entry("attention", "wrong", "k-dot-T",
          "k.T reverses all axes instead of swapping the last two, so batched inputs give a "
          "shape error (only 2-D inputs work)", attention_dot_T),
    Entry("attention", "wrong", "scale-by-d_v",
          "the scores are scaled by 1/sqrt(d_v) (v.shape[-1]) instead of 1/sqrt(d_k), wrong whenever "
          "d_v != d_k", attention_scale_dv),
    Entry("attention", "wrong", "precedence-d_k-half",
          "d_k**1/2 parses as (d_k**1)/2, so the scores are divided by d_k/2 instead of sqrt(d_k)",
          attention_half_power),
    Entry("attention", "wrong", "softmax-over-queries",
          "the softmax is taken along axis -2 (over the queries) instead of along the keys, so the "
          "columns of the weights sum to 1 instead of the rows", attention_softmax_over_queries),
    Entry("attention", "wrong", "d_k-from-shape1",
          "d_k is read as q.shape[1], which is only the feature axis for 2-D inputs; with batch axes "
          "it is N_q or the number of heads, so batched scores get the wrong scale",
          attention_dk_from_axis1),
    Entry("attention", "wrong", "scale-after-softmax",
          "the 1/sqrt(d_k) factor is applied to the weights after the softmax instead of to the "
          "scores before it, so the weight rows sum to 1/sqrt(d_k) instead of 1",
          attention_scale_after_softmax),
    Entry("attention", "right", "einsum-scipy-float64", None, attention_einsum_scipy),
    Entry("attention", "right", "loop-over-flattened-batch", None, attention_flat_loop),
]
