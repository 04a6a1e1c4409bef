"""Held-out learners' answers, lesson 01 (softmax, attention). Written without seeing the checks."""

import math

import numpy as np
import scipy.special
import torch

from entry import Entry


# =============================================================================== softmax
def softmax_no_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_inf_zeroed(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # avoid inf - inf = nan
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x)
    shifted = x - x.max()
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_total_sum(x, axis=-1):
    x = np.asarray(x)
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / z.sum()


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x)
    top = arr.max(axis=axis, keepdims=True)
    num = np.exp(arr - top)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_argmax_shift(x, axis=-1):
    x = np.asarray(x)
    peak = np.argmax(x, axis=axis)
    peak = np.expand_dims(peak, axis)
    ex = np.exp(x - peak)
    return ex / np.sum(ex, axis=axis, keepdims=True)


def softmax_logsumexp(x, axis=-1):
    x = np.asarray(x)
    return np.exp(x - scipy.special.logsumexp(x, axis=axis, keepdims=True))


def softmax_via_torch(x, axis=-1):
    arr = np.asarray(x)
    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    return torch.softmax(t, dim=axis).numpy().astype(arr.dtype)


# =============================================================================== attention
def attention_full_transpose(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-2, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_precedence_scale(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    m = scores.max(axis=-1, keepdims=True)
    p = np.exp(scores - m)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v, p


def attention_returns_swapped(q, k, v):
    scale = 1.0 / np.sqrt(k.shape[-1])
    logits = np.einsum("...qd,...kd->...qk", q, k) * scale
    logits -= logits.max(axis=-1, keepdims=True)
    attn = np.exp(logits)
    attn /= attn.sum(axis=-1, keepdims=True)
    out = attn @ v
    return attn, out


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = q @ np.swapaxes(k, -2, -1)
    s = s / np.sqrt(d)
    s = s - s.max(axis=-1, keepdims=True)
    weights = np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_scale_after_softmax(q, k, v):
    raw = q @ np.swapaxes(k, -1, -2)
    raw = raw - raw.max(axis=-1, keepdims=True)
    w = np.exp(raw)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w / np.sqrt(q.shape[-1])
    return w @ v, w


def attention_einsum_scipy(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("...id,...jd->...ij", q64, k64) / np.sqrt(q64.shape[-1])
    weights = scipy.special.softmax(scores, axis=-1)
    out = np.einsum("...ij,...jd->...id", weights, v64)
    return out, weights


def attention_loops(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
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
                out[idx + (i,)] += (ex[j] / tot) * v[idx][j]
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum first, so logits of "
          "1e4 overflow to inf and the weights become NaN", softmax_no_shift),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "replaces infinite logits by 0 before the softmax to dodge NaN, so a -inf entry "
          "becomes an ordinary logit 0 and gets a positive weight instead of weight 0",
          softmax_inf_zeroed),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to 0/0 = NaN", softmax_global_max),
    Entry("softmax", "wrong", "sum_whole_array",
          "divides by the sum of the whole array (no axis) instead of the sum along `axis`, so "
          "the slices do not each sum to 1", softmax_total_sum),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "takes the maximum along `axis` but sums along -1 regardless of `axis`, so any other "
          "axis is normalised along the wrong direction", softmax_sum_last_axis),
    Entry("softmax", "wrong", "argmax_for_max",
          "subtracts np.argmax (the index of the largest entry) instead of np.max (its value), "
          "so the shift is not the maximum and large logits overflow to NaN",
          softmax_argmax_shift),
    Entry("softmax", "right", "scipy_logsumexp", None, softmax_logsumexp),
    Entry("softmax", "right", "torch_softmax", None, softmax_via_torch),
    Entry("attention", "wrong", "k_dot_T_all_axes",
          "transposes k with `.T`, which reverses all axes, so with batch dimensions the "
          "product raises a shape error or pairs the wrong axes (it only works for 2-D "
          "inputs)",
          attention_full_transpose),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the scores along axis -2 (over the queries) instead of along the keys, "
          "so the weight rows do not sum to 1", attention_softmax_over_queries),
    Entry("attention", "wrong", "scale_precedence",
          "writes `/ d_k ** 1 / 2`, which divides by d_k and then by 2 (operator precedence) "
          "instead of by sqrt(d_k)", attention_precedence_scale),
    Entry("attention", "wrong", "returns_weights_first",
          "returns the pair in the order (weights, out) instead of (out, weights)",
          attention_returns_swapped),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v), the values' width, instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "scale_after_softmax",
          "applies the 1/sqrt(d_k) factor to the weights after the softmax instead of to the "
          "scores before it, so the weights no longer sum to 1", attention_scale_after_softmax),
    Entry("attention", "right", "einsum_scipy_float64", None, attention_einsum_scipy),
    Entry("attention", "right", "python_loops", None, attention_loops),
]
