"""Held-out catalogue, lesson 01 (single-head attention): softmax, attention.

Each function is one learner's answer; wrong ones carry exactly one slip.
"""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry


# ============================================================================ softmax
def softmax_max_without_keepdims(x, axis=-1):
    x = np.asarray(x)
    biggest = np.max(x, axis=axis)
    shifted = np.exp(x - biggest)
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x)
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    x = np.asarray(x)
    m = x.max(axis=axis, keepdims=True)
    ex = np.exp(x - m)
    return ex / ex.sum(-1, keepdims=True)


def softmax_no_shift(x, axis=-1):
    ex = np.exp(np.asarray(x))
    return ex / np.sum(ex, axis=axis, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x)
    x = np.where(np.isinf(x), 0.0, x)  # keep the exponentials finite
    top = np.max(x, axis=axis, keepdims=True)
    num = np.exp(x - top)
    return num / np.sum(num, axis=axis, keepdims=True)


def softmax_unshifted_denominator(x, axis=-1):
    x = np.asarray(x)
    peak = np.max(x, axis=axis, keepdims=True)
    numer = np.exp(x - peak)
    denom = np.sum(np.exp(x), axis=axis, keepdims=True)
    return numer / denom


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse)


def softmax_row_loop(x, axis=-1):
    arr = np.asarray(x)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.zeros(flat.shape, dtype=np.float64)
    for r in range(flat.shape[0]):
        row = [float(v) for v in flat[r]]
        top = max(row)
        if top == -math.inf:
            continue
        exps = [math.exp(v - top) for v in row]
        total = sum(exps)
        out[r] = [e / total for e in exps]
    return np.moveaxis(out.reshape(moved.shape), -1, axis).astype(arr.dtype)


# ============================================================================ attention
def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    s = s - s.max(axis=-2, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-2, keepdims=True)
    return p @ v, p


def attention_precedence_sqrt(q, k, v):
    d_k = q.shape[-1]
    logits = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    logits = logits - np.max(logits, axis=-1, keepdims=True)
    a = np.exp(logits)
    a = a / np.sum(a, axis=-1, keepdims=True)
    return a @ v, a


def attention_output_before_normalising(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out = e @ v
    weights = e / e.sum(axis=-1, keepdims=True)
    return out, weights


def attention_scale_on_output(q, k, v):
    d_k = q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", q, k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    out = weights @ v / np.sqrt(d_k)
    return out, weights


def attention_einsum_lse(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    logits = np.einsum("...id,...jd->...ij", q64, k64) / np.sqrt(q64.shape[-1])
    probs = np.exp(logits - scipy.special.logsumexp(logits, axis=-1, keepdims=True))
    ctx = np.einsum("...ij,...jd->...id", probs, v64)
    dt = np.result_type(q, k, v)
    return ctx.astype(dt), probs.astype(dt)


def attention_torch(q, k, v):
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a)) for a in (q, k, v))
    scores = tq @ tk.transpose(-1, -2) / math.sqrt(tq.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    out = weights @ tv
    return out.numpy(), weights.numpy()


ENTRIES = [
    Entry("softmax", "wrong", "max_without_keepdims",
          "the maximum is taken without keepdims=True, so it does not broadcast back along the "
          "reduced axis: the code raises on non-square input and subtracts the wrong maxima "
          "otherwise", softmax_max_without_keepdims),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to 0/0 = NaN", softmax_global_max),
    Entry("softmax", "wrong", "sum_over_last_axis",
          "the normalising sum is hard-wired to the last axis (-1) instead of `axis`, so for "
          "axis=0 or 1 the result does not sum to 1 along the requested axis",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum, so logits of 1e3-1e4 "
          "overflow to inf and give NaN", softmax_no_shift),
    Entry("softmax", "wrong", "inf_replaced_by_zero",
          "replaces -inf entries by 0 before exponentiating, so they get a positive weight "
          "instead of weight 0", softmax_inf_to_zero),
    Entry("softmax", "wrong", "unshifted_denominator",
          "divides the shifted exponentials exp(x - max) by the sum of the unshifted exp(x): "
          "the result is off by a factor exp(max) per slice (and overflows for large logits)",
          softmax_unshifted_denominator),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "python_row_loop", None, softmax_row_loop),

    Entry("attention", "wrong", "k_dot_T",
          "transposes k with k.T, which reverses all axes: right for 2-D inputs but it breaks "
          "(raises) once there are batch or head axes; only the last two axes should be swapped",
          attention_k_dot_T),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v), reading v's last axis, instead of 1/sqrt(d_k) from "
          "q and k", attention_scale_dv),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the scores along axis -2 (over the queries) instead of the last axis (over "
          "the keys), so the rows of weights do not sum to 1", attention_softmax_over_queries),
    Entry("attention", "wrong", "precedence_d_k_pow_half",
          "`d_k ** 1 / 2` is (d_k ** 1) / 2 = d_k / 2, not sqrt(d_k): the scores are divided by "
          "d_k / 2 (operator precedence)", attention_precedence_sqrt),
    Entry("attention", "wrong", "output_from_unnormalised_weights",
          "computes out from the exponentials before dividing by the row sums, so out is off by "
          "each row's normalising constant (the returned weights are right)",
          attention_output_before_normalising),
    Entry("attention", "wrong", "scale_applied_to_output",
          "divides the output by sqrt(d_k) instead of the scores: the softmax sees unscaled "
          "scores (too peaked) and out is shrunk", attention_scale_on_output),
    Entry("attention", "right", "einsum_logsumexp_float64", None, attention_einsum_lse),
    Entry("attention", "right", "torch_softmax", None, attention_torch),
]
