"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
from scipy import special

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
    return j < i + (n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_tri(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tri(n_q, n_k, k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    allowed = np.ones((n_q, n_k), dtype=bool)
    return np.triu(allowed, k=n_k - n_q)


def causal_orientation_swapped(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :] + shift
    return keys <= queries


def causal_list_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = n_k - n_q
    rows = [[j <= i + offset for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_tri_bool(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    return np.tri(n_q, cols, k=cols - n_q, dtype=bool)


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_no_singletons(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_true_is_pad(lengths, n):
    lengths = np.asarray(lengths)
    is_pad = np.arange(n) >= lengths[:, None]
    return is_pad[:, None, None, :]


def padding_negative_slice(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.ones((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        n_pad = n - int(length)
        mask[b, 0, 0, -n_pad:] = False
    return mask


def padding_float(lengths, n):
    B = len(lengths)
    out = np.zeros((B, 1, 1, n))
    for b in range(B):
        out[b, 0, 0, :lengths[b]] = 1.0
    return out


def padding_arange_batch(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(lengths.shape[0])
    keep = positions[None, :] < lengths[:, None]
    return keep.reshape(lengths.shape[0], 1, 1, -1)


def padding_python_lists(lengths, n):
    rows = []
    for length in list(lengths):
        rows.append([[[pos < int(length) for pos in range(n)]]])
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


def padding_greater_outer(lengths, n):
    lens = np.asarray(lengths, dtype=np.int64)
    return np.greater.outer(lens, np.arange(n))[:, np.newaxis, np.newaxis, :]


# ============================================================================ masked_attention
def masked_big_negative(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return weights @ v, weights


def masked_multiply(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask
    return p @ v, p


def masked_no_empty_row_guard(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        s = s - np.max(s, axis=-1, keepdims=True)
        e = np.exp(s)
        w = e / np.sum(e, axis=-1, keepdims=True)
    return w @ v, w


def masked_reuses_raw_scores(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    masked_scores = np.where(mask, scores, -np.inf)
    row_max = np.max(masked_scores, axis=-1, keepdims=True)
    row_max = np.where(np.isinf(row_max), 0.0, row_max)
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights


def masked_exp_where(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    full_mask = np.broadcast_to(mask, scores.shape)
    filled = np.where(full_mask, scores, -np.inf)
    row_max = np.max(filled, axis=-1, keepdims=True)
    row_max[~np.isfinite(row_max)] = 0.0
    e = np.exp(scores - row_max, out=np.zeros_like(scores), where=full_mask)
    total = e.sum(axis=-1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    weights = e / safe
    return weights @ v, weights


def masked_scipy_nan_to_num(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = special.softmax(scores, axis=-1)
    weights = np.nan_to_num(weights, nan=0.0)
    return np.einsum("...qk,...kd->...qd", weights, v), weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "np.tril without the offset k=n_k-n_q aligns the mask top-left, so when n_q != n_k "
          "query i sees keys j <= i instead of j <= i + n_k - n_q.", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less_than",
          "The comparison is < where <= belongs, so each query is kept from its own position "
          "(the diagonal).", causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_reversed",
          "The np.tril offset is n_q - n_k instead of n_k - n_q, so with more keys than "
          "queries the mask hides keys it should allow (and the other way round).",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_mask_from_tri",
          "np.tri returns a float array of 0.0 and 1.0 by default; the contract wants a "
          "boolean mask (dtype=bool).", causal_float_tri),
    Entry("causal_mask", "wrong", "triu_for_tril",
          "np.triu keeps the upper triangle, so queries may attend the future and not the "
          "past: np.tril was needed.", causal_triu),
    Entry("causal_mask", "wrong", "keys_on_rows",
          "The aranges are broadcast the wrong way round (keys on the rows, queries on the "
          "columns), so the mask comes out transposed, (n_k, n_q).",
          causal_orientation_swapped),
    Entry("causal_mask", "right", "nested_list_comprehension", None, causal_list_loops),
    Entry("causal_mask", "right", "np_tri_bool", None, causal_tri_bool),
    Entry("padding_mask", "wrong", "less_or_equal",
          "It uses j <= lengths[b] instead of j < lengths[b], letting every sequence attend "
          "one padding position too many.", padding_le),
    Entry("padding_mask", "wrong", "missing_singleton_axes",
          "It returns the (B, n) comparison without inserting the two length-1 axes, so the "
          "mask is not (B, 1, 1, n) and does not broadcast over heads and queries.",
          padding_no_singletons),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "It marks the padding positions with True (j >= length), the opposite of the "
          "course's convention True = may attend.", padding_true_is_pad),
    Entry("padding_mask", "wrong", "negative_zero_slice",
          "The padding is blanked with mask[..., -n_pad:], and when n_pad is 0 the slice -0: is "
          "the whole row, so full-length sequences are entirely masked.",
          padding_negative_slice),
    Entry("padding_mask", "wrong", "float_ones_and_zeros",
          "The mask is built with np.zeros (float) and filled with 1.0, so it is a float "
          "array, not the boolean mask the contract asks for.", padding_float),
    Entry("padding_mask", "wrong", "arange_over_batch",
          "The positions come from np.arange(len(lengths)) (the batch size) instead of "
          "np.arange(n), so the last axis has B entries instead of n.", padding_arange_batch),
    Entry("padding_mask", "right", "python_lists", None, padding_python_lists),
    Entry("padding_mask", "right", "greater_outer", None, padding_greater_outer),
    Entry("masked_attention", "wrong", "large_negative_fill",
          "Masked scores are set to -1e9 instead of -inf, so a row with no allowed key gets "
          "uniform weights (the mean of v) instead of zeros.", masked_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "np.where(mask, -inf, scores) removes the keys where the mask is True, the opposite "
          "of True = may attend.", masked_inverted),
    Entry("masked_attention", "wrong", "mask_multiplied_into_scores",
          "Multiplying the scores by the mask sets masked scores to 0, which still gets "
          "exp(0) weight, instead of -inf.", masked_multiply),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "The mask zeroes weights after the softmax, so the remaining weights of a row no "
          "longer sum to 1 (no renormalisation).", masked_after_softmax),
    Entry("masked_attention", "wrong", "no_guard_for_empty_rows",
          "A fully masked row has max -inf, and -inf - (-inf) is NaN, so such rows give NaN "
          "instead of zeros: the row maximum is not replaced by 0 where it is -inf.",
          masked_no_empty_row_guard),
    Entry("masked_attention", "wrong", "exp_of_unmasked_scores",
          "The masked scores are computed but np.exp is applied to the raw `scores` variable, "
          "so the mask is ignored (and rows with no allowed key are not zeros).",
          masked_reuses_raw_scores),
    Entry("masked_attention", "right", "exp_with_where", None, masked_exp_where),
    Entry("masked_attention", "right", "scipy_softmax_nan_to_num", None, masked_scipy_nan_to_num),
]
