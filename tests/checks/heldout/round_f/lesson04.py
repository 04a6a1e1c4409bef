"""Lesson 04 (numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ---------------------------------------------------------------- causal_mask, wrong
def cm_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def cm_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q - 1)


def cm_inverted(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def cm_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def cm_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def cm_keys_from_nq(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    query_pos = np.arange(n_q)[:, None] + (n_k - n_q)
    key_pos = np.arange(n_q)[None, :]
    return key_pos <= query_pos


# ---------------------------------------------------------------- causal_mask, right
def cm_fromfunction(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.fromfunction(lambda i, j: j - i <= n_k - n_q, (n_q, n_k), dtype=int)


def cm_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    m = np.zeros((n_q, n_k), dtype=np.bool_)
    for i in range(n_q):
        last = i + n_k - n_q
        if last >= 0:
            m[i, : last + 1] = True
    return m


# ---------------------------------------------------------------- padding_mask, wrong
def pm_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pm_flat(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def pm_query_slot(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :, None]


def pm_inverted(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= lengths[:, None])[:, None, None, :]


def pm_longest(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    return (np.arange(width)[None, :] < lengths[:, None])[:, None, None, :]


def pm_left_padded(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= n - lengths[:, None])[:, None, None, :]


# ---------------------------------------------------------------- padding_mask, right
def pm_loop(lengths, n):
    lengths = np.asarray(lengths)
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        out[b, 0, 0, : int(length)] = True
    return out


def pm_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n)).reshape(len(lengths), 1, 1, n)


# ---------------------------------------------------------------- masked_attention, wrong
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def ma_big_negative(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _safe_softmax(s)
    return w @ v, w


def ma_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_mask_transposed(q, k, v, mask):
    s = np.where(np.swapaxes(mask, -1, -2), _scores(q, k), -np.inf)
    w = _safe_softmax(s)
    return w @ v, w


def ma_zero_fill(q, k, v, mask):
    s = np.where(mask, _scores(q, k), 0.0)
    w = _safe_softmax(s)
    return w @ v, w


def ma_additive_bool(q, k, v, mask):
    s = _scores(q, k) + mask
    w = _safe_softmax(s)
    return w @ v, w


# ---------------------------------------------------------------- masked_attention, right
def ma_log_mask(q, k, v, mask):
    with np.errstate(divide="ignore"):
        bias = np.log(np.asarray(mask, dtype=np.float64))  # 0 where allowed, -inf elsewhere
    s = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1]) + bias
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        w = np.where(np.isfinite(lse), np.exp(s - lse), 0.0)
    return w @ v, w


def ma_exp_times_mask(q, k, v, mask):
    s = _scores(q, k)
    m = np.broadcast_to(mask, s.shape)
    top = np.max(np.where(m, s, -np.inf), axis=-1, keepdims=True)
    top = np.where(m.any(axis=-1, keepdims=True), top, 0.0)
    e = np.exp(np.minimum(s - top, 0.0)) * m  # masked keys contribute exactly 0
    tot = e.sum(axis=-1, keepdims=True)
    w = e / np.where(tot == 0, 1.0, tot)
    return w @ v, w


E = Entry
ENTRIES = [
    E("causal_mask", "wrong", "top_left_aligned",
      "Uses np.tril with no offset (top-left aligned), so with n_q < n_k the queries do not "
      "see the keys of the cached prefix.", cm_top_left),
    E("causal_mask", "wrong", "diagonal_excluded",
      "Shifts the diagonal by one too many, so each query may not attend its own position "
      "(j < i + n_k - n_q).", cm_strict),
    E("causal_mask", "wrong", "true_means_blocked",
      "Builds the future positions (upper triangle) as True, i.e. True = masked, the opposite "
      "of the course's True = may attend.", cm_inverted),
    E("causal_mask", "wrong", "offset_sign_flipped",
      "Uses the offset n_q - n_k instead of n_k - n_q in np.tril.", cm_offset_sign),
    E("causal_mask", "wrong", "float_ones_not_bool",
      "Returns np.tril of a float ones matrix (0.0/1.0) instead of a boolean mask.", cm_float),
    E("causal_mask", "wrong", "key_positions_from_n_q",
      "Builds the key positions with np.arange(n_q) instead of np.arange(n_k), so the mask "
      "has the wrong number of columns.", cm_keys_from_nq),
    E("causal_mask", "right", "np_fromfunction", None, cm_fromfunction),
    E("causal_mask", "right", "row_loop", None, cm_loops),

    E("padding_mask", "wrong", "less_equal_off_by_one",
      "Uses j <= lengths[b] instead of j < lengths[b], letting one padding position through.",
      pm_le),
    E("padding_mask", "wrong", "no_singleton_axes",
      "Returns the (B, n) comparison without the two singleton axes for heads and queries.",
      pm_flat),
    E("padding_mask", "wrong", "key_axis_in_query_slot",
      "Inserts the singleton axes so the key axis lands in the query position (B, 1, n, 1).",
      pm_query_slot),
    E("padding_mask", "wrong", "true_marks_padding",
      "Marks the padding positions True (j >= length) instead of the real tokens.",
      pm_inverted),
    E("padding_mask", "wrong", "width_from_longest_length",
      "Builds the key axis from the longest length instead of n, so the mask is too short "
      "when no sequence fills n.", pm_longest),
    E("padding_mask", "wrong", "assumes_left_padding",
      "Assumes left padding, marking the last lengths[b] positions instead of the first.",
      pm_left_padded),
    E("padding_mask", "right", "fill_loop", None, pm_loop),
    E("padding_mask", "right", "greater_outer_reshape", None, pm_greater_outer),

    E("masked_attention", "wrong", "fill_minus_1e9",
      "Fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
      "weights instead of zeros.", ma_big_negative),
    E("masked_attention", "wrong", "mask_inverted",
      "Puts -inf where the mask is True, treating True as 'blocked'.", ma_inverted),
    E("masked_attention", "wrong", "mask_applied_after_softmax",
      "Multiplies the softmax weights by the mask afterwards without renormalising, so rows "
      "no longer sum to 1.", ma_mask_after_softmax),
    E("masked_attention", "wrong", "mask_transposed",
      "Swaps the mask's last two axes, reading it as (N_k, N_q).", ma_mask_transposed),
    E("masked_attention", "wrong", "masked_scores_set_to_zero",
      "Sets masked scores to 0 instead of -inf, so masked keys still get weight.",
      ma_zero_fill),
    E("masked_attention", "wrong", "boolean_added_as_bias",
      "Adds the boolean mask to the scores as if it were an additive bias (+1 for allowed) "
      "instead of excluding masked keys.", ma_additive_bool),
    E("masked_attention", "right", "log_mask_bias_logsumexp", None, ma_log_mask),
    E("masked_attention", "right", "exp_times_mask", None, ma_exp_times_mask),
]
