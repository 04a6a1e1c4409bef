"""Held-out catalogue, lesson 01 (single-head attention, numpy): softmax, attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- softmax, wrong
def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max()
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_max_no_keepdims(x, axis=-1):
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    top = np.max(x, axis=axis, keepdims=True)
    ex = np.exp(x - top)
    return ex / ex.sum(axis=-1, keepdims=True)


def softmax_neginf_to_zero(x, axis=-1):
    logits = np.where(np.isneginf(x), 0.0, x)  # drop the -inf entries
    peak = logits.max(axis=axis, keepdims=True)
    z = np.exp(logits - peak)
    return z / z.sum(axis=axis, keepdims=True)


def softmax_lse_without_max(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    log_norm = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - log_norm)


def softmax_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


# ----------------------------------------------------------------------------- softmax, right
def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(np.asarray(x, dtype=np.float64), axis=axis)


def softmax_moveaxis_lse(x, axis=-1):
    z = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat_in = z.reshape(-1, z.shape[-1])
    flat_out = np.zeros(flat_in.shape)
    for r in range(flat_in.shape[0]):
        row = flat_in[r]
        c = row.max()
        lse = c + math.log(sum(math.exp(v - c) for v in row))
        flat_out[r] = [math.exp(v - lse) for v in row]
    return np.moveaxis(flat_out.reshape(z.shape), -1, axis)


# --------------------------------------------------------------------------- attention, wrong
def attention_scale_dv(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = np.matmul(q, k.T) / math.sqrt(d_k)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.matmul(p, v), p


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    logits = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d)
    logits = logits - logits.max(axis=-2, keepdims=True)
    weights = np.exp(logits)
    weights = weights / weights.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_half_power(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -2, -1) / d_k ** 1/2
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_unstable_softmax(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_rowmax_no_keepdims(q, k, v):
    kt = np.swapaxes(k, -1, -2)
    s = q @ kt / np.sqrt(k.shape[-1])
    s = s - s.max(axis=-1)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


# --------------------------------------------------------------------------- attention, right
def attention_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q64, k64) * q64.shape[-1] ** -0.5
    weights = scipy.special.softmax(scores, axis=-1)
    out = np.einsum("...ij,...jd->...id", weights, v64)
    return out, weights


def attention_batch_loop(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d_k)).reshape(-1, n_q, d_k)
    kb = np.broadcast_to(k, lead + (n_k, d_k)).reshape(-1, n_k, d_k)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    outs = np.zeros((qb.shape[0], n_q, d_v))
    ws = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            s = np.array([np.dot(qb[b, i], kb[b, j]) for j in range(n_k)]) / math.sqrt(d_k)
            lse = scipy.special.logsumexp(s)
            ws[b, i] = np.exp(s - lse)
            outs[b, i] = ws[b, i] @ vb[b]
    return outs.reshape(lead + (n_q, d_v)), ws.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry(exercise="softmax", kind="wrong", label="global_max", mistake="Subtracts the maximum of the whole array instead "
          "of each slice's maximum along `axis`, so a slice far below the global maximum "
          "underflows to 0/0 = NaN.", func=softmax_global_max),
    Entry(exercise="softmax", kind="wrong", label="max_without_keepdims", mistake="Takes the maximum without "
          "`keepdims=True`, so the reduced maxima broadcast along the wrong axis (each "
          "column gets a different shift, changing the result, or the shapes fail to "
          "broadcast and it raises).", func=softmax_max_no_keepdims),
    Entry(exercise="softmax", kind="wrong", label="sum_hardcoded_last_axis", mistake="Normalises with a sum over the "
          "last axis (`axis=-1` hard-coded) instead of over `axis`, so for `axis=0` the "
          "slices along `axis` do not sum to 1.", func=softmax_sum_last_axis),
    Entry(exercise="softmax", kind="wrong", label="neginf_replaced_by_zero", mistake="Replaces `-inf` logits by 0, "
          "confusing a logit of 0 with a weight of 0: those entries get weight exp(0 - max) "
          "instead of 0.", func=softmax_neginf_to_zero),
    Entry(exercise="softmax", kind="wrong", label="logsumexp_drops_max", mistake="Builds the log-sum-exp from the shifted "
          "exponentials but forgets to add the maximum back, so the result is off by a factor "
          "exp(max) (and overflows for large logits).", func=softmax_lse_without_max),
    Entry(exercise="softmax", kind="wrong", label="no_max_subtraction", mistake="Exponentiates the raw logits without "
          "subtracting the maximum, so logits of magnitude 1e3-1e4 overflow to inf and give "
          "NaN.", func=softmax_no_shift),
    Entry(exercise="softmax", kind="right", label="scipy_special", mistake=None, func=softmax_scipy),
    Entry(exercise="softmax", kind="right", label="moveaxis_row_loop_lse", mistake=None, func=softmax_moveaxis_lse),

    Entry(exercise="attention", kind="wrong", label="scale_by_d_v", mistake="Scales the scores by 1/sqrt(d_v) "
          "(`v.shape[-1]`) instead of 1/sqrt(d_k), which differs whenever the values are "
          "not as wide as the keys.", func=attention_scale_dv),
    Entry(exercise="attention", kind="wrong", label="k_dot_T", mistake="Transposes the keys with `k.T`, which reverses "
          "every axis, not just the last two: with batch axes the product is no longer "
          "per-batch q k^T and raises.", func=attention_dot_T),
    Entry(exercise="attention", kind="wrong", label="softmax_over_queries", mistake="Normalises the scores over the "
          "query axis (-2) instead of over the keys (-1), so the rows of the weights do not "
          "sum to 1.", func=attention_softmax_over_queries),
    Entry(exercise="attention", kind="wrong", label="d_k_power_one_half", mistake="Writes the scale as `d_k ** 1/2`, "
          "which parses as (d_k ** 1) / 2, so scores are divided by d_k/2 instead of "
          "sqrt(d_k).", func=attention_half_power),
    Entry(exercise="attention", kind="wrong", label="unstable_softmax", mistake="Computes the softmax of the scores "
          "without subtracting the row maximum, so large scores overflow to inf and the "
          "weights become NaN.", func=attention_unstable_softmax),
    Entry(exercise="attention", kind="wrong", label="row_max_no_keepdims", mistake="Subtracts the row maximum without "
          "`keepdims=True`: the (..., N_q) maxima broadcast against the key axis, so each "
          "column gets a different shift (or the shapes fail to broadcast and it raises).", func=attention_rowmax_no_keepdims),
    Entry(exercise="attention", kind="right", label="einsum_scipy_float64", mistake=None, func=attention_einsum_scipy),
    Entry(exercise="attention", kind="right", label="loop_dot_logsumexp", mistake=None, func=attention_batch_loop),
]
