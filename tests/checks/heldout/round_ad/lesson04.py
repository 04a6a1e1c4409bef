"""Held-out catalogue, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np
from scipy.special import softmax as sp_softmax

from entry import Entry


# ============================================================================ causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_tri(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tri(n_q, n_k, k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    n_k = n_k or n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_abs_offset(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = abs(n_k - n_q)
    q_pos = np.arange(n_q).reshape(-1, 1) + offset
    k_pos = np.arange(n_k).reshape(1, -1)
    return k_pos <= q_pos


def causal_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    rows = []
    for i in range(n_q):
        last = i + n_k - n_q
        rows.append([j <= last for j in range(n_k)])
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_not_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return ~np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_query_slot(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_true_is_pad(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad.reshape(len(lengths), 1, 1, n)


def padding_arange_from_one(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(1, n + 1)
    m = positions[None, :] < lengths[:, None]
    return m[:, np.newaxis, np.newaxis, :]


def padding_reshape_not_transpose(lengths, n):
    lengths = np.asarray(lengths)
    table = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return table.reshape(len(lengths), 1, 1, n)


def padding_loop(lengths, n):
    lengths = np.asarray(lengths)
    out = np.zeros((lengths.shape[0], 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths.tolist()):
        out[b, 0, 0, :length] = True
    return out


def padding_expand_dims(lengths, n):
    lens = np.expand_dims(np.asarray(lengths), axis=(1, 2, 3))  # (B, 1, 1, 1)
    return np.arange(n) < lens


# ============================================================================ masked_attention
def masked_nan_rows(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    d_k = q.shape[-1]
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(d_k)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def masked_inverted(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_multiply_scores(q, k, v, mask):
    scale = 1 / np.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -2, -1)) * scale
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_out_from_unmasked(q, k, v, mask):
    raw = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])

    def soft(s):
        top = np.max(s, axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        e = np.exp(s - top)
        tot = e.sum(axis=-1, keepdims=True)
        return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)

    weights = soft(np.where(mask, raw, -np.inf))
    out = soft(raw) @ v
    return out, weights


def masked_exp_where(q, k, v, mask):
    q, k, v = (np.asarray(a) for a in (q, k, v))
    s = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    s, m = np.broadcast_arrays(s, np.asarray(mask, dtype=bool))
    row_max = np.max(np.where(m, s, -np.inf), axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(m, np.exp(np.minimum(s - row_max, 0.0)), 0.0)
    tot = e.sum(axis=-1, keepdims=True)
    w = e / np.where(tot > 0, tot, 1.0)
    return np.einsum("...ij,...jd->...id", w, v), w


def masked_scipy_nan_to_num(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    scores = (q / math.sqrt(q.shape[-1])) @ np.swapaxes(k, -1, -2)
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.nan_to_num(sp_softmax(scores, axis=-1), nan=0.0)
    return weights @ v, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without an offset, so the mask is aligned top-left: when n_q != n_k query "
          "i may only see keys j <= i instead of j <= i + n_k - n_q",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "compares with `<` where `<=` belongs, so every query loses the key at its own position",
          causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes np.tril the offset k = n_q - n_k instead of n_k - n_q (sign flipped), so with a "
          "cache the queries see too few keys (and too many when n_q > n_k)",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_from_np_tri",
          "returns np.tri's float array of 0.0/1.0 instead of a boolean mask",
          causal_float_tri),
    Entry("causal_mask", "wrong", "triu_for_tril",
          "uses np.triu where np.tril belongs, so each query may attend the future keys "
          "j >= i + n_k - n_q instead of the past ones",
          causal_triu),
    Entry("causal_mask", "wrong", "abs_offset",
          "takes the offset as abs(n_k - n_q), assuming the keys are never fewer than the "
          "queries, so for n_q > n_k the mask is shifted the wrong way",
          causal_abs_offset),
    Entry("causal_mask", "right", "python_lists", None, causal_lists),
    Entry("causal_mask", "right", "negated_triu", None, causal_not_triu),

    Entry("padding_mask", "wrong", "less_equal",
          "uses `<=` where `<` belongs, so the first padding position j = lengths[b] is kept",
          padding_le),
    Entry("padding_mask", "wrong", "no_broadcast_axes",
          "returns the (B, n) table without the two length-1 axes, so the shape is not "
          "(B, 1, 1, n) and it does not broadcast against (B, H, N_q, N_k)",
          padding_2d),
    Entry("padding_mask", "wrong", "key_axis_in_query_slot",
          "puts the key axis in the query slot, shape (B, 1, n, 1) instead of (B, 1, 1, n)",
          padding_query_slot),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "returns True on the padding positions (the 'key_padding_mask' convention) although "
          "the course's masks say True = may attend",
          padding_true_is_pad),
    Entry("padding_mask", "wrong", "positions_from_one",
          "counts positions from 1 (np.arange(1, n + 1)), so each sequence loses its last real "
          "key: True only where j < lengths[b] - 1",
          padding_arange_from_one),
    Entry("padding_mask", "wrong", "reshape_instead_of_transpose",
          "builds the table as (n, B) and reshapes it to (B, 1, 1, n) instead of transposing, "
          "which scrambles positions and sequences",
          padding_reshape_not_transpose),
    Entry("padding_mask", "right", "loop_fill", None, padding_loop),
    Entry("padding_mask", "right", "expand_dims_compare", None, padding_expand_dims),

    Entry("masked_attention", "wrong", "fully_masked_rows_nan",
          "subtracts the row maximum without guarding rows that are entirely -inf, so a query "
          "with no allowed key gives NaN instead of a row of zeros",
          masked_nan_rows),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "multiplies the softmax weights by the mask after normalising, without renormalising, "
          "so the remaining weights no longer sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "mask_inverted",
          "puts -inf where the mask is True, i.e. reads True as 'masked out', although True "
          "means may attend",
          masked_inverted),
    Entry("masked_attention", "wrong", "finite_big_negative",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights (the mean of v) instead of zeros",
          masked_big_negative),
    Entry("masked_attention", "wrong", "multiply_scores_by_mask",
          "multiplies the scores by the mask, which sets masked scores to 0 instead of -inf, "
          "so masked keys still get weight",
          masked_multiply_scores),
    Entry("masked_attention", "wrong", "out_from_unmasked_weights",
          "returns the masked weights but computes out from the softmax of the unmasked scores "
          "(wrong variable), so out ignores the mask",
          masked_out_from_unmasked),
    Entry("masked_attention", "right", "exp_where_allowed", None, masked_exp_where),
    Entry("masked_attention", "right", "scipy_softmax_nan_to_num", None, masked_scipy_nan_to_num),
]
