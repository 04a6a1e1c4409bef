"""Lesson 04 (masks): causal_mask, padding_mask, masked_attention, numpy."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ---------------------------------------------------------------- causal_mask
def cm_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def cm_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def cm_default_always_nq(n_q, n_k=None):
    n_k = n_q if n_k else n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def cm_float(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def cm_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def cm_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)
    j = np.arange(n_k)
    return j[:, None] <= i[None, :] + (n_k - n_q)


def cm_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    m = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        for j in range(n_k):
            m[i, j] = j - i <= n_k - n_q
    return m


def cm_not_triu(n_q, n_k=None):
    n_k = n_k or n_q
    return ~np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


# ---------------------------------------------------------------- padding_mask
def pm_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pm_three_dims(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :]


def pm_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :, None]


def pm_no_column(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths
    return keep.reshape(-1, 1, 1, n)


def pm_ints(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None]).astype(int)[:, None, None, :]


def pm_left_padding(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= n - lengths[:, None])[:, None, None, :]


def pm_loop(lengths, n):
    lengths = list(np.asarray(lengths))
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :int(length)] = True
    return mask


def pm_expand_dims(lengths, n):
    keep = np.less.outer(np.arange(n), np.asarray(lengths)).T
    return np.expand_dims(keep, (1, 2))


# ---------------------------------------------------------------- masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def _safe_softmax(s):
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    t = e.sum(axis=-1, keepdims=True)
    return np.divide(e, t, out=np.zeros_like(e), where=t > 0)


def ma_multiply_mask(q, k, v, mask):
    w = _safe_softmax(_scores(q, k) * mask)
    return w @ v, w


def ma_big_negative(q, k, v, mask):
    w = _safe_softmax(np.where(mask, _scores(q, k), -1e9))
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_swapped_return(q, k, v, mask):
    w = _safe_softmax(np.where(mask, _scores(q, k), -np.inf))
    return w, w @ v


def ma_scale_by_nk(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(k.shape[-2])
    w = _safe_softmax(np.where(mask, s, -np.inf))
    return w @ v, w


def ma_mask_transposed(q, k, v, mask):
    w = _safe_softmax(np.where(np.swapaxes(mask, -1, -2), _scores(q, k), -np.inf))
    return w @ v, w


def ma_row_loop(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], np.shape(mask)[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    dt = np.result_type(q, k, v)
    qb = np.broadcast_to(q, lead + q.shape[-2:]).reshape(-1, n_q, q.shape[-1])
    kb = np.broadcast_to(k, lead + k.shape[-2:]).reshape(-1, n_k, k.shape[-1])
    vb = np.broadcast_to(v, lead + v.shape[-2:]).reshape(-1, n_k, v.shape[-1])
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, v.shape[-1]), dtype=np.float64)
    wts = np.zeros((qb.shape[0], n_q, n_k), dtype=np.float64)
    for b in range(qb.shape[0]):
        for i in range(n_q):
            allowed = mb[b, i]
            if not allowed.any():
                continue
            s = kb[b][allowed].astype(np.float64) @ qb[b, i].astype(np.float64)
            p = scipy.special.softmax(s / math.sqrt(q.shape[-1]))
            wts[b, i, allowed] = p
            out[b, i] = p @ vb[b][allowed]
    return (out.reshape(lead + (n_q, v.shape[-1])).astype(dt),
            wts.reshape(lead + (n_q, n_k)).astype(dt))


def ma_exp_times_mask(q, k, v, mask):
    s = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.nan_to_num(top, neginf=0.0)) * mask
    tot = e.sum(axis=-1, keepdims=True)
    w = e / np.maximum(tot, np.finfo(e.dtype).tiny)
    return np.einsum("...ij,...jd->...id", w, v), w


E = "causal_mask"
ENTRIES = [
    Entry(E, "wrong", "top_left_aligned", "np.tril without an offset aligns the mask top-left, "
          "so with n_k > n_q the queries cannot see the cached keys they should.", cm_top_left),
    Entry(E, "wrong", "offset_sign_flipped", "The tril offset is n_q - n_k instead of n_k - n_q, "
          "a sign slip that shifts the diagonal the wrong way.", cm_offset_sign),
    Entry(E, "wrong", "default_always_n_q", "The default is written n_q if n_k else n_q, so a "
          "given n_k is ignored and the mask is always square.", cm_default_always_nq),
    Entry(E, "wrong", "float_mask", "np.ones without dtype=bool makes the mask a float 0/1 array "
          "instead of a boolean one.", cm_float),
    Entry(E, "wrong", "triu_for_tril", "It uses np.triu instead of np.tril, keeping the future "
          "keys instead of the past.", cm_triu),
    Entry(E, "wrong", "keys_on_rows", "The broadcast puts keys on the rows and queries on the "
          "columns, so the mask comes out (n_k, n_q).", cm_transposed),
    Entry(E, "right", "double_loop", None, cm_loops),
    Entry(E, "right", "complement_of_triu", None, cm_not_triu),
]

E = "padding_mask"
ENTRIES += [
    Entry(E, "wrong", "less_equal", "It compares j <= lengths[b] instead of j < lengths[b], so "
          "one padded position too many is allowed.", pm_le),
    Entry(E, "wrong", "three_dims", "It inserts only one singleton axis, returning (B, 1, n) "
          "instead of (B, 1, 1, n).", pm_three_dims),
    Entry(E, "wrong", "on_query_axis", "The length axis is put on the query position, giving "
          "(B, 1, n, 1) instead of (B, 1, 1, n).", pm_query_axis),
    Entry(E, "wrong", "lengths_not_a_column", "It compares np.arange(n) < lengths without "
          "lengths[:, None], so it compares position b with lengths[b] elementwise (or fails).",
          pm_no_column),
    Entry(E, "wrong", "int_mask", "It converts the mask to 0/1 ints instead of returning "
          "booleans.", pm_ints),
    Entry(E, "wrong", "left_padding", "It marks the last lengths[b] positions as valid (left "
          "padding) instead of the first lengths[b].", pm_left_padding),
    Entry(E, "right", "loop_fill", None, pm_loop),
    Entry(E, "right", "less_outer", None, pm_expand_dims),
]

E = "masked_attention"
ENTRIES += [
    Entry(E, "wrong", "multiplies_scores_by_mask", "It multiplies the scores by the mask, so "
          "masked keys get score 0 (still weighted) instead of -inf.", ma_multiply_mask),
    Entry(E, "wrong", "minus_1e9_fill", "Masked scores are set to -1e9 instead of -inf, so a "
          "fully masked row becomes uniform weights over all keys instead of zeros.",
          ma_big_negative),
    Entry(E, "wrong", "mask_after_softmax", "The mask zeroes weights after the softmax without "
          "renormalising, so the remaining weights no longer sum to 1.", ma_mask_after_softmax),
    Entry(E, "wrong", "returns_weights_first", "It returns (weights, out) instead of "
          "(out, weights).", ma_swapped_return),
    Entry(E, "wrong", "scale_by_n_k", "The scores are divided by sqrt(N_k) (k.shape[-2]) "
          "instead of sqrt(d_k) (k.shape[-1]).", ma_scale_by_nk),
    Entry(E, "wrong", "mask_transposed", "It swaps the mask's last two axes as if it were "
          "(N_k, N_q), which for a square causal mask lets queries see the future.",
          ma_mask_transposed),
    Entry(E, "right", "per_row_boolean_index", None, ma_row_loop),
    Entry(E, "right", "exp_times_mask", None, ma_exp_times_mask),
]
