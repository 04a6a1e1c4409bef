"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
def causal_strict_less(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return j < i


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_offset_sign_reversed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k)), n_k - n_q)


def causal_axes_swapped(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :] + n_k - n_q
    return keys <= queries


def causal_np_tri_positional(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tri(n_q, n_k - n_q, dtype=bool)


def causal_right_lists(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_right_not_triu(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    return ~np.triu(np.ones((n_q, cols), dtype=bool), k=cols - n_q + 1)


# ============================================================================ padding_mask
def padding_less_equal(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_missing_axes(lengths, n):
    return np.arange(n) < np.asarray(lengths)[:, None]


def padding_transposed_then_reshaped(lengths, n):
    lengths = np.asarray(lengths)
    m = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return m.reshape(len(lengths), 1, 1, n)


def padding_float_mask(lengths, n):
    lens = np.asarray(lengths)
    mask = (np.arange(n)[None, :] < lens[:, None]).astype(np.float32)
    return mask.reshape(lens.shape[0], 1, 1, n)


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    positions = np.arange(width)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]


def padding_true_marks_padding(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad[:, np.newaxis, np.newaxis, :]


def padding_right_fill_loop(lengths, n):
    lengths = [int(L) for L in np.asarray(lengths)]
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, L in enumerate(lengths):
        out[b, 0, 0, :L] = True
    return out


def padding_right_greater_outer(lengths, n):
    keep = np.greater.outer(np.asarray(lengths), np.arange(n))  # lengths[b] > j
    return np.expand_dims(keep, axis=(1, 2))


# ============================================================================ masked_attention
def masked_no_empty_row_guard(q, k, v, mask):
    d = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_convention_inverted(q, k, v, mask):
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_finite_fill(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, v), p


def masked_multiply_scores(q, k, v, mask):
    dk = q.shape[-1]
    scores = (q @ np.swapaxes(k, -2, -1)) / np.sqrt(dk)
    scores = scores * mask
    scores = scores - scores.max(axis=-1, keepdims=True)
    ex = np.exp(scores)
    weights = ex / ex.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_after_softmax(q, k, v, mask):
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def masked_out_before_cleanup(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        weights = e / e.sum(axis=-1, keepdims=True)
    out = weights @ v
    weights = np.nan_to_num(weights, nan=0.0)
    return out, weights


def masked_right_row_loop(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    mb = np.broadcast_to(np.asarray(mask, dtype=bool), lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keys = np.flatnonzero(mb[idx][i])
            if keys.size == 0:
                continue
            s = kb[idx][keys] @ qb[idx][i] / np.sqrt(q.shape[-1])
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx + (i, keys)] = p
            out[idx + (i,)] = p @ vb[idx][keys]
    return out, weights


def masked_right_additive_bias(q, k, v, mask):
    bias = np.where(mask, 0.0, -np.inf)
    logits = np.einsum("...id,...jd->...ij", q.astype(np.float64), k.astype(np.float64))
    logits = logits * (1.0 / np.sqrt(q.shape[-1])) + bias
    allowed = np.isfinite(logits)
    top = np.max(np.where(allowed, logits, np.finfo(np.float64).min), axis=-1, keepdims=True)
    ex = np.where(allowed, np.exp(np.where(allowed, logits, 0.0) - top), 0.0)
    norm = ex.sum(axis=-1, keepdims=True)
    w = ex / np.maximum(norm, np.finfo(np.float64).tiny)
    return w @ v.astype(np.float64), w


ENTRIES = [
    Entry("causal_mask", "wrong", "strict_less_excludes_diagonal",
          "compares with `<` where `<=` belongs, so each query may not attend its own position "
          "(and the first query of a square mask sees nothing)", causal_strict_less),
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril with no offset, aligning the mask top-left, so with n_k > n_q the "
          "queries do not see the cached prefix (and with n_q > n_k too many keys are allowed)",
          causal_top_left),
    Entry("causal_mask", "wrong", "offset_sign_reversed",
          "passes the diagonal offset as n_q - n_k instead of n_k - n_q, shifting the mask the "
          "wrong way whenever n_q != n_k", causal_offset_sign_reversed),
    Entry("causal_mask", "wrong", "float_not_bool",
          "returns np.tril of a float array of ones, 1.0/0.0 values instead of a boolean mask",
          causal_float_mask),
    Entry("causal_mask", "wrong", "key_and_query_axes_swapped",
          "puts the keys on the rows and the queries on the columns, so it returns an "
          "(n_k, n_q) upper-triangular array, the transpose of the mask", causal_axes_swapped),
    Entry("causal_mask", "wrong", "np_tri_second_arg_is_columns",
          "calls np.tri(n_q, n_k - n_q) thinking the second argument is the diagonal offset, "
          "but it is the number of columns M, so the shape is (n_q, n_k - n_q) (or it raises)",
          causal_np_tri_positional),
    Entry("causal_mask", "right", "nested_list_comprehension", None, causal_right_lists),
    Entry("causal_mask", "right", "not_triu_above_offset", None, causal_right_not_triu),

    Entry("padding_mask", "wrong", "less_equal_off_by_one",
          "compares with `<=`, so key position j == lengths[b] (the first padding slot) is "
          "allowed too", padding_less_equal),
    Entry("padding_mask", "wrong", "missing_broadcast_axes",
          "returns the (B, n) mask without inserting the two length-1 axes, so the result is "
          "(B, n) instead of (B, 1, 1, n)", padding_missing_axes),
    Entry("padding_mask", "wrong", "transposed_comparison_reshaped",
          "builds the comparison as (n, B) and then reshapes it to (B, 1, 1, n), which scrambles "
          "positions and sequences instead of transposing", padding_transposed_then_reshaped),
    Entry("padding_mask", "wrong", "float_mask",
          "casts the mask to float32 (1.0/0.0) although the convention fixes a boolean mask",
          padding_float_mask),
    Entry("padding_mask", "wrong", "width_from_longest_length",
          "takes the mask width from lengths.max() instead of n, so when no sequence fills all "
          "n positions the mask is too narrow", padding_width_from_lengths),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "marks the padding positions (j >= lengths[b]) as True, the opposite of the course's "
          "True = may attend convention", padding_true_marks_padding),
    Entry("padding_mask", "right", "fill_prefix_loop", None, padding_right_fill_loop),
    Entry("padding_mask", "right", "greater_outer_expand_dims", None,
          padding_right_greater_outer),

    Entry("masked_attention", "wrong", "fully_masked_rows_nan",
          "fills masked scores with -inf but has no guard for rows with no allowed key, so "
          "those rows become -inf - (-inf) = NaN instead of zeros", masked_no_empty_row_guard),
    Entry("masked_attention", "wrong", "mask_convention_inverted",
          "fills -inf where the mask is True, treating True as 'masked out' although the course "
          "uses True = may attend", masked_convention_inverted),
    Entry("masked_attention", "wrong", "finite_fill_value",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over all keys instead of zeros", masked_finite_fill),
    Entry("masked_attention", "wrong", "multiplies_scores_by_mask",
          "multiplies the scores by the mask, which sets masked scores to 0 (still a positive "
          "weight after softmax) instead of removing those keys", masked_multiply_scores),
    Entry("masked_attention", "wrong", "masks_weights_after_softmax",
          "zeroes the masked weights after the softmax without renormalising, so the allowed "
          "weights of a row no longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "out_computed_before_nan_cleanup",
          "replaces the NaN weights of fully masked rows by zeros only after computing "
          "out = weights @ v, so those output rows stay NaN", masked_out_before_cleanup),
    Entry("masked_attention", "right", "per_row_allowed_keys_loop", None, masked_right_row_loop),
    Entry("masked_attention", "right", "additive_bias_einsum", None, masked_right_additive_bias),
]
