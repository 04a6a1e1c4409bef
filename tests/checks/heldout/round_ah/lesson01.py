"""Held-out catalogue, lesson 01 (single head): softmax, attention. numpy in, numpy out."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ----------------------------------------------------------------------------- softmax, wrong
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
    arr = np.asarray(x, dtype=float)
    top = arr.max(axis=axis, keepdims=True)
    ex = np.exp(arr - top)
    return ex / ex.sum(axis=-1, keepdims=True)


def softmax_neginf_to_zero(x, axis=-1):
    x = np.asarray(x, dtype=float)
    x = np.where(np.isneginf(x), 0.0, x)  # avoid NaN from -inf
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_raw_denominator(x, axis=-1):
    logits = np.asarray(x, dtype=float)
    m = np.max(logits, axis=axis, keepdims=True)
    numer = np.exp(logits - m)
    denom = np.sum(np.exp(logits), axis=axis, keepdims=True)
    return numer / denom


def softmax_moveaxis_not_restored(x, axis=-1):
    z = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    return p


# ----------------------------------------------------------------------------- softmax, right
def softmax_scipy(x, axis=-1):
    return scipy.special.softmax(np.asarray(x, dtype=np.float64), axis=axis)


def softmax_python_loops(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.empty_like(flat)
    for r, row in enumerate(flat):
        biggest = max(row)
        if biggest == -math.inf:
            out[r] = 0.0
            continue
        terms = [math.exp(v - biggest) for v in row]
        total = math.fsum(terms)
        out[r] = [t / total for t in terms]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


# ----------------------------------------------------------------------------- attention, wrong
def attention_scale_dv(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_dot_T(q, k, v):
    d_k = q.shape[-1]
    s = q @ k.T / math.sqrt(d_k)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    d = q.shape[-1]
    logits = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(d)
    logits = logits - logits.max(axis=-2, keepdims=True)
    e = np.exp(logits)
    weights = e / e.sum(axis=-2, keepdims=True)
    return np.matmul(weights, v), weights


def attention_scale_after_softmax(q, k, v):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    weights = e / e.sum(axis=-1, keepdims=True) / np.sqrt(d_k)
    return weights @ v, weights


def attention_np_dot(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    scores = np.dot(q, np.swapaxes(k, -1, -2)) * scale
    scores = scores - np.max(scores, axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / np.sum(w, axis=-1, keepdims=True)
    return np.dot(w, v), w


def attention_dk_from_shape1(q, k, v):
    d_k = q.shape[1]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(d_k)
    m = scores.max(axis=-1, keepdims=True)
    p = np.exp(scores - m)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v, p


# ----------------------------------------------------------------------------- attention, right
def attention_einsum_logsumexp(q, k, v):
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q64, k64) / math.sqrt(q64.shape[-1])
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    w = np.exp(s - lse)
    out = np.einsum("...qk,...kv->...qv", w, v64)
    return out, w


def attention_flat_batch_loop(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k)
    kf = k.reshape(-1, n_k, d_k)
    vf = v.reshape(-1, n_k, d_v)
    outs, ws = [], []
    for i in range(qf.shape[0]):
        scores = qf[i].dot(kf[i].T) * (d_k ** -0.5)
        w = scipy.special.softmax(scores, axis=1)
        ws.append(w)
        outs.append(w.dot(vf[i]))
    out = np.stack(outs).reshape(lead + (n_q, d_v))
    weights = np.stack(ws).reshape(lead + (n_q, n_k))
    return out, weights


ENTRIES = [
    Entry("softmax", "wrong", "sum_without_keepdims",
          "the denominator np.sum(e, axis=axis) drops the reduced axis, so it broadcasts "
          "against the wrong axis: a broadcasting error for most shapes and wrong values "
          "for square inputs", softmax_sum_no_keepdims),
    Entry("softmax", "wrong", "global_max",
          "subtracts the maximum of the whole array instead of each slice's maximum, so a "
          "slice far below the top underflows to 0/0 and comes out NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_axis_hardcoded",
          "takes the max along `axis` but sums along the last axis (axis=-1 hard-coded), "
          "so any other axis is normalised the wrong way", softmax_sum_last_axis),
    Entry("softmax", "wrong", "neg_inf_replaced_by_zero",
          "replaces -inf logits by 0 to dodge NaN, so those entries get a positive weight "
          "instead of weight 0", softmax_neginf_to_zero),
    Entry("softmax", "wrong", "denominator_unshifted",
          "the numerator uses the shifted exponentials but the denominator sums np.exp of "
          "the raw logits, so rows don't sum to 1 and large logits overflow",
          softmax_raw_denominator),
    Entry("softmax", "wrong", "moveaxis_not_undone",
          "moves `axis` to the end to normalise it but never moves it back, so for any "
          "axis other than the last the result has a permuted shape",
          softmax_moveaxis_not_restored),
    Entry("softmax", "right", "scipy_special", None, softmax_scipy),
    Entry("softmax", "right", "python_loops_fsum", None, softmax_python_loops),
    Entry("attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(v.shape[-1]), the value width d_v, instead of "
          "1/sqrt(d_k)", attention_scale_dv),
    Entry("attention", "wrong", "k_dot_T",
          "transposes k with .T, which reverses every axis of a batched array instead of "
          "swapping the last two (fails or mixes batch axes beyond 2-D)", attention_dot_T),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the scores along axis -2 (over the queries) instead of over the keys",
          attention_softmax_over_queries),
    Entry("attention", "wrong", "scale_after_softmax",
          "divides by sqrt(d_k) after the softmax instead of scaling the scores, so the "
          "weights no longer sum to 1", attention_scale_after_softmax),
    Entry("attention", "wrong", "np_dot_not_batched",
          "uses np.dot, which is not a batched matrix product for arrays beyond 2-D (it "
          "contracts across all batch axes), instead of @ / np.matmul",
          attention_np_dot),
    Entry("attention", "wrong", "d_k_from_shape_1",
          "reads d_k as q.shape[1], which is d_k only for 2-D inputs (with batch axes it "
          "is N_q or a head count)", attention_dk_from_shape1),
    Entry("attention", "right", "einsum_logsumexp", None, attention_einsum_logsumexp),
    Entry("attention", "right", "flattened_batch_loop", None, attention_flat_batch_loop),
]
