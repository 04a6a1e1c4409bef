"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

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


def causal_float_tril(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_axes_swapped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :] + n_k - n_q
    return keys <= queries


def causal_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        for j in range(n_k):
            if j - i <= shift:
                mask[i, j] = True
    return mask


def causal_np_tri(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    return np.tri(n_q, cols, k=cols - n_q, dtype=bool)


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_no_new_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths
    return keep.reshape(len(lengths), 1, 1, n)


def padding_wrong_axes(lengths, n):
    lens = np.asarray(lengths)
    m = np.arange(n)[None, :] < lens[:, None]  # (B, n)
    return m[:, None, :, None]


def padding_inverted(lengths, n):
    lengths = np.asarray(lengths).reshape(-1, 1)
    pad = np.arange(n).reshape(1, -1) >= lengths  # True on the padded positions
    return pad.reshape(-1, 1, 1, n)


def padding_float_zeros(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b in range(B):
        mask[b, 0, 0, :lengths[b]] = 1
    return mask


def padding_negative_slice(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n), dtype=bool)
    for b, L in enumerate(lengths):
        mask[b, 0, 0, -L:] = True
    return mask


def padding_comprehension(lengths, n):
    rows = [[j < int(L) for j in range(n)] for L in np.asarray(lengths).tolist()]
    return np.array(rows, dtype=bool).reshape(len(rows), 1, 1, n)


def padding_less_outer(lengths, n):
    lengths = np.asarray(lengths)
    return np.less.outer(np.arange(n), lengths).T.reshape(lengths.shape[0], 1, 1, n)


# ============================================================================ masked_attention
def masked_inverted(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    s = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, s, out=np.zeros_like(e), where=s > 0)
    return w @ v, w


def masked_nan_rows(q, k, v, mask):
    d = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / math.sqrt(d)
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_large_negative(q, k, v, mask):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v, p


def masked_after_softmax(q, k, v, mask):
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    p = p * mask  # remove the keys that are not allowed
    return np.einsum("...qk,...kv->...qv", p, v), p


def masked_multiply_scores(q, k, v, mask):
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * scale * mask
    row_max = scores.max(axis=-1, keepdims=True)
    ex = np.exp(scores - row_max)
    w = ex / ex.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_scale_dv(q, k, v, mask):
    d = v.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    scores = np.where(mask, scores, -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(scores - m)
    z = e.sum(axis=-1, keepdims=True)
    w = np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)
    return w @ v, w


def masked_row_loops(q, k, v, mask):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2] if np.ndim(mask) > 2 else ())
    qb = np.broadcast_to(q, lead + (n_q, d_k)).reshape(-1, n_q, d_k)
    kb = np.broadcast_to(k, lead + (n_k, d_k)).reshape(-1, n_k, d_k)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, d_v))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            allowed = np.flatnonzero(mb[b, i])
            if allowed.size == 0:
                continue
            s = kb[b, allowed].astype(np.float64) @ qb[b, i].astype(np.float64) / math.sqrt(d_k)
            e = np.exp(s - s.max())
            wts[b, i, allowed] = e / e.sum()
            out[b, i] = wts[b, i] @ vb[b]
    return (out.reshape(lead + (n_q, d_v)).astype(q.dtype),
            wts.reshape(lead + (n_q, n_k)).astype(q.dtype))


def masked_logsumexp(q, k, v, mask):
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.logaddexp.reduce(s, axis=-1, keepdims=True)
        w = np.exp(s - lse)
    w = np.nan_to_num(w, nan=0.0)
    return np.einsum("...ij,...jd->...id", w, v), w


ENTRIES = [
    # causal_mask
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril without the offset n_k - n_q, so the mask is aligned top-left: with "
          "n_q < n_k the queries (the last positions) cannot see the earlier keys",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict_less_than",
          "compares with `<` where `<=` belongs, so each query cannot attend its own position",
          causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_reversed",
          "passes the diagonal offset as n_q - n_k instead of n_k - n_q, so when the sizes "
          "differ the band moves the wrong way",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_mask",
          "np.tril(np.ones(...)) gives a float array of 0.0/1.0, not the boolean mask the "
          "contract asks for",
          causal_float_tril),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "uses np.triu instead of np.tril, so each query sees the future keys instead of the "
          "past ones",
          causal_triu),
    Entry("causal_mask", "wrong", "axes_swapped",
          "puts the keys on the rows and the queries on the columns, so the mask is (n_k, n_q), "
          "the transpose of the one asked for",
          causal_axes_swapped),
    Entry("causal_mask", "right", "double_loop", None, causal_loops),
    Entry("causal_mask", "right", "np_tri", None, causal_np_tri),
    # padding_mask
    Entry("padding_mask", "wrong", "less_or_equal",
          "compares j <= lengths[b] instead of j < lengths[b], so one padded position too many "
          "is allowed",
          padding_le),
    Entry("padding_mask", "wrong", "lengths_not_a_column",
          "compares arange(n)[None, :] with lengths without making lengths a column "
          "(lengths[:, None]), so the shapes do not line up: an error, or a wrong mask when B "
          "happens to broadcast",
          padding_no_new_axis),
    Entry("padding_mask", "wrong", "singleton_axes_misplaced",
          "inserts the two singleton axes in the wrong places, returning (B, 1, n, 1) instead "
          "of (B, 1, 1, n)",
          padding_wrong_axes),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "marks the padded positions with True (j >= lengths[b]); in the course's convention "
          "True means 'may attend'",
          padding_inverted),
    Entry("padding_mask", "wrong", "float_zeros",
          "builds the mask in np.zeros((B, 1, 1, n)), a float array of 0.0/1.0, not a boolean "
          "mask",
          padding_float_zeros),
    Entry("padding_mask", "wrong", "negative_slice",
          "sets mask[..., -L:] = True, the last L positions (left padding) instead of the "
          "first L, and for L = 0 the slice -0: selects the whole row",
          padding_negative_slice),
    Entry("padding_mask", "right", "list_comprehension", None, padding_comprehension),
    Entry("padding_mask", "right", "less_outer", None, padding_less_outer),
    # masked_attention
    Entry("masked_attention", "wrong", "mask_inverted",
          "fills -inf where the mask is True, treating True as 'masked out' although True "
          "means 'may attend'",
          masked_inverted),
    Entry("masked_attention", "wrong", "nan_on_fully_masked_rows",
          "a row with no allowed key has max -inf, so `scores - max` is NaN and the row comes "
          "out NaN instead of zeros",
          masked_nan_rows),
    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights (and an average of the values) instead of zeros",
          masked_large_negative),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "multiplies the weights by the mask after the softmax without renormalising, so the "
          "allowed weights of a masked row no longer sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "multiplies the scores by the mask before the softmax, so the masked scores become 0 "
          "instead of -inf and the masked keys still get weight",
          masked_multiply_scores),
    Entry("masked_attention", "wrong", "scale_by_d_v",
          "divides the scores by sqrt(v.shape[-1]) (d_v) instead of sqrt(d_k)",
          masked_scale_dv),
    Entry("masked_attention", "right", "row_loops_float64", None, masked_row_loops),
    Entry("masked_attention", "right", "logaddexp_nan_to_num", None, masked_logsumexp),
]
