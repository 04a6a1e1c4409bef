"""Held-out catalogue, lesson 01 (single head, numpy): softmax, attention.

Written without seeing the course's checkers: each wrong answer carries exactly one slip.
"""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    z = np.asarray(x, dtype=float)
    z = z - z.max(axis=axis, keepdims=True)
    num = np.exp(z)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_clip_logits(x, axis=-1):
    logits = np.clip(np.asarray(x, dtype=float), -500.0, 500.0)
    ex = np.exp(logits)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_scipy_default_axis(x, axis=-1):
    return scipy.special.softmax(np.asarray(x, dtype=float))


def softmax_no_shift(x, axis=-1):
    ex = np.exp(np.asarray(x, dtype=float))
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


def softmax_row_loop(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    result = np.empty_like(flat)
    for r, row in enumerate(flat):
        top = max(row)
        exps = [math.exp(v - top) if v != -math.inf else 0.0 for v in row]
        total = math.fsum(exps)
        result[r] = [e / total for e in exps]
    return np.moveaxis(result.reshape(moved.shape), -1, axis)


# ============================================================================ attention
def _row_softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_dv(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    w = _row_softmax(scores)
    return w @ v, w


def attention_dot_T(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ k.T / np.sqrt(q.shape[-1])
    w = _row_softmax(scores)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-2, keepdims=True)
    e = np.exp(scores)
    weights = e / e.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_scale_after_softmax(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    raw = q @ np.swapaxes(k, -1, -2)
    weights = _row_softmax(raw) / np.sqrt(q.shape[-1])
    return weights @ v, weights


def attention_sqrt_precedence(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    weights = _row_softmax(scores)
    return weights @ v, weights


def attention_exp_unshifted(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_einsum_lse(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) / math.sqrt(q64.shape[-1])
    w = np.exp(s - scipy.special.logsumexp(s, axis=-1, keepdims=True))
    out = np.einsum("...qk,...kv->...qv", w, v64)
    return out, w


def attention_batch_loop(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    nq, dk = q.shape[-2:]
    nk, dv = v.shape[-2:]
    qf = q.reshape(-1, nq, dk)
    kf = k.reshape(-1, nk, dk)
    vf = v.reshape(-1, nk, dv)
    outs, ws = [], []
    for qi, ki, vi in zip(qf, kf, vf):
        w = scipy.special.softmax(np.dot(qi, ki.T) * dk ** -0.5, axis=1)
        ws.append(w)
        outs.append(np.dot(w, vi))
    return (np.stack(outs).reshape(lead + (nq, dv)),
            np.stack(ws).reshape(lead + (nq, nk)))


ENTRIES = [
    Entry("softmax", "wrong", "sum_no_keepdims",
          "the maximum keeps its axis but the sum is taken without keepdims=True, so the "
          "denominator lines up with the wrong axis (a broadcasting error, or rows divided by "
          "another row's total on square inputs)",
          softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice thousands below the global maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_last_axis",
          "normalises with a sum over axis=-1 whatever `axis` is, so for axis=0 or -2 the "
          "slices along `axis` do not sum to 1",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "clip_logits",
          "avoids overflow by clipping the logits to [-500, 500] instead of subtracting the "
          "maximum, which changes the result as soon as logits exceed the clip (e.g. 1e4)",
          softmax_clip_logits),
    Entry("softmax", "wrong", "scipy_default_axis",
          "calls scipy.special.softmax without passing `axis`; scipy's default is axis=None, "
          "a softmax over all entries of the array at once",
          softmax_scipy_default_axis),
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum, so logits of 1e3 or "
          "1e4 overflow to inf and give NaN",
          softmax_no_shift),
    Entry("softmax", "right", "logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "row_loop_math", None, softmax_row_loop),

    Entry("attention", "wrong", "scale_by_dv",
          "scales the scores by 1/sqrt(d_v), reading the width from v instead of from q/k "
          "(d_k); wrong whenever d_v != d_k",
          attention_scale_dv),
    Entry("attention", "wrong", "dot_T_batched",
          "transposes k with .T, which reverses all axes of a batched array instead of "
          "swapping the last two (only right for 2-D inputs; batched inputs fail or mix axes)",
          attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights over the query axis (-2) instead of the key axis (-1), so "
          "columns, not rows, sum to 1",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "scale_after_softmax",
          "divides by sqrt(d_k) after the softmax instead of scaling the scores before it, so "
          "the weights no longer sum to 1 and their sharpness is unchanged",
          attention_scale_after_softmax),
    Entry("attention", "wrong", "sqrt_precedence",
          "writes sqrt(d_k) as `d_k ** 1 / 2`, which Python reads as (d_k ** 1) / 2 = d_k / 2",
          attention_sqrt_precedence),
    Entry("attention", "wrong", "exp_unshifted",
          "the inline softmax exponentiates the scores without subtracting the row maximum, "
          "so large scores overflow to inf and the weights become NaN",
          attention_exp_unshifted),
    Entry("attention", "right", "einsum_logsumexp", None, attention_einsum_lse),
    Entry("attention", "right", "batch_loop_scipy", None, attention_batch_loop),
]
