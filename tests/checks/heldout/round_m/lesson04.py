"""Round m catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_float_ones(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_axes_swapped(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    keys = np.arange(n_k)[:, None]
    queries = np.arange(n_q)[None, :] + (n_k - n_q)
    return keys <= queries


def causal_clamped_offset(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    offset = max(n_k - n_q, 0)  # "an offset can't be negative"
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=offset)


def causal_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    rows = [[j <= i + (n_k - n_q) for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_float_fill(lengths, n):
    m = np.zeros((len(lengths), n))
    for b, length in enumerate(lengths):
        m[b, :length] = 1
    return m.reshape(len(lengths), 1, 1, n)


def padding_negative_slice(lengths, n):
    m = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        m[b, 0, 0, -length:] = True
    return m


def padding_width_from_max(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(lengths.max())
    keep = positions[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def padding_transposed_reshape(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[:, None] < lengths  # (n, B)
    return keep.reshape(len(lengths), 1, 1, n)


def padding_loops(lengths, n):
    b = len(lengths)
    m = np.zeros((b, 1, 1, n), dtype=bool)
    for i in range(b):
        for j in range(int(lengths[i])):
            m[i, 0, 0, j] = True
    return m


def padding_tri_rows(lengths, n):
    table = np.tri(n + 1, n, k=-1, dtype=bool)  # row L is True exactly at j < L
    return table[np.asarray(lengths)][:, None, None, :]


# ============================================================================ masked_attention
def _scores(q, k):
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def masked_fill_minus_1e9(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    s = _scores(q, k)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    w = w * mask  # drop the forbidden keys
    return w @ v, w


def masked_multiply_scores(q, k, v, mask):
    s = _scores(q, k) * mask
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    w = np.where(mask.any(axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


def masked_no_empty_row_guard(q, k, v, mask):
    s = np.where(mask, _scores(q, k), -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_out_from_unmasked(q, k, v, mask):
    raw = _scores(q, k)
    s = np.where(mask, raw, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    full = np.exp(raw - raw.max(axis=-1, keepdims=True))
    full = full / full.sum(axis=-1, keepdims=True)
    return full @ v, w


def masked_additive_inf_times_bool(q, k, v, mask):
    s = _scores(q, k) + (~mask) * -np.inf
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_log_mask(q, k, v, mask):
    with np.errstate(divide="ignore"):
        bias = np.log(np.asarray(mask, dtype=np.float64))  # 0 where allowed, -inf where not
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1]) + bias
    top = np.max(s, axis=-1, keepdims=True)
    safe_top = np.nan_to_num(top, neginf=0.0)
    e = np.exp(s - safe_top)
    tot = np.sum(e, axis=-1, keepdims=True)
    w = e / np.maximum(tot, np.finfo(np.float64).tiny) * (tot > 0)
    return np.einsum("...ij,...jd->...id", w, v), w


def masked_row_loops(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, d = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d))
    kb = np.broadcast_to(k, lead + (n_k, d))
    vb = np.broadcast_to(v, lead + (n_k, d_v))
    mb = np.broadcast_to(mask, lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keys = [j for j in range(n_k) if mb[idx + (i, j)]]
            if not keys:
                continue
            sc = [float(qb[idx + (i,)] @ kb[idx + (j,)]) / math.sqrt(d) for j in keys]
            top = max(sc)
            ex = [math.exp(x - top) for x in sc]
            total = math.fsum(ex)
            for j, e in zip(keys, ex):
                weights[idx + (i, j)] = e / total
                out[idx + (i,)] += (e / total) * vb[idx + (j,)]
    return out, weights


ENTRIES = [
    # causal_mask ----------------------------------------------------------------
    Entry("causal_mask", "wrong", "top_left_aligned",
          "It uses np.tril with no offset, aligning the mask top-left, so when n_k > n_q the "
          "queries cannot see the cached keys before them (only right when n_q == n_k).",
          causal_top_left),
    Entry("causal_mask", "wrong", "tril_offset_sign_flipped",
          "The np.tril offset is n_q - n_k instead of n_k - n_q, so the diagonal is shifted "
          "the wrong way whenever n_q != n_k.",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "strict_less_than",
          "It compares j < i + n_k - n_q instead of <=, so each query is not allowed to attend "
          "to its own position (and a single query with n_k == n_q sees nothing).",
          causal_strict_less),
    Entry("causal_mask", "wrong", "float_ones_not_bool",
          "np.ones defaults to float64, so the mask comes back as 0.0/1.0 floats instead of a "
          "boolean array.",
          causal_float_ones),
    Entry("causal_mask", "wrong", "key_and_query_axes_swapped",
          "The key positions are put on the rows and the query positions on the columns, so "
          "the result has shape (n_k, n_q) and is the transpose of the mask.",
          causal_axes_swapped),
    Entry("causal_mask", "wrong", "negative_offset_clamped",
          "It clamps the offset n_k - n_q at 0, so when n_q > n_k the first queries are "
          "wrongly allowed keys that lie in their future instead of seeing nothing.",
          causal_clamped_offset),
    Entry("causal_mask", "right", "nested_list_comparison", None, causal_loops),
    Entry("causal_mask", "right", "np_tri_with_offset", None, causal_np_tri),
    # padding_mask ---------------------------------------------------------------
    Entry("padding_mask", "wrong", "less_or_equal",
          "It compares j <= lengths[b] instead of j < lengths[b], so one padding position "
          "per sequence is marked as a real token.",
          padding_le),
    Entry("padding_mask", "wrong", "mask_on_query_axis",
          "It puts the key positions on axis 2 (shape (B, 1, n, 1)), so the mask removes "
          "query rows instead of key columns.",
          padding_query_axis),
    Entry("padding_mask", "wrong", "float_mask",
          "It fills a np.zeros array (float64) with 1s, so the mask is float instead of "
          "boolean.",
          padding_float_fill),
    Entry("padding_mask", "wrong", "negative_slice_left_padding",
          "It sets m[b, -length:] = True, which marks the last positions (left padding), and "
          "for length 0 the slice -0: selects the whole row.",
          padding_negative_slice),
    Entry("padding_mask", "wrong", "width_from_longest_length",
          "It sizes the mask by lengths.max() instead of n, so the last axis is too short "
          "whenever no sequence fills all n positions.",
          padding_width_from_max),
    Entry("padding_mask", "wrong", "transposed_then_reshaped",
          "It builds the comparison as (n, B) and then reshapes it to (B, 1, 1, n), which "
          "scrambles positions across sequences instead of transposing (only right for B=1).",
          padding_transposed_reshape),
    Entry("padding_mask", "right", "python_loops", None, padding_loops),
    Entry("padding_mask", "right", "rows_of_np_tri", None, padding_tri_rows),
    # masked_attention -----------------------------------------------------------
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "It fills masked scores with -1e9 instead of -inf and has no guard, so a fully "
          "masked row gets uniform weights (and a mean of the values) instead of zeros.",
          masked_fill_minus_1e9),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "It applies the mask by multiplying the softmax weights afterwards, so the "
          "remaining weights of a partly masked row no longer sum to 1.",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "It masks by multiplying the scores by the mask, which sets forbidden scores to 0 "
          "rather than -inf, so forbidden keys still receive weight exp(0 - max).",
          masked_multiply_scores),
    Entry("masked_attention", "wrong", "no_fully_masked_guard",
          "Masked scores are set to -inf but nothing handles a row with no allowed key, where "
          "-inf - (-inf) gives NaN weights and outputs instead of zeros.",
          masked_no_empty_row_guard),
    Entry("masked_attention", "wrong", "output_from_unmasked_weights",
          "The returned weights are masked correctly, but the output is computed from a "
          "second, unmasked softmax of the raw scores, so out ignores the mask.",
          masked_out_from_unmasked),
    Entry("masked_attention", "wrong", "additive_bool_times_inf",
          "It builds the additive mask as (~mask) * -inf, but False * -inf is 0 * -inf = NaN, "
          "so every allowed score becomes NaN and the empty-row guard then returns all-zero "
          "weights and outputs for every row.",
          masked_additive_inf_times_bool),
    Entry("masked_attention", "right", "log_of_mask_bias", None, masked_log_mask),
    Entry("masked_attention", "right", "python_row_loops", None, masked_row_loops),
]
