"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ------------------------------------------------------------------------- causal_mask, wrong
def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_transposed_grid(n_q, n_k=None):
    n_k = n_k or n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :]
    return keys <= queries + (n_k - n_q)


def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


# ------------------------------------------------------------------------- causal_mask, right
def causal_list_comprehension(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    return np.array([[j <= i + shift for j in range(n_k)] for i in range(n_q)],
                    dtype=bool).reshape(n_q, n_k)


def causal_not_strict_upper(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
    return ~future


# ------------------------------------------------------------------------ padding_mask, wrong
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_three_dims(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths[:, None]
    return keep[:, None, :]


def padding_grid_reshaped(lengths, n):
    lengths = np.asarray(lengths)
    grid = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return grid.reshape(len(lengths), 1, 1, n)


def padding_float_fill(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = 1
    return mask


def padding_marks_pads(lengths, n):
    pos = np.arange(n).reshape(1, 1, 1, n)
    lens = np.asarray(lengths).reshape(-1, 1, 1, 1)
    return pos >= lens


def padding_width_from_max(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


# ------------------------------------------------------------------------ padding_mask, right
def padding_loop_bool(lengths, n):
    lens = [int(t) for t in np.asarray(lengths).ravel()]
    out = np.zeros((len(lens), 1, 1, n), dtype=bool)
    for b, length in enumerate(lens):
        out[b, 0, 0, :length] = True
    return out


def padding_greater_outer(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.greater.outer(lengths, np.arange(n))  # keep[b, j] = lengths[b] > j
    return keep.reshape(lengths.shape[0], 1, 1, n)


# -------------------------------------------------------------------- masked_attention, wrong
def masked_nan_rows(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    d_k = q.shape[-1]
    logits = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_k)
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask  # drop the masked keys
    return p @ v, p


def masked_big_negative(q, k, v, mask):
    s = q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_scale_dv(q, k, v, mask):
    s = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(v.shape[-1])
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    w = np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)
    return w @ v, w


def masked_additive_bool(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = scores + mask  # add the mask to the scores
    allowed = np.broadcast_to(mask, scores.shape)
    scores = np.where(allowed.any(axis=-1, keepdims=True), scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


# -------------------------------------------------------------------- masked_attention, right
def masked_logsumexp(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(all="ignore"):
        lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
        w = np.where(np.isfinite(lse), np.exp(s - lse), 0.0)
    w = np.nan_to_num(w, nan=0.0)
    return np.einsum("...ij,...jd->...id", w, v), w


def masked_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    qb = np.broadcast_to(q, lead + q.shape[-2:]).reshape(-1, n_q, q.shape[-1])
    kb = np.broadcast_to(k, lead + k.shape[-2:]).reshape(-1, n_k, k.shape[-1])
    vb = np.broadcast_to(v, lead + v.shape[-2:]).reshape(-1, n_k, v.shape[-1])
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, v.shape[-1]))
    weights = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            keys = np.flatnonzero(mb[b, i])
            if keys.size == 0:
                continue
            s = kb[b, keys] @ qb[b, i] / math.sqrt(q.shape[-1])
            e = np.exp(s - s.max())
            weights[b, i, keys] = e / e.sum()
            out[b, i] = weights[b, i] @ vb[b]
    return out.reshape(lead + (n_q, v.shape[-1])), weights.reshape(lead + (n_q, n_k))


E = Entry
ENTRIES = [
    E(exercise="causal_mask", kind="wrong", label="triu_not_tril",
      mistake="Uses `np.triu` where `np.tril` belongs, so each query may attend the present "
              "and future keys instead of the past.",
      func=causal_triu),
    E(exercise="causal_mask", kind="wrong", label="offset_sign_swapped",
      mistake="Passes the diagonal offset as n_q - n_k instead of n_k - n_q, so with a cache "
              "(n_k > n_q) queries lose the cached keys, and with n_q > n_k they see too much.",
      func=causal_offset_sign),
    E(exercise="causal_mask", kind="wrong", label="float_not_bool",
      mistake="Builds the triangle with `np.ones` of the default float dtype and never "
              "converts it, returning a 0/1 float array instead of a boolean mask.",
      func=causal_float_mask),
    E(exercise="causal_mask", kind="wrong", label="strict_less_than",
      mistake="Compares with `<` where `<=` belongs, so the mask keeps each query from "
              "attending its own position (the diagonal).",
      func=causal_strict),
    E(exercise="causal_mask", kind="wrong", label="arange_axes_swapped",
      mistake="Puts the key positions on the rows and the query positions on the columns, "
              "returning an (n_k, n_q) mask (the transpose) instead of (n_q, n_k).",
      func=causal_transposed_grid),
    E(exercise="causal_mask", kind="wrong", label="top_left_aligned",
      mistake="Aligns the triangle top-left (`np.tril` with no offset), so when n_q != n_k "
              "query i sees keys j <= i instead of j <= i + n_k - n_q.",
      func=causal_top_left),
    E(exercise="causal_mask", kind="right", label="nested_list_comprehension", mistake=None,
      func=causal_list_comprehension),
    E(exercise="causal_mask", kind="right", label="complement_of_strict_upper", mistake=None,
      func=causal_not_strict_upper),

    E(exercise="padding_mask", kind="wrong", label="less_or_equal",
      mistake="Uses `<=` where `<` belongs, so one padding position after each sequence "
              "(position lengths[b]) is marked as a real key.",
      func=padding_le),
    E(exercise="padding_mask", kind="wrong", label="shape_b_1_n",
      mistake="Inserts only one singleton axis, returning shape (B, 1, n) instead of "
              "(B, 1, 1, n).",
      func=padding_three_dims),
    E(exercise="padding_mask", kind="wrong", label="n_by_b_reshaped",
      mistake="Builds the comparison grid as (n, B) and then `reshape`s it to (B, 1, 1, n), "
              "which reorders the flat data instead of transposing, scrambling the rows.",
      func=padding_grid_reshaped),
    E(exercise="padding_mask", kind="wrong", label="float_zeros_filled",
      mistake="Fills a `np.zeros` array (float by default) with ones, returning a 0/1 float "
              "array instead of a boolean mask.",
      func=padding_float_fill),
    E(exercise="padding_mask", kind="wrong", label="true_on_padding",
      mistake="Marks the padding positions (j >= length) True, the opposite of the "
              "convention True = may attend.",
      func=padding_marks_pads),
    E(exercise="padding_mask", kind="wrong", label="width_max_length",
      mistake="Sizes the key axis by `lengths.max()` instead of n, so the mask is too short "
              "whenever no sequence fills all n positions.",
      func=padding_width_from_max),
    E(exercise="padding_mask", kind="right", label="loop_fill_bool", mistake=None,
      func=padding_loop_bool),
    E(exercise="padding_mask", kind="right", label="greater_outer", mistake=None,
      func=padding_greater_outer),

    E(exercise="masked_attention", kind="wrong", label="fully_masked_rows_nan",
      mistake="Subtracts the row maximum with no guard, so a fully masked row computes "
              "-inf - (-inf) = NaN instead of giving zeros.",
      func=masked_nan_rows),
    E(exercise="masked_attention", kind="wrong", label="mask_inverted",
      mistake="Fills -inf where the mask is True, reading True as 'masked out' instead of "
              "'may attend'.",
      func=masked_inverted),
    E(exercise="masked_attention", kind="wrong", label="mask_after_softmax",
      mistake="Applies the mask by multiplying the softmax weights afterwards, without "
              "renormalising, so rows with masked keys no longer sum to 1.",
      func=masked_after_softmax),
    E(exercise="masked_attention", kind="wrong", label="minus_1e9_fill",
      mistake="Fills masked scores with -1e9 instead of -inf: a row whose keys are all "
              "masked becomes a uniform average instead of zeros.",
      func=masked_big_negative),
    E(exercise="masked_attention", kind="wrong", label="scale_by_d_v",
      mistake="Scales the scores by 1/sqrt(d_v) (`v.shape[-1]`) instead of 1/sqrt(d_k).",
      func=masked_scale_dv),
    E(exercise="masked_attention", kind="wrong", label="bool_mask_added",
      mistake="Adds the boolean mask to the scores as if it were an additive (0 / -inf) "
              "float mask, so allowed keys get +1 and masked keys keep a nonzero weight.",
      func=masked_additive_bool),
    E(exercise="masked_attention", kind="right", label="logsumexp_where", mistake=None,
      func=masked_logsumexp),
    E(exercise="masked_attention", kind="right", label="row_loop_allowed_keys", mistake=None,
      func=masked_row_loop),
]
