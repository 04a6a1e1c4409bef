"""Held-out catalogue, lesson 01 (single head): softmax, attention. numpy."""

import math

import numpy as np
from scipy.special import logsumexp
from scipy.special import softmax as sp_softmax

from entry import Entry


# =============================================================================== softmax
def softmax_sum_no_keepdims(x, axis=-1):
    x = np.asarray(x, dtype=float)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis)


def softmax_neg_inf_to_zero(x, axis=-1):
    x = np.array(x, dtype=float)
    x[np.isinf(x)] = 0.0  # "handle" -inf entries
    m = x.max(axis=axis, keepdims=True)
    ex = np.exp(x - m)
    return ex / ex.sum(axis=axis, keepdims=True)


def softmax_sum_axis_hardcoded(x, axis=-1):
    x = np.asarray(x, dtype=float)
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def softmax_no_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    num = np.exp(x)
    return num / num.sum(axis=axis, keepdims=True)


def softmax_abs_max_shift(x, axis=-1):
    x = np.asarray(x, dtype=float)
    biggest = np.max(np.abs(x), axis=axis, keepdims=True)
    e = np.exp(x - biggest)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_logsumexp_no_axis(x, axis=-1):
    x = np.asarray(x, dtype=float)
    return np.exp(x - logsumexp(x))


def softmax_log_space(x, axis=-1):
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    return np.exp(x - logsumexp(x, axis=axis, keepdims=True)).astype(x.dtype)


def softmax_row_loop(x, axis=-1):
    arr = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    flat = arr.reshape(-1, arr.shape[-1])
    res = np.empty_like(flat)
    for r, row in enumerate(flat):
        top = max(row)
        exps = [math.exp(v - top) for v in row]
        tot = math.fsum(exps)
        res[r] = [e / tot for e in exps]
    return np.moveaxis(res.reshape(arr.shape), -1, axis)


# =============================================================================== attention
def _sm(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def attention_scale_by_dv(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    w = _sm(scores)
    return w @ v, w


def attention_k_dot_T(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ k.T / math.sqrt(q.shape[-1])
    w = _sm(scores)
    return w @ v, w


def attention_softmax_over_queries(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-2, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-2, keepdims=True)
    return np.matmul(w, v), w


def attention_sqrt_precedence(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / d_k ** 1 / 2
    weights = _sm(scores)
    return weights @ v, weights


def attention_max_no_keepdims(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def attention_scale_after_softmax(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    raw = q @ np.swapaxes(k, -1, -2)
    w = _sm(raw) / np.sqrt(q.shape[-1])
    return w @ v, w


def attention_einsum_lse(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    logits = np.einsum("...qd,...kd->...qk", q, k) * (q.shape[-1] ** -0.5)
    w = np.exp(logits - logsumexp(logits, axis=-1, keepdims=True))
    return np.einsum("...qk,...kv->...qv", w, v), w


def attention_batch_loop(q, k, v):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = q.shape[:-2]
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qf = q.reshape(-1, n_q, d_k).astype(np.float64) / math.sqrt(d_k)
    kf = k.reshape(-1, n_k, d_k).astype(np.float64)
    vf = v.reshape(-1, n_k, d_v).astype(np.float64)
    outs, ws = [], []
    for qi, ki, vi in zip(qf, kf, vf):
        wi = sp_softmax(qi @ ki.T, axis=1)
        ws.append(wi)
        outs.append(wi @ vi)
    return (np.stack(outs).reshape(lead + (n_q, d_v)),
            np.stack(ws).reshape(lead + (n_q, n_k)))


E = Entry
ENTRIES = [
    E("softmax", "wrong", "sum_no_keepdims",
      "the row sums are taken without keepdims=True, so the division broadcasts the sums "
      "against the wrong axis (each entry is divided by another row's sum, or shapes clash)",
      softmax_sum_no_keepdims),
    E("softmax", "wrong", "neg_inf_replaced_by_zero",
      "-inf logits are replaced by 0 before the softmax, so those entries get an ordinary "
      "positive weight instead of weight 0",
      softmax_neg_inf_to_zero),
    E("softmax", "wrong", "sum_axis_hardcoded",
      "the maximum is taken along `axis` but the normalising sum always along the last axis "
      "(axis=-1 hard-coded), so for any other axis the result does not sum to 1 along `axis`",
      softmax_sum_axis_hardcoded),
    E("softmax", "wrong", "no_max_shift",
      "the maximum is not subtracted before np.exp, so logits of magnitude 1e3-1e4 overflow to "
      "inf and the weights become NaN",
      softmax_no_shift),
    E("softmax", "wrong", "shift_by_abs_max",
      "it subtracts the largest absolute value instead of the largest value: when a row's most "
      "negative logit is far larger in magnitude than its maximum, every exponent underflows "
      "to 0 and the row becomes 0/0 = NaN",
      softmax_abs_max_shift),
    E("softmax", "wrong", "logsumexp_without_axis",
      "scipy's logsumexp is called without axis, so it normalises over the whole array "
      "instead of along `axis`",
      softmax_logsumexp_no_axis),
    E("softmax", "right", "log_space_logsumexp", None, softmax_log_space),
    E("softmax", "right", "moveaxis_python_rows", None, softmax_row_loop),

    E("attention", "wrong", "scale_by_d_v",
      "the scores are divided by sqrt of v's last axis (d_v) instead of sqrt(d_k); wrong "
      "whenever d_v != d_k",
      attention_scale_by_dv),
    E("attention", "wrong", "k_dot_T",
      "k.T reverses all axes, not just the last two, so with batch axes the product fails "
      "(or pairs the wrong axes); use np.swapaxes(k, -1, -2)",
      attention_k_dot_T),
    E("attention", "wrong", "softmax_over_queries",
      "the softmax normalises along axis -2 (over the queries) instead of over the keys, so the "
      "weight rows do not sum to 1",
      attention_softmax_over_queries),
    E("attention", "wrong", "sqrt_written_as_pow_1_over_2",
      "`d_k ** 1 / 2` is `(d_k ** 1) / 2`, so the scores are divided by d_k / 2 instead of "
      "sqrt(d_k)",
      attention_sqrt_precedence),
    E("attention", "wrong", "row_max_no_keepdims",
      "the row maximum is taken without keepdims=True, so subtracting it broadcasts along the "
      "wrong axis: shapes clash for N_q != N_k and square score matrices get a different "
      "shift per column, which changes the weights",
      attention_max_no_keepdims),
    E("attention", "wrong", "scale_after_softmax",
      "the 1/sqrt(d_k) factor is applied to the weights after the softmax instead of to the "
      "scores before it, so the weights no longer sum to 1 and are not the softmax of the "
      "scaled scores",
      attention_scale_after_softmax),
    E("attention", "right", "einsum_logsumexp_float64", None, attention_einsum_lse),
    E("attention", "right", "batch_loop_scipy_softmax_scaled_q", None, attention_batch_loop),
]
