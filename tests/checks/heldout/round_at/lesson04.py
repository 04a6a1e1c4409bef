"""Held-out catalogue, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask, wrong
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_q - n_k).astype(bool)


def causal_float(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    query_pos = np.arange(n_q) + (n_k - n_q)
    key_pos = np.arange(n_k)
    return key_pos[:, None] <= query_pos[None, :]


# ============================================================================ causal_mask, right
def causal_listcomp(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_np_tri(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    return np.tri(n_q, cols, k=cols - n_q, dtype=bool)


# ============================================================================ padding_mask, wrong
def pad_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def pad_flat(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, None]


def pad_query_axis(lengths, n):
    lens = np.asarray(lengths).reshape(-1, 1)
    keep = np.arange(n).reshape(1, -1) < lens
    return keep[:, None, :, None]


def pad_inverted(lengths, n):
    lengths = np.asarray(lengths)
    padded = np.arange(n)[None, :] >= lengths[:, None]
    return padded[:, None, None, :]


def pad_int(lengths, n):
    lengths = np.asarray(lengths)
    m = np.where(np.arange(n)[None, :] < lengths[:, None], 1, 0)
    return m.reshape(len(lengths), 1, 1, n)


def pad_max_len(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, np.newaxis, np.newaxis, :]


# ============================================================================ padding_mask, right
def pad_loop(lengths, n):
    lens = [int(v) for v in np.asarray(lengths)]
    out = np.zeros((len(lens), 1, 1, n), dtype=bool)
    for b, L in enumerate(lens):
        out[b, 0, 0, :L] = True
    return out


def pad_tri_rows(lengths, n):
    table = np.tri(n + 1, n, k=-1, dtype=bool)  # row L is True on j < L
    return table[np.asarray(lengths)][:, None, None, :]


# ============================================================================ masked_attention, wrong
def ma_nan_rows(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_big_negative(q, k, v, mask):
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def ma_inverted(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def ma_multiply_mask(q, k, v, mask):
    d = q.shape[-1]
    scores = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(d)
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def ma_scale_dv(q, k, v, mask):
    d = v.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z == 0, 1.0, z)
    return w @ v, w


# ============================================================================ masked_attention, right
def ma_logaddexp(q, k, v, mask):
    s = np.swapaxes(k, -1, -2)
    s = (q @ s) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    lse = np.logaddexp.reduce(s, axis=-1, keepdims=True)
    has_key = np.isfinite(lse)
    with np.errstate(invalid="ignore"):
        w = np.where(has_key, np.exp(s - np.where(has_key, lse, 0.0)), 0.0)
    return w @ v, w


def ma_row_loop(q, k, v, mask):
    n_q, n_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    m = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    w = np.zeros(lead + (n_q, n_k), dtype=np.float64)
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keys = np.flatnonzero(m[idx + (i,)])
            if keys.size == 0:
                continue
            sc = kb[idx][keys] @ qb[idx + (i,)] / math.sqrt(q.shape[-1])
            sc = np.exp(sc - sc.max())
            w[idx + (i,)][keys] = sc / sc.sum()
    out = np.einsum("...ij,...jd->...id", w, vb)
    return out, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, so the mask is aligned top-left and is "
          "wrong whenever n_q != n_k", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less_than",
          "compares j < i + n_k - n_q, so each query cannot see its own position: `<` where "
          "`<=` belongs", causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "gives np.tril the offset n_q - n_k instead of n_k - n_q", causal_offset_sign),
    Entry("causal_mask", "wrong", "float_not_bool",
          "returns np.tril(np.ones(...)) as a float array of 0s and 1s instead of a boolean mask",
          causal_float),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "uses np.triu, which keeps the keys at and after each query's position (the future) "
          "instead of the past", causal_triu),
    Entry("causal_mask", "wrong", "keys_on_rows",
          "puts the key positions on the rows and the query positions on the columns, giving "
          "an (n_k, n_q) mask, the transpose of the right one", causal_transposed),
    Entry("causal_mask", "right", "list_comprehension", None, causal_listcomp),
    Entry("causal_mask", "right", "np_tri", None, causal_np_tri),
    Entry("padding_mask", "wrong", "less_or_equal",
          "keeps j <= lengths[b], one key too many: `<=` where `<` belongs", pad_le),
    Entry("padding_mask", "wrong", "missing_broadcast_axes",
          "returns shape (B, n) without the two axes of length 1 that make it broadcast over "
          "heads and queries", pad_flat),
    Entry("padding_mask", "wrong", "axes_in_wrong_place",
          "puts the key axis third, shape (B, 1, n, 1), so it masks queries instead of keys",
          pad_query_axis),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "marks the padded positions True (j >= length) although True means 'may attend'",
          pad_inverted),
    Entry("padding_mask", "wrong", "int_mask",
          "builds the mask with np.where(..., 1, 0), an integer array instead of a boolean one",
          pad_int),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "sizes the key axis with lengths.max() instead of n, so the mask is too narrow when "
          "no sequence fills all n positions", pad_max_len),
    Entry("padding_mask", "right", "loop_fill", None, pad_loop),
    Entry("padding_mask", "right", "np_tri_row_lookup", None, pad_tri_rows),
    Entry("masked_attention", "wrong", "nan_on_empty_rows",
          "subtracts the row max without a guard, so a fully masked row computes -inf - -inf "
          "= NaN instead of zeros", ma_nan_rows),
    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform average of all keys instead of zeros", ma_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "sends the allowed positions (True) to -inf and keeps the forbidden ones, reading "
          "True as 'masked out'", ma_inverted),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "multiplies the scores by the mask, so masked keys get score 0 (still a positive "
          "weight) instead of -inf", ma_multiply_mask),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "zeroes the masked weights after the softmax without renormalising, so the allowed "
          "weights no longer sum to 1", ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "scale_by_d_v",
          "scales by sqrt of v's last dimension instead of sqrt(d_k): wrong when d_v != d_k",
          ma_scale_dv),
    Entry("masked_attention", "right", "logaddexp_guarded", None, ma_logaddexp),
    Entry("masked_attention", "right", "row_loop_over_allowed_keys", None, ma_row_loop),
]
