"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, wrong and right."""

import math

import numpy as np
from scipy.special import logsumexp

from entry import Entry


# ============================================================================ softmax, wrong
def softmax_no_shift(x, axis=-1):
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x)
    shifted = x - x.max()
    ex = np.exp(shifted)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(-1, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    x = np.where(np.isneginf(x), 0.0, x)  # get rid of the -inf so exp behaves
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_lse_no_keepdims(x, axis=-1):
    return np.exp(x - logsumexp(x, axis=axis))


def softmax_paren(x, axis=-1):
    top = np.max(x, axis=axis, keepdims=True)
    num = np.exp(x) - top
    return num / np.sum(num, axis=axis, keepdims=True)


# ============================================================================ softmax, right
def softmax_rowloop(x, axis=-1):
    arr = np.asarray(x)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.zeros(flat.shape, dtype=np.float64)
    for r in range(flat.shape[0]):
        row = [float(t) for t in flat[r]]
        finite = [t for t in row if t != -math.inf]
        if not finite:
            continue
        peak = max(finite)
        ws = [0.0 if t == -math.inf else math.exp(t - peak) for t in row]
        tot = sum(ws)
        out[r] = [w / tot for w in ws]
    return np.moveaxis(out.reshape(moved.shape), -1, axis).astype(arr.dtype)


def softmax_logaddexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    log_z = np.logaddexp.reduce(x, axis=axis, keepdims=True)
    return np.exp(x - log_z)


# ============================================================================ attention, wrong
def attention_no_scale(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(d)
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    return p @ v, p


def attention_softmax_queries(q, k, v):
    dk = q.shape[-1]
    logits = q @ k.swapaxes(-1, -2) / math.sqrt(dk)
    logits = logits - logits.max(axis=-2, keepdims=True)
    weights = np.exp(logits)
    weights = weights / weights.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_dot_T(q, k, v):
    scores = q @ k.T / np.sqrt(q.shape[-1])
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores)
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights


def attention_naive_exp(q, k, v):
    scale = 1.0 / math.sqrt(k.shape[-1])
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_scale_after_softmax(q, k, v):
    raw = q @ np.swapaxes(k, -1, -2)
    raw = raw - raw.max(axis=-1, keepdims=True)
    probs = np.exp(raw) / np.exp(raw).sum(axis=-1, keepdims=True)
    probs = probs / np.sqrt(q.shape[-1])
    return probs @ v, probs


# ============================================================================ attention, right
def attention_einsum64(q, k, v):
    dtype = np.result_type(q, k, v)
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q64, k64) / math.sqrt(q64.shape[-1])
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    out = np.einsum("...ij,...je->...ie", w, v64)
    return out.astype(dtype), w.astype(dtype)


def attention_loop(q, k, v):
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k)
    kf = k.reshape(-1, n_k, d_k)
    vf = v.reshape(-1, n_k, d_v)
    outs = np.empty((qf.shape[0], n_q, d_v))
    ws = np.empty((qf.shape[0], n_q, n_k))
    for b in range(qf.shape[0]):
        for i in range(n_q):
            sc = np.array([np.dot(qf[b, i], kf[b, j]) for j in range(n_k)]) / d_k ** 0.5
            sc = np.exp(sc - sc.max())
            sc /= sc.sum()
            ws[b, i] = sc
            outs[b, i] = sc @ vf[b]
    return outs.reshape(lead + (n_q, d_v)), ws.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum first, so logits of "
          "size 1e4 overflow to inf and the weights become NaN", softmax_no_shift),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the global maximum underflows to 0/0 = NaN", softmax_global_max),
    Entry("softmax", "wrong", "sum_over_last_axis",
          "takes the max along `axis` but normalises with a sum over the last axis, so for "
          "axis other than -1 the slices do not sum to 1", softmax_sum_last_axis),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "replaces -inf logits by 0 before exponentiating, so masked entries get a positive "
          "weight instead of 0", softmax_inf_to_zero),
    Entry("softmax", "wrong", "logsumexp_without_keepdims",
          "subtracts scipy's logsumexp without keepdims=True, so the reduced array broadcasts "
          "along the wrong axis (or not at all, which raises)", softmax_lse_no_keepdims),
    Entry("softmax", "wrong", "exp_then_subtract",
          "misplaced parenthesis: computes exp(x) - max instead of exp(x - max), which is not "
          "a softmax and overflows for large logits", softmax_paren),
    Entry("softmax", "right", "python_row_loop", None, softmax_rowloop),
    Entry("softmax", "right", "logaddexp_reduce", None, softmax_logaddexp),
    Entry("attention", "wrong", "no_scale",
          "never divides the scores by sqrt(d_k), so the softmax is too peaked",
          attention_no_scale),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales by sqrt of v's last dimension (d_v) instead of sqrt(d_k): wrong as soon as "
          "d_v != d_k", attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights over the queries (axis -2) instead of over the keys "
          "(axis -1)", attention_softmax_queries),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with .T, which reverses every axis of a batched array, so batched "
          "inputs raise or mix the batch axes", attention_dot_T),
    Entry("attention", "wrong", "unstable_exp",
          "exponentiates the scaled scores without subtracting the row maximum, so large "
          "scores overflow and give NaN weights", attention_naive_exp),
    Entry("attention", "wrong", "scale_after_softmax",
          "divides by sqrt(d_k) after the softmax instead of before, so the weights no "
          "longer sum to 1", attention_scale_after_softmax),
    Entry("attention", "right", "einsum_float64", None, attention_einsum64),
    Entry("attention", "right", "explicit_loops", None, attention_loop),
]
