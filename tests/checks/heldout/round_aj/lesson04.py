"""Held-out learners' answers, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np

from entry import Entry


# =============================================================================== causal_mask
def causal_strict(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_top_left(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_float(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = n_k - n_q
    return np.arange(n_k)[:, None] <= np.arange(n_q)[None, :] + offset


def causal_true_means_blocked(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_default_wrong_variable(n_q, n_k=None):
    n_k = n_q if n_k is None else n_q
    rows = np.arange(n_q).reshape(-1, 1)
    cols = np.arange(n_k).reshape(1, -1)
    return cols <= rows + (n_k - n_q)


def causal_not_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return ~np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_comprehension(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    return np.array([[j - shift <= i for j in range(n_k)] for i in range(n_q)], dtype=bool)


# =============================================================================== padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] <= lengths[:, None])[:, None, None, :]


def padding_wrong_axes(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, :, None, None]


def padding_true_is_pad(lengths, n):
    lengths = np.asarray(lengths)
    pad = np.arange(n)[None, :] >= lengths[:, None]
    return pad.reshape(len(lengths), 1, 1, n)


def padding_float(lengths, n):
    B = len(lengths)
    m = np.zeros((B, 1, 1, n))
    for b, L in enumerate(lengths):
        m[b, 0, 0, :L] = 1
    return m


def padding_transposed_reshape(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[:, None] < lengths[None, :]  # (n, B)
    return keep.reshape(len(lengths), 1, 1, n)


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    mask = np.arange(width) < lengths[:, None]
    return mask[:, np.newaxis, np.newaxis, :]


def padding_loop(lengths, n):
    lens = [int(L) for L in np.asarray(lengths)]
    out = np.zeros((len(lens), 1, 1, n), dtype=bool)
    for b, L in enumerate(lens):
        out[b, 0, 0, :L] = True
    return out


def padding_greater_outer(lengths, n):
    return np.greater.outer(np.asarray(lengths), np.arange(n))[:, None, None, :]


# =============================================================================== masked_attention
def masked_big_negative(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def masked_inverted(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_no_empty_row_guard(q, k, v, mask):
    d = q.shape[-1]
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(d)
    scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_scale_dv(q, k, v, mask):
    scale = 1.0 / np.sqrt(v.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    scores = np.where(mask, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z > 0, z, 1.0)
    return w @ v, w


def masked_max_no_keepdims(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    m = np.max(scores, axis=-1)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(scores - m)
    z = np.sum(e, axis=-1, keepdims=True)
    w = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    return w @ v, w


def masked_multiply_mask(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    allowed = np.broadcast_to(mask, q.shape[:-2] + (q.shape[-2], k.shape[-2]))
    s = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    s_allowed = np.where(allowed, s, -np.inf)
    top = np.max(s_allowed, axis=-1, keepdims=True)
    top = np.nan_to_num(top, neginf=0.0)
    e = np.exp(np.minimum(s - top, 0.0)) * allowed
    tot = e.sum(axis=-1, keepdims=True)
    w = np.where(tot > 0, e / np.maximum(tot, 1e-300), 0.0)
    return np.einsum("...qk,...kd->...qd", w, v), w


def masked_row_loop(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    mb = np.broadcast_to(mask, lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keys = np.flatnonzero(mb[idx][i])
            if keys.size == 0:
                continue
            s = kb[idx][keys] @ qb[idx][i] / math.sqrt(q.shape[-1])
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx + (i,)][keys] = p
            out[idx + (i,)] = p @ vb[idx][keys]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "strict_less",
          "compares with `<` where `<=` belongs, so every query is kept from its own position "
          "(the diagonal is masked)", causal_strict),
    Entry("causal_mask", "wrong", "top_left_alignment",
          "uses np.tril without the offset n_k - n_q, aligning the mask top-left, which is "
          "wrong whenever n_q != n_k (decoding with a cache)", causal_top_left),
    Entry("causal_mask", "wrong", "float_mask",
          "builds the mask with np.tril(np.ones(...)), which is float 0/1, not the boolean "
          "array the contract requires", causal_float),
    Entry("causal_mask", "wrong", "transposed_shape",
          "puts the key index on the rows and the query index on the columns, returning "
          "(n_k, n_q) (the transpose) instead of (n_q, n_k)", causal_transposed),
    Entry("causal_mask", "wrong", "true_means_blocked",
          "returns the future positions (np.triu above the allowed band) as True, i.e. "
          "True = masked, the opposite of the course's True = may attend",
          causal_true_means_blocked),
    Entry("causal_mask", "wrong", "default_reuses_n_q",
          "writes `n_k = n_q if n_k is None else n_q`, so a given n_k is ignored and the mask "
          "is always square", causal_default_wrong_variable),
    Entry("causal_mask", "right", "not_triu", None, causal_not_triu),
    Entry("causal_mask", "right", "list_comprehension", None, causal_comprehension),
    Entry("padding_mask", "wrong", "less_equal",
          "uses `<=` instead of `<`, so the first padding position j = lengths[b] is also "
          "allowed", padding_le),
    Entry("padding_mask", "wrong", "singleton_axes_at_end",
          "adds the two singleton axes after the key axis, returning (B, n, 1, 1) instead of "
          "(B, 1, 1, n)", padding_wrong_axes),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "marks the padding positions (j >= lengths[b]) as True instead of the real tokens",
          padding_true_is_pad),
    Entry("padding_mask", "wrong", "float_mask",
          "fills a np.zeros array with ones, so the mask is float 0/1 instead of boolean",
          padding_float),
    Entry("padding_mask", "wrong", "outer_comparison_transposed",
          "builds the comparison as (n, B) (positions on the rows) and then reshapes it to "
          "(B, 1, 1, n) instead of transposing, which scrambles the rows across sequences",
          padding_transposed_reshape),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "takes the key width from lengths.max() instead of the argument n, so the mask is "
          "too narrow when no sequence fills all n positions", padding_width_from_lengths),
    Entry("padding_mask", "right", "python_loop", None, padding_loop),
    Entry("padding_mask", "right", "greater_outer", None, padding_greater_outer),
    Entry("masked_attention", "wrong", "big_negative_fill",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights over all keys instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "zeroes the masked weights after the softmax without renormalising, so the allowed "
          "weights no longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "mask_inverted",
          "puts -inf where the mask is True (np.where(mask, -inf, scores)), i.e. reads "
          "True as 'blocked'", masked_inverted),
    Entry("masked_attention", "wrong", "no_empty_row_guard",
          "does not guard rows with no allowed key: their maximum is -inf, -inf - (-inf) is "
          "NaN, and the row comes out NaN instead of zeros", masked_no_empty_row_guard),
    Entry("masked_attention", "wrong", "scale_by_d_v",
          "scales the scores by 1/sqrt(d_v) (v.shape[-1]) instead of 1/sqrt(d_k)",
          masked_scale_dv),
    Entry("masked_attention", "wrong", "row_max_without_keepdims",
          "takes the row maximum without keepdims=True, so it broadcasts along the key axis "
          "(subtracting column-wise, or raising when N_q != N_k)", masked_max_no_keepdims),
    Entry("masked_attention", "right", "exp_times_mask", None, masked_multiply_mask),
    Entry("masked_attention", "right", "row_loop_allowed_keys", None, masked_row_loop),
]
