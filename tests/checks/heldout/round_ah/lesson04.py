"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention (numpy)."""

import math

import numpy as np

from entry import Entry


# ----------------------------------------------------------------------------- causal, wrong
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_loop_exclusive_end(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    mask = np.zeros((n_q, n_k), dtype=bool)
    shift = n_k - n_q
    for i in range(n_q):
        mask[i, :max(0, i + shift)] = True
    return mask


def causal_float_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_abs_offset(n_q, n_k=None):
    n_k = n_k if n_k is not None else n_q
    offset = abs(n_k - n_q)
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=offset)


def causal_keys_from_n_q(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    queries = np.arange(n_q)[:, None] + (n_k - n_q)
    keys = np.arange(n_q)[None, :]
    return keys <= queries


# ----------------------------------------------------------------------------- causal, right
def causal_np_tri(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def causal_complement_of_triu(n_q, n_k=None):
    cols = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, cols), dtype=bool), k=cols - n_q + 1)
    return ~future


# ----------------------------------------------------------------------------- padding, wrong
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_flat(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n)[None, :] < lengths[:, None]


def padding_axes_misplaced(lengths, n):
    lens = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lens[:, None]
    return keep[:, None, :, None]


def padding_true_means_pad(lengths, n):
    lengths = np.asarray(lengths).reshape(-1, 1, 1, 1)
    return np.arange(n) >= lengths


