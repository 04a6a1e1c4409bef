"""Held-out learners' answers, lesson 01 (softmax, attention)."""

import math

import numpy as np
import torch
from scipy.special import logsumexp
from scipy.special import softmax as scipy_softmax

from entry import Entry


# ----------------------------------------------------------------------------- softmax, wrong
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max())
    return e / e.sum(axis=axis, keepdims=True)


def softmax_moveaxis_back_wrong(x, axis=-1):
    z = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    z = z - z.max(axis=-1, keepdims=True)
    ez = np.exp(z)
    probs = ez / ez.sum(axis=-1, keepdims=True)
    return np.moveaxis(probs, axis, -1)


def softmax_unshifted(x, axis=-1):
    ex = np.exp(np.asarray(x, dtype=float))
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_inf_zeroed(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # keep infinities out of exp
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_loop_sum_first_twice(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    total = np.take(e, [0], axis=axis)
    for i in range(x.shape[axis]):
        total = total + np.take(e, [i], axis=axis)
    return e / total


# ----------------------------------------------------------------------------- softmax, right
def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True))


def softmax_torch(x, axis=-1):
    t = torch.from_numpy(np.array(x, dtype=np.float64))
    return torch.softmax(t, dim=axis).numpy()


# ----------------------------------------------------------------------------- attention, wrong
def attention_unscaled(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    m = scores.max(axis=-1, keepdims=True)
    p = np.exp(scores - m)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v, p


def attention_softmax_over_queries(q, k, v):
    dk = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(dk)
    logits = logits - logits.max(axis=-2, keepdims=True)
    ex = np.exp(logits)
    weights = ex / ex.sum(axis=-2, keepdims=True)
    return np.matmul(weights, v), weights


def attention_dot_T(q, k, v):
    scores = (q @ k.T) / np.sqrt(q.shape[-1])
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_power_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / np.sum(w, axis=-1, keepdims=True)
    out = w @ v
    return out, w


def attention_len_for_dk(q, k, v):
    d_k = len(q)
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(d_k)
    s = s - s.max(-1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(-1, keepdims=True)
    return np.einsum("...ij,...jd->...id", a, v), a


# ----------------------------------------------------------------------------- attention, right
def attention_einsum_scipy(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = np.einsum("...qd,...kd->...qk", q * scale, k)
    w = scipy_softmax(s, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, v), w


def attention_row_loops(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            row = [float(np.dot(q[idx][i], k[idx][j])) / math.sqrt(d_k) for j in range(n_k)]
            top = max(row)
            ex = [math.exp(r - top) for r in row]
            tot = sum(ex)
            for j in range(n_k):
                weights[idx + (i, j)] = ex[j] / tot
            out[idx + (i,)] = weights[idx + (i,)] @ v[idx]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "max_no_keepdims",
          "the row maximum is taken without keepdims=True, so it fails to broadcast against x "
          "(a shape error) or, for square inputs, shifts each entry by another slice's maximum", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global_max",
          "it subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the global maximum underflows to 0/0 = NaN", softmax_global_max),
    Entry("softmax", "wrong", "moveaxis_back_wrong",
          "it moves `axis` to the end but moves it back with np.moveaxis(probs, axis, -1) "
          "instead of np.moveaxis(probs, -1, axis), so for axis != -1 the axes come back scrambled",
          softmax_moveaxis_back_wrong),
    Entry("softmax", "wrong", "no_max_shift",
          "no maximum is subtracted before np.exp, so logits of magnitude 1e4 (or 1000) overflow "
          "to inf and give NaN", softmax_unshifted),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "it replaces -inf entries by 0 before exponentiating, so masked entries get a positive "
          "weight instead of weight 0", softmax_inf_zeroed),
    Entry("softmax", "wrong", "loop_sum_counts_first_twice",
          "the running total starts from the first entry and the loop then adds every entry "
          "again from index 0, so the first entry is counted twice in the denominator",
          softmax_loop_sum_first_twice),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "torch_softmax_float64", None, softmax_torch),
    Entry("attention", "wrong", "no_scale",
          "the scores q k^T are not divided by sqrt(d_k)", attention_unscaled),
    Entry("attention", "wrong", "scale_by_d_v",
          "the scale uses v's last dimension, 1/sqrt(d_v), instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "the softmax normalises over axis -2 (the queries) instead of axis -1 (the keys)",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "k_dot_T",
          "it transposes k with k.T, which reverses every axis: fine for 2-D inputs but wrong "
          "(a shape error) once there are batch or head axes", attention_dot_T),
    Entry("attention", "wrong", "pow_precedence",
          "`d_k ** 1 / 2` is (d_k ** 1) / 2, so the scores are multiplied by 2/d_k instead of "
          "divided by sqrt(d_k)", attention_power_precedence),
    Entry("attention", "wrong", "len_for_d_k",
          "d_k is read with len(q), which is the size of q's first axis (N_q or the batch), "
          "not its last axis", attention_len_for_dk),
    Entry("attention", "right", "einsum_scipy_softmax", None, attention_einsum_scipy),
    Entry("attention", "right", "python_row_loops", None, attention_row_loops),
]
