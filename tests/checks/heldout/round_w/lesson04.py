"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention.
Each function is one learner's answer; wrong ones carry one slip."""

import math

import numpy as np
import scipy.special

from entry import Entry


# ============================================================================ causal_mask
def causal_strict(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_offset_negated(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_ones(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_keys_on_rows(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :]
    return keys <= queries + (n_k - n_q)


def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_python_lists(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_not_future(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
    return ~future


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_three_dims(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :]


def padding_transposed(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[:, None] < lengths[None, :]
    return keep[:, None, None, :]


def padding_int_values(lengths, n):
    lengths = np.asarray(lengths)
    out = np.zeros((len(lengths), 1, 1, n), dtype=np.int64)
    for b, length in enumerate(lengths):
        out[b, 0, 0, :length] = 1
    return out


def padding_true_on_pad(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad[:, None, None, :]


def padding_width_from_max(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    positions = np.arange(width)
    return (positions < lengths[:, None])[:, None, None, :]


def padding_fill_loop(lengths, n):
    lengths = [int(v) for v in np.asarray(lengths)]
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, ..., :length] = True
    return mask


def padding_expand_dims(lengths, n):
    lens = np.expand_dims(np.asarray(lengths), axis=(1, 2, 3))  # (B, 1, 1, 1)
    return np.arange(n).reshape(1, 1, 1, n) < lens


# ============================================================================ masked_attention
def masked_after_softmax(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    z = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    return w @ v, w


def masked_sqrt_nk(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2)
    scores = scores / np.sqrt(scores.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(scores - m)
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total == 0, 1.0, total)
    return weights @ v, weights


def masked_any_without_keepdims(q, k, v, mask):
    with np.errstate(invalid="ignore"):
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        scores = np.where(mask, scores, -np.inf)
        scores = scores - scores.max(axis=-1, keepdims=True)
        e = np.exp(scores)
        weights = e / e.sum(axis=-1, keepdims=True)
    has_key = np.any(mask, axis=-1)
    weights = np.where(has_key, weights, 0.0)
    return weights @ v, weights


def masked_bool_index(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores[~mask] = -np.inf
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    ex = np.exp(scores - top)
    den = ex.sum(axis=-1, keepdims=True)
    weights = np.divide(ex, den, out=np.zeros_like(ex), where=den > 0)
    return weights @ v, weights


def masked_row_loops(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    full = np.broadcast_to(mask, lead + (n_q, n_k))
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    out = np.zeros(lead + (n_q, v.shape[-1]))
    wts = np.zeros(lead + (n_q, n_k))
    scale = 1.0 / math.sqrt(q.shape[-1])
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            allowed = np.flatnonzero(full[idx + (i,)])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx + (i,)] * scale
            e = np.exp(s - s.max())
            p = e / e.sum()
            wts[idx + (i,)][allowed] = p
            out[idx + (i,)] = p @ vb[idx][allowed]
    return out, wts


def masked_logsumexp(q, k, v, mask):
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
        p = np.where(np.isfinite(lse), np.exp(s - lse), 0.0)
    return np.einsum("...ij,...jd->...id", p, v), p


ENTRIES = [
    Entry(exercise="causal_mask", kind="wrong", label="strict_less_than",
          mistake="the comparison `j < i + n_k - n_q` keeps the diagonal out: `<` where `<=` belongs, so "
          "a query cannot attend its own position", func=causal_strict),
    Entry(exercise="causal_mask", kind="wrong", label="top_left_tril",
          mistake="uses `np.tril` without the offset `k=n_k - n_q`, aligning the mask top-left, so with "
          "n_q != n_k the queries see the wrong keys (wrong for a KV cache)", func=causal_top_left),
    Entry(exercise="causal_mask", kind="wrong", label="tril_offset_negated",
          mistake="the `np.tril` offset is `n_q - n_k`, the negative of `n_k - n_q`, so the diagonal "
          "moves the wrong way whenever n_q != n_k", func=causal_offset_negated),
    Entry(exercise="causal_mask", kind="wrong", label="float_ones_not_bool",
          mistake="builds the mask from `np.ones` without `dtype=bool`, so it returns 0.0/1.0 floats "
          "instead of the boolean mask the contract fixes", func=causal_float_ones),
    Entry(exercise="causal_mask", kind="wrong", label="keys_on_rows",
          mistake="puts the keys on the rows and the queries on the columns, returning the "
          "(n_k, n_q) transpose of the mask", func=causal_keys_on_rows),
    Entry(exercise="causal_mask", kind="wrong", label="triu_instead_of_tril",
          mistake="uses `np.triu` (upper triangle: the present and the future) instead of `np.tril`",
          func=causal_triu),
    Entry(exercise="causal_mask", kind="right", label="nested_list_comprehension", mistake=None, func=causal_python_lists),
    Entry(exercise="causal_mask", kind="right", label="negated_strict_future", mistake=None, func=causal_not_future),

    Entry(exercise="padding_mask", kind="wrong", label="less_equal_length",
          mistake="compares `j <= lengths[b]`: `<=` where `<` belongs, so one padding position past "
          "each sequence is allowed", func=padding_le),
    Entry(exercise="padding_mask", kind="wrong", label="one_axis_short",
          mistake="inserts only one new axis, returning (B, 1, n) instead of (B, 1, 1, n)",
          func=padding_three_dims),
    Entry(exercise="padding_mask", kind="wrong", label="positions_on_rows",
          mistake="puts the positions on axis 0 and the batch on axis 1 (`arange(n)[:, None] < "
          "lengths[None, :]`), so the result is (n, 1, 1, B), transposed", func=padding_transposed),
    Entry(exercise="padding_mask", kind="wrong", label="int_zero_one",
          mistake="fills an int64 array with 0/1 instead of returning booleans", func=padding_int_values),
    Entry(exercise="padding_mask", kind="wrong", label="true_marks_padding",
          mistake="marks the padding positions True (`j >= lengths[b]`), the 'True = masked' convention, "
          "opposite to the course's True = may attend", func=padding_true_on_pad),
    Entry(exercise="padding_mask", kind="wrong", label="width_from_longest",
          mistake="takes the mask width from `lengths.max()` instead of `n`, so the mask is too narrow "
          "when no sequence fills all n positions", func=padding_width_from_max),
    Entry(exercise="padding_mask", kind="right", label="bool_fill_loop", mistake=None, func=padding_fill_loop),
    Entry(exercise="padding_mask", kind="right", label="expand_dims_compare", mistake=None, func=padding_expand_dims),

    Entry(exercise="masked_attention", kind="wrong", label="mask_after_softmax",
          mistake="multiplies the weights by the mask after the softmax instead of removing the keys "
          "before it, so the remaining weights no longer sum to 1", func=masked_after_softmax),
    Entry(exercise="masked_attention", kind="wrong", label="minus_1e9_fill",
          mistake="fills masked scores with -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform distribution over all keys instead of zeros", func=masked_big_negative),
    Entry(exercise="masked_attention", kind="wrong", label="mask_inverted",
          mistake="`np.where(mask, -inf, scores)` removes the keys the mask allows (True = may attend "
          "read as True = masked)", func=masked_inverted),
    Entry(exercise="masked_attention", kind="wrong", label="scale_by_num_keys",
          mistake="scales the scores by 1/sqrt(scores.shape[-1]), the number of keys N_k, instead of "
          "1/sqrt(d_k)", func=masked_sqrt_nk),
    Entry(exercise="masked_attention", kind="wrong", label="any_without_keepdims",
          mistake="the empty-row guard `np.any(mask, axis=-1)` drops the key axis, so it broadcasts "
          "along the keys instead of the queries (NaN rows survive, or shapes fail to "
          "broadcast)", func=masked_any_without_keepdims),
    Entry(exercise="masked_attention", kind="wrong", label="boolean_index_assignment",
          mistake="`scores[~mask] = -inf` needs a mask of the scores' full shape; a broadcastable mask "
          "(e.g. a (B, 1, 1, N) padding mask) raises IndexError", func=masked_bool_index),
    Entry(exercise="masked_attention", kind="right", label="row_loops_allowed_keys", mistake=None, func=masked_row_loops),
    Entry(exercise="masked_attention", kind="right", label="logsumexp_guarded", mistake=None, func=masked_logsumexp),
]