def padding_float_mask(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b, L in enumerate(lengths):
        mask[b, 0, 0, :L] = 1.0
    return mask


def padding_width_from_max(lengths, n):
    lengths = np.asarray(lengths)
    positions = np.arange(lengths.max())
    keep = positions[None, :] < lengths[:, None]
    return keep[:, None, None, :]


# ----------------------------------------------------------------------------- padding, right
def padding_bool_loop(lengths, n):
    out = np.zeros((len(lengths), 1, 1, n), dtype=bool)
    for b in range(len(lengths)):
        for j in range(int(lengths[b])):
            out[b, 0, 0, j] = True
    return out


def padding_greater_outer(lengths, n):
    keep = np.greater.outer(np.asarray(lengths), np.arange(n))  # keep[b, j] = lengths[b] > j
    return keep[:, None, None, :]


# ----------------------------------------------------------------------------- masked, wrong
def masked_nan_rows(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    d = q.shape[-1]
    s = (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d)
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_after_softmax(q, k, v, mask):
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    p = p * mask
    return np.matmul(p, v), p


def masked_scores_times_mask(q, k, v, mask):
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    logits = logits * mask
    m = logits.max(axis=-1, keepdims=True)
    e = np.exp(logits - m)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_scale_by_n_k(q, k, v, mask):
    n_k = k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(n_k)
    s = np.where(mask, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return w @ v, w


def masked_guard_after_output(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
    out = w @ v
    w = np.nan_to_num(w, nan=0.0)
    return out, w


# ----------------------------------------------------------------------------- masked, right
def masked_multiply_exps(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    allowed = np.broadcast_to(mask, s.shape)
    top = np.max(np.where(allowed, s, -np.inf), axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(np.where(allowed, s - top, -np.inf))
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.maximum(z, np.finfo(np.float64).tiny) * (z > 0)
    return w @ v, w


def masked_row_loop(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    n_q, n_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], np.shape(mask)[:-2])
    qb = np.broadcast_to(q, lead + q.shape[-2:])
    kb = np.broadcast_to(k, lead + k.shape[-2:])
    vb = np.broadcast_to(v, lead + v.shape[-2:])
    mb = np.broadcast_to(mask, lead + (n_q, n_k))
    out = np.zeros(lead + (n_q, v.shape[-1]))
    weights = np.zeros(lead + (n_q, n_k))
    for idx in np.ndindex(*lead):
        for i in range(n_q):
            keep = np.flatnonzero(mb[idx][i])
            if keep.size == 0:
                continue
            sc = kb[idx][keep] @ qb[idx][i] / math.sqrt(q.shape[-1])
            ex = np.exp(sc - sc.max())
            weights[idx][i, keep] = ex / ex.sum()
            out[idx][i] = weights[idx][i, keep] @ vb[idx][keep]
    return out, weights


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "aligns the mask top-left with np.tril(ones) and no offset, so when n_q != n_k "
          "query i is not placed at position i + n_k - n_q", causal_top_left),
    Entry("causal_mask", "wrong", "loop_end_excludes_diagonal",
          "fills each row with [:i + n_k - n_q], an exclusive end, so the key at the "
          "query's own position is masked out (`<` where `<=` belongs)",
          causal_loop_exclusive_end),
    Entry("causal_mask", "wrong", "float_not_bool",
          "returns np.tril of a float array of ones: a 0./1. float mask instead of a "
          "boolean one", causal_float_mask),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "uses np.triu, which keeps the upper triangle (the future keys), where np.tril "
          "belongs", causal_triu),
    Entry("causal_mask", "wrong", "absolute_offset",
          "takes abs(n_k - n_q) as the diagonal offset, so with more queries than keys the "
          "shift goes the wrong way and early queries see keys they should not",
          causal_abs_offset),
    Entry("causal_mask", "wrong", "key_positions_from_n_q",
          "builds the key positions with np.arange(n_q) instead of np.arange(n_k), so the "
          "mask is (n_q, n_q)", causal_keys_from_n_q),
    Entry("causal_mask", "right", "np_tri_offset", None, causal_np_tri),
    Entry("causal_mask", "right", "complement_of_future", None, causal_complement_of_triu),
    Entry("padding_mask", "wrong", "less_equal",
          "uses j <= lengths[b], so one padding position past the end is allowed",
          padding_le),
    Entry("padding_mask", "wrong", "no_singleton_axes",
          "returns the (B, n) comparison without the two singleton axes, not (B, 1, 1, n)",
          padding_flat),
    Entry("padding_mask", "wrong", "singleton_axes_misplaced",
          "inserts the singleton axes as (B, 1, n, 1), putting the key positions on the "
          "query axis", padding_axes_misplaced),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "uses the key_padding_mask convention, True on padded positions (j >= length), "
          "instead of True = may attend", padding_true_means_pad),
    Entry("padding_mask", "wrong", "float_buffer",
          "fills a float np.zeros buffer with 1.0, returning a float mask instead of a "
          "boolean one", padding_float_mask),
    Entry("padding_mask", "wrong", "width_from_max_length",
          "sizes the key axis by lengths.max() instead of n, so the mask is too narrow when "
          "no sequence fills all n positions", padding_width_from_max),
    Entry("padding_mask", "right", "bool_loops", None, padding_bool_loop),
    Entry("padding_mask", "right", "np_greater_outer", None, padding_greater_outer),
    Entry("masked_attention", "wrong", "fully_masked_rows_nan",
          "fills masked scores with -inf but never guards rows with no allowed key, so "
          "those rows come out NaN (-inf - -inf) instead of zeros",
          masked_nan_rows),
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a row with no allowed key gets "
          "uniform weights over all keys instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "applies the mask by multiplying the softmax weights afterwards, without "
          "renormalising, so allowed weights no longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "scores_multiplied_by_mask",
          "multiplies the scores by the mask, which sets masked scores to 0 (weight "
          "exp(0 - max)) instead of -inf", masked_scores_times_mask),
    Entry("masked_attention", "wrong", "scale_by_n_k",
          "scales the scores by 1/sqrt(k.shape[-2]), the number of keys, instead of "
          "1/sqrt(d_k)", masked_scale_by_n_k),
    Entry("masked_attention", "wrong", "guard_after_output",
          "zeroes the NaN weights of fully masked rows only after computing out = w @ v, so "
          "those output rows stay NaN", masked_guard_after_output),
    Entry("masked_attention", "right", "exps_times_mask", None, masked_multiply_exps),
    Entry("masked_attention", "right", "row_by_row_loop", None, masked_row_loop),
]
