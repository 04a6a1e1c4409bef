"""Held-out catalogue, lesson 04 (numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np
import scipy.special

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
    n_k = n_k or n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_np_tri_float(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tri(n_q, n_k, k=n_k - n_q)


def causal_true_means_blocked(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    # the future must be hidden: mark it
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_queries_from_n_k(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    query_pos = np.arange(n_k)[:, None] + (n_k - n_q)
    key_pos = np.arange(n_k)[None, :]
    return key_pos <= query_pos


def causal_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    out = np.zeros((n_q, n_k), dtype=np.bool_)
    for i in range(n_q):
        last = i + n_k - n_q  # last visible key (may be < 0: no key)
        if last >= 0:
            out[i, :last + 1] = True
    return out


def causal_not_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
    return ~future


# ============================================================================ padding_mask


def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_2d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, np.newaxis]


def padding_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_left_aligned(lengths, n):
    lengths = np.asarray(lengths)
    pos = np.arange(n)[None, :]
    keep = pos >= (n - lengths)[:, None]
    return keep[:, None, None, :]


def padding_int_dtype(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.where(np.arange(n)[None, :] < lengths[:, None], 1, 0)
    return keep.reshape(len(lengths), 1, 1, n)


def padding_loop_all_rows(lengths, n):
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[:, 0, 0, :length] = True
    return mask


def padding_loop(lengths, n):
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(np.asarray(lengths).tolist()):
        for j in range(int(length)):
            out[b, 0, 0, j] = True
    return out


def padding_cumsum(lengths, n):
    lengths = np.asarray(lengths)
    # count how many positions remain before the end of each sequence
    remaining = lengths[:, None] - np.cumsum(np.ones((1, n), dtype=np.int64), axis=1) + 1
    return np.expand_dims(remaining > 0, (1, 2))


# ============================================================================ masked_attention


def _row_softmax(s):
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    return np.divide(e, z, out=np.zeros_like(e), where=z > 0)


def masked_big_negative(q, k, v, mask):
    d_k = q.shape[-1]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    scores = np.where(mask, scores, -1e9)
    w = _row_softmax(scores)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    w = _row_softmax(scores)
    return w @ v, w


def masked_multiply(q, k, v, mask):
    scores = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(q.shape[-1])
    scores = scores * mask
    w = _row_softmax(scores)
    return np.matmul(w, v), w


def masked_after_softmax(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _row_softmax(s) * mask
    return w @ v, w


def masked_zero_sum_nan(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)  # no -inf - -inf
    e = np.exp(s - top)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_scale_n_k(q, k, v, mask):
    d_k = k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    s = np.where(mask, s, -np.inf)
    w = _row_softmax(s)
    return w @ v, w


def masked_logsumexp(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.einsum("...qd,...kd->...qk", q, k) * (q.shape[-1] ** -0.5)
    s = np.where(mask, s, -np.inf)
    lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        w = np.nan_to_num(np.exp(s - lse), nan=0.0)
    return np.einsum("...qk,...kd->...qd", w, v), w


def masked_rows_loop(q, k, v, mask):
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                np.shape(mask)[:-2])
    qb = np.broadcast_to(q, batch + (n_q, d_k))
    kb = np.broadcast_to(k, batch + (n_k, d_k))
    vb = np.broadcast_to(v, batch + (n_k, d_v))
    mb = np.broadcast_to(mask, batch + (n_q, n_k))
    out = np.zeros(batch + (n_q, d_v))
    wts = np.zeros(batch + (n_q, n_k))
    for idx in np.ndindex(*batch):
        for i in range(n_q):
            allowed = np.flatnonzero(mb[idx][i])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx][i] / math.sqrt(d_k)
            e = np.exp(s - s.max())
            p = e / e.sum()
            wts[idx][i, allowed] = p
            out[idx][i] = p @ vb[idx][allowed]
    return out, wts


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left",
          "uses np.tril without an offset, aligning the mask top-left, so when n_q != n_k query i "
          "may attend keys j <= i instead of j <= i + n_k - n_q",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "compares keys with `<` instead of `<=`, so query i cannot attend the key at its own "
          "position i + n_k - n_q",
          causal_strict),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes the tril offset as n_q - n_k instead of n_k - n_q, shifting the diagonal the "
          "wrong way when n_q != n_k",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "np_tri_float",
          "builds the mask with np.tri, which returns floats 0.0/1.0, not the boolean array the "
          "contract fixes",
          causal_np_tri_float),
    Entry("causal_mask", "wrong", "true_means_blocked",
          "returns the future positions (np.triu above the diagonal) as True, i.e. True = "
          "blocked, the opposite of the course convention True = may attend",
          causal_true_means_blocked),
    Entry("causal_mask", "wrong", "queries_from_n_k",
          "builds the query positions from np.arange(n_k) instead of np.arange(n_q), so the mask "
          "has n_k rows",
          causal_queries_from_n_k),
    Entry("causal_mask", "right", "row_loops", None, causal_loops),
    Entry("causal_mask", "right", "not_triu", None, causal_not_triu),

    Entry("padding_mask", "wrong", "less_equal",
          "compares j <= lengths[b] instead of j < lengths[b], so one padding position too many "
          "is allowed",
          padding_le),
    Entry("padding_mask", "wrong", "no_singleton_axes",
          "returns the (B, n) comparison without the two singleton axes, so the mask is (B, n) "
          "instead of (B, 1, 1, n)",
          padding_2d),
    Entry("padding_mask", "wrong", "query_axis",
          "inserts the singleton axes in the wrong places, (B, 1, n, 1), which masks query "
          "positions instead of key positions",
          padding_query_axis),
    Entry("padding_mask", "wrong", "left_padding",
          "keeps the last lengths[b] positions (padding on the left) instead of the first "
          "lengths[b] positions",
          padding_left_aligned),
    Entry("padding_mask", "wrong", "int_dtype",
          "builds the mask with np.where(..., 1, 0), an integer array, not the boolean mask the "
          "contract fixes",
          padding_int_dtype),
    Entry("padding_mask", "wrong", "loop_writes_all_rows",
          "in the loop writes mask[:, 0, 0, :length] instead of mask[b, 0, 0, :length], so every "
          "sequence gets the longest length seen",
          padding_loop_all_rows),
    Entry("padding_mask", "right", "python_loops", None, padding_loop),
    Entry("padding_mask", "right", "cumsum_remaining", None, padding_cumsum),

    Entry("masked_attention", "wrong", "big_negative",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights instead of zeros",
          masked_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "puts -inf where the mask is True, treating True as 'blocked' instead of 'may attend'",
          masked_inverted),
    Entry("masked_attention", "wrong", "multiply_by_mask",
          "multiplies the scores by the mask, which sets masked scores to 0 (still attended) "
          "instead of -inf",
          masked_multiply),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "zeroes masked weights after the softmax without renormalising, so rows with a masked "
          "key no longer sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "zero_sum_nan",
          "guards the row maximum of a fully masked row but still divides by its zero sum, "
          "giving NaN instead of a zero row",
          masked_zero_sum_nan),
    Entry("masked_attention", "wrong", "scale_by_n_k",
          "takes d_k from k.shape[-2] (the number of keys) instead of the last axis, so the "
          "scores are scaled by 1/sqrt(N_k)",
          masked_scale_n_k),
    Entry("masked_attention", "right", "logsumexp_nan_to_num", None, masked_logsumexp),
    Entry("masked_attention", "right", "allowed_keys_loop", None, masked_rows_loop),
]
