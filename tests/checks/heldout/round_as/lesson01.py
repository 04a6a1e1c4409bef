"""Held-out catalogue, lesson 01 (softmax, attention): learners' answers, written blind."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- softmax, wrong
def softmax_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max()
    ex = np.exp(shifted)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    z = np.asarray(x, dtype=float)
    z = z - z.max(axis=axis, keepdims=True)
    num = np.exp(z)
    den = num.sum(axis=-1, keepdims=True)
    return num / den


def softmax_unshifted(x, axis=-1):
    exps = np.exp(np.asarray(x, dtype=float))
    return exps / np.sum(exps, axis=axis, keepdims=True)


def softmax_inf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isinf(x), 0.0, x)  # keep -inf from producing nan
    top = x.max(axis=axis, keepdims=True)
    e = np.exp(x - top)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_log_space(x, axis=-1):
    x = np.asarray(x, dtype=float)
    mx = np.max(x, axis=axis, keepdims=True)
    lse = mx + np.log(np.sum(np.exp(x - mx), axis=axis, keepdims=True))
    return x - lse


# ----------------------------------------------------------------------------- softmax, right
def softmax_via_logsumexp(x, axis=-1):
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    lse = scipy.special.logsumexp(x, axis=axis, keepdims=True)
    return np.exp(x - lse).astype(x.dtype)


def softmax_row_loop(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    result = np.zeros_like(flat)
    for r in range(flat.shape[0]):
        row = flat[r]
        finite = row[np.isfinite(row)]
        if finite.size == 0:
            continue
        biggest = max(float(v) for v in finite)
        terms = [math.exp(v - biggest) if v != -math.inf else 0.0 for v in row]
        total = sum(terms)
        result[r] = [t / total for t in terms]
    return np.moveaxis(result.reshape(moved.shape), -1, axis)


# --------------------------------------------------------------------------- attention, wrong
def attention_k_dot_T(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ k.T / np.sqrt(q.shape[-1])
    s = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    q, k, v = np.asarray(q, float), np.asarray(k, float), np.asarray(v, float)
    d_k = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d_k)
    scores = scores - scores.max(axis=-2, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-2, keepdims=True)
    return weights @ v, weights


def attention_scale_dv(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    d = v.shape[-1]
    logits = q @ np.swapaxes(k, -2, -1) / np.sqrt(d)
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)
    return p @ v, p


def attention_unstable_exp(q, k, v):
    q, k, v = (np.asarray(t, dtype=float) for t in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_pow_precedence(q, k, v):
    q, k, v = (np.asarray(t, dtype=float) for t in (q, k, v))
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_after_softmax(q, k, v):
    q, k, v = (np.asarray(t, dtype=float) for t in (q, k, v))
    raw = np.einsum("...qd,...kd->...qk", q, k)
    raw = raw - raw.max(axis=-1, keepdims=True)
    probs = np.exp(raw)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    probs = probs / np.sqrt(q.shape[-1])
    return probs @ v, probs


# --------------------------------------------------------------------------- attention, right
def attention_einsum_scipy(q, k, v):
    q = np.asarray(q)
    k = np.asarray(k)
    v = np.asarray(v)
    scores = np.einsum("...id,...jd->...ij", q.astype(np.float64), k.astype(np.float64))
    scores = scores / math.sqrt(q.shape[-1])
    weights = scipy.special.softmax(scores, axis=-1)
    out = np.einsum("...ij,...jd->...id", weights, v.astype(np.float64))
    return out, weights


def attention_flat_loop(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k)
    kf = k.reshape(-1, n_k, d_k)
    vf = v.reshape(-1, n_k, d_v)
    outs = np.empty((qf.shape[0], n_q, d_v))
    ws = np.empty((qf.shape[0], n_q, n_k))
    inv = 1.0 / math.sqrt(d_k)
    for b in range(qf.shape[0]):
        s = (qf[b] @ kf[b].T) * inv
        s = s - s.max(axis=1)[:, None]
        p = np.exp(s)
        p = p / p.sum(axis=1)[:, None]
        ws[b] = p
        outs[b] = p @ vf[b]
    return outs.reshape(lead + (n_q, d_v)), ws.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("softmax", "wrong", "max-without-keepdims",
          "the row maximum is taken without keepdims=True, so it broadcasts against the wrong "
          "axis: wrong values on square input and a shape error otherwise", softmax_no_keepdims),
    Entry("softmax", "wrong", "global-max-shift",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a slice "
          "far below the global maximum underflows to 0/0 = NaN", softmax_global_max),
    Entry("softmax", "wrong", "normalise-last-axis",
          "shifts along `axis` but normalises with a sum over the last axis, so any other axis "
          "gives slices that do not sum to 1", softmax_sum_last_axis),
    Entry("softmax", "wrong", "no-max-subtraction",
          "exponentiates the raw logits without subtracting the maximum: logits of 1e3-1e4 "
          "overflow to inf/inf = NaN", softmax_unshifted),
    Entry("softmax", "wrong", "neg-inf-replaced-by-zero",
          "replaces -inf logits by 0 before the softmax, so entries that must get weight 0 get "
          "the weight of a logit 0", softmax_inf_to_zero),
    Entry("softmax", "wrong", "returns-log-softmax",
          "stops at x - logsumexp(x): returns the log-probabilities (log-softmax), the final "
          "exp is missing", softmax_log_space),
    Entry("softmax", "right", "scipy-logsumexp", None, softmax_via_logsumexp),
    Entry("softmax", "right", "python-row-loop", None, softmax_row_loop),
    Entry("attention", "wrong", "k-dot-T",
          "transposes k with `.T`, which reverses every axis: right for 2-D inputs, but batched "
          "inputs get their batch axes reversed (shape error)", attention_k_dot_T),
    Entry("attention", "wrong", "softmax-over-queries",
          "normalises the scores along axis -2 (over the queries) instead of over the keys",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "scale-by-d_v",
          "scales the scores by 1/sqrt(d_v) (v.shape[-1]) instead of 1/sqrt(d_k)",
          attention_scale_dv),
    Entry("attention", "wrong", "unstable-softmax",
          "the softmax exponentiates the scores without subtracting the row maximum, so large "
          "scores overflow to inf/inf = NaN", attention_unstable_exp),
    Entry("attention", "wrong", "pow-precedence",
          "writes `/ d_k ** 1 / 2` for 1/sqrt(d_k): ** binds first, so the scores are divided by "
          "d_k and then by 2", attention_pow_precedence),
    Entry("attention", "wrong", "scale-after-softmax",
          "divides the weights by sqrt(d_k) after the softmax instead of scaling the scores "
          "before it, so weight rows sum to 1/sqrt(d_k)", attention_scale_after_softmax),
    Entry("attention", "right", "einsum-scipy-softmax", None, attention_einsum_scipy),
    Entry("attention", "right", "loop-over-flattened-batch", None, attention_flat_loop),
]
