"""Held-out catalogue, lesson 01 (single head): softmax, attention."""

import numpy as np
import scipy.special
import torch

from entry import Entry


# ============================================================================ softmax
def softmax_no_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    ex = np.exp(x - m)
    return ex / ex.sum(axis=axis)


def softmax_mean_center(x, axis=-1):
    arr = np.asarray(x)
    centred = arr - arr.mean(axis=axis, keepdims=True)
    num = np.exp(centred)
    return num / num.sum(axis=axis, keepdims=True)


def softmax_last_axis_sum(x, axis=-1):
    x = np.asarray(x)
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    total = z.sum(axis=-1, keepdims=True)
    return z / total


def softmax_neginf_to_zero(x, axis=-1):
    logits = np.nan_to_num(np.asarray(x), neginf=0.0)
    logits = logits - logits.max(axis=axis, keepdims=True)
    w = np.exp(logits)
    return w / w.sum(axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse).astype(x.dtype)


def softmax_torch64(x, axis=-1):
    arr = np.asarray(x)
    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    return torch.softmax(t, dim=axis).numpy().astype(arr.dtype)


# ============================================================================ attention
def attention_no_scale(q, k, v):
    scores = q @ np.swapaxes(k, -1, -2)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(d)
    s = s - np.max(s, axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v, p


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    dk = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(dk)
    logits = logits - logits.max(axis=-2, keepdims=True)
    ew = np.exp(logits)
    attn = ew / ew.sum(axis=-2, keepdims=True)
    return np.matmul(attn, v), attn


def attention_np_dot(q, k, v):
    d_k = q.shape[-1]
    scores = np.dot(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return np.dot(weights, v), weights


def attention_half_power(q, k, v):
    d_k = q.shape[-1]
    raw = q @ np.swapaxes(k, -1, -2)
    scores = raw / d_k ** 1 / 2
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_einsum_lse(q, k, v):
    q = np.asarray(q)
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = np.einsum("...qd,...kd->...qk", q, k) * scale
    w = np.exp(s - scipy.special.logsumexp(s, axis=-1, keepdims=True))
    out = np.einsum("...qk,...kv->...qv", w, v)
    return out, w


def attention_row_loop(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    out = np.zeros(lead + (n_q, d_v), dtype=np.float64)
    wts = np.zeros(lead + (n_q, n_k), dtype=np.float64)
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            row = np.array([float(np.dot(q[idx][i], k[idx][j])) for j in range(n_k)])
            row /= d_k ** 0.5
            row = scipy.special.softmax(row)
            wts[idx][i] = row
            out[idx][i] = row @ v[idx]
    return out.astype(q.dtype), wts.astype(q.dtype)


ENTRIES = [
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum, so logits of 1e4 "
          "overflow to inf and the weights become NaN", softmax_no_shift),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the global maximum underflows to all zeros and gives 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_without_keepdims",
          "sums the exponentials without keepdims=True, so the totals broadcast against the "
          "wrong axis (a shape error, or silently wrong values on square inputs)",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "mean_centering",
          "centres the logits by their mean instead of their maximum: large logits still "
          "overflow and a -inf entry makes the mean -inf, giving NaN", softmax_mean_center),
    Entry("softmax", "wrong", "normalises_last_axis",
          "shifts along `axis` but normalises along the last axis whatever `axis` says, so "
          "for axis != -1 the slices do not sum to 1", softmax_last_axis_sum),
    Entry("softmax", "wrong", "neginf_replaced_by_zero",
          "replaces -inf logits by 0 before exponentiating, so entries that should get "
          "weight 0 get a real share", softmax_neginf_to_zero),
    Entry("softmax", "right", "logsumexp_scipy", None, softmax_logsumexp),
    Entry("softmax", "right", "torch_float64", None, softmax_torch64),

    Entry("attention", "wrong", "no_scale",
          "forgets the 1/sqrt(d_k) scale on the scores", attention_no_scale),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v) (v's last axis) instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with .T, which reverses every axis of a batched array instead of "
          "swapping the last two (a shape error for batched inputs)", attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights over the query axis (-2) instead of over the keys (-1)",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "np_dot_batched",
          "uses np.dot, which on batched arrays pairs every batch of q with every batch of "
          "k instead of multiplying matching batches, so batched shapes come out wrong",
          attention_np_dot),
    Entry("attention", "wrong", "power_precedence",
          "writes d_k ** 1 / 2, which is (d_k ** 1) / 2, so the scores are divided by d_k / 2 "
          "instead of sqrt(d_k)", attention_half_power),
    Entry("attention", "right", "einsum_logsumexp", None, attention_einsum_lse),
    Entry("attention", "right", "row_by_row_loops", None, attention_row_loop),
]
