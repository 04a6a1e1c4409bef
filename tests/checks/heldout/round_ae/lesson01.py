"""Held-out catalogue, lesson 01 (single-head attention, numpy): softmax, attention."""

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ softmax
def softmax_max_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_global_max(x, axis=-1):
    x = np.asarray(x)
    z = np.exp(x - x.max())
    return z / z.sum(axis=axis, keepdims=True)


def softmax_sum_last_axis(x, axis=-1):
    arr = np.asarray(x)
    peak = arr.max(axis=axis, keepdims=True)
    ex = np.exp(arr - peak)
    total = ex.sum(axis=-1, keepdims=True)
    return ex / total


def softmax_moveaxis_not_back(x, axis=-1):
    xs = np.moveaxis(np.asarray(x), axis, -1)
    xs = xs - xs.max(axis=-1, keepdims=True)
    w = np.exp(xs)
    w = w / w.sum(axis=-1, keepdims=True)
    return w


def softmax_clip_logits(x, axis=-1):
    # keep exp() in range
    safe = np.clip(np.asarray(x, dtype=float), -50.0, 50.0)
    num = np.exp(safe)
    return num / num.sum(axis=axis, keepdims=True)


def softmax_no_shift(x, axis=-1):
    exps = np.exp(x)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def softmax_right_logsumexp(x, axis=-1):
    x = np.asarray(x)
    lse = scipy.special.logsumexp(x.astype(np.float64), axis=axis, keepdims=True)
    return np.exp(x.astype(np.float64) - lse).astype(x.dtype)


def softmax_right_row_loop(x, axis=-1):
    arr = np.asarray(x, dtype=np.float64)
    moved = np.moveaxis(arr, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.zeros_like(flat)
    for i, row in enumerate(flat):
        finite = row[np.isfinite(row)]
        if finite.size == 0:
            continue
        top = finite.max()
        w = [0.0 if v == -np.inf else float(np.exp(v - top)) for v in row]
        s = sum(w)
        out[i] = [wi / s for wi in w]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


# ============================================================================ attention
def attention_k_dot_T(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / np.sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_dv(q, k, v):
    d = v.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(d)
    s = s - np.max(s, axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    return np.matmul(p, v), p


def attention_pow_precedence(q, k, v):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def attention_softmax_over_queries(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = np.einsum("...id,...jd->...ij", q, k) * scale
    logits = logits - logits.max(axis=-2, keepdims=True)
    ex = np.exp(logits)
    attn = ex / ex.sum(axis=-2, keepdims=True)
    return np.einsum("...ij,...jd->...id", attn, v), attn


def attention_unstable_inline_softmax(q, k, v):
    dk = q.shape[-1]
    scores = (q @ np.swapaxes(k, -2, -1)) / np.sqrt(dk)
    ex = np.exp(scores)
    weights = ex / ex.sum(axis=-1, keepdims=True)
    out = weights @ v
    return out, weights


def attention_returns_swapped(q, k, v):
    kt = np.swapaxes(k, -1, -2)
    s = (q @ kt) / np.sqrt(k.shape[-1])
    s -= s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=-1, keepdims=True)
    out = w @ v
    return w, out


def attention_right_batch_loop(q, k, v):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = q.shape[:-2]
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.empty(lead + (n_q, d_v))
    weights = np.empty(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        qi, ki, vi = q[idx], k[idx], v[idx]
        s = qi @ ki.T / np.sqrt(qi.shape[1])
        w = scipy.special.softmax(s, axis=1)
        weights[idx] = w
        out[idx] = w @ vi
    return out, weights


def attention_right_scale_q_first(q, k, v):
    q = np.asarray(q)
    q_scaled = q * (q.shape[-1] ** -0.5)
    s = np.einsum("...qd,...kd->...qk", q_scaled, k)
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    w = np.exp(s - lse)
    return np.einsum("...qk,...kv->...qv", w, v), w


ENTRIES = [
    Entry("softmax", "wrong", "max_no_keepdims",
          "the row maximum is taken without keepdims=True, so it does not broadcast back against "
          "x along `axis`: it raises for non-square inputs and shifts each entry by another "
          "slice's maximum for square ones", softmax_max_no_keepdims),
    Entry("softmax", "wrong", "global_max_shift",
          "subtracts the maximum of the whole array instead of each slice's maximum along `axis`, "
          "so a slice whose logits lie thousands below that maximum underflows to 0/0 = NaN",
          softmax_global_max),
    Entry("softmax", "wrong", "sum_hardcoded_last_axis",
          "the max is taken along `axis` but the normalising sum is hard-coded to the last axis, "
          "so for any other axis the result does not sum to 1 along `axis`",
          softmax_sum_last_axis),
    Entry("softmax", "wrong", "moveaxis_not_moved_back",
          "moves `axis` to the end to compute the softmax but never moves it back, so for "
          "axis != -1 the result has the wrong axis order (wrong shape or transposed values)",
          softmax_moveaxis_not_back),
    Entry("softmax", "wrong", "clip_instead_of_shift",
          "avoids overflow by clipping the logits to [-50, 50] instead of subtracting the "
          "maximum, which changes the distribution whenever logits lie outside that range",
          softmax_clip_logits),
    Entry("softmax", "wrong", "no_max_shift",
          "exponentiates the raw logits without subtracting the maximum, so logits of 1e3-1e4 "
          "overflow to inf and give NaN", softmax_no_shift),
    Entry("softmax", "right", "logsumexp_float64", None, softmax_right_logsumexp),
    Entry("softmax", "right", "python_row_loop", None, softmax_right_row_loop),

    Entry("attention", "wrong", "k_dot_T_reverses_all_axes",
          "transposes k with `k.T`, which reverses all axes instead of swapping the last two, so "
          "batched inputs raise or pair the wrong axes", attention_k_dot_T),
    Entry("attention", "wrong", "scale_by_sqrt_d_v",
          "scales the scores by 1/sqrt(d_v) (v.shape[-1]) instead of 1/sqrt(d_k), which is "
          "wrong whenever d_v != d_k", attention_scale_dv),
    Entry("attention", "wrong", "pow_precedence",
          "writes `/ d_k ** 1 / 2`, which by precedence divides by d_k and then by 2 instead of "
          "dividing by sqrt(d_k)", attention_pow_precedence),
    Entry("attention", "wrong", "softmax_over_queries",
          "normalises the weights along axis -2 (over the queries) instead of over the keys, so "
          "the columns, not the rows, sum to 1", attention_softmax_over_queries),
    Entry("attention", "wrong", "inline_softmax_unshifted",
          "its own inline softmax does not subtract the row maximum, so large scores overflow "
          "to inf and the weights become NaN", attention_unstable_inline_softmax),
    Entry("attention", "wrong", "returns_weights_then_out",
          "returns the pair in the wrong order, (weights, out) instead of (out, weights)",
          attention_returns_swapped),
    Entry("attention", "right", "ndindex_loop_scipy_softmax", None, attention_right_batch_loop),
    Entry("attention", "right", "einsum_scaled_query_logsumexp", None,
          attention_right_scale_q_first),
]
