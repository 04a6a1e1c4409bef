"""Held-out catalogue, lesson 04 (masks, numpy): causal_mask, padding_mask, masked_attention."""

import math

import numpy as np

from entry import Entry


# ============================================================================ causal_mask
# ---- wrong ----------------------------------------------------------------------------------
def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    rows = np.arange(n_q)[:, None] + (n_k - n_q)
    cols = np.arange(n_k)[None, :]
    return cols < rows


def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_float_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_n_k_overwritten(n_q, n_k=None):
    n_k = n_q if n_k is None else n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_triu_blocked(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)


def causal_keys_on_rows(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    query_pos = np.arange(n_q)[None, :] + (n_k - n_q)
    key_pos = np.arange(n_k)[:, None]
    return key_pos <= query_pos


# ---- right ----------------------------------------------------------------------------------
def causal_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    out = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        last = i + n_k - n_q  # absolute position of query i
        for j in range(n_k):
            out[i, j] = j <= last
    return out


def causal_np_tri(n_q, n_k=None):
    width = n_q if n_k is None else n_k
    return np.tri(n_q, width, k=width - n_q, dtype=bool)


# ============================================================================ padding_mask
# ---- wrong ----------------------------------------------------------------------------------
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_float(lengths, n):
    lengths = np.asarray(lengths)
    keep = (np.arange(n) < lengths[:, None]).astype(np.float32)
    return keep.reshape(len(lengths), 1, 1, n)


def padding_true_on_pads(lengths, n):
    lengths = np.asarray(lengths)
    pads = np.arange(n)[None, :] >= lengths[:, None]
    return pads[:, None, None, :]


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    pos = np.arange(lengths.max())
    return (pos[None, :] < lengths[:, None])[:, None, None, :]


def padding_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_left_aligned(lengths, n):
    lengths = np.asarray(lengths)
    mask = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b, length in enumerate(lengths):
        mask[b, 0, 0, -length:] = True
    return mask


# ---- right ----------------------------------------------------------------------------------
def padding_loops(lengths, n):
    lens = [int(v) for v in np.asarray(lengths).ravel()]
    if any(v < 0 or v > n for v in lens):
        raise ValueError(f"lengths must lie in [0, n={n}], got lengths={lens}")
    mask = np.zeros((len(lens), 1, 1, n), dtype=bool)
    for b, length in enumerate(lens):
        for j in range(length):
            mask[b, 0, 0, j] = True
    return mask


def padding_broadcast_4d(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n).reshape(1, 1, 1, n) < lengths.reshape(-1, 1, 1, 1)


# ============================================================================ masked_attention
def _softmax_rows(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


# ---- wrong ----------------------------------------------------------------------------------
def masked_big_negative(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -1e9)
    w = _softmax_rows(s)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = _softmax_rows(s) * mask
    return w @ v, w


def masked_out_before_guard(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        w = _softmax_rows(s)
        out = w @ v
    w = np.nan_to_num(w)
    return out, w


def masked_boolean_index(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores[~np.asarray(mask)] = -np.inf
    m = scores.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(scores - m)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_additive_product(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    bias = (~np.asarray(mask)) * -np.inf  # -inf where blocked, "0" elsewhere
    with np.errstate(invalid="ignore"):
        s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + bias
        m = s.max(axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m)
        tot = e.sum(axis=-1, keepdims=True)
        w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


# ---- right ----------------------------------------------------------------------------------
def masked_where_max(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    allowed = np.broadcast_to(np.asarray(mask, dtype=bool), s.shape)
    top = np.max(s, axis=-1, keepdims=True, where=allowed, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, s, top) - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    w = e / np.where(total > 0, total, 1.0)
    return w @ v, w


def masked_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2] if np.ndim(mask) > 2 else ())
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    mb = np.broadcast_to(np.asarray(mask, dtype=bool), lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, d_v))
    weights = np.zeros(lead + (n_q, n_k))
    root = math.sqrt(q.shape[-1])
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keys = [j for j in range(n_k) if mb[idx + (i, j)]]
            if not keys:
                continue
            sc = [float(qb[idx + (i,)] @ kb[idx + (j,)]) / root for j in keys]
            top = max(sc)
            ex = [math.exp(t - top) for t in sc]
            tot = math.fsum(ex)
            for j, e in zip(keys, ex):
                weights[idx + (i, j)] = e / tot
            out[idx + (i,)] = weights[idx + (i,)] @ vb[idx]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "strict_less_than",
          "The comparison is `<` where `<=` belongs, so every query is kept from its own "
          "position (the shifted diagonal is False).",
          causal_strict_less),
    Entry("causal_mask", "wrong", "top_left_aligned",
          "np.tril without the offset aligns the mask top-left (query i sees keys j <= i), "
          "wrong whenever n_q != n_k; the contract aligns it bottom-right (k = n_k - n_q).",
          causal_top_left),
    Entry("causal_mask", "wrong", "float_mask",
          "np.tril(np.ones(...)) is a float array of 1.0/0.0; the contract requires a "
          "boolean mask.",
          causal_float_mask),
    Entry("causal_mask", "wrong", "n_k_always_n_q",
          "The default line reads `n_q if n_k is None else n_q`, so a given n_k is thrown away "
          "and the mask is always square (n_q, n_q).",
          causal_n_k_overwritten),
    Entry("causal_mask", "wrong", "triu_of_blocked_keys",
          "np.triu(..., k=offset+1) marks the future keys, i.e. the positions to block; "
          "with True = may attend that is the mask inverted.",
          causal_triu_blocked),
    Entry("causal_mask", "wrong", "keys_on_rows",
          "The [:, None] / [None, :] are on the wrong aranges, so the mask has shape "
          "(n_k, n_q) with keys on the rows (wrong unless square).",
          causal_keys_on_rows),
    Entry("causal_mask", "right", "nested_loops", None, causal_loops),
    Entry("causal_mask", "right", "np_tri_offset", None, causal_np_tri),
    Entry("padding_mask", "wrong", "less_equal",
          "The test is j <= lengths[b] where j < lengths[b] belongs: one padding position too "
          "many is kept.",
          padding_le),
    Entry("padding_mask", "wrong", "float_mask",
          "It returns a float32 mask of 1.0/0.0 instead of the boolean mask the contract "
          "requires.",
          padding_float),
    Entry("padding_mask", "wrong", "true_on_padding",
          "It marks the padding positions (j >= lengths[b]) as True, the opposite of the "
          "True = may attend convention.",
          padding_true_on_pads),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "The key axis is np.arange(lengths.max()) instead of np.arange(n), so the mask is "
          "too narrow whenever no sequence fills all n positions.",
          padding_width_from_lengths),
    Entry("padding_mask", "wrong", "length_on_query_axis",
          "The new axes are put as (B, 1, n, 1), so the mask runs along the queries instead of "
          "the keys (shape (B, 1, n, 1), not (B, 1, 1, n)).",
          padding_query_axis),
    Entry("padding_mask", "wrong", "left_padding_slice",
          "It keeps the last lengths[b] positions (slice -length:), as for left padding, and "
          "a length of 0 gives -0: = the whole row True.",
          padding_left_aligned),
    Entry("padding_mask", "right", "python_loops", None, padding_loops),
    Entry("padding_mask", "right", "broadcast_in_4d", None, padding_broadcast_4d),
    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "Masked scores are set to -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform average of all keys instead of zeros.",
          masked_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "np.where(mask, -inf, scores) blocks the keys where mask is True, i.e. it reads the "
          "mask as True = masked out.",
          masked_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "The mask multiplies the weights after an unmasked softmax and the rows are not "
          "renormalised, so they no longer sum to 1.",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "out_before_nan_guard",
          "np.nan_to_num cleans the weights only after `out = w @ v` was computed, so fully "
          "masked rows give NaN in out.",
          masked_out_before_guard),
    Entry("masked_attention", "wrong", "boolean_index_assignment",
          "scores[~mask] = -inf needs a mask of the scores' full shape; with a broadcastable "
          "mask (e.g. a (B, 1, 1, N_k) padding mask) numpy raises an IndexError.",
          masked_boolean_index),
    Entry("masked_attention", "wrong", "additive_mask_zero_times_inf",
          "The additive mask is built as (~mask) * -inf, but 0 * -inf is NaN, so every "
          "allowed score becomes NaN instead of being left alone and the rows come out wrong "
          "(here all zeros, since the NaN totals fail the division guard).",
          masked_additive_product),
    Entry("masked_attention", "right", "max_with_where", None, masked_where_max),
    Entry("masked_attention", "right", "per_row_python_loop", None, masked_row_loop),
]
