"""Held-out catalogue, lesson 04 (masks): causal_mask, padding_mask, masked_attention.

Each function is one learner's answer; wrong ones carry exactly one slip.
"""

import math

import numpy as np
import torch

from entry import Entry


# ============================================================================ causal_mask
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + (n_k - n_q)


def causal_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_swapped_aranges(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q
    return np.arange(n_k)[:, None] <= np.arange(n_q)[None, :] + offset


def causal_triu(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_right_loops(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        pos = i + n_k - n_q
        for j in range(n_k):
            if j <= pos:
                mask[i, j] = True
    return mask


def causal_right_not_triu(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    future = np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q + 1)
    return ~future


# ============================================================================ padding_mask
def padding_le(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_axes_in_front(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[None, None]


def padding_transposed_reshape(lengths, n):
    lens = np.asarray(lengths)
    keep = np.arange(n)[:, None] < lens[None, :]  # (n, B)
    return keep.reshape(len(lens), 1, 1, n)


def padding_inverted(lengths, n):
    lengths = np.asarray(lengths)
    padded = np.arange(n) >= lengths[:, None]
    return padded[:, None, None, :]


def padding_float_buffer(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n))
    for b in range(B):
        mask[b, 0, 0, :lengths[b]] = 1
    return mask


def padding_width_from_lengths(lengths, n):
    lengths = np.asarray(lengths)
    width = int(lengths.max())
    keep = np.arange(width)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def padding_right_cumsum(lengths, n):
    lengths = np.asarray(lengths)
    starts = np.eye(n + 1, dtype=int)[lengths]  # one-hot at the first padded position
    return (np.cumsum(starts, axis=1)[:, :n] == 0).reshape(len(lengths), 1, 1, n)


def padding_right_list(lengths, n):
    rows = [[[[j < int(length) for j in range(n)]]] for length in lengths]
    return np.array(rows, dtype=bool)


# ============================================================================ masked_attention
def masked_nan_rows(q, k, v, mask):
    d_k = q.shape[-1]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_inverted(q, k, v, mask):
    d = q.shape[-1]
    s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d)
    s = np.where(mask, -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return np.einsum("...qk,...kd->...qd", w, v), w


def masked_after_softmax(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    w = w * mask
    return w @ v, w


def masked_bool_index(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores[~np.asarray(mask)] = -np.inf
    m = scores.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(scores - m)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return weights @ v, weights


def masked_scale_dv(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(v.shape[-1])
    s = np.where(mask, s, -np.inf)
    row_max = np.max(s, axis=-1, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0.0, row_max)
    e = np.exp(s - row_max)
    z = e.sum(axis=-1, keepdims=True)
    w = e / np.where(z == 0, 1.0, z)
    return w @ v, w


def masked_right_torch(q, k, v, mask):
    qt, kt, vt = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    allowed = torch.as_tensor(np.asarray(mask, dtype=bool))
    scores = qt @ kt.transpose(-1, -2) / math.sqrt(qt.shape[-1])
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return (weights @ vt).numpy(), weights.numpy()


def masked_right_row_loops(q, k, v, mask):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, d_k = q.shape[-2:]
    n_k, d_v = v.shape[-2:]
    qb = np.broadcast_to(q, lead + (n_q, d_k)).reshape(-1, n_q, d_k)
    kb = np.broadcast_to(k, lead + (n_k, d_k)).reshape(-1, n_k, d_k)
    vb = np.broadcast_to(v, lead + (n_k, d_v)).reshape(-1, n_k, d_v)
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, d_v))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            keys = np.flatnonzero(mb[b, i])
            if keys.size == 0:
                continue
            s = kb[b, keys] @ qb[b, i] / math.sqrt(d_k)
            e = np.exp(s - s.max())
            wts[b, i, keys] = e / e.sum()
            out[b, i] = wts[b, i] @ vb[b]
    return out.reshape(lead + (n_q, d_v)), wts.reshape(lead + (n_q, n_k))


ENTRIES = [
    Entry("causal_mask", "wrong", "top-left-aligned",
          "it uses np.tril without the offset n_k - n_q, so the mask is aligned top-left: "
          "with n_q != n_k query i may only attend keys j <= i",
          causal_top_left),
    Entry("causal_mask", "wrong", "strict-less",
          "the mask keeps the diagonal out: `<` where `<=` belongs, so no query may attend "
          "its own position",
          causal_strict_less),
    Entry("causal_mask", "wrong", "offset-sign",
          "the tril offset has the wrong sign (n_q - n_k instead of n_k - n_q), so with a "
          "longer key axis the queries see fewer keys instead of the whole cached prefix",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float-mask",
          "np.tril of np.ones returns a float 0/1 array; it is never converted to bool, so "
          "the mask has the wrong dtype",
          causal_float_mask),
    Entry("causal_mask", "wrong", "aranges-swapped",
          "the key positions are put on the rows and the query positions on the columns, so "
          "the mask comes out as (n_k, n_q), transposed",
          causal_swapped_aranges),
    Entry("causal_mask", "wrong", "triu-for-tril",
          "it calls np.triu where np.tril belongs, so each query is allowed the future keys "
          "from its own position onwards instead of the past ones",
          causal_triu),
    Entry("causal_mask", "right", "double-loop", None, causal_right_loops),
    Entry("causal_mask", "right", "not-strict-future", None, causal_right_not_triu),

    Entry("padding_mask", "wrong", "less-or-equal",
          "`<=` where `<` belongs: position lengths[b] (the first padding slot) is also "
          "allowed",
          padding_le),
    Entry("padding_mask", "wrong", "new-axes-in-front",
          "the two new axes are added in front, giving (1, 1, B, n) instead of (B, 1, 1, n)",
          padding_axes_in_front),
    Entry("padding_mask", "wrong", "transposed-then-reshaped",
          "the comparison is built as (n, B) and then reshaped to (B, 1, 1, n), which "
          "reinterprets the memory instead of transposing, so rows get other sequences' bits",
          padding_transposed_reshape),
    Entry("padding_mask", "wrong", "true-marks-padding",
          "the convention is inverted: True marks the padded positions (j >= lengths[b]) "
          "although True must mean 'may attend'",
          padding_inverted),
    Entry("padding_mask", "wrong", "float-buffer",
          "the mask is filled into np.zeros, a float array of 0/1, and never made boolean",
          padding_float_buffer),
    Entry("padding_mask", "wrong", "width-from-max-length",
          "the key axis is sized by lengths.max() instead of n, so the mask is too short "
          "whenever no sequence fills all n positions",
          padding_width_from_lengths),
    Entry("padding_mask", "right", "one-hot-cumsum", None, padding_right_cumsum),
    Entry("padding_mask", "right", "nested-lists", None, padding_right_list),

    Entry("masked_attention", "wrong", "nan-on-empty-rows",
          "a row with no allowed key is all -inf, so its max is -inf and -inf - (-inf) gives "
          "NaN weights instead of a row of zeros",
          masked_nan_rows),
    Entry("masked_attention", "wrong", "minus-1e9-fill",
          "masked scores are set to -1e9 instead of -inf, so a row with no allowed key gets "
          "uniform weights over the masked keys instead of zeros",
          masked_big_negative),
    Entry("masked_attention", "wrong", "inverted-mask",
          "the mask convention is inverted: np.where(mask, -inf, scores) removes the allowed "
          "keys and keeps the masked ones",
          masked_inverted),
    Entry("masked_attention", "wrong", "mask-after-softmax",
          "the mask is multiplied into the weights after the softmax, so the kept weights are "
          "not renormalised and the rows no longer sum to 1",
          masked_after_softmax),
    Entry("masked_attention", "wrong", "boolean-indexing",
          "scores[~mask] = -inf needs a mask of the scores' full shape: boolean indexing does "
          "not broadcast, so a mask like (B, 1, 1, N_k) or (N_q, N_k) against batched scores "
          "raises IndexError",
          masked_bool_index),
    Entry("masked_attention", "wrong", "scale-by-d_v",
          "the scores are scaled by 1/sqrt(d_v) (v's last axis) instead of 1/sqrt(d_k)",
          masked_scale_dv),
    Entry("masked_attention", "right", "torch-nan-to-num", None, masked_right_torch),
    Entry("masked_attention", "right", "per-row-allowed-keys", None, masked_right_row_loops),
]
