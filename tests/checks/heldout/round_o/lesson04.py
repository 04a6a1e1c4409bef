"""Held-out catalogue, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np
import scipy.special

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
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_float_tril(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_default_not_handled(n_q, n_k=None):
    rows = np.arange(n_q)[:, None]
    cols = np.arange(n_k)[None, :]
    return cols <= rows + (n_k - n_q)


def causal_transposed(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    key_pos = np.arange(n_k)[:, None]
    query_pos = np.arange(n_q)[None, :] + (n_k - n_q)
    return key_pos <= query_pos


def causal_comprehension(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    return np.array([[j - i <= shift for j in range(n_k)] for i in range(n_q)],
                    dtype=bool).reshape(n_q, n_k)


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
    return np.arange(n)[None, :] < lengths[:, None]


def padding_query_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] < lengths[:, None]
    return keep[:, None, :, None]


def padding_int_mask(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.where(np.arange(n)[None, :] < lengths[:, None], 1, 0)
    return keep.reshape(len(lengths), 1, 1, n)


def padding_no_new_axis(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n) < lengths
    return keep.reshape(len(lengths), 1, 1, n)


def padding_true_is_pad(lengths, n):
    lengths = np.asarray(lengths)
    is_pad = np.arange(n)[None, :] >= lengths[:, None]
    return is_pad[:, None, None, :]


def padding_loop_fill(lengths, n):
    lens = [int(L) for L in lengths]
    mask = np.zeros((len(lens), 1, 1, n), dtype=bool)
    for b, L in enumerate(lens):
        mask[b, 0, 0, :L] = True
    return mask


def padding_tri_rows(lengths, n):
    table = np.tri(n + 1, n, k=-1, dtype=bool)  # row L: True for j < L
    return table[np.asarray(lengths)][:, None, None, :]


# ============================================================================ masked_attention
def _scores(q, k, d):
    return (q @ np.swapaxes(k, -1, -2)) / math.sqrt(d)


def _safe_softmax(s):
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    tot = e.sum(axis=-1, keepdims=True)
    return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)


def masked_scale_nk(q, k, v, mask):
    s = _scores(q, k, k.shape[-2])
    w = _safe_softmax(np.where(mask, s, -np.inf))
    return w @ v, w


def masked_inverted(q, k, v, mask):
    s = _scores(q, k, q.shape[-1])
    w = _safe_softmax(np.where(mask, -np.inf, s))
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    s = _scores(q, k, q.shape[-1])
    w = _safe_softmax(s) * mask
    return w @ v, w


def masked_multiply_scores(q, k, v, mask):
    s = _scores(q, k, q.shape[-1]) * mask
    w = _safe_softmax(s)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    s = _scores(q, k, q.shape[-1])
    s = np.where(mask, s, -1e9)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_out_uses_k(q, k, v, mask):
    s = _scores(q, k, q.shape[-1])
    w = _safe_softmax(np.where(mask, s, -np.inf))
    return w @ k, w


def masked_row_loop(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               np.shape(mask)[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    qb = np.broadcast_to(q, lead + q.shape[-2:]).reshape(-1, n_q, q.shape[-1])
    kb = np.broadcast_to(k, lead + k.shape[-2:]).reshape(-1, n_k, k.shape[-1])
    vb = np.broadcast_to(v, lead + v.shape[-2:]).reshape(-1, n_k, v.shape[-1])
    mb = np.broadcast_to(mask, lead + (n_q, n_k)).reshape(-1, n_q, n_k)
    out = np.zeros((qb.shape[0], n_q, v.shape[-1]))
    wts = np.zeros((qb.shape[0], n_q, n_k))
    for b in range(qb.shape[0]):
        for i in range(n_q):
            keep = np.flatnonzero(mb[b, i])
            if keep.size == 0:
                continue
            sc = kb[b, keep] @ qb[b, i] / math.sqrt(q.shape[-1])
            p = np.exp(sc - sc.max())
            p /= p.sum()
            wts[b, i, keep] = p
            out[b, i] = p @ vb[b, keep]
    return out.reshape(lead + (n_q, v.shape[-1])), wts.reshape(lead + (n_q, n_k))


def masked_logsumexp(q, k, v, mask):
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        lse = scipy.special.logsumexp(s, axis=-1, keepdims=True)
        w = np.exp(s - lse)
    w = np.where(np.isfinite(lse), w, 0.0)
    return np.einsum("...ij,...jd->...id", w, v), w


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "uses np.tril with no offset, aligning the mask top-left, so when n_q != n_k query i "
          "does not sit at position i + n_k - n_q", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "the mask keeps the diagonal out: `<` where `<=` belongs, so no query may attend its "
          "own position", causal_strict_less),
    Entry("causal_mask", "wrong", "offset_sign_flipped",
          "passes k = n_q - n_k to np.tril instead of n_k - n_q (offset sign reversed)",
          causal_offset_sign),
    Entry("causal_mask", "wrong", "float_not_bool",
          "returns np.tril(np.ones(...)), a float 0/1 array, instead of a boolean mask",
          causal_float_tril),
    Entry("causal_mask", "wrong", "default_n_k_ignored",
          "never replaces n_k=None by n_q, so causal_mask(n) raises TypeError on the None "
          "(n_k - n_q)",
          causal_default_not_handled),
    Entry("causal_mask", "wrong", "transposed_shape",
          "puts the keys on the rows and the queries on the columns, returning the "
          "(n_k, n_q) transpose", causal_transposed),
    Entry("causal_mask", "right", "list_comprehension", None, causal_comprehension),
    Entry("causal_mask", "right", "not_triu_future", None, causal_not_triu),

    Entry("padding_mask", "wrong", "less_equal",
          "uses j <= lengths[b] instead of j < lengths[b], one extra key allowed per sequence",
          padding_le),
    Entry("padding_mask", "wrong", "missing_singleton_axes",
          "returns the (B, n) mask without the two length-1 axes of (B, 1, 1, n)", padding_2d),
    Entry("padding_mask", "wrong", "masks_query_axis",
          "puts the positions on the query axis, (B, 1, n, 1), instead of the key axis "
          "(B, 1, 1, n)", padding_query_axis),
    Entry("padding_mask", "wrong", "int_mask",
          "builds the mask with np.where(..., 1, 0), an integer array, instead of booleans",
          padding_int_mask),
    Entry("padding_mask", "wrong", "no_batch_axis_added",
          "compares np.arange(n) with lengths without adding an axis, so (n,) and (B,) do not "
          "broadcast to (B, n) (raises, or compares the wrong elements)", padding_no_new_axis),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "marks the padded positions True (the key_padding_mask convention) instead of True = "
          "may attend", padding_true_is_pad),
    Entry("padding_mask", "right", "loop_fill", None, padding_loop_fill),
    Entry("padding_mask", "right", "np_tri_row_lookup", None, padding_tri_rows),

    Entry("masked_attention", "wrong", "scale_sqrt_n_k",
          "scales the scores by 1/sqrt(N_k) (k.shape[-2]) instead of 1/sqrt(d_k) "
          "(k.shape[-1])", masked_scale_nk),
    Entry("masked_attention", "wrong", "mask_inverted",
          "puts -inf where the mask is True, treating True as 'masked out' instead of 'may "
          "attend'", masked_inverted),
    Entry("masked_attention", "wrong", "mask_after_softmax",
          "zeroes the masked weights after the softmax without renormalising, so the allowed "
          "weights no longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "scores_times_mask",
          "multiplies the scores by the mask, so masked scores become 0 (still weighted by "
          "exp(0)) instead of -inf", masked_multiply_scores),
    Entry("masked_attention", "wrong", "fill_minus_1e9",
          "fills masked scores with -1e9 instead of -inf, so a fully masked row gets uniform "
          "weights instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "output_from_keys",
          "computes the output as weights @ k instead of weights @ v", masked_out_uses_k),
    Entry("masked_attention", "right", "row_loop_allowed_keys", None, masked_row_loop),
    Entry("masked_attention", "right", "einsum_logsumexp", None, masked_logsumexp),
]
