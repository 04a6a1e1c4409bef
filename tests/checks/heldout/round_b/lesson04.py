"""Lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
def cm_w_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def cm_w_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q - 1)


def cm_w_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def cm_w_flipped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)  # True = masked


def cm_w_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def cm_w_no_default(n_q, n_k=None):
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def cm_w_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q).T


def cm_r_arange(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    return np.arange(n_k)[None, :] <= i


def cm_r_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    out = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        for j in range(n_k):
            out[i, j] = j <= i + n_k - n_q
    return out


def cm_r_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ============================================================================ padding_mask
def pm_w_le(lengths, n):
    return (np.arange(n)[None, :] <= np.asarray(lengths)[:, None])[:, None, None, :]


def pm_w_2d(lengths, n):
    return np.arange(n)[None, :] < np.asarray(lengths)[:, None]


def pm_w_query_axis(lengths, n):
    return (np.arange(n)[None, :] < np.asarray(lengths)[:, None])[:, None, :, None]


def pm_w_inverted(lengths, n):
    return (np.arange(n)[None, :] >= np.asarray(lengths)[:, None])[:, None, None, :]


def pm_w_max_length(lengths, n):
    lengths = np.asarray(lengths)
    m = int(lengths.max())
    return (np.arange(m)[None, :] < lengths[:, None])[:, None, None, :]


def pm_w_int(lengths, n):
    return (np.arange(n)[None, :] < np.asarray(lengths)[:, None]).astype(int)[:, None, None, :]


def pm_w_reshape_swaps(lengths, n):
    keep = np.arange(n)[None, :] < np.asarray(lengths)[:, None]  # (B, n)
    return keep.T.reshape(len(lengths), 1, 1, n)  # transposed before the reshape


def pm_r_loop(lengths, n):
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        out[b, 0, 0, :int(length)] = True
    return out


def pm_r_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n))[:, None, None, :]


# ============================================================================ masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _guarded_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def ma_w_inverted(q, k, v, mask):
    w = _guarded_softmax(np.where(mask, -np.inf, _scores(q, k)))
    return w @ v, w


def ma_w_nan_rows(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_w_big_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _guarded_softmax(s)
    return w @ v, w


def ma_w_zero_after_softmax(q, k, v, mask):
    w = _guarded_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_w_renorm_no_guard(q, k, v, mask):
    w = _guarded_softmax(_scores(q, k)) * mask
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_w_additive_bool(q, k, v, mask):
    w = _guarded_softmax(_scores(q, k) + mask)  # the bool mask added as 0/1
    return w @ v, w


def ma_w_mask_zero_scores(q, k, v, mask):
    w = _guarded_softmax(np.where(mask, _scores(q, k), 0.0))
    return w @ v, w


def ma_r_where_guard(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    w = _guarded_softmax(s)
    return w @ v, w


def ma_r_exp_times_mask(q, k, v, mask):
    s = _scores(q, k)
    s_masked = np.where(mask, s, -np.inf)
    top = np.max(s_masked, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    e = np.exp(np.where(mask, s, top) - top) * mask
    tot = e.sum(-1, keepdims=True)
    w = np.where(tot > 0, e / np.maximum(tot, np.finfo(np.float64).tiny), 0.0)
    return w @ v, w


def ma_r_float32_additive(q, k, v, mask):
    q32, k32, v32 = (np.asarray(a, np.float32) for a in (q, k, v))
    bias = np.where(mask, np.float32(0.0), np.float32(-np.inf))
    s = _scores(q32, k32) + bias
    w = _guarded_softmax(s)
    return w @ v32, w


E = Entry
ENTRIES = [
    E("causal_mask", "wrong", "top_left_aligned",
      "Uses tril with k=0, aligning the mask top-left, which is wrong when n_q != n_k.",
      cm_w_top_left),
    E("causal_mask", "wrong", "excludes_diagonal",
      "Makes the mask strictly causal, so a query may not attend its own position.",
      cm_w_strict),
    E("causal_mask", "wrong", "float_mask",
      "Returns np.tril of np.ones as floats instead of a boolean mask.", cm_w_float),
    E("causal_mask", "wrong", "true_means_masked",
      "Returns True on the future positions (the masked ones) instead of the allowed ones.",
      cm_w_flipped),
    E("causal_mask", "wrong", "offset_sign",
      "Uses the diagonal offset n_q - n_k instead of n_k - n_q.", cm_w_offset_sign),
    E("causal_mask", "wrong", "n_k_default_missing",
      "Never replaces n_k=None by n_q, so causal_mask(n) fails.", cm_w_no_default),
    E("causal_mask", "wrong", "transposed",
      "Returns the (n_k, n_q) transpose of the mask.", cm_w_transposed),
    E("causal_mask", "right", "arange_compare", None, cm_r_arange),
    E("causal_mask", "right", "double_loop", None, cm_r_loops),
    E("causal_mask", "right", "np_tri", None, cm_r_np_tri),
    E("padding_mask", "wrong", "less_equal",
      "Uses j <= length, letting each sequence attend one padding position.", pm_w_le),
    E("padding_mask", "wrong", "shape_b_n",
      "Returns the (B, n) mask without the two singleton axes.", pm_w_2d),
    E("padding_mask", "wrong", "singleton_on_key_axis",
      "Places the keys on the query axis, shape (B, 1, n, 1).", pm_w_query_axis),
    E("padding_mask", "wrong", "true_means_padding",
      "Returns True on the padding positions instead of the real tokens.", pm_w_inverted),
    E("padding_mask", "wrong", "width_from_max_length",
      "Uses the longest length instead of n as the mask's width.", pm_w_max_length),
    E("padding_mask", "wrong", "integer_mask",
      "Returns 0/1 integers instead of booleans.", pm_w_int),
    E("padding_mask", "wrong", "transpose_before_reshape",
      "Transposes the (B, n) comparison before reshaping, scrambling rows and positions.",
      pm_w_reshape_swaps),
    E("padding_mask", "right", "loop_slices", None, pm_r_loop),
    E("padding_mask", "right", "greater_outer", None, pm_r_greater_outer),
    E("masked_attention", "wrong", "mask_inverted",
      "Fills -inf where the mask is True, masking the allowed keys.", ma_w_inverted),
    E("masked_attention", "wrong", "nan_on_empty_rows",
      "Uses -inf fill and a plain softmax, so a fully masked row becomes NaN.", ma_w_nan_rows),
    E("masked_attention", "wrong", "fill_minus_1e9",
      "Fills masked scores with -1e9, so a fully masked row gets uniform weights instead of "
      "zeros.", ma_w_big_negative),
    E("masked_attention", "wrong", "zero_after_softmax",
      "Zeroes masked weights after the softmax without renormalising the row.",
      ma_w_zero_after_softmax),
    E("masked_attention", "wrong", "renormalise_without_guard",
      "Zeroes masked weights after the softmax and renormalises, which is 0/0 on a fully "
      "masked row.", ma_w_renorm_no_guard),
    E("masked_attention", "wrong", "adds_boolean_mask",
      "Adds the boolean mask to the scores as if it were an additive float mask.",
      ma_w_additive_bool),
    E("masked_attention", "wrong", "masked_scores_zero",
      "Sets masked scores to 0 instead of -inf, so masked keys still get weight.",
      ma_w_mask_zero_scores),
    E("masked_attention", "right", "where_guarded_softmax", None, ma_r_where_guard),
    E("masked_attention", "right", "exp_times_mask", None, ma_r_exp_times_mask),
    E("masked_attention", "right", "float32_additive_bias", None, ma_r_float32_additive),
]
