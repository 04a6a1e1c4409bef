"""Held-out learners' answers, lesson 04 (causal_mask, padding_mask, masked_attention)."""

import math

import numpy as np
import torch

from entry import Entry


# ----------------------------------------------------------------------------- causal_mask, wrong
def causal_top_left(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool))


def causal_strict_less(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    i = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return j < i + n_k - n_q


def causal_tril_offset_sign(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_q - n_k)


def causal_triu(n_q, n_k=None):
    n_k = n_k if n_k is not None else n_q
    return np.triu(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)


def causal_float(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.tril(np.ones((n_q, n_k)), k=n_k - n_q)


def causal_transposed(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    queries = np.arange(n_q)[None, :]
    keys = np.arange(n_k)[:, None]
    return keys <= queries + (n_k - n_q)


# ----------------------------------------------------------------------------- causal_mask, right
def causal_loops(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    shift = n_k - n_q
    rows = [[j <= i + shift for j in range(n_k)] for i in range(n_q)]
    return np.array(rows, dtype=bool).reshape(n_q, n_k)


def causal_torch_tril(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q).numpy()


# ----------------------------------------------------------------------------- padding_mask, wrong
def padding_leq(lengths, n):
    lengths = np.asarray(lengths)
    keep = np.arange(n)[None, :] <= lengths[:, None]
    return keep[:, None, None, :]


def padding_no_singletons(lengths, n):
    lengths = np.asarray(lengths)
    return np.arange(n) < lengths[:, None]


def padding_axes_misplaced(lengths, n):
    lens = np.asarray(lengths)
    m = np.arange(n)[None, :] < lens[:, None]
    return m[:, None, :, None]


def padding_inverted(lengths, n):
    lengths = np.asarray(lengths).reshape(-1, 1)
    is_pad = lengths <= np.arange(n).reshape(1, -1)
    return is_pad.reshape(-1, 1, 1, n)


def padding_int_dtype(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n), dtype=np.int64)
    for b in range(B):
        mask[b, 0, 0, :lengths[b]] = 1
    return mask


def padding_left_side(lengths, n):
    B = len(lengths)
    mask = np.zeros((B, 1, 1, n), dtype=bool)
    for b, L in enumerate(lengths):
        mask[b, 0, 0, -L:] = True
    return mask


# ----------------------------------------------------------------------------- padding_mask, right
def padding_less_outer(lengths, n):
    keep = np.greater.outer(np.asarray(lengths), np.arange(n))  # lengths[b] > j
    return keep[:, np.newaxis, np.newaxis, :]


def padding_torch(lengths, n):
    lens = torch.as_tensor(np.asarray(lengths, dtype=np.int64))
    pos = torch.arange(n)
    return (pos.view(1, 1, 1, n) < lens.view(-1, 1, 1, 1)).numpy()


# ----------------------------------------------------------------------------- masked_attention, wrong
def masked_nan_rows(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = np.where(mask, s, -np.inf)
    with np.errstate(invalid="ignore"):
        s = s - s.max(axis=-1, keepdims=True)
        e = np.exp(s)
        w = e / e.sum(axis=-1, keepdims=True)
    return w @ v, w


def masked_big_negative(q, k, v, mask):
    d = q.shape[-1]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)
    scores = np.where(mask, scores, -1e9)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def masked_inverted(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(mask, -np.inf, scores)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    ex = np.exp(scores - top)
    tot = ex.sum(axis=-1, keepdims=True)
    w = np.divide(ex, tot, out=np.zeros_like(ex), where=tot > 0)
    return w @ v, w


def masked_after_softmax(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * mask  # drop the masked keys
    return w @ v, w


def masked_fill_zero(q, k, v, mask):
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    scores = np.where(mask, scores, 0.0)
    scores = scores - scores.max(-1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(-1, keepdims=True)
    w = np.where(mask.any(axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


def masked_additive_bool(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = scores + mask
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - m)
    w = e / e.sum(axis=-1, keepdims=True)
    w = np.where(np.any(mask, axis=-1, keepdims=True), w, 0.0)
    return w @ v, w


# ----------------------------------------------------------------------------- masked_attention, right
def masked_row_loops(q, k, v, mask):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                np.shape(mask)[:-2])
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    full = np.broadcast_to(mask, shape + (n_q, n_k))
    qb = np.broadcast_to(q, shape + q.shape[-2:])
    kb = np.broadcast_to(k, shape + k.shape[-2:])
    vb = np.broadcast_to(v, shape + v.shape[-2:])
    out = np.zeros(shape + (n_q, d_v))
    weights = np.zeros(shape + (n_q, n_k))
    scale = 1.0 / math.sqrt(q.shape[-1])
    for idx in np.ndindex(*shape):
        for i in range(n_q):
            allowed = np.flatnonzero(full[idx + (i,)])
            if allowed.size == 0:
                continue
            s = kb[idx][allowed] @ qb[idx][i] * scale
            p = np.exp(s - s.max())
            p /= p.sum()
            weights[idx + (i,)][allowed] = p
            out[idx + (i,)] = p @ vb[idx][allowed]
    return out, weights


def masked_torch(q, k, v, mask):
    Q, K, V = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    M = torch.as_tensor(np.asarray(mask))
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    s = s.masked_fill(~M, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    return (w @ V).numpy(), w.numpy()


ENTRIES = [
    Entry("causal_mask", "wrong", "top_left_aligned",
          "it uses np.tril without an offset, aligning the mask top-left (j <= i) instead of "
          "bottom-right (j <= i + n_k - n_q), which is wrong whenever n_q != n_k", causal_top_left),
    Entry("causal_mask", "wrong", "strict_less",
          "the comparison is `<` where `<=` belongs, so each query cannot see its own position",
          causal_strict_less),
    Entry("causal_mask", "wrong", "tril_offset_sign",
          "np.tril's offset is given as n_q - n_k instead of n_k - n_q, so the diagonal moves "
          "the wrong way when n_q != n_k", causal_tril_offset_sign),
    Entry("causal_mask", "wrong", "triu_instead_of_tril",
          "np.triu keeps the upper triangle, so queries see the future keys instead of the past",
          causal_triu),
    Entry("causal_mask", "wrong", "float_mask",
          "np.tril(np.ones(...)) is a float array of 0.0/1.0, not the boolean mask the contract "
          "asks for", causal_float),
    Entry("causal_mask", "wrong", "transposed_shape",
          "queries are laid along the columns and keys along the rows, so the mask comes out "
          "transposed, (n_k, n_q) with row j listing queries instead of (n_q, n_k)", causal_transposed),
    Entry("causal_mask", "right", "python_loops", None, causal_loops),
    Entry("causal_mask", "right", "torch_tril", None, causal_torch_tril),
    Entry("padding_mask", "wrong", "leq",
          "it uses `<=` where `<` belongs, so position lengths[b] (the first padding position) "
          "is also allowed", padding_leq),
    Entry("padding_mask", "wrong", "no_singleton_axes",
          "it returns the (B, n) comparison without the two length-1 axes, so the mask does not "
          "have shape (B, 1, 1, n)", padding_no_singletons),
    Entry("padding_mask", "wrong", "singletons_in_wrong_place",
          "the new axes are inserted as (B, 1, n, 1), so the key axis sits where the queries go",
          padding_axes_misplaced),
    Entry("padding_mask", "wrong", "true_marks_padding",
          "it marks the padding positions True (the key_padding_mask convention), the opposite "
          "of True = may attend", padding_inverted),
    Entry("padding_mask", "wrong", "int_mask",
          "the mask is built as an int64 array of 0/1 instead of a boolean array",
          padding_int_dtype),
    Entry("padding_mask", "wrong", "negative_slice_left_padding",
          "it marks the last lengths[b] positions with mask[..., -L:], as if padding were on the "
          "left; that is wrong for right padding, and for L = 0 the slice -0: marks every "
          "position", padding_left_side),
    Entry("padding_mask", "right", "greater_outer", None, padding_less_outer),
    Entry("padding_mask", "right", "torch_broadcast", None, padding_torch),
    Entry("masked_attention", "wrong", "nan_on_empty_rows",
          "a fully masked row is all -inf, and the softmax gives 0/0 = NaN there instead of a "
          "row of zeros", masked_nan_rows),
    Entry("masked_attention", "wrong", "minus_1e9_fill",
          "masked scores are set to -1e9 instead of -inf, so a fully masked row becomes a "
          "uniform distribution over all keys instead of zeros", masked_big_negative),
    Entry("masked_attention", "wrong", "mask_inverted",
          "np.where(mask, -inf, scores) removes the allowed keys and keeps the masked ones "
          "(True means may attend)", masked_inverted),
    Entry("masked_attention", "wrong", "zeroed_after_softmax",
          "the masked weights are zeroed after the softmax without renormalising, so the "
          "remaining weights of a row no longer sum to 1", masked_after_softmax),
    Entry("masked_attention", "wrong", "fill_with_zero",
          "masked scores are set to 0 instead of -inf, so masked keys still get weight exp(0) "
          "relative to the others", masked_fill_zero),
    Entry("masked_attention", "wrong", "bool_mask_added",
          "the boolean mask is added to the scores as if it were an additive float mask, so "
          "allowed keys get +1 and masked keys are not removed", masked_additive_bool),
    Entry("masked_attention", "right", "row_loops_over_allowed_keys", None, masked_row_loops),
    Entry("masked_attention", "right", "torch_masked_fill_nan_to_num", None, masked_torch),
]
