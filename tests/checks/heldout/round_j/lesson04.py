"""Lesson 04 (numpy): causal_mask, padding_mask, masked_attention; round j entries."""

import math

import numpy as np
from scipy.special import softmax as sp_softmax

from entry import Entry

# ------------------------------------------------------------------------------- causal_mask


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_broadcast_swapped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    query_pos = np.arange(n_q) + (n_k - n_q)
    key_pos = np.arange(n_k)
    return key_pos[:, None] <= query_pos[None, :]


def causal_list_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    rows = [[j <= i + n_k - n_q for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ------------------------------------------------------------------------------ padding_mask


def pad_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def pad_three_axes(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :]


def pad_true_on_padding(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] >= lengths[:, None])[:, None, None, :]


def pad_width_from_max_length(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(lengths.max())[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def pad_first_length_reused(lengths, n):
    rows = [np.arange(n) < lengths[0] for _ in lengths]
    return np.stack(rows)[:, None, None, :]


def pad_uint8(lengths, n):
    lengths = np.asarray(lengths)
    keep = (np.arange(n)[None, :] < lengths[:, None]).astype(np.uint8)
    return keep[:, None, None, :]


def pad_loop_fill(lengths, n):
    lengths = [int(v) for v in np.asarray(lengths)]
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, :length] = True
    return mask


def pad_greater_outer(lengths, n):
    lengths = np.asarray(lengths)
    return np.greater.outer(lengths, np.arange(n)).reshape(len(lengths), 1, 1, n)


# -------------------------------------------------------------------------- masked_attention


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def ma_mask_inverted(q, k, v, mask):
    s = np.where(mask, -np.inf, _scores(q, k))
    w = _safe_softmax(s)
    return w @ v, w


def ma_fill_minus_1e9(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    w = _safe_softmax(s)
    return w @ v, w


def ma_mask_after_softmax(q, k, v, mask):
    w = _safe_softmax(_scores(q, k)) * mask
    return w @ v, w


def ma_no_empty_row_guard(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def ma_multiplicative_mask(q, k, v, mask):
    s = _scores(q, k) * mask
    w = _safe_softmax(s)
    return w @ v, w


def ma_output_from_unmasked(q, k, v, mask):
    s = _scores(q, k)
    w_masked = _safe_softmax(np.where(mask, s, -np.inf))
    w_plain = _safe_softmax(s)
    return w_plain @ v, w_masked


def ma_row_loops(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    m = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.zeros(lead + (n_q, v.shape[-1]))
    w = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(m[idx + (i,)])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx][i] / math.sqrt(q.shape[-1])
            e = np.exp(s - s.max())
            w[idx + (i,)][allowed] = e / e.sum()
            out[idx + (i,)] = w[idx + (i,)] @ vb[idx]
    return out, w


def ma_log_mask(q, k, v, mask):
    with np.errstate(divide="ignore", invalid="ignore"):
        s = _scores(q, k) + np.log(np.asarray(mask, dtype=float))
        w = np.nan_to_num(sp_softmax(s, axis=-1), nan=0.0)
    return w @ v, w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "Uses np.tril with no offset, aligning the mask top-left, so when n_q != n_k the "
          "queries are not placed at the last n_q positions.", causal_top_left),
    Entry("causal_mask", "wrong", "diagonal_excluded",
          "Compares j < i + n_k - n_q, so each query may not attend its own position.",
          causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "Passes k = n_q - n_k to np.tril instead of n_k - n_q, shifting the diagonal the "
          "wrong way when n_q != n_k.", causal_offset_sign),
    Entry("causal_mask", "wrong", "float_mask",
          "Returns np.tril(np.ones(...)) as a float array of 0/1 instead of a bool mask.",
          causal_float_mask),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "Uses np.triu, keeping the keys at and after each query's position (the future) "
          "instead of those before it.", causal_triu),
    Entry("causal_mask", "wrong", "broadcast_axes_swapped",
          "Puts the key positions on the row axis and the query positions on the column "
          "axis, returning an (n_k, n_q) mask.", causal_broadcast_swapped),
    Entry("causal_mask", "right", "list_comprehension", None, causal_list_loops),
    Entry("causal_mask", "right", "np_tri", None, causal_np_tri),

    Entry("padding_mask", "wrong", "less_or_equal",
          "Uses j <= lengths[b], letting each sequence attend one padded position past its "
          "length.", pad_le),
    Entry("padding_mask", "wrong", "three_axes",
          "Adds only one singleton axis, returning (B, 1, n) instead of (B, 1, 1, n).",
          pad_three_axes),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "Marks padding positions True (the key_padding_mask convention of nn.MultiheadAttention) "
          "instead of True = may attend.", pad_true_on_padding),
    Entry("padding_mask", "wrong", "width_from_longest_length",
          "Builds the key axis with np.arange(lengths.max()) instead of n, so the mask is "
          "too narrow when no sequence fills all n positions.", pad_width_from_max_length),
    Entry("padding_mask", "wrong", "first_length_for_every_row",
          "Compares with lengths[0] in every row of the comprehension, so every sequence gets "
          "the first sequence's length.", pad_first_length_reused),
    Entry("padding_mask", "wrong", "uint8_mask",
          "Returns the mask as uint8 0/1 values instead of a bool array.", pad_uint8),
    Entry("padding_mask", "right", "loop_fill_prefix", None, pad_loop_fill),
    Entry("padding_mask", "right", "greater_outer", None, pad_greater_outer),

    Entry("masked_attention", "wrong", "mask_inverted",
          "Fills -inf where the mask is True, treating True as 'blocked' instead of "
          "'may attend'.", ma_mask_inverted),
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "Fills masked scores with -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform distribution instead of zeros.", ma_fill_minus_1e9),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "Multiplies the softmax weights by the mask afterwards without renormalising, so "
          "the remaining weights no longer sum to 1.", ma_mask_after_softmax),
    Entry("masked_attention", "wrong", "no_guard_for_empty_rows",
          "Subtracts the row maximum without guarding rows that are entirely -inf, so fully "
          "masked rows give NaN instead of zeros.", ma_no_empty_row_guard),
    Entry("masked_attention", "wrong", "mask_multiplied_into_scores",
          "Multiplies the scores by the mask, setting masked scores to 0 instead of -inf, so "
          "masked keys still get weight.", ma_multiplicative_mask),
    Entry("masked_attention", "wrong", "output_from_unmasked_weights",
          "Returns masked weights but computes the output with the unmasked softmax weights.",
          ma_output_from_unmasked),
    Entry("masked_attention", "right", "row_loops_allowed_keys", None, ma_row_loops),
    Entry("masked_attention", "right", "log_mask_scipy", None, ma_log_mask),
]
